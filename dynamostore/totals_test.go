package dynamostore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/dynamotest"
)

// totalsStore is a legacy repository keeping day totals, behind a fault
// injecting wrapper.
func totalsStore(t *testing.T) (*dynamostore.Repository, *dynamotest.Wrapper) {
	t.Helper()
	client := dynamotest.Client(t)
	tables := dynamostore.TableConfig{
		Subscriptions: dynamotest.TableName(t, "billing-activity"),
		History:       dynamotest.TableName(t, "billing-activity-history"),
		Totals:        dynamotest.TableName(t, "billing-totals"),
		TotalsShards:  2,
	}
	for _, def := range dynamostore.TableDefinitions(tables) {
		if aws.ToString(def.TableName) != "locks" {
			dynamotest.CreateTable(t, client, def)
		}
	}
	w := dynamotest.Wrap(client)
	t.Cleanup(func() { w.AssertNoViolations(t) })
	repo, err := dynamostore.NewRepository(dynamostore.Config{Client: w, Tables: tables})
	require.NoError(t, err)
	return repo, w
}

func scheduled(user string, i int) billing.Period {
	due := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	run := due.Add(-time.Hour)
	return billing.Period{UserID: user, BillingDate: due, SubscriptionID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i),
		Amount: billing.Cents(int64(100 * (i + 1))), Status: billing.StatusScheduled, BillingPeriod: "03/2025",
		LastRunDate: run, CreatedDate: run, Process: billing.ProcessInitial, Term: billing.TermMonthly, ReceiptTierName: "Plus:v2"}
}

func collected(s billing.Period) billing.Period {
	n := s.Clone()
	n.Status, n.Attempt = billing.StatusCompleted, s.Attempt+1
	n.LastRunDate = s.LastRunDate.Add(10 * time.Hour)
	n.CompletionDate = n.LastRunDate
	return n
}

// TestTotalsRetriedOnTransactionConflict: a transaction cancelled only
// because another one wrote the shared counter item is tried again by
// the store (nothing was written), so the collection is not reported as
// a conflict and is counted once.
func TestTotalsRetriedOnTransactionConflict(t *testing.T) {
	ctx := context.Background()
	repo, w := totalsStore(t)
	s := scheduled("conflict-user", 1)
	require.NoError(t, repo.Add(ctx, &s))
	conflict := &types.TransactionCanceledException{Message: aws.String("Transaction cancelled"), CancellationReasons: []types.CancellationReason{
		{Code: aws.String("None")}, {Code: aws.String("None")}, {Code: aws.String("TransactionConflict")}}}
	w.FailNth("TransactWriteItems", 1, conflict)
	w.FailNth("TransactWriteItems", 2, conflict)
	next := collected(s)
	require.NoError(t, repo.Update(ctx, &s, &next))
	days, err := repo.Totals(ctx, next.CompletionDate, next.CompletionDate.AddDate(0, 0, 1))
	require.NoError(t, err)
	require.Equal(t, billing.Tally{Count: 1, Amount: s.Amount}, days[0].Collected)
}

// TestTotalsCrashSweep fails the k-th DynamoDB call of a run of
// collections and declines (before the call reaches the server, or after
// it was applied), repeats what failed as the engine does (the same write
// again; a conflict means it was written), and checks that the totals
// equal the sums over the records.
func TestTotalsCrashSweep(t *testing.T) {
	ctx := context.Background()
	repo, w := totalsStore(t)
	const users = 4
	for k := 1; k <= 2*users; k++ {
		for _, after := range []bool{false, true} {
			t.Run(fmt.Sprintf("call%d/after=%v", k, after), func(t *testing.T) {
				base := (k*2 + map[bool]int{false: 0, true: 1}[after]) * 100
				var recs []billing.Period
				for i := range users {
					s := scheduled(fmt.Sprintf("sweep-%d-%d", base, i), base+i)
					require.NoError(t, repo.Add(ctx, &s))
					recs = append(recs, s)
				}
				at := collected(recs[0]).LastRunDate // the day of every outcome
				before, err := repo.Totals(ctx, at, at.AddDate(0, 0, 1))
				require.NoError(t, err)
				if after {
					w.FailAfterInner("TransactWriteItems", k, nil)
				} else {
					w.FailNth("TransactWriteItems", k, nil)
				}
				defer w.ClearFaults()
				var want billing.Tally
				declines := int64(0)
				for i, s := range recs {
					next := collected(s)
					if i%2 == 1 {
						next.Status, next.CompletionDate, next.PaymentError = billing.StatusError, time.Time{}, "insufficient funds"
						declines++
					} else {
						want.Count++
						want.Amount += s.Amount
					}
					for try := 0; ; try++ {
						err := repo.Update(ctx, &s, &next)
						if err == nil || errors.Is(err, billing.ErrConflict) {
							break
						}
						require.ErrorIs(t, err, dynamotest.ErrInjected)
						require.Less(t, try, 2)
					}
					got, err := repo.Get(ctx, s.UserID, s.BillingDate)
					require.NoError(t, err)
					require.Equal(t, next.Status, got.Status)
				}
				days, err := repo.Totals(ctx, at, at.AddDate(0, 0, 1))
				require.NoError(t, err)
				require.Equal(t, want, billing.Tally{Count: days[0].Collected.Count - before[0].Collected.Count, Amount: days[0].Collected.Amount - before[0].Collected.Amount})
				require.Equal(t, declines, days[0].Declined.Count-before[0].Declined.Count)
			})
		}
	}
}

// TestTotalsCapacity measures what the totals add: the WCU of a
// collection and of a decline with and without them, and the reads of
// Today's 30 days (docs/capacity.md, "Day totals").
func TestTotalsCapacity(t *testing.T) {
	ctx := context.Background()
	repo, w := totalsStore(t)
	client := dynamotest.Client(t)
	plainTables := dynamostore.TableConfig{
		Subscriptions: dynamotest.TableName(t, "plain-activity"),
		History:       dynamotest.TableName(t, "plain-history"),
	}
	dynamotest.CreateTable(t, client, dynamostore.SubscriptionsTableDefinition(plainTables))
	dynamotest.CreateTable(t, client, dynamostore.HistoryTableDefinition(plainTables))
	pw := dynamotest.Wrap(client)
	plain, err := dynamostore.NewRepository(dynamostore.Config{Client: pw, Tables: plainTables})
	require.NoError(t, err)
	measure := func(r *dynamostore.Repository, w *dynamotest.Wrapper, i int, decline bool) float64 {
		s := scheduled(fmt.Sprintf("cap-%d", i), i)
		require.NoError(t, r.Add(ctx, &s))
		next := collected(s)
		if decline {
			next.Status, next.CompletionDate, next.PaymentError = billing.StatusError, time.Time{}, "insufficient funds"
		}
		w.Reset()
		require.NoError(t, r.Update(ctx, &s, &next))
		return w.WriteCapacity()
	}
	with, without := measure(repo, w, 1, false), measure(plain, pw, 2, false)
	dWith, dWithout := measure(repo, w, 3, true), measure(plain, pw, 4, true)
	t.Logf("collection: %.1f WCU with totals, %.1f without; decline: %.1f with, %.1f without", with, without, dWith, dWithout)
	require.Equal(t, 2.0, with-without, "a collection adds one counter item in the transaction")
	require.Equal(t, 4.0, dWith-dWithout, "a decline adds the counter and its reason's item")
	w.Reset()
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	_, err = repo.Totals(ctx, now.AddDate(0, 0, -29), now.AddDate(0, 0, 1))
	require.NoError(t, err)
	t.Logf("30 days of totals (2 shards): %d BatchGetItem calls, %.1f RCU", w.Calls("BatchGetItem"), w.ReadCapacity())
}
