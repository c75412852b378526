package billing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Default names of the single-table layout: the table, account partitions
// USER#<id>, a sparse reminder index GSI-1 and payment index GSI-2, and
// the TTL attribute expiresAt that credit balances, grant markers and
// receipts expire by. Every one can be set in [SingleTableConfig].
const (
	DefaultSingleTable        = "billing"
	DefaultAccountPrefix      = "USER#"
	DefaultReminderIndex      = "GSI-1"
	DefaultPaymentIndex       = "GSI-2"
	DefaultSingleTTLAttribute = "expiresAt"
	maxAccountPrefix          = 64
)

// Key and index attributes of the single-table layout.
const (
	// AttrPK is the generic partition key: the account prefix and the
	// account (user) ID, e.g. "USER#abc123" or "ACC#123".
	AttrPK = "PK"
	// AttrSK is the generic sort key naming the entity within the account:
	// "CREDITS#BALANCE", "SUBSCRIPTION#<id>", "FOUNDER#<pass>",
	// "PROFILE#<id>", and for the recurring payments layout "SUB#…", "REC#…".
	AttrSK = "SK"
	// AttrNextReminderDate and AttrLastReminderDate key the reminder index.
	AttrNextReminderDate = "NextReminderDate"
	AttrLastReminderDate = "LastReminderDate"
	// AttrNextPaymentDate and AttrLastPaymentDate key the payment index.
	AttrNextPaymentDate = "NextPaymentDate"
	AttrLastPaymentDate = "LastPaymentDate"
)

// Sort keys and sort-key prefixes of the account entities.
const (
	SKCredits            = "CREDITS#BALANCE"
	SKCreditGrantPrefix  = "CREDITS#GRANT#"
	SKSubscriptionPrefix = "SUBSCRIPTION#"
	SKFounderPrefix      = "FOUNDER#"
	SKProfilePrefix      = "PROFILE#"
)

// DefaultReminderProjection and DefaultPaymentProjection return the non-key
// attributes the reminder and payment indexes project: what a reminder or
// a collection run reads without fetching the item. The table's PK and SK and the index's own keys are always projected, so
// they are not listed.
func DefaultReminderProjection() []string {
	return []string{"SKU", "Email", AttrNextPaymentDate}
}

// DefaultPaymentProjection: see [DefaultReminderProjection].
func DefaultPaymentProjection() []string {
	return []string{"Email", "PaymentDay", "PaymentAmount", "SKU", "PaymentDetails"}
}

// SingleTableConfig names the single table, its indexes and its TTL
// attribute, and the prefix of account partitions. The zero value is the
// provider-billed tiers layout (USER#<id> partitions, TTL on expiresAt);
// the recurring payments layout sets AccountPrefix "ACC#" and
// TTLAttribute "TTL".
type SingleTableConfig struct {
	// Table is the table name. Defaults to [DefaultSingleTable] ("billing");
	// a host with an existing table sets its name here.
	Table string
	// AccountPrefix starts every account's partition key: PK is
	// AccountPrefix + account ID. Defaults to "USER#".
	AccountPrefix string
	// ReminderIndex is the sparse GSI keyed by NextReminderDate (hash) and
	// LastReminderDate (range). Defaults to "GSI-1".
	ReminderIndex string
	// PaymentIndex is the sparse GSI keyed by NextPaymentDate (hash) and
	// LastPaymentDate (range). Defaults to "GSI-2".
	PaymentIndex string
	// ReminderProjection lists the non-key attributes the reminder index
	// projects (INCLUDE). Defaults to [DefaultReminderProjection].
	ReminderProjection []string
	// PaymentProjection lists the non-key attributes the payment index
	// projects (INCLUDE). Defaults to [DefaultPaymentProjection].
	PaymentProjection []string
	// TTLAttribute is the table's time-to-live attribute (a Number of Unix
	// seconds): DynamoDB deletes an item some time after the instant it
	// holds. One attribute serves every entity: credit balances write their
	// expiry to it, and so do the monthly grant markers and receipts.
	// Defaults to "expiresAt".
	TTLAttribute string
}

// WithDefaults returns c with every empty field set to its default. The
// projection slices are copied.
func (c SingleTableConfig) WithDefaults() SingleTableConfig {
	def := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	def(&c.Table, DefaultSingleTable)
	def(&c.AccountPrefix, DefaultAccountPrefix)
	def(&c.ReminderIndex, DefaultReminderIndex)
	def(&c.PaymentIndex, DefaultPaymentIndex)
	def(&c.TTLAttribute, DefaultSingleTTLAttribute)
	if c.ReminderProjection == nil {
		c.ReminderProjection = DefaultReminderProjection()
	} else {
		c.ReminderProjection = slices.Clone(c.ReminderProjection)
	}
	if c.PaymentProjection == nil {
		c.PaymentProjection = DefaultPaymentProjection()
	} else {
		c.PaymentProjection = slices.Clone(c.PaymentProjection)
	}
	return c
}

// decodeDefaults fills only what the item decoders read (WithDefaults
// also copies the projections).
func (c SingleTableConfig) decodeDefaults() SingleTableConfig {
	if c.AccountPrefix == "" {
		c.AccountPrefix = DefaultAccountPrefix
	}
	if c.TTLAttribute == "" {
		c.TTLAttribute = DefaultSingleTTLAttribute
	}
	return c
}

// Validate checks a config after defaults.
func (c SingleTableConfig) Validate() error {
	if len(c.AccountPrefix) > maxAccountPrefix {
		return fmt.Errorf("billing: SingleTableConfig.AccountPrefix: longer than %d bytes", maxAccountPrefix)
	}
	if c.ReminderIndex == c.PaymentIndex {
		return fmt.Errorf("billing: SingleTableConfig: ReminderIndex and PaymentIndex are both %q", c.PaymentIndex)
	}
	keys := []string{AttrPK, AttrSK, AttrNextReminderDate, AttrLastReminderDate, AttrNextPaymentDate, AttrLastPaymentDate}
	if slices.Contains(keys, c.TTLAttribute) {
		return fmt.Errorf("billing: SingleTableConfig.TTLAttribute: %q is a key attribute", c.TTLAttribute)
	}
	for _, p := range []struct {
		field string
		attrs []string
		keys  []string
	}{
		{"ReminderProjection", c.ReminderProjection, []string{AttrPK, AttrSK, AttrNextReminderDate, AttrLastReminderDate}},
		{"PaymentProjection", c.PaymentProjection, []string{AttrPK, AttrSK, AttrNextPaymentDate, AttrLastPaymentDate}},
	} {
		for _, a := range p.attrs {
			if a == "" || slices.Contains(p.keys, a) {
				return fmt.Errorf("billing: SingleTableConfig.%s: %q is empty or a key of the table or the index (keys are always projected)", p.field, a)
			}
		}
	}
	return nil
}

// singleTableDefaults checks and fills the fields every single-table
// store's config (named cfg in errors) shares: the client is required and
// observed through the telemetry providers, the table gets its defaults
// and is validated, the clock defaults to [SystemClock] and the logger to
// discarding.
func singleTableDefaults(cfg string, client *DynamoDBAPI, table *SingleTableConfig, clock *Clock, logger **slog.Logger, mp metric.MeterProvider, tp trace.TracerProvider) error {
	if *client == nil {
		return fmt.Errorf("billing: %s.Client is required", cfg)
	}
	*client = instrumentDynamo(*client, newTelemetry(mp, tp))
	*table = table.WithDefaults()
	if err := table.Validate(); err != nil {
		return err
	}
	if *clock == nil {
		*clock = SystemClock{}
	}
	if *logger == nil {
		*logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// accountPK is the partition key of an account.
func (c SingleTableConfig) AccountPK(accountID string) string { return c.AccountPrefix + accountID }

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
//     projecting PaymentProjection.
//
// The indexes are sparse: only items carrying both of an index's key
// attributes appear in it, so credits, passes, profiles and receipts never
// do. A subscription must therefore carry LastPaymentDate (and
// LastReminderDate) from its creation, e.g. set to the creation date, or it
// is invisible to the daily jobs until its first payment.
//
// The TTL attribute is not part of a CreateTableInput: [CreateSingleTable]
// enables it with UpdateTimeToLive.
func SingleTableDefinition(cfg SingleTableConfig) *dynamodb.CreateTableInput {
	cfg = cfg.WithDefaults()
	return &dynamodb.CreateTableInput{
		TableName: aws.String(cfg.Table),
		AttributeDefinitions: []types.AttributeDefinition{
			attrDef(AttrPK), attrDef(AttrSK),
			attrDef(AttrNextReminderDate), attrDef(AttrLastReminderDate),
			attrDef(AttrNextPaymentDate), attrDef(AttrLastPaymentDate),
		},
		KeySchema: []types.KeySchemaElement{keyElem(AttrPK, types.KeyTypeHash), keyElem(AttrSK, types.KeyTypeRange)},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{
			includeGSI(cfg.ReminderIndex, cfg.ReminderProjection,
				keyElem(AttrNextReminderDate, types.KeyTypeHash), keyElem(AttrLastReminderDate, types.KeyTypeRange)),
			includeGSI(cfg.PaymentIndex, cfg.PaymentProjection,
				keyElem(AttrNextPaymentDate, types.KeyTypeHash), keyElem(AttrLastPaymentDate, types.KeyTypeRange)),
		},
		BillingMode: types.BillingModePayPerRequest,
	}
}

// SingleTableClient is what [CreateSingleTable] needs; *dynamodb.Client and
// every [DynamoDBAPI] satisfy it.
type SingleTableClient interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
	DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
}

var _ SingleTableClient = DynamoDBAPI(nil)

// CreateSingleTable creates the table of [SingleTableDefinition] unless it
// exists, waits until it and its indexes are ACTIVE, and enables time to
// live on cfg.TTLAttribute. It is idempotent: an existing table is left as
// it is (not compared), and TTL already enabled on the same attribute is
// left alone. TTL enabled on another attribute is an error: a table has only
// one, and changing it is a decision for its owner. Meant for tests, local
// runs and first provisioning.
func CreateSingleTable(ctx context.Context, client SingleTableClient, cfg SingleTableConfig) error {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	def := SingleTableDefinition(cfg)
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
