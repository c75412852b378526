package dynamostore

import (
	"context"
	"fmt"
	"github.com/dynabill/billing/internal/sdkav"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/entitlement"
	"github.com/dynabill/billing/internal/layout"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// PaymentsConfig configures [NewPayments].
type PaymentsConfig struct {
	// Client talks to DynamoDB; *dynamodb.Client satisfies it. Required.
	Client API
	// Table names the single table, its indexes and TTL attribute, and
	// the account prefix. Defaults to [SingleTableConfig]'s defaults; the
	// recurring payments layout uses AccountPrefix "ACC#".
	Table SingleTableConfig
	// Clock gives "now" for CreatedAt, UpdatedAt and reminder dates.
	// Defaults to [billing.SystemClock].
	Clock billing.Clock
	// ReceiptRetention is how long after its processed date a receipt
	// expires (Table.TTLAttribute). Defaults to DefaultReceiptRetention.
	ReceiptRetention time.Duration
	// PageSize is the page size of the due-date queries, 1 to
	// MaxPaymentsPageSize. Defaults to DefaultPaymentsPageSize.
	PageSize int
	// Logger receives warnings about undecodable items. Defaults to
	// discarding.
	Logger *slog.Logger
	// MeterProvider and TracerProvider observe every DynamoDB call.
	// Default to the global OpenTelemetry providers.
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider
}

func (c PaymentsConfig) withDefaults() (PaymentsConfig, error) {
	if err := singleTableDefaults("PaymentsConfig", &c.Client, &c.Table, &c.Clock, &c.Logger, c.MeterProvider, c.TracerProvider); err != nil {
		return c, err
	}
	var err error
	if c.ReceiptRetention, c.PageSize, err = layout.PaymentsLimits(c.ReceiptRetention, c.PageSize); err != nil {
		return c, fmt.Errorf("billing: PaymentsConfig.%w", err)
	}
	return c, nil
}

// Payments is [Payments] on the single table of [SingleTableConfig].
type Payments struct {
	cfg PaymentsConfig
	tbl layout.SingleTableConfig
}

var _ entitlement.Payments = (*Payments)(nil)

// NewPayments returns Payments on cfg.Table.
func NewPayments(cfg PaymentsConfig) (*Payments, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Payments{cfg: cfg, tbl: codecOf(cfg.Table)}, nil
}

func (p *Payments) now() time.Time { return p.cfg.Clock.Now().UTC().Truncate(time.Second) }

func (p *Payments) subKey(accountID, subscriptionID, sku string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		layout.AttrPK: stringAV(p.tbl.AccountPK(accountID)), layout.AttrSK: stringAV(layout.RecurringSK(subscriptionID, sku)),
	}
}

func (p *Payments) keyText(accountID, sk string) string {
	return "PK=" + p.tbl.AccountPK(accountID) + " SK=" + sk
}

// CreateSubscription implements [Payments.CreateSubscription] with one
// conditional PutItem.
func (p *Payments) CreateSubscription(ctx context.Context, s entitlement.RecurringSubscription) (entitlement.RecurringSubscription, error) {
	now := p.now()
	s.CreatedAt, s.UpdatedAt, s.Version = now, now, 1
	item, err := p.tbl.EncodeRecurringSubscription(s)
	if err != nil {
		return entitlement.RecurringSubscription{}, fmt.Errorf("billing: create subscription: %w", err)
	}
	cond := absent(layout.AttrPK)
	_, err = p.cfg.Client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &p.tbl.Table, Item: sdkav.ToSDK(item),
		ConditionExpression:      cond.Condition(),
		ExpressionAttributeNames: cond.Names(),
	})
	key := p.keyText(s.AccountID, layout.RecurringSK(s.SubscriptionID, s.SKU))
	if err := translateWrite("create subscription", []txOp{{key: key, reason: "subscription exists", exists: true}}, err); err != nil {
		return entitlement.RecurringSubscription{}, err
	}
	return p.tbl.DecodeRecurringSubscription(item)
}

// GetSubscription implements [Payments.GetSubscription] with one
// consistent GetItem.
func (p *Payments) GetSubscription(ctx context.Context, accountID, subscriptionID, sku string) (entitlement.RecurringSubscription, error) {
	if err := layout.CheckPaymentKey(accountID, subscriptionID, sku); err != nil {
		return entitlement.RecurringSubscription{}, fmt.Errorf("billing: get subscription: %w", err)
	}
	key := p.keyText(accountID, layout.RecurringSK(subscriptionID, sku))
	out, err := p.cfg.Client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &p.tbl.Table, Key: p.subKey(accountID, subscriptionID, sku), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return entitlement.RecurringSubscription{}, fmt.Errorf("billing: get subscription (%s): %w", key, err)
	}
	if len(out.Item) == 0 {
		return entitlement.RecurringSubscription{}, fmt.Errorf("billing: get subscription (%s): %w", key, billing.ErrNotFound)
	}
	return p.tbl.DecodeRecurringSubscription(sdkav.FromSDK(out.Item))
}

// SubscriptionsByAccount implements [Payments.SubscriptionsByAccount]:
// one consistent Query, begins_with(SK, "SUB#"), all pages.
func (p *Payments) SubscriptionsByAccount(ctx context.Context, accountID string) ([]entitlement.RecurringSubscription, error) {
	if err := checkAccount("subscriptions by account", accountID); err != nil {
		return nil, err
	}
	items, err := queryAccount(ctx, p.cfg.Client, p.tbl, "subscriptions by account", accountID, layout.SKRecurringPrefix)
	if err != nil {
		return nil, err
	}
	subs, err := layout.DecodeAll(sdkav.FromSDKItems(items), p.tbl.DecodeRecurringSubscription)
	if err != nil {
		return nil, fmt.Errorf("billing: subscriptions by account: %w", err)
	}
	return subs, nil
}

// UpdateSubscription implements [Payments.UpdateSubscription] with one
// UpdateItem conditional on the version.
func (p *Payments) UpdateSubscription(ctx context.Context, prev, next entitlement.RecurringSubscription) (entitlement.RecurringSubscription, error) {
	next, err := layout.PrepareSubscriptionUpdate(prev, next, p.now())
	if err != nil {
		return entitlement.RecurringSubscription{}, fmt.Errorf("billing: update subscription: %w", err)
	}
	u, err := p.subUpdate(prev.Version, next)
	if err != nil {
		return entitlement.RecurringSubscription{}, fmt.Errorf("billing: update subscription: %w", err)
	}
	_, err = p.cfg.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: u.TableName, Key: u.Key, UpdateExpression: u.UpdateExpression, ConditionExpression: u.ConditionExpression,
		ExpressionAttributeNames: u.ExpressionAttributeNames, ExpressionAttributeValues: u.ExpressionAttributeValues,
	})
	key := p.keyText(prev.AccountID, layout.RecurringSK(prev.SubscriptionID, prev.SKU))
	if err := translateWrite("update subscription", []txOp{{key: key, reason: "version changed or subscription deleted"}}, err); err != nil {
		return entitlement.RecurringSubscription{}, err
	}
	return layout.RoundTripSub(p.tbl, next)
}
