package memory

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/av"
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
//   - StatusIndexDue: the due index, partitioned by status and due shard;
//     a page reads one shard's partition, as the sorted index is read,
//     and the next shard's page follows it.
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
	inRange, lower, upper, err := rangeCondition(q)
	if err != nil {
		return billing.Page{}, err
	}
	k := r.DueShards()
	shards, err := q.ShardsIn(k)
	if err != nil {
		return billing.Page{}, err
	}
	mode := r.s.opts.StatusIndexMode
	// In due mode a page reads one shard of the due index: the records of
	// the shard's users in the status, by billing_date.
	due := mode == StatusIndexDue
	if due {
		if !layout.DueStatus(q.Status) {
			return billing.Page{}, fmt.Errorf("%w: status %s is not indexed in the due mode", billing.ErrInvalidQuery, q.Status)
		}
		mode = StatusIndexSorted // within its shard
	}
	scope := cursorScope(r.s.opts.StatusIndexMode, q.Status) + fmt.Sprint("/", k, shards)
	shard := shards[0]
	var start *indexPos
	if q.Cursor != "" {
		names := []string{layout.AttrUserID, layout.AttrBillingDate, layout.AttrBillingStatus, cursorShard}
		key, err := cursor.Decode(scope, q.Cursor, names...)
		if err != nil && due {
			key, err = cursor.Decode(scope, q.Cursor, cursorShard) // the top of a shard
		}
		if err != nil {
			return billing.Page{}, fmt.Errorf("%w: %v", billing.ErrInvalidCursor, err)
		}
		if shard, err = strconv.Atoi(stringAttr(key, cursorShard)); err != nil || !slices.Contains(shards, shard) {
			return billing.Page{}, fmt.Errorf("%w: cursor of another shard", billing.ErrInvalidCursor)
		}
		if len(key) > 1 {
			if stringAttr(key, layout.AttrBillingStatus) != string(q.Status) {
				return billing.Page{}, fmt.Errorf("%w: cursor of another status", billing.ErrInvalidCursor)
			}
			p := r.s.primary.position(tableKey{stringAttr(key, layout.AttrUserID), stringAttr(key, layout.AttrBillingDate)})
			start = &p
		}
	}
	// inShards reports whether a user's records are in the query's
	// shards; the due index's page reads its one shard's partition only.
	inShards := func(user string) bool {
		return due || len(shards) == k || slices.Contains(shards, layout.DueShard(user, k))
	}
	index := statusKey{status: string(q.Status)}
	if due {
		index.shard = shard
	}
	limit := q.Limit
	if limit == 0 {
		limit = r.s.opts.PageSize
	}

	sorted := mode == StatusIndexSorted
	var page billing.Page
	var last indexPos
	// Every stripe, read: no write changes an item or an index meanwhile.
	r.s.locks.rlock(allStripes)
	defer r.s.locks.runlock(allStripes)
	t := r.s.primary
	if set := t.status[index]; set != nil {
		page.Items = make([]billing.Period, 0, min(limit, set.n))
		// The sorted index's key condition starts the read at the range's
		// lower bound; the legacy index is read from its start.
		var from indexPos
		after := false
		if sorted {
			from[0] = lower
		}
		if start != nil && comparePos(*start, from) >= 0 {
			from, after = *start, true
		}
		set.ascend(from, after, func(p indexPos) bool {
			k := t.key(p)
			in := inRange(k.sk)
			if sorted && !in {
				// Outside the key condition: not read. Past its upper
				// bound, nothing further is in it.
				return !(upper != "" && k.sk >= upper)
			}
			page.Scanned++
			last = p
			if in && inShards(k.pk) {
				item, _ := t.get(k)
				sub, err := decodeItem(item)
				switch {
				case err != nil:
					page.Invalid = append(page.Invalid, err)
				case q.Matches(sub.BillingDate):
					page.Items = append(page.Items, sub)
				}
			}
			return page.Scanned < limit
		})
	}
	page.Count = len(page.Items) + len(page.Invalid)
	var next map[string]av.AttributeValue
	switch i := slices.Index(shards, shard); {
	case page.Scanned == limit:
		k := t.key(last)
		next = map[string]av.AttributeValue{
			layout.AttrUserID:        &av.AttributeValueMemberS{Value: k.pk},
			layout.AttrBillingDate:   &av.AttributeValueMemberS{Value: k.sk},
			layout.AttrBillingStatus: &av.AttributeValueMemberS{Value: string(q.Status)},
			cursorShard:              &av.AttributeValueMemberS{Value: strconv.Itoa(shard)},
		}
	case due && i+1 < len(shards):
		next = map[string]av.AttributeValue{cursorShard: &av.AttributeValueMemberS{Value: strconv.Itoa(shards[i+1])}}
	}
	if next != nil {
		if page.Next, err = cursor.Encode(scope, next); err != nil {
			return billing.Page{}, fmt.Errorf("memory: encode cursor: %w", err)
		}
	}
	return page, nil
}

// cursorShard is the cursor attribute naming the shard a page continues
// in.
const cursorShard = "shard"

var _ billing.ShardedRepository = (*Repository)(nil)

// DueShards implements [billing.ShardedRepository]: Options.DueShards, at
// least 1.
func (r *Repository) DueShards() int { return max(r.s.opts.DueShards, 1) }

// cursorScope ties a cursor to the index mode and status it was made for.
func cursorScope(mode StatusIndexMode, status billing.Status) string {
	return "billingtest/status-index/" + mode.String() + "/" + string(status)
}

// rangeCondition returns the query's range as a condition on the stored
// billing_date string, with the bounds in the stored form (whole seconds),
// and the bounds the condition's strings lie in: lower <= bd, and bd <
// upper unless upper is "".
func rangeCondition(q billing.StatusQuery) (inRange func(bd string) bool, lower, upper string, err error) {
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
		return nil, "", "", err
	}
	return func(bd string) bool {
		return (since == "" || bd >= since) && (after == "" || bd > after) && (before == "" || bd < before)
	}, max(since, after), before, nil
}
