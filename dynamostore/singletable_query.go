package dynamostore

import (
	"context"
	"fmt"
	"github.com/dynabill/billing/internal/av"
	"github.com/dynabill/billing/internal/sdkav"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/cursor"
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/internal/timefmt"
)

func (r *SingleTableRepository) statusScope(q billing.StatusQuery, w layout.StatusWalk) string {
	return fmt.Sprintf("single/%s/%s/%s/%s/%s", r.tbl.Table, r.tbl.PaymentIndex, q.Status, w.Lo, w.Hi)
}

// QueryStatus implements [Repository.QueryStatus]. With
// [SingleTableConfig.DueShards] (and the backfill done) it reads the due
// index, one shard a page: only the periods in the query's status and
// range are read, and a status runs do not read is an
// [billing.ErrInvalidQuery]. Otherwise it reads the payment index
// (NextPaymentDate): it walks the index's days from CatchUpDays before
// today (or the query's start, when earlier) to the query's end; each
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
func (r *SingleTableRepository) QueryStatus(ctx context.Context, q billing.StatusQuery) (billing.Page, error) {
	if err := q.Validate(); err != nil {
		return billing.Page{}, err
	}
	if r.dueReads() {
		return r.queryDue(ctx, q)
	}
	w, err := layout.SingleTableWalk(q, r.cfg.Clock.Now(), r.cfg.CatchUpDays)
	if err != nil {
		return billing.Page{}, err
	}
	scope := r.statusScope(q, w)
	day, start, err := r.decodeStatusCursor(scope, q.Cursor, w)
	if err != nil {
		return billing.Page{}, err
	}
	limit := q.Limit
	if limit == 0 {
		limit = r.cfg.PageSize
	}
	var page billing.Page
	read, empty := 0, 0
	for !day.After(w.Last) {
		d := layout.PaymentDayKey(day)
		expr := keyEquals(layout.AttrNextPaymentDate, d)
		out, err := r.cfg.Client.Query(ctx, &dynamodb.QueryInput{
			TableName: r.table(), IndexName: aws.String(r.tbl.PaymentIndex),
			KeyConditionExpression:    expr.KeyCondition(),
			ExpressionAttributeNames:  expr.Names(),
			ExpressionAttributeValues: expr.Values(),
			ExclusiveStartKey:         sdkav.ToSDK(start), Limit: aws.Int32(int32(min(limit-read, 1<<30))),
		})
		if err != nil {
			return billing.Page{}, fmt.Errorf("billing: status page %s, day %s: %w", q.Status, d, err)
		}
		read += int(out.ScannedCount)
		page.Scanned += int(out.ScannedCount)
		for _, hit := range out.Items {
			if err := r.expand(ctx, q, w, day, hit, &page); err != nil {
				return billing.Page{}, err
			}
		}
		if len(out.LastEvaluatedKey) > 0 {
			key := sdkav.FromSDK(out.LastEvaluatedKey)
			key[layout.CursorDay] = layout.StringAV(d)
			return r.finishPage(scope, page, key)
		}
		day, start = day.AddDate(0, 0, 1), nil
		if len(out.Items) == 0 {
			empty++
		}
		if !day.After(w.Last) && (read >= limit || page.Count > 0 || empty >= layout.MaxEmptyDays) {
			return r.finishPage(scope, page, map[string]av.AttributeValue{layout.CursorDay: layout.StringAV(layout.PaymentDayKey(day))})
		}
	}
	return page, nil
}

func (r *SingleTableRepository) finishPage(scope string, page billing.Page, key map[string]av.AttributeValue) (billing.Page, error) {
	next, err := cursor.Encode(scope, key)
	if err != nil {
		return billing.Page{}, fmt.Errorf("billing: status page: cursor: %w", err)
	}
	page.Next = next
	return page, nil
}

// decodeStatusCursor returns the day and index position a cursor
// continues from: the walk's first day for "".
func (r *SingleTableRepository) decodeStatusCursor(scope, token string, w layout.StatusWalk) (time.Time, map[string]av.AttributeValue, error) {
	if token == "" {
		return w.First, nil, nil
	}
	key, err := cursor.Decode(scope, token, layout.CursorDay)
	if err != nil {
		key, err = cursor.Decode(scope, token, layout.CursorDay, layout.AttrPK, layout.AttrSK, layout.AttrNextPaymentDate, layout.AttrLastPaymentDate)
	}
	if err != nil {
		return time.Time{}, nil, fmt.Errorf("%w: %v", billing.ErrInvalidCursor, err)
	}
	day, err := time.Parse(layout.PayDayLayout, stringOf(key[layout.CursorDay]))
	if err != nil || day.After(w.Last) { // an earlier day is a run continued later: it walks on from there
		return time.Time{}, nil, fmt.Errorf("%w: day %q outside the query", billing.ErrInvalidCursor, stringOf(key[layout.CursorDay]))
	}
	delete(key, layout.CursorDay)
	if len(key) == 0 {
		key = nil
	} else if stringOf(key[layout.AttrNextPaymentDate]) != layout.PaymentDayKey(day) {
		return time.Time{}, nil, fmt.Errorf("%w: index key of another day", billing.ErrInvalidCursor)
	}
	return day, key, nil
}

// expand adds the periods of the subscription hit (found at day) that are
// in the query's status and range.
func (r *SingleTableRepository) expand(ctx context.Context, q billing.StatusQuery, w layout.StatusWalk, day time.Time, hit map[string]types.AttributeValue, page *billing.Page) error {
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
	prefix := layout.PeriodSK(ref, "")
	in := r.chainQuery(ref, prefix+lo, prefix+w.Hi, true,
		expression.Name(layout.AttrBillingStatus).Equal(exprValue(layout.StringAV(string(q.Status)))))
	for out, err := range queryPages(ctx, r.cfg.Client, in) {
		if err != nil {
			return fmt.Errorf("billing: status page %s: periods of %s: %w", q.Status, ref.UserID(), err)
		}
		page.Scanned += int(out.ScannedCount)
		for _, it := range out.Items {
			sub, err := decodeEngineItem(sdkav.FromSDK(it))
			if err := w.Add(page, q, day, sub, err); err != nil {
				r.cfg.Logger.WarnContext(ctx, "billing: skipping undecodable item", "status", q.Status, "error", err)
			}
		}
	}
	return nil
}

// refOfItem returns the subscription an index item (PK and SK) names.
func (r *SingleTableRepository) refOfItem(item map[string]types.AttributeValue) (layout.SubscriptionRef, error) {
	pk, sk := stringOf(item[layout.AttrPK]), stringOf(item[layout.AttrSK])
	account, ok := strings.CutPrefix(pk, r.tbl.AccountPrefix)
	rest, ok2 := strings.CutPrefix(sk, layout.SKRecurringPrefix)
	if !ok || !ok2 {
		return layout.SubscriptionRef{}, &billing.FieldError{Field: layout.AttrSK, Value: sk, Key: "PK=" + pk, Err: fmt.Errorf("%w: not a subscription item", billing.ErrInvalidItem)}
	}
	id, sku, _ := strings.Cut(rest, "#SKU#")
	ref := layout.SubscriptionRef{AccountID: account, SubscriptionID: id, SKU: sku}
	if err := layout.CheckPaymentKey(ref.AccountID, ref.SubscriptionID, ref.SKU); err != nil {
		return layout.SubscriptionRef{}, &billing.FieldError{Field: layout.AttrSK, Value: sk, Key: "PK=" + pk, Err: fmt.Errorf("%w: %w", billing.ErrInvalidItem, err)}
	}
	return ref, nil
}
