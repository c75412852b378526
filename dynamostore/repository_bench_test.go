package dynamostore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/dynamotest"
	"github.com/dynabill/billing/internal/layout"
	"github.com/stretchr/testify/require"
)

// BenchmarkScheduledRun pages through the scheduled run over 10,000
// SCHEDULED records of which 100 are due, in both status index modes, on
// the local DynamoDB server, and reports what a run costs per due record:
// items read, DynamoDB calls and read capacity units.
//
//	go test -run XXX -bench ScheduledRun -benchtime 3x .
func BenchmarkScheduledRun(b *testing.B) {
	for _, mode := range []StatusIndexMode{StatusIndexLegacy, StatusIndexSorted} {
		b.Run(mode.String(), func(b *testing.B) {
			client := dynamotest.Client(b)
			tables := TableConfig{Subscriptions: dynamotest.TableName(b, "bench"), StatusIndexMode: mode}
			dynamotest.CreateTable(b, client, SubscriptionsTableDefinition(tables))
			now := time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC)
			seedScheduled(b, client, tables.Subscriptions, now, 10_000, 100)
			w := dynamotest.Wrap(client)
			repo, err := NewRepository(Config{Client: w, Tables: tables})
			require.NoError(b, err)
			b.ResetTimer()
			var read, due, calls int
			var rcu float64
			for b.Loop() {
				w.Reset()
				read, due = 0, 0
				cur := ""
				for {
					p, err := billing.ScheduledPage(context.Background(), repo, now, cur)
					require.NoError(b, err)
					read += p.Scanned
					due += len(p.Items)
					if cur = p.Next; cur == "" {
						break
					}
				}
				calls, rcu = w.TotalCalls(), w.ReadCapacity()
			}
			require.Equal(b, 100, due, "found %d due records, want 100", due)
			b.ReportMetric(float64(read)/float64(due), "items-read/due-item")
			b.ReportMetric(float64(calls)/float64(due), "calls/due-item")
			b.ReportMetric(rcu/float64(due), "RCU/due-item")
		})
	}
}

// seedScheduled writes n SCHEDULED records straight to the table, the
// first due of them billed before now and the rest in the future.
func seedScheduled(b *testing.B, client API, table string, now time.Time, n, due int) {
	b.Helper()
	var reqs []types.WriteRequest
	flush := func() {
		if len(reqs) == 0 {
			return
		}
		in := map[string][]types.WriteRequest{table: reqs}
		for len(in) > 0 {
			out, err := client.BatchWriteItem(context.Background(), &dynamodb.BatchWriteItemInput{RequestItems: in})
			require.NoError(b, err)
			in = out.UnprocessedItems
		}
		reqs = nil
	}
	for i := range n {
		bd := now.Add(time.Duration(i+1) * time.Hour) // not due
		if i < due {
			bd = now.Add(-time.Duration(i+1) * time.Hour)
		}
		s := billing.Subscription{UserID: fmt.Sprintf("bench-user-%05d", i), SubscriptionID: fmt.Sprintf("bench-sub-%05d", i),
			Status: billing.StatusScheduled, Amount: billing.Cents(499), BillingDate: bd, LastRunDate: now.Add(-48 * time.Hour), Term: billing.TermMonthly}
		item, err := layout.EncodeItem(&s)
		require.NoError(b, err)
		reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: item}})
		if len(reqs) == maxBatchWrite {
			flush()
		}
	}
	flush()
}
