package layout

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
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
	// The in-flight attempt ([billing.Subscription.LastAttempt]) is added by this
	// library; optional on read.
	AttrAttemptNumber  = "billing_attempt_number"
	AttrAttemptKey     = "billing_attempt_key"
	AttrAttemptAmount  = "billing_attempt_amount"
	AttrAttemptTier    = "billing_attempt_tier"
	AttrAttemptProcess = "billing_attempt_process"
	AttrAttemptStarted = "billing_attempt_started"

	// DataPrefix starts the attributes kept only in the history table.
	DataPrefix = "data_"
)

// stringFields maps the plain string attributes to their fields.
func stringFields(s *billing.Subscription) map[string]*string {
	return map[string]*string{
		AttrSubscriptionID:     &s.SubscriptionID,
		AttrBillingPeriod:      &s.BillingPeriod,
		AttrTransactionID:      &s.TransactionID,
		AttrPaymentError:       &s.PaymentError,
		AttrReceiptAccountMask: &s.ReceiptAccountMask,
		AttrReceiptTierName:    &s.ReceiptTierName,
		AttrReceiptPaymentType: &s.ReceiptPaymentType,
		AttrPendingTier:        &s.PendingTierName,
		AttrAttemptKey:         &s.LastAttempt.Key,
		AttrAttemptTier:        &s.LastAttempt.Tier,
	}
}

// runTimes maps the timestamps written with a nine-digit fraction.
func runTimes(s *billing.Subscription) map[string]*time.Time {
	return map[string]*time.Time{
		AttrInitialRunDate: &s.InitialRunDate,
		AttrCompletionDate: &s.CompletionDate,
		AttrLastRunDate:    &s.LastRunDate,
		AttrCreatedDate:    &s.CreatedDate,
		AttrAttemptStarted: &s.LastAttempt.Started,
	}
}

// intFields maps the optional numbers to their fields and inclusive bounds.
func intFields(s *billing.Subscription) map[string]struct {
	p        *int
	min, max int
} {
	type f = struct {
		p        *int
		min, max int
	}
	return map[string]f{
		AttrBillingWeek:         {&s.BillingWeek, 0, 5},
		AttrPauseDurationMonths: {&s.PauseDurationMonths, 0, 1200},
		AttrAnchorDay:           {&s.AnchorDay, 0, 31},
		AttrInterval:            {&s.Interval, 0, billing.MaxInterval},
		AttrAttempt:             {&s.Attempt, 0, 1 << 30},
		AttrAttemptNumber:       {&s.LastAttempt.Number, 0, 1 << 30},
	}
}

func isKnown(name string) bool {
	var s billing.Subscription
	if _, ok := stringFields(&s)[name]; ok {
		return true
	}
	if _, ok := runTimes(&s)[name]; ok {
		return true
	}
	if _, ok := intFields(&s)[name]; ok {
		return true
	}
	switch name {
	case AttrUserID, AttrBillingDate, AttrBillingAmount, AttrBillingStatus,
		AttrProcess, AttrUpdatedEvent, AttrTerm, AttrIsPendingDowngrade,
		AttrNoRetry, AttrPendingAmount, AttrAttemptAmount, AttrAttemptProcess:
		return true
	}
	return false
}

// EncodeItem encodes s as a billing-activity item: the wire contract of the
// legacy table. data_ attributes are left out (they belong to history, see
// [EncodeHistoryItem]).
//
// Encoding rules: billing_date in whole seconds UTC
// ("2006-01-02T15:04:05Z", any fraction truncated); the other timestamps with
// a fixed nine-digit fraction, omitted when zero; billing_amount as a string
// ("4.99"); term always written (MONTHLY when empty); empty strings, a zero
// billing_week, pause_duration_months, billing_anchor_day, billing_interval and
// billing_attempt, and a false is_pending_downgrade are omitted; Extra
// attributes are written back unchanged. A record decoded from an item keeps
// that item's billing_date and last_run_date strings while they denote the
// same instants, so a legacy key is addressed byte for byte.
//
// A record that cannot be stored (no user, subscription ID or billing date,
// the INACTIVE status, out-of-range numbers) is an error naming the field.
func EncodeItem(s *billing.Subscription) (map[string]types.AttributeValue, error) {
	return encode(s, false)
}

// EncodeHistoryItem encodes s as a billing-activity-history item: the same
// attributes as [EncodeItem] plus the data_ attributes. Its key is user_id
// and last_run_date, so LastRunDate must be set.
func EncodeHistoryItem(s *billing.Subscription) (map[string]types.AttributeValue, error) {
	if s.LastRunDate.IsZero() {
		return nil, &billing.FieldError{Field: AttrLastRunDate, Key: s.Key(), Err: fmt.Errorf("%w: history rows need last_run_date", billing.ErrInvalidItem)}
	}
	return encode(s, true)
}

func encode(s *billing.Subscription, withData bool) (map[string]types.AttributeValue, error) {
	bad := func(field, value string, cause error) error {
		return &billing.FieldError{Field: field, Value: value, Key: s.Key(), Err: fmt.Errorf("%w: %w", billing.ErrInvalidItem, cause)}
	}
	if s.UserID == "" {
		return nil, bad(AttrUserID, "", errors.New("empty"))
	}
	if s.BillingDate.IsZero() {
		return nil, bad(AttrBillingDate, "", errors.New("zero time"))
	}
	if s.SubscriptionID == "" {
		return nil, bad(AttrSubscriptionID, "", errors.New("empty"))
	}
	if !s.Status.Storable() {
		return nil, bad(AttrBillingStatus, string(s.Status), billing.ErrInvalidStatus)
	}
	if s.Amount < 0 {
		return nil, bad(AttrBillingAmount, s.Amount.String(), billing.ErrInvalidAmount)
	}
	term, err := billing.ParseTerm(string(s.Term))
	if err != nil {
		return nil, bad(AttrTerm, string(s.Term), billing.ErrInvalidTerm)
	}

	item := make(map[string]types.AttributeValue, 24)
	str := func(name, v string) {
		if v != "" {
			item[name] = &types.AttributeValueMemberS{Value: v}
		}
	}
	bd, err := billingDateKey(s)
	if err != nil {
		return nil, bad(AttrBillingDate, s.BillingDate.String(), fmt.Errorf("%w: %w", billing.ErrInvalidDate, err))
	}
	item[AttrUserID] = &types.AttributeValueMemberS{Value: s.UserID}
	item[AttrBillingDate] = &types.AttributeValueMemberS{Value: bd}
	item[AttrBillingAmount] = &types.AttributeValueMemberS{Value: s.Amount.String()}
	item[AttrBillingStatus] = &types.AttributeValueMemberS{Value: string(s.Status)}
	item[AttrTerm] = &types.AttributeValueMemberS{Value: string(term)}
	for name, p := range stringFields(s) {
		str(name, *p)
	}
	str(AttrProcess, string(s.Process))
	str(AttrUpdatedEvent, string(s.UpdatedEvent))
	for name, p := range runTimes(s) {
		if p.IsZero() {
			continue
		}
		v, err := timefmt.Nanos(*p)
		if err != nil {
			return nil, bad(name, p.String(), fmt.Errorf("%w: %w", billing.ErrInvalidDate, err))
		}
		item[name] = &types.AttributeValueMemberS{Value: v}
	}
	if lr := LastRunDateKey(s); lr != "" {
		// Keep a legacy last_run_date byte for byte: conditional writes
		// compare it as a string.
		item[AttrLastRunDate] = &types.AttributeValueMemberS{Value: lr}
	}
	for name, f := range intFields(s) {
		v := *f.p
		if v < f.min || v > f.max {
			return nil, bad(name, strconv.Itoa(v), fmt.Errorf("out of range %d..%d", f.min, f.max))
		}
		if v != 0 {
			item[name] = &types.AttributeValueMemberN{Value: strconv.Itoa(v)}
		}
	}
	if s.IsPendingDowngrade {
		item[AttrIsPendingDowngrade] = &types.AttributeValueMemberBOOL{Value: true}
	}
	if s.NoRetry {
		item[AttrNoRetry] = &types.AttributeValueMemberBOOL{Value: true}
	}
	if s.LastAttempt.Number != 0 {
		if s.LastAttempt.Amount < 0 {
			return nil, bad(AttrAttemptAmount, s.LastAttempt.Amount.String(), billing.ErrInvalidAmount)
		}
		item[AttrAttemptAmount] = &types.AttributeValueMemberS{Value: s.LastAttempt.Amount.String()}
		str(AttrAttemptProcess, string(s.LastAttempt.Process))
	}
	if s.PendingTierName != "" {
		if s.PendingAmount < 0 {
			return nil, bad(AttrPendingAmount, s.PendingAmount.String(), billing.ErrInvalidAmount)
		}
		item[AttrPendingAmount] = &types.AttributeValueMemberS{Value: s.PendingAmount.String()}
	}
	for name, v := range storedOf(s).extra {
		if isKnown(name) || strings.HasPrefix(name, DataPrefix) {
			return nil, bad(name, "", errors.New("an Extra attribute shadows a known or data_ attribute"))
		}
		item[name] = v
	}
	if withData {
		for name, v := range storedOf(s).data {
			if !strings.HasPrefix(name, DataPrefix) {
				return nil, bad(name, "", errors.New("a Data attribute lacks the data_ prefix"))
			}
			item[name] = v
		}
	}
	return item, nil
}

// DecodeItem decodes an item of billing-activity or billing-activity-history.
//
// It accepts every form existing items use: timestamps in any RFC3339 form
// (a zero "0001-01-01T00:00:00Z" reads as the zero time), NULL or empty
// strings for unset attributes, a missing term (MONTHLY), a missing
// billing_week. data_ attributes and unknown ones are kept in Stored (see
// [DataAttributes] and [ExtraAttributes]).
// user_id, billing_date, subscription_id, billing_status and billing_amount
// are required. Any error is a [*billing.FieldError] wrapping [billing.ErrInvalidItem] that
// names the attribute, its value and the item's key.
func DecodeItem(item map[string]types.AttributeValue) (billing.Subscription, error) {
	var s billing.Subscription
	st := &stored{}
	s.Stored = st
	key := itemKey(item)
	bad := func(field, value string, cause error) error {
		return &billing.FieldError{Field: field, Value: value, Key: key, Err: fmt.Errorf("%w: %w", billing.ErrInvalidItem, cause)}
	}
	for _, req := range []string{AttrUserID, AttrBillingDate, AttrSubscriptionID, AttrBillingStatus, AttrBillingAmount} {
		if v, ok := item[req]; !ok || isNull(v) {
			return billing.Subscription{}, bad(req, "", errors.New("missing"))
		}
	}
	strs := stringFields(&s)
	times := runTimes(&s)
	ints := intFields(&s)
	for name, av := range item {
		if strings.HasPrefix(name, DataPrefix) {
			if st.data == nil {
				st.data = map[string]types.AttributeValue{}
			}
			st.data[name] = av
			continue
		}
		if !isKnown(name) {
			if st.extra == nil {
				st.extra = map[string]types.AttributeValue{}
			}
			st.extra[name] = av
			continue
		}
		if name == AttrIsPendingDowngrade || name == AttrNoRetry {
			p := &s.IsPendingDowngrade
			if name == AttrNoRetry {
				p = &s.NoRetry
			}
			switch v := av.(type) {
			case *types.AttributeValueMemberBOOL:
				*p = v.Value
			case *types.AttributeValueMemberNULL:
			default:
				return billing.Subscription{}, bad(name, describe(av), errors.New("want BOOL"))
			}
			continue
		}
		if f, ok := ints[name]; ok {
			raw, err := numberValue(av)
			if err != nil {
				return billing.Subscription{}, bad(name, describe(av), err)
			}
			if raw == "" {
				continue
			}
			n, err := strconv.Atoi(raw)
			if err != nil || n < f.min || n > f.max {
				return billing.Subscription{}, bad(name, raw, fmt.Errorf("want an integer in %d..%d", f.min, f.max))
			}
			*f.p = n
			continue
		}
		v, err := stringValue(av)
		if err != nil {
			return billing.Subscription{}, bad(name, describe(av), err)
		}
		if p, ok := strs[name]; ok {
			*p = v
			continue
		}
		if p, ok := times[name]; ok {
			if v == "" {
				continue
			}
			t, err := timefmt.Parse(v)
			if err != nil {
				return billing.Subscription{}, bad(name, v, fmt.Errorf("%w: %w", billing.ErrInvalidDate, err))
			}
			if !t.Equal(time.Time{}) {
				*p = t
				if name == AttrLastRunDate {
					st.lastRunDate = v
				}
			}
			continue
		}
		switch name {
		case AttrUserID:
			if v == "" {
				return billing.Subscription{}, bad(name, v, errors.New("empty"))
			}
			s.UserID = v
		case AttrBillingDate:
			t, err := timefmt.Parse(v)
			if err != nil || t.IsZero() {
				return billing.Subscription{}, bad(name, v, fmt.Errorf("%w: want an RFC3339 timestamp", billing.ErrInvalidDate))
			}
			s.BillingDate = t
			st.billingDate = v
		case AttrBillingAmount, AttrPendingAmount, AttrAttemptAmount:
			if v == "" && name != AttrBillingAmount {
				continue
			}
			a, err := billing.ParseAmount(v)
			if err != nil {
				return billing.Subscription{}, bad(name, v, err)
			}
			switch name {
			case AttrPendingAmount:
				s.PendingAmount = a
			case AttrAttemptAmount:
				s.LastAttempt.Amount = a
			default:
				s.Amount = a
			}
		case AttrAttemptProcess:
			s.LastAttempt.Process = billing.Process(v)
		case AttrBillingStatus:
			st := billing.Status(v)
			if !st.Storable() {
				return billing.Subscription{}, bad(name, v, billing.ErrInvalidStatus)
			}
			s.Status = st
		case AttrTerm:
			t, err := billing.ParseTerm(v)
			if err != nil {
				return billing.Subscription{}, bad(name, v, billing.ErrInvalidTerm)
			}
			s.Term = t
		case AttrProcess:
			s.Process = billing.Process(v)
		case AttrUpdatedEvent:
			s.UpdatedEvent = billing.UpdatedEvent(v)
		}
	}
	if s.SubscriptionID == "" {
		return billing.Subscription{}, bad(AttrSubscriptionID, "", errors.New("empty"))
	}
	if s.Term == "" {
		s.Term = billing.TermMonthly
	}
	return s, nil
}

func isNull(av types.AttributeValue) bool {
	_, ok := av.(*types.AttributeValueMemberNULL)
	return ok
}

// stringValue reads an S attribute; NULL reads as "".
func stringValue(av types.AttributeValue) (string, error) {
	switch v := av.(type) {
	case *types.AttributeValueMemberS:
		return v.Value, nil
	case *types.AttributeValueMemberNULL:
		return "", nil
	}
	return "", errors.New("want S")
}

// numberValue reads an N attribute; NULL reads as "".
func numberValue(av types.AttributeValue) (string, error) {
	switch v := av.(type) {
	case *types.AttributeValueMemberN:
		return v.Value, nil
	case *types.AttributeValueMemberNULL:
		return "", nil
	}
	return "", errors.New("want N")
}

// describe renders an attribute value of any type for an error message.
func describe(av types.AttributeValue) string {
	switch v := av.(type) {
	case *types.AttributeValueMemberS:
		return v.Value
	case *types.AttributeValueMemberN:
		return v.Value
	case *types.AttributeValueMemberBOOL:
		return strconv.FormatBool(v.Value)
	}
	return fmt.Sprintf("%T", av)
}

// itemKey describes an item's key from its raw attributes, for errors about
// items that could not be decoded.
func itemKey(item map[string]types.AttributeValue) string {
	get := func(n string) string {
		if v, ok := item[n].(*types.AttributeValueMemberS); ok {
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
	data, extra              map[string]types.AttributeValue
	billingDate, lastRunDate string
}

// String shows the stored part by value (not by address), so that records
// printed with %v compare by what they hold.
func (st *stored) String() string {
	return fmt.Sprintf("{data:%s extra:%s billing_date:%q last_run_date:%q}",
		compactItem(st.data), compactItem(st.extra), st.billingDate, st.lastRunDate)
}

// compactItem is item as one line of DynamoDB JSON.
func compactItem(item map[string]types.AttributeValue) string {
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
func storedOf(s *billing.Subscription) *stored {
	if st, ok := s.Stored.(*stored); ok && st != nil {
		return st
	}
	return &stored{}
}

// withStored sets a copy of s's stored part, changed by f, on s: the value
// in Stored may be shared with copies of s, so it is never changed in place.
func withStored(s *billing.Subscription, f func(*stored)) {
	st := *storedOf(s)
	f(&st)
	s.Stored = &st
}

// DataAttributes returns the data_ attributes of s, keyed by their full
// name: read with the item, or set with SetDataAttributes. They are written
// to the history table only. The map must not be changed.
func DataAttributes(s *billing.Subscription) map[string]types.AttributeValue { return storedOf(s).data }

// SetDataAttributes sets the data_ attributes s writes to its next history
// row.
func SetDataAttributes(s *billing.Subscription, m map[string]types.AttributeValue) {
	withStored(s, func(st *stored) { st.data = m })
}

// ExtraAttributes returns the attributes of the item s was read from that
// this library does not know, keyed by name, so that rewriting an item
// another service wrote never drops them. The map must not be changed.
func ExtraAttributes(s *billing.Subscription) map[string]types.AttributeValue {
	return storedOf(s).extra
}

// SetExtraAttributes sets the unknown attributes written with s.
func SetExtraAttributes(s *billing.Subscription, m map[string]types.AttributeValue) {
	withStored(s, func(st *stored) { st.extra = m })
}

// BillingDateKey returns billing_date exactly as it is (or will be) stored:
// whole seconds UTC, or the original string of a legacy item read with
// another form of the same instant (so a rewrite addresses the same item).
// It returns "" for a zero or unencodable BillingDate.
func BillingDateKey(s *billing.Subscription) string {
	k, _ := billingDateKey(s)
	return k
}

func billingDateKey(s *billing.Subscription) (string, error) {
	bd, err := timefmt.Seconds(s.BillingDate)
	if err != nil || s.BillingDate.IsZero() {
		return "", err
	}
	if raw := storedOf(s).billingDate; raw != "" && raw != bd {
		if t, perr := timefmt.Parse(raw); perr == nil && t.Equal(s.BillingDate) {
			return raw, nil
		}
	}
	return bd, nil
}

// LastRunDateKey returns last_run_date exactly as it is (or will be) stored:
// a fixed nine-digit fraction, or the original string of a legacy item read
// with another form of the same instant. Conditional writes compare this
// string. It returns "" when LastRunDate is zero.
func LastRunDateKey(s *billing.Subscription) string {
	if s.LastRunDate.IsZero() {
		return ""
	}
	n, err := timefmt.Nanos(s.LastRunDate)
	if err != nil {
		return ""
	}
	if raw := storedOf(s).lastRunDate; raw != "" && raw != n {
		if t, perr := timefmt.Parse(raw); perr == nil && t.Equal(s.LastRunDate) {
			return raw
		}
	}
	return n
}
