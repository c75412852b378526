package dynamostore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/dynamotest"
	"github.com/dynabill/billing/internal/storetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// withStream returns def with a NEW_IMAGE stream.
func withStream(def *dynamodb.CreateTableInput) *dynamodb.CreateTableInput {
	def.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewImage}
	return def
}

// readStream reads every record of table's stream from the start of
// each shard to its end.
func readStream(t *testing.T, table string) []streamtypes.Record {
	t.Helper()
	ctx := t.Context()
	desc, err := dynamotest.Client(t).DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	require.NoError(t, err)
	arn := aws.ToString(desc.Table.LatestStreamArn)
	require.NotEmpty(t, arn, "table %s has no stream", table)
	sc := dynamodbstreams.New(dynamodbstreams.Options{
		Region: dynamotest.Region, BaseEndpoint: aws.String(dynamotest.Endpoint(t)),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
	var shards []streamtypes.Shard
	for start := (*string)(nil); ; {
		out, err := sc.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn), ExclusiveStartShardId: start})
		require.NoError(t, err)
		shards = append(shards, out.StreamDescription.Shards...)
		if start = out.StreamDescription.LastEvaluatedShardId; start == nil {
			break
		}
	}
	require.NotEmpty(t, shards)
	var recs []streamtypes.Record
	for _, sh := range shards {
		it, err := sc.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{
			StreamArn: aws.String(arn), ShardId: sh.ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon,
		})
		require.NoError(t, err)
		for iter := it.ShardIterator; iter != nil; {
			out, err := sc.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(100)})
			require.NoError(t, err)
			if len(out.Records) == 0 {
				break // the end of an open shard (a closed one ends with no iterator)
			}
			recs = append(recs, out.Records...)
			iter = out.NextShardIterator
		}
	}
	return recs
}

// streamStep is one history row a user's lifecycle writes: the event
// type the engine names (billing_change), and the type the decoder
// derives from the same row without it (as written by an earlier version).
type streamStep struct{ exact, derived billing.EventType }

func step(t billing.EventType) streamStep { return streamStep{t, t} }

// TestHistoryStreamEndToEnd drives a collector through every kind of
// change on each layout, reads the table's stream from moto and decodes
// it: exactly one event per history row, in the order of the user's
// history, of the type the change names.
func TestHistoryStreamEndToEnd(t *testing.T) {
	t.Parallel()
	type layoutEnv struct {
		name    string
		user    func(name string) string
		stores  func(t *testing.T, clock billing.Clock) (billing.Repository, billing.History, string)
		decoder func(t *testing.T) *dynamostore.StreamDecoder
	}
	layouts := []layoutEnv{
		{
			name: "legacy",
			user: func(name string) string { return "u-" + name },
			stores: func(t *testing.T, _ billing.Clock) (billing.Repository, billing.History, string) {
				client := dynamotest.Client(t)
				tables := dynamostore.TableConfig{
					Subscriptions: dynamotest.TableName(t, "billing-activity"),
					History:       dynamotest.TableName(t, "billing-activity-history"),
				}
				dynamotest.CreateTable(t, client, dynamostore.SubscriptionsTableDefinition(tables))
				dynamotest.CreateTable(t, client, withStream(dynamostore.HistoryTableDefinition(tables)))
				repo, hist := storetest.NewDynamoStores(t, dynamostore.Config{Client: client, Tables: tables})
				return repo, hist, tables.History
			},
			decoder: func(*testing.T) *dynamostore.StreamDecoder { return dynamostore.NewHistoryStreamDecoder() },
		},
		{
			name: "single",
			user: func(name string) string { return "acct-" + name + "#s1#PLUS" },
			stores: func(t *testing.T, clock billing.Clock) (billing.Repository, billing.History, string) {
				client := dynamotest.Client(t)
				table := dynamostore.SingleTableConfig{Table: dynamotest.TableName(t, "payments"), AccountPrefix: "ACC#", TTLAttribute: "TTL"}
				dynamotest.CreateTable(t, client, withStream(dynamostore.SingleTableDefinition(table)))
				repo, err := dynamostore.NewSingleTableRepository(dynamostore.SingleTableStoreConfig{Client: client, Table: table, Clock: clock})
				require.NoError(t, err)
				return repo, repo.History(), table.Table
			},
			decoder: func(t *testing.T) *dynamostore.StreamDecoder {
				d, err := dynamostore.NewSingleTableStreamDecoder(dynamostore.SingleTableConfig{AccountPrefix: "ACC#", TTLAttribute: "TTL"})
				require.NoError(t, err)
				return d
			},
		},
	}
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			now0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
			clock := billingtest.NewClock(now0)
			repo, hist, table := l.stores(t, clock)
			provider := billingtest.NewProvider(billingtest.ProviderOptions{Clock: clock})
			seq := 0
			c, err := billing.NewCollector(billing.Config{
				Repository: repo, History: hist, Locker: billingtest.NewLocker(clock, time.Minute),
				Provider: provider, Clock: clock, Concurrency: 1,
				NewID: func() string { seq++; return fmt.Sprintf("%s-per-%d", l.name, seq) },
			})
			require.NoError(t, err)
			u := l.user

			// The first periods: due now, or in ten days for the admin
			// operations, one paused from the start.
			first := map[string]billing.Period{}
			subscribe := func(name string, date time.Time, pause int) {
				got, err := c.Subscribe(ctx, billing.SubscribeRequest{
					RequestKey: "req-" + name, UserID: u(name), Tier: "Plus:v2", Amount: billing.Cents(499),
					FirstBillingDate: date, PauseMonths: pause,
				})
				require.NoError(t, err, name)
				first[name] = got.Subscription
			}
			later := now0.AddDate(0, 0, 10)
			for _, name := range []string{"pay", "decline", "achok", "achret", "achlate"} {
				subscribe(name, now0, 0)
			}
			for _, name := range []string{"waive", "pause", "cancel", "tier", "move"} {
				subscribe(name, later, 0)
			}
			subscribe("skip", now0, 2)
			provider.SetUser(u("decline"), billingtest.Declined("insufficient funds", true), billingtest.Succeeded())
			provider.SetUser(u("achok"), billingtest.Pending())
			provider.SetUser(u("achret"), billingtest.Pending(), billingtest.Declined("account closed", false))
			provider.SetUser(u("achlate"), billingtest.Pending())

			clock.Advance(time.Hour)
			rep := runAll(t, c, billing.RunScheduled)
			assert.Equal(t, []int{1, 3, 1}, []int{rep.Collected, rep.Pending, rep.Declined}, "collected, pending, declined: %+v", rep)

			// The operator's changes come one by one, an hour apart.
			admin := func(name string, err error) {
				t.Helper()
				require.NoError(t, err, name)
				clock.Advance(time.Hour)
			}
			clock.Advance(time.Hour)
			_, err = c.Periods().WaiveByID(ctx, first["waive"].SubscriptionID)
			admin("waive", err)
			_, err = c.Periods().Pause(ctx, first["pause"].SubscriptionID, 2)
			admin("pause", err)
			_, err = c.Periods().Resume(ctx, first["pause"].SubscriptionID)
			admin("resume", err)
			_, err = c.Periods().Cancel(ctx, first["cancel"].SubscriptionID)
			admin("cancel", err)
			_, err = c.Reactivate(ctx, u("cancel"), now0.AddDate(0, 0, 20))
			admin("reactivate", err)
			_, err = c.Periods().ChangeTier(ctx, first["tier"].SubscriptionID, "Pro:v1", billing.Cents(999), false)
			admin("tier", err)
			_, err = c.Periods().Move(ctx, first["move"].SubscriptionID, now0.AddDate(0, 0, 12))
			admin("move", err)
			runAll(t, c, billing.RunPause)

			// The processor's settlements arrive days after the debits.
			clock.Advance(3 * 24 * time.Hour)
			settle := func(name string, kind billing.SettlementKind) {
				t.Helper()
				cur, err := repo.GetByID(ctx, first[name].SubscriptionID)
				require.NoError(t, err)
				// The processor knows first: a returned debit is never
				// retried, a new payment is made (see PriorPayment).
				switch ch := provider.ChargesFor(cur.SubscriptionID); kind {
				case billing.SettlementSettled:
					require.NoError(t, provider.Settle(ch[0].Key), name)
				case billing.SettlementReturned:
					require.NoError(t, provider.Return(ch[0].Key), name)
				}
				_, changed, err := c.ApplySettlement(ctx, billing.Settlement{SubscriptionID: cur.SubscriptionID, TransactionID: cur.TransactionID, Kind: kind, Reason: "R01 insufficient funds"})
				require.NoError(t, err, name)
				require.True(t, changed, name)
			}
			settle("achok", billing.SettlementSettled)
			settle("achret", billing.SettlementReturned)
			settle("pay", billing.SettlementRefunded)

			clock.Advance(24 * time.Hour)
			runAll(t, c, billing.RunRetry)
			// No word of achlate's debit within the settlement deadline.
			clock.Advance(billing.DefaultACHSettlementDeadline)
			rep = runAll(t, c, billing.RunRetry)
			assert.Equal(t, 1, rep.ACHOverdue, "%+v", rep)

			created, opened := step(billing.EventSubscriptionCreated), step(billing.EventPeriodOpened)
			want := map[string][]streamStep{
				"pay":     {created, step(billing.EventPaymentSucceeded), opened, step(billing.EventPaymentRefunded)},
				"decline": {created, step(billing.EventPaymentDeclined), opened, step(billing.EventPaymentSucceeded)},
				"achok":   {created, step(billing.EventPaymentPending), opened, step(billing.EventPaymentSucceeded)},
				"achret":  {created, step(billing.EventPaymentPending), opened, {billing.EventPaymentReturned, billing.EventPaymentDeclined}, step(billing.EventPaymentDeclined)},
				"achlate": {created, step(billing.EventPaymentPending), opened, step(billing.EventPaymentACHOverdue)},
				"waive":   {created, step(billing.EventWaived), opened},
				"pause":   {created, step(billing.EventPaused), step(billing.EventResumed)},
				"cancel":  {created, step(billing.EventCancelled), step(billing.EventSubscriptionReactivated)},
				"tier":    {created, {billing.EventTierChanged, billing.EventChanged}},
				"move":    {created, {billing.EventBillingDateMoved, billing.EventChanged}},
				"skip":    {created, step(billing.EventPauseMonthSkipped), opened},
			}

			recs := readStream(t, table)
			d := l.decoder(t)
			byUser := map[string][]dynamostore.HistoryEvent{}
			ids := map[string]bool{}
			for _, r := range recs {
				ev, ok, err := d.Decode(r)
				require.NoError(t, err)
				if !ok {
					continue
				}
				require.False(t, ids[ev.ID], "two history events share ID %s", ev.ID)
				ids[ev.ID] = true
				byUser[ev.Event.UserID] = append(byUser[ev.Event.UserID], ev)
				again, ok, err := d.Decode(r)
				require.NoError(t, err)
				require.True(t, ok)
				assert.Equal(t, ev, again, "decoding a record again gives the same event")
			}
			total := 0
			for name, steps := range want {
				rows, err := hist.ListByUser(ctx, u(name))
				require.NoError(t, err)
				evs := byUser[u(name)]
				require.Len(t, evs, len(rows), "%s: one event per history row", name)
				total += len(rows)
				var exact, derived, wantExact, wantDerived []billing.EventType
				for i, ev := range evs {
					assert.True(t, ev.Row.LastRunDate.Equal(rows[i].LastRunDate), "%s row %d: same key, same order", name, i)
					assert.Equal(t, rows[i].SubscriptionID, ev.Event.SubscriptionID, "%s row %d", name, i)
					assert.Equal(t, rows[i].Status, ev.Row.Status, "%s row %d", name, i)
					assert.Equal(t, rows[i].Amount, ev.Event.Amount, "%s row %d", name, i)
					if rows[i].Status == billing.StatusError {
						assert.NotEmpty(t, ev.Event.Reason, "%s row %d", name, i)
						assert.Equal(t, rows[i].PaymentError, ev.Event.Reason, "%s row %d", name, i)
					}
					assert.Equal(t, ev.Event.Type, ev.Row.Change, "%s row %d: the engine names every change", name, i)
					assert.Equal(t, ev.ID, ev.Event.ID, "%s row %d", name, i)
					exact = append(exact, ev.Event.Type)
					derived = append(derived, dynamostore.DeriveHistoryEventType(t, ev.Row))
				}
				for _, s := range steps {
					wantExact, wantDerived = append(wantExact, s.exact), append(wantDerived, s.derived)
				}
				assert.Equal(t, wantExact, exact, "%s: event types", name)
				assert.Equal(t, wantDerived, derived, "%s: event types derived from the rows without billing_change", name)
			}
			assert.Len(t, ids, total, "no event of a row outside the users' histories")
		})
	}
}

// TestHistoryStreamReportsReimport: history is append-only from every
// writer, so a re-import never shows up as a MODIFY of a history row
// (which the decoder, and the events consumer behind it, reject and stop
// on). It used to: History.AddAll batch-wrote a row over the one at its
// key, and Repository.AddAll of a re-read record with a changed amount
// replaced the record's latest row. Now History.AddAll refuses another
// row at a taken key (and accepts the very same row again), and
// Repository.AddAll moves the rewrite to the next free last_run_date: on
// both layouts the stream carries INSERTs only, one event per write.
func TestHistoryStreamReportsReimport(t *testing.T) {
	t.Parallel()
	type env struct {
		user    string
		repo    billing.Repository
		hist    billing.History
		table   string
		decoder *dynamostore.StreamDecoder
	}
	layouts := map[string]func(t *testing.T) env{
		"legacy": func(t *testing.T) env {
			client := dynamotest.Client(t)
			tables := dynamostore.TableConfig{
				Subscriptions: dynamotest.TableName(t, "billing-activity"),
				History:       dynamotest.TableName(t, "billing-activity-history"),
			}
			dynamotest.CreateTable(t, client, dynamostore.SubscriptionsTableDefinition(tables))
			dynamotest.CreateTable(t, client, withStream(dynamostore.HistoryTableDefinition(tables)))
			repo, hist := storetest.NewDynamoStores(t, dynamostore.Config{Client: client, Tables: tables})
			return env{"u-reimport", repo, hist, tables.History, dynamostore.NewHistoryStreamDecoder()}
		},
		"single": func(t *testing.T) env {
			client := dynamotest.Client(t)
			table := dynamostore.SingleTableConfig{Table: dynamotest.TableName(t, "payments"), AccountPrefix: "ACC#", TTLAttribute: "TTL"}
			dynamotest.CreateTable(t, client, withStream(dynamostore.SingleTableDefinition(table)))
			repo, err := dynamostore.NewSingleTableRepository(dynamostore.SingleTableStoreConfig{Client: client, Table: table})
			require.NoError(t, err)
			d, err := dynamostore.NewSingleTableStreamDecoder(table)
			require.NoError(t, err)
			return env{"acct-1#s1#PLUS", repo, repo.History(), table.Table, d}
		},
	}
	for name, setup := range layouts {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			e := setup(t)
			t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
			row := billing.Period{
				UserID: e.user, SubscriptionID: "per-1", BillingDate: t0.AddDate(0, -1, 0), Amount: billing.Cents(499),
				Status: billing.StatusCompleted, BillingPeriod: "02/2026", TransactionID: "tx-1", Process: billing.ProcessInitial,
				Term: billing.TermMonthly, ReceiptTierName: "Plus:v2", CreatedDate: t0.Add(-48 * time.Hour), LastRunDate: t0.Add(-time.Hour),
			}
			// History.AddAll: the same row again is accepted, another at
			// its key refused.
			require.NoError(t, e.hist.AddAll(ctx, []billing.Period{row}))
			require.NoError(t, e.hist.AddAll(ctx, []billing.Period{row}), "the very same row again")
			again := row
			again.Amount = billing.Cents(999)
			err := e.hist.AddAll(ctx, []billing.Period{again})
			require.ErrorIs(t, err, billing.ErrAlreadyExists, "another row at a taken key")

			// Repository.AddAll: a record re-read, its amount changed, and
			// written back (twice: the retry writes nothing).
			rec := billing.Period{
				UserID: e.user, SubscriptionID: "per-2", BillingDate: t0, Amount: billing.Cents(499),
				Status: billing.StatusScheduled, BillingPeriod: "03/2026", Process: billing.ProcessInitial,
				Term: billing.TermMonthly, ReceiptTierName: "Plus:v2", CreatedDate: t0.Add(-time.Hour), LastRunDate: t0.Add(-time.Hour + time.Minute),
			}
			_, err = e.repo.AddAll(ctx, []billing.Period{rec})
			require.NoError(t, err)
			cur, err := e.repo.Get(ctx, rec.UserID, rec.BillingDate)
			require.NoError(t, err)
			upgrade := cur.Clone()
			upgrade.Amount, upgrade.ReceiptTierName = billing.Cents(999), "Premium:v1"
			written, err := e.repo.AddAll(ctx, []billing.Period{upgrade})
			require.NoError(t, err)
			_, err = e.repo.AddAll(ctx, []billing.Period{upgrade})
			require.NoError(t, err, "the identical retry")
			assert.True(t, written[0].LastRunDate.After(cur.LastRunDate), "the rewrite moves past the taken key")

			var kinds []string
			var events []billing.Amount
			for _, r := range readStream(t, e.table) {
				ev, ok, err := e.decoder.Decode(r)
				require.NoError(t, err, "stream record %s %s", r.EventName, aws.ToString(r.Dynamodb.SequenceNumber))
				if ok {
					kinds = append(kinds, string(r.EventName))
					events = append(events, ev.Event.Amount)
				}
			}
			assert.Equal(t, []string{"INSERT", "INSERT", "INSERT"}, kinds, "history rows only ever inserted")
			assert.Equal(t, []billing.Amount{billing.Cents(499), billing.Cents(499), billing.Cents(999)}, events,
				"the imported row, the record's first row, its rewrite")
		})
	}
}
