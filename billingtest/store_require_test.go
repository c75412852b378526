package billingtest_test

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/internal/av"
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/memory"
	"github.com/stretchr/testify/require"
)

// fatalRecorder is a testing.TB whose Fatal stops only the calling
// goroutine and records the message.
type fatalRecorder struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.msg = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

func (f *fatalRecorder) run(fn func(tb testing.TB)) string {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.msg
}

func TestRequireHistoryMatchesPrimary(t *testing.T) {
	s := billingtest.NewMemoryStore(t, memory.Options{})
	repo, hist := s.Repository(), s.History()
	r := rec("u1", 1, due, billing.StatusScheduled)
	mustAdd(t, repo, r)
	next := r.Clone()
	next.Status = billing.StatusError
	next.LastRunDate = r.LastRunDate.Add(time.Minute)
	require.NoError(t, repo.Update(t.Context(), &r, &next))
	msg := (&fatalRecorder{TB: t}).run(func(tb testing.TB) {
		billingtest.RequireHistoryMatchesPrimary(tb, repo, hist, "u1")
	})
	require.Empty(t, msg, "consistent store reported")

	// A primary write that bypassed history: the newest row is stale.
	item, err := layout.EncodeItem(&next)
	require.NoError(t, err)
	item[layout.AttrBillingAmount] = &av.AttributeValueMemberS{Value: "9.99"}
	require.NoError(t, s.PutRawItem(memory.SubscriptionsTable, item))
	// And a record without any history row.
	orphan := rec("u1", 9, due.AddDate(0, 1, 0), billing.StatusScheduled)
	item, _ = layout.EncodeItem(&orphan)
	require.NoError(t, s.PutRawItem(memory.SubscriptionsTable, item))
	msg = (&fatalRecorder{TB: t}).run(func(tb testing.TB) {
		billingtest.RequireHistoryMatchesPrimary(tb, repo, hist, "u1")
	})
	require.Contains(t, msg, "billing_amount", "mismatch not reported (or not named)")
	require.Contains(t, msg, orphan.SubscriptionID, "mismatch not reported (or not named)")
	require.Contains(t, msg, "no history row", "mismatch not reported (or not named)")
}

var due = time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC)

// rec is record n of user, due on billingDate.
func rec(user string, n int, billingDate time.Time, st billing.Status) billing.Period {
	return billing.Period{UserID: user, BillingDate: billingDate, SubscriptionID: fmt.Sprintf("sub-%s-%d", user, n),
		Amount: billing.Cents(499), Status: st, LastRunDate: time.Date(2024, 1, 1, 0, 0, n, 0, time.UTC)}
}

func mustAdd(t *testing.T, r billing.Repository, subs ...billing.Period) {
	t.Helper()
	for i := range subs {
		require.NoError(t, r.Add(t.Context(), &subs[i]))
	}
}
