package billing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/dynabill/billing/internal/timefmt"
)

// ErrInvalidPayment reports a recurring subscription or receipt that
// cannot be stored: a bad ID, SKU, payment day, amount or date, or a
// receipt that does not belong to the subscription it is recorded for.
// The error is a [*FieldError] naming the field.
var ErrInvalidPayment = errors.New("billing: invalid recurring payment")

// Sort-key prefixes and limits of the recurring payments layout.
const (
	// SKRecurringPrefix starts a subscription's sort key:
	// "SUB#<subscriptionID>#SKU#<sku>".
	SKRecurringPrefix = "SUB#"
	// SKReceiptPrefix starts a receipt's sort key:
	// "REC#<processed date, fixed-width RFC3339 nanos>#SKU#<sku>".
	SKReceiptPrefix = "REC#"
	// MaxPaymentID bounds a subscription ID and a SKU (bytes).
	MaxPaymentID = 256
	// MaxPaymentDay is the last day of the month a payment may be taken
	// on: a subscription is billed on the same day each month, and only
	// days 1 to 28 exist in every month.
	MaxPaymentDay = 28
	// DefaultReceiptRetention is how long a receipt is kept (by TTL)
	// after its processed date: long enough to show the past six months
	// of receipts.
	DefaultReceiptRetention = 183 * 24 * time.Hour
	// DefaultPaymentsPageSize and MaxPaymentsPageSize bound the pages of
	// the due-date queries.
	DefaultPaymentsPageSize = 100
	MaxPaymentsPageSize     = 100
)

// Attribute names of the recurring payments items.
const (
	payEntity        = "Entity"
	paySKU           = "SKU"
	payEmail         = "Email"
	payDay           = "PaymentDay"
	payAmount        = "PaymentAmount"
	payDetails       = "PaymentDetails"
	payVersion       = "Version"
	payCreatedAt     = "CreatedAt"
	payUpdatedAt     = "UpdatedAt"
	payEntitySub     = "Subscription"
	payEntityReceipt = "Receipt"
	payDayLayout     = "2006-01-02"
	payNever         = "0001-01-01" // the zero time's day: "never", sorts first
)

// RecurringSubscription is a recurring payments subscription: the
// account agrees to pay PaymentAmount on day
// PaymentDay of every month for SKU.
//
// It is stored at PK=<AccountPrefix><AccountID>,
// SK=SUB#<SubscriptionID>#SKU#<SKU>. The four dates are calendar days: the
// store keeps only the UTC date (midnight UTC) and writes it as
// "2006-01-02", because the daily jobs query the indexes by equality on one
// day. A zero NextPaymentDate or NextReminderDate means "not due": the
// attribute is removed, and the item leaves that sparse index. The Last…
// dates are always written, because they are the indexes' sort keys and
// an item without them would never appear in an index; a zero Last… date
// ("never") is written as "0001-01-01" (the zero time's date), which sorts
// before every real date.
type RecurringSubscription struct {
	AccountID      string
	SubscriptionID string // no '#'
	SKU            string // no '#'
	Email          string
	// PaymentDay is the day of the month payments are taken, 1 to
	// [MaxPaymentDay].
	PaymentDay    int
	PaymentAmount Amount
	// PaymentDetails is an opaque token of the payment method (never card
	// data).
	PaymentDetails   string
	NextPaymentDate  time.Time
	NextReminderDate time.Time
	LastPaymentDate  time.Time
	LastReminderDate time.Time
	// CreatedAt and UpdatedAt are set by the store (whole seconds).
	CreatedAt time.Time
	UpdatedAt time.Time
	// Version is set by the store: 1 on creation, incremented by every
	// update. Updates are conditional on the version the caller read.
	Version int
}

// Payments stores recurring payments: subscriptions and receipts in the
// account partitions of the single
// table, and the two sparse indexes the daily reminder and payment jobs
// read. [DynamoPayments] implements it; billingtest.Payments is the
// in-memory twin. Every method is safe for concurrent use.
type Payments interface {
	// CreateSubscription stores a new subscription with Version 1, or
	// returns a [*ConflictError] wrapping [ErrAlreadyExists].
	CreateSubscription(ctx context.Context, s RecurringSubscription) (RecurringSubscription, error)
	// GetSubscription returns one subscription or an error wrapping
	// [ErrNotFound].
	GetSubscription(ctx context.Context, accountID, subscriptionID, sku string) (RecurringSubscription, error)
	// UpdateSubscription writes next's fields over prev if the stored
	// version is still prev.Version (else a [*ConflictError] wrapping
	// [ErrConflict]); next must have prev's key. CreatedAt is kept.
	UpdateSubscription(ctx context.Context, prev, next RecurringSubscription) (RecurringSubscription, error)
	// MarkReminded records that prev's reminder was sent today (the
	// clock's UTC date) and sets the next reminder date (zero: none).
	MarkReminded(ctx context.Context, prev RecurringSubscription, nextReminder time.Time) (RecurringSubscription, error)
	// SubscriptionsByAccount returns the account's subscriptions ordered
	// by sort key (never receipts).
	SubscriptionsByAccount(ctx context.Context, accountID string) ([]RecurringSubscription, error)
	// DuePaymentsByDate and DueRemindersByDate return one page of the
	// subscriptions whose NextPaymentDate (NextReminderDate) is day's UTC
	// date, and an opaque cursor for the next page ("" at the end; a page
	// may be empty while the cursor is not). A bad cursor is an error
	// wrapping [ErrInvalidCursor].
	DuePaymentsByDate(ctx context.Context, day time.Time, cursor string) ([]RecurringSubscription, string, error)
	DueRemindersByDate(ctx context.Context, day time.Time, cursor string) ([]RecurringSubscription, string, error)

	// CreateReceipt stores a receipt. It is idempotent on the receipt's
	// key: a replay with the same SubscriptionID, ProcessedAmount and
	// TransactionID succeeds without change; other content is a
	// [*ConflictError] wrapping [ErrAlreadyExists]. ExpiresAt is set by
	// the store to ProcessedDate + the receipt retention.
	CreateReceipt(ctx context.Context, r Receipt) (Receipt, error)
	// ReceiptsByAccount returns the account's receipts processed at or
	// after since, newest first (never subscriptions).
	ReceiptsByAccount(ctx context.Context, accountID string, since time.Time) ([]Receipt, error)
	// RecordPayment atomically stores the receipt (as CreateReceipt) and
	// updates the subscription: NextPaymentDate and NextReminderDate
	// become the given dates (zero: none), LastPaymentDate the receipt's
	// processed date, Version prev.Version+1. If the stored version is not
	// prev.Version nothing is written, not even the receipt.
	RecordPayment(ctx context.Context, prev RecurringSubscription, r Receipt, nextPayment, nextReminder time.Time) (RecurringSubscription, Receipt, error)
}

// DynamoPaymentsConfig configures [NewDynamoPayments].
type DynamoPaymentsConfig struct {
	// Client talks to DynamoDB; *dynamodb.Client satisfies it. Required.
	Client DynamoDBAPI
	// Table names the single table, its indexes and TTL attribute, and
	// the account prefix. Defaults to [SingleTableConfig]'s defaults; the
	// recurring payments layout uses AccountPrefix "ACC#".
	Table SingleTableConfig
	// Clock gives "now" for CreatedAt, UpdatedAt and reminder dates.
	// Defaults to [SystemClock].
	Clock Clock
	// ReceiptRetention is how long after its processed date a receipt
	// expires (Table.TTLAttribute). Defaults to [DefaultReceiptRetention].
	ReceiptRetention time.Duration
	// PageSize is the page size of the due-date queries, 1 to
	// [MaxPaymentsPageSize]. Defaults to [DefaultPaymentsPageSize].
	PageSize int
	// Logger receives warnings about undecodable items. Defaults to
	// discarding.
	Logger *slog.Logger
	// MeterProvider and TracerProvider observe every DynamoDB call.
	// Default to the global OpenTelemetry providers.
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider
}

func (c DynamoPaymentsConfig) withDefaults() (DynamoPaymentsConfig, error) {
	if err := singleTableDefaults("DynamoPaymentsConfig", &c.Client, &c.Table, &c.Clock, &c.Logger, c.MeterProvider, c.TracerProvider); err != nil {
		return c, err
	}
	var err error
	if c.ReceiptRetention, c.PageSize, err = PaymentsLimits(c.ReceiptRetention, c.PageSize); err != nil {
		return c, fmt.Errorf("billing: DynamoPaymentsConfig.%w", err)
	}
	return c, nil
}

// PaymentsLimits validates and defaults a receipt retention and a page
// size for a [Payments] implementation: zero means the default, a
// negative retention or a page size outside 1 to [MaxPaymentsPageSize] is
// an error naming the field.
func PaymentsLimits(retention time.Duration, pageSize int) (time.Duration, int, error) {
	switch {
	case retention < 0:
		return 0, 0, fmt.Errorf("ReceiptRetention: negative %v", retention)
	case pageSize < 0 || pageSize > MaxPaymentsPageSize:
		return 0, 0, fmt.Errorf("PageSize: %d outside 1 to %d", pageSize, MaxPaymentsPageSize)
	}
	if retention == 0 {
		retention = DefaultReceiptRetention
	}
	if pageSize == 0 {
		pageSize = DefaultPaymentsPageSize
	}
	return retention, pageSize, nil
}

// DynamoPayments is [Payments] on the single table of [SingleTableConfig].
type DynamoPayments struct {
	cfg DynamoPaymentsConfig
}

var _ Payments = (*DynamoPayments)(nil)

// NewDynamoPayments returns Payments on cfg.Table.
func NewDynamoPayments(cfg DynamoPaymentsConfig) (*DynamoPayments, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &DynamoPayments{cfg: cfg}, nil
}

// RecurringSK is the sort key of a subscription.
func RecurringSK(subscriptionID, sku string) string {
	return SKRecurringPrefix + subscriptionID + "#SKU#" + sku
}

// PaymentDate normalizes t to its UTC calendar day (midnight UTC), as the
// store keeps every date of a [RecurringSubscription]; zero stays zero.
func PaymentDate(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

func payInvalid(field, value, reason string) error {
	return &FieldError{Field: field, Value: value, Err: fmt.Errorf("%w: %s", ErrInvalidPayment, reason)}
}

// checkPaymentKey validates the key fields shared by subscriptions and receipts.
func checkPaymentKey(accountID, subscriptionID, sku string) error {
	if err := CheckAccountID(accountID); err != nil {
		return &FieldError{Field: "AccountID", Value: accountID, Err: err}
	}
	for _, f := range []struct{ name, v string }{{"SubscriptionID", subscriptionID}, {"SKU", sku}} {
		if f.v == "" || len(f.v) > MaxPaymentID || strings.Contains(f.v, "#") {
			return payInvalid(f.name, f.v, fmt.Sprintf("1 to %d bytes without '#'", MaxPaymentID))
		}
	}
	return nil
}

// PaymentDayKey is how a day is stored in NextPaymentDate,
// NextReminderDate and their Last… attributes, and so the value the
// due-date indexes are queried by: its UTC date, "2006-01-02". It returns
// "" for the zero time or a year outside 0001–9999.
func PaymentDayKey(t time.Time) string {
	d, err := payDayText("day", t, false)
	if err != nil {
		return ""
	}
	return d
}

// payDayText encodes a date of a subscription; zero is "" (attribute
// absent) unless never is set, then it is payNever.
func payDayText(field string, t time.Time, never bool) (string, error) {
	if t.IsZero() {
		if never {
			return payNever, nil
		}
		return "", nil
	}
	if y := t.UTC().Year(); y < 1 || y > 9999 {
		return "", payInvalid(field, t.String(), "year outside 0001-9999")
	}
	return t.UTC().Format(payDayLayout), nil
}

// EncodeRecurringSubscription returns the item of s, validating it. Dates
// are written as days (see [RecurringSubscription]); CreatedAt and
// UpdatedAt as whole seconds.
func (c SingleTableConfig) EncodeRecurringSubscription(s RecurringSubscription) (map[string]types.AttributeValue, error) {
	c = c.decodeDefaults()
	if err := checkPaymentKey(s.AccountID, s.SubscriptionID, s.SKU); err != nil {
		return nil, err
	}
	if s.PaymentDay < 1 || s.PaymentDay > MaxPaymentDay {
		return nil, payInvalid("PaymentDay", fmt.Sprint(s.PaymentDay), fmt.Sprintf("not 1 to %d", MaxPaymentDay))
	}
	if s.PaymentAmount < 0 {
		return nil, payInvalid("PaymentAmount", s.PaymentAmount.String(), "negative")
	}
	if s.Version < 0 {
		return nil, payInvalid("Version", fmt.Sprint(s.Version), "negative")
	}
	item := map[string]types.AttributeValue{
		AttrPK: attrS(c.AccountPK(s.AccountID)), AttrSK: attrS(RecurringSK(s.SubscriptionID, s.SKU)),
		payEntity: attrS(payEntitySub), paySKU: attrS(s.SKU), payDay: attrN(int64(s.PaymentDay)),
		payAmount: attrS(s.PaymentAmount.String()), payVersion: attrN(int64(s.Version)),
	}
	for _, d := range []struct {
		attr  string
		t     time.Time
		never bool
	}{
		{AttrNextPaymentDate, s.NextPaymentDate, false}, {AttrNextReminderDate, s.NextReminderDate, false},
		{AttrLastPaymentDate, s.LastPaymentDate, true}, {AttrLastReminderDate, s.LastReminderDate, true},
	} {
		v, err := payDayText(d.attr, d.t, d.never)
		if err != nil {
			return nil, err
		}
		if v != "" {
			item[d.attr] = attrS(v)
		}
	}
	for _, ts := range []struct {
		attr string
		t    time.Time
	}{{payCreatedAt, s.CreatedAt}, {payUpdatedAt, s.UpdatedAt}} {
		if ts.t.IsZero() {
			continue
		}
		v, err := timefmt.Seconds(ts.t)
		if err != nil {
			return nil, payInvalid(ts.attr, ts.t.String(), err.Error())
		}
		item[ts.attr] = attrS(v)
	}
	for attr, v := range map[string]string{payEmail: s.Email, payDetails: s.PaymentDetails} {
		if v != "" {
			item[attr] = attrS(v)
		}
	}
	return item, nil
}

// day reads a date attribute of a subscription, zero when absent or "never".
func (r *itemReader) day(attr string) time.Time {
	s := r.str(attr)
	if s == "" || s == payNever {
		return time.Time{}
	}
	t, err := time.Parse(payDayLayout, s)
	if err != nil {
		r.fail(attr, s, ErrInvalidDate)
	}
	return t
}

// DecodeRecurringSubscription decodes a subscription item of this layout.
// Anything else, receipts included, is a [*FieldError] wrapping
// [ErrInvalidItem].
func (c SingleTableConfig) DecodeRecurringSubscription(item map[string]types.AttributeValue) (RecurringSubscription, error) {
	c = c.decodeDefaults()
	r := newItemReader(item)
	s := RecurringSubscription{
		AccountID:        c.accountID(r),
		Email:            r.str(payEmail),
		PaymentDay:       int(r.num(payDay)),
		PaymentDetails:   r.str(payDetails),
		NextPaymentDate:  r.day(AttrNextPaymentDate),
		NextReminderDate: r.day(AttrNextReminderDate),
		LastPaymentDate:  r.day(AttrLastPaymentDate),
		LastReminderDate: r.day(AttrLastReminderDate),
		CreatedAt:        r.timestamp(payCreatedAt),
		UpdatedAt:        r.timestamp(payUpdatedAt),
		Version:          int(r.num(payVersion)),
	}
	sk := r.required(AttrSK)
	rest, ok := strings.CutPrefix(sk, SKRecurringPrefix)
	id, sku, ok2 := strings.Cut(rest, "#SKU#")
	if r.err == nil && (!ok || !ok2 || checkPaymentKey("a", id, sku) != nil /* "a": only the ID and SKU are checked */) {
		r.fail(AttrSK, sk, fmt.Errorf("%w: not a recurring subscription", ErrInvalidItem))
	}
	s.SubscriptionID, s.SKU = id, sku
	if v := r.str(paySKU); r.err == nil && v != "" && v != sku {
		r.fail(paySKU, v, fmt.Errorf("%w: differs from the sort key's SKU", ErrInvalidItem))
	}
	amt := r.required(payAmount)
	if r.err == nil {
		a, err := ParseAmount(amt)
		if err != nil {
			r.fail(payAmount, amt, err)
		}
		s.PaymentAmount = a
	}
	if r.err == nil && (s.PaymentDay < 1 || s.PaymentDay > MaxPaymentDay || s.Version < 0) {
		r.fail(payDay, fmt.Sprint(s.PaymentDay, "/v", s.Version), fmt.Errorf("%w: payment day or version out of range", ErrInvalidItem))
	}
	if r.err != nil {
		return RecurringSubscription{}, r.err
	}
	return s, nil
}

func (p *DynamoPayments) now() time.Time { return p.cfg.Clock.Now().UTC().Truncate(time.Second) }

func (p *DynamoPayments) subKey(accountID, subscriptionID, sku string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		AttrPK: attrS(p.cfg.Table.AccountPK(accountID)), AttrSK: attrS(RecurringSK(subscriptionID, sku)),
	}
}

func (p *DynamoPayments) keyText(accountID, sk string) string {
	return "PK=" + p.cfg.Table.AccountPK(accountID) + " SK=" + sk
}

// CreateSubscription implements [Payments.CreateSubscription] with one
// conditional PutItem.
func (p *DynamoPayments) CreateSubscription(ctx context.Context, s RecurringSubscription) (RecurringSubscription, error) {
	now := p.now()
	s.CreatedAt, s.UpdatedAt, s.Version = now, now, 1
	item, err := p.cfg.Table.EncodeRecurringSubscription(s)
	if err != nil {
		return RecurringSubscription{}, fmt.Errorf("billing: create subscription: %w", err)
	}
	cond := absent(AttrPK)
	_, err = p.cfg.Client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &p.cfg.Table.Table, Item: item,
		ConditionExpression:      cond.Condition(),
		ExpressionAttributeNames: cond.Names(),
	})
	key := p.keyText(s.AccountID, RecurringSK(s.SubscriptionID, s.SKU))
	if err := translateWrite("create subscription", []txOp{{key: key, reason: "subscription exists", exists: true}}, err); err != nil {
		return RecurringSubscription{}, err
	}
	return p.cfg.Table.DecodeRecurringSubscription(item)
}

// GetSubscription implements [Payments.GetSubscription] with one
// consistent GetItem.
func (p *DynamoPayments) GetSubscription(ctx context.Context, accountID, subscriptionID, sku string) (RecurringSubscription, error) {
	if err := checkPaymentKey(accountID, subscriptionID, sku); err != nil {
		return RecurringSubscription{}, fmt.Errorf("billing: get subscription: %w", err)
	}
	key := p.keyText(accountID, RecurringSK(subscriptionID, sku))
	out, err := p.cfg.Client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &p.cfg.Table.Table, Key: p.subKey(accountID, subscriptionID, sku), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return RecurringSubscription{}, fmt.Errorf("billing: get subscription (%s): %w", key, err)
	}
	if len(out.Item) == 0 {
		return RecurringSubscription{}, fmt.Errorf("billing: get subscription (%s): %w", key, ErrNotFound)
	}
	return p.cfg.Table.DecodeRecurringSubscription(out.Item)
}

// SubscriptionsByAccount implements [Payments.SubscriptionsByAccount]:
// one consistent Query, begins_with(SK, "SUB#"), all pages.
func (p *DynamoPayments) SubscriptionsByAccount(ctx context.Context, accountID string) ([]RecurringSubscription, error) {
	if err := checkAccount("subscriptions by account", accountID); err != nil {
		return nil, err
	}
	items, err := queryAccount(ctx, p.cfg.Client, p.cfg.Table, "subscriptions by account", accountID, SKRecurringPrefix)
	if err != nil {
		return nil, err
	}
	subs, err := decodeAll(items, p.cfg.Table.DecodeRecurringSubscription)
	if err != nil {
		return nil, fmt.Errorf("billing: subscriptions by account: %w", err)
	}
	return subs, nil
}

// PrepareSubscriptionUpdate is what [Payments.UpdateSubscription] stores:
// next with prev's CreatedAt, Version prev.Version+1 and UpdatedAt now,
// after checking that next has prev's key and prev a stored version.
func PrepareSubscriptionUpdate(prev, next RecurringSubscription, now time.Time) (RecurringSubscription, error) {
	if err := checkPaymentKey(prev.AccountID, prev.SubscriptionID, prev.SKU); err != nil {
		return next, err
	}
	if next.AccountID != prev.AccountID || next.SubscriptionID != prev.SubscriptionID || next.SKU != prev.SKU {
		return next, payInvalid("SubscriptionID", next.SubscriptionID, "next has another key than prev")
	}
	if prev.Version < 1 {
		return next, payInvalid("Version", fmt.Sprint(prev.Version), "prev was not read from the store")
	}
	next.CreatedAt, next.UpdatedAt, next.Version = prev.CreatedAt, now, prev.Version+1
	return next, nil
}

// UpdateSubscription implements [Payments.UpdateSubscription] with one
// UpdateItem conditional on the version.
func (p *DynamoPayments) UpdateSubscription(ctx context.Context, prev, next RecurringSubscription) (RecurringSubscription, error) {
	next, err := PrepareSubscriptionUpdate(prev, next, p.now())
	if err != nil {
		return RecurringSubscription{}, fmt.Errorf("billing: update subscription: %w", err)
	}
	u, err := p.subUpdate(prev.Version, next)
	if err != nil {
		return RecurringSubscription{}, fmt.Errorf("billing: update subscription: %w", err)
	}
	_, err = p.cfg.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: u.TableName, Key: u.Key, UpdateExpression: u.UpdateExpression, ConditionExpression: u.ConditionExpression,
		ExpressionAttributeNames: u.ExpressionAttributeNames, ExpressionAttributeValues: u.ExpressionAttributeValues,
	})
	key := p.keyText(prev.AccountID, RecurringSK(prev.SubscriptionID, prev.SKU))
	if err := translateWrite("update subscription", []txOp{{key: key, reason: "version changed or subscription deleted"}}, err); err != nil {
		return RecurringSubscription{}, err
	}
	return roundTripSub(p.cfg.Table, next)
}
