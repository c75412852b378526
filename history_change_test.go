package billing_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/internal/storetest"
	"github.com/dynabill/billing/memory"
)

// TestHistoryRowsNameTheirChange checks that every write of the engine
// names its change on the history row it adds (Subscription.Change, the
// stream's event type), and that the records it returns and the billing
// table's records carry none.
func TestHistoryRowsNameTheirChange(t *testing.T) {
	ctx := context.Background()
	e := newCollectorEnv(t)
	changes := func(user string) []billing.EventType {
		t.Helper()
		rows, err := e.hist.ListByUser(ctx, user)
		require.NoError(t, err)
		var got []billing.EventType
		for _, r := range rows {
			got = append(got, r.Change)
		}
		for _, r := range e.records(user) {
			require.Empty(t, r.Change, "billing table record %s", r.Key())
		}
		return got
	}
	due := jan31

	// A pending ACH debit that comes back, and a decline that is waived.
	ach := e.add("ach", due, billing.StatusScheduled)
	e.pay.SetUser("ach", billingtest.Pending())
	dec := e.add("dec", due, billing.StatusScheduled)
	e.pay.SetUser("dec", billingtest.Declined("insufficient funds", true))
	// A collection refunded later.
	paid := e.add("paid", due, billing.StatusScheduled)
	// A record too old to collect.
	e.add("old", due.AddDate(0, -3, 0), billing.StatusScheduled)
	// A paused month skipped by the pause run.
	e.add("paused", due, billing.StatusPaused, func(s *billing.Period) { s.PauseDurationMonths = 2 })

	e.run(billing.RunScheduled)
	e.clock.Advance(time.Hour)
	e.run(billing.RunPause)

	// The ACH return and the operator come days later.
	e.clock.Advance(3 * 24 * time.Hour)
	charge := e.pay.ChargesFor(ach.SubscriptionID)[0]
	_, changed, err := e.c.ApplySettlement(ctx, billing.Settlement{SubscriptionID: ach.SubscriptionID, TransactionID: charge.TransactionID, Kind: billing.SettlementReturned})
	require.NoError(t, err)
	require.True(t, changed)
	e.clock.Advance(time.Hour)
	ch, err := e.c.Periods().WaiveByID(ctx, dec.SubscriptionID)
	require.NoError(t, err)
	require.Empty(t, ch.After.Change, "a returned record carries no change")
	e.clock.Advance(time.Hour)
	charge = e.pay.ChargesFor(paid.SubscriptionID)[0]
	_, _, err = e.c.ApplySettlement(ctx, billing.Settlement{SubscriptionID: paid.SubscriptionID, TransactionID: charge.TransactionID, Kind: billing.SettlementRefunded})
	require.NoError(t, err)

	// The host's and the operator's changes of one subscription.
	sub, err := e.c.Subscribe(ctx, billing.SubscribeRequest{RequestKey: "k", UserID: "life", Tier: "Plus:v2", Amount: 499,
		FirstBillingDate: due.AddDate(0, 0, 10)})
	require.NoError(t, err)
	require.Empty(t, sub.Subscription.Change)
	id := sub.Subscription.SubscriptionID
	// Each change an hour after the last, by another call.
	for _, change := range []func() error{
		func() error { _, err := e.c.Periods().ChangeTier(ctx, id, "Pro:v1", 999, false); return err },
		func() error { _, err := e.c.Periods().Move(ctx, id, due.AddDate(0, 0, 12)); return err },
		func() error { _, err := e.c.Periods().Pause(ctx, id, 2); return err },
		func() error { _, err := e.c.Periods().Resume(ctx, id); return err },
		func() error { _, err := e.c.Periods().Cancel(ctx, id); return err },
	} {
		e.clock.Advance(time.Hour)
		require.NoError(t, change())
	}
	e.clock.Advance(time.Hour)
	react, err := e.c.Reactivate(ctx, "life", due.AddDate(0, 0, 20))
	require.NoError(t, err)
	require.Empty(t, react.Change)

	// Rows the test wrote itself (Repository.Add) record no change.
	require.Equal(t, []billing.EventType{"", billing.EventPaymentPending, billing.EventPeriodOpened, billing.EventPaymentReturned}, changes("ach"))
	require.Equal(t, []billing.EventType{"", billing.EventPaymentDeclined, billing.EventPeriodOpened, billing.EventWaived}, changes("dec"))
	require.Equal(t, []billing.EventType{"", billing.EventPaymentSucceeded, billing.EventPeriodOpened, billing.EventPaymentRefunded}, changes("paid"))
	require.Equal(t, []billing.EventType{"", billing.EventStale, billing.EventPeriodOpened}, changes("old"))
	require.Equal(t, []billing.EventType{"", billing.EventPauseMonthSkipped, billing.EventPeriodOpened}, changes("paused"))
	require.Equal(t, []billing.EventType{billing.EventSubscriptionCreated, billing.EventTierChanged, billing.EventBillingDateMoved,
		billing.EventPaused, billing.EventResumed, billing.EventCancelled, billing.EventSubscriptionReactivated}, changes("life"))
}

// TestHistoryChangeOnEveryLayout: the change is on the history rows and
// never on the records of the billing table, in memory and on the local
// server, on both layouts.
func TestHistoryChangeOnEveryLayout(t *testing.T) {
	t.Parallel()
	type stores struct {
		repo billing.Repository
		hist billing.History
	}
	layouts := []struct {
		name string
		open func(t *testing.T, clock billing.Clock) stores
		user string
	}{
		{"memory-legacy", func(t *testing.T, _ billing.Clock) stores {
			m := billingtest.NewMemoryStore(t, memory.Options{})
			return stores{m.Repository(), m.History()}
		}, legacyUser(1)},
		{"memory-single", func(t *testing.T, clock billing.Clock) stores {
			m := billingtest.NewMemorySingleTable(t, memory.SingleTableOptions{Clock: clock})
			return stores{m.Repository(), m.History()}
		}, singleUser(1)},
		{"dynamodb-legacy", func(t *testing.T, _ billing.Clock) stores {
			repo, hist := storetest.DynamoStores(t, memory.Options{})
			return stores{repo, hist}
		}, legacyUser(1)},
		{"dynamodb-single", func(t *testing.T, clock billing.Clock) stores {
			repo := singleTableOnServer(t, clock, memory.Options{})
			return stores{repo, repo.History()}
		}, singleUser(1)},
	}
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			clock := billingtest.NewClock(jan31.Add(time.Hour))
			st := l.open(t, clock)
			c, err := billing.NewCollector(billing.Config{Repository: st.repo, History: st.hist, Locker: billingtest.NewLocker(clock, time.Minute),
				Provider: billingtest.NewProvider(billingtest.ProviderOptions{Clock: clock}), Clock: clock})
			require.NoError(t, err)
			sub, err := c.Subscribe(ctx, billing.SubscribeRequest{RequestKey: "k", UserID: l.user, Tier: "Plus:v2", Amount: 499,
				FirstBillingDate: clock.Now().Add(-time.Minute)})
			require.NoError(t, err)
			clock.Advance(time.Hour) // the day's run
			rep, err := c.Run(ctx, billing.RunRequest{Kind: billing.RunScheduled})
			require.NoError(t, err)
			require.Equal(t, 1, rep.Collected)
			recs, err := st.repo.ListByUser(ctx, l.user)
			require.NoError(t, err)
			require.Len(t, recs, 2)
			next := recs[1]
			require.NotEqual(t, sub.Subscription.SubscriptionID, next.SubscriptionID)
			clock.Advance(24 * time.Hour) // the operator, days later
			_, err = c.Periods().ChangeTier(ctx, next.SubscriptionID, "Pro:v1", 999, false)
			require.NoError(t, err)
			clock.Advance(24 * time.Hour)
			_, err = c.Periods().Cancel(ctx, next.SubscriptionID)
			require.NoError(t, err)

			recs, err = st.repo.ListByUser(ctx, l.user)
			require.NoError(t, err)
			for _, r := range recs {
				require.Empty(t, r.Change, "billing table record %s", r.Key())
				got, err := st.repo.GetByID(ctx, r.SubscriptionID)
				require.NoError(t, err)
				require.Empty(t, got.Change, "billing table record %s", r.Key())
			}
			rows, err := st.hist.ListByUser(ctx, l.user)
			require.NoError(t, err)
			var changes []billing.EventType
			for _, r := range rows {
				changes = append(changes, r.Change)
			}
			require.Equal(t, []billing.EventType{billing.EventSubscriptionCreated, billing.EventPaymentSucceeded, billing.EventPeriodOpened,
				billing.EventTierChanged, billing.EventCancelled}, changes)
		})
	}
}
