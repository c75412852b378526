package dynamostore

import (
	"encoding/json"
	"os"
	"sort"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing/internal/dynamotest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cfnTable is the part of an AWS::DynamoDB::Table resource we compare.
type cfnTable struct {
	TableName              string
	BillingMode            string
	AttributeDefinitions   []struct{ AttributeName, AttributeType string }
	KeySchema              []struct{ AttributeName, KeyType string }
	GlobalSecondaryIndexes []struct {
		IndexName  string
		KeySchema  []struct{ AttributeName, KeyType string }
		Projection struct{ ProjectionType string }
	}
	StreamSpecification *struct{ StreamViewType string }
}

// shape is a comparable summary of a table definition.
type shape struct {
	Name, Billing string
	Attrs, Keys   []string
	Indexes       map[string][]string // name → keys and projection
	Stream        string              // the stream's view type, "" for none
}

func shapeOfDefinition(in *dynamodb.CreateTableInput) shape {
	s := shape{Name: aws.ToString(in.TableName), Billing: string(in.BillingMode), Indexes: map[string][]string{}}
	for _, a := range in.AttributeDefinitions {
		s.Attrs = append(s.Attrs, aws.ToString(a.AttributeName)+":"+string(a.AttributeType))
	}
	sort.Strings(s.Attrs)
	for _, k := range in.KeySchema {
		s.Keys = append(s.Keys, aws.ToString(k.AttributeName)+":"+string(k.KeyType))
	}
	for _, g := range in.GlobalSecondaryIndexes {
		var ks []string
		for _, k := range g.KeySchema {
			ks = append(ks, aws.ToString(k.AttributeName)+":"+string(k.KeyType))
		}
		s.Indexes[aws.ToString(g.IndexName)] = append(ks, string(g.Projection.ProjectionType))
	}
	if in.StreamSpecification != nil && aws.ToBool(in.StreamSpecification.StreamEnabled) {
		s.Stream = string(in.StreamSpecification.StreamViewType)
	}
	return s
}

func shapeOfCFN(t cfnTable) shape {
	s := shape{Name: t.TableName, Billing: t.BillingMode, Indexes: map[string][]string{}}
	for _, a := range t.AttributeDefinitions {
		s.Attrs = append(s.Attrs, a.AttributeName+":"+a.AttributeType)
	}
	sort.Strings(s.Attrs)
	for _, k := range t.KeySchema {
		s.Keys = append(s.Keys, k.AttributeName+":"+k.KeyType)
	}
	for _, g := range t.GlobalSecondaryIndexes {
		var ks []string
		for _, k := range g.KeySchema {
			ks = append(ks, k.AttributeName+":"+k.KeyType)
		}
		s.Indexes[g.IndexName] = append(ks, g.Projection.ProjectionType)
	}
	if t.StreamSpecification != nil {
		s.Stream = t.StreamSpecification.StreamViewType
	}
	return s
}

// TestCloudFormationMatchesDefinitions keeps the provisioning example equal
// to the definitions CreateTables uses.
func TestCloudFormationMatchesDefinitions(t *testing.T) {
	data, err := os.ReadFile("../examples/cloudformation/billing-tables.json")
	require.NoError(t, err)
	var tmpl struct {
		Resources map[string]struct {
			Type       string
			Properties cfnTable
		}
	}
	require.NoError(t, json.Unmarshal(data, &tmpl))
	got := map[string]shape{}
	for name, r := range tmpl.Resources {
		if !assert.Equal(t, "AWS::DynamoDB::Table", r.Type, "resource %s: type", name) {
			continue
		}
		got[r.Properties.TableName] = shapeOfCFN(r.Properties)
	}
	defs := TableDefinitions(TableConfig{})
	require.Len(t, got, len(defs), "template has %d tables, definitions %d", len(got), len(defs))
	for _, d := range defs {
		want := shapeOfDefinition(d)
		assert.Equal(t, want, got[want.Name], "table %s:\ntemplate    %+v\ndefinitions %+v", want.Name, got[want.Name], want)
	}
}

func TestTableConfigDefaults(t *testing.T) {
	c := TableConfig{}.WithDefaults()
	want := TableConfig{Subscriptions: "billing-activity", History: "billing-activity-history", Locks: "locks",
		SubscriptionIDIndex: "subscription_id-index", StatusIndex: "billing_status-index", DueIndex: "billing_due-billing_date-index"}
	require.Equal(t, want, c, "defaults = %+v", c)
	assert.NotContains(t, shapeOfDefinition(SubscriptionsTableDefinition(TableConfig{})).Indexes, "billing_due-billing_date-index", "no due index without DueShards")
	due := shapeOfDefinition(SubscriptionsTableDefinition(TableConfig{DueShards: 8, StatusIndexMode: StatusIndexDue}))
	assert.Contains(t, due.Indexes, "billing_due-billing_date-index")
	assert.NotContains(t, due.Indexes, "billing_status-index", "due mode has no status index: its one hot partition would cap a day")
	for _, bad := range []TableConfig{{StatusIndexMode: StatusIndexDue}, {DueShards: -1}, {DueShards: MaxDueShards + 1}, {StatusIndexMode: StatusIndexDue + 1}} {
		_, err := NewRepository(Config{Client: struct{ API }{}, Tables: bad})
		assert.Error(t, err, "%+v", bad)
	}
	s := TableConfig{StatusIndexMode: StatusIndexSorted}.WithDefaults()
	require.Equal(t, "billing_status-billing_date-index", s.StatusIndex, "sorted index")
	def := SubscriptionsTableDefinition(TableConfig{StatusIndexMode: StatusIndexSorted})
	idx := shapeOfDefinition(def).Indexes["billing_status-billing_date-index"]
	require.Equal(t, []string{"billing_status:HASH", "billing_date:RANGE", "ALL"}, idx, "sorted index keys = %v", idx)
	require.Error(t, CreateTables(t.Context(), nil, TableConfig{StatusIndexMode: 7}), "unknown mode accepted")
}

// TestCreateTablesOnServer creates the tables twice (idempotent) and checks
// what the server reports against the definitions.
func TestCreateTablesOnServer(t *testing.T) {
	t.Parallel()
	client := dynamotest.Client(t)
	for _, mode := range []StatusIndexMode{StatusIndexLegacy, StatusIndexSorted} {
		cfg := TableConfig{
			Subscriptions:   dynamotest.TableName(t, "ba"),
			History:         dynamotest.TableName(t, "bah"),
			Locks:           dynamotest.TableName(t, "locks"),
			StatusIndexMode: mode,
		}
		t.Cleanup(func() {
			for _, n := range []string{cfg.Subscriptions, cfg.History, cfg.Locks} {
				_, _ = client.DeleteTable(t.Context(), &dynamodb.DeleteTableInput{TableName: aws.String(n)})
			}
		})
		for range 2 {
			require.NoError(t, CreateTables(t.Context(), client, cfg), "%v", mode)
		}
		for _, d := range TableDefinitions(cfg) {
			out, err := client.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: d.TableName})
			require.NoError(t, err)
			assert.Equal(t, types.TableStatusActive, out.Table.TableStatus, "%s: %s", aws.ToString(d.TableName), out.Table.TableStatus)
			live := &dynamodb.CreateTableInput{TableName: out.Table.TableName, KeySchema: out.Table.KeySchema,
				AttributeDefinitions: out.Table.AttributeDefinitions, BillingMode: d.BillingMode, StreamSpecification: out.Table.StreamSpecification}
			for _, g := range out.Table.GlobalSecondaryIndexes {
				live.GlobalSecondaryIndexes = append(live.GlobalSecondaryIndexes, types.GlobalSecondaryIndex{
					IndexName: g.IndexName, KeySchema: g.KeySchema, Projection: g.Projection})
			}
			assert.Equal(t, shapeOfDefinition(d), shapeOfDefinition(live), "%v: live table", mode)
		}
	}
}
