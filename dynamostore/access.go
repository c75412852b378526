package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"github.com/dynabill/billing/internal/sdkav"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/entitlement"
	"github.com/dynabill/billing/internal/layout"
)

// GrantFounderPass implements [Accounts.GrantFounderPass] with one PutItem
// on condition attribute_not_exists: granting a pass the user holds writes
// nothing and returns false. A zero purchasedAt means now.
func (a *Accounts) GrantFounderPass(ctx context.Context, userID string, pass entitlement.PassType, paymentIntentID string, purchasedAt time.Time) (bool, error) {
	if err := checkAccount("grant founder pass", userID); err != nil {
		return false, err
	}
	p, err := entitlement.ParsePassType(string(pass))
	if err != nil {
		return false, fmt.Errorf("billing: grant founder pass: %w", err)
	}
	if paymentIntentID == "" || len(paymentIntentID) > entitlement.MaxProviderID {
		return false, &billing.FieldError{Field: "paymentIntentID", Value: paymentIntentID, Err: fmt.Errorf("%w: 1 to %d bytes required", entitlement.ErrInvalidProviderEvent, entitlement.MaxProviderID)}
	}
	now := a.now()
	if purchasedAt.IsZero() {
		purchasedAt = now
	}
	ts, _ := layout.AcctTime(now)
	bought, err := layout.AcctTime(purchasedAt)
	if err != nil {
		return false, fmt.Errorf("billing: grant founder pass: purchasedAt: %w", err)
	}
	sk := layout.SKFounderPrefix + string(p)
	item, err := attributevalue.MarshalMap(founderPassItem{
		PK: a.tbl.AccountPK(userID), SK: sk, Type: layout.PassTypeValue, PassType: string(p),
		PaymentIntentID: paymentIntentID, PurchasedAt: bought, LifetimeAccess: true, GrantedTier: string(p.Tier()),
		CreatedAt: ts, UpdatedAt: ts,
	})
	if err != nil {
		return false, err
	}
	cond := absent(layout.AttrPK)
	_, err = a.cfg.Client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                &a.tbl.Table,
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
func (a *Accounts) FounderPasses(ctx context.Context, userID string) ([]entitlement.FounderPass, error) {
	if err := checkAccount("founder passes", userID); err != nil {
		return nil, err
	}
	items, err := a.queryAccount(ctx, "founder passes", userID, layout.SKFounderPrefix)
	if err != nil {
		return nil, err
	}
	return layout.DecodeAll(sdkav.FromSDKItems(items), a.tbl.DecodeFounderPass)
}

// SetProfileTier implements [Accounts.SetProfileTier]: an UpdateItem of
// tier and updatedAt on PK=USER#<id>, SK=PROFILE#<id>, keeping the
// profile's other attributes.
func (a *Accounts) SetProfileTier(ctx context.Context, userID string, tier entitlement.Tier) error {
	if err := checkAccount("set profile tier", userID); err != nil {
		return err
	}
	t, err := entitlement.ParseTier(string(tier))
	if err != nil {
		return fmt.Errorf("billing: set profile tier: %w", err)
	}
	ts, _ := layout.AcctTime(a.now())
	sk := layout.SKProfilePrefix + userID
	expr := mustBuild(expression.NewBuilder().WithUpdate(
		expression.Set(expression.Name(layout.ProfileTierAttr), exprValue(layout.StringAV(layout.ProfileTierValue(t)))).
			Set(expression.Name(layout.AcctUpdatedAt), exprValue(layout.StringAV(ts)))))
	_, err = a.cfg.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &a.tbl.Table,
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

// ResolveAccess implements [Accounts.ResolveAccess]: three reads at once,
// each consistent, fetch only what access depends on — a Query of the
// founder passes (SK begins_with FOUNDER#), a Query of the provider
// subscriptions (SK begins_with SUBSCRIPTION#) and a GetItem of the
// profile (SK PROFILE#<id>) — and [entitlement.ResolveAccess] decides at
// the clock's now. The account partition's other items (credits and their
// request markers, and on a shared table the payments' history, periods,
// receipts and subscriptions, which grow with the account's age) are not
// read, so an access check costs the same however old the account is.
//
// Items that cannot be decoded (an unknown status, tier or pass type) do
// not stop the resolution: the Access returned is resolved from the other
// items, and the error, a join of [*billing.FieldError]s, names the bad
// ones. Callers choose between failing closed on the error and using the
// Access. A failed read is returned alone, with a zero Access.
func (a *Accounts) ResolveAccess(ctx context.Context, userID string) (entitlement.Access, error) {
	const op = "resolve access"
	if err := checkAccount(op, userID); err != nil {
		return entitlement.Access{}, err
	}
	profileSK := layout.SKProfilePrefix + userID
	var (
		passItems, subItems []map[string]types.AttributeValue
		profileItem         map[string]types.AttributeValue
		passErr, subErr     error
		profileErr          error
		wg                  sync.WaitGroup
	)
	wg.Go(func() { passItems, passErr = a.queryAccount(ctx, op, userID, layout.SKFounderPrefix) })
	wg.Go(func() { subItems, subErr = a.queryAccount(ctx, op, userID, layout.SKSubscriptionPrefix) })
	wg.Go(func() { profileItem, profileErr = a.getItem(ctx, op, userID, profileSK) })
	wg.Wait()
	if err := errors.Join(passErr, profileErr, subErr); err != nil {
		return entitlement.Access{}, err
	}
	var (
		passes  []entitlement.FounderPass
		subs    []entitlement.ProviderSubscription
		profile entitlement.Tier
		errs    []error // in sort key order: passes, profile, subscriptions
	)
	for _, it := range passItems {
		p, err := a.tbl.DecodeFounderPass(sdkav.FromSDK(it))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		passes = append(passes, p)
	}
	if profileItem != nil {
		if t, err := a.tbl.DecodeProfileTier(sdkav.FromSDK(profileItem)); err != nil {
			errs = append(errs, err)
		} else if t != "" {
			profile = t
		}
	}
	for _, it := range subItems {
		s, err := a.tbl.DecodeProviderSubscription(sdkav.FromSDK(it))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		subs = append(subs, s)
	}
	return entitlement.ResolveAccess(a.now(), passes, subs, profile), errors.Join(errs...)
}

// founderPassItem is the stored form of a founder pass, encoded with
// attributevalue under the attribute names existing items use. Decoding
// is hand-written (see SingleTableConfig.DecodeFounderPass): it accepts
// older items without passType or grantedTier and names a bad attribute.
type founderPassItem struct {
	PK              string `dynamodbav:"PK"`
	SK              string `dynamodbav:"SK"`
	Type            string `dynamodbav:"type"`
	PassType        string `dynamodbav:"passType"`
	PaymentIntentID string `dynamodbav:"stripePaymentIntentId"`
	PurchasedAt     string `dynamodbav:"purchasedAt"`
	LifetimeAccess  bool   `dynamodbav:"lifetimeAccess"`
	GrantedTier     string `dynamodbav:"grantedTier"`
	CreatedAt       string `dynamodbav:"createdAt"`
	UpdatedAt       string `dynamodbav:"updatedAt"`
}
