package layout

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/entitlement"
	"github.com/dynabill/billing/internal/av"
	"github.com/dynabill/billing/internal/timefmt"
)

// Attribute names of the founder pass and the profile, as stored.
const (
	PassTypeAttr     = "passType"
	PassGrantedTier  = "grantedTier"
	PassTypeValue    = "FounderPass"
	ProfileTierAttr  = "tier"
	profileFreeValue = "free"
)

// founderPassItem is [entitlement.FounderPass] with the attributes its
// fields are read from (see readFields).
type founderPassItem struct {
	UserID          string `item:"PK,account"`
	PassType        entitlement.PassType
	PaymentIntentID string    `item:"stripePaymentIntentId"`
	PurchasedAt     time.Time `item:"purchasedAt"`
	LifetimeAccess  bool      `item:"lifetimeAccess"`
	GrantedTier     entitlement.Tier
	CreatedAt       time.Time `item:"createdAt"`
	UpdatedAt       time.Time `item:"updatedAt"`
}

// DecodeFounderPass decodes a founder pass item of this layout.
func (c SingleTableConfig) DecodeFounderPass(item map[string]av.AttributeValue) (entitlement.FounderPass, error) {
	p, r := readAs[founderPassItem, entitlement.FounderPass](c, item)
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
func DecodeAll[T any](items []map[string]av.AttributeValue, decode func(map[string]av.AttributeValue) (T, error)) ([]T, error) {
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
func (c SingleTableConfig) DecodeProfileTier(item map[string]av.AttributeValue) (entitlement.Tier, error) {
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

func NumberAV(n int64) av.AttributeValue {
	return &av.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func BoolAV(b bool) av.AttributeValue { return &av.AttributeValueMemberBOOL{Value: b} }

// acctTime encodes a timestamp of the account entities: UTC, whole
// seconds, "2025-01-15T10:30:00Z", as existing items store them.
func AcctTime(t time.Time) (string, error) {
	s, err := timefmt.Seconds(t)
	if err != nil {
		return "", fmt.Errorf("%w: %v: %w", billing.ErrInvalidDate, t, err)
	}
	return s, nil
}

// Attribute names of the credits balance (as existing items spell them),
// of the monthly grant markers and of the request markers of grants,
// top-ups and consumes (both added by this library).
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
	RequestTypeMarker   = "CreditRequest"
	RequestOp           = "op"
	RequestAmount       = "amount"

	// The provider subscription record, as existing items spell it.
	SubID          = "subscriptionId"
	SubPlanTier    = "planTier"
	SubStatus      = "status"
	SubCustomer    = "stripeCustomerId"
	SubPeriodStart = "currentPeriodStart"
	SubPeriodEnd   = "currentPeriodEnd"
	SubCancelAtEnd = "cancelAtPeriodEnd"
	SubLastEventID = "lastEventId"
	SubLastEventAt = "lastEventAt"
	SubTypeValue   = "Subscription"
)

// creditsItem is [entitlement.Credits] with the attributes its fields are
// read from (see readFields).
type creditsItem struct {
	UserID           string `item:"PK,account"`
	Balance          int64  `item:"balance"`
	Expired          bool
	ExpiresAt        time.Time `item:",ttl"`
	LastTopUp        time.Time `item:"lastTopUp"`
	LastReset        time.Time `item:"lastReset"`
	LastGrantPeriod  string    `item:"lastGrantPeriod"`
	LastGrantEventID string    `item:"lastGrantEventId"`
	CreatedAt        time.Time `item:"createdAt"`
	UpdatedAt        time.Time `item:"updatedAt"`
	Repeated         bool
}

// DecodeCredits decodes a credits item of this layout as read at now: an
// expired record has Balance 0 and Expired set.
func (c SingleTableConfig) DecodeCredits(item map[string]av.AttributeValue, now time.Time) (entitlement.Credits, error) {
	cr, r := readAs[creditsItem, entitlement.Credits](c, item)
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

// providerSubscriptionItem is [entitlement.ProviderSubscription] with the
// attributes its fields are read from (see readFields).
type providerSubscriptionItem struct {
	UserID             string `item:"PK,account"`
	SubscriptionID     string `item:"subscriptionId"`
	CustomerID         string `item:"stripeCustomerId"`
	Tier               entitlement.Tier
	Status             entitlement.ProviderStatus
	CurrentPeriodStart time.Time `item:"currentPeriodStart"`
	CurrentPeriodEnd   time.Time `item:"currentPeriodEnd"`
	CancelAtPeriodEnd  bool      `item:"cancelAtPeriodEnd"`
	AuthProvider       string    `item:"provider"`
	LastEventID        string    `item:"lastEventId"`
	LastEventAt        time.Time `item:"lastEventAt"`
	CreatedAt          time.Time `item:"createdAt"`
	UpdatedAt          time.Time `item:"updatedAt"`
}

// DecodeProviderSubscription decodes a subscription item of this layout.
// Status and planTier are checked strictly; a bad attribute is a
// [*billing.FieldError] naming it and the item's key.
func (c SingleTableConfig) DecodeProviderSubscription(item map[string]av.AttributeValue) (entitlement.ProviderSubscription, error) {
	s, r := readAs[providerSubscriptionItem, entitlement.ProviderSubscription](c, item)
	sk, id, ok := r.sortKey(SKSubscriptionPrefix)
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
