package dynamostore_test

import (
	"reflect"
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
		TTLAttribute:       "expiresAt"}
	require.Equal(t, want, c, "defaults = %+v", c)
	custom := dynamostore.SingleTableConfig{Table: "payments", AccountPrefix: "ACC#", TTLAttribute: "TTL", PaymentProjection: []string{"Email"}}
	c = custom.WithDefaults()
	if c.Table != "payments" || c.AccountPrefix != "ACC#" || c.TTLAttribute != "TTL" || !reflect.DeepEqual(c.PaymentProjection, []string{"Email"}) {
		t.Fatalf("custom = %+v", c)
	}
	c.PaymentProjection[0] = "changed"
	if custom.PaymentProjection[0] != "Email" {
		t.Fatal("WithDefaults shares the projection slice")
	}
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
	if sh := stShapeOfDefinition(named); sh.Name != "t" || sh.Indexes["reminders"] == nil || sh.Indexes["payments"] == nil {
		t.Fatalf("named: %+v", sh)
	}
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
		if _, err := dynamostore.NewAccounts(dynamostore.AccountsConfig{Client: dynamotest.Wrap(nil), Table: c}); err == nil {
			t.Errorf("%+v accepted by NewDynamoAccounts", c)
		}
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
	if want := stShapeOfDefinition(def); !reflect.DeepEqual(live, want) {
		t.Fatalf("live table\n%+v\nwant\n%+v", live, want)
	}
	ttl, err := client.DescribeTimeToLive(t.Context(), &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(cfg.Table)})
	require.NoError(t, err)
	if d := ttl.TimeToLiveDescription; d == nil || d.TimeToLiveStatus != types.TimeToLiveStatusEnabled || aws.ToString(d.AttributeName) != "expiresAt" {
		t.Fatalf("TTL %+v", ttl.TimeToLiveDescription)
	}
	other := cfg
	other.TTLAttribute = "TTL"
	if err := dynamostore.CreateSingleTable(t.Context(), w, other); err == nil || !strings.Contains(err.Error(), `"expiresAt"`) {
		t.Fatalf("TTL moved to another attribute: %v", err)
	}
	w.AssertNoViolations(t)
}

// TestSingleTableRecurringPaymentsLayout uses the key prefix and TTL
// attribute of the recurring payments layout for the account entities.
func TestSingleTableRecurringPaymentsLayout(t *testing.T) {
	t.Parallel()
	e := newDynamoAccountsEnv(t, acctOpts{table: dynamostore.SingleTableConfig{AccountPrefix: "ACC#", TTLAttribute: "TTL"}, expiry: time.Hour})
	if _, err := e.accounts.Grant(t.Context(), "123", 4); err != nil {
		t.Fatal(err)
	}
	item := e.raw(t, "ACC#123", "CREDITS#BALANCE")
	if acctText(item["balance"]) != "4" || acctText(item["TTL"]) == "" || item["expiresAt"] != nil {
		t.Fatalf("item %v", item)
	}
	if c := acctBalance(t, e, "123", 4); c.UserID != "123" || c.ExpiresAt.IsZero() {
		t.Fatalf("credits %+v", c)
	}
	if e.raw(t, "USER#123", "CREDITS#BALANCE") != nil {
		t.Fatal("written under the default prefix")
	}
}
