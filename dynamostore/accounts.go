package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/entitlement"
	"github.com/dynabill/billing/internal/layout"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// AccountsConfig configures [NewAccounts].
type AccountsConfig struct {
	// Client talks to DynamoDB; *dynamodb.Client satisfies it. Required.
	Client API
	// Table names the single table and its TTL attribute and sets the
	// account prefix. Defaults to [SingleTableConfig]'s defaults.
	Table SingleTableConfig
	// Clock gives "now" for timestamps, expiry and access resolution.
	// Defaults to [billing.SystemClock].
	Clock billing.Clock
	// Quotas are the monthly grants per tier. Tiers missing from the map
	// keep their default. Defaults to [entitlement.DefaultCreditQuotas].
	Quotas entitlement.CreditQuotas
	// CreditExpiry, when positive, makes every grant, top-up and monthly
	// grant set the balance's expiry to now + CreditExpiry (Unix seconds in
	// Table.TTLAttribute): unused credits expire that long after the last
	// credit was added, and DynamoDB's TTL later deletes the record. Zero
	// leaves the expiry attribute as it is (none on new records).
	CreditExpiry time.Duration
	// GrantMarkerRetention is how long the marker of a monthly grant is
	// kept (by TTL) to recognise a redelivered payment event. Defaults to
	// 400 days; processors redeliver for days, not months.
	GrantMarkerRetention time.Duration
	// RequestMarkerRetention is how long the marker of a grant, top-up or
	// consume is kept (by TTL) to recognise a retry with the same request
	// ID: a retry within it changes nothing, one after it (once DynamoDB
	// has deleted the marker, up to a few days later) is applied again.
	// Every such call writes one marker item in the user's partition.
	// Defaults to 30 days.
	RequestMarkerRetention time.Duration
	// Logger receives debug logs of ignored events and repeated requests.
	// Defaults to discarding.
	Logger *slog.Logger
	// MeterProvider and TracerProvider observe every DynamoDB call (see
	// the dynabill.dynamodb.duration histogram). Default to the global OpenTelemetry
	// providers, no-ops unless the host installs some.
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider
}

func (c AccountsConfig) withDefaults() (AccountsConfig, error) {
	if err := singleTableDefaults("AccountsConfig", &c.Client, &c.Table, &c.Clock, &c.Logger, c.MeterProvider, c.TracerProvider); err != nil {
		return c, err
	}
	q, err := c.Quotas.WithDefaults()
	if err != nil {
		return c, fmt.Errorf("billing: AccountsConfig.Quotas: %w", err)
	}
	c.Quotas = q
	if c.CreditExpiry < 0 {
		return c, fmt.Errorf("billing: AccountsConfig.CreditExpiry: negative %v", c.CreditExpiry)
	}
	if c.GrantMarkerRetention < 0 {
		return c, fmt.Errorf("billing: AccountsConfig.GrantMarkerRetention: negative %v", c.GrantMarkerRetention)
	}
	if c.GrantMarkerRetention == 0 {
		c.GrantMarkerRetention = 400 * 24 * time.Hour
	}
	if c.RequestMarkerRetention < 0 {
		return c, fmt.Errorf("billing: AccountsConfig.RequestMarkerRetention: negative %v", c.RequestMarkerRetention)
	}
	if c.RequestMarkerRetention == 0 {
		c.RequestMarkerRetention = 30 * 24 * time.Hour
	}
	return c, nil
}

// Accounts is [Accounts] on the single table of [SingleTableConfig],
// with the items and attribute names existing deployments use.
type Accounts struct {
	cfg AccountsConfig
	tbl layout.SingleTableConfig
}

var _ entitlement.Accounts = (*Accounts)(nil)

// NewAccounts returns Accounts on cfg.Table.
func NewAccounts(cfg AccountsConfig) (*Accounts, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Accounts{cfg: cfg, tbl: codecOf(cfg.Table)}, nil
}

func checkAccount(op, userID string) error {
	if err := entitlement.CheckAccountID(userID); err != nil {
		return fmt.Errorf("billing: %s: %w", op, err)
	}
	return nil
}

func (a *Accounts) key(userID, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{layout.AttrPK: stringAV(a.tbl.AccountPK(userID)), layout.AttrSK: stringAV(sk)}
}

func (a *Accounts) keyText(userID, sk string) string {
	return "PK=" + a.tbl.AccountPK(userID) + " SK=" + sk
}

func (a *Accounts) now() time.Time { return a.cfg.Clock.Now().UTC() }

// getItem reads one item with a consistent read; nil when absent.
func (a *Accounts) getItem(ctx context.Context, op, userID, sk string) (map[string]types.AttributeValue, error) {
	out, err := a.cfg.Client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &a.tbl.Table,
		Key:            a.key(userID, sk),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("billing: %s (%s): %w", op, a.keyText(userID, sk), err)
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	return out.Item, nil
}

// queryAccount reads every item of the user's partition whose sort key
// starts with prefix (all items for ""), with consistent reads, all pages.
func (a *Accounts) queryAccount(ctx context.Context, op, userID, prefix string) ([]map[string]types.AttributeValue, error) {
	return queryAccount(ctx, a.cfg.Client, a.tbl, op, userID, prefix)
}

// queryAccount reads every item of an account's partition whose sort key
// begins with prefix ("" for all), consistently, across all pages.
func queryAccount(ctx context.Context, client API, table layout.SingleTableConfig, op, userID, prefix string) ([]map[string]types.AttributeValue, error) {
	var sk *expression.KeyConditionBuilder
	if prefix != "" {
		c := expression.Key(layout.AttrSK).BeginsWith(prefix)
		sk = &c
	}
	return queryAccountWhere(ctx, client, table, op, userID, sk)
}

// queryAccountWhere reads every item of an account's partition whose sort
// key meets sk (nil for all), consistently, across all pages.
func queryAccountWhere(ctx context.Context, client API, table layout.SingleTableConfig, op, userID string, sk *expression.KeyConditionBuilder) ([]map[string]types.AttributeValue, error) {
	key := expression.Key(layout.AttrPK).Equal(exprValue(layout.StringAV(table.AccountPK(userID))))
	if sk != nil {
		key = key.And(*sk)
	}
	expr := mustBuild(expression.NewBuilder().WithKeyCondition(key))
	in := &dynamodb.QueryInput{
		TableName:                 &table.Table,
		KeyConditionExpression:    expr.KeyCondition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		ConsistentRead:            aws.Bool(true),
	}
	items, err := queryAll(ctx, client, in, 0)
	if err != nil {
		return nil, fmt.Errorf("billing: %s (user %s): %w", op, userID, err)
	}
	return items, nil
}

func isConditionFailed(err error) (*types.ConditionalCheckFailedException, bool) {
	var ccf *types.ConditionalCheckFailedException
	ok := errors.As(err, &ccf)
	return ccf, ok
}
