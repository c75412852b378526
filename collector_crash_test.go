package billing_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/internal/dynamotest"
)

// crashEnv is a collector on fresh DynamoDB tables behind the fault
// injecting wrapper. The locker is in memory so that the k-th call is the
// k-th call of the collection itself, not of a heartbeat.
type crashEnv struct {
	w     *dynamotest.Wrapper
	repo  billing.Repository
	hist  billing.History
	pay   *billingtest.Provider
	clock *billingtest.Clock
	c     *billing.Collector
	users []string
}

func newCrashEnv(t *testing.T, users int) *crashEnv {
	t.Helper()
	repo, hist := dynamoStores(t, billingtest.StoreOptions{PageSize: 2})
	e := &crashEnv{clock: billingtest.NewClock(jan31.Add(time.Hour))}
	e.w = wrapperOf(t, repo)
	e.repo, e.hist = repo, hist
	e.pay = billingtest.NewProvider(billingtest.ProviderOptions{Clock: e.clock})
	seq := 0
	c, err := billing.NewCollector(billing.Config{
		Repository: repo, History: hist, Locker: billingtest.NewLocker(e.clock, time.Minute), Provider: e.pay,
		Clock: e.clock, Concurrency: 1, PagesPerInvocation: 100,
		NewID: func() string { seq++; return fmt.Sprintf("next-%d", seq) },
	})
	if err != nil {
		t.Fatal(err)
	}
	e.c = c
	for i := range users {
		u := fmt.Sprintf("crash-user-%d", i)
		e.users = append(e.users, u)
		s := billing.Subscription{UserID: u, SubscriptionID: u + "-jan", BillingDate: jan31, Amount: billing.MustParseAmount("9.99"),
			Status: billing.StatusScheduled, BillingPeriod: "01/2024", Term: billing.TermMonthly, AnchorDay: 31,
			CreatedDate: jan31.AddDate(0, -1, 0), LastRunDate: jan31.AddDate(0, -1, 0)}
		if err := repo.Add(context.Background(), &s); err != nil {
			t.Fatal(err)
		}
	}
	e.w.Reset()
	return e
}

// runUntilDone runs the scheduled run until it reports nothing left to do
// (a clean rerun after a crash), at most 5 times.
func (e *crashEnv) runUntilDone(t *testing.T) {
	t.Helper()
	for range 5 {
		e.clock.Advance(time.Minute)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		rep, err := e.c.Run(ctx, billing.RunRequest{Kind: billing.RunScheduled})
		cancel()
		if err == nil && rep.Attempted == 0 && len(rep.Failed) == 0 && rep.Next == "" {
			return
		}
	}
	t.Fatal("scheduled run did not settle after 5 reruns")
}

// check asserts the invariants after a crash and a clean rerun.
func (e *crashEnv) check(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for _, u := range e.users {
		recs, err := e.repo.ListByUser(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		// No period lost, none doubled: January collected, February open.
		if len(recs) != 2 || recs[0].Status != billing.StatusCompleted || recs[1].Status != billing.StatusScheduled ||
			recs[1].BillingPeriod != "02/2024" || recs[0].Amount != billing.MustParseAmount("9.99") {
			t.Fatalf("user %s records after rerun: %+v", u, recs)
		}
		billingtest.RequireHistoryMatchesPrimary(t, e.repo, e.hist, u)
	}
	billingtest.RequireNoDoubleCharge(t, e.pay)
	// Every call for a record reuses the key of its unfinished attempt:
	// the January records were only ever attempt 1.
	for _, call := range e.pay.Calls() {
		if want := billing.IdempotencyKey(call.Request.SubscriptionID, 1); call.Request.IdempotencyKey != want {
			t.Fatalf("call with key %s, want %s", call.Request.IdempotencyKey, want)
		}
	}
}

// wrapperOf digs the wrapper out of a repository made by dynamoStores.
func wrapperOf(t *testing.T, repo billing.Repository) *dynamotest.Wrapper {
	t.Helper()
	w, ok := billing.DynamoClientOf(repo).(*dynamotest.Wrapper)
	if !ok {
		t.Fatal("repository is not behind a dynamotest.Wrapper")
	}
	return w
}

// TestCollectorCrashAtEveryCall fails the k-th DynamoDB call of a
// scheduled run over three users, for every k of a clean run, both before
// the call reaches the server and after it was applied (a timeout on the
// way back); then reruns cleanly and checks that no period is lost, no one
// is charged twice, retries reuse the open attempt's key, and every record
// equals its newest history row.
func TestCollectorCrashAtEveryCall(t *testing.T) {
	t.Parallel()
	probe := newCrashEnv(t, 3)
	probe.runUntilDone(t)
	calls := probe.w.TotalCalls()
	probe.check(t)
	if calls < 10 {
		t.Fatalf("a clean run made only %d calls", calls)
	}
	for _, after := range []bool{false, true} {
		for k := 1; k <= calls; k++ {
			name := fmt.Sprintf("before-%d", k)
			if after {
				name = fmt.Sprintf("after-%d", k)
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				e := newCrashEnv(t, 3)
				if after {
					e.w.FailAfterInner(dynamotest.AnyOp, k, nil)
				} else {
					e.w.FailNth(dynamotest.AnyOp, k, nil)
				}
				e.runUntilDone(t)
				e.check(t)
			})
		}
	}
}

// TestCollectorProviderUnknownAtEveryAttempt makes the provider time out
// after charging on the n-th call, for every n, then reruns.
func TestCollectorProviderUnknownAtEveryAttempt(t *testing.T) {
	t.Parallel()
	for n := range 3 {
		t.Run(fmt.Sprintf("user-%d", n), func(t *testing.T) {
			t.Parallel()
			e := newCrashEnv(t, 3)
			e.pay.SetUser(e.users[n], billingtest.UnknownAfterCharge(billingtest.Succeeded(), nil), billingtest.Succeeded())
			e.runUntilDone(t)
			e.check(t)
			if got := len(e.pay.ChargesFor(e.users[n] + "-jan")); got != 1 {
				t.Fatalf("%d charges, want 1", got)
			}
		})
	}
}
