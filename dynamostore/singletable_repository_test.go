package dynamostore_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/internal/storetest"
	"github.com/dynabill/billing/memory"
	"github.com/stretchr/testify/require"
)

// singleTableUser maps a suite user to a subscription of its own account.
func singleTableUser(base string) string {
	return layout.SubscriptionRef{AccountID: base, SubscriptionID: "S1", SKU: "SKU9"}.UserID()
}

var singleTableSuite = billingtest.SuiteOptions{UserID: singleTableUser, SkipStatusQueries: true, SeveralOpen: true,
	RawStores: storetest.SingleTableRawStores}

func TestSingleTableRepositoryConformance(t *testing.T) {
	billingtest.TestRepositoryWith(t, func(t *testing.T, opts memory.Options) (billing.Repository, billing.History) {
		repo := storetest.NewSingleTableStore(t, nil, opts)
		return repo, repo.History()
	}, singleTableSuite)
}

func TestSingleTableHistoryConformance(t *testing.T) {
	billingtest.TestHistoryWith(t, func(t *testing.T) billing.History {
		return storetest.NewSingleTableStore(t, nil, memory.Options{}).History()
	}, singleTableSuite)
}

func TestSingleTableLayout(t *testing.T) {
	billingtest.TestSingleTable(t, func(t *testing.T, clock billing.Clock, pageSize int) billingtest.SingleTableStores {
		repo := storetest.NewSingleTableStore(t, clock, memory.Options{PageSize: pageSize})
		return billingtest.SingleTableStores{Repository: repo, History: repo.History(), Payments: repo.Payments()}
	})
}

// TestSingleTableConcurrentPeriodsOfOneSubscription writes two periods of
// one subscription at once, many times: both writes succeed (a write that
// finds the subscription item's version moved reads it again), and the
// item ends with the open periods and receipts of both.
func TestSingleTableConcurrentPeriodsOfOneSubscription(t *testing.T) {
	t.Parallel()
	clock := billingtest.NewClock(time.Date(2024, 3, 10, 12, 0, 0, 0, time.UTC))
	repo := storetest.NewSingleTableStore(t, clock, memory.Options{})
	ctx := t.Context()
	const rounds = 6
	for i := range rounds {
		ref := layout.SubscriptionRef{AccountID: "conc", SubscriptionID: fmt.Sprint("s", i), SKU: "STREAM"}
		run := time.Date(2024, 3, 1, 8, 0, 0, 0, time.UTC)
		mk := func(bd time.Time, st billing.Status, id string) billing.Period {
			return billing.Period{UserID: ref.UserID(), BillingDate: bd, SubscriptionID: id, Amount: billing.Cents(999),
				Status: st, Term: billing.TermMonthly, LastRunDate: run, CreatedDate: run}
		}
		feb, mar := mk(time.Date(2024, 2, 10, 9, 0, 0, 0, time.UTC), billing.StatusError, fmt.Sprint("feb", i)),
			mk(time.Date(2024, 3, 10, 9, 0, 0, 0, time.UTC), billing.StatusScheduled, fmt.Sprint("mar", i))
		mar.LastRunDate = run.Add(time.Second)
		for _, r := range []*billing.Period{&feb, &mar} {
			require.NoError(t, repo.Add(ctx, r))
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for j, prev := range []billing.Period{feb, mar} {
			wg.Go(func() {
				next := prev.Clone()
				next.Status, next.LastRunDate = billing.StatusCompleted, clock.Now().Add(time.Duration(j)*time.Millisecond)
				next.CompletionDate, next.TransactionID = next.LastRunDate, fmt.Sprint("tx-", prev.SubscriptionID)
				errs[j] = repo.Update(ctx, &prev, &next)
			})
		}
		wg.Wait()
		require.NoError(t, errs[0], "round %d: concurrent updates", i)
		require.NoError(t, errs[1], "round %d: concurrent updates", i)
		sub, err := repo.Payments().GetSubscription(ctx, "conc", ref.SubscriptionID, "STREAM")
		require.NoError(t, err, "round %d: subscription item", i)
		require.True(t, sub.NextPaymentDate.IsZero(), "round %d: subscription item %+v; want nothing due, version 4", i, sub)
		require.True(t, sub.NextReminderDate.IsZero(), "round %d: subscription item %+v; want nothing due, version 4", i, sub)
		require.Equal(t, 4, sub.Version, "round %d: subscription item %+v; want nothing due, version 4", i, sub)
	}
	recs, err := repo.Payments().ReceiptsByAccount(ctx, "conc", time.Time{})
	require.NoError(t, err, "receipts")
	require.Len(t, recs, 2*rounds, "receipts")
}
