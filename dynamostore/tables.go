package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"github.com/dynabill/billing/internal/storeconf"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing/internal/layout"
)

// StatusIndexMode selects how status pages are read. It is an alias of
// a type in an internal package that the in-memory store shares without
// linking the AWS SDK; memory.StatusIndexMode is the same type, so either
// package's constants set either store.
type StatusIndexMode = storeconf.StatusIndexMode

const (
	// StatusIndexLegacy reads the legacy billing_status-index, whose only
	// key is billing_status: a page reads every record of the status and
	// billing_date is a filter, so items read per item returned grows with
	// the number of records that are not due.
	StatusIndexLegacy = storeconf.StatusIndexLegacy
	// StatusIndexSorted reads an index keyed by billing_status and
	// billing_date: the date range is a key condition and only due records
	// are read.
	StatusIndexSorted = storeconf.StatusIndexSorted
	// StatusIndexDue reads the sharded due index (see
	// [TableConfig.DueShards], which it needs), one shard at a time. Only
	// the statuses runs read are indexed: a query of another status is an
	// [billing.ErrInvalidQuery]. Switch to it once every existing item has
	// its due key, then drop the billing_status index (see
	// [SubscriptionsTableDefinition]).
	StatusIndexDue = storeconf.StatusIndexDue
)

// Default table and index names, as in the existing deployment.
const (
	DefaultSubscriptionsTable  = storeconf.DefaultSubscriptionsTable
	DefaultHistoryTable        = storeconf.DefaultHistoryTable
	DefaultSubscriptionIDIndex = "subscription_id-index"
	DefaultStatusIndex         = "billing_status-index"
	DefaultSortedStatusIndex   = "billing_status-billing_date-index"
	DefaultDueIndex            = "billing_due-billing_date-index"
)

// MaxDueShards bounds [TableConfig.DueShards] and
// [SingleTableConfig.DueShards].
const MaxDueShards = storeconf.MaxDueShards

// TableConfig names the tables and indexes. The zero value is the existing
// deployment with the legacy status index.
type TableConfig struct {
	// Subscriptions is the primary table. Defaults to "billing-activity".
	Subscriptions string
	// History is the audit table. Defaults to "billing-activity-history".
	History string
	// Locks is the dynamolock table. Defaults to "locks".
	Locks string
	// SubscriptionIDIndex is the GSI on subscription_id, on both tables.
	// Defaults to "subscription_id-index".
	SubscriptionIDIndex string
	// StatusIndexMode selects the status index. Defaults to StatusIndexLegacy.
	StatusIndexMode StatusIndexMode
	// StatusIndex is the status GSI on the primary table. Defaults to
	// "billing_status-index" in legacy mode and
	// "billing_status-billing_date-index" in sorted mode.
	StatusIndex string
	// DueShards, when above 0, splits the records into that many shards
	// by user ID and keeps the sharded due index: records a run acts on
	// (SCHEDULED, ERROR, PAUSED and ACHSENT) are written with the
	// attribute billing_due, "<billing_status>#<shard>", and every other
	// record without it, so DueIndex (key billing_due, billing_date) holds
	// exactly what runs read and no index partition takes more than one
	// shard's share of a day's writes. In StatusIndexDue mode the runs'
	// status pages read it, one shard at a time.
	//
	// To move an existing table: give every writer DueShards (reads stay
	// on StatusIndex), add DueIndex ([DueIndexDefinition]), run
	// [Repository.BackfillDue] to the end until a pass updates nothing,
	// then switch StatusIndexMode to StatusIndexDue, and drop the
	// billing_status index. A change of
	// DueShards needs the same backfill before reads rely on it. Defaults
	// to 0: no due keys, one shard.
	DueShards int
	// DueIndex is the sharded due GSI on the primary table. Defaults to
	// "billing_due-billing_date-index".
	DueIndex string
	// Totals, when set, names a table of its own where the repository
	// keeps the day totals of the records' outcomes
	// ([billing.TotalsRepository]; [TotalsTableDefinition] makes it): an
	// outcome adds to a counter item of its day and of its user's shard
	// in the transaction of its write, 2 WCU more a collection, 4 more a
	// decline (the reason's item too). The legacy tables stay as other
	// systems know them. Totals count from the day the writers are given
	// the table on. Defaults to "": no totals, and Totals answers
	// [billing.ErrNoTotals].
	Totals string
	// Invoices, when set, names a table of its own where [Invoices] keeps
	// invoices and credit notes, their history rows, the sequences'
	// counters and the numbers' claims ([InvoicesTableDefinition] makes
	// it; key pk, sk), and [Coupons] the coupons, promotion codes and
	// redemptions. Defaults to "": no invoices table.
	Invoices string
	// TotalsShards is the number of counter items a day's totals are
	// spread over, by user, so that concurrent collections seldom write
	// one item at once (DynamoDB cancels such transactions; the
	// repository tries them again). Reading a day costs one eventually
	// consistent read of each. At most [MaxTotalsShards]; every writer
	// and reader of a table must use the same. Defaults to
	// [DefaultTotalsShards] when Totals is set.
	TotalsShards int
}

// WithDefaults returns c with every empty name set to its default.
func (c TableConfig) WithDefaults() TableConfig {
	def := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	def(&c.Subscriptions, DefaultSubscriptionsTable)
	def(&c.History, DefaultHistoryTable)
	def(&c.Locks, DefaultLockTable)
	def(&c.SubscriptionIDIndex, DefaultSubscriptionIDIndex)
	def(&c.DueIndex, DefaultDueIndex)
	if c.Totals != "" && c.TotalsShards == 0 {
		c.TotalsShards = DefaultTotalsShards
	}
	if c.StatusIndexMode == StatusIndexSorted {
		def(&c.StatusIndex, DefaultSortedStatusIndex)
	} else {
		def(&c.StatusIndex, DefaultStatusIndex)
	}
	return c
}

func (c TableConfig) validate() error {
	if c.StatusIndexMode < StatusIndexLegacy || c.StatusIndexMode > StatusIndexDue {
		return fmt.Errorf("billing: TableConfig.StatusIndexMode: unknown %v", c.StatusIndexMode)
	}
	if c.StatusIndexMode == StatusIndexDue && c.DueShards == 0 {
		return fmt.Errorf("billing: TableConfig.StatusIndexMode: %v needs DueShards", c.StatusIndexMode)
	}
	if c.DueShards < 0 || c.DueShards > MaxDueShards {
		return fmt.Errorf("billing: TableConfig.DueShards: %d outside 0..%d", c.DueShards, MaxDueShards)
	}
	if c.TotalsShards < 0 || c.TotalsShards > MaxTotalsShards {
		return fmt.Errorf("billing: TableConfig.TotalsShards: %d outside 0..%d", c.TotalsShards, MaxTotalsShards)
	}
	return nil
}

func attrDef(name string) types.AttributeDefinition {
	return types.AttributeDefinition{AttributeName: aws.String(name), AttributeType: types.ScalarAttributeTypeS}
}

func keyElem(name string, kt types.KeyType) types.KeySchemaElement {
	return types.KeySchemaElement{AttributeName: aws.String(name), KeyType: kt}
}

// keysOnly is g projecting only the keys.
func keysOnly(g types.GlobalSecondaryIndex) types.GlobalSecondaryIndex {
	g.Projection = &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly}
	return g
}

func gsi(name string, keys ...types.KeySchemaElement) types.GlobalSecondaryIndex {
	return types.GlobalSecondaryIndex{
		IndexName:  aws.String(name),
		KeySchema:  keys,
		Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
	}
}

// SubscriptionsTableDefinition is the primary table: key user_id and
// billing_date, GSIs on subscription_id (keys only: a lookup by ID re-reads
// the record with a consistent read anyway, and an update that keeps the
// keys costs that index no write) and on billing_status (with
// billing_date as range key in sorted mode; none in due mode) and, with
// DueShards, the due index on billing_due and billing_date, the last two
// projecting every attribute (a status page decodes the records it
// returns), on-demand billing. Tables made with the subscription_id index
// projecting every attribute work the same.
//
// The due mode has no billing_status index: keyed on the status alone, it
// would take every SCHEDULED record's index writes on one partition (four
// a collection) and cap a day at about 250 collections a second whatever
// the shards. A table moved to the due mode should drop it.
func SubscriptionsTableDefinition(cfg TableConfig) *dynamodb.CreateTableInput {
	cfg = cfg.WithDefaults()
	def := &dynamodb.CreateTableInput{
		TableName:            aws.String(cfg.Subscriptions),
		AttributeDefinitions: []types.AttributeDefinition{attrDef(layout.AttrUserID), attrDef(layout.AttrBillingDate), attrDef(layout.AttrSubscriptionID)},
		KeySchema:            []types.KeySchemaElement{keyElem(layout.AttrUserID, types.KeyTypeHash), keyElem(layout.AttrBillingDate, types.KeyTypeRange)},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{
			keysOnly(gsi(cfg.SubscriptionIDIndex, keyElem(layout.AttrSubscriptionID, types.KeyTypeHash))),
		},
		BillingMode: types.BillingModePayPerRequest,
	}
	status := []types.KeySchemaElement{keyElem(layout.AttrBillingStatus, types.KeyTypeHash)}
	switch cfg.StatusIndexMode {
	case StatusIndexSorted:
		status = append(status, keyElem(layout.AttrBillingDate, types.KeyTypeRange))
		fallthrough
	case StatusIndexLegacy:
		def.AttributeDefinitions = append(def.AttributeDefinitions, attrDef(layout.AttrBillingStatus))
		def.GlobalSecondaryIndexes = append(def.GlobalSecondaryIndexes, gsi(cfg.StatusIndex, status...))
	}
	if cfg.DueShards > 0 {
		def.AttributeDefinitions = append(def.AttributeDefinitions, attrDef(layout.AttrDue))
		def.GlobalSecondaryIndexes = append(def.GlobalSecondaryIndexes, DueIndexDefinition(cfg))
	}
	return def
}

// DueIndexDefinition is the sharded due GSI of cfg (see
// [TableConfig.DueShards]): key billing_due and billing_date, every
// attribute projected (a page decodes the records it returns). Add it to
// an existing table with UpdateTable, then run [Repository.BackfillDue].
func DueIndexDefinition(cfg TableConfig) types.GlobalSecondaryIndex {
	cfg = cfg.WithDefaults()
	return gsi(cfg.DueIndex, keyElem(layout.AttrDue, types.KeyTypeHash), keyElem(layout.AttrBillingDate, types.KeyTypeRange))
}

// HistoryTableDefinition is the audit table: key user_id and last_run_date,
// a GSI on subscription_id projecting every attribute, on-demand billing.
func HistoryTableDefinition(cfg TableConfig) *dynamodb.CreateTableInput {
	cfg = cfg.WithDefaults()
	return &dynamodb.CreateTableInput{
		TableName:            aws.String(cfg.History),
		AttributeDefinitions: []types.AttributeDefinition{attrDef(layout.AttrUserID), attrDef(layout.AttrLastRunDate), attrDef(layout.AttrSubscriptionID)},
		KeySchema:            []types.KeySchemaElement{keyElem(layout.AttrUserID, types.KeyTypeHash), keyElem(layout.AttrLastRunDate, types.KeyTypeRange)},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{
			gsi(cfg.SubscriptionIDIndex, keyElem(layout.AttrSubscriptionID, types.KeyTypeHash)),
		},
		BillingMode: types.BillingModePayPerRequest,
		// The stream is the durable event log: every status change adds
		// one row (see StreamDecoder).
		StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewImage},
	}
}

// InvoicesTableDefinition returns the definition of the invoices table
// cfg.Invoices names (key pk, sk; on demand; a NEW_IMAGE stream, whose
// invoice history rows [NewInvoiceStreamDecoder] reads), or nil when it
// names none.
func InvoicesTableDefinition(cfg TableConfig) *dynamodb.CreateTableInput {
	if cfg.Invoices == "" {
		return nil
	}
	return &dynamodb.CreateTableInput{
		TableName:            aws.String(cfg.Invoices),
		AttributeDefinitions: []types.AttributeDefinition{attrDef(attrInvoicePK), attrDef(attrInvoiceSK)},
		KeySchema:            []types.KeySchemaElement{keyElem(attrInvoicePK, types.KeyTypeHash), keyElem(attrInvoiceSK, types.KeyTypeRange)},
		BillingMode:          types.BillingModePayPerRequest,
		// The stream carries every change of an invoice as the INSERT of
		// its history row (see StreamDecoder).
		StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewImage},
	}
}

// TableDefinitions returns the definitions of every table the library uses:
// subscriptions, history and locks, in that order, then the day totals'
// and the invoices' when cfg.Totals and cfg.Invoices name them.
func TableDefinitions(cfg TableConfig) []*dynamodb.CreateTableInput {
	cfg = cfg.WithDefaults()
	defs := []*dynamodb.CreateTableInput{
		SubscriptionsTableDefinition(cfg),
		HistoryTableDefinition(cfg),
		LockTableDefinition(cfg.Locks),
	}
	if t := TotalsTableDefinition(cfg); t != nil {
		defs = append(defs, t)
	}
	if t := InvoicesTableDefinition(cfg); t != nil {
		defs = append(defs, t)
	}
	return defs
}

// tableClient is what CreateTables needs.
type tableClient interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

// CreateTables creates every table of [TableDefinitions] that does not exist
// yet and waits until all are ACTIVE. It is idempotent: existing tables are
// left as they are (not compared; see the definitions to check them). Meant
// for tests, local runs and first provisioning; production tables are
// usually owned by infrastructure code.
func CreateTables(ctx context.Context, client tableClient, cfg TableConfig) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	defs := TableDefinitions(cfg)
	for _, def := range defs {
		_, err := client.CreateTable(ctx, def)
		var inUse *types.ResourceInUseException
		if err != nil && !errors.As(err, &inUse) {
			return fmt.Errorf("billing: create table %s: %w", aws.ToString(def.TableName), err)
		}
	}
	for _, def := range defs {
		if err := waitActive(ctx, client, aws.ToString(def.TableName)); err != nil {
			return err
		}
	}
	return nil
}

func waitActive(ctx context.Context, client tableClient, name string) error {
	delay := 50 * time.Millisecond
	for {
		out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		if err != nil {
			return fmt.Errorf("billing: describe table %s: %w", name, err)
		}
		active := out.Table != nil && out.Table.TableStatus == types.TableStatusActive
		for _, g := range out.Table.GlobalSecondaryIndexes {
			if g.IndexStatus != "" && g.IndexStatus != types.IndexStatusActive {
				active = false
			}
		}
		if active {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("billing: waiting for table %s: %w", name, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(delay*2, 2*time.Second)
	}
}
