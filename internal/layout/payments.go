package layout

import (
	"fmt"
	"strings"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/entitlement"
	"github.com/dynabill/billing/internal/av"
	"github.com/dynabill/billing/internal/timefmt"
)

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
	PayEntity        = "Entity"
	paySKU           = "SKU"
	PayEmail         = "Email"
	payDay           = "PaymentDay"
	payAmount        = "PaymentAmount"
	PayDetails       = "PaymentDetails"
	PayVersion       = "Version"
	PayCreatedAt     = "CreatedAt"
	payUpdatedAt     = "UpdatedAt"
	payEntitySub     = "Subscription"
	payEntityReceipt = "Receipt"
	PayDayLayout     = "2006-01-02"
	payNever         = "0001-01-01" // the zero time's day: "never", sorts first
)

// PaymentsLimits validates and defaults a receipt retention and a page
// size for a [entitlement.Payments] implementation: zero means the default, a
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

// RecurringSK is the sort key of a subscription.
func RecurringSK(subscriptionID, sku string) string {
	return SKRecurringPrefix + subscriptionID + "#SKU#" + sku
}

func PayInvalid(field, value, reason string) error {
	return &billing.FieldError{Field: field, Value: value, Err: fmt.Errorf("%w: %s", entitlement.ErrInvalidPayment, reason)}
}

// checkPaymentKey validates the key fields shared by subscriptions and receipts.
func CheckPaymentKey(accountID, subscriptionID, sku string) error {
	if err := entitlement.CheckAccountID(accountID); err != nil {
		return &billing.FieldError{Field: "AccountID", Value: accountID, Err: err}
	}
	for _, f := range []struct{ name, v string }{{"SubscriptionID", subscriptionID}, {"SKU", sku}} {
		if f.v == "" || len(f.v) > MaxPaymentID || strings.Contains(f.v, "#") {
			return PayInvalid(f.name, f.v, fmt.Sprintf("1 to %d bytes without '#'", MaxPaymentID))
		}
	}
	return nil
}

// PaymentDayKey is how a day is stored in NextPaymentDate,
// NextReminderDate and their Last… attributes, and so the value the
// due-date indexes are queried by: its UTC date, "2006-01-02". It returns
// "" for the zero time or a year outside 0001–9999.
func PaymentDayKey(t time.Time) string {
	d, err := PayDayText("day", t, false)
	if err != nil {
		return ""
	}
	return d
}

// payDayText encodes a date of a subscription; zero is "" (attribute
// absent) unless never is set, then it is payNever.
func PayDayText(field string, t time.Time, never bool) (string, error) {
	if t.IsZero() {
		if never {
			return payNever, nil
		}
		return "", nil
	}
	if y := t.UTC().Year(); y < 1 || y > 9999 {
		return "", PayInvalid(field, t.String(), "year outside 0001-9999")
	}
	return t.UTC().Format(PayDayLayout), nil
}

// EncodeRecurringSubscription returns the item of s, validating it. Dates
// are written as days (see [entitlement.RecurringSubscription]); CreatedAt and
// UpdatedAt as whole seconds.
func (c SingleTableConfig) EncodeRecurringSubscription(s entitlement.RecurringSubscription) (map[string]av.AttributeValue, error) {
	c = c.decodeDefaults()
	if err := CheckPaymentKey(s.AccountID, s.SubscriptionID, s.SKU); err != nil {
		return nil, err
	}
	if s.PaymentDay < 1 || s.PaymentDay > MaxPaymentDay {
		return nil, PayInvalid("PaymentDay", fmt.Sprint(s.PaymentDay), fmt.Sprintf("not 1 to %d", MaxPaymentDay))
	}
	if s.PaymentAmount < 0 {
		return nil, PayInvalid("PaymentAmount", s.PaymentAmount.String(), "negative")
	}
	if s.Version < 0 {
		return nil, PayInvalid("Version", fmt.Sprint(s.Version), "negative")
	}
	w := recurringItem{
		PK: c.AccountPK(s.AccountID), SK: RecurringSK(s.SubscriptionID, s.SKU), Entity: payEntitySub, SKU: s.SKU,
		PaymentDay: s.PaymentDay, PaymentAmount: s.PaymentAmount.String(), Version: s.Version,
		Email: s.Email, PaymentDetails: s.PaymentDetails,
	}
	for _, d := range []struct {
		attr  string
		t     time.Time
		never bool
		into  *string
	}{
		{AttrNextPaymentDate, s.NextPaymentDate, false, &w.NextPaymentDate}, {AttrNextReminderDate, s.NextReminderDate, false, &w.NextReminderDate},
		{AttrLastPaymentDate, s.LastPaymentDate, true, &w.LastPaymentDate}, {AttrLastReminderDate, s.LastReminderDate, true, &w.LastReminderDate},
	} {
		v, err := PayDayText(d.attr, d.t, d.never)
		if err != nil {
			return nil, err
		}
		*d.into = v
	}
	for _, ts := range []struct {
		attr string
		t    time.Time
		into *string
	}{{PayCreatedAt, s.CreatedAt, &w.CreatedAt}, {payUpdatedAt, s.UpdatedAt, &w.UpdatedAt}} {
		if ts.t.IsZero() {
			continue
		}
		v, err := timefmt.Seconds(ts.t)
		if err != nil {
			return nil, PayInvalid(ts.attr, ts.t.String(), err.Error())
		}
		*ts.into = v
	}
	return marshalTagged(w)
}

// recurringItem is the stored form of a RecurringSubscription, encoded with
// attributevalue: the tags are the attribute names existing items use, and
// omitempty leaves out what existing writers leave out (PaymentDay and
// Version are always written, 0 included). Decoding reads the same names
// through recurringFields and itemReader rather than attributevalue,
// because it must accept every form older writers left and name the bad
// attribute and the item's key in its errors.
type recurringItem struct {
	PK               string `dynamodbav:"PK"`
	SK               string `dynamodbav:"SK"`
	Entity           string `dynamodbav:"Entity"`
	SKU              string `dynamodbav:"SKU"`
	PaymentDay       int    `dynamodbav:"PaymentDay"`
	PaymentAmount    string `dynamodbav:"PaymentAmount"`
	Version          int    `dynamodbav:"Version"`
	Email            string `dynamodbav:"Email,omitempty"`
	PaymentDetails   string `dynamodbav:"PaymentDetails,omitempty"`
	NextPaymentDate  string `dynamodbav:"NextPaymentDate,omitempty"`
	NextReminderDate string `dynamodbav:"NextReminderDate,omitempty"`
	LastPaymentDate  string `dynamodbav:"LastPaymentDate,omitempty"`
	LastReminderDate string `dynamodbav:"LastReminderDate,omitempty"`
	CreatedAt        string `dynamodbav:"CreatedAt,omitempty"`
	UpdatedAt        string `dynamodbav:"UpdatedAt,omitempty"`
}

// recurringFields is [entitlement.RecurringSubscription] with the
// attributes its fields are read from (see readFields); recurringItem is
// its stored form for writing.
type recurringFields struct {
	AccountID        string `item:"PK,account"`
	SubscriptionID   string
	SKU              string
	Email            string `item:"Email"`
	PaymentDay       int    `item:"PaymentDay"`
	PaymentAmount    billing.Amount
	PaymentDetails   string    `item:"PaymentDetails"`
	NextPaymentDate  time.Time `item:"NextPaymentDate,day"`
	NextReminderDate time.Time `item:"NextReminderDate,day"`
	LastPaymentDate  time.Time `item:"LastPaymentDate,day"`
	LastReminderDate time.Time `item:"LastReminderDate,day"`
	CreatedAt        time.Time `item:"CreatedAt"`
	UpdatedAt        time.Time `item:"UpdatedAt"`
	Version          int       `item:"Version"`
}

// DecodeRecurringSubscription decodes a subscription item of this layout.
// Anything else, receipts included, is a [*billing.FieldError] wrapping
// [billing.ErrInvalidItem].
func (c SingleTableConfig) DecodeRecurringSubscription(item map[string]av.AttributeValue) (entitlement.RecurringSubscription, error) {
	s, r := readAs[recurringFields, entitlement.RecurringSubscription](c, item)
	sk, rest, ok := r.sortKey(SKRecurringPrefix)
	id, sku, ok2 := strings.Cut(rest, "#SKU#")
	if r.err == nil && (!ok || !ok2 || CheckPaymentKey("a", id, sku) != nil /* "a": only the ID and SKU are checked */) {
		r.fail(AttrSK, sk, fmt.Errorf("%w: not a recurring subscription", billing.ErrInvalidItem))
	}
	s.SubscriptionID, s.SKU = id, sku
	if v := r.str(paySKU); r.err == nil && v != "" && v != sku {
		r.fail(paySKU, v, fmt.Errorf("%w: differs from the sort key's SKU", billing.ErrInvalidItem))
	}
	if r.err == nil {
		s.PaymentAmount = r.amount(payAmount)
	}
	if r.err == nil && (s.PaymentDay < 1 || s.PaymentDay > MaxPaymentDay || s.Version < 0) {
		r.fail(payDay, fmt.Sprint(s.PaymentDay, "/v", s.Version), fmt.Errorf("%w: payment day or version out of range", billing.ErrInvalidItem))
	}
	if r.err != nil {
		return entitlement.RecurringSubscription{}, r.err
	}
	return s, nil
}

// PrepareSubscriptionUpdate is what [entitlement.Payments.UpdateSubscription] stores:
// next with prev's CreatedAt, Version prev.Version+1 and UpdatedAt now,
// after checking that next has prev's key and prev a stored version.
func PrepareSubscriptionUpdate(prev, next entitlement.RecurringSubscription, now time.Time) (entitlement.RecurringSubscription, error) {
	if err := CheckPaymentKey(prev.AccountID, prev.SubscriptionID, prev.SKU); err != nil {
		return next, err
	}
	if next.AccountID != prev.AccountID || next.SubscriptionID != prev.SubscriptionID || next.SKU != prev.SKU {
		return next, PayInvalid("SubscriptionID", next.SubscriptionID, "next has another key than prev")
	}
	if prev.Version < 1 {
		return next, PayInvalid("Version", fmt.Sprint(prev.Version), "prev was not read from the store")
	}
	next.CreatedAt, next.UpdatedAt, next.Version = prev.CreatedAt, now, prev.Version+1
	return next, nil
}

// Attribute names of a receipt item.
const (
	RecSubscriptionID = "SubscriptionID"
	RecAmount         = "ProcessedAmount"
	RecTransactionID  = "TransactionID"
)

// ReceiptSK is the sort key of a receipt.
func ReceiptSK(processed time.Time, sku string) (string, error) {
	ts, err := timefmt.Nanos(processed)
	if err != nil {
		return "", PayInvalid("ProcessedDate", processed.String(), err.Error())
	}
	return SKReceiptPrefix + ts + "#SKU#" + sku, nil
}

// EncodeReceipt returns the item of r, validating it. ExpiresAt is written
// as is; the stores set it from the retention first.
func (c SingleTableConfig) EncodeReceipt(r entitlement.Receipt) (map[string]av.AttributeValue, error) {
	c = c.decodeDefaults()
	if err := CheckPaymentKey(r.AccountID, r.SubscriptionID, r.SKU); err != nil {
		return nil, err
	}
	if r.ProcessedDate.IsZero() {
		return nil, PayInvalid("ProcessedDate", "", "missing")
	}
	if r.ProcessedAmount < 0 {
		return nil, PayInvalid("ProcessedAmount", r.ProcessedAmount.String(), "negative")
	}
	sk, err := ReceiptSK(r.ProcessedDate, r.SKU)
	if err != nil {
		return nil, err
	}
	item, err := marshalTagged(receiptItem{
		PK: c.AccountPK(r.AccountID), SK: sk, Entity: payEntityReceipt, SKU: r.SKU, SubscriptionID: r.SubscriptionID,
		ProcessedDate: strings.Split(sk, "#")[1], ProcessedAmount: r.ProcessedAmount.String(), TransactionID: r.TransactionID,
	})
	if err != nil {
		return nil, err
	}
	if !r.ExpiresAt.IsZero() {
		item[c.TTLAttribute] = NumberAV(r.ExpiresAt.Unix()) // the TTL attribute's name is configured
	}
	return item, nil
}

// receiptItem is the stored form of a Receipt (but for its TTL attribute,
// whose name is configured), encoded with attributevalue; see
// recurringItem for why decoding is hand-written.
type receiptItem struct {
	PK              string `dynamodbav:"PK"`
	SK              string `dynamodbav:"SK"`
	Entity          string `dynamodbav:"Entity"`
	SKU             string `dynamodbav:"SKU"`
	SubscriptionID  string `dynamodbav:"SubscriptionID"`
	ProcessedDate   string `dynamodbav:"ProcessedDate"`
	ProcessedAmount string `dynamodbav:"ProcessedAmount"`
	TransactionID   string `dynamodbav:"TransactionID,omitempty"`
}

// receiptFields is [entitlement.Receipt] with the attributes its fields
// are read from (see readFields); receiptItem is its stored form for
// writing.
type receiptFields struct {
	AccountID       string `item:"PK,account"`
	SubscriptionID  string `item:"SubscriptionID,required"`
	SKU             string
	ProcessedDate   time.Time `item:"ProcessedDate"`
	ProcessedAmount billing.Amount
	TransactionID   string    `item:"TransactionID"`
	ExpiresAt       time.Time `item:",ttl"`
}

// DecodeReceipt decodes a receipt item of this layout. Anything else,
// subscriptions included, is a [*billing.FieldError] wrapping [billing.ErrInvalidItem].
func (c SingleTableConfig) DecodeReceipt(item map[string]av.AttributeValue) (entitlement.Receipt, error) {
	rc, r := readAs[receiptFields, entitlement.Receipt](c, item)
	sk, rest, ok := r.sortKey(SKReceiptPrefix)
	ts, sku, ok2 := strings.Cut(rest, "#SKU#")
	if r.err == nil {
		want, err := ReceiptSK(rc.ProcessedDate, sku)
		if !ok || !ok2 || err != nil || want != sk || CheckPaymentKey("a", rc.SubscriptionID, sku) != nil {
			r.fail(AttrSK, sk, fmt.Errorf("%w: not a receipt of processed date %s", billing.ErrInvalidItem, ts))
		}
	}
	rc.SKU = sku
	if v := r.str(paySKU); r.err == nil && v != "" && v != sku {
		r.fail(paySKU, v, fmt.Errorf("%w: differs from the sort key's SKU", billing.ErrInvalidItem))
	}
	if r.err == nil {
		rc.ProcessedAmount = r.amount(RecAmount)
	}
	if r.err != nil {
		return entitlement.Receipt{}, r.err
	}
	return rc, nil
}

// roundTripSub returns s as the store keeps it (days, whole seconds).
func RoundTripSub(c SingleTableConfig, s entitlement.RecurringSubscription) (entitlement.RecurringSubscription, error) {
	item, err := c.EncodeRecurringSubscription(s)
	if err != nil {
		return entitlement.RecurringSubscription{}, err
	}
	return c.DecodeRecurringSubscription(item)
}
