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
// SCHEDULED records, of which 100 or 1,000 are due, in every status index
// mode (the due index with 8 shards), on the local DynamoDB server, and
// reports what a run costs per due record: items read, DynamoDB calls and
// read capacity units; and what a run that finds nothing due costs.
//
//	CI=true go test -run XXX -bench ScheduledRun -benchtime 3x .
func BenchmarkScheduledRun(b *testing.B) {
	const shards = 8
	now := time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC)
	for _, mode := range []StatusIndexMode{StatusIndexLegacy, StatusIndexSorted, StatusIndexDue} {
		b.Run(mode.String(), func(b *testing.B) {
			client := dynamotest.Client(b)
			tables := TableConfig{Subscriptions: dynamotest.TableName(b, "bench"), StatusIndexMode: mode}
			if mode == StatusIndexDue {
				tables.DueShards = shards
			}
			dynamotest.CreateTable(b, client, SubscriptionsTableDefinition(tables))
			w := dynamotest.Wrap(client)
			repo, err := NewRepository(Config{Client: w, Tables: tables})
			require.NoError(b, err)
			seedScheduled(b, repo, now, 10_000, 1_000)
			for _, c := range []struct {
				name   string
				before time.Time
				due    int
			}{
				{"10k-100", now.Add(-900 * time.Hour), 100},
				{"10k-1k", now, 1_000},
				{"nothing-due", now.Add(-2000 * time.Hour), 0},
			} {
				b.Run(c.name, func(b *testing.B) {
					var read, due, calls int
					var rcu float64
					for b.Loop() {
						w.Reset()
						read, due = 0, 0
						cur := ""
						for {
							p, err := billing.ScheduledPage(context.Background(), repo, c.before, cur)
							require.NoError(b, err)
							read += p.Scanned
							due += len(p.Items)
							if cur = p.Next; cur == "" {
								break
							}
						}
						calls, rcu = w.TotalCalls(), w.ReadCapacity()
					}
					require.Equal(b, c.due, due, "found %d due records, want %d", due, c.due)
					if c.due == 0 {
						b.ReportMetric(float64(calls), "calls/run")
						b.ReportMetric(rcu, "RCU/run")
						b.ReportMetric(float64(read), "items-read/run")
						return
					}
					b.ReportMetric(float64(read)/float64(due), "items-read/due-item")
					b.ReportMetric(float64(calls)/float64(due), "calls/due-item")
					b.ReportMetric(rcu/float64(due), "RCU/due-item")
				})
			}
		})
	}
}

// seedScheduled writes n SCHEDULED records straight to the table as repo
// encodes them (with their due keys), the first due of them billed before
// now, an hour apart, and the rest in the future.
func seedScheduled(b *testing.B, repo *Repository, now time.Time, n, due int) {
	b.Helper()
	client, table := repo.cfg.Client, repo.cfg.Tables.Subscriptions
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
		reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: repo.withDue(item, &s)}})
		if len(reqs) == maxBatchWrite {
			flush()
		}
	}
	flush()
}
