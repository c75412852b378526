package billing_test

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests are about a processor reporting a payment for a period the
// record holds as declined, given up on, or paid by another transaction
// (issue 31): the later word of the processor is recorded once, the
// period is never charged again, and what cannot be recorded is reported.

// logBuffer is an io.Writer safe for a logger's concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// newRecoveryEnv is a collector env whose log lines are kept.
func newRecoveryEnv(t *testing.T, mut ...func(*billing.Config)) (*collectorEnv, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	mut = append(mut, func(c *billing.Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	return newCollectorEnv(t, mut...), logs
}

// historyStatuses is the statuses of a record's history rows, oldest first.
func (e *collectorEnv) historyStatuses(subID string) []billing.Status {
	e.t.Helper()
	rows, err := e.hist.ListBySubscription(context.Background(), subID)
	require.NoError(e.t, err)
	out := make([]billing.Status, len(rows))
	for i, r := range rows {
		out[i] = r.Status
	}
	return out
}

func (e *collectorEnv) get(subID string) billing.Period {
	e.t.Helper()
	cur, err := e.repo.GetByID(context.Background(), subID)
	require.NoError(e.t, err)
	return cur
}

// callsFor counts the provider calls made for subID.
func (e *collectorEnv) callsFor(subID string) int {
	n := 0
	for _, c := range e.pay.Calls() {
		if c.Request.SubscriptionID == subID {
			n++
		}
	}
	return n
}

// requireRecovered applies a settled event for txn to the record subID,
// which is in status from, and checks it is recorded COMPLETED once with
// txn, an EventPaymentSucceeded and one history row; a replay changes
// nothing; the retry runs of the next days never call the provider for
// the period again.
func requireRecovered(t *testing.T, e *collectorEnv, subID, txn string, from billing.Status) {
	t.Helper()
	ctx := context.Background()
	before := e.get(subID)
	require.Equal(t, from, before.Status)
	rows := e.historyStatuses(subID)
	succeeded := e.events.Count(billing.EventPaymentSucceeded)
	ev := billing.Settlement{SubscriptionID: subID, TransactionID: txn, Kind: billing.SettlementSettled}

	e.clock.Advance(time.Hour)
	got, changed, err := e.c.ApplySettlement(ctx, ev)
	require.NoError(t, err, "settled event for a %s record", from)
	require.True(t, changed, "settled event for a %s record changed nothing: %+v", from, got)
	assert.Equal(t, billing.StatusCompleted, got.Status)
	assert.Equal(t, txn, got.TransactionID)
	assert.Empty(t, got.PaymentError, "the decline is cleared")
	assert.False(t, got.NoRetry)
	assert.Equal(t, got.LastRunDate, got.CompletionDate)
	stored := e.get(subID)
	assert.Equal(t, billing.StatusCompleted, stored.Status)
	assert.Equal(t, txn, stored.TransactionID)
	assert.Equal(t, before.Attempt, stored.Attempt, "no attempt is made or counted")
	assert.Equal(t, append(rows, billing.StatusCompleted), e.historyStatuses(subID), "one history row")
	require.Equal(t, succeeded+1, e.events.Count(billing.EventPaymentSucceeded))
	last := e.events.OfType(billing.EventPaymentSucceeded)[succeeded]
	assert.Equal(t, subID, last.SubscriptionID)
	assert.Equal(t, txn, last.TransactionID)

	// Delivered again: a replay.
	again, changed, err := e.c.ApplySettlement(ctx, ev)
	require.NoError(t, err, "replay")
	assert.False(t, changed, "replay changed the record")
	assert.Equal(t, stored.LastRunDate, again.LastRunDate)
	assert.Equal(t, append(rows, billing.StatusCompleted), e.historyStatuses(subID), "a replay wrote history")
	assert.Equal(t, succeeded+1, e.events.Count(billing.EventPaymentSucceeded), "a replay emitted")

	// The retry runs of the next days leave the paid period alone.
	calls := e.callsFor(subID)
	for range 3 {
		e.clock.Advance(24 * time.Hour)
		e.run(billing.RunRetry)
	}
	assert.Equal(t, calls, e.callsFor(subID), "the period was charged again after its payment was recorded")
	assert.Equal(t, billing.StatusCompleted, e.get(subID).Status)
	billingtest.RequireHistoryMatchesPrimary(t, e.repo, e.hist, stored.UserID)
}

// TestSettlementRecoversDeclinedPeriod: an off-session charge declined
// (ERROR, its transaction recorded) that the customer then pays
// on-session, or an ACH debit whose return was delivered before its
// settlement, or a declined period since marked STALE: the settled event
// for the record's own transaction records it COMPLETED once.
func TestSettlementRecoversDeclinedPeriod(t *testing.T) {
	t.Run("declined card paid on-session", func(t *testing.T) {
		e := newCollectorEnv(t)
		s := e.add("u1", jan31, billing.StatusScheduled)
		e.pay.SetUser("u1", billingtest.Declined("insufficient_funds", true))
		e.run(billing.RunScheduled)
		cur := e.get(s.SubscriptionID)
		require.Equal(t, billing.StatusError, cur.Status)
		require.NotEmpty(t, cur.TransactionID)
		requireRecovered(t, e, s.SubscriptionID, cur.TransactionID, billing.StatusError)
	})
	t.Run("declined as final, paid on-session", func(t *testing.T) {
		// 3-D Secure required: not retried off-session, but confirmed by
		// the customer.
		e := newCollectorEnv(t)
		s := e.add("u1", jan31, billing.StatusScheduled)
		e.pay.SetUser("u1", billingtest.Declined("authentication_required", false))
		e.run(billing.RunScheduled)
		cur := e.get(s.SubscriptionID)
		require.True(t, cur.NoRetry)
		requireRecovered(t, e, s.SubscriptionID, cur.TransactionID, billing.StatusError)
	})
	t.Run("ACH return delivered before the settlement", func(t *testing.T) {
		// Changed on purpose: the two events cannot be told from a
		// return followed by a recovery, and recording the payment keeps
		// the customer from paying the period twice.
		e := newCollectorEnv(t)
		s := e.add("u1", jan31, billing.StatusScheduled)
		e.pay.SetUser("u1", billingtest.Pending())
		e.run(billing.RunScheduled)
		cur := e.get(s.SubscriptionID)
		_, changed, err := e.c.ApplySettlement(context.Background(), billing.Settlement{SubscriptionID: s.SubscriptionID,
			TransactionID: cur.TransactionID, Kind: billing.SettlementReturned, Reason: "R01"})
		require.NoError(t, err)
		require.True(t, changed)
		requireRecovered(t, e, s.SubscriptionID, cur.TransactionID, billing.StatusError)
	})
	t.Run("declined, then stale", func(t *testing.T) {
		e := newCollectorEnv(t)
		s := e.add("u1", jan31, billing.StatusScheduled)
		e.pay.SetUser("u1", billingtest.Declined("insufficient_funds", false))
		e.run(billing.RunScheduled)
		txn := e.get(s.SubscriptionID).TransactionID
		e.clock.Advance(35 * 24 * time.Hour)
		e.run(billing.RunRetry)
		require.Equal(t, billing.StatusStale, e.get(s.SubscriptionID).Status)
		requireRecovered(t, e, s.SubscriptionID, txn, billing.StatusStale)
	})
}

// newLookupEnv is a collector env whose provider answers lookups and
// submits ACH debits (pending) unless scripted otherwise.
func newLookupEnv(t *testing.T, mut ...func(*billing.Config)) (*collectorEnv, *logBuffer) {
	t.Helper()
	var p *billingtest.Provider
	mut = append(mut, func(c *billing.Config) {
		p = billingtest.NewProvider(billingtest.ProviderOptions{Clock: c.Clock, Lookup: true, Default: billingtest.Always(billingtest.Pending())})
		c.Provider = p
	})
	e, logs := newRecoveryEnv(t, mut...)
	e.pay = p
	return e, logs
}

// TestSettlementAfterOverdueLookupDecline: the retry run looked an overdue
// ACH debit up and recorded the processor's decline (ERROR); the debit's
// settlement arrives after all and is recorded, and the period is not
// charged again.
func TestSettlementAfterOverdueLookupDecline(t *testing.T) {
	e, _ := newLookupEnv(t)
	s := e.add("u1", jan31, billing.StatusScheduled)
	e.run(billing.RunScheduled)
	ch := e.pay.ChargesFor(s.SubscriptionID)
	require.Len(t, ch, 1)
	require.NoError(t, e.pay.Return(ch[0].Key))
	e.clock.Advance(15 * 24 * time.Hour)
	rep := e.run(billing.RunRetry)
	require.Equal(t, 1, e.pay.Lookups(), "report: %+v", rep)
	require.Equal(t, billing.StatusError, e.get(s.SubscriptionID).Status, "the lookup's decline is recorded")
	requireRecovered(t, e, s.SubscriptionID, ch[0].TransactionID, billing.StatusError)
	billingtest.RequireNoDoubleCharge(t, e.pay)
}

// TestSettlementOfEarlierAttemptRecordsUnpaidPeriod: the retry run made a
// new attempt (a new transaction) after a decline, and the earlier
// attempt's payment succeeds afterwards (an intent confirmed
// on-session): the unpaid period is recorded paid with that transaction.
func TestSettlementOfEarlierAttemptRecordsUnpaidPeriod(t *testing.T) {
	t.Run("the record declined again", func(t *testing.T) {
		e, logs := newRecoveryEnv(t)
		s := e.add("u1", jan31, billing.StatusScheduled)
		e.pay.SetIgnorePriorPayment(true) // a new payment per attempt: the earlier one stays payable
		e.pay.SetUser("u1", billingtest.Declined("insufficient_funds", true), billingtest.Declined("insufficient_funds", true))
		e.run(billing.RunScheduled)
		first := e.get(s.SubscriptionID).TransactionID
		e.clock.Advance(24 * time.Hour)
		e.run(billing.RunRetry)
		cur := e.get(s.SubscriptionID)
		require.Equal(t, 2, cur.Attempt)
		require.NotEqual(t, first, cur.TransactionID)
		requireRecovered(t, e, s.SubscriptionID, first, billing.StatusError)
		assert.Contains(t, logs.String(), "payment of another transaction recorded")
	})
	t.Run("the record's new debit is pending", func(t *testing.T) {
		e, logs := newRecoveryEnv(t)
		s := e.add("u1", jan31, billing.StatusScheduled)
		e.pay.SetIgnorePriorPayment(true) // a new payment per attempt: the earlier one stays payable
		e.pay.SetUser("u1", billingtest.Declined("insufficient_funds", true), billingtest.Pending())
		e.run(billing.RunScheduled)
		first := e.get(s.SubscriptionID).TransactionID
		e.clock.Advance(24 * time.Hour)
		e.run(billing.RunRetry)
		pending := e.get(s.SubscriptionID)
		require.Equal(t, billing.StatusACHSent, pending.Status)
		requireRecovered(t, e, s.SubscriptionID, first, billing.StatusACHSent)
		assert.Contains(t, logs.String(), "ACH debit is still pending")
		// The pending debit settles too: the period was paid twice.
		_, changed, err := e.c.ApplySettlement(context.Background(), billing.Settlement{SubscriptionID: s.SubscriptionID,
			TransactionID: pending.TransactionID, Kind: billing.SettlementSettled})
		require.ErrorIs(t, err, billing.ErrDuplicatePayment)
		assert.False(t, changed)
		dup := e.events.OfType(billing.EventDuplicatePayment)
		require.Len(t, dup, 1)
		assert.Equal(t, pending.TransactionID, dup[0].TransactionID)
	})
}

// TestSettlementDuplicatePaymentReported: a period paid by the retry
// run's new attempt, whose earlier (declined) attempt is paid afterwards:
// nothing is written, and the duplicate is returned as an error, emitted
// as an event naming the transaction to refund, and logged.
func TestSettlementDuplicatePaymentReported(t *testing.T) {
	e, logs := newRecoveryEnv(t)
	s := e.add("u1", jan31, billing.StatusScheduled)
	e.pay.SetIgnorePriorPayment(true) // a new payment per attempt: the earlier one stays payable
	e.pay.SetUser("u1", billingtest.Declined("insufficient_funds", true), billingtest.Succeeded())
	e.run(billing.RunScheduled)
	first := e.get(s.SubscriptionID).TransactionID
	e.clock.Advance(24 * time.Hour)
	e.run(billing.RunRetry)
	paid := e.get(s.SubscriptionID)
	require.Equal(t, billing.StatusCompleted, paid.Status)
	require.NotEqual(t, first, paid.TransactionID)
	rows := e.historyStatuses(s.SubscriptionID)

	ev := billing.Settlement{SubscriptionID: s.SubscriptionID, TransactionID: first, Kind: billing.SettlementSettled}
	for i := range 2 { // a redelivery reports it again
		got, changed, err := e.c.ApplySettlement(context.Background(), ev)
		require.ErrorIs(t, err, billing.ErrDuplicatePayment)
		require.ErrorIs(t, err, billing.ErrTransactionMismatch)
		assert.False(t, changed)
		assert.Equal(t, paid.TransactionID, got.TransactionID)
		dup := e.events.OfType(billing.EventDuplicatePayment)
		require.Len(t, dup, i+1)
		assert.Equal(t, s.SubscriptionID, dup[i].SubscriptionID)
		assert.Equal(t, first, dup[i].TransactionID, "the event names the payment to refund")
		assert.Contains(t, dup[i].Reason, paid.TransactionID)
	}
	assert.Equal(t, paid, e.get(s.SubscriptionID), "a duplicate changed the record")
	assert.Equal(t, rows, e.historyStatuses(s.SubscriptionID), "a duplicate wrote history")
	assert.Contains(t, logs.String(), "duplicate payment")

	// Refunded since: a payment of another transaction is still a
	// duplicate.
	_, _, err := e.c.ApplySettlement(context.Background(), billing.Settlement{SubscriptionID: s.SubscriptionID,
		TransactionID: paid.TransactionID, Kind: billing.SettlementRefunded})
	require.NoError(t, err)
	_, _, err = e.c.ApplySettlement(context.Background(), ev)
	require.ErrorIs(t, err, billing.ErrDuplicatePayment)
}

// TestSettlementOverlapReportedAfterReactivate: an ACH debit given up on
// (STALE, ach-overdue), the user reactivated with a period starting
// inside the one the debit paid, then the debit settles: the payment is
// recorded, and the overlap is reported with both period IDs.
func TestSettlementOverlapReportedAfterReactivate(t *testing.T) {
	for _, tc := range []struct {
		name       string
		reactivate time.Time
		overlap    bool
	}{
		{"inside the paid period", jan31.AddDate(0, 0, 10), true},
		{"after the paid period", jan31.AddDate(0, 1, 0), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, logs := newRecoveryEnv(t)
			s := e.add("u1", jan31, billing.StatusScheduled)
			e.pay.SetUser("u1", billingtest.Pending())
			e.run(billing.RunScheduled)
			txn := e.get(s.SubscriptionID).TransactionID
			e.clock.Advance(15 * 24 * time.Hour)
			e.run(billing.RunRetry)
			require.Equal(t, billing.StatusStale, e.get(s.SubscriptionID).Status)
			recs := e.records("u1")
			require.Len(t, recs, 2)
			_, err := e.c.Periods().Cancel(context.Background(), recs[1].SubscriptionID)
			require.NoError(t, err)
			r, err := e.c.Reactivate(context.Background(), "u1", tc.reactivate)
			require.NoError(t, err)

			e.clock.Advance(time.Hour)
			got, changed, err := e.c.ApplySettlement(context.Background(), billing.Settlement{SubscriptionID: s.SubscriptionID,
				TransactionID: txn, Kind: billing.SettlementSettled})
			require.NoError(t, err)
			require.True(t, changed)
			assert.Equal(t, billing.StatusCompleted, got.Status, "the late settlement is recorded")
			assert.Equal(t, billing.StatusScheduled, e.get(r.SubscriptionID).Status, "the later period is left as it is")
			over := e.events.OfType(billing.EventPeriodsOverlap)
			if !tc.overlap {
				assert.Empty(t, over)
				assert.NotContains(t, logs.String(), "overlaps")
				return
			}
			require.Len(t, over, 1, "events: %+v", e.events.Events())
			assert.Equal(t, s.SubscriptionID, over[0].SubscriptionID)
			assert.Equal(t, r.SubscriptionID, over[0].RelatedSubscriptionID)
			assert.Equal(t, txn, over[0].TransactionID)
			assert.Contains(t, over[0].Reason, r.SubscriptionID)
			assert.Contains(t, logs.String(), "paid period overlaps a later one")
			assert.Contains(t, logs.String(), r.SubscriptionID)
			// A replay reports nothing more.
			_, changed, err = e.c.ApplySettlement(context.Background(), billing.Settlement{SubscriptionID: s.SubscriptionID,
				TransactionID: txn, Kind: billing.SettlementSettled})
			require.NoError(t, err)
			assert.False(t, changed)
			assert.Len(t, e.events.OfType(billing.EventPeriodsOverlap), 1)
		})
	}
}

// TestSettlementOfForgivenPeriodReported: a period declined twice, then
// cancelled or waived by an operator, is paid after all (the customer
// confirms the first intent on session, or the second one settles). The
// money is for a period no longer owed: nothing is written, and each
// settled event is reported as a duplicate payment naming the
// transaction to refund (ErrDuplicatePayment, EventDuplicatePayment, a
// warning), not ignored as another record's or refused as an illegal
// transition (found by review: before, neither was recorded nor
// reported).
func TestSettlementOfForgivenPeriodReported(t *testing.T) {
	for _, forgive := range []string{"cancel", "waive"} {
		t.Run(forgive, func(t *testing.T) {
			ctx := context.Background()
			e, logs := newRecoveryEnv(t)
			s := e.add("u1", jan31, billing.StatusScheduled)
			e.pay.SetIgnorePriorPayment(true) // a new payment per attempt: the earlier one stays payable
			e.pay.SetUser("u1", billingtest.Declined("insufficient_funds", true), billingtest.Declined("insufficient_funds", true))
			e.run(billing.RunScheduled)
			first := e.get(s.SubscriptionID).TransactionID
			e.clock.Advance(24 * time.Hour)
			e.run(billing.RunRetry)
			second := e.get(s.SubscriptionID).TransactionID
			require.NotEqual(t, first, second)
			var err error
			if forgive == "cancel" {
				_, err = e.c.Periods().Cancel(ctx, s.SubscriptionID)
			} else {
				_, err = e.c.Periods().WaiveByID(ctx, s.SubscriptionID)
			}
			require.NoError(t, err)
			closed := e.get(s.SubscriptionID)
			rows := e.historyStatuses(s.SubscriptionID)
			for i, txn := range []string{first, second} {
				rec, changed, err := e.c.ApplySettlement(ctx, billing.Settlement{SubscriptionID: s.SubscriptionID, TransactionID: txn, Kind: billing.SettlementSettled})
				require.ErrorIs(t, err, billing.ErrDuplicatePayment, txn)
				assert.False(t, changed)
				assert.Equal(t, closed.Status, rec.Status)
				assert.Equal(t, i+1, e.events.Count(billing.EventDuplicatePayment))
			}
			assert.Equal(t, closed, e.get(s.SubscriptionID), "nothing written")
			assert.Equal(t, rows, e.historyStatuses(s.SubscriptionID), "no history row")
			assert.Contains(t, logs.String(), "duplicate payment")
		})
	}
}
