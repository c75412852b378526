package billing_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/preview"
	"github.com/dynabill/billing/internal/storetest"
	"github.com/dynabill/billing/memory"
)

// freeStores are the layouts of userStores and the legacy tables read
// through the sharded due index.
func freeStores() []userStore {
	return append(userStores(), userStore{"dynamodb-legacy-due", func(t *testing.T, _ billing.Clock) (billing.Repository, billing.History) {
		return storetest.DynamoStores(t, memory.Options{StatusIndexMode: dynamostore.StatusIndexDue, DueShards: 3})
	}, "u1"})
}

// freeEnv is a collector that allows free tiers, on one layout.
type freeEnv struct {
	c     *billing.Collector
	repo  billing.Repository
	hist  billing.History
	clock *billingtest.Clock
	pay   *billingtest.Provider
	user  string
}

func newFreeEnv(t *testing.T, st userStore, opts billingtest.ProviderOptions, mut ...func(*billing.Config)) *freeEnv {
	t.Helper()
	clock := billingtest.NewClock(feb3)
	repo, hist := st.open(t, clock)
	opts.Clock = clock
	e := &freeEnv{repo: repo, hist: hist, clock: clock, user: st.user, pay: billingtest.NewProvider(opts)}
	cfg := billing.Config{Repository: repo, History: hist, Locker: billingtest.NewLocker(clock, time.Minute),
		Provider: e.pay, Clock: clock, AllowFreeTiers: true,
		Prices: billing.PriceListMap{"Free:v1": 0, "Plus:v2": billing.MustParseAmount("9.99")}}
	for _, m := range mut {
		m(&cfg)
	}
	c, err := billing.NewCollector(cfg)
	require.NoError(t, err)
	e.c = c
	return e
}

func (e *freeEnv) records(t *testing.T) []billing.Period {
	t.Helper()
	recs, err := e.repo.ListByUser(t.Context(), e.user)
	require.NoError(t, err)
	return recs
}

// changes counts the user's history rows by the change they record.
func (e *freeEnv) changes(t *testing.T) map[billing.EventType]int {
	t.Helper()
	rows, err := e.hist.ListByUser(t.Context(), e.user)
	require.NoError(t, err)
	n := map[billing.EventType]int{}
	for _, r := range rows {
		n[r.Change]++
	}
	return n
}

// TestFreeTierCompletesWithoutProcessor: a free tier billed for three
// months on every layout, in memory and on the local DynamoDB server:
// each period is completed by the scheduled run itself (no provider call,
// no attempt, no key), with one history row of its own change, and the
// next period is opened, free too, on the anchor day.
func TestFreeTierCompletesWithoutProcessor(t *testing.T) {
	t.Parallel()
	for _, st := range freeStores() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			e := newFreeEnv(t, st, billingtest.ProviderOptions{})
			sub, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "free-1", UserID: e.user, Tier: "Free:v1"})
			require.NoError(t, err)
			require.Zero(t, sub.Subscription.Amount)
			for month := range 3 {
				e.clock.Set(sub.Subscription.BillingDate.AddDate(0, month, 0).Add(time.Hour))
				rep, err := e.c.Run(t.Context(), billing.RunRequest{Kind: billing.RunScheduled})
				require.NoError(t, err)
				assert.Empty(t, rep.Failed, "month %d: %+v", month, rep)
				assert.Equal(t, 1, rep.Free, "month %d: %+v", month, rep)
				assert.Zero(t, rep.Attempted, "month %d: %+v", month, rep)
			}
			assert.Zero(t, e.pay.CallCount(), "no zero presented to the processor")
			recs := e.records(t)
			require.Len(t, recs, 4)
			var completed int
			for _, r := range recs {
				assert.Zero(t, r.Amount)
				assert.Zero(t, r.LastAttempt, "no attempt recorded: %+v", r)
				assert.Zero(t, r.Attempt)
				if r.Status == billing.StatusCompleted {
					completed++
					assert.False(t, r.CompletionDate.IsZero())
				}
			}
			assert.Equal(t, 3, completed, "records: %+v", recs)
			last := recs[0]
			if recs[len(recs)-1].BillingDate.After(last.BillingDate) {
				last = recs[len(recs)-1]
			}
			assert.Equal(t, billing.StatusScheduled, last.Status)
			assert.Equal(t, sub.Subscription.BillingDate.AddDate(0, 3, 0), last.BillingDate)
			ch := e.changes(t)
			assert.Equal(t, 3, ch[billing.EventFreePeriodCompleted], "history: %v", ch)
			assert.Equal(t, 3, ch[billing.EventPeriodOpened], "history: %v", ch)

			// A second run finds nothing to do.
			rep, err := e.c.Run(t.Context(), billing.RunRequest{Kind: billing.RunScheduled})
			require.NoError(t, err)
			assert.Zero(t, rep.Free+rep.Attempted, "%+v", rep)
		})
	}
}

// TestFreePeriodOnEveryCollectingPath: a zero record is completed without
// the processor whichever path finds it: the retry run (a zero ERROR
// record), a batch, webhook or manual collection of the user, and a
// single collection by ID; preview.Period says so.
func TestFreePeriodOnEveryCollectingPath(t *testing.T) {
	t.Parallel()
	st := memoryUserStores()[0]
	tests := []struct {
		name    string
		status  billing.Status
		collect func(t *testing.T, e *freeEnv, s billing.Period)
	}{
		{"retry run", billing.StatusError, func(t *testing.T, e *freeEnv, _ billing.Period) {
			_, err := e.c.Run(t.Context(), billing.RunRequest{Kind: billing.RunRetry})
			require.NoError(t, err)
		}},
		{"batch", billing.StatusScheduled, func(t *testing.T, e *freeEnv, _ billing.Period) {
			_, err := e.c.CollectUser(t.Context(), e.user, billing.ProcessBatch)
			require.NoError(t, err)
		}},
		{"webhook", billing.StatusScheduled, func(t *testing.T, e *freeEnv, _ billing.Period) {
			_, err := e.c.CollectUser(t.Context(), e.user, billing.ProcessWebhook)
			require.NoError(t, err)
		}},
		{"manual repayment", billing.StatusError, func(t *testing.T, e *freeEnv, s billing.Period) {
			_, err := e.c.Periods().Repay(t.Context(), s.SubscriptionID)
			require.NoError(t, err)
		}},
		{"by ID", billing.StatusScheduled, func(t *testing.T, e *freeEnv, s billing.Period) {
			_, err := e.c.Periods().Collect(t.Context(), s.SubscriptionID)
			require.NoError(t, err)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newFreeEnv(t, st, billingtest.ProviderOptions{})
			s := envRecord(e.user, feb3.Add(-48*time.Hour), tt.status)
			s.Amount = 0
			if tt.status == billing.StatusError {
				s.InitialRunDate = s.BillingDate.Add(time.Hour)
				s.LastRunDate = feb3.Add(-25 * time.Hour)
				s.PaymentError = "declined"
			}
			_, err := e.repo.AddAll(t.Context(), []billing.Period{s})
			require.NoError(t, err)
			kind := billing.RunScheduled
			if tt.status == billing.StatusError {
				kind = billing.RunRetry
			}
			assert.Equal(t, preview.CompleteFree, preview.Period(e.c, kind, &s, feb3).Action)
			tt.collect(t, e, s)
			assert.Zero(t, e.pay.CallCount())
			got := findRecord(t, e.records(t), s.SubscriptionID)
			assert.Equal(t, billing.StatusCompleted, got.Status, "%+v", got)
			assert.Zero(t, got.LastAttempt)
			assert.Equal(t, 1, e.changes(t)[billing.EventFreePeriodCompleted])
		})
	}
}

// TestFreeStuckZeroAttemptResolvedOnce: a zero record whose attempt was
// recorded before the free path (the processor refused the zero as an
// error, so it stayed in flight) is resolved like any in-flight one —
// past the processor's replay window it is looked up, and found never made
// — and only then completed, once, with its next period; later runs leave
// it alone.
func TestFreeStuckZeroAttemptResolvedOnce(t *testing.T) {
	t.Parallel()
	for _, st := range []userStore{userStores()[0], userStores()[2]} {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			// Like the Stripe provider: keys kept a day, lookups offered,
			// a zero refused as an error.
			e := newFreeEnv(t, st, billingtest.ProviderOptions{Lookup: true, ReplayWindow: 24 * time.Hour,
				Default: billingtest.Always(billingtest.UnknownBeforeCharge(nil))})
			s := envRecord(e.user, feb3.Add(-72*time.Hour), billing.StatusScheduled)
			s.Amount = 0
			s.LastAttempt = billing.Attempt{Number: 1, Key: billing.IdempotencyKey(s.SubscriptionID, 1), Tier: s.ReceiptTierName,
				Process: billing.ProcessInitial, Started: feb3.Add(-71 * time.Hour)}
			_, err := e.repo.AddAll(t.Context(), []billing.Period{s})
			require.NoError(t, err)
			stuck := findRecord(t, e.records(t), s.SubscriptionID)
			require.True(t, stuck.InFlight())

			rep, err := e.c.Run(t.Context(), billing.RunRequest{Kind: billing.RunScheduled})
			require.NoError(t, err)
			assert.Equal(t, 1, rep.Free, "%+v", rep)
			assert.Empty(t, e.pay.Calls(), "looked up, not presented again")
			assert.Equal(t, 1, e.pay.Lookups())
			recs := e.records(t)
			got := findRecord(t, recs, s.SubscriptionID)
			assert.Equal(t, billing.StatusCompleted, got.Status, "%+v", got)
			assert.False(t, got.InFlight())
			require.Len(t, recs, 2, "the next period opened")

			for range 2 {
				e.clock.Advance(time.Hour)
				_, err = e.c.Run(t.Context(), billing.RunRequest{Kind: billing.RunScheduled})
				require.NoError(t, err)
				_, err = e.c.Run(t.Context(), billing.RunRequest{Kind: billing.RunRetry})
				require.NoError(t, err)
			}
			assert.Empty(t, e.pay.Calls(), "nothing presented")
			assert.Equal(t, 1, e.pay.Lookups(), "looked up once")
			assert.Equal(t, 1, e.changes(t)[billing.EventFreePeriodCompleted], "completed once")
			assert.Len(t, e.records(t), 2)
		})
	}
}
