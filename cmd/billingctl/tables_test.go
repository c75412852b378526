package main

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/dynamotest"
)

func TestTablesCreateDescribe(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "legacy")

	// Creating again leaves the tables as they are.
	r := e.run("", "tables", "create")
	r.want(t, exitOK, e.tables.Subscriptions, "exists", "compare them with 'billingctl tables describe'")
	assert.NotContains(t, r.stdout, "created", "second create created something:\n%s", r)

	e.run("", "tables", "describe").want(t, exitOK,
		e.tables.Subscriptions+" (subscriptions): ACTIVE", "user_id:S HASH, billing_date:S RANGE",
		"billing_status-index billing_status:S HASH projection ALL", "matches the library's definition",
		e.tables.History+" (history)", "user_id:S HASH, last_run_date:S RANGE",
		e.tables.Locks+" (locks)", "PartitionKey:S HASH",
		e.tables.Invoices+" (invoices)", "pk:S HASH, sk:S RANGE")

	var reports []tableReport
	r = e.run("", "tables", "describe", "--json")
	r.want(t, exitOK)
	r.decode(t, &reports)
	require.Len(t, reports, 4, "want 4 table reports, got %d", len(reports))
	for _, rep := range reports {
		assert.True(t, rep.Exists, "table %s: %+v", rep.Name, rep)
		assert.Empty(t, rep.Differences, "table %s: %+v", rep.Name, rep)
		assert.Equal(t, "ACTIVE", rep.Status, "table %s: %+v", rep.Name, rep)
	}
}

func TestTablesDescribeDiffers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "legacy")

	// The tables have the legacy status index; sorted mode wants another.
	r := e.run("", "tables", "describe", "--status-index", "sorted")
	r.want(t, exitFail, "tables differ from the library's definitions")
	for _, s := range []string{
		"DIFFERS: index billing_status-billing_date-index (billing_status:S HASH, billing_date:S RANGE) is missing",
		"note: index billing_status-index is not in the definition",
	} {
		assert.Contains(t, r.stdout, s, "describe lacks %q:\n%s", s, r)
	}

	// A lock table with another key, and a history table that is missing.
	client := dynamotest.Client(t)
	odd := dynamotest.TableName(t, "locks-odd")
	dynamotest.CreateTable(t, client, &dynamodb.CreateTableInput{
		TableName:            aws.String(odd),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("lock_id"), AttributeType: types.ScalarAttributeTypeN}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("lock_id"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModeProvisioned,
		ProvisionedThroughput: &types.ProvisionedThroughput{
			ReadCapacityUnits: aws.Int64(1), WriteCapacityUnits: aws.Int64(1),
		},
	})
	missing := dynamotest.TableName(t, "no-such-history")
	r = e.run("", "tables", "describe", "--lock-table", odd, "--history-table", missing)
	r.want(t, exitFail, "tables differ")
	for _, s := range []string{
		missing + " (history): MISSING", "DIFFERS: table does not exist",
		odd + " (locks): ACTIVE", "DIFFERS: key schema is lock_id:N HASH, want PartitionKey:S HASH",
		"note: billing mode PROVISIONED",
	} {
		assert.Contains(t, r.stdout, s, "describe lacks %q:\n%s", s, r)
	}

	var reports []tableReport
	r = e.run("", "tables", "describe", "--json", "--lock-table", odd)
	r.want(t, exitFail)
	r.decode(t, &reports)
	got := reports[2]
	assert.Equal(t, odd, got.Name, "lock table report: %+v", got)
	if assert.Len(t, got.Differences, 1, "lock table report: %+v", got) {
		assert.Contains(t, got.Differences[0], "key schema", "lock table report: %+v", got)
	}
	assert.Empty(t, reports[0].Differences, "subscriptions table report: %+v", reports[0])

	// A subscriptions table of an existing deployment, whose
	// subscription_id index projects every attribute, is fine: more than
	// the keys the library reads from it.
	def := dynamostore.SubscriptionsTableDefinition(dynamostore.TableConfig{Subscriptions: dynamotest.TableName(t, "activity-all")})
	for i := range def.GlobalSecondaryIndexes {
		def.GlobalSecondaryIndexes[i].Projection = &types.Projection{ProjectionType: types.ProjectionTypeAll}
	}
	dynamotest.CreateTable(t, client, def)
	r = e.run("", "tables", "describe", "--json", "--table", *def.TableName)
	r.decode(t, &reports)
	assert.Empty(t, reports[0].Differences, "an index projecting all attributes: %+v", reports[0])
	assert.Contains(t, strings.Join(reports[0].Notes, "\n"), "subscription_id-index projects ALL; KEYS_ONLY would do")
}
