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

// Sort-key and partition prefixes of the engine's items in the single table.
const (
	// SKPeriodPrefix starts a billing period's sort key:
	// "PER#<subscriptionID>#SKU#<sku>#<billing_date>".
	SKPeriodPrefix = "PER#"
	// SKHistoryPrefix starts a history row's sort key:
	// "HIST#<subscriptionID>#SKU#<sku>#<last_run_date>".
	SKHistoryPrefix = "HIST#"
	// PeriodIDPrefix starts the partition of a period's ID pointer:
	// PK "PERIODID#<subscription_id of the period>", SK the engine user ID
	// ([SubscriptionRef.UserID]). It answers GetByID and
	// ListBySubscription without a third index.
	PeriodIDPrefix = "PERIODID#"
	// DefaultCatchUpDays is how many days before a status query's range
	// the due-date walk starts (see [dynamostore.SingleTableRepository.QueryStatus]).
	DefaultCatchUpDays = 45
)

// Attribute names the engine adds to the single table's items.
const (
	// AttrOpenPeriods is a map on a subscription item from the billing_date
	// of each of its periods a run may still act on (SCHEDULED, ERROR,
	// PAUSED) to that period's status.
	AttrOpenPeriods = "OpenPeriods"
	EntityPeriod    = "Period"
	EntityHistory   = "History"
	EntityPeriodID  = "PeriodID"
)

// SubscriptionRef names one subscription of an account in the single
// table: the item PK=<prefix><AccountID>, SK=SUB#<SubscriptionID>#SKU#<SKU>.
// The collection engine sees each subscription as one "user": its
// [billing.Period.UserID] is [SubscriptionRef.UserID], so locks, keys and
// runs are per subscription, and an account may hold several SKUs.
type SubscriptionRef struct {
	AccountID      string
	SubscriptionID string // no '#'
	SKU            string // no '#'
}

// UserID is the engine user ID of the subscription:
// "<AccountID>#<SubscriptionID>#<SKU>".
func (r SubscriptionRef) UserID() string {
	return r.AccountID + "#" + r.SubscriptionID + "#" + r.SKU
}

// SK is the sort key of the subscription item.
func (r SubscriptionRef) SK() string { return RecurringSK(r.SubscriptionID, r.SKU) }

// ParseSubscriptionRef splits an engine user ID made by
// [SubscriptionRef.UserID]. The account ID may contain '#'; the
// subscription ID and SKU may not. A malformed ID is a [*billing.FieldError]
// wrapping [entitlement.ErrInvalidPayment].
func ParseSubscriptionRef(userID string) (SubscriptionRef, error) {
	i := strings.LastIndexByte(userID, '#')
	if i < 0 {
		return SubscriptionRef{}, PayInvalid("user_id", userID, "not <account>#<subscription>#<sku>")
	}
	j := strings.LastIndexByte(userID[:i], '#')
	if j < 0 {
		return SubscriptionRef{}, PayInvalid("user_id", userID, "not <account>#<subscription>#<sku>")
	}
	r := SubscriptionRef{AccountID: userID[:j], SubscriptionID: userID[j+1 : i], SKU: userID[i+1:]}
	if err := CheckPaymentKey(r.AccountID, r.SubscriptionID, r.SKU); err != nil {
		return SubscriptionRef{}, &billing.FieldError{Field: "user_id", Value: userID, Err: fmt.Errorf("%w: %w", entitlement.ErrInvalidPayment, err)}
	}
	return r, nil
}

// PeriodOpen reports whether a run may still act on a period in status st:
// SCHEDULED (the scheduled run), ERROR and ACHSENT (the retry run, which
// gives up on an ACH debit past its settlement deadline) and PAUSED (the
// pause run). Only open periods keep their subscription in the due-date
// indexes: an ACH debit awaiting settlement keeps its subscription at the
// debit's day until it settles, is returned or is given up on.
func PeriodOpen(st billing.Status) bool {
	return st == billing.StatusScheduled || st == billing.StatusError || st == billing.StatusACHSent || st == billing.StatusPaused
}

// OpenPeriods is the [AttrOpenPeriods] map of a subscription item: the
// billing_date (as stored, [billing.Period.BillingDateKey]) of each open
// period and its status.
type OpenPeriods map[string]billing.Status

// Record notes sub's status: kept when open, dropped otherwise.
func (o OpenPeriods) Record(sub *billing.Period) {
	if PeriodOpen(sub.Status) {
		o[BillingDateKey(sub)] = sub.Status
		return
	}
	delete(o, BillingDateKey(sub))
}

// Due returns the subscription item's due dates for the open periods:
// NextPaymentDate is the day of the earliest open period (the first day a
// run acts on the subscription; an overdue period keeps it there until it
// is handled), NextReminderDate is leadDays before the day of the
// earliest SCHEDULED period. A zero date means "not due": the attribute
// is removed and the item leaves that index.
func (o OpenPeriods) Due(leadDays int) (nextPayment, nextReminder time.Time) {
	for k, st := range o {
		t, err := timefmt.Parse(k)
		if err != nil {
			continue
		}
		d := entitlement.PaymentDate(t)
		if nextPayment.IsZero() || d.Before(nextPayment) {
			nextPayment = d
		}
		if st == billing.StatusScheduled {
			if r := d.AddDate(0, 0, -leadDays); nextReminder.IsZero() || r.Before(nextReminder) {
				nextReminder = r
			}
		}
	}
	return nextPayment, nextReminder
}

func (o OpenPeriods) AttributeValue() av.AttributeValue {
	m := make(map[string]av.AttributeValue, len(o))
	for k, st := range o {
		m[k] = StringAV(string(st))
	}
	return &av.AttributeValueMemberM{Value: m}
}

func DecodeOpenPeriods(attrVal av.AttributeValue) OpenPeriods {
	o := OpenPeriods{}
	if m, ok := attrVal.(*av.AttributeValueMemberM); ok {
		for k, v := range m.Value {
			o[k] = billing.Status(StringOf(v))
		}
	}
	return o
}

// PeriodReceipt returns the receipt an update of a period from prev to
// next creates: one when next completes the period (ok false otherwise, and
// for records added already complete, prev nil: imports are not
// payments). ProcessedDate is next's CompletionDate (LastRunDate when it
// has none), the amount next's Amount.
func PeriodReceipt(ref SubscriptionRef, prev, next *billing.Period) (entitlement.Receipt, bool) {
	if prev == nil || next.Status != billing.StatusCompleted || prev.Status == billing.StatusCompleted {
		return entitlement.Receipt{}, false
	}
	at := next.CompletionDate
	if at.IsZero() {
		at = next.LastRunDate
	}
	return entitlement.Receipt{
		AccountID: ref.AccountID, SubscriptionID: ref.SubscriptionID, SKU: ref.SKU,
		ProcessedDate: at, ProcessedAmount: next.Amount, TransactionID: next.TransactionID,
	}, true
}

// EngineSubscription returns the subscription item a set of period writes
// leaves: cur as stored (exists false when there is none yet, then it is
// created from the first written period), open its open periods after the
// writes, written the periods written. It sets the due dates from open
// ([OpenPeriods.Due]), the amount and payment day of the latest open
// period written (anchor days 29 to 31 are stored as PaymentDay 28, the
// last day every month has; the periods keep the exact anchor), LastPaymentDate to the latest completion written,
// UpdatedAt to now and the version one up. Email and PaymentDetails,
// which the engine's records do not carry, are kept.
func EngineSubscription(ref SubscriptionRef, cur entitlement.RecurringSubscription, exists bool, open OpenPeriods, written []*billing.Period, now time.Time, leadDays int) entitlement.RecurringSubscription {
	next := cur
	next.AccountID, next.SubscriptionID, next.SKU = ref.AccountID, ref.SubscriptionID, ref.SKU
	now = now.UTC().Truncate(time.Second)
	if !exists {
		next = entitlement.RecurringSubscription{AccountID: ref.AccountID, SubscriptionID: ref.SubscriptionID, SKU: ref.SKU, CreatedAt: now}
	}
	for _, w := range written {
		if PeriodOpen(w.Status) || next.PaymentDay == 0 {
			next.PaymentAmount = w.Amount
			next.PaymentDay = min(w.EffectiveAnchorDay(), MaxPaymentDay)
		}
		if w.Status == billing.StatusCompleted {
			at := w.CompletionDate
			if at.IsZero() {
				at = w.LastRunDate
			}
			if d := entitlement.PaymentDate(at); d.After(next.LastPaymentDate) {
				next.LastPaymentDate = d
			}
		}
	}
	next.NextPaymentDate, next.NextReminderDate = open.Due(leadDays)
	next.UpdatedAt, next.Version = now, cur.Version+1
	if !exists {
		next.Version = 1
	}
	return next
}

// IsPeriodKey reports whether pk and sk are the keys of a period item of
// the engine: an account partition and a "PER#" sort key.
func (c SingleTableConfig) IsPeriodKey(pk, sk string) bool {
	return strings.HasPrefix(pk, c.AccountPrefix) && strings.HasPrefix(sk, SKPeriodPrefix)
}

// periodSK and historySK are the sort keys of a period and a history row.
func PeriodSK(ref SubscriptionRef, billingDateKey string) string {
	return SKPeriodPrefix + ref.SubscriptionID + "#SKU#" + ref.SKU + "#" + billingDateKey
}

func HistorySK(ref SubscriptionRef, lastRunDateKey string) string {
	return SKHistoryPrefix + ref.SubscriptionID + "#SKU#" + ref.SKU + "#" + lastRunDateKey
}

// engineRef parses the UserID of a record to be stored in the single table.
func EngineRef(sub *billing.Period) (SubscriptionRef, error) {
	ref, err := ParseSubscriptionRef(sub.UserID)
	if err != nil {
		return ref, fmt.Errorf("billing: single table: record %s: %w", sub.Key(), err)
	}
	return ref, nil
}

// maxAddAllGroup is how many records of one subscription AddAll writes in
// one transaction (four actions each at most, plus the subscription item).
const maxAddAllGroup = 8

// SingleTableGroups returns how [dynamostore.SingleTableRepository.AddAll] writes
// records (after the collision policy): groups of indexes into recs, each
// up to 8 records of one subscription, written by one transaction. Every
// record must be storable with a [SubscriptionRef] user ID, else the error
// names the first that is not.
func SingleTableGroups(recs []billing.Period) ([][]int, error) {
	var groups [][]int
	open := map[string]int{}
	for i := range recs {
		if _, err := EncodeHistoryItem(&recs[i]); err != nil {
			return nil, err
		}
		if _, err := EngineRef(&recs[i]); err != nil {
			return nil, err
		}
		u := recs[i].UserID
		g, ok := open[u]
		if !ok || len(groups[g]) == maxAddAllGroup {
			g = len(groups)
			groups = append(groups, nil)
			open[u] = g
		}
		groups[g] = append(groups[g], i)
	}
	return groups, nil
}
