package billing

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynabill/billing/internal/cursor"
	"github.com/dynabill/billing/internal/timefmt"
)

// cursorDay is the attribute of a single-table status cursor naming the
// day of the payment index the walk is at.
const cursorDay = "day"

// maxEmptyDays bounds the days of the payment index one status page walks
// without finding anything before it hands back a cursor.
const maxEmptyDays = 62

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
// has none. [SingleTableRepository] and its in-memory twin both use it.
func SingleTableWalk(q StatusQuery, now time.Time, catchUpDays int) (StatusWalk, error) {
	var w StatusWalk
	upper := q.Before
	if upper.IsZero() {
		upper = PaymentDate(now).AddDate(0, 0, 2)
	}
	w.Last = PaymentDate(upper.Add(-time.Nanosecond))
	lower := q.Since
	if !q.After.IsZero() {
		lower = q.After.Truncate(time.Second).Add(time.Second)
	}
	w.First = PaymentDate(now).AddDate(0, 0, -catchUpDays)
	if lower.IsZero() {
		if early := w.Last.AddDate(0, 0, -catchUpDays); early.Before(w.First) {
			w.First = early
		}
	} else if d := PaymentDate(lower); d.Before(w.First) {
		w.First = d
	}
	w.Hi = "~"
	if !q.Before.IsZero() {
		hi, err := timefmt.Seconds(q.Before.Truncate(time.Second).Add(-time.Second))
		if err != nil {
			return w, fmt.Errorf("%w: before %v: %v", ErrInvalidQuery, q.Before, err)
		}
		w.Hi = hi
	}
	if !lower.IsZero() {
		lo, err := timefmt.Seconds(lower)
		if err != nil {
			return w, fmt.Errorf("%w: since %v: %v", ErrInvalidQuery, lower, err)
		}
		w.Lo = lo
	}
	if w.First.Year() < 1 || w.Last.Year() > 9999 {
		return w, fmt.Errorf("%w: range outside years 0001-9999", ErrInvalidQuery)
	}
	return w, nil
}

// Keeps reports whether the walk keeps a period of billingDate found at
// the index day: in the query's range and not before that day (earlier
// periods of the subscription are closed).
func (w StatusWalk) Keeps(q StatusQuery, day, billingDate time.Time) bool {
	return !billingDate.Before(day) && q.Matches(billingDate)
}

func (r *SingleTableRepository) statusScope(q StatusQuery, w StatusWalk) string {
	return fmt.Sprintf("single/%s/%s/%s/%s/%s", r.cfg.Table.Table, r.cfg.Table.PaymentIndex, q.Status, w.Lo, w.Hi)
}

// QueryStatus implements [Repository.QueryStatus] on the payment index
// (NextPaymentDate): it walks the index's days from CatchUpDays before
// today (or the query's start, when earlier) to the query's end (see
// [SingleTableWalk]); each
// subscription found there (it sits at the day of its earliest open
// period) is expanded with a consistent query of its periods in the
// range, and the periods in the query's status are returned. A page reads
// up to Limit index items; it also ends after a day that returned
// something, or after many empty days, with a cursor to go on. Scanned
// counts index items and periods read.
//
// A subscription can be reached from two days of one walk when its
// earliest open period is handled during the walk: its later periods may
// then be returned twice. The collector re-reads every record under the
// user's lock, so a repeat is "not eligible", never a second charge.
func (r *SingleTableRepository) QueryStatus(ctx context.Context, q StatusQuery) (Page, error) {
	if err := q.Validate(); err != nil {
		return Page{}, err
	}
	w, err := SingleTableWalk(q, r.cfg.Clock.Now(), r.cfg.CatchUpDays)
	if err != nil {
		return Page{}, err
	}
	scope := r.statusScope(q, w)
	day, start, err := r.decodeStatusCursor(scope, q.Cursor, w)
	if err != nil {
		return Page{}, err
	}
	limit := q.Limit
	if limit == 0 {
		limit = r.cfg.PageSize
	}
	var page Page
	read, empty := 0, 0
	for !day.After(w.Last) {
		d := PaymentDayKey(day)
		expr := keyEquals(AttrNextPaymentDate, d)
		out, err := r.cfg.Client.Query(ctx, &dynamodb.QueryInput{
			TableName: r.table(), IndexName: aws.String(r.cfg.Table.PaymentIndex),
			KeyConditionExpression:    expr.KeyCondition(),
			ExpressionAttributeNames:  expr.Names(),
			ExpressionAttributeValues: expr.Values(),
			ExclusiveStartKey:         start, Limit: aws.Int32(int32(min(limit-read, 1<<30))),
		})
		if err != nil {
			return Page{}, fmt.Errorf("billing: status page %s, day %s: %w", q.Status, d, err)
		}
		read += int(out.ScannedCount)
		page.Scanned += int(out.ScannedCount)
		for _, hit := range out.Items {
			if err := r.expand(ctx, q, w, day, hit, &page); err != nil {
				return Page{}, err
			}
		}
		if len(out.LastEvaluatedKey) > 0 {
			key := out.LastEvaluatedKey
			key[cursorDay] = attrS(d)
			return r.finishPage(scope, page, key)
		}
		day, start = day.AddDate(0, 0, 1), nil
		if len(out.Items) == 0 {
			empty++
		}
		if !day.After(w.Last) && (read >= limit || page.Count > 0 || empty >= maxEmptyDays) {
			return r.finishPage(scope, page, map[string]types.AttributeValue{cursorDay: attrS(PaymentDayKey(day))})
		}
	}
	return page, nil
}

func (r *SingleTableRepository) finishPage(scope string, page Page, key map[string]types.AttributeValue) (Page, error) {
	next, err := cursor.Encode(scope, key)
	if err != nil {
		return Page{}, fmt.Errorf("billing: status page: cursor: %w", err)
	}
	page.Next = next
	return page, nil
}

// decodeStatusCursor returns the day and index position a cursor
// continues from: the walk's first day for "".
func (r *SingleTableRepository) decodeStatusCursor(scope, token string, w StatusWalk) (time.Time, map[string]types.AttributeValue, error) {
	if token == "" {
		return w.First, nil, nil
	}
	key, err := cursor.Decode(scope, token, cursorDay)
	if err != nil {
		key, err = cursor.Decode(scope, token, cursorDay, AttrPK, AttrSK, AttrNextPaymentDate, AttrLastPaymentDate)
	}
	if err != nil {
		return time.Time{}, nil, fmt.Errorf("%w: %v", ErrInvalidCursor, err)
	}
	day, err := time.Parse(payDayLayout, stringAttr(key[cursorDay]))
	if err != nil || day.Before(w.First) || day.After(w.Last) {
		return time.Time{}, nil, fmt.Errorf("%w: day %q outside the query", ErrInvalidCursor, stringAttr(key[cursorDay]))
	}
	delete(key, cursorDay)
	if len(key) == 0 {
		key = nil
	} else if stringAttr(key[AttrNextPaymentDate]) != PaymentDayKey(day) {
		return time.Time{}, nil, fmt.Errorf("%w: index key of another day", ErrInvalidCursor)
	}
	return day, key, nil
}

// expand adds the periods of the subscription hit (found at day) that are
// in the query's status and range.
func (r *SingleTableRepository) expand(ctx context.Context, q StatusQuery, w StatusWalk, day time.Time, hit map[string]types.AttributeValue, page *Page) error {
	ref, err := r.refOfItem(hit)
	if err != nil {
		r.cfg.Logger.WarnContext(ctx, "billing: skipping an index item that is not a subscription", "error", err)
		page.Invalid = append(page.Invalid, err)
		page.Count++
		return nil
	}
	lo := w.Lo
	if d, _ := timefmt.Seconds(day); d > lo {
		lo = d
	}
	prefix := periodSK(ref, "")
	in := r.chainQuery(ref, prefix+lo, prefix+w.Hi, true,
		expression.Name(AttrBillingStatus).Equal(expression.Value(attrS(string(q.Status)))))
	for {
		out, err := r.cfg.Client.Query(ctx, in)
		if err != nil {
			return fmt.Errorf("billing: status page %s: periods of %s: %w", q.Status, ref.UserID(), err)
		}
		page.Scanned += int(out.ScannedCount)
		for _, it := range out.Items {
			sub, err := decodeEngineItem(it)
			if err != nil {
				r.cfg.Logger.WarnContext(ctx, "billing: skipping undecodable item", "status", q.Status, "error", err)
				page.Invalid = append(page.Invalid, err)
				page.Count++
				continue
			}
			if sub.Status == q.Status && w.Keeps(q, day, sub.BillingDate) {
				page.Items = append(page.Items, sub)
				page.Count++
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// refOfItem returns the subscription an index item (PK and SK) names.
func (r *SingleTableRepository) refOfItem(item map[string]types.AttributeValue) (SubscriptionRef, error) {
	pk, sk := stringAttr(item[AttrPK]), stringAttr(item[AttrSK])
	account, ok := strings.CutPrefix(pk, r.cfg.Table.AccountPrefix)
	rest, ok2 := strings.CutPrefix(sk, SKRecurringPrefix)
	if !ok || !ok2 {
		return SubscriptionRef{}, &FieldError{Field: AttrSK, Value: sk, Key: "PK=" + pk, Err: fmt.Errorf("%w: not a subscription item", ErrInvalidItem)}
	}
	id, sku, _ := strings.Cut(rest, "#SKU#")
	ref := SubscriptionRef{AccountID: account, SubscriptionID: id, SKU: sku}
	if err := checkPaymentKey(ref.AccountID, ref.SubscriptionID, ref.SKU); err != nil {
		return SubscriptionRef{}, &FieldError{Field: AttrSK, Value: sk, Key: "PK=" + pk, Err: fmt.Errorf("%w: %w", ErrInvalidItem, err)}
	}
	return ref, nil
}
