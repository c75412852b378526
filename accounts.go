package billing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/dynabill/billing/internal/timefmt"
)

// Account errors.
var (
	// ErrInvalidTier reports a tier name other than FREE, INITIATE,
	// JOURNEYMAN, SAGE and GUILDMASTER (in any case).
	ErrInvalidTier = errors.New("billing: invalid tier")

	// ErrInvalidAccount reports an empty or oversized account (user) ID.
	ErrInvalidAccount = errors.New("billing: invalid account ID")
)

// Tier is an access tier of the provider-billed deployment. Tiers are
// ordered: FREE < INITIATE < JOURNEYMAN < SAGE
// < GUILDMASTER (see [Tier.Rank]).
//
// The canonical spelling is upper case. Profiles store the free tier as
// "free"; [ParseTier] accepts any case and surrounding spaces, and
// [Accounts.SetProfileTier] writes "free" for [TierFree] as existing
// profiles do.
type Tier string

// The tiers, lowest first.
const (
	TierFree        Tier = "FREE"
	TierInitiate    Tier = "INITIATE"
	TierJourneyman  Tier = "JOURNEYMAN"
	TierSage        Tier = "SAGE"
	TierGuildmaster Tier = "GUILDMASTER"
)

// Tiers returns every tier, lowest first.
func Tiers() []Tier {
	return []Tier{TierFree, TierInitiate, TierJourneyman, TierSage, TierGuildmaster}
}

// Rank orders the tiers: 0 for FREE up to 4 for GUILDMASTER, -1 for a value
// that is not a tier (compare parsed tiers only).
func (t Tier) Rank() int {
	switch t {
	case TierFree:
		return 0
	case TierInitiate:
		return 1
	case TierJourneyman:
		return 2
	case TierSage:
		return 3
	case TierGuildmaster:
		return 4
	}
	return -1
}

// Valid reports whether t is one of the tier constants (canonical case).
func (t Tier) Valid() bool { return t.Rank() >= 0 }

// ParseTier reads a tier name in any (ASCII) case, ignoring surrounding
// spaces: "free", "Sage" and " GUILDMASTER " are tiers. Anything else, the empty
// string included, is a [*FieldError] wrapping [ErrInvalidTier].
func ParseTier(s string) (Tier, error) {
	t := Tier(asciiUpper(strings.TrimSpace(s)))
	if !t.Valid() {
		return "", &FieldError{Field: "tier", Value: s, Err: ErrInvalidTier}
	}
	return t, nil
}

// asciiUpper upper-cases ASCII letters only: Unicode case mapping would
// let look-alikes such as "ſage" (long s) parse as a tier.
func asciiUpper(s string) string {
	return strings.Map(func(r rune) rune {
		if 'a' <= r && r <= 'z' {
			return r - 'a' + 'A'
		}
		return r
	}, s)
}

// Accounts is the account side of the single-table layout: a credit
// balance per user, subscriptions billed by an external processor and
// mirrored from its events, lifetime founder passes, and the resolution of
// a user's access tier. [DynamoAccounts] implements it on DynamoDB;
// billingtest.Accounts is the in-memory twin. Every method is safe for
// concurrent use.
type Accounts interface {
	// Balance returns the user's credits. A user without a record has a
	// zero balance; a record past its expiry reads as zero (see [Credits]).
	Balance(ctx context.Context, userID string) (Credits, error)
	// Grant adds n > 0 credits atomically, creating the record if needed,
	// and returns the new state. Not idempotent: the caller deduplicates.
	Grant(ctx context.Context, userID string, n int64) (Credits, error)
	// TopUp is Grant for purchased credits: it also sets LastTopUp.
	TopUp(ctx context.Context, userID string, n int64) (Credits, error)
	// Consume takes n > 0 credits if the balance has them, atomically, and
	// returns the new state; otherwise it changes nothing and returns an
	// [*InsufficientCreditsError].
	Consume(ctx context.Context, userID string, n int64) (Credits, error)
	// MonthlyGrant adds the tier's monthly quota once per period: a second
	// call with the same period (a redelivered payment event) grants
	// nothing and reports Applied false. See [DynamoAccounts.MonthlyGrant].
	MonthlyGrant(ctx context.Context, userID string, tier Tier, period, eventID string) (MonthlyGrantResult, error)

	// ApplyProviderEvent mirrors a processor event into the subscription
	// record unless the record already reflects this or a newer event, in
	// the order of [ProviderEvent.NewerThan] (a deletion is final over an
	// update of the same instant); applied reports whether it wrote.
	ApplyProviderEvent(ctx context.Context, ev ProviderEvent) (applied bool, err error)
	// GetProviderSubscription returns one subscription or [ErrNotFound].
	GetProviderSubscription(ctx context.Context, userID, subscriptionID string) (ProviderSubscription, error)
	// ListProviderSubscriptions returns the user's subscriptions ordered
	// by subscription ID.
	ListProviderSubscriptions(ctx context.Context, userID string) ([]ProviderSubscription, error)

	// GrantFounderPass records a lifetime pass once; granted is false when
	// the user already holds a pass of this type (the stored one is kept).
	GrantFounderPass(ctx context.Context, userID string, pass PassType, paymentIntentID string, purchasedAt time.Time) (granted bool, err error)
	// FounderPasses returns the user's passes ordered by pass type.
	FounderPasses(ctx context.Context, userID string) ([]FounderPass, error)

	// SetProfileTier sets the tier attribute of the user's profile record,
	// creating a bare profile if there is none. The profile belongs to the
	// host; this is for tests and tools.
	SetProfileTier(ctx context.Context, userID string, tier Tier) error
	// ResolveAccess returns the user's effective tier and why, by the rules
	// of [ResolveAccess] at the store's clock's now.
	ResolveAccess(ctx context.Context, userID string) (Access, error)
}

// DynamoAccountsConfig configures [NewDynamoAccounts].
type DynamoAccountsConfig struct {
	// Client talks to DynamoDB; *dynamodb.Client satisfies it. Required.
	Client DynamoDBAPI
	// Table names the single table and its TTL attribute and sets the
	// account prefix. Defaults to [SingleTableConfig]'s defaults.
	Table SingleTableConfig
	// Clock gives "now" for timestamps, expiry and access resolution.
	// Defaults to [SystemClock].
	Clock Clock
	// Quotas are the monthly grants per tier. Tiers missing from the map
	// keep their default. Defaults to [DefaultCreditQuotas].
	Quotas CreditQuotas
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
	// Logger receives debug logs of ignored events. Defaults to discarding.
	Logger *slog.Logger
	// MeterProvider and TracerProvider observe every DynamoDB call (see
	// [MetricDynamoDBDuration]). Default to the global OpenTelemetry
	// providers, no-ops unless the host installs some.
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider
}

func (c DynamoAccountsConfig) withDefaults() (DynamoAccountsConfig, error) {
	if err := singleTableDefaults("DynamoAccountsConfig", &c.Client, &c.Table, &c.Clock, &c.Logger, c.MeterProvider, c.TracerProvider); err != nil {
		return c, err
	}
	q, err := c.Quotas.WithDefaults()
	if err != nil {
		return c, fmt.Errorf("billing: DynamoAccountsConfig.Quotas: %w", err)
	}
	c.Quotas = q
	if c.CreditExpiry < 0 {
		return c, fmt.Errorf("billing: DynamoAccountsConfig.CreditExpiry: negative %v", c.CreditExpiry)
	}
	if c.GrantMarkerRetention < 0 {
		return c, fmt.Errorf("billing: DynamoAccountsConfig.GrantMarkerRetention: negative %v", c.GrantMarkerRetention)
	}
	if c.GrantMarkerRetention == 0 {
		c.GrantMarkerRetention = 400 * 24 * time.Hour
	}
	return c, nil
}

// DynamoAccounts is [Accounts] on the single table of [SingleTableConfig],
// with the items and attribute names existing deployments use.
type DynamoAccounts struct {
	cfg DynamoAccountsConfig
}

var _ Accounts = (*DynamoAccounts)(nil)

// NewDynamoAccounts returns Accounts on cfg.Table.
func NewDynamoAccounts(cfg DynamoAccountsConfig) (*DynamoAccounts, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &DynamoAccounts{cfg: cfg}, nil
}

// Attribute names shared by the account entities.
const (
	acctType      = "type"
	acctCreatedAt = "createdAt"
	acctUpdatedAt = "updatedAt"
)

// MaxAccountID bounds an account (user) ID so that every key stays far
// below DynamoDB's limits (2048 bytes partition, 1024 bytes sort key).
const MaxAccountID = 512

// CheckAccountID returns an error wrapping [ErrInvalidAccount] for an
// empty account ID or one longer than [MaxAccountID] bytes.
func CheckAccountID(userID string) error {
	if userID == "" || len(userID) > MaxAccountID {
		return fmt.Errorf("%w: user ID %q (1 to %d bytes)", ErrInvalidAccount, userID, MaxAccountID)
	}
	return nil
}

func checkAccount(op, userID string) error {
	if err := CheckAccountID(userID); err != nil {
		return fmt.Errorf("billing: %s: %w", op, err)
	}
	return nil
}

func (a *DynamoAccounts) key(userID, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{AttrPK: attrS(a.cfg.Table.AccountPK(userID)), AttrSK: attrS(sk)}
}

func (a *DynamoAccounts) keyText(userID, sk string) string {
	return "PK=" + a.cfg.Table.AccountPK(userID) + " SK=" + sk
}

func (a *DynamoAccounts) now() time.Time { return a.cfg.Clock.Now().UTC() }

// getItem reads one item with a consistent read; nil when absent.
func (a *DynamoAccounts) getItem(ctx context.Context, op, userID, sk string) (map[string]types.AttributeValue, error) {
	out, err := a.cfg.Client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &a.cfg.Table.Table,
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
func (a *DynamoAccounts) queryAccount(ctx context.Context, op, userID, prefix string) ([]map[string]types.AttributeValue, error) {
	return queryAccount(ctx, a.cfg.Client, a.cfg.Table, op, userID, prefix)
}

// queryAccount reads every item of an account's partition whose sort key
// begins with prefix ("" for all), consistently, across all pages.
func queryAccount(ctx context.Context, client DynamoDBAPI, table SingleTableConfig, op, userID, prefix string) ([]map[string]types.AttributeValue, error) {
	key := expression.Key(AttrPK).Equal(expression.Value(attrS(table.AccountPK(userID))))
	if prefix != "" {
		key = key.And(expression.Key(AttrSK).BeginsWith(prefix))
	}
	expr := mustBuild(expression.NewBuilder().WithKeyCondition(key))
	in := &dynamodb.QueryInput{
		TableName:                 &table.Table,
		KeyConditionExpression:    expr.KeyCondition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		ConsistentRead:            aws.Bool(true),
	}
	var items []map[string]types.AttributeValue
	for {
		out, err := client.Query(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("billing: %s (user %s): %w", op, userID, err)
		}
		items = append(items, out.Items...)
		if len(out.LastEvaluatedKey) == 0 {
			return items, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

func attrN(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func attrBool(b bool) types.AttributeValue { return &types.AttributeValueMemberBOOL{Value: b} }

// acctTime encodes a timestamp of the account entities: UTC, whole
// seconds, "2025-01-15T10:30:00Z", as existing items store them.
func acctTime(t time.Time) (string, error) {
	s, err := timefmt.Seconds(t)
	if err != nil {
		return "", fmt.Errorf("%w: %v: %w", ErrInvalidDate, t, err)
	}
	return s, nil
}

// itemReader decodes attributes of one stored item, remembering the first
// error as a [*FieldError] naming the attribute and the item's key.
type itemReader struct {
	item map[string]types.AttributeValue
	key  string
	err  error
}

func newItemReader(item map[string]types.AttributeValue) *itemReader {
	return &itemReader{item: item, key: "PK=" + stringAttr(item[AttrPK]) + " SK=" + stringAttr(item[AttrSK])}
}

func (r *itemReader) fail(attr, value string, err error) {
	if r.err == nil {
		r.err = &FieldError{Field: attr, Value: value, Key: r.key, Err: err}
	}
}

// str returns a string attribute, "" when absent.
func (r *itemReader) str(attr string) string {
	v, ok := r.item[attr]
	if !ok {
		return ""
	}
	s, ok := v.(*types.AttributeValueMemberS)
	if !ok {
		r.fail(attr, fmt.Sprintf("%T", v), fmt.Errorf("%w: not a string", ErrInvalidItem))
		return ""
	}
	return s.Value
}

// required returns a string attribute that must be present and non-empty.
func (r *itemReader) required(attr string) string {
	s := r.str(attr)
	if s == "" && r.err == nil {
		r.fail(attr, "", fmt.Errorf("%w: missing", ErrInvalidItem))
	}
	return s
}

// timestamp returns a timestamp attribute (any RFC3339 form), zero when absent.
func (r *itemReader) timestamp(attr string) time.Time {
	s := r.str(attr)
	if s == "" {
		return time.Time{}
	}
	t, err := timefmt.Parse(s)
	if err != nil {
		r.fail(attr, s, ErrInvalidDate)
	}
	return t
}

// num returns an integer Number attribute, 0 when absent.
func (r *itemReader) num(attr string) int64 {
	v, ok := r.item[attr]
	if !ok {
		return 0
	}
	n, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		r.fail(attr, fmt.Sprintf("%T", v), fmt.Errorf("%w: not a number", ErrInvalidItem))
		return 0
	}
	i, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		r.fail(attr, n.Value, fmt.Errorf("%w: not an integer", ErrInvalidItem))
	}
	return i
}

// boolean returns a Boolean attribute, false when absent.
func (r *itemReader) boolean(attr string) bool {
	v, ok := r.item[attr]
	if !ok {
		return false
	}
	b, ok := v.(*types.AttributeValueMemberBOOL)
	if !ok {
		r.fail(attr, fmt.Sprintf("%T", v), fmt.Errorf("%w: not a boolean", ErrInvalidItem))
		return false
	}
	return b.Value
}

// unix returns a Unix-seconds Number attribute as a time, zero when absent.
func (r *itemReader) unix(attr string) time.Time {
	if _, ok := r.item[attr]; !ok {
		return time.Time{}
	}
	return time.Unix(r.num(attr), 0).UTC()
}

func isConditionFailed(err error) (*types.ConditionalCheckFailedException, bool) {
	var ccf *types.ConditionalCheckFailedException
	ok := errors.As(err, &ccf)
	return ccf, ok
}
