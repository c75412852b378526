package billing_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
)

// TestRetryNamesThePeriodsEarlierPayment (issue 40): a decline the
// customer pays on session, whose notice arrives after one, two or three
// retry runs. Every retry names the payment the period's earlier attempts
// left (PaymentRequest.PriorPayment), so a provider keeping the contract
// (billingtest's, as billingstripe) answers from that payment instead of
// charging again: the period is paid once, by the first payment, and the
// late notice, delivered once or twice, is a replay, never a duplicate.
// Before the fix the retry named nothing and the provider made a second
// payment.
func TestRetryNamesThePeriodsEarlierPayment(t *testing.T) {
	for _, declinedRetries := range []int{0, 2} {
		for _, runs := range []int{1, 2, 3} {
			for _, times := range []int{1, 2} {
				t.Run(fmt.Sprintf("%d declined retries/notice after %d runs/delivered %d times", declinedRetries, runs, times), func(t *testing.T) {
					e := newCollectorEnv(t)
					s := e.add("u1", jan31, billing.StatusScheduled)
					steps := []billingtest.Step{}
					for range declinedRetries + 1 {
						steps = append(steps, billingtest.Declined("insufficient_funds", true))
					}
					e.pay.SetUser("u1", append(steps, billingtest.Succeeded())...)
					e.run(billing.RunScheduled)
					declined := e.get(s.SubscriptionID)
					require.Equal(t, billing.StatusError, declined.Status)
					first := declined.TransactionID
					require.NotEmpty(t, first)
					for range declinedRetries {
						e.clock.Advance(24 * time.Hour)
						e.run(billing.RunRetry)
						again := e.get(s.SubscriptionID)
						require.Equal(t, billing.StatusError, again.Status)
						require.Equal(t, first, again.TransactionID, "the retry tried the same payment")
					}

					require.NoError(t, e.pay.ConfirmOnSession(first))
					require.Error(t, e.pay.ConfirmOnSession(first), "a payment succeeds once")
					for range runs {
						e.clock.Advance(24 * time.Hour)
						e.run(billing.RunRetry)
					}
					paid := e.get(s.SubscriptionID)
					assert.Equal(t, billing.StatusCompleted, paid.Status)
					assert.Equal(t, first, paid.TransactionID)
					for range times {
						_, changed, err := e.c.ApplySettlement(context.Background(), billing.Settlement{SubscriptionID: s.SubscriptionID,
							TransactionID: first, Kind: billing.SettlementSettled})
						require.NoError(t, err)
						assert.False(t, changed, "the notice of the payment the retry recorded is a replay")
					}
					assert.Empty(t, e.events.OfType(billing.EventDuplicatePayment))
					billingtest.RequireNoDoubleCharge(t, e.pay)
					require.Len(t, e.pay.ChargesFor(s.SubscriptionID), 1)

					// Every attempt after the first named the payment.
					var priors []string
					for _, c := range e.pay.Calls() {
						priors = append(priors, c.Request.PriorPayment)
					}
					want := []string{""}
					for range declinedRetries + 1 {
						want = append(want, first)
					}
					assert.Equal(t, want, priors)
					rows, err := e.hist.ListBySubscription(context.Background(), s.SubscriptionID)
					require.NoError(t, err)
					completed := 0
					for _, r := range rows {
						if r.Status == billing.StatusCompleted {
							completed++
						}
					}
					assert.Equal(t, 1, completed, "COMPLETED once")
				})
			}
		}
	}
}
