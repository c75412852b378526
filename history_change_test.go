package billing_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
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
	e.add("paused", due, billing.StatusPaused, func(s *billing.Subscription) { s.PauseDurationMonths = 2 })

	e.run(billing.RunScheduled)
	e.run(billing.RunPause)

	charge := e.pay.ChargesFor(ach.SubscriptionID)[0]
	_, changed, err := e.c.ApplySettlement(ctx, billing.Settlement{SubscriptionID: ach.SubscriptionID, TransactionID: charge.TransactionID, Kind: billing.SettlementReturned})
	require.NoError(t, err)
	require.True(t, changed)
	ch, err := e.c.Waive(ctx, dec.SubscriptionID)
	require.NoError(t, err)
	require.Empty(t, ch.After.Change, "a returned record carries no change")
	charge = e.pay.ChargesFor(paid.SubscriptionID)[0]
	_, _, err = e.c.ApplySettlement(ctx, billing.Settlement{SubscriptionID: paid.SubscriptionID, TransactionID: charge.TransactionID, Kind: billing.SettlementRefunded})
	require.NoError(t, err)

	// The host's and the operator's changes of one subscription.
	sub, err := e.c.Subscribe(ctx, billing.SubscribeRequest{RequestKey: "k", UserID: "life", Tier: "Plus:v2", Amount: 499,
		FirstBillingDate: due.AddDate(0, 0, 10)})
	require.NoError(t, err)
	require.Empty(t, sub.Subscription.Change)
	id := sub.Subscription.SubscriptionID
	_, err = e.c.ChangeTier(ctx, id, "Pro:v1", 999, false)
	require.NoError(t, err)
	_, err = e.c.ChangeBillingDate(ctx, id, due.AddDate(0, 0, 12))
	require.NoError(t, err)
	_, err = e.c.Pause(ctx, id, 2)
	require.NoError(t, err)
	_, err = e.c.Resume(ctx, id)
	require.NoError(t, err)
	_, err = e.c.Cancel(ctx, id)
	require.NoError(t, err)
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
