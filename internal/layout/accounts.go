package layout

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/entitlement"
	"github.com/dynabill/billing/internal/timefmt"
)

// Attribute names of the founder pass and the profile, as stored.
const (
	PassTypeAttr     = "passType"
	PassIntent       = "stripePaymentIntentId"
	PassPurchasedAt  = "purchasedAt"
	PassLifetime     = "lifetimeAccess"
	PassGrantedTier  = "grantedTier"
	PassTypeValue    = "FounderPass"
	ProfileTierAttr  = "tier"
	profileFreeValue = "free"
)

// DecodeFounderPass decodes a founder pass item of this layout.
func (c SingleTableConfig) DecodeFounderPass(item map[string]types.AttributeValue) (entitlement.FounderPass, error) {
	c = c.decodeDefaults()
	r := newItemReader(item)
	p := entitlement.FounderPass{
		UserID:          c.accountID(r),
		PaymentIntentID: r.str(PassIntent),
		PurchasedAt:     r.timestamp(PassPurchasedAt),
		LifetimeAccess:  r.boolean(PassLifetime),
		CreatedAt:       r.timestamp(AcctCreatedAt),
		UpdatedAt:       r.timestamp(AcctUpdatedAt),
	}
	pt := r.str(PassTypeAttr)
	if pt == "" {
		pt = strings.TrimPrefix(r.str(AttrSK), SKFounderPrefix)
	}
	granted := r.str(PassGrantedTier)
	if r.err != nil {
		return entitlement.FounderPass{}, r.err
	}
	var err error
	if p.PassType, err = entitlement.ParsePassType(pt); err != nil {
		r.fail(PassTypeAttr, pt, entitlement.ErrInvalidPassType)
		return entitlement.FounderPass{}, r.err
	}
	p.GrantedTier = p.PassType.Tier()
	if granted != "" {
		if p.GrantedTier, err = entitlement.ParseTier(granted); err != nil {
			r.fail(PassGrantedTier, granted, entitlement.ErrInvalidTier)
			return entitlement.FounderPass{}, r.err
		}
	}
	return p, nil
}

// decodeAll decodes every item with decode, failing on the first that does
// not decode.
func DecodeAll[T any](items []map[string]types.AttributeValue, decode func(map[string]types.AttributeValue) (T, error)) ([]T, error) {
	out := make([]T, 0, len(items))
	for _, it := range items {
		v, err := decode(it)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// ProfileTierValue is how a tier is stored in a profile's tier attribute:
// "free" for [entitlement.TierFree] (as existing profiles have it), the upper-case name
// otherwise.
func ProfileTierValue(t entitlement.Tier) string {
	if t == entitlement.TierFree {
		return profileFreeValue
	}
	return string(t)
}

// DecodeProfileTier decodes the tier of a profile item; "" when it has
// none.
func (c SingleTableConfig) DecodeProfileTier(item map[string]types.AttributeValue) (entitlement.Tier, error) {
	r := newItemReader(item)
	v := r.str(ProfileTierAttr)
	if r.err != nil || v == "" {
		return "", r.err
	}
	t, err := entitlement.ParseTier(v)
	if err != nil {
		r.fail(ProfileTierAttr, v, entitlement.ErrInvalidTier)
		return "", r.err
	}
	return t, nil
}

// Attribute names shared by the account entities.
const (
	AcctType      = "type"
	AcctCreatedAt = "createdAt"
	AcctUpdatedAt = "updatedAt"
)

func NumberAV(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func BoolAV(b bool) types.AttributeValue { return &types.AttributeValueMemberBOOL{Value: b} }

// acctTime encodes a timestamp of the account entities: UTC, whole
// seconds, "2025-01-15T10:30:00Z", as existing items store them.
func AcctTime(t time.Time) (string, error) {
	s, err := timefmt.Seconds(t)
	if err != nil {
		return "", fmt.Errorf("%w: %v: %w", billing.ErrInvalidDate, t, err)
	}
	return s, nil
}

// itemReader decodes attributes of one stored item, remembering the first
// error as a [*billing.FieldError] naming the attribute and the item's key.
// It is the one hand-written decoder of the single-table entities, kept
// because attributevalue cannot do its two jobs: its type errors name
// neither the attribute nor the item, and existing items hold forms it
// would reject or misread (timestamps in any RFC 3339 form, "never" days,
// a missing attribute meaning a default). Encoders use attributevalue
// struct tags where the items' form allows it.
type itemReader struct {
	item map[string]types.AttributeValue
	key  string
	err  error
}

func newItemReader(item map[string]types.AttributeValue) *itemReader {
	return &itemReader{item: item, key: "PK=" + StringOf(item[AttrPK]) + " SK=" + StringOf(item[AttrSK])}
}

func (r *itemReader) fail(attr, value string, err error) {
	if r.err == nil {
		r.err = &billing.FieldError{Field: attr, Value: value, Key: r.key, Err: err}
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
		r.fail(attr, fmt.Sprintf("%T", v), fmt.Errorf("%w: not a string", billing.ErrInvalidItem))
		return ""
	}
	return s.Value
}

// required returns a string attribute that must be present and non-empty.
func (r *itemReader) required(attr string) string {
	s := r.str(attr)
	if s == "" && r.err == nil {
		r.fail(attr, "", fmt.Errorf("%w: missing", billing.ErrInvalidItem))
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
		r.fail(attr, s, billing.ErrInvalidDate)
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
		r.fail(attr, fmt.Sprintf("%T", v), fmt.Errorf("%w: not a number", billing.ErrInvalidItem))
		return 0
	}
	i, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		r.fail(attr, n.Value, fmt.Errorf("%w: not an integer", billing.ErrInvalidItem))
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
		r.fail(attr, fmt.Sprintf("%T", v), fmt.Errorf("%w: not a boolean", billing.ErrInvalidItem))
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

// Attribute names of the credits balance (as existing items spell them)
// and of the monthly grant markers (added by this library).
const (
	CredBalance         = "balance"
	CredLastTopUp       = "lastTopUp"
	CredLastReset       = "lastReset"
	CredLastGrantPeriod = "lastGrantPeriod"
	CredLastGrantEvent  = "lastGrantEventId"
	CredTypeBalance     = "Credits"
	GrantTypeMarker     = "CreditGrant"
	GrantPeriod         = "period"
	GrantTier           = "tier"
	GrantAmount         = "amount"
	GrantEventID        = "eventId"
)

// accountID returns the account ID of a partition key of this layout.
func (c SingleTableConfig) accountID(r *itemReader) string {
	pk := r.required(AttrPK)
	id, ok := strings.CutPrefix(pk, c.AccountPrefix)
	if r.err == nil && (!ok || id == "") {
		r.fail(AttrPK, pk, fmt.Errorf("%w: not an account partition (prefix %q)", billing.ErrInvalidItem, c.AccountPrefix))
	}
	return id
}

// DecodeCredits decodes a credits item of this layout as read at now: an
// expired record has Balance 0 and Expired set.
func (c SingleTableConfig) DecodeCredits(item map[string]types.AttributeValue, now time.Time) (entitlement.Credits, error) {
	c = c.decodeDefaults()
	r := newItemReader(item)
	cr := entitlement.Credits{
		UserID:           c.accountID(r),
		Balance:          r.num(CredBalance),
		ExpiresAt:        r.unix(c.TTLAttribute),
		LastTopUp:        r.timestamp(CredLastTopUp),
		LastReset:        r.timestamp(CredLastReset),
		LastGrantPeriod:  r.str(CredLastGrantPeriod),
		LastGrantEventID: r.str(CredLastGrantEvent),
		CreatedAt:        r.timestamp(AcctCreatedAt),
		UpdatedAt:        r.timestamp(AcctUpdatedAt),
	}
	if sk := r.str(AttrSK); r.err == nil && sk != SKCredits {
		r.fail(AttrSK, sk, fmt.Errorf("%w: not a credits item", billing.ErrInvalidItem))
	}
	if r.err != nil {
		return entitlement.Credits{}, r.err
	}
	if !cr.ExpiresAt.IsZero() && !now.Before(cr.ExpiresAt) {
		cr.Balance, cr.Expired = 0, true
	}
	return cr, nil
}

// day reads a date attribute of a subscription, zero when absent or "never".
func (r *itemReader) day(attr string) time.Time {
	s := r.str(attr)
	if s == "" || s == payNever {
		return time.Time{}
	}
	t, err := time.Parse(PayDayLayout, s)
	if err != nil {
		r.fail(attr, s, billing.ErrInvalidDate)
	}
	return t
}

// Attribute names of the subscription record, as existing items spell them.
const (
	SubID           = "subscriptionId"
	SubPlanTier     = "planTier"
	SubStatus       = "status"
	SubCustomer     = "stripeCustomerId"
	SubPeriodStart  = "currentPeriodStart"
	SubPeriodEnd    = "currentPeriodEnd"
	SubCancelAtEnd  = "cancelAtPeriodEnd"
	subAuthProvider = "provider"
	SubLastEventID  = "lastEventId"
	SubLastEventAt  = "lastEventAt"
	SubTypeValue    = "Subscription"
)

// DecodeProviderSubscription decodes a subscription item of this layout.
// Status and planTier are checked strictly; a bad attribute is a
// [*billing.FieldError] naming it and the item's key.
func (c SingleTableConfig) DecodeProviderSubscription(item map[string]types.AttributeValue) (entitlement.ProviderSubscription, error) {
	c = c.decodeDefaults()
	r := newItemReader(item)
	s := entitlement.ProviderSubscription{
		UserID:             c.accountID(r),
		SubscriptionID:     r.str(SubID),
		CustomerID:         r.str(SubCustomer),
		CurrentPeriodStart: r.timestamp(SubPeriodStart),
		CurrentPeriodEnd:   r.timestamp(SubPeriodEnd),
		CancelAtPeriodEnd:  r.boolean(SubCancelAtEnd),
		AuthProvider:       r.str(subAuthProvider),
		LastEventID:        r.str(SubLastEventID),
		LastEventAt:        r.timestamp(SubLastEventAt),
		CreatedAt:          r.timestamp(AcctCreatedAt),
		UpdatedAt:          r.timestamp(AcctUpdatedAt),
	}
	sk := r.required(AttrSK)
	id, ok := strings.CutPrefix(sk, SKSubscriptionPrefix)
	if r.err == nil && (!ok || id == "") {
		r.fail(AttrSK, sk, fmt.Errorf("%w: not a subscription item", billing.ErrInvalidItem))
	}
	if s.SubscriptionID == "" {
		s.SubscriptionID = id
	}
	st, tier := r.required(SubStatus), r.required(SubPlanTier)
	if r.err != nil {
		return entitlement.ProviderSubscription{}, r.err
	}
	var err error
	if s.Status, err = entitlement.ParseProviderStatus(st); err != nil {
		r.fail(SubStatus, st, entitlement.ErrInvalidProviderStatus)
	} else if s.Tier, err = entitlement.ParseTier(tier); err != nil {
		r.fail(SubPlanTier, tier, entitlement.ErrInvalidTier)
	}
	if r.err != nil {
		return entitlement.ProviderSubscription{}, r.err
	}
	return s, nil
}
