package billingtest_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/entitlement"
	"github.com/dynabill/billing/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The behaviour of Payments is tested in package billing against both
// implementations (forEachPayments); these tests cover the twin's own.

func TestPaymentsOptions(t *testing.T) {
	for _, o := range []memory.PaymentsOptions{{PageSize: 101}, {ReceiptRetention: -1}} {
		_, err := memory.NewPayments(o)
		assert.Error(t, err, "%+v accepted", o)
	}
	p, err := memory.NewPayments(memory.PaymentsOptions{})
	require.NoError(t, err)
	s, err := p.CreateSubscription(t.Context(), entitlement.RecurringSubscription{AccountID: "u", SubscriptionID: "s", SKU: "k", PaymentDay: 1})
	require.NoError(t, err)
	require.False(t, s.CreatedAt.IsZero(), "system clock, whole seconds: %+v", s)
	require.Zero(t, s.CreatedAt.Nanosecond(), "system clock, whole seconds: %+v", s)
	require.Equal(t, 1, s.Version, "system clock, whole seconds: %+v", s)
}

// TestPaymentsConcurrentRecordPayment: of many RecordPayment calls with the
// same prev, exactly one wins; run under -race.
func TestPaymentsConcurrentRecordPayment(t *testing.T) {
	clock := billingtest.NewClock(time.Date(2025, 1, 28, 6, 0, 0, 0, time.UTC))
	p, _ := memory.NewPayments(memory.PaymentsOptions{Clock: clock, PageSize: 1})
	ctx := t.Context()
	due := time.Date(2025, 1, 28, 0, 0, 0, 0, time.UTC)
	prev, err := p.CreateSubscription(ctx, entitlement.RecurringSubscription{AccountID: "u", SubscriptionID: "s", SKU: "k",
		PaymentDay: 28, PaymentAmount: 100, NextPaymentDate: due})
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, conflicts := 0, 0
	for i := range 20 {
		wg.Go(func() {
			r := entitlement.Receipt{AccountID: "u", SubscriptionID: "s", SKU: "k", ProcessedDate: due.Add(time.Duration(i) * time.Second), ProcessedAmount: 100}
			_, _, err := p.RecordPayment(ctx, prev, r, due.AddDate(0, 1, 0), time.Time{})
			_, _, _ = p.DuePaymentsByDate(ctx, due, "")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, billing.ErrConflict):
				conflicts++
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	recs, _ := p.ReceiptsByAccount(ctx, "u", time.Time{})
	require.Equal(t, 1, wins, "wins %d conflicts %d receipts %d", wins, conflicts, len(recs))
	require.Equal(t, 19, conflicts, "wins %d conflicts %d receipts %d", wins, conflicts, len(recs))
	require.Len(t, recs, 1, "wins %d conflicts %d receipts %d", wins, conflicts, len(recs))
	s, _ := p.GetSubscription(ctx, "u", "s", "k")
	require.Equal(t, 2, s.Version, "stored %+v", s)
	require.Equal(t, "February", fmt.Sprint(s.NextPaymentDate.Month()), "stored %+v", s)
}
