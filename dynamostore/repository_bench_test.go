package dynamostore

import (
	"context"
	"fmt"
	"github.com/dynabill/billing/internal/sdkav"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/entitlement"
	"github.com/dynabill/billing/internal/dynamotest"
	"github.com/dynabill/billing/internal/layout"
	"github.com/stretchr/testify/require"
)

// BenchmarkScheduledRun pages through the scheduled run over 10,000
// SCHEDULED records, of which 100 or 1,000 are due, in every status index
// mode of the legacy table (the due index with 8 shards) and of the single
// table (the payment-index walk, and the due index with 8 shards), on the
// local DynamoDB server, and reports what a run costs per due record:
// items read, DynamoDB calls and read capacity units; and what a run that
// finds nothing due costs.
//
//	CI=true go test -run XXX -bench ScheduledRun -benchtime 2x ./dynamostore
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
			benchScheduledRuns(b, repo, w, now)
		})
	}
	for _, k := range []int{0, shards} {
		name := "single-walk"
		if k > 0 {
			name = "single-due"
		}
		b.Run(name, func(b *testing.B) {
			client := dynamotest.Client(b)
			table := SingleTableConfig{Table: dynamotest.TableName(b, "bench-single"), AccountPrefix: "ACC#", TTLAttribute: "TTL", DueShards: k}
			dynamotest.CreateTable(b, client, SingleTableDefinition(table))
			w := dynamotest.Wrap(client)
			repo, err := NewSingleTableRepository(SingleTableStoreConfig{Client: w, Table: table, Clock: billing.ClockFunc(func() time.Time { return now })})
			require.NoError(b, err)
			seedSingleScheduled(b, repo, now, 10_000, 1_000)
			benchScheduledRuns(b, repo, w, now)
		})
	}
}

// benchScheduledRuns runs the scheduled run's cases on repo, which holds
// the records of seedScheduled, and reports their costs.
func benchScheduledRuns(b *testing.B, repo billing.Repository, w *dynamotest.Wrapper, now time.Time) {
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
					p, err := repo.QueryStatus(context.Background(), billing.StatusQuery{Status: billing.StatusScheduled, Before: c.before, Cursor: cur})
					require.NoError(b, err)
					due += len(p.Items)
					if cur = p.Next; cur == "" {
						break
					}
				}
				read, calls, rcu = w.ItemsRead(), w.TotalCalls(), w.ReadCapacity()
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
}

// seedScheduled writes n SCHEDULED records straight to the table as repo
// encodes them (with their due keys), the first due of them billed before
// now, an hour apart, and the rest in the future.
func seedScheduled(b *testing.B, repo *Repository, now time.Time, n, due int) {
	b.Helper()
	seedItems(b, repo.cfg.Client, repo.cfg.Tables.Subscriptions, now, n, due, func(i int, bd time.Time) []map[string]types.AttributeValue {
		s := billing.Period{UserID: fmt.Sprintf("bench-user-%05d", i), SubscriptionID: fmt.Sprintf("bench-sub-%05d", i),
			Status: billing.StatusScheduled, Amount: billing.Cents(499), BillingDate: bd, LastRunDate: now.Add(-48 * time.Hour), Term: billing.TermMonthly}
		item, err := layout.EncodeItem(&s)
		require.NoError(b, err)
		return []map[string]types.AttributeValue{sdkav.ToSDK(withDue(item, &s, repo.cfg.Tables.DueShards))}
	})
}

// seedSingleScheduled writes the records of seedScheduled as periods of
// as many subscriptions of the single table, straight to the table as
// repo writes them: each period item (with its due key) and its
// subscription item (due date, open periods), as an Add of the period
// leaves them.
func seedSingleScheduled(b *testing.B, repo *SingleTableRepository, now time.Time, n, due int) {
	b.Helper()
	seedItems(b, repo.cfg.Client, repo.tbl.Table, now, n, due, func(i int, bd time.Time) []map[string]types.AttributeValue {
		ref := layout.SubscriptionRef{AccountID: fmt.Sprintf("bench-acct-%05d", i), SubscriptionID: "S1", SKU: "STREAM"}
		s := billing.Period{UserID: ref.UserID(), SubscriptionID: fmt.Sprintf("bench-sub-%05d", i),
			Status: billing.StatusScheduled, Amount: billing.Cents(499), BillingDate: bd, LastRunDate: now.Add(-48 * time.Hour), Term: billing.TermMonthly}
		period, err := repo.periodItem(ref, &s)
		require.NoError(b, err)
		open := layout.OpenPeriods{}
		open.Record(&s)
		sub := layout.EngineSubscription(ref, entitlement.RecurringSubscription{}, false, open, []*billing.Period{&s}, now, repo.cfg.ReminderLeadDays)
		sub.LastPaymentDate = now.AddDate(0, -1, 0) // in the payment index, as a subscription paid before
		item, err := repo.tbl.EncodeRecurringSubscription(sub)
		require.NoError(b, err)
		item[layout.AttrOpenPeriods] = open.AttributeValue()
		return []map[string]types.AttributeValue{sdkav.ToSDK(period), sdkav.ToSDK(item)}
	})
}

// seedItems writes the items of n records, items(i, billing date), to
// table with batch writes: the first due records are billed before now,
// an hour apart, the rest after it.
func seedItems(b *testing.B, client API, table string, now time.Time, n, due int, items func(i int, bd time.Time) []map[string]types.AttributeValue) {
	b.Helper()
	var reqs []types.WriteRequest
	flush := func() {
		in := map[string][]types.WriteRequest{table: reqs}
		for len(in) > 0 && len(reqs) > 0 {
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
		for _, it := range items(i, bd) {
			if len(reqs) == maxBatchWrite {
				flush()
			}
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: it}})
		}
	}
	flush()
}
