package billingstripe_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v85"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingstripe"
	"github.com/dynabill/billing/billingstripe/stripetest"
	"github.com/dynabill/billing/billingtest"
)

// The tests in this file run a declined period through the collector's
// dunning end to end: the Provider against the fake Stripe, a
// billing.Collector with Config.Dunning (the default schedule, notices
// to a recording notifier), and the webhook handler in front of it.

const (
	payerEmail = "u1@example.com"
	updateURL  = "https://app.example/billing/card"
)

// dunEnv is a collEnv with dunning on and user u1's card on file, its
// period billed on billed.
type dunEnv struct {
	*collEnv
	sent *billingtest.RecordingNotifier
	sub  billing.Period
}

func newDunEnv(t *testing.T, o collOptions) *dunEnv {
	t.Helper()
	sent := &billingtest.RecordingNotifier{}
	o.dunning = &billing.DunningPolicy{Notifier: sent, UpdatePaymentURL: updateURL,
		Users: billingtest.NewUserDirectory(billing.User{ID: "u1", Email: payerEmail, Status: billing.UserStatusActive})}
	e := &dunEnv{collEnv: newCollEnv(t, o), sent: sent}
	e.addCard("u1")
	e.sub = e.subscribe(t, "u1")
	return e
}

// requests counts the requests to Stripe that can charge: creates and
// confirms.
func (e *dunEnv) requests() int { return e.srv.CreateRequests() + e.srv.ConfirmRequests() }

// notices are the kinds of the notices sent, in order.
func (e *dunEnv) notices() []string {
	var out []string
	for _, s := range e.sent.Sent() {
		out = append(out, s.Notification.EventType)
	}
	return out
}

// day runs, on day d after the billing date (UTC), the scheduled run and
// the retry run, each twice (a redelivered trigger), from 10:00.
func (e *dunEnv) day(t *testing.T, d int) {
	t.Helper()
	at := time.Date(billed.Year(), billed.Month(), billed.Day()+d, 10, 0, 0, 0, time.UTC)
	for i := range 2 {
		e.clock.Set(at.Add(time.Duration(2*i) * time.Minute))
		e.run(t, billing.RunScheduled)
		e.clock.Set(at.Add(time.Duration(2*i+1) * time.Minute))
		e.run(t, billing.RunRetry)
	}
}

// TestDunningStripeAuthenticationRequired: a charge the bank holds for
// the customer's authentication (the intent left requires_action, with
// Stripe's link or without one, or declined authentication_required
// off-session) leaves the period ERROR, not retried, in dunning of kind
// authentication required; the customer gets one action-required notice
// with the link (Stripe's, else the host's page from Config.ConfirmURL),
// and the retry runs of the days after make no attempt and send nothing
// more (the final notice is not due before day 11).
func TestDunningStripeAuthenticationRequired(t *testing.T) {
	const stripeLink = "https://hooks.stripe.com/3d_secure_2/hosted?pi=1"
	hostLink := func(pi *stripe.PaymentIntent) string { return "https://app.example/billing/confirm?pi=" + pi.ID }
	for _, tc := range []struct {
		name    string
		outcome stripetest.Outcome
		link    func(e *dunEnv) string
	}{
		{"requires_action with Stripe's link", stripetest.RequiresAction(stripeLink), func(*dunEnv) string { return stripeLink }},
		{"requires_action without a link", stripetest.RequiresAction(""),
			func(e *dunEnv) string { return "https://app.example/billing/confirm?pi=" + e.srv.Intents()[0].ID }},
		{"declined authentication_required", stripetest.AuthenticationRequired(),
			func(e *dunEnv) string { return "https://app.example/billing/confirm?pi=" + e.srv.Intents()[0].ID }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newDunEnv(t, collOptions{confirmURL: hostLink})
			e.srv.Script("cus_u1", tc.outcome, stripetest.Succeed())
			rep := e.run(t, billing.RunScheduled)
			require.Equal(t, 1, rep.Attempted)
			require.Len(t, e.srv.Intents(), 1)
			link := tc.link(e)

			cur := e.get(t, e.sub.SubscriptionID)
			assert.Equal(t, billing.StatusError, cur.Status)
			assert.True(t, cur.NoRetry, "an authentication is not retried off-session")
			assert.Equal(t, billing.DeclineAuthenticationRequired, cur.Dunning.Kind)
			assert.Equal(t, link, cur.Dunning.ActionURL)
			assert.Equal(t, e.srv.Intents()[0].ID, cur.TransactionID)
			require.Equal(t, []string{billing.PaymentActionRequiredNoticeEvent}, e.notices(), "told at once, once")
			n := e.sent.Sent()[0]
			assert.Equal(t, payerEmail, n.Email)
			assert.Equal(t, link, n.Notification.ActionURL)
			assert.Equal(t, billing.DeclineReasonText(billing.DeclineAuthenticationRequired), n.Notification.Reason)
			assert.Equal(t, 1, n.Notification.Attempt)
			assert.Equal(t, "u1", n.Notification.UserID)
			st := e.c.DunningOf(&cur)
			assert.True(t, st.Active)
			assert.Zero(t, st.RetriesLeft)

			requests := e.requests()
			for d := 1; d <= 10; d++ {
				e.day(t, d)
			}
			assert.Equal(t, requests, e.requests(), "a retry run tried the payment the customer must confirm")
			assert.Len(t, e.srv.Intents(), 1)
			assert.Empty(t, e.srv.Charged())
			assert.Equal(t, []string{billing.PaymentActionRequiredNoticeEvent}, e.notices(), "a notice was sent again")
			cur = e.get(t, e.sub.SubscriptionID)
			assert.Equal(t, billing.StatusError, cur.Status)
			assert.Zero(t, cur.Dunning.Retries)
			assert.True(t, cur.Dunning.Active())
		})
	}
}

// TestDunningStripeExpiredCardRecoveredByCardUpdater: an expired card
// leaves the period ERROR in dunning of kind expired card, not retried,
// and the customer is told once why, in words; when the card network
// renews the card (payment_method.automatically_updated, signed) the
// period is charged at once, its dunning ends recovered, and the
// event's redelivery charges nothing and sends nothing.
func TestDunningStripeExpiredCardRecoveredByCardUpdater(t *testing.T) {
	e := newDunEnv(t, collOptions{})
	h, err := billingstripe.NewWebhookHandler(billingstripe.WebhookConfig{Secret: testSecret, Collector: e.c, Users: users{}})
	require.NoError(t, err)
	e.srv.Script("cus_u1", stripetest.Outcome{Code: "expired_card", DeclineCode: "expired_card", Message: "Your card has expired."},
		stripetest.Succeed())
	e.run(t, billing.RunScheduled)

	cur := e.get(t, e.sub.SubscriptionID)
	require.Equal(t, billing.StatusError, cur.Status)
	assert.True(t, cur.NoRetry)
	assert.Equal(t, billing.DeclineExpiredCard, cur.Dunning.Kind)
	assert.Empty(t, cur.Dunning.ActionURL)
	require.Equal(t, []string{billing.PaymentFailedNoticeEvent}, e.notices(), "told at once, once")
	n := e.sent.Sent()[0]
	assert.Equal(t, payerEmail, n.Email)
	assert.Equal(t, billing.DeclineReasonText(billing.DeclineExpiredCard), n.Notification.Reason)
	assert.Equal(t, updateURL, n.Notification.UpdatePaymentURL)
	assert.Empty(t, n.Notification.ActionURL)
	assert.Empty(t, n.Notification.NextRetry, "an expired card has no retry to announce")

	requests := e.requests()
	e.day(t, 1)
	assert.Equal(t, requests, e.requests(), "the retry run tried the expired card")

	// Day 2: the network gives the card a new expiry.
	e.clock.Set(billed.AddDate(0, 0, 2).Add(2 * time.Hour))
	ev := eventWithPrevious(t, "evt_card_updater", stripe.EventTypePaymentMethodAutomaticallyUpdated, e.clock.Now().Unix(),
		map[string]any{"id": "pm_card_u1", "object": "payment_method", "type": "card", "customer": "cus_u1"}, nil)
	rec := deliver(h, ev)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	assert.Equal(t, "applied\n", rec.Body.String())
	assert.Equal(t, requests+1, e.requests(), "charged at once, once")
	paid := e.get(t, e.sub.SubscriptionID)
	assert.Equal(t, billing.StatusCompleted, paid.Status)
	require.Len(t, e.srv.Charged(), 1)
	assert.Equal(t, e.srv.Charged()[0].ID, paid.TransactionID)
	assert.Equal(t, billing.DunningRecovered, paid.Dunning.End)
	assert.Equal(t, e.clock.Now(), paid.Dunning.Ended)
	assert.False(t, e.c.DunningOf(&paid).Active)
	rows, err := e.hist.ListBySubscription(t.Context(), e.sub.SubscriptionID)
	require.NoError(t, err)

	// Stripe delivers at least once; the runs of the next day find
	// nothing owed.
	rec = deliver(h, ev)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	assert.Equal(t, "replay\n", rec.Body.String())
	e.day(t, 3)
	assert.Equal(t, requests+1, e.requests(), "a redelivery or a later run made a request that can charge")
	assert.Len(t, e.srv.Charged(), 1)
	after, err := e.hist.ListBySubscription(t.Context(), e.sub.SubscriptionID)
	require.NoError(t, err)
	assert.Len(t, after, len(rows), "a redelivery wrote history")
	assert.Equal(t, []string{billing.PaymentFailedNoticeEvent}, e.notices())
	assert.Equal(t, paid, e.get(t, e.sub.SubscriptionID))
	requireOneChargePerPeriod(t, e.srv, e.repo)
}

// TestDunningStripeInsufficientFundsRetriedOnDayOne: a lack of funds is
// retried by the retry run on the first day of the schedule
// (billing.DefaultRetryDays[0]), once however often the run comes that
// day, and not on the day of the decline nor on the day between; the
// next retry day's try pays the period and ends its dunning. The customer
// hears of the decline once.
func TestDunningStripeInsufficientFundsRetriedOnDayOne(t *testing.T) {
	e := newDunEnv(t, collOptions{})
	e.srv.Script("cus_u1", stripetest.Decline("insufficient_funds"), stripetest.Decline("insufficient_funds"), stripetest.Succeed())
	e.run(t, billing.RunScheduled)
	cur := e.get(t, e.sub.SubscriptionID)
	require.Equal(t, billing.StatusError, cur.Status)
	assert.False(t, cur.NoRetry)
	assert.Equal(t, billing.DeclineInsufficientFunds, cur.Dunning.Kind)
	require.Equal(t, []string{billing.PaymentFailedNoticeEvent}, e.notices())
	first := billed.AddDate(0, 0, billing.DefaultRetryDays[0]).Truncate(24 * time.Hour)
	assert.Equal(t, first.Format("01/02/2006"), e.sent.Sent()[0].Notification.NextRetry)
	assert.Equal(t, 1, e.requests())

	// The day of the decline: the retry run does not try again.
	for _, at := range []time.Duration{13 * time.Hour, 17 * time.Hour, 23*time.Hour + 59*time.Minute} {
		e.clock.Set(billed.Truncate(24 * time.Hour).Add(at))
		e.run(t, billing.RunRetry)
	}
	assert.Equal(t, 1, e.requests(), "retried on the day of the decline")

	e.day(t, billing.DefaultRetryDays[0])
	assert.Equal(t, 2, e.requests(), "one retry on the first retry day, however often the run comes")
	assert.Equal(t, 1, e.srv.ConfirmRequests(), "the retry confirmed the period's intent again")
	cur = e.get(t, e.sub.SubscriptionID)
	assert.Equal(t, billing.StatusError, cur.Status)
	assert.Equal(t, 1, cur.Dunning.Retries)
	assert.Equal(t, billed.AddDate(0, 0, billing.DefaultRetryDays[1]).Truncate(24*time.Hour), e.c.DunningOf(&cur).NextRetry)

	e.day(t, billing.DefaultRetryDays[0]+1)
	assert.Equal(t, 2, e.requests(), "retried between the schedule's days")

	e.day(t, billing.DefaultRetryDays[1])
	assert.Equal(t, 3, e.requests())
	paid := e.get(t, e.sub.SubscriptionID)
	assert.Equal(t, billing.StatusCompleted, paid.Status)
	assert.Equal(t, billing.DunningRecovered, paid.Dunning.End)
	require.Len(t, e.srv.Charged(), 1)
	assert.Equal(t, []string{billing.PaymentFailedNoticeEvent}, e.notices(), "told of the decline once")
	requireOneChargePerPeriod(t, e.srv, e.repo)
}
