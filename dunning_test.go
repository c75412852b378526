package billing_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
)

// dunningEnv is an invoiceEnv with dunning on: the default schedule, a
// notifier and a directory that knows the user.
type dunningEnv struct {
	*invoiceEnv
	sent  *billingtest.RecordingNotifier
	users *crashingUsers
}

// crashingUsers is a directory that panics while crash is set: the
// process dies between a notice's claim and its send.
type crashingUsers struct {
	*billingtest.UserDirectory
	crash atomic.Bool
}

func (u *crashingUsers) GetUser(ctx context.Context, id string) (billing.User, error) {
	if u.crash.Load() {
		panic("crash between the claim and the send")
	}
	return u.UserDirectory.GetUser(ctx, id)
}

const dunningEmail = "payer@example.com"

func newDunningEnv(t *testing.T, st userStore, pol billing.DunningPolicy) *dunningEnv {
	t.Helper()
	e := &dunningEnv{sent: &billingtest.RecordingNotifier{}}
	e.users = &crashingUsers{UserDirectory: billingtest.NewUserDirectory(billing.User{ID: st.user, Email: dunningEmail, Status: billing.UserStatusActive})}
	pol.Notifier, pol.Users = e.sent, e.users
	if pol.UpdatePaymentURL == "" {
		pol.UpdatePaymentURL = "https://example.com/billing/card"
	}
	e.invoiceEnv = newInvoiceEnv(t, st, func(c *billing.Config) {
		c.Dunning = &pol
		c.Prices = billing.PriceListMap{"Plus:v2": billing.MustParseAmount("9.99"), "Plus:v2/WEEKLY": billing.MustParseAmount("2.99")}
	})
	return e
}

// subscribeDeclined subscribes the user monthly at feb3 and runs the
// scheduled run a minute later, every charge answered by step.
func (e *dunningEnv) subscribeDeclined(t *testing.T, step billingtest.Step, term billing.Term) billing.Period {
	t.Helper()
	e.pay.SetDefault(billingtest.Always(step))
	e.clock.Set(feb3)
	_, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "order-1", UserID: e.user, Tier: "Plus:v2", Term: term})
	require.NoError(t, err)
	rep := e.runAt(t, feb3.Add(time.Minute), billing.RunScheduled)
	require.Equal(t, 1, rep.Declined, "%+v", rep)
	recs := e.records(t)
	return recs[0]
}

// days runs the day's runs, each twice (a redelivered trigger), at 10:00
// UTC of days from..to after feb3.
func (e *dunningEnv) days(t *testing.T, from, to int) {
	t.Helper()
	for d := from; d <= to; d++ {
		at := time.Date(2025, 2, 3+d, 10, 0, 0, 0, time.UTC)
		for range 2 {
			e.runAt(t, at, billing.RunScheduled)
			e.runAt(t, at.Add(time.Minute), billing.RunRetry)
		}
	}
}

// attemptDays are the days after feb3 of the processor calls for the
// period id (replays left out).
func (e *dunningEnv) attemptDays(id string) []int {
	var out []int
	for _, c := range e.pay.Calls() {
		if c.Request.SubscriptionID == id && !c.Replayed {
			out = append(out, int(c.At.Sub(time.Date(2025, 2, 3, 0, 0, 0, 0, time.UTC))/(24*time.Hour)))
		}
	}
	return out
}

// notices returns the kinds of the notices sent, in order.
func (e *dunningEnv) notices() []string {
	var out []string
	for _, s := range e.sent.Sent() {
		out = append(out, s.Notification.EventType)
	}
	return out
}

func (e *dunningEnv) period(t *testing.T, id string) billing.Period {
	t.Helper()
	for _, r := range e.records(t) {
		if r.SubscriptionID == id {
			return r
		}
	}
	t.Fatalf("no period %s", id)
	return billing.Period{}
}

// TestDunningFollowsTheSchedule (every layout, in memory and on the
// local DynamoDB server): a card declined for insufficient funds every
// time is tried on the first day and on days 1, 3, 5, 7, 9, 11 and 13
// after it, exactly, whatever runs twice a day; the customer hears of the
// decline once, with the amount, the reason in words and the update
// link, and gets the final notice once on day 11; on day 14 the
// subscription is cancelled once: the next period (billed on day 28) is
// CANCELLED and never charged, the owed period stays ERROR with its
// dunning ended, its invoice is uncollectible, one event says so.
func TestDunningFollowsTheSchedule(t *testing.T) {
	t.Parallel()
	for _, st := range userStores() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			e := newDunningEnv(t, st, billing.DunningPolicy{})
			owed := e.subscribeDeclined(t, billingtest.DeclinedAs(billing.DeclineInsufficientFunds, "R01: insufficient funds", ""), billing.TermMonthly)
			require.Equal(t, []string{billing.PaymentFailedNoticeEvent}, e.notices(), "told at once")

			e.days(t, 1, 29)

			assert.Equal(t, []int{0, 1, 3, 5, 7, 9, 11, 13}, e.attemptDays(owed.SubscriptionID))
			assert.Len(t, e.pay.Calls(), 8, "nothing else was charged: not the next period")
			assert.Equal(t, []string{billing.PaymentFailedNoticeEvent, billing.PaymentFinalNoticeEvent}, e.notices())
			sent := e.sent.Sent()
			first := sent[0].Notification
			assert.Equal(t, dunningEmail, sent[0].Email)
			assert.Equal(t, billing.MustParseAmount("9.99"), first.Amount)
			assert.Equal(t, billing.DeclineReasonText(billing.DeclineInsufficientFunds), first.Reason)
			assert.Equal(t, "https://example.com/billing/card", first.UpdatePaymentURL)
			assert.Equal(t, "02/04/2025", first.NextRetry)
			assert.Equal(t, "02/17/2025", first.FinalDate)
			assert.Equal(t, "cancel", first.FinalAction)
			assert.Equal(t, "02/17/2025", sent[1].Notification.FinalDate)
			assert.Equal(t, "02/16/2025", sent[1].Notification.NextRetry, "the last retry is still to come")

			got := e.period(t, owed.SubscriptionID)
			assert.Equal(t, billing.StatusError, got.Status, "still owed")
			assert.Equal(t, 8, got.Attempt)
			assert.Equal(t, 7, got.Dunning.Retries)
			assert.Equal(t, billing.DunningEnd(billing.FinalCancel), got.Dunning.End)
			assert.Equal(t, time.Date(2025, 2, 17, 10, 1, 0, 0, time.UTC), got.Dunning.Ended.Truncate(time.Second))
			assert.Equal(t, feb3.Add(time.Minute), got.Dunning.Since.Truncate(time.Second))
			var statuses []billing.Status
			for _, r := range e.records(t) {
				statuses = append(statuses, r.Status)
			}
			assert.Equal(t, []billing.Status{billing.StatusError, billing.StatusCancelled}, statuses)
			assert.False(t, e.records(t)[1].CompletionDate.IsZero(), "cancelled as an operator's cancel is: with its completion date")
			assert.Equal(t, 1, e.events.Count(billing.EventDunningEnded))
			assert.Equal(t, 2, e.events.Count(billing.EventDunningNotice))
			invs := e.invoices(t)
			require.Len(t, invs, 1)
			assert.Equal(t, billing.InvoiceUncollectible, invs[0].Status)
			assert.Equal(t, billing.StatusError, mustViewStatus(t, e), "past due")

			// Day 30: past the stale threshold the owed period is given
			// up on, as before dunning; nothing is charged.
			e.days(t, 30, 30)
			assert.Equal(t, billing.StatusStale, e.period(t, owed.SubscriptionID).Status)
			assert.Len(t, e.pay.Calls(), 8)
			assert.Equal(t, 1, e.events.Count(billing.EventDunningEnded))
		})
	}
}

func mustViewStatus(t *testing.T, e *dunningEnv) billing.Status {
	t.Helper()
	v := mustView(t, e.freeEnv)
	if v.Status == billing.SubscriptionPastDue {
		return billing.StatusError
	}
	return billing.Status(v.Status)
}

// TestDunningHardDeclineIsNotRetried: a card reported stolen is never
// tried again; the customer hears once; the final action comes on day 14
// all the same (the customer could have added a card until then).
func TestDunningHardDeclineIsNotRetried(t *testing.T) {
	t.Parallel()
	for _, st := range userStores() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			e := newDunningEnv(t, st, billing.DunningPolicy{FinalAction: billing.FinalLeavePastDue})
			owed := e.subscribeDeclined(t, billingtest.DeclinedAs(billing.DeclineHard, "stolen_card", ""), billing.TermMonthly)
			e.days(t, 1, 20)
			assert.Equal(t, []int{0}, e.attemptDays(owed.SubscriptionID))
			assert.Equal(t, []string{billing.PaymentFailedNoticeEvent, billing.PaymentFinalNoticeEvent}, e.notices())
			assert.Equal(t, billing.DeclineReasonText(billing.DeclineHard), e.sent.Sent()[0].Notification.Reason)
			assert.Empty(t, e.sent.Sent()[0].Notification.NextRetry, "no retry to announce")
			got := e.period(t, owed.SubscriptionID)
			assert.True(t, got.NoRetry)
			assert.Equal(t, billing.DunningEnd(billing.FinalLeavePastDue), got.Dunning.End)
			assert.Equal(t, 1, e.events.Count(billing.EventDunningEnded))
			assert.Equal(t, billing.StatusScheduled, e.next(t).Status, "left past due: the next period stays")
		})
	}
}

// TestDunningPauseFinalAction: the final action pause pauses the next
// period for PauseMonths, once.
func TestDunningPauseFinalAction(t *testing.T) {
	t.Parallel()
	e := newDunningEnv(t, memoryUserStores()[0], billing.DunningPolicy{FinalAction: billing.FinalPause, PauseMonths: 2})
	owed := e.subscribeDeclined(t, billingtest.DeclinedAs(billing.DeclineExpiredCard, "expired_card", ""), billing.TermMonthly)
	e.days(t, 1, 16)
	assert.Equal(t, []int{0}, e.attemptDays(owed.SubscriptionID), "an expired card is not tried again")
	assert.Equal(t, billing.DeclineExpiredCard, e.period(t, owed.SubscriptionID).Dunning.Kind, "not retryable, yet not hard")
	assert.Equal(t, billing.DeclineReasonText(billing.DeclineExpiredCard), e.sent.Sent()[0].Notification.Reason)
	recs := e.records(t)
	require.Len(t, recs, 2)
	assert.Equal(t, billing.StatusPaused, recs[1].Status)
	assert.Equal(t, 2, recs[1].PauseDurationMonths)
	assert.Equal(t, 1, e.events.Count(billing.EventDunningEnded))
	assert.Equal(t, 1, e.events.Count(billing.EventPaused))
}

// TestDunningAuthenticationRequired: a payment the bank holds for 3-D
// Secure is not retried off session; the customer gets the action-required
// notice with the processor's link, once.
func TestDunningAuthenticationRequired(t *testing.T) {
	t.Parallel()
	e := newDunningEnv(t, memoryUserStores()[0], billing.DunningPolicy{})
	owed := e.subscribeDeclined(t, billingtest.DeclinedAs(billing.DeclineAuthenticationRequired, "authentication_required", "https://pay.example/confirm/1"), billing.TermMonthly)
	e.days(t, 1, 5)
	assert.Equal(t, []int{0}, e.attemptDays(owed.SubscriptionID))
	require.Equal(t, []string{billing.PaymentActionRequiredNoticeEvent}, e.notices())
	assert.Equal(t, "https://pay.example/confirm/1", e.sent.Sent()[0].Notification.ActionURL)
}

// TestDunningCardUpdatePaysAtOnce (every layout): a weekly subscription
// declined on day 0 holds its next period (due day 7) back; a new card on
// day 8 pays the owed period and then the held one, at once, in that
// order; the dunning ends once (recovered); the repeat of the call's key
// charges nothing; no retry follows.
func TestDunningCardUpdatePaysAtOnce(t *testing.T) {
	t.Parallel()
	for _, st := range userStores() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			e := newDunningEnv(t, st, billing.DunningPolicy{})
			owed := e.subscribeDeclined(t, billingtest.DeclinedAs(billing.DeclineInsufficientFunds, "insufficient_funds", ""), billing.TermWeekly)
			e.days(t, 1, 7)
			assert.Equal(t, []int{0, 1, 3, 5, 7}, e.attemptDays(owed.SubscriptionID))
			held := e.next(t)
			assert.Empty(t, e.attemptDays(held.SubscriptionID), "held while the first is owed")

			e.pay.SetDefault(billingtest.Always(billingtest.Succeeded()))
			e.clock.Set(time.Date(2025, 2, 11, 15, 0, 0, 0, time.UTC))
			up, err := e.c.PaymentMethodUpdated(ctx, ur(e.user, "card-1"))
			require.NoError(t, err)
			require.Len(t, up.Periods, 2)
			assert.False(t, up.Repeated)
			assert.Equal(t, owed.SubscriptionID, up.Periods[0].Period.SubscriptionID)
			assert.Equal(t, billing.RetryCollected, up.Periods[0].Outcome)
			assert.Equal(t, held.SubscriptionID, up.Periods[1].Period.SubscriptionID)
			assert.Equal(t, billing.RetryCollected, up.Periods[1].Outcome)

			got := e.period(t, owed.SubscriptionID)
			assert.Equal(t, billing.StatusCompleted, got.Status)
			assert.Equal(t, billing.DunningRecovered, got.Dunning.End)
			ended := e.events.OfType(billing.EventDunningEnded)
			require.Len(t, ended, 1)
			assert.Equal(t, string(billing.DunningRecovered), ended[0].Reason)

			calls := len(e.pay.Calls())
			again, err := e.c.PaymentMethodUpdated(ctx, ur(e.user, "card-1"))
			require.NoError(t, err)
			assert.True(t, again.Repeated)
			require.Len(t, again.Periods, 2)
			assert.Equal(t, calls, len(e.pay.Calls()), "a repeat charges nothing")

			e.days(t, 9, 13)
			assert.Equal(t, []int{0, 1, 3, 5, 7, 8}, e.attemptDays(owed.SubscriptionID), "no retry after the recovery")
			assert.Equal(t, 1, e.events.Count(billing.EventDunningEnded))
		})
	}
}

// TestDunningRecoveredOnSession (every layout): the customer confirms
// the declined payment on session; the processor's word of it ends the
// dunning once, and no retry or notice follows.
func TestDunningRecoveredOnSession(t *testing.T) {
	t.Parallel()
	for _, st := range userStores() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			e := newDunningEnv(t, st, billing.DunningPolicy{})
			owed := e.subscribeDeclined(t, billingtest.DeclinedAs(billing.DeclineInsufficientFunds, "insufficient_funds", ""), billing.TermMonthly)
			e.days(t, 1, 2)
			cur := e.period(t, owed.SubscriptionID)
			require.NoError(t, e.pay.ConfirmOnSession(cur.TransactionID))
			e.clock.Set(time.Date(2025, 2, 5, 12, 0, 0, 0, time.UTC))
			for range 2 { // redelivered
				_, _, err := e.c.ApplySettlement(ctx, billing.Settlement{SubscriptionID: cur.SubscriptionID, TransactionID: cur.TransactionID, Kind: billing.SettlementSettled})
				require.NoError(t, err)
			}
			got := e.period(t, owed.SubscriptionID)
			assert.Equal(t, billing.StatusCompleted, got.Status)
			assert.Equal(t, billing.DunningRecovered, got.Dunning.End)
			e.days(t, 3, 20)
			assert.Equal(t, []int{0, 1}, e.attemptDays(owed.SubscriptionID))
			assert.Equal(t, []string{billing.PaymentFailedNoticeEvent}, e.notices(), "no final notice")
			assert.Equal(t, 1, e.events.Count(billing.EventDunningEnded))
		})
	}
}

// TestDunningNoticeOnceUnderFailuresAndCrashes (every layout, in memory
// and on the local DynamoDB server): a send that fails is
// released and sent by the next run, once; a crash between the claim and
// the send (the directory panics) loses that notice rather than send it
// twice; runs repeated the same day send nothing again.
func TestDunningNoticeOnceUnderFailuresAndCrashes(t *testing.T) {
	t.Parallel()
	for _, st := range userStores() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			e := newDunningEnv(t, st, billing.DunningPolicy{})
			e.sent.FailAll(errors.New("mail server down"))
			owed := e.subscribeDeclined(t, billingtest.DeclinedAs(billing.DeclineInsufficientFunds, "insufficient_funds", ""), billing.TermMonthly)
			assert.Empty(t, e.notices())
			assert.Empty(t, e.period(t, owed.SubscriptionID).Dunning.Notices, "the claim was released")
			e.sent.FailAll(nil)
			e.days(t, 1, 1)
			assert.Equal(t, []string{billing.PaymentFailedNoticeEvent}, e.notices())

			// The final notice's send crashes after its claim.
			e.days(t, 2, 10)
			e.users.crash.Store(true)
			e.clock.Set(time.Date(2025, 2, 14, 10, 0, 0, 0, time.UTC))
			rep, err := e.c.Run(t.Context(), billing.RunRequest{Kind: billing.RunRetry})
			require.NoError(t, err)
			require.Len(t, rep.Failed, 1, "the crash is reported")
			e.users.crash.Store(false)
			e.days(t, 11, 16)
			assert.Equal(t, []string{billing.PaymentFailedNoticeEvent}, e.notices(), "claimed, then lost: never sent twice")
			got := e.period(t, owed.SubscriptionID)
			kinds := map[string]int{}
			for _, n := range got.Dunning.Notices {
				kinds[n.Kind]++
			}
			assert.Equal(t, map[string]int{billing.PaymentFailedNoticeEvent: 1, billing.PaymentFinalNoticeEvent: 1}, kinds)
		})
	}
}

// TestDunningHostCollectionsFollowTheSchedule: under dunning a host's
// webhook collection never tries an owed period, neither while the
// schedule goes on (the schedule alone retries) nor after the final
// action (left past due); the customer's own payment (Repay) does, and
// pays it.
func TestDunningHostCollectionsFollowTheSchedule(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newDunningEnv(t, memoryUserStores()[0], billing.DunningPolicy{FinalAction: billing.FinalLeavePastDue})
	owed := e.subscribeDeclined(t, billingtest.DeclinedAs(billing.DeclineInsufficientFunds, "insufficient_funds", ""), billing.TermMonthly)
	e.clock.Set(time.Date(2025, 2, 4, 12, 0, 0, 0, time.UTC))
	rep, err := e.c.CollectUser(ctx, e.user, billing.ProcessWebhook)
	require.NoError(t, err)
	assert.Zero(t, rep.Attempted, "the schedule retries, not a webhook")

	e.days(t, 1, 15)
	require.Equal(t, billing.DunningEnd(billing.FinalLeavePastDue), e.period(t, owed.SubscriptionID).Dunning.End)
	calls := len(e.pay.Calls())
	rep, err = e.c.CollectUser(ctx, e.user, billing.ProcessWebhook)
	require.NoError(t, err)
	assert.Zero(t, rep.Attempted)
	assert.Len(t, e.pay.Calls(), calls, "no attempt after the final action")

	e.pay.SetDefault(billingtest.Always(billingtest.Succeeded()))
	_, err = e.c.Periods().Repay(ctx, owed.SubscriptionID)
	require.NoError(t, err)
	got := e.period(t, owed.SubscriptionID)
	assert.Equal(t, billing.StatusCompleted, got.Status)
	assert.Equal(t, billing.DunningEnd(billing.FinalLeavePastDue), got.Dunning.End, "ended once, by the final action")
	assert.Equal(t, 1, e.events.Count(billing.EventDunningEnded))
}
