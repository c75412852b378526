package layout

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/av"
	"github.com/dynabill/billing/internal/ddbjson"
	"github.com/dynabill/billing/internal/timefmt"
)

// Attribute names of the legacy tables: the wire contract. Repository code
// and hosts building their own expressions use these, never literals.
const (
	AttrUserID              = "user_id"
	AttrBillingDate         = "billing_date"
	AttrSubscriptionID      = "subscription_id"
	AttrBillingAmount       = "billing_amount"
	AttrBillingStatus       = "billing_status"
	AttrBillingPeriod       = "billing_period"
	AttrTransactionID       = "transaction_id"
	AttrPaymentError        = "usio_error"
	AttrInitialRunDate      = "initial_run_date"
	AttrCompletionDate      = "completion_date"
	AttrLastRunDate         = "last_run_date"
	AttrCreatedDate         = "created_date"
	AttrProcess             = "process"
	AttrUpdatedEvent        = "updated_event"
	AttrTerm                = "term"
	AttrReceiptAccountMask  = "receipt_account_mask"
	AttrReceiptTierName     = "receipt_tier_name"
	AttrReceiptPaymentType  = "receipt_payment_type"
	AttrBillingWeek         = "billing_week"
	AttrPauseDurationMonths = "pause_duration_months"
	AttrIsPendingDowngrade  = "is_pending_downgrade"

	// AttrAnchorDay is added by this library; optional on read.
	AttrAnchorDay = "billing_anchor_day"
	// AttrInterval is added by this library; optional on read (absent
	// means every period: 1).
	AttrInterval = "billing_interval"
	// AttrAttempt is added by this library; optional on read.
	AttrAttempt = "billing_attempt"
	// AttrNoRetry is added by this library; optional on read.
	AttrNoRetry = "billing_no_retry"
	// AttrPendingTier is added by this library; optional on read.
	AttrPendingTier = "billing_pending_tier"
	// AttrPendingAmount is added by this library; optional on read.
	AttrPendingAmount = "billing_pending_amount"
	// AttrTrialEnd marks a trial period ([billing.Period.TrialEnd]):
	// the billing date of the first paid period. Added by this library,
	// optional on read (absent: not a trial).
	AttrTrialEnd = "billing_trial_end"
	// AttrTrialAmount is what the first paid period after a trial costs;
	// written with billing_trial_end, optional on read.
	AttrTrialAmount = "billing_trial_amount"
	// AttrAfterTrial (BOOL true) marks the first paid period after a trial
	// ([billing.Period.AfterTrial]). Added by this library, optional
	// on read (absent: false), omitted when false.
	AttrAfterTrial = "billing_after_trial"
	// AttrAccessEnd is when a cancellation now ended the user's paid
	// access ([billing.Period.AccessEnd]), on the periods it
	// cancelled. Added by this library, optional on read (absent: the
	// paid periods run to their ends), omitted when zero.
	AttrAccessEnd = "billing_access_end"
	// AttrAdjustments (S) holds the lines a period's charge carries
	// besides its plan ([billing.Period.Adjustments]: a plan change's
	// proration credits and charges) as a JSON array of
	// [billing.Adjustment] (amounts as strings like "4.99", times RFC 3339
	// UTC). Added by this library, optional on read (absent: none),
	// omitted when there are none.
	AttrAdjustments = "billing_adjustments"
	// AttrBalance (S, an amount like billing_amount) is the customer's
	// credit balance a period carries ([billing.Period.Balance]). Added by
	// this library, optional on read (absent: zero), omitted when zero.
	AttrBalance = "billing_balance"
	// AttrDiscounts (S) holds the coupons applied to the subscription that
	// come off a period's charge ([billing.Period.Discounts]), in the
	// order applied, as a JSON array of [billing.Discount] (amounts off as
	// strings like "4.99"). Added by this library, optional on read
	// (absent: none), omitted when there are none.
	AttrDiscounts = "billing_discounts"
	// AttrTax (S, an amount like billing_amount), AttrTaxInclusive (BOOL
	// true, omitted when false) and AttrTaxDescription (S) are the tax
	// fixed for a period's charge ([billing.Period.Tax]): written together
	// once it is fixed, billing_tax even at zero, all absent before.
	// Added by this library, optional on read (absent: not fixed).
	AttrTax            = "billing_tax"
	AttrTaxInclusive   = "billing_tax_inclusive"
	AttrTaxDescription = "billing_tax_description"
	// AttrDunning (S) holds a declined period's dunning
	// ([billing.Period.Dunning]: the retry schedule's progress, the
	// notices claimed, how it ended) as a JSON object of
	// [billing.Dunning], its times in the nine-digit form of
	// last_run_date. Added by this library, optional on read (absent: the
	// zero Dunning), omitted when the Dunning is zero.
	AttrDunning = "billing_dunning"
	// The in-flight attempt ([billing.Period.LastAttempt]) is added by this
	// library; optional on read.
	AttrAttemptNumber  = "billing_attempt_number"
	AttrAttemptKey     = "billing_attempt_key"
	AttrAttemptAmount  = "billing_attempt_amount"
	AttrAttemptTier    = "billing_attempt_tier"
	AttrAttemptProcess = "billing_attempt_process"
	AttrAttemptStarted = "billing_attempt_started"
	// AttrAttemptPresented is when the attempt was last replayed.
	AttrAttemptPresented = "billing_attempt_presented"
	// AttrAttemptInvoice and AttrAttemptInvoiceNumber name the invoice
	// the attempt pays (the collector's Config.Invoices).
	AttrAttemptInvoice       = "billing_attempt_invoice"
	AttrAttemptInvoiceNumber = "billing_attempt_invoice_number"
	// AttrChargeOf (S) makes the record a one-off charge of a plan change
	// made during the paid period it names ([billing.Period.ChargeOf]).
	// Added by this library, optional: absent on every other record.
	AttrChargeOf = "billing_charge_of"

	// AttrChange names the change a history row records
	// ([billing.Period.Change]); added by this library, written to
	// history rows only, optional on read.
	AttrChange = "billing_change"
	// AttrRequest is the request a history row records
	// ([billing.Period.Request]); added by this library, written to
	// history rows only, optional on read.
	AttrRequest = "billing_request"

	// DataPrefix starts the attributes kept only in the history table.
	DataPrefix = "data_"
	// AttrOperator and AttrReason are who made a change and why
	// ([billing.Period.Operator] and Reason): data_ attributes,
	// written to history rows only when set, optional on read.
	AttrOperator = "data_operator"
	AttrReason   = "data_reason"
)

// EncodeItem encodes s as a billing-activity item: the wire contract of the
// legacy table. data_ attributes are left out (they belong to history, see
// [EncodeHistoryItem]).
//
// Encoding rules: billing_date in whole seconds UTC
// ("2006-01-02T15:04:05Z", any fraction truncated); the other timestamps with
// a fixed nine-digit fraction, omitted when zero; billing_amount as a string
// ("4.99"); term always written (MONTHLY when empty); empty strings, a zero
// billing_week, pause_duration_months, billing_anchor_day, billing_interval and
// billing_attempt, and a false is_pending_downgrade are omitted;
// billing_balance is an amount like billing_amount, omitted when zero, and
// billing_adjustments a JSON array of the lines (see [AttrAdjustments]),
// omitted when there are none, as is billing_discounts (see
// [AttrDiscounts]); the tax attributes only once a tax is fixed (see
// [AttrTax]); billing_dunning a JSON object, omitted when the Dunning is
// zero (see [AttrDunning]); Extra attributes are written back unchanged. A record decoded from an item keeps that item's billing_date
// and last_run_date strings while they denote the same instants, so a
// legacy key is addressed byte for byte.
//
// A record that cannot be stored (no user, subscription ID or billing date,
// the INACTIVE status, out-of-range numbers, negative amounts, more than 64
// adjustments or ones whose sum overflows, more than 8 discounts or one
// without a coupon ID or with other than exactly one of a percent (1 to
// 10000) and an amount off, a tax without its description or negative, a
// dunning without its start or attempt, or out of its bounds) is an error
// naming the field.
func EncodeItem(s *billing.Period) (map[string]av.AttributeValue, error) {
	f := NewFlat()
	defer f.Release()
	if err := f.Encode(s, false); err != nil {
		return nil, err
	}
	return f.Item(false, nil), nil
}

// EncodeHistoryItem encodes s as a billing-activity-history item: the same
// attributes as [EncodeItem] plus the data_ attributes. Its key is user_id
// and last_run_date, so LastRunDate must be set.
func EncodeHistoryItem(s *billing.Period) (map[string]av.AttributeValue, error) {
	f := NewFlat()
	defer f.Release()
	if err := f.EncodeHistory(s); err != nil {
		return nil, err
	}
	return f.Item(true, nil), nil
}

// historyRowErr is the error of a record that cannot have a history row
// whatever its attributes: one without last_run_date.
func historyRowErr(s *billing.Period) error {
	if s.LastRunDate.IsZero() {
		return &billing.FieldError{Field: AttrLastRunDate, Key: s.Key(), Err: fmt.Errorf("%w: history rows need last_run_date", billing.ErrInvalidItem)}
	}
	return nil
}

// encodeFlat encodes s into f, which is zero; withData adds (and checks)
// the data_ attributes. The checks, and their order, are the wire
// contract's (see EncodeItem).
func encodeFlat(f *Flat, s *billing.Period, withData bool) error {
	bad := func(field, value string, cause error) error {
		return &billing.FieldError{Field: field, Value: value, Key: s.Key(), Err: fmt.Errorf("%w: %w", billing.ErrInvalidItem, cause)}
	}
	if s.UserID == "" {
		return bad(AttrUserID, "", errors.New("empty"))
	}
	if s.BillingDate.IsZero() {
		return bad(AttrBillingDate, "", errors.New("zero time"))
	}
	if s.SubscriptionID == "" {
		return bad(AttrSubscriptionID, "", errors.New("empty"))
	}
	if !s.Status.Storable() {
		return bad(AttrBillingStatus, string(s.Status), billing.ErrInvalidStatus)
	}
	if s.Amount < 0 {
		return bad(AttrBillingAmount, s.Amount.String(), billing.ErrInvalidAmount)
	}
	term, err := billing.ParseTerm(string(s.Term))
	if err != nil {
		return bad(AttrTerm, string(s.Term), billing.ErrInvalidTerm)
	}
	st := storedOf(s)
	bd, err := billingDateVal(s.BillingDate, st)
	if err != nil {
		return bad(AttrBillingDate, s.BillingDate.String(), fmt.Errorf("%w: %w", billing.ErrInvalidDate, err))
	}
	v := &f.vals
	str := func(a attr, s string) {
		if s != "" {
			v[a] = val{kind: vS, s: s}
		}
	}
	v[aUserID] = val{kind: vS, s: s.UserID}
	v[aBillingDate] = bd
	v[aBillingAmount] = val{kind: vAmount, n: int64(s.Amount)}
	v[aBillingStatus] = val{kind: vS, s: string(s.Status)}
	v[aTerm] = val{kind: vS, s: string(term)}
	for _, a := range stringAttrs {
		str(a, *stringField(s, a))
	}
	str(aProcess, string(s.Process))
	str(aUpdatedEvent, string(s.UpdatedEvent))
	for _, a := range timeAttrs {
		p := timeField(s, a)
		if p.IsZero() {
			continue
		}
		if err := timefmt.Check(*p); err != nil {
			return bad(attrNames[a], p.String(), fmt.Errorf("%w: %w", billing.ErrInvalidDate, err))
		}
		v[a] = timeVal(vNanos, *p)
	}
	if !s.LastRunDate.IsZero() {
		// Keep a legacy last_run_date byte for byte: conditional writes
		// compare it as a string.
		v[aLastRunDate] = lastRunDateVal(s.LastRunDate, st)
	}
	for _, a := range intAttrs {
		p, lo, hi := intField(s, a)
		if n := *p; n < lo || n > hi {
			return bad(attrNames[a], strconv.Itoa(n), fmt.Errorf("out of range %d..%d", lo, hi))
		} else if n != 0 {
			v[a] = val{kind: vN, n: int64(n)}
		}
	}
	if s.IsPendingDowngrade {
		v[aIsPendingDowngrade] = val{kind: vBool}
	}
	if s.NoRetry {
		v[aNoRetry] = val{kind: vBool}
	}
	if s.AfterTrial {
		v[aAfterTrial] = val{kind: vBool}
	}
	if field, value, cause := checkTax(s); cause != nil {
		return bad(field, value, cause)
	}
	if s.Tax.Fixed() {
		v[aTax] = val{kind: vAmount, n: int64(s.Tax.Amount)}
		v[aTaxDescription] = val{kind: vS, s: s.Tax.Description}
		if s.Tax.Inclusive {
			v[aTaxInclusive] = val{kind: vBool}
		}
	}
	if s.LastAttempt.Number != 0 {
		if s.LastAttempt.Amount < 0 {
			return bad(AttrAttemptAmount, s.LastAttempt.Amount.String(), billing.ErrInvalidAmount)
		}
		v[aAttemptAmount] = val{kind: vAmount, n: int64(s.LastAttempt.Amount)}
		str(aAttemptProcess, string(s.LastAttempt.Process))
	}
	if s.PendingTierName != "" {
		if s.PendingAmount < 0 {
			return bad(AttrPendingAmount, s.PendingAmount.String(), billing.ErrInvalidAmount)
		}
		v[aPendingAmount] = val{kind: vAmount, n: int64(s.PendingAmount)}
	}
	if !s.TrialEnd.IsZero() {
		if s.TrialAmount < 0 {
			return bad(AttrTrialAmount, s.TrialAmount.String(), billing.ErrInvalidAmount)
		}
		v[aTrialAmount] = val{kind: vAmount, n: int64(s.TrialAmount)}
	}
	if field, value, cause := checkAdjustments(s); cause != nil {
		return bad(field, value, cause)
	}
	if s.Balance != 0 {
		v[aBalance] = val{kind: vAmount, n: int64(s.Balance)}
	}
	if len(s.Adjustments) > 0 {
		text, err := encodeAdjustments(s.Adjustments)
		if err != nil {
			return bad(AttrAdjustments, "", err)
		}
		v[aAdjustments] = val{kind: vS, s: text}
	}
	if value, cause := checkDiscounts(s); cause != nil {
		return bad(AttrDiscounts, value, cause)
	}
	if len(s.Discounts) > 0 {
		text, err := encodeDiscounts(s.Discounts)
		if err != nil {
			return bad(AttrDiscounts, "", err)
		}
		v[aDiscounts] = val{kind: vS, s: text}
	}
	if value, cause := checkDunning(s); cause != nil {
		return bad(AttrDunning, value, cause)
	}
	if !dunningZero(&s.Dunning) {
		text, err := encodeDunning(&s.Dunning)
		if err != nil {
			return bad(AttrDunning, "", err)
		}
		v[aDunning] = val{kind: vS, s: text}
	}
	for name := range st.extra {
		if isKnown(name) || HistoryOnly(name) {
			return bad(name, "", errors.New("an Extra attribute shadows a known or data_ attribute"))
		}
	}
	f.extra = st.extra
	if withData {
		return encodeData(f, s)
	}
	return nil
}

// HistoryOnly reports whether the attribute called name is written to
// history rows only: billing_change, billing_request and the data_
// attributes.
func HistoryOnly(name string) bool {
	return name == AttrChange || name == AttrRequest || strings.HasPrefix(name, DataPrefix)
}

// encodeData checks and sets the data_ attributes of s on f.
func encodeData(f *Flat, s *billing.Period) error {
	data := storedOf(s).data
	for name := range data {
		if !strings.HasPrefix(name, DataPrefix) {
			return &billing.FieldError{Field: name, Key: s.Key(), Err: fmt.Errorf("%w: %w", billing.ErrInvalidItem, errors.New("a Data attribute lacks the data_ prefix"))}
		}
	}
	if s.Operator != "" || s.Reason != "" {
		// Written from the record's fields, over any value of the same
		// name the item was read with in another form.
		m := make(map[string]av.AttributeValue, len(data)+2)
		maps.Copy(m, data)
		if s.Operator != "" {
			m[AttrOperator] = &av.AttributeValueMemberS{Value: s.Operator}
		}
		if s.Reason != "" {
			m[AttrReason] = &av.AttributeValueMemberS{Value: s.Reason}
		}
		data = m
	}
	f.data = data
	f.change = string(s.Change)
	f.request = s.Request
	return nil
}

// DecodeItem decodes an item of billing-activity or billing-activity-history.
//
// It accepts every form existing items use: timestamps in any RFC3339 form
// (a zero "0001-01-01T00:00:00Z" reads as the zero time), NULL or empty
// strings for unset attributes, a missing term (MONTHLY), a missing
// billing_week. data_ attributes and unknown ones are kept in Stored (see
// [DataAttributes] and [ExtraAttributes]).
// user_id, billing_date, subscription_id, billing_status and billing_amount
// are required; billing_adjustments, billing_balance, billing_discounts,
// the tax attributes and billing_dunning must be what [EncodeItem] writes (a JSON array of at most 64 lines,
// amounts not negative; a JSON array of at most 8 discounts, each as
// EncodeItem checks it; a JSON object of a dunning, checked as EncodeItem
// checks it). Any error is a [*billing.FieldError] wrapping [billing.ErrInvalidItem] that
// names the attribute, its value and the item's key.
func DecodeItem(item map[string]av.AttributeValue) (billing.Period, error) {
	var s billing.Period
	st := &stored{}
	s.Stored = st
	bad := func(field, value string, cause error) error {
		fe := &billing.FieldError{Field: field, Value: value, Key: itemKey(item), Err: fmt.Errorf("%w: %w", billing.ErrInvalidItem, cause)}
		fe.BillingDate, fe.Status = readableKey(item)
		return fe
	}
	// The required attributes are checked before any other, from the
	// attributes the loop saw; only when one lacks (or an attribute is
	// bad) are they looked up again, in their order, for the error.
	seen, err := decodeAttrs(item, &s, st, bad)
	if err != nil || seen&requiredAttrs != requiredAttrs {
		for _, req := range [...]string{AttrUserID, AttrBillingDate, AttrSubscriptionID, AttrBillingStatus, AttrBillingAmount} {
			if v, ok := item[req]; !ok || isNull(v) {
				return billing.Period{}, bad(req, "", errors.New("missing"))
			}
		}
		return billing.Period{}, err
	}
	if s.SubscriptionID == "" {
		return billing.Period{}, bad(AttrSubscriptionID, "", errors.New("empty"))
	}
	if s.Term == "" {
		s.Term = billing.TermMonthly
	}
	if field, value, cause := checkAdjustments(&s); cause != nil {
		return billing.Period{}, bad(field, value, cause)
	}
	if value, cause := checkDiscounts(&s); cause != nil {
		return billing.Period{}, bad(AttrDiscounts, value, cause)
	}
	if field, value, cause := checkTaxRead(&s, seen); cause != nil {
		return billing.Period{}, bad(field, value, cause)
	}
	if value, cause := checkDunning(&s); cause != nil {
		return billing.Period{}, bad(AttrDunning, value, cause)
	}
	return s, nil
}

// requiredAttrs are the attributes DecodeItem requires.
const requiredAttrs = attrSet(1)<<aUserID | 1<<aBillingDate | 1<<aSubscriptionID | 1<<aBillingStatus | 1<<aBillingAmount

// decodeAttrs decodes item's attributes into s and st, and returns the
// known attributes it saw that are not NULL; it stops at the first bad
// attribute.
func decodeAttrs(item map[string]av.AttributeValue, s *billing.Period, st *stored, bad func(field, value string, cause error) error) (seen attrSet, err error) {
	for name, attrVal := range item {
		if strings.HasPrefix(name, DataPrefix) {
			// Who made a change and why, as strings: the record's fields.
			// Another form (another writer's) stays as read, in Stored.
			if v, ok := attrVal.(*av.AttributeValueMemberS); ok && v.Value != "" && (name == AttrOperator || name == AttrReason) {
				if name == AttrOperator {
					s.Operator = v.Value
				} else {
					s.Reason = v.Value
				}
				continue
			}
			if st.data == nil {
				st.data = map[string]av.AttributeValue{}
			}
			st.data[name] = attrVal
			continue
		}
		if name == AttrChange {
			// The change a history row records: never carried to another
			// item, so neither known nor extra.
			if v, ok := attrVal.(*av.AttributeValueMemberS); ok {
				s.Change = billing.EventType(v.Value)
			} else if !isNull(attrVal) {
				return seen, bad(name, "", errors.New("not a string"))
			}
			continue
		}
		if name == AttrRequest {
			// The request a history row records: as billing_change.
			if v, ok := attrVal.(*av.AttributeValueMemberS); ok {
				s.Request = v.Value
			} else if !isNull(attrVal) {
				return seen, bad(name, "", errors.New("not a string"))
			}
			continue
		}
		a, known := attrOf(name)
		if known && !isNull(attrVal) {
			seen |= 1 << a
		}
		if !known {
			if st.extra == nil {
				st.extra = map[string]av.AttributeValue{}
			}
			st.extra[name] = attrVal
			continue
		}
		if a == aIsPendingDowngrade || a == aNoRetry || a == aAfterTrial || a == aTaxInclusive {
			p := &s.IsPendingDowngrade
			switch a {
			case aNoRetry:
				p = &s.NoRetry
			case aAfterTrial:
				p = &s.AfterTrial
			case aTaxInclusive:
				p = &s.Tax.Inclusive
			}
			switch v := attrVal.(type) {
			case *av.AttributeValueMemberBOOL:
				*p = v.Value
			case *av.AttributeValueMemberNULL:
			default:
				return seen, bad(name, describe(attrVal), errors.New("want BOOL"))
			}
			continue
		}
		if p, lo, hi := intField(s, a); p != nil {
			raw, err := numberValue(attrVal)
			if err != nil {
				return seen, bad(name, describe(attrVal), err)
			}
			if raw == "" {
				continue
			}
			n, err := strconv.Atoi(raw)
			if err != nil || n < lo || n > hi {
				return seen, bad(name, raw, fmt.Errorf("want an integer in %d..%d", lo, hi))
			}
			*p = n
			continue
		}
		v, err := stringValue(attrVal)
		if err != nil {
			return seen, bad(name, describe(attrVal), err)
		}
		if p := stringField(s, a); p != nil {
			*p = v
			continue
		}
		if p := timeField(s, a); p != nil {
			if v == "" {
				continue
			}
			t, err := timefmt.Parse(v)
			if err != nil {
				return seen, bad(name, v, fmt.Errorf("%w: %w", billing.ErrInvalidDate, err))
			}
			if !t.Equal(time.Time{}) {
				*p = t
				if a == aLastRunDate {
					st.lastRunDate, st.lastRunDateAt = v, t
				}
			}
			continue
		}
		switch a {
		case aUserID:
			if v == "" {
				return seen, bad(name, v, errors.New("empty"))
			}
			s.UserID = v
		case aBillingDate:
			t, err := timefmt.Parse(v)
			if err != nil || t.IsZero() {
				return seen, bad(name, v, fmt.Errorf("%w: want an RFC3339 timestamp", billing.ErrInvalidDate))
			}
			s.BillingDate = t
			st.billingDate, st.billingDateAt = v, t
		case aAdjustments:
			if v == "" {
				continue
			}
			lines, err := decodeAdjustments(v)
			if err != nil {
				return seen, bad(name, v, err)
			}
			s.Adjustments = lines
		case aDiscounts:
			if v == "" {
				continue
			}
			discounts, err := decodeDiscounts(v)
			if err != nil {
				return seen, bad(name, v, err)
			}
			s.Discounts = discounts
		case aDunning:
			if v == "" {
				continue
			}
			d, err := decodeDunning(v)
			if err != nil {
				return seen, bad(name, v, err)
			}
			s.Dunning = d
		case aTaxDescription:
			s.Tax.Description = v
		case aBillingAmount, aPendingAmount, aAttemptAmount, aTrialAmount, aBalance, aTax:
			if v == "" && a != aBillingAmount {
				continue
			}
			amt, err := billing.ParseAmount(v)
			if err != nil {
				return seen, bad(name, v, err)
			}
			switch a {
			case aPendingAmount:
				s.PendingAmount = amt
			case aAttemptAmount:
				s.LastAttempt.Amount = amt
			case aTrialAmount:
				s.TrialAmount = amt
			case aBalance:
				s.Balance = amt
			case aTax:
				s.Tax.Amount = amt
			default:
				s.Amount = amt
			}
		case aAttemptProcess:
			s.LastAttempt.Process = billing.Process(v)
		case aBillingStatus:
			st := billing.Status(v)
			if !st.Storable() {
				return seen, bad(name, v, billing.ErrInvalidStatus)
			}
			s.Status = st
		case aTerm:
			t, err := billing.ParseTerm(v)
			if err != nil {
				return seen, bad(name, v, billing.ErrInvalidTerm)
			}
			s.Term = t
		case aProcess:
			s.Process = billing.Process(v)
		case aUpdatedEvent:
			s.UpdatedEvent = billing.UpdatedEvent(v)
		}
	}
	return seen, nil
}

func isNull(attrVal av.AttributeValue) bool {
	_, ok := attrVal.(*av.AttributeValueMemberNULL)
	return ok
}

// stringValue reads an S attribute; NULL reads as "".
func stringValue(attrVal av.AttributeValue) (string, error) {
	switch v := attrVal.(type) {
	case *av.AttributeValueMemberS:
		return v.Value, nil
	case *av.AttributeValueMemberNULL:
		return "", nil
	}
	return "", errors.New("want S")
}

// numberValue reads an N attribute; NULL reads as "".
func numberValue(attrVal av.AttributeValue) (string, error) {
	switch v := attrVal.(type) {
	case *av.AttributeValueMemberN:
		return v.Value, nil
	case *av.AttributeValueMemberNULL:
		return "", nil
	}
	return "", errors.New("want N")
}

// describe renders an attribute value of any type for an error message.
func describe(attrVal av.AttributeValue) string {
	switch v := attrVal.(type) {
	case *av.AttributeValueMemberS:
		return v.Value
	case *av.AttributeValueMemberN:
		return v.Value
	case *av.AttributeValueMemberBOOL:
		return strconv.FormatBool(v.Value)
	}
	return fmt.Sprintf("%T", attrVal)
}

// itemKey describes an item's key from its raw attributes, for errors about
// items that could not be decoded.
// readableKey returns item's billing date and status where they decode
// (zero and "" where not), for the error of an item that does not.
func readableKey(item map[string]av.AttributeValue) (time.Time, billing.Status) {
	var at time.Time
	var st billing.Status
	if v, ok := item[AttrBillingDate].(*av.AttributeValueMemberS); ok {
		at, _ = timefmt.Parse(v.Value)
	}
	if v, ok := item[AttrBillingStatus].(*av.AttributeValueMemberS); ok {
		st, _ = billing.ParseStatus(v.Value)
	}
	return at, st
}

func itemKey(item map[string]av.AttributeValue) string {
	get := func(n string) string {
		if v, ok := item[n].(*av.AttributeValueMemberS); ok {
			return v.Value
		}
		return "?"
	}
	k := "user_id=" + get(AttrUserID) + " billing_date=" + get(AttrBillingDate)
	if _, ok := item[AttrLastRunDate]; ok {
		k += " last_run_date=" + get(AttrLastRunDate)
	}
	return k
}

// stored is what DecodeItem keeps in Subscription.Stored: the attributes
// the record does not model and the key text exactly as read.
type stored struct {
	data, extra              map[string]av.AttributeValue
	billingDate, lastRunDate string
	// billingDateAt and lastRunDateAt are the instants the two texts
	// denote: encoding checks a record's times against them instead of
	// parsing or formatting the texts again.
	billingDateAt, lastRunDateAt time.Time
}

// String shows the stored part by value (not by address), so that records
// printed with %v compare by what they hold.
func (st *stored) String() string {
	return fmt.Sprintf("{data:%s extra:%s billing_date:%q last_run_date:%q}",
		compactItem(st.data), compactItem(st.extra), st.billingDate, st.lastRunDate)
}

// compactItem is item as one line of DynamoDB JSON.
func compactItem(item map[string]av.AttributeValue) string {
	data, err := ddbjson.MarshalItem(item)
	if err != nil {
		return err.Error()
	}
	var b bytes.Buffer
	if err := json.Compact(&b, data); err != nil {
		return err.Error()
	}
	return b.String()
}

// storedOf returns the stored part of s; a record not read by DecodeItem
// has an empty one.
func storedOf(s *billing.Period) *stored {
	if st, ok := s.Stored.(*stored); ok && st != nil {
		return st
	}
	return &noStored
}

// noStored is the stored part of a record not read by DecodeItem. It is
// never changed.
var noStored stored

// withStored sets a copy of s's stored part, changed by f, on s: the value
// in Stored may be shared with copies of s, so it is never changed in place.
func withStored(s *billing.Period, f func(*stored)) {
	st := *storedOf(s)
	f(&st)
	s.Stored = &st
}

// DataAttributes returns the data_ attributes of s, keyed by their full
// name: read with the item, or set with SetDataAttributes. They are written
// to the history table only. The map must not be changed.
func DataAttributes(s *billing.Period) map[string]av.AttributeValue { return storedOf(s).data }

// SetDataAttributes sets the data_ attributes s writes to its next history
// row.
func SetDataAttributes(s *billing.Period, m map[string]av.AttributeValue) {
	withStored(s, func(st *stored) { st.data = m })
}

// ExtraAttributes returns the attributes of the item s was read from that
// this library does not know, keyed by name, so that rewriting an item
// another service wrote never drops them. The map must not be changed.
func ExtraAttributes(s *billing.Period) map[string]av.AttributeValue {
	return storedOf(s).extra
}

// SetExtraAttributes sets the unknown attributes written with s.
func SetExtraAttributes(s *billing.Period, m map[string]av.AttributeValue) {
	withStored(s, func(st *stored) { st.extra = m })
}

// BillingDateKey returns billing_date exactly as it is (or will be) stored:
// whole seconds UTC, or the original string of a legacy item read with
// another form of the same instant (so a rewrite addresses the same item).
// It returns "" for a zero or unencodable BillingDate.
func BillingDateKey(s *billing.Period) string {
	if s.BillingDate.IsZero() {
		return ""
	}
	v, err := billingDateVal(s.BillingDate, storedOf(s))
	if err != nil {
		return ""
	}
	return v.text()
}

// billingDateVal is billing_date as stored for t: the text the record was
// read with while it denotes t, else t in whole seconds (which is that
// text too when it was read in that form and t is in the same second).
func billingDateVal(t time.Time, st *stored) (val, error) {
	if err := timefmt.Check(t); err != nil {
		return val{}, err
	}
	if st.billingDate != "" && st.billingDateAt.Equal(t) {
		return val{kind: vS, s: st.billingDate}, nil
	}
	return timeVal(vSeconds, t), nil
}

// LastRunDateKey returns last_run_date exactly as it is (or will be) stored:
// a fixed nine-digit fraction, or the original string of a legacy item read
// with another form of the same instant. Conditional writes compare this
// string. It returns "" when LastRunDate is zero.
func LastRunDateKey(s *billing.Period) string {
	if s.LastRunDate.IsZero() || timefmt.Check(s.LastRunDate) != nil {
		return ""
	}
	v := lastRunDateVal(s.LastRunDate, storedOf(s))
	return v.text()
}

// lastRunDateVal is last_run_date as stored for t, in range: the text the
// record was read with while it denotes t, else t with a nine-digit
// fraction.
func lastRunDateVal(t time.Time, st *stored) val {
	if st.lastRunDate != "" && st.lastRunDateAt.Equal(t) {
		return val{kind: vS, s: st.lastRunDate}
	}
	return timeVal(vNanos, t)
}

// text returns the text of an S or N value.
func (v *val) text() string {
	if v.kind == vS {
		return v.s
	}
	var b [64]byte
	return string(v.appendText(b[:0]))
}
