package billing_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/memory"
	"github.com/dynabill/billing/notice"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// panicsFor is a processor that panics on one user's charge.
type panicsFor struct {
	*billingtest.Provider
	user string
}

func (p panicsFor) Collect(ctx context.Context, req billing.PaymentRequest) (billing.PaymentResult, error) {
	if req.UserID == p.user {
		panic("processor bug")
	}
	return p.Provider.Collect(ctx, req)
}

// putUndecodable stores a record of user billed on date in status st
// whose amount ("4,99") does not decode, as another program might.
func putUndecodable(t *testing.T, store *memory.Store, user string, date time.Time, st billing.Status) {
	t.Helper()
	bad := envRecord(user, date, st)
	item, err := layout.EncodeItem(&bad)
	require.NoError(t, err)
	item[layout.AttrBillingAmount] = layout.StringAV("4,99")
	require.NoError(t, store.PutRawItem(memory.SubscriptionsTable, item))
}

// TestZeroConfigLogPaths builds the collector, the scheduler and the
// notifier worker with only their required fields (no Logger, Clock,
// Events, Metrics, …: each documented default applies) and drives the
// paths that log: a held lock, a panicking processor, an undecodable
// record, a failing event sink, an unreadable message. None may panic on
// a default left nil.
func TestZeroConfigLogPaths(t *testing.T) {
	due := time.Now().UTC().Truncate(time.Second).AddDate(0, 0, -1)

	t.Run("collector", func(t *testing.T) {
		store := billingtest.NewMemoryStore(t, memory.Options{})
		repo := store.Repository()
		for _, u := range []string{"locked", "panics", "pays"} {
			s := envRecord(u, due, billing.StatusScheduled)
			require.NoError(t, repo.Add(t.Context(), &s))
		}
		putUndecodable(t, store, "garbled", due, billing.StatusScheduled)
		locker := memory.NewLocker(memory.LockerOptions{})
		held, err := locker.Lock(t.Context(), "locked")
		require.NoError(t, err)
		defer func() { _ = held.Release(context.Background()) }()
		c, err := billing.NewCollector(billing.Config{Repository: repo, Locker: locker,
			Provider: panicsFor{billingtest.NewProvider(billingtest.ProviderOptions{}), "panics"}})
		require.NoError(t, err)

		rep := runToCompletion(t, c, billing.RunScheduled)
		assert.Equal(t, 1, rep.SkippedLocked, "report %+v", rep)
		assert.Equal(t, 1, rep.Collected, "report %+v", rep)
		assert.Equal(t, 1, rep.Invalid, "report %+v", rep)
		require.Len(t, rep.Failed, 1, "report %+v", rep)
		assert.Equal(t, "panics", rep.Failed[0].UserID, "report %+v", rep)

		// A failing event sink is logged, not returned.
		sinkFails := billing.EventSinkFunc(func(context.Context, billing.Event) error { return errors.New("sink down") })
		c, err = billing.NewCollector(billing.Config{Repository: repo, Locker: locker,
			Provider: billingtest.NewProvider(billingtest.ProviderOptions{}), Events: sinkFails})
		require.NoError(t, err)
		recs, err := repo.ListByUser(t.Context(), "pays")
		require.NoError(t, err)
		next := recs[len(recs)-1] // the period the collection opened
		require.Equal(t, billing.StatusScheduled, next.Status, "records %+v", recs)
		ch, err := c.Periods().Cancel(t.Context(), next.SubscriptionID)
		require.NoError(t, err)
		assert.Equal(t, billing.StatusCancelled, ch.After.Status)
	})

	t.Run("scheduler", func(t *testing.T) {
		store := billingtest.NewMemoryStore(t, memory.Options{})
		notify := time.Now().UTC().AddDate(0, 0, billing.NoticeLeadDays).Truncate(24 * time.Hour).Add(15 * time.Hour)
		good := envRecord("ann", notify, billing.StatusScheduled)
		require.NoError(t, store.Repository().Add(t.Context(), &good))
		putUndecodable(t, store, "garbled", notify, billing.StatusScheduled)
		var sent []string
		s, err := notice.NewScheduler(notice.SchedulerConfig{Repository: store.Repository(),
			Enqueuer: notice.EnqueuerFunc(func(_ context.Context, bodies []string) error { sent = append(sent, bodies...); return nil })})
		require.NoError(t, err)
		res, err := s.Run(t.Context(), notice.Event{})
		require.NoError(t, err)
		assert.Equal(t, 1, res.Enqueued, "result %+v", res)
		assert.Equal(t, 1, res.Skipped, "result %+v", res)
		assert.Len(t, sent, 1, "messages")
	})

	t.Run("worker", func(t *testing.T) {
		w, err := notice.NewWorker(notice.WorkerConfig{Users: billingtest.NewUserDirectory(), Notifier: &billingtest.RecordingNotifier{}})
		require.NoError(t, err)
		failed := w.HandleBatch(t.Context(), []notice.QueueMessage{{ID: "m1", Body: "not json"}, {ID: "m2", Body: `{"user_id": "nobody"}`}})
		assert.Empty(t, failed, "an unreadable message is dropped, not redelivered")
	})
}
