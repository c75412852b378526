package dynamostore_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dynabill/billing/internal/storetest"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/dynamotest"
	"github.com/dynabill/billing/internal/layout"
	"github.com/stretchr/testify/require"
)

func avS(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func avN(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }

// legacyBillingDate is the billing_date of the legacy items.
const legacyBillingDate = "2024-01-31T15:00:00Z"

// legacyItem is a billing-activity item as the legacy service and its
// neighbours write it: empty strings, NULL billing_week, N "0", the zero
// timestamp for an unset completion_date, timestamps without a fraction,
// data_ attributes and attributes of other services.
func legacyItem(user, subID string, st billing.Status) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		layout.AttrUserID:              avS(user),
		layout.AttrBillingDate:         avS(legacyBillingDate),
		layout.AttrSubscriptionID:      avS(subID),
		layout.AttrBillingAmount:       avS("4.99"),
		layout.AttrBillingStatus:       avS(string(st)),
		layout.AttrBillingPeriod:       avS("01/2024"),
		layout.AttrTerm:                avS("MONTHLY"),
		layout.AttrProcess:             avS("REACTIVATION"),
		layout.AttrReceiptTierName:     avS("Plus:v2"),
		layout.AttrCreatedDate:         avS("2024-01-01T10:00:00Z"),
		layout.AttrLastRunDate:         avS("2024-01-01T10:00:00Z"),
		layout.AttrReceiptAccountMask:  avS(""),
		layout.AttrReceiptPaymentType:  avS(""),
		layout.AttrPaymentError:        avS(""),
		layout.AttrUpdatedEvent:        avS(""),
		layout.AttrTransactionID:       avS(""),
		layout.AttrBillingWeek:         &types.AttributeValueMemberNULL{Value: true},
		layout.AttrPauseDurationMonths: avN("0"),
		layout.AttrCompletionDate:      avS("0001-01-01T00:00:00Z"),
		layout.AttrIsPendingDowngrade:  &types.AttributeValueMemberBOOL{Value: false},
		"data_source":                  avS("legacy-api"),
		"data_foo":                     &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"n": avN("1.50"), "tags": &types.AttributeValueMemberL{Value: []types.AttributeValue{avS("a")}}}},
		"other_service_flag":           &types.AttributeValueMemberBOOL{Value: true},
		"other_service_map":            &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k": avS("v"), "zero": avN("0")}},
	}
}

// attemptAttrs are the in-flight attempt attributes a collection may set
// and clear on its way.
var attemptAttrs = []string{layout.AttrAttemptNumber, layout.AttrAttemptKey, layout.AttrAttemptAmount,
	layout.AttrAttemptTier, layout.AttrAttemptProcess, layout.AttrAttemptStarted}

// requireOnlyChanged asserts that after differs from before in the
// attributes named in changed only: every other attribute is present in
// both or in neither, with deeply equal values.
func requireOnlyChanged(t *testing.T, before, after map[string]types.AttributeValue, changed ...string) {
	t.Helper()
	for name, v := range before {
		if slices.Contains(changed, name) {
			continue
		}
		got, ok := after[name]
		require.True(t, ok, "attribute %s (%s) was removed", name, showAV(v))
		require.Equal(t, v, got, "attribute %s changed from %s to %s", name, showAV(v), showAV(got))
	}
	for name, v := range after {
		if !slices.Contains(changed, name) {
			require.Contains(t, before, name, "attribute %s was added: %s", name, showAV(v))
		}
	}
}

// showAV renders an attribute value for a failure message.
func showAV(v types.AttributeValue) string {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return fmt.Sprintf("S %q", v.Value)
	case *types.AttributeValueMemberN:
		return fmt.Sprintf("N %q", v.Value)
	case *types.AttributeValueMemberBOOL:
		return fmt.Sprintf("BOOL %v", v.Value)
	case *types.AttributeValueMemberNULL:
		return "NULL"
	case *types.AttributeValueMemberM:
		parts := make([]string, 0, len(v.Value))
		for k, e := range v.Value {
			parts = append(parts, k+": "+showAV(e))
		}
		slices.Sort(parts)
		return fmt.Sprintf("M %v", parts)
	case *types.AttributeValueMemberL:
		parts := make([]string, 0, len(v.Value))
		for _, e := range v.Value {
			parts = append(parts, showAV(e))
		}
		return fmt.Sprintf("L %v", parts)
	}
	return fmt.Sprintf("%T", v)
}

// requireNanos asserts that item's attribute name is a timestamp with a
// fixed nine-digit fraction, and returns it.
func requireNanos(t *testing.T, item map[string]types.AttributeValue, name string) string {
	t.Helper()
	v, ok := item[name].(*types.AttributeValueMemberS)
	require.True(t, ok, "attribute %s is %#v, want S", name, item[name])
	require.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z$`, v.Value, "attribute %s", name)
	return v.Value
}

// legacyEnv is a collector on fresh legacy tables, with the raw client.
type legacyEnv struct {
	client dynamostore.API
	tables dynamostore.TableConfig
	repo   *dynamostore.Repository
	clock  *billingtest.Clock
	c      *billing.Collector
}

func newLegacyEnv(t *testing.T, now time.Time) *legacyEnv {
	t.Helper()
	client := dynamotest.Client(t)
	tables := dynamostore.TableConfig{
		Subscriptions: dynamotest.TableName(t, "billing-activity"),
		History:       dynamotest.TableName(t, "billing-activity-history"),
	}
	dynamotest.CreateTable(t, client, dynamostore.SubscriptionsTableDefinition(tables))
	dynamotest.CreateTable(t, client, dynamostore.HistoryTableDefinition(tables))
	w := dynamotest.Wrap(client)
	t.Cleanup(func() { w.AssertNoViolations(t) })
	repo, hist := storetest.NewDynamoStores(t, dynamostore.Config{Client: w, Tables: tables})
	e := &legacyEnv{client: w, tables: tables, repo: repo, clock: billingtest.NewClock(now)}
	e.c = newWriteBackCollector(t, repo, hist, e.clock)
	return e
}

func newWriteBackCollector(t *testing.T, repo billing.Repository, hist billing.History, clock *billingtest.Clock) *billing.Collector {
	t.Helper()
	seq := 0
	c, err := billing.NewCollector(billing.Config{
		Repository: repo, History: hist, Locker: billingtest.NewLocker(clock, time.Minute),
		Provider: billingtest.NewProvider(billingtest.ProviderOptions{Clock: clock}), Clock: clock, Concurrency: 1,
		NewID: func() string { seq++; return fmt.Sprintf("wb-next-%d", seq) },
	})
	require.NoError(t, err)
	return c
}

func (e *legacyEnv) put(t *testing.T, item map[string]types.AttributeValue) {
	t.Helper()
	_, err := e.client.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(e.tables.Subscriptions), Item: item})
	require.NoError(t, err)
}

// get reads the raw item of user and billingDate ("" when absent: nil).
func (e *legacyEnv) get(t *testing.T, user, billingDate string) map[string]types.AttributeValue {
	t.Helper()
	out, err := e.client.GetItem(t.Context(), &dynamodb.GetItemInput{
		TableName:      aws.String(e.tables.Subscriptions),
		Key:            map[string]types.AttributeValue{layout.AttrUserID: avS(user), layout.AttrBillingDate: avS(billingDate)},
		ConsistentRead: aws.Bool(true),
	})
	require.NoError(t, err)
	return out.Item
}

// run runs a collector run of kind to its end and returns what it did.
func runAll(t *testing.T, c *billing.Collector, kind billing.RunKind) *billing.Report {
	t.Helper()
	rep, err := c.Run(t.Context(), billing.RunRequest{Kind: kind})
	require.NoError(t, err)
	require.Empty(t, rep.Next)
	require.Empty(t, rep.Failed)
	return rep
}

func TestDynamoWriteBackScheduledCollectionKeepsLegacyBytes(t *testing.T) {
	t.Parallel()
	e := newLegacyEnv(t, time.Date(2024, 1, 31, 16, 0, 0, 0, time.UTC))
	before := legacyItem("wb-sched", "wb-sched-jan", billing.StatusScheduled)
	e.put(t, before)

	rep := runAll(t, e.c, billing.RunScheduled)
	require.Equal(t, 1, rep.Collected)

	after := e.get(t, "wb-sched", legacyBillingDate)
	requireOnlyChanged(t, before, after, append([]string{layout.AttrBillingStatus, layout.AttrProcess,
		layout.AttrLastRunDate, layout.AttrInitialRunDate, layout.AttrCompletionDate, layout.AttrTransactionID,
		layout.AttrReceiptAccountMask, layout.AttrReceiptPaymentType, layout.AttrAttempt}, attemptAttrs...)...)
	require.Equal(t, avS("COMPLETED"), after[layout.AttrBillingStatus], layout.AttrBillingStatus)
	require.Equal(t, avS("INITIAL"), after[layout.AttrProcess], layout.AttrProcess)
	require.Equal(t, avS("6789"), after[layout.AttrReceiptAccountMask], layout.AttrReceiptAccountMask)
	require.Equal(t, avS("ACH"), after[layout.AttrReceiptPaymentType], layout.AttrReceiptPaymentType)
	require.Equal(t, avS("txn-"+billing.IdempotencyKey("wb-sched-jan", 1)), after[layout.AttrTransactionID], layout.AttrTransactionID)
	require.Equal(t, avN("1"), after[layout.AttrAttempt])
	lr := requireNanos(t, after, layout.AttrLastRunDate)
	require.Equal(t, avS(lr), after[layout.AttrInitialRunDate], layout.AttrInitialRunDate)
	require.Equal(t, avS(lr), after[layout.AttrCompletionDate], layout.AttrCompletionDate)
	// The attempt stays on the record, settled: its number equals the
	// attempt count, so it is no longer in flight.
	require.Equal(t, avN("1"), after[layout.AttrAttemptNumber])
	require.Equal(t, avS(billing.IdempotencyKey("wb-sched-jan", 1)), after[layout.AttrAttemptKey], layout.AttrAttemptKey)
}

func TestDynamoWriteBackRetryCollectionKeepsLegacyBytes(t *testing.T) {
	t.Parallel()
	e := newLegacyEnv(t, time.Date(2024, 2, 1, 16, 0, 0, 0, time.UTC))
	before := legacyItem("wb-retry", "wb-retry-jan", billing.StatusError)
	before[layout.AttrProcess] = avS("INITIAL")
	before[layout.AttrPaymentError] = avS("R01 insufficient funds")
	before[layout.AttrTransactionID] = avS("legacy-txn-1")
	before[layout.AttrInitialRunDate] = avS("2024-01-31T16:00:00.5Z")
	before[layout.AttrLastRunDate] = avS("2024-01-31T16:00:00.5Z")
	e.put(t, before)

	rep := runAll(t, e.c, billing.RunRetry)
	require.Equal(t, 1, rep.Collected)

	after := e.get(t, "wb-retry", legacyBillingDate)
	requireOnlyChanged(t, before, after, append([]string{layout.AttrBillingStatus, layout.AttrProcess,
		layout.AttrLastRunDate, layout.AttrCompletionDate, layout.AttrTransactionID, layout.AttrPaymentError,
		layout.AttrReceiptAccountMask, layout.AttrReceiptPaymentType, layout.AttrAttempt}, attemptAttrs...)...)
	require.Equal(t, avS("COMPLETED"), after[layout.AttrBillingStatus], layout.AttrBillingStatus)
	require.Equal(t, avS("RETRY"), after[layout.AttrProcess], layout.AttrProcess)
	require.NotContains(t, after, layout.AttrPaymentError, "a completed record's error is cleared")
	lr := requireNanos(t, after, layout.AttrLastRunDate)
	require.Equal(t, avS(lr), after[layout.AttrCompletionDate], layout.AttrCompletionDate)
	// initial_run_date keeps its legacy text: the retry did not change it.
	require.Equal(t, avS("2024-01-31T16:00:00.5Z"), after[layout.AttrInitialRunDate], layout.AttrInitialRunDate)
}

func TestDynamoWriteBackAdminOperationsKeepLegacyBytes(t *testing.T) {
	t.Parallel()
	e := newLegacyEnv(t, time.Date(2024, 1, 20, 12, 0, 0, 0, time.UTC))
	ops := []struct {
		name    string
		st      billing.Status
		do      func(subID string) error
		changed []string
		check   func(t *testing.T, after map[string]types.AttributeValue)
	}{
		{"waive", billing.StatusScheduled, func(id string) error { _, err := e.c.Periods().WaiveByID(t.Context(), id); return err },
			[]string{layout.AttrBillingStatus, layout.AttrLastRunDate, layout.AttrCompletionDate},
			func(t *testing.T, after map[string]types.AttributeValue) {
				require.Equal(t, avS("WAIVED"), after[layout.AttrBillingStatus], layout.AttrBillingStatus)
				require.Equal(t, avS(requireNanos(t, after, layout.AttrLastRunDate)), after[layout.AttrCompletionDate], layout.AttrCompletionDate)
			}},
		{"cancel", billing.StatusError, func(id string) error { _, err := e.c.Periods().Cancel(t.Context(), id); return err },
			[]string{layout.AttrBillingStatus, layout.AttrLastRunDate, layout.AttrCompletionDate},
			func(t *testing.T, after map[string]types.AttributeValue) {
				require.Equal(t, avS("CANCELLED"), after[layout.AttrBillingStatus], layout.AttrBillingStatus)
				require.Equal(t, avS(requireNanos(t, after, layout.AttrLastRunDate)), after[layout.AttrCompletionDate], layout.AttrCompletionDate)
			}},
		{"upgrade", billing.StatusScheduled, func(id string) error {
			_, err := e.c.Periods().ChangeTier(t.Context(), id, "Premium:v3", billing.MustParseAmount("9.99"), false)
			return err
		},
			[]string{layout.AttrReceiptTierName, layout.AttrBillingAmount, layout.AttrLastRunDate},
			func(t *testing.T, after map[string]types.AttributeValue) {
				require.Equal(t, avS("Premium:v3"), after[layout.AttrReceiptTierName], layout.AttrReceiptTierName)
				require.Equal(t, avS("9.99"), after[layout.AttrBillingAmount], layout.AttrBillingAmount)
				requireNanos(t, after, layout.AttrLastRunDate)
			}},
		{"downgrade", billing.StatusScheduled, func(id string) error {
			_, err := e.c.Periods().ChangeTier(t.Context(), id, "Basic:v1", billing.MustParseAmount("1.99"), true)
			return err
		},
			[]string{layout.AttrIsPendingDowngrade, layout.AttrPendingTier, layout.AttrPendingAmount, layout.AttrLastRunDate},
			func(t *testing.T, after map[string]types.AttributeValue) {
				require.Equal(t, &types.AttributeValueMemberBOOL{Value: true}, after[layout.AttrIsPendingDowngrade])
				require.Equal(t, avS("Basic:v1"), after[layout.AttrPendingTier], layout.AttrPendingTier)
				require.Equal(t, avS("1.99"), after[layout.AttrPendingAmount], layout.AttrPendingAmount)
			}},
	}
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			user, id := "wb-admin-"+op.name, "wb-admin-"+op.name+"-jan"
			before := legacyItem(user, id, op.st)
			e.put(t, before)
			require.NoError(t, op.do(id))
			after := e.get(t, user, legacyBillingDate)
			requireOnlyChanged(t, before, after, op.changed...)
			op.check(t, after)
		})
	}
}

func TestDynamoWriteBackSettlementKeepsLegacyBytes(t *testing.T) {
	t.Parallel()
	e := newLegacyEnv(t, time.Date(2024, 2, 3, 12, 0, 0, 0, time.UTC))
	before := legacyItem("wb-settle", "wb-settle-jan", billing.StatusACHSent)
	before[layout.AttrTransactionID] = avS("legacy-ach-1")
	before[layout.AttrInitialRunDate] = avS("2024-01-31T16:00:00Z")
	before[layout.AttrLastRunDate] = avS("2024-01-31T16:00:00Z")
	before[layout.AttrReceiptAccountMask] = avS("1234")
	e.put(t, before)

	_, changed, err := e.c.ApplySettlement(t.Context(), billing.Settlement{
		SubscriptionID: "wb-settle-jan", TransactionID: "legacy-ach-1", Kind: billing.SettlementSettled})
	require.NoError(t, err)
	require.True(t, changed)

	after := e.get(t, "wb-settle", legacyBillingDate)
	requireOnlyChanged(t, before, after, layout.AttrBillingStatus, layout.AttrLastRunDate, layout.AttrCompletionDate)
	require.Equal(t, avS("COMPLETED"), after[layout.AttrBillingStatus], layout.AttrBillingStatus)
	require.Equal(t, avS(requireNanos(t, after, layout.AttrLastRunDate)), after[layout.AttrCompletionDate], layout.AttrCompletionDate)
}

func TestDynamoSetAttemptKeepsLegacyBytes(t *testing.T) {
	t.Parallel()
	e := newLegacyEnv(t, time.Date(2024, 1, 31, 16, 0, 0, 0, time.UTC))
	before := legacyItem("wb-attempt", "wb-attempt-jan", billing.StatusScheduled)
	e.put(t, before)
	bd, err := time.Parse(time.RFC3339, legacyBillingDate)
	require.NoError(t, err)
	cur, err := e.repo.Get(t.Context(), "wb-attempt", bd)
	require.NoError(t, err)
	next := cur.Clone()
	started := time.Date(2024, 1, 31, 16, 0, 0, 0, time.UTC)
	next.LastAttempt = billing.Attempt{Number: 1, Key: billing.IdempotencyKey("wb-attempt-jan", 1), Amount: cur.Amount,
		Tier: cur.ReceiptTierName, Process: billing.ProcessInitial, Started: started}
	require.NoError(t, e.repo.SetAttempt(t.Context(), &cur, &next))

	after := e.get(t, "wb-attempt", legacyBillingDate)
	requireOnlyChanged(t, before, after, attemptAttrs...)
	require.Equal(t, avN("1"), after[layout.AttrAttemptNumber])
	require.Equal(t, avS(billing.IdempotencyKey("wb-attempt-jan", 1)), after[layout.AttrAttemptKey], layout.AttrAttemptKey)
	require.Equal(t, avS("4.99"), after[layout.AttrAttemptAmount], layout.AttrAttemptAmount)
	require.Equal(t, avS("Plus:v2"), after[layout.AttrAttemptTier], layout.AttrAttemptTier)
	require.Equal(t, avS("INITIAL"), after[layout.AttrAttemptProcess], layout.AttrAttemptProcess)
	require.Equal(t, avS("2024-01-31T16:00:00.000000000Z"), after[layout.AttrAttemptStarted], layout.AttrAttemptStarted)
}

// A move (changed billing_date) deletes the old item and puts a new one:
// the known attributes are written canonically, the data_ and unknown
// attributes of the old item come along unchanged.
func TestDynamoWriteBackMoveKeepsUnownedAttributes(t *testing.T) {
	t.Parallel()
	e := newLegacyEnv(t, time.Date(2024, 1, 20, 12, 0, 0, 0, time.UTC))
	before := legacyItem("wb-move", "wb-move-jan", billing.StatusScheduled)
	e.put(t, before)
	_, err := e.c.Periods().Move(t.Context(), "wb-move-jan", time.Date(2024, 2, 5, 15, 0, 0, 0, time.UTC))
	require.NoError(t, err)

	require.Nil(t, e.get(t, "wb-move", legacyBillingDate), "the old key is deleted")
	after := e.get(t, "wb-move", "2024-02-05T15:00:00Z")
	require.NotNil(t, after)
	for _, name := range []string{"data_source", "data_foo", "other_service_flag", "other_service_map"} {
		require.Equal(t, before[name], after[name], "attribute %s", name)
	}
	require.Equal(t, avS("02/2024"), after[layout.AttrBillingPeriod], layout.AttrBillingPeriod)
	require.Equal(t, avS("wb-move-jan"), after[layout.AttrSubscriptionID], layout.AttrSubscriptionID)
	// Canonical: nine-digit fractions, empty and zero values omitted.
	require.Equal(t, avS("2024-01-01T10:00:00.000000000Z"), after[layout.AttrCreatedDate], layout.AttrCreatedDate)
	requireNanos(t, after, layout.AttrLastRunDate)
	for _, name := range []string{layout.AttrReceiptAccountMask, layout.AttrBillingWeek, layout.AttrPauseDurationMonths,
		layout.AttrCompletionDate, layout.AttrIsPendingDowngrade} {
		require.NotContains(t, after, name)
	}
}

// singleEnv is a collector on a fresh single table, with the raw client.
type singleEnv struct {
	client dynamostore.API
	table  string
	repo   *dynamostore.SingleTableRepository
	clock  *billingtest.Clock
	c      *billing.Collector
}

func newSingleWriteBackEnv(t *testing.T, now time.Time) *singleEnv {
	t.Helper()
	clock := billingtest.NewClock(now)
	client := dynamotest.Client(t)
	table := dynamostore.SingleTableConfig{Table: dynamotest.TableName(t, "payments"), AccountPrefix: "ACC#", TTLAttribute: "TTL"}
	dynamotest.CreateTable(t, client, dynamostore.SingleTableDefinition(table))
	w := dynamotest.Wrap(client)
	t.Cleanup(func() { w.AssertNoViolations(t) })
	repo, err := dynamostore.NewSingleTableRepository(dynamostore.SingleTableStoreConfig{Client: w, Table: table, Clock: clock})
	require.NoError(t, err)
	e := &singleEnv{client: w, table: table.Table, repo: repo, clock: clock}
	e.c = newWriteBackCollector(t, repo, repo.History(), clock)
	return e
}

func (e *singleEnv) get(t *testing.T, pk, sk string) map[string]types.AttributeValue {
	t.Helper()
	out, err := e.client.GetItem(t.Context(), &dynamodb.GetItemInput{
		TableName: aws.String(e.table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{layout.AttrPK: avS(pk), layout.AttrSK: avS(sk)},
	})
	require.NoError(t, err)
	require.NotEmpty(t, out.Item, "item %s %s", pk, sk)
	return out.Item
}

func (e *singleEnv) put(t *testing.T, item map[string]types.AttributeValue) {
	t.Helper()
	_, err := e.client.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(e.table), Item: item})
	require.NoError(t, err)
}

// On the single table, a collection writes back only what it changes on
// the period item and on the subscription item, which other code shares.
func TestSingleTableWriteBackKeepsItemBytes(t *testing.T) {
	t.Parallel()
	e := newSingleWriteBackEnv(t, time.Date(2024, 1, 31, 16, 0, 0, 0, time.UTC))
	ref := layout.SubscriptionRef{AccountID: "wb-acc", SubscriptionID: "s1", SKU: "STREAM"}
	bd := time.Date(2024, 1, 31, 15, 0, 0, 0, time.UTC)
	rec := billing.Period{UserID: ref.UserID(), SubscriptionID: "wb-period-jan", BillingDate: bd,
		Amount: billing.MustParseAmount("4.99"), Status: billing.StatusScheduled, BillingPeriod: "01/2024",
		Term: billing.TermMonthly, AnchorDay: 31, ReceiptTierName: "Plus:v2",
		CreatedDate: bd.AddDate(0, -1, 0), LastRunDate: bd.AddDate(0, -1, 0)}
	require.NoError(t, e.repo.Add(t.Context(), &rec))

	pk, periodSK := "ACC#wb-acc", "PER#s1#SKU#STREAM#"+legacyBillingDate
	// The period as a legacy writer and other services leave it.
	period := e.get(t, pk, periodSK)
	for name, v := range legacyItem(ref.UserID(), "wb-period-jan", billing.StatusScheduled) {
		period[name] = v
	}
	e.put(t, period)
	// The subscription item with a host's attributes and a created date in
	// another text form.
	subItem := e.get(t, pk, ref.SK())
	subItem["Email"] = avS("user@example.com")
	subItem["HostNote"] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"tier": avS("gold"), "n": avN("0")}}
	subItem["CreatedAt"] = avS("2023-12-31T10:00:00.000Z")
	e.put(t, subItem)

	rep := runAll(t, e.c, billing.RunScheduled)
	require.Equal(t, 1, rep.Collected)

	after := e.get(t, pk, periodSK)
	requireOnlyChanged(t, period, after, append([]string{layout.AttrBillingStatus, layout.AttrProcess,
		layout.AttrLastRunDate, layout.AttrInitialRunDate, layout.AttrCompletionDate, layout.AttrTransactionID,
		layout.AttrReceiptAccountMask, layout.AttrReceiptPaymentType, layout.AttrAttempt}, attemptAttrs...)...)
	require.Equal(t, avS("COMPLETED"), after[layout.AttrBillingStatus], layout.AttrBillingStatus)
	require.Equal(t, avS(requireNanos(t, after, layout.AttrLastRunDate)), after[layout.AttrCompletionDate], layout.AttrCompletionDate)

	subAfter := e.get(t, pk, ref.SK())
	requireOnlyChanged(t, subItem, subAfter, layout.AttrOpenPeriods, layout.AttrNextPaymentDate, layout.AttrNextReminderDate,
		layout.AttrLastPaymentDate, "UpdatedAt", "Version")
	require.Equal(t, avS("2024-02-29"), subAfter[layout.AttrNextPaymentDate], layout.AttrNextPaymentDate)
	require.Equal(t, avS("2024-01-31"), subAfter[layout.AttrLastPaymentDate], layout.AttrLastPaymentDate)
	require.Equal(t, avN("2"), subAfter["Version"], "created, then one collection (with the next period)")
}
