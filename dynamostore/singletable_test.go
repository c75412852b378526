package dynamostore_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/dynamotest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stShape is a comparable summary of a single-table definition.
type stShape struct {
	Name, Billing string
	Attrs, Keys   []string
	Indexes       map[string][]string // name → keys, projection type, sorted non-key attributes
}

func stShapeOf(name string, billing types.BillingMode, attrs []types.AttributeDefinition, keys []types.KeySchemaElement,
	idx map[string]struct {
		keys []types.KeySchemaElement
		proj *types.Projection
	}) stShape {
	sh := stShape{Name: name, Billing: string(billing), Indexes: map[string][]string{}}
	for _, a := range attrs {
		sh.Attrs = append(sh.Attrs, aws.ToString(a.AttributeName)+":"+string(a.AttributeType))
	}
	slices.Sort(sh.Attrs)
	for _, k := range keys {
		sh.Keys = append(sh.Keys, aws.ToString(k.AttributeName)+":"+string(k.KeyType))
	}
	for n, g := range idx {
		var desc []string
		for _, k := range g.keys {
			desc = append(desc, aws.ToString(k.AttributeName)+":"+string(k.KeyType))
		}
		desc = append(desc, string(g.proj.ProjectionType))
		nk := slices.Clone(g.proj.NonKeyAttributes)
		slices.Sort(nk)
		sh.Indexes[n] = append(desc, nk...)
	}
	return sh
}

type stIndex = struct {
	keys []types.KeySchemaElement
	proj *types.Projection
}

func stShapeOfDefinition(in *dynamodb.CreateTableInput) stShape {
	idx := map[string]stIndex{}
	for _, g := range in.GlobalSecondaryIndexes {
		idx[aws.ToString(g.IndexName)] = stIndex{g.KeySchema, g.Projection}
	}
	return stShapeOf(aws.ToString(in.TableName), in.BillingMode, in.AttributeDefinitions, in.KeySchema, idx)
}

func TestSingleTableConfigDefaults(t *testing.T) {
	c := dynamostore.SingleTableConfig{}.WithDefaults()
	want := dynamostore.SingleTableConfig{Table: "billing", AccountPrefix: "USER#", ReminderIndex: "GSI-1", PaymentIndex: "GSI-2",
		ReminderProjection: []string{"SKU", "Email", "NextPaymentDate"},
		PaymentProjection:  []string{"Email", "PaymentDay", "PaymentAmount", "SKU", "PaymentDetails"},
		TTLAttribute:       "expiresAt", DueIndex: "billing_due-billing_date-index"}
	require.Equal(t, want, c, "defaults = %+v", c)
	custom := dynamostore.SingleTableConfig{Table: "payments", AccountPrefix: "ACC#", TTLAttribute: "TTL", PaymentProjection: []string{"Email"}}
	c = custom.WithDefaults()
	require.Equal(t, "payments", c.Table, "custom = %+v", c)
	require.Equal(t, "ACC#", c.AccountPrefix, "custom = %+v", c)
	require.Equal(t, "TTL", c.TTLAttribute, "custom = %+v", c)
	require.Equal(t, []string{"Email"}, c.PaymentProjection, "custom = %+v", c)
	c.PaymentProjection[0] = "changed"
	require.Equal(t, "Email", custom.PaymentProjection[0], "WithDefaults shares the projection slice")
}

func TestSingleTableDefinition(t *testing.T) {
	got := stShapeOfDefinition(dynamostore.SingleTableDefinition(dynamostore.SingleTableConfig{}))
	want := stShape{
		Name: "billing", Billing: "PAY_PER_REQUEST",
		Attrs: []string{"LastPaymentDate:S", "LastReminderDate:S", "NextPaymentDate:S", "NextReminderDate:S", "PK:S", "SK:S"},
		Keys:  []string{"PK:HASH", "SK:RANGE"},
		Indexes: map[string][]string{
			"GSI-1": {"NextReminderDate:HASH", "LastReminderDate:RANGE", "INCLUDE", "Email", "NextPaymentDate", "SKU"},
			"GSI-2": {"NextPaymentDate:HASH", "LastPaymentDate:RANGE", "INCLUDE", "Email", "PaymentAmount", "PaymentDay", "PaymentDetails", "SKU"},
		},
	}
	require.Equal(t, want, got, "definition\n got %+v\nwant %+v", got, want)
	named := dynamostore.SingleTableDefinition(dynamostore.SingleTableConfig{Table: "t", ReminderIndex: "reminders", PaymentIndex: "payments"})
	sh := stShapeOfDefinition(named)
	require.Equal(t, "t", sh.Name, "named: %+v", sh)
	require.NotNil(t, sh.Indexes["reminders"], "named: %+v", sh)
	require.NotNil(t, sh.Indexes["payments"], "named: %+v", sh)
}

func TestSingleTableConfigInvalid(t *testing.T) {
	for _, c := range []dynamostore.SingleTableConfig{
		{ReminderIndex: "idx", PaymentIndex: "idx"},
		{TTLAttribute: "PK"},
		{TTLAttribute: "NextPaymentDate"},
		{ReminderProjection: []string{"NextReminderDate"}},
		{PaymentProjection: []string{"Email", ""}},
		{PaymentProjection: []string{"SK"}},
		{AccountPrefix: strings.Repeat("x", 65)},
	} {
		assert.Error(t, dynamostore.CreateSingleTable(t.Context(), nil, c), "%+v accepted by CreateSingleTable", c)
		_, err := dynamostore.NewAccounts(dynamostore.AccountsConfig{Client: dynamotest.Wrap(nil), Table: c})
		assert.Error(t, err, "%+v accepted by NewDynamoAccounts", c)
	}
}

// TestSingleTableCreateOnServer creates the table twice (idempotent),
// compares what the server reports with the definition, checks TTL, and
// refuses to move TTL to another attribute.
func TestSingleTableCreateOnServer(t *testing.T) {
	t.Parallel()
	client := dynamotest.Client(t)
	cfg := dynamostore.SingleTableConfig{Table: dynamotest.TableName(t, "billing")}
	t.Cleanup(func() {
		_, _ = client.DeleteTable(t.Context(), &dynamodb.DeleteTableInput{TableName: aws.String(cfg.Table)})
	})
	w := dynamotest.Wrap(client)
	for range 2 {
		require.NoError(t, dynamostore.CreateSingleTable(t.Context(), w, cfg))
	}
	assert.Equal(t, 1, w.Calls("UpdateTimeToLive"), "UpdateTimeToLive called %d times, want once", w.Calls("UpdateTimeToLive"))
	out, err := client.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(cfg.Table)})
	require.NoError(t, err)
	tb := out.Table
	require.Equal(t, types.TableStatusActive, tb.TableStatus, "status %s", tb.TableStatus)
	idx := map[string]stIndex{}
	for _, g := range tb.GlobalSecondaryIndexes {
		idx[aws.ToString(g.IndexName)] = stIndex{g.KeySchema, g.Projection}
	}
	def := dynamostore.SingleTableDefinition(cfg)
	live := stShapeOf(aws.ToString(tb.TableName), def.BillingMode, tb.AttributeDefinitions, tb.KeySchema, idx)
	require.Equal(t, stShapeOfDefinition(def), live, "live table")
	ttl, err := client.DescribeTimeToLive(t.Context(), &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(cfg.Table)})
	require.NoError(t, err)
	d := ttl.TimeToLiveDescription
	require.NotNil(t, d, "TTL")
	require.Equal(t, types.TimeToLiveStatusEnabled, d.TimeToLiveStatus, "TTL %+v", d)
	require.Equal(t, "expiresAt", aws.ToString(d.AttributeName), "TTL %+v", d)
	other := cfg
	other.TTLAttribute = "TTL"
	require.ErrorContains(t, dynamostore.CreateSingleTable(t.Context(), w, other), `"expiresAt"`, "TTL moved to another attribute")
	w.AssertNoViolations(t)
}

// TestSingleTableRecurringPaymentsLayout uses the key prefix and TTL
// attribute of the recurring payments layout for the account entities.
func TestSingleTableRecurringPaymentsLayout(t *testing.T) {
	t.Parallel()
	e := newDynamoAccountsEnv(t, acctOpts{table: dynamostore.SingleTableConfig{AccountPrefix: "ACC#", TTLAttribute: "TTL"}, expiry: time.Hour})
	_, err := e.accounts.Grant(t.Context(), "123", 4, "req-1")
	require.NoError(t, err)
	item := e.raw(t, "ACC#123", "CREDITS#BALANCE")
	require.Equal(t, "4", acctText(item["balance"]), "item %v", item)
	require.NotEmpty(t, acctText(item["TTL"]), "item %v", item)
	require.Nil(t, item["expiresAt"], "item %v", item)
	c := acctBalance(t, e, "123", 4)
	require.Equal(t, "123", c.UserID, "credits %+v", c)
	require.False(t, c.ExpiresAt.IsZero(), "credits %+v", c)
	require.Nil(t, e.raw(t, "USER#123", "CREDITS#BALANCE"), "written under the default prefix")
}
