package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/layout"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// singleTableDefaults checks and fills the fields every single-table
// store's config (named cfg in errors) shares: the client is required and
// observed through the telemetry providers, the table gets its defaults
// and is validated, the clock defaults to [billing.SystemClock] and the logger to
// discarding.
func singleTableDefaults(cfg string, client *API, table *SingleTableConfig, clock *billing.Clock, logger **slog.Logger, mp metric.MeterProvider, tp trace.TracerProvider) error {
	if *client == nil {
		return fmt.Errorf("billing: %s.Client is required", cfg)
	}
	*client = instrumentDynamo(*client, newTelemetry(mp, tp))
	*table = table.WithDefaults()
	if err := codecOf(*table).Validate(); err != nil {
		return err
	}
	if *clock == nil {
		*clock = billing.SystemClock{}
	}
	if *logger == nil {
		*logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

func includeGSI(name string, projection []string, keys ...types.KeySchemaElement) types.GlobalSecondaryIndex {
	return types.GlobalSecondaryIndex{
		IndexName: aws.String(name),
		KeySchema: keys,
		Projection: &types.Projection{
			ProjectionType:   types.ProjectionTypeInclude,
			NonKeyAttributes: slices.Clone(projection),
		},
	}
}

// SingleTableDefinition is the single table: generic string keys PK (hash)
// and SK (range), two sparse GSIs projecting only the attributes their job
// reads (INCLUDE), on-demand billing.
//
//   - ReminderIndex: NextReminderDate (hash), LastReminderDate (range),
//     projecting ReminderProjection;
//   - PaymentIndex: NextPaymentDate (hash), LastPaymentDate (range),
//     projecting PaymentProjection;
//   - with DueShards, DueIndex: billing_due (hash), billing_date (range),
//     projecting every attribute ([SingleTableDueIndexDefinition]).
//
// The indexes are sparse: only items carrying both of an index's key
// attributes appear in it, so credits, passes, profiles and receipts never
// do. A subscription must therefore carry LastPaymentDate (and
// LastReminderDate) from its creation, e.g. set to the creation date, or it
// is invisible to the daily jobs until its first payment.
//
// The TTL attribute is not part of a CreateTableInput: [CreateSingleTable]
// enables it with UpdateTimeToLive.
func SingleTableDefinition(config SingleTableConfig) *dynamodb.CreateTableInput {
	cfg := codecOf(config)
	def := &dynamodb.CreateTableInput{
		TableName: aws.String(cfg.Table),
		AttributeDefinitions: []types.AttributeDefinition{
			attrDef(layout.AttrPK), attrDef(layout.AttrSK),
			attrDef(layout.AttrNextReminderDate), attrDef(layout.AttrLastReminderDate),
			attrDef(layout.AttrNextPaymentDate), attrDef(layout.AttrLastPaymentDate),
		},
		KeySchema: []types.KeySchemaElement{keyElem(layout.AttrPK, types.KeyTypeHash), keyElem(layout.AttrSK, types.KeyTypeRange)},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{
			includeGSI(cfg.ReminderIndex, cfg.ReminderProjection,
				keyElem(layout.AttrNextReminderDate, types.KeyTypeHash), keyElem(layout.AttrLastReminderDate, types.KeyTypeRange)),
			includeGSI(cfg.PaymentIndex, cfg.PaymentProjection,
				keyElem(layout.AttrNextPaymentDate, types.KeyTypeHash), keyElem(layout.AttrLastPaymentDate, types.KeyTypeRange)),
		},
		BillingMode: types.BillingModePayPerRequest,
	}
	if cfg.DueShards > 0 {
		def.AttributeDefinitions = append(def.AttributeDefinitions, attrDef(layout.AttrDue), attrDef(layout.AttrBillingDate))
		def.GlobalSecondaryIndexes = append(def.GlobalSecondaryIndexes, SingleTableDueIndexDefinition(config))
	}
	return def
}

// SingleTableClient is what [CreateSingleTable] needs; *dynamodb.Client and
// every [API] satisfy it.
type SingleTableClient interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
	DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
}

var _ SingleTableClient = API(nil)

// CreateSingleTable creates the table of [SingleTableDefinition] unless it
// exists, waits until it and its indexes are ACTIVE, and enables time to
// live on cfg.TTLAttribute. It is idempotent: an existing table is left as
// it is (not compared), and TTL already enabled on the same attribute is
// left alone. TTL enabled on another attribute is an error: a table has only
// one, and changing it is a decision for its owner. Meant for tests, local
// runs and first provisioning.
func CreateSingleTable(ctx context.Context, client SingleTableClient, config SingleTableConfig) error {
	cfg := codecOf(config)
	if err := cfg.Validate(); err != nil {
		return err
	}
	def := SingleTableDefinition(config)
	_, err := client.CreateTable(ctx, def)
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("billing: create table %s: %w", cfg.Table, err)
	}
	if err := waitActive(ctx, client, cfg.Table); err != nil {
		return err
	}
	return enableTTL(ctx, client, cfg.Table, cfg.TTLAttribute)
}

func enableTTL(ctx context.Context, client SingleTableClient, table, attr string) error {
	desc, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil {
		return fmt.Errorf("billing: describe time to live of %s: %w", table, err)
	}
	if d := desc.TimeToLiveDescription; d != nil {
		cur := aws.ToString(d.AttributeName)
		switch d.TimeToLiveStatus {
		case types.TimeToLiveStatusEnabled, types.TimeToLiveStatusEnabling:
			if cur == attr {
				return nil
			}
			return fmt.Errorf("billing: table %s: time to live is on attribute %q, not %q", table, cur, attr)
		case types.TimeToLiveStatusDisabling:
			return fmt.Errorf("billing: table %s: time to live on %q is being disabled; retry later", table, cur)
		}
	}
	_, err = client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(attr),
			Enabled:       aws.Bool(true),
		},
	})
	if err != nil {
		// A concurrent CreateSingleTable may have enabled it first.
		again, derr := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
		if derr == nil && again.TimeToLiveDescription != nil &&
			aws.ToString(again.TimeToLiveDescription.AttributeName) == attr &&
			(again.TimeToLiveDescription.TimeToLiveStatus == types.TimeToLiveStatusEnabled ||
				again.TimeToLiveDescription.TimeToLiveStatus == types.TimeToLiveStatusEnabling) {
			return nil
		}
		return fmt.Errorf("billing: enable time to live on %s.%s: %w", table, attr, err)
	}
	return nil
}
