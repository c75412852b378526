package billing

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ErrInvalidPassType reports a founder pass type other than
// FOUNDING_MEMBER and GUILD_BUILDER.
var ErrInvalidPassType = errors.New("billing: invalid founder pass type")

// PassType is the type of a lifetime founder pass.
type PassType string

// The founder passes and the tier each grants.
const (
	PassFoundingMember PassType = "FOUNDING_MEMBER" // grants SAGE
	PassGuildBuilder   PassType = "GUILD_BUILDER"   // grants GUILDMASTER
)

// Tier returns the tier the pass grants, "" for an unknown pass type.
func (p PassType) Tier() Tier {
	switch p {
	case PassFoundingMember:
		return TierSage
	case PassGuildBuilder:
		return TierGuildmaster
	}
	return ""
}

// ParsePassType reads a pass type in any (ASCII) case, ignoring surrounding
// spaces; anything else is a [*FieldError] wrapping [ErrInvalidPassType].
func ParsePassType(s string) (PassType, error) {
	p := PassType(asciiUpper(strings.TrimSpace(s)))
	if p.Tier() == "" {
		return "", &FieldError{Field: "passType", Value: s, Err: ErrInvalidPassType}
	}
	return p, nil
}

// FounderPass is a lifetime pass: the item PK=USER#<id>,
// SK=FOUNDER#<passType>.
type FounderPass struct {
	UserID   string
	PassType PassType
	// PaymentIntentID is stripePaymentIntentId, the purchase.
	PaymentIntentID string
	PurchasedAt     time.Time
	// LifetimeAccess is always true for passes the library grants; a pass
	// whose stored lifetimeAccess is false (revoked by the host) grants
	// nothing.
	LifetimeAccess bool
	// GrantedTier is the tier the pass grants (from the pass type when the
	// item lacks grantedTier).
	GrantedTier          Tier
	CreatedAt, UpdatedAt time.Time
}

// Attribute names of the founder pass and the profile, as stored.
const (
	passTypeAttr     = "passType"
	passIntent       = "stripePaymentIntentId"
	passPurchasedAt  = "purchasedAt"
	passLifetime     = "lifetimeAccess"
	passGrantedTier  = "grantedTier"
	passTypeValue    = "FounderPass"
	profileTierAttr  = "tier"
	profileFreeValue = "free"
)

// DecodeFounderPass decodes a founder pass item of this layout.
func (c SingleTableConfig) DecodeFounderPass(item map[string]types.AttributeValue) (FounderPass, error) {
	c = c.decodeDefaults()
	r := newItemReader(item)
	p := FounderPass{
		UserID:          c.accountID(r),
		PaymentIntentID: r.str(passIntent),
		PurchasedAt:     r.timestamp(passPurchasedAt),
		LifetimeAccess:  r.boolean(passLifetime),
		CreatedAt:       r.timestamp(acctCreatedAt),
		UpdatedAt:       r.timestamp(acctUpdatedAt),
	}
	pt := r.str(passTypeAttr)
	if pt == "" {
		pt = strings.TrimPrefix(r.str(AttrSK), SKFounderPrefix)
	}
	granted := r.str(passGrantedTier)
	if r.err != nil {
		return FounderPass{}, r.err
	}
	var err error
	if p.PassType, err = ParsePassType(pt); err != nil {
		r.fail(passTypeAttr, pt, ErrInvalidPassType)
		return FounderPass{}, r.err
	}
	p.GrantedTier = p.PassType.Tier()
	if granted != "" {
		if p.GrantedTier, err = ParseTier(granted); err != nil {
			r.fail(passGrantedTier, granted, ErrInvalidTier)
			return FounderPass{}, r.err
		}
	}
	return p, nil
}

// GrantFounderPass implements [Accounts.GrantFounderPass] with one PutItem
// on condition attribute_not_exists: granting a pass the user holds writes
// nothing and returns false. A zero purchasedAt means now.
func (a *DynamoAccounts) GrantFounderPass(ctx context.Context, userID string, pass PassType, paymentIntentID string, purchasedAt time.Time) (bool, error) {
	if err := checkAccount("grant founder pass", userID); err != nil {
		return false, err
	}
	p, err := ParsePassType(string(pass))
	if err != nil {
		return false, fmt.Errorf("billing: grant founder pass: %w", err)
	}
	if paymentIntentID == "" || len(paymentIntentID) > MaxProviderID {
		return false, &FieldError{Field: "paymentIntentID", Value: paymentIntentID, Err: fmt.Errorf("%w: 1 to %d bytes required", ErrInvalidProviderEvent, MaxProviderID)}
	}
	now := a.now()
	if purchasedAt.IsZero() {
		purchasedAt = now
	}
	ts, _ := acctTime(now)
	bought, err := acctTime(purchasedAt)
	if err != nil {
		return false, fmt.Errorf("billing: grant founder pass: purchasedAt: %w", err)
	}
	sk := SKFounderPrefix + string(p)
	item := a.key(userID, sk)
	item[acctType], item[passTypeAttr], item[passIntent] = attrS(passTypeValue), attrS(string(p)), attrS(paymentIntentID)
	item[passPurchasedAt], item[passLifetime], item[passGrantedTier] = attrS(bought), attrBool(true), attrS(string(p.Tier()))
	item[acctCreatedAt], item[acctUpdatedAt] = attrS(ts), attrS(ts)
	cond := absent(AttrPK)
	_, err = a.cfg.Client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                &a.cfg.Table.Table,
		Item:                     item,
		ConditionExpression:      cond.Condition(),
		ExpressionAttributeNames: cond.Names(),
	})
	if _, ok := isConditionFailed(err); ok {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("billing: grant founder pass (%s): %w", a.keyText(userID, sk), err)
	}
	return true, nil
}

// FounderPasses implements [Accounts.FounderPasses] with one Query.
func (a *DynamoAccounts) FounderPasses(ctx context.Context, userID string) ([]FounderPass, error) {
	if err := checkAccount("founder passes", userID); err != nil {
		return nil, err
	}
	items, err := a.queryAccount(ctx, "founder passes", userID, SKFounderPrefix)
	if err != nil {
		return nil, err
	}
	return decodeAll(items, a.cfg.Table.DecodeFounderPass)
}

// decodeAll decodes every item with decode, failing on the first that does
// not decode.
func decodeAll[T any](items []map[string]types.AttributeValue, decode func(map[string]types.AttributeValue) (T, error)) ([]T, error) {
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
// "free" for [TierFree] (as existing profiles have it), the upper-case name
// otherwise.
func ProfileTierValue(t Tier) string {
	if t == TierFree {
		return profileFreeValue
	}
	return string(t)
}

// SetProfileTier implements [Accounts.SetProfileTier]: an UpdateItem of
// tier and updatedAt on PK=USER#<id>, SK=PROFILE#<id>, keeping the
// profile's other attributes.
func (a *DynamoAccounts) SetProfileTier(ctx context.Context, userID string, tier Tier) error {
	if err := checkAccount("set profile tier", userID); err != nil {
		return err
	}
	t, err := ParseTier(string(tier))
	if err != nil {
		return fmt.Errorf("billing: set profile tier: %w", err)
	}
	ts, _ := acctTime(a.now())
	sk := SKProfilePrefix + userID
	expr := mustBuild(expression.NewBuilder().WithUpdate(
		expression.Set(expression.Name(profileTierAttr), expression.Value(attrS(ProfileTierValue(t)))).
			Set(expression.Name(acctUpdatedAt), expression.Value(attrS(ts)))))
	_, err = a.cfg.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &a.cfg.Table.Table,
		Key:                       a.key(userID, sk),
		UpdateExpression:          expr.Update(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	})
	if err != nil {
		return fmt.Errorf("billing: set profile tier (%s): %w", a.keyText(userID, sk), err)
	}
	return nil
}

// AccessReason says which rule decided a user's access.
type AccessReason string

// The access rules, in priority order.
const (
	ReasonFounderPass        AccessReason = "founder_pass"
	ReasonActiveSubscription AccessReason = "active_subscription"
	ReasonGracePeriod        AccessReason = "grace_period"
	ReasonProfile            AccessReason = "profile"
	ReasonFree               AccessReason = "free"
)

// Access is a user's effective tier and why.
type Access struct {
	Tier   Tier
	Reason AccessReason
	// Source names what granted the tier: the pass type, the subscription
	// ID, "profile" for the profile tier, "" for the free default.
	Source string
	// Until is when a subscription's grant ends (its CurrentPeriodEnd);
	// zero when it is not bounded (passes, profile, free, or an active
	// subscription whose period end is unknown).
	Until time.Time
}

// ResolveAccess decides a user's effective tier at now by these rules,
// first match wins:
//
//  1. founder pass: the highest GrantedTier among passes with
//     LifetimeAccess (an active subscription may coexist; the pass wins);
//  2. subscription: the highest tier among qualifying subscriptions:
//     status active or trialing (a trial grants its plan) while now is
//     before CurrentPeriodEnd, or when the end is unknown (zero) → reason
//     active_subscription; status canceled while now is before
//     CurrentPeriodEnd → grace_period. At exactly CurrentPeriodEnd the
//     grant has ended. past_due, incomplete and incomplete_expired grant
//     nothing. On equal tiers an active subscription is preferred over one
//     in grace, then the later end, then the smaller subscription ID;
//  3. profile: profileTier when it is a valid tier (FREE included; parse
//     stored values with [ParseTier]);
//  4. free.
//
// The function is pure: same inputs, same answer.
func ResolveAccess(now time.Time, passes []FounderPass, subs []ProviderSubscription, profileTier Tier) Access {
	var best *Access
	for _, p := range passes {
		if !p.LifetimeAccess || !p.GrantedTier.Valid() {
			continue
		}
		if best == nil || p.GrantedTier.Rank() > best.Tier.Rank() ||
			(p.GrantedTier == best.Tier && string(p.PassType) < best.Source) {
			best = &Access{Tier: p.GrantedTier, Reason: ReasonFounderPass, Source: string(p.PassType)}
		}
	}
	if best != nil {
		return *best
	}
	for _, s := range subs {
		c, ok := subscriptionAccess(now, s)
		if ok && (best == nil || betterSubscription(c, *best)) {
			best = &c
		}
	}
	if best != nil {
		return *best
	}
	if profileTier.Valid() {
		return Access{Tier: profileTier, Reason: ReasonProfile, Source: "profile"}
	}
	return Access{Tier: TierFree, Reason: ReasonFree}
}

// subscriptionAccess is what one subscription grants at now, if anything.
func subscriptionAccess(now time.Time, s ProviderSubscription) (Access, bool) {
	if !s.Tier.Valid() {
		return Access{}, false
	}
	end := s.CurrentPeriodEnd
	inPeriod := !end.IsZero() && now.Before(end)
	a := Access{Tier: s.Tier, Source: s.SubscriptionID, Until: end}
	switch s.Status {
	case ProviderActive, ProviderTrialing:
		if end.IsZero() || inPeriod {
			a.Reason = ReasonActiveSubscription
			return a, true
		}
	case ProviderCanceled:
		if inPeriod {
			a.Reason = ReasonGracePeriod
			return a, true
		}
	}
	return Access{}, false
}

func betterSubscription(c, best Access) bool {
	if c.Tier.Rank() != best.Tier.Rank() {
		return c.Tier.Rank() > best.Tier.Rank()
	}
	if c.Reason != best.Reason {
		return c.Reason == ReasonActiveSubscription
	}
	if !c.Until.Equal(best.Until) {
		return c.Until.IsZero() || (!best.Until.IsZero() && c.Until.After(best.Until))
	}
	return c.Source < best.Source
}

// ResolveAccess implements [Accounts.ResolveAccess]: one Query reads the
// user's whole partition (passes, subscriptions and profile share it) and
// [ResolveAccess] decides at the clock's now.
//
// Items of the partition that cannot be decoded (an unknown status, tier
// or pass type) do not stop the resolution: the Access returned is
// resolved from the other items, and the error, a join of [*FieldError]s,
// names the bad ones. Callers choose between failing closed on the error
// and using the Access.
func (a *DynamoAccounts) ResolveAccess(ctx context.Context, userID string) (Access, error) {
	if err := checkAccount("resolve access", userID); err != nil {
		return Access{}, err
	}
	items, err := a.queryAccount(ctx, "resolve access", userID, "")
	if err != nil {
		return Access{}, err
	}
	var (
		passes  []FounderPass
		subs    []ProviderSubscription
		profile Tier
		errs    []error
	)
	profileSK := SKProfilePrefix + userID
	for _, it := range items {
		sk := stringAttr(it[AttrSK])
		switch {
		case strings.HasPrefix(sk, SKFounderPrefix):
			p, err := a.cfg.Table.DecodeFounderPass(it)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			passes = append(passes, p)
		case strings.HasPrefix(sk, SKSubscriptionPrefix):
			s, err := a.cfg.Table.DecodeProviderSubscription(it)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			subs = append(subs, s)
		case sk == profileSK:
			if t, err := a.cfg.Table.DecodeProfileTier(it); err != nil {
				errs = append(errs, err)
			} else if t != "" {
				profile = t
			}
		}
	}
	return ResolveAccess(a.now(), passes, subs, profile), errors.Join(errs...)
}

// DecodeProfileTier decodes the tier of a profile item; "" when it has
// none.
func (c SingleTableConfig) DecodeProfileTier(item map[string]types.AttributeValue) (Tier, error) {
	r := newItemReader(item)
	v := r.str(profileTierAttr)
	if r.err != nil || v == "" {
		return "", r.err
	}
	t, err := ParseTier(v)
	if err != nil {
		r.fail(profileTierAttr, v, ErrInvalidTier)
		return "", r.err
	}
	return t, nil
}
