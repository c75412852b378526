package memory

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/cursor"
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/internal/timefmt"
)

// QueryStatus implements [billing.Repository.QueryStatus] as a Query on
// the status index with Limit:
//
//   - StatusIndexSorted: the index is ordered by billing_date (then
//     user_id); the date range is a key condition, so only records inside
//     it are read and counted in Scanned.
//   - StatusIndexLegacy: the index has no range key, so its order means
//     nothing (this store uses user_id, then billing_date); every record of
//     the status is read and counted, and the range is a filter.
//
// A page reads at most Limit items after the cursor's position. Next is
// the position of the last item read whenever Limit items were read, even
// if none remain (DynamoDB returns a LastEvaluatedKey then too); the page
// after it is empty with Next "". The range is compared on the stored
// billing_date strings, as DynamoDB does, and decoded records are kept
// only when [billing.StatusQuery.Matches] agrees. Items that cannot be
// decoded are reported in Invalid.
func (r *Repository) QueryStatus(ctx context.Context, q billing.StatusQuery) (billing.Page, error) {
	if err := ctx.Err(); err != nil {
		return billing.Page{}, err
	}
	if err := q.Validate(); err != nil {
		return billing.Page{}, err
	}
	inRange, err := rangeCondition(q)
	if err != nil {
		return billing.Page{}, err
	}
	mode := r.s.opts.StatusIndexMode
	scope := cursorScope(mode, q.Status)
	var start *indexPos
	if q.Cursor != "" {
		key, err := cursor.Decode(scope, q.Cursor, layout.AttrUserID, layout.AttrBillingDate, layout.AttrBillingStatus)
		if err != nil {
			return billing.Page{}, fmt.Errorf("%w: %v", billing.ErrInvalidCursor, err)
		}
		if stringAttr(key, layout.AttrBillingStatus) != string(q.Status) {
			return billing.Page{}, fmt.Errorf("%w: cursor of another status", billing.ErrInvalidCursor)
		}
		p := positionOf(mode, tableKey{stringAttr(key, layout.AttrUserID), stringAttr(key, layout.AttrBillingDate)})
		start = &p
	}
	limit := q.Limit
	if limit == 0 {
		limit = r.s.opts.PageSize
	}

	r.s.mu.Lock()
	entries := r.s.primary.where(layout.AttrBillingStatus, string(q.Status))
	r.s.mu.Unlock()
	sortByKey(entries, mode == dynamostore.StatusIndexSorted)

	var (
		page billing.Page
		last *keyedItem
	)
	for i := range entries {
		e := &entries[i]
		if start != nil && comparePos(positionOf(mode, e.key), *start) <= 0 {
			continue
		}
		in := inRange(e.key.sk)
		if mode == dynamostore.StatusIndexSorted && !in {
			continue // outside the key condition: not read
		}
		page.Scanned++
		last = e
		if in {
			sub, err := layout.DecodeItem(cloneItem(e.item))
			switch {
			case err != nil:
				page.Invalid = append(page.Invalid, err)
			case q.Matches(sub.BillingDate):
				page.Items = append(page.Items, sub)
			}
		}
		if page.Scanned == limit {
			break
		}
	}
	page.Count = len(page.Items) + len(page.Invalid)
	if page.Scanned == limit && last != nil {
		next, err := cursor.Encode(scope, map[string]types.AttributeValue{
			layout.AttrUserID:        &types.AttributeValueMemberS{Value: last.key.pk},
			layout.AttrBillingDate:   &types.AttributeValueMemberS{Value: last.key.sk},
			layout.AttrBillingStatus: &types.AttributeValueMemberS{Value: string(q.Status)},
		})
		if err != nil {
			return billing.Page{}, fmt.Errorf("memory: encode cursor: %w", err)
		}
		page.Next = next
	}
	return page, nil
}

// cursorScope ties a cursor to the index mode and status it was made for.
func cursorScope(mode dynamostore.StatusIndexMode, status billing.Status) string {
	return "billingtest/status-index/" + mode.String() + "/" + string(status)
}

// indexPos is an item's position in the status index.
type indexPos [2]string

func positionOf(mode dynamostore.StatusIndexMode, k tableKey) indexPos {
	if mode == dynamostore.StatusIndexSorted {
		return indexPos{k.sk, k.pk}
	}
	return indexPos{k.pk, k.sk}
}

func comparePos(a, b indexPos) int {
	if c := cmp.Compare(a[0], b[0]); c != 0 {
		return c
	}
	return cmp.Compare(a[1], b[1])
}

// rangeCondition returns the query's range as a condition on the stored
// billing_date string, with the bounds in the stored form (whole seconds).
func rangeCondition(q billing.StatusQuery) (func(bd string) bool, error) {
	var err error
	bound := func(name string, t time.Time) string {
		if t.IsZero() || err != nil {
			return ""
		}
		s, e := timefmt.Seconds(t)
		if e != nil {
			err = fmt.Errorf("%w: %s: %v", billing.ErrInvalidQuery, name, e)
		}
		return s
	}
	since, after, before := bound("Since", q.Since), bound("After", q.After), bound("Before", q.Before)
	if err != nil {
		return nil, err
	}
	return func(bd string) bool {
		return (since == "" || bd >= since) && (after == "" || bd > after) && (before == "" || bd < before)
	}, nil
}
