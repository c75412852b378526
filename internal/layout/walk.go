package layout

import (
	"fmt"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/entitlement"
	"github.com/dynabill/billing/internal/timefmt"
)

// cursorDay is the attribute of a single-table status cursor naming the
// day of the payment index the walk is at.
const CursorDay = "day"

// maxEmptyDays bounds the days of the payment index one status page walks
// without finding anything before it hands back a cursor.
const MaxEmptyDays = 62

// StatusWalk is how the single-table layout answers a status query: the
// days of the payment index (NextPaymentDate) it reads, and the
// billing_date keys of the periods it keeps (inclusive; "" and "~" are
// open ends).
type StatusWalk struct {
	First, Last time.Time // days (midnight UTC), inclusive
	Lo, Hi      string    // billing_date keys, inclusive
}

// SingleTableWalk returns the walk of q at now. A subscription sits at
// the day of its earliest open period, which is at most catchUpDays before
// today (runs close or advance older ones), so the walk starts catchUpDays
// before today, or earlier when the query's lower bound is (or, without
// one, when its upper bound is in the past: catchUpDays before that). It
// ends on the day of the query's upper bound, or the day after now when it
// has none. [dynamostore.SingleTableRepository] and its in-memory twin both use it.
func SingleTableWalk(q billing.StatusQuery, now time.Time, catchUpDays int) (StatusWalk, error) {
	var w StatusWalk
	if _, err := q.ShardsIn(1); err != nil {
		return w, err // the single table is one shard
	}
	upper := q.Before
	if upper.IsZero() {
		upper = entitlement.PaymentDate(now).AddDate(0, 0, 2)
	}
	w.Last = entitlement.PaymentDate(upper.Add(-time.Nanosecond))
	lower := q.Since
	if !q.After.IsZero() {
		lower = q.After.Truncate(time.Second).Add(time.Second)
	}
	w.First = entitlement.PaymentDate(now).AddDate(0, 0, -catchUpDays)
	if lower.IsZero() {
		if early := w.Last.AddDate(0, 0, -catchUpDays); early.Before(w.First) {
			w.First = early
		}
	} else if d := entitlement.PaymentDate(lower); d.Before(w.First) {
		w.First = d
	}
	w.Hi = "~"
	if !q.Before.IsZero() {
		hi, err := timefmt.Seconds(q.Before.Truncate(time.Second).Add(-time.Second))
		if err != nil {
			return w, fmt.Errorf("%w: before %v: %v", billing.ErrInvalidQuery, q.Before, err)
		}
		w.Hi = hi
	}
	if !lower.IsZero() {
		lo, err := timefmt.Seconds(lower)
		if err != nil {
			return w, fmt.Errorf("%w: since %v: %v", billing.ErrInvalidQuery, lower, err)
		}
		w.Lo = lo
	}
	if w.First.Year() < 1 || w.Last.Year() > 9999 {
		return w, fmt.Errorf("%w: range outside years 0001-9999", billing.ErrInvalidQuery)
	}
	return w, nil
}

// Keeps reports whether the walk keeps a period of billingDate found at
// the index day: in the query's range and not before that day (earlier
// periods of the subscription are closed).
func (w StatusWalk) Keeps(q billing.StatusQuery, day, billingDate time.Time) bool {
	return !billingDate.Before(day) && q.Matches(billingDate)
}

// Add puts a period item found at the index day on page: counted and kept
// when it decodes, is in the query's status and the walk keeps it; counted
// as invalid when it does not decode. It reports the decoding error, for
// the caller to log.
func (w StatusWalk) Add(page *billing.Page, q billing.StatusQuery, day time.Time, sub billing.Period, err error) error {
	switch {
	case err != nil:
		page.Invalid = append(page.Invalid, err)
		page.Count++
		return err
	case sub.Status == q.Status && w.Keeps(q, day, sub.BillingDate):
		page.Items = append(page.Items, sub)
		page.Count++
	}
	return nil
}
