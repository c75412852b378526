package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/coupondoc"
	"github.com/dynabill/billing/internal/invoicedoc"
)

// Coupons stores a host's coupons and promotion codes in DynamoDB and
// counts their redemptions: on the legacy layout in the invoices table
// ([TableConfig.Invoices]), on the single table beside the accounts. A
// coupon is not an invoice, but that table is where the library keeps the
// billing documents and their counters, so a host that bills with
// coupons creates no table for them. Make one with [NewCoupons] or
// [NewSingleTableCoupons].
//
// A redemption is one TransactWriteItems of two or three actions: the
// coupon's count plus one (conditional on the coupon existing, staying
// within its maximum and At being at or before RedeemBy), the code's
// likewise (conditional on its coupon, maximum and ExpiresAt) when a code
// is given, and the redemption, keyed by user and request key,
// conditional on being new. Nothing is counted unless all of it is. A
// cancelled transaction is explained by one consistent read of the three
// items: the redemption stored (a repeat, or its key reused), the coupon
// or code missing ([billing.ErrNotFound]) or refusing
// ([billing.ErrCouponNotRedeemable]); when none of them says no, another
// transaction on the same items cancelled it, and it is tried again.
//
// Cost (measured on the local server, dynamostore's TestCouponsCost and
// TestCouponsContention, 8 redeemers of one coupon): a redemption is one
// call, 4 WCU (6 with a code); a refusal or a repeat two calls (the
// transaction, then a consistent read of 2 or 3 items); a coupon's put
// one UpdateItem (1 WCU), a code's one transaction (4 WCU: the check of
// its coupon is a write).
// A coupon is one item: DynamoDB takes about 1,000 writes a second on an
// item, fewer when transactions on it collide (each collision costs a
// transaction more), so a coupon redeemed by hundreds of customers a
// second is a hot key.
type Coupons struct {
	client  API
	table   string
	pk, sk  string // key attribute names
	account string // prefix of user partitions
	retries int
	// single: on the single table, where a redemption is an item of its
	// user's account partition (see userSegment).
	single bool
}

var _ billing.Coupons = (*Coupons)(nil)

// maxRedeemRetries bounds the transactions of one redemption that other
// transactions on the same coupon cancel.
const maxRedeemRetries = 200

// NewCoupons returns the coupon store of the legacy layout, in the table
// cfg.Tables.Invoices names (required): the invoices table holds the
// coupons, promotion codes and redemptions beside the invoices (items of
// their own keys, which the invoice store and the invoices stream
// ignore), so no table is added.
func NewCoupons(cfg Config) (*Coupons, error) {
	if cfg.Client == nil {
		return nil, errors.New("billing: dynamostore coupons: Client is required")
	}
	if cfg.Tables.Invoices == "" {
		return nil, errors.New("billing: dynamostore coupons: Tables.Invoices is required (coupons are kept in the invoices table)")
	}
	return &Coupons{client: cfg.Client, table: cfg.Tables.Invoices, pk: attrInvoicePK, sk: attrInvoiceSK,
		account: legacyInvoiceAccountPrefix, retries: maxRedeemRetries}, nil
}

// NewSingleTableCoupons returns the coupon store of the single table:
// coupons and codes in partitions of their own (COUPON#<id>,
// PROMO#<code>), a user's redemptions in the partition of its account.
func NewSingleTableCoupons(cfg SingleTableStoreConfig) (*Coupons, error) {
	if cfg.Client == nil {
		return nil, errors.New("billing: dynamostore coupons: Client is required")
	}
	tbl := codecOf(cfg.Table)
	return &Coupons{client: cfg.Client, table: tbl.Table, pk: "PK", sk: "SK", account: tbl.AccountPrefix,
		retries: maxRedeemRetries, single: true}, nil
}

func (s *Coupons) keyOf(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{s.pk: &types.AttributeValueMemberS{Value: pk}, s.sk: &types.AttributeValueMemberS{Value: sk}}
}

func (s *Coupons) couponKey(id string) map[string]types.AttributeValue {
	return s.keyOf(pkCouponPrefix+id, skCoupon)
}

func (s *Coupons) codeKey(code string) map[string]types.AttributeValue {
	return s.keyOf(pkCodePrefix+billing.FoldCode(code), skCode)
}

// redemptionPrefix is the partition of userID's redemptions and the
// prefix of their sort keys.
func (s *Coupons) redemptionPrefix(userID string) (pk, skPrefix string) {
	if s.single {
		return s.account + invoicedoc.Account(userID), skRedemption + userSegment(userID) + "#"
	}
	return s.account + userID, skRedemption
}

func (s *Coupons) redemptionKey(userID, key string) map[string]types.AttributeValue {
	pk, prefix := s.redemptionPrefix(userID)
	return s.keyOf(pk, prefix+key)
}

// keyText names an item's key in errors.
func (s *Coupons) keyText(key map[string]types.AttributeValue) string {
	return s.pk + "=" + stringOf(key[s.pk]) + " " + s.sk + "=" + stringOf(key[s.sk])
}

// putUpdate is the update that stores attrs over the item at key: SET of
// each, REMOVE of the optional attributes attrs lacks, and the count set
// to 0 when the item has none (a put never changes a count).
func (s *Coupons) putUpdate(key, attrs map[string]types.AttributeValue, optional []string) *types.Update {
	var upd expression.UpdateBuilder
	for _, name := range slices.Sorted(maps.Keys(attrs)) {
		if name != attrRedeemed {
			upd = upd.Set(expression.Name(name), exprValue(attrs[name]))
		}
	}
	for _, name := range optional {
		if _, ok := attrs[name]; !ok {
			upd = upd.Remove(expression.Name(name))
		}
	}
	redeemed := expression.Name(attrRedeemed)
	upd = upd.Set(redeemed, expression.IfNotExists(redeemed, exprValue(0)))
	expr := mustBuild(expression.NewBuilder().WithUpdate(upd))
	return &types.Update{TableName: &s.table, Key: key, UpdateExpression: expr.Update(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values()}
}

// PutCoupon implements [billing.Coupons.PutCoupon] with one UpdateItem:
// the terms set (or removed), the count kept (0 for a new coupon).
func (s *Coupons) PutCoupon(ctx context.Context, c billing.Coupon) error {
	if err := coupondoc.CheckCoupon(&c); err != nil {
		return err
	}
	u := s.putUpdate(s.couponKey(c.ID), encodeCoupon(&c), couponOptional)
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: u.TableName, Key: u.Key,
		UpdateExpression: u.UpdateExpression, ExpressionAttributeNames: u.ExpressionAttributeNames,
		ExpressionAttributeValues: u.ExpressionAttributeValues})
	if err != nil {
		return fmt.Errorf("billing: put coupon %s: %w", c.ID, err)
	}
	return nil
}

// PutPromotionCode implements [billing.Coupons.PutPromotionCode] with one
// transaction: a check that its coupon exists and the code's rules set
// (the count kept). A code of a coupon the store does not hold is
// [billing.ErrNotFound].
func (s *Coupons) PutPromotionCode(ctx context.Context, p billing.PromotionCode) error {
	if err := coupondoc.CheckCode(&p); err != nil {
		return err
	}
	exists := mustBuild(expression.NewBuilder().WithCondition(expression.AttributeExists(expression.Name(s.pk))))
	items := []types.TransactWriteItem{
		{ConditionCheck: &types.ConditionCheck{TableName: &s.table, Key: s.couponKey(p.CouponID),
			ConditionExpression: exists.Condition(), ExpressionAttributeNames: exists.Names()}},
		{Update: s.putUpdate(s.codeKey(p.Code), encodeCode(&p), codeOptional)},
	}
	for attempt := 0; ; attempt++ {
		codes, err := s.txWrite(ctx, items)
		switch {
		case err != nil:
			return fmt.Errorf("billing: put promotion code %s: %w", p.Code, err)
		case codes == nil:
			return nil
		case codes[0] == codeConditionFailed:
			return fmt.Errorf("%w: coupon %s of promotion code %s", billing.ErrNotFound, p.CouponID, p.Code)
		case attempt >= 8:
			return &billing.ConflictError{Op: "put promotion code", Key: p.Code, Reason: "the coupon or the code kept changing", Err: billing.ErrConflict}
		}
		if err := txBackoff(ctx, "put promotion code", p.Code, attempt); err != nil {
			return err
		}
	}
}

// txWrite runs a transaction; it returns the codes of a cancelled one
// (nil on success), and an error for anything but a cancellation by a
// condition or a conflicting transaction.
func (s *Coupons) txWrite(ctx context.Context, items []types.TransactWriteItem) ([]string, error) {
	_, err := s.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if err == nil {
		return nil, nil
	}
	_, codes := cancelCodes(err, len(items))
	if codes == nil {
		return nil, err
	}
	for _, c := range codes {
		if c != "" && c != "None" && c != codeConditionFailed && c != codeTxConflict {
			return nil, err // throttled or invalid: not a race
		}
	}
	return codes, nil
}

func (s *Coupons) get(ctx context.Context, key map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, err
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	return out.Item, nil
}

// Coupon implements [billing.Coupons.Coupon] with a consistent GetItem.
func (s *Coupons) Coupon(ctx context.Context, id string) (billing.Coupon, error) {
	if !coupondoc.ValidID(id) {
		return billing.Coupon{}, fmt.Errorf("%w: coupon %q", billing.ErrNotFound, id)
	}
	key := s.couponKey(id)
	it, err := s.get(ctx, key)
	switch {
	case err != nil:
		return billing.Coupon{}, fmt.Errorf("billing: get coupon %s: %w", id, err)
	case it == nil:
		return billing.Coupon{}, fmt.Errorf("%w: coupon %s", billing.ErrNotFound, id)
	}
	return decodeCoupon(it, s.keyText(key))
}

// PromotionCode implements [billing.Coupons.PromotionCode] with a
// consistent GetItem of the folded code.
func (s *Coupons) PromotionCode(ctx context.Context, code string) (billing.PromotionCode, error) {
	if !coupondoc.ValidID(code) {
		return billing.PromotionCode{}, fmt.Errorf("%w: promotion code %q", billing.ErrNotFound, code)
	}
	key := s.codeKey(code)
	it, err := s.get(ctx, key)
	switch {
	case err != nil:
		return billing.PromotionCode{}, fmt.Errorf("billing: get promotion code %s: %w", code, err)
	case it == nil:
		return billing.PromotionCode{}, fmt.Errorf("%w: promotion code %s", billing.ErrNotFound, code)
	}
	return decodeCode(it, s.keyText(key))
}

// countUpdate adds one to the count of the coupon or code at key,
// conditional on cond and on the item staying within its maximum
// (max_redemptions 0: none).
func (s *Coupons) countUpdate(key map[string]types.AttributeValue, cond expression.ConditionBuilder) *types.Update {
	redeemed, maxR := expression.Name(attrRedeemed), expression.Name(attrMaxRedemptions)
	cond = expression.AttributeExists(expression.Name(s.pk)).
		And(maxR.Equal(exprValue(0)).Or(redeemed.LessThan(maxR))).
		And(cond)
	expr := mustBuild(expression.NewBuilder().WithUpdate(expression.Set(redeemed, redeemed.Plus(exprValue(1)))).WithCondition(cond))
	return &types.Update{TableName: &s.table, Key: key, UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values()}
}

// until is the condition that the item's date attribute, when it has
// one, is at or after at (both timefmt.Nanos text: string order is time
// order).
func until(attr, at string) expression.ConditionBuilder {
	return expression.AttributeNotExists(expression.Name(attr)).Or(expression.Name(attr).GreaterThanEqual(exprValue(at)))
}

// Redeem implements [billing.Coupons.Redeem]: one transaction (see
// [Coupons]); a cancelled one is explained by a consistent read.
func (s *Coupons) Redeem(ctx context.Context, r billing.Redemption) (billing.Redemption, error) {
	if err := coupondoc.CheckRedemption(&r); err != nil {
		return billing.Redemption{}, err
	}
	r.At = r.At.UTC()
	at := couponTime(r.At)
	redKey := s.redemptionKey(r.UserID, r.RequestKey)
	keys := []map[string]types.AttributeValue{redKey, s.couponKey(r.CouponID)}
	absent := mustBuild(expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(s.pk))))
	items := []types.TransactWriteItem{
		{Put: &types.Put{TableName: &s.table, Item: s.item(redKey, encodeRedemption(&r)), ConditionExpression: absent.Condition(),
			ExpressionAttributeNames: absent.Names()}},
		{Update: s.countUpdate(keys[1], until(attrRedeemBy, at))},
	}
	if r.Code != "" {
		keys = append(keys, s.codeKey(r.Code))
		items = append(items, types.TransactWriteItem{Update: s.countUpdate(keys[2],
			expression.Name(attrCouponID).Equal(exprValue(r.CouponID)).And(until(attrExpiresAt, at)))})
	}
	for attempt := 0; ; attempt++ {
		codes, err := s.txWrite(ctx, items)
		switch {
		case err != nil:
			return billing.Redemption{}, fmt.Errorf("billing: redeem coupon %s (user %s key %s): %w", r.CouponID, r.UserID, r.RequestKey, err)
		case codes == nil:
			return r, nil
		}
		// Cancelled: read what decides, and say why.
		found, err := s.readAll(ctx, keys)
		if err != nil {
			return billing.Redemption{}, fmt.Errorf("billing: redeem coupon %s (user %s key %s): %w", r.CouponID, r.UserID, r.RequestKey, err)
		}
		if found[0] != nil {
			return s.repeat(found[0], redKey, r) // stored first: a repeat, whatever the counts now
		}
		if err := s.refusal(r, keys, found); err != nil {
			return billing.Redemption{}, err
		}
		if attempt >= s.retries {
			return billing.Redemption{}, &billing.ConflictError{Op: "redeem coupon", Key: r.RequestKey,
				Reason: fmt.Sprintf("lost the race for coupon %s %d times", r.CouponID, attempt+1), Err: billing.ErrConflict}
		}
		if err := invoiceBackoff(ctx, attempt); err != nil {
			return billing.Redemption{}, fmt.Errorf("billing: redeem coupon %s (user %s key %s): %w", r.CouponID, r.UserID, r.RequestKey, err)
		}
	}
}

// refusal explains a cancelled redemption whose key is free from the
// items read (found[i] of keys[i]: the redemption, the coupon, the code;
// nil when missing): the coupon or the code missing or refusing, or nil
// when neither does (another transaction cancelled it).
func (s *Coupons) refusal(r billing.Redemption, keys, found []map[string]types.AttributeValue) error {
	if found[1] == nil {
		return fmt.Errorf("%w: coupon %s", billing.ErrNotFound, r.CouponID)
	}
	c, err := decodeCoupon(found[1], s.keyText(keys[1]))
	if err != nil {
		return err
	}
	if err := coupondoc.CouponRefusal(&c, r.At); err != nil || r.Code == "" {
		return err
	}
	if found[2] == nil {
		return fmt.Errorf("%w: promotion code %s", billing.ErrNotFound, r.Code)
	}
	p, err := decodeCode(found[2], s.keyText(keys[2]))
	if err != nil {
		return err
	}
	return coupondoc.CodeRefusal(&p, r.CouponID, r.At)
}

// repeat answers r from the redemption stored under its user and key.
func (s *Coupons) repeat(it, key map[string]types.AttributeValue, r billing.Redemption) (billing.Redemption, error) {
	stored, err := decodeRedemption(it, s.keyText(key))
	if err != nil {
		return billing.Redemption{}, err
	}
	if stored.UserID != r.UserID || stored.RequestKey != r.RequestKey {
		return billing.Redemption{}, &billing.ConflictError{Op: "redeem coupon", Key: r.RequestKey,
			Reason: fmt.Sprintf("the redemption item %s is user %s key %s's", s.keyText(key), stored.UserID, stored.RequestKey), Err: billing.ErrConflict}
	}
	return coupondoc.Repeat(stored, r)
}

func (s *Coupons) item(key, attrs map[string]types.AttributeValue) map[string]types.AttributeValue {
	m := maps.Clone(key)
	maps.Copy(m, attrs)
	return m
}

// readAll reads the items at keys with one consistent BatchGetItem (more
// while some come back unprocessed); found[i] is keys[i]'s item, nil when
// there is none.
func (s *Coupons) readAll(ctx context.Context, keys []map[string]types.AttributeValue) ([]map[string]types.AttributeValue, error) {
	found := make([]map[string]types.AttributeValue, len(keys))
	pending := keys
	for len(pending) > 0 {
		out, err := s.client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
			s.table: {Keys: pending, ConsistentRead: aws.Bool(true)}}})
		if err != nil {
			return nil, err
		}
		for _, it := range out.Responses[s.table] {
			for i, k := range keys {
				if reflect.DeepEqual(it[s.pk], k[s.pk]) && reflect.DeepEqual(it[s.sk], k[s.sk]) {
					found[i] = it
				}
			}
		}
		pending = out.UnprocessedKeys[s.table].Keys
	}
	return found, nil
}

// Redemptions implements [billing.Coupons.Redemptions] with one Query of
// the user's redemption items (all pages), sorted oldest first. An item
// that does not decode is reported (billing.ReportInvalidItem) and
// skipped.
func (s *Coupons) Redemptions(ctx context.Context, userID string) ([]billing.Redemption, error) {
	if userID == "" {
		return nil, nil
	}
	pk, prefix := s.redemptionPrefix(userID)
	key := expression.Key(s.pk).Equal(exprValue(pk)).And(expression.Key(s.sk).BeginsWith(prefix))
	expr := mustBuild(expression.NewBuilder().WithKeyCondition(key))
	items, err := queryAll(ctx, s.client, &dynamodb.QueryInput{TableName: &s.table, KeyConditionExpression: expr.KeyCondition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(), ConsistentRead: aws.Bool(true)}, 0)
	if err != nil {
		return nil, fmt.Errorf("billing: redemptions of user %s: %w", userID, err)
	}
	out := make([]billing.Redemption, 0, len(items))
	for _, it := range items {
		r, err := decodeRedemption(it, s.keyText(it))
		if err != nil {
			billing.ReportInvalidItem(ctx, err)
			continue
		}
		if r.UserID != userID {
			continue // another user whose ID hashed alike (never seen; kept apart all the same)
		}
		out = append(out, r)
	}
	coupondoc.SortRedemptions(out)
	return out, nil
}
