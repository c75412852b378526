package dynamostore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/cursor"
	"github.com/dynabill/billing/internal/layout"
)

var _ billing.ShardedRepository = (*Repository)(nil)

// DueShards implements [billing.ShardedRepository]: [TableConfig.DueShards],
// or 1 without the due index.
func (r *Repository) DueShards() int { return max(r.cfg.Tables.DueShards, 1) }

// withDue sets or removes the due index key of item, the encoding of sub
// about to be written: billing_due is the library's own attribute, so a
// record in a status runs do not read never keeps one; a record in a due
// status gets its shard's key when the due index is on (without it, an
// existing key is left for the backfill of a later configuration).
func (r *Repository) withDue(item map[string]types.AttributeValue, sub *billing.Subscription) map[string]types.AttributeValue {
	switch {
	case !layout.DueStatus(sub.Status):
		delete(item, layout.AttrDue)
	case r.cfg.Tables.DueShards > 0:
		item[layout.AttrDue] = layout.StringAV(layout.DueKey(sub.Status, layout.DueShard(sub.UserID, r.cfg.Tables.DueShards)))
	}
	return item
}

// decodeRecord decodes a primary item without its due key: billing_due is
// the store's own, derived from the record, so it is neither carried in
// the record's stored attributes nor compared when the record is written
// back (withDue writes it anew).
func decodeRecord(item map[string]types.AttributeValue) (billing.Subscription, error) {
	delete(item, layout.AttrDue)
	return layout.DecodeItem(item)
}

// shardScope binds a cursor to the shards its query named; "" for none
// (every shard), so existing cursors stay valid.
func shardScope(named, shards []int) string {
	if len(named) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("/shards")
	for _, s := range shards {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(s))
	}
	return b.String()
}

// addItems decodes the items of a status page onto page: those in q's
// status and shards are returned, undecodable ones reported in Invalid.
// An index is eventually consistent, so an item may show a status the
// record has left; the caller re-reads before acting anyway.
func (r *Repository) addItems(ctx context.Context, page *billing.Page, q billing.StatusQuery, items []map[string]types.AttributeValue, shards []int) {
	k := r.DueShards()
	for _, it := range items {
		sub, err := decodeRecord(it)
		if err != nil {
			r.cfg.Logger.WarnContext(ctx, "billing: skipping undecodable item", "status", q.Status, "error", err)
			page.Invalid = append(page.Invalid, err)
			page.Count++
			continue
		}
		if sub.Status != q.Status || (len(shards) < k && !slices.Contains(shards, layout.DueShard(sub.UserID, k))) {
			continue
		}
		page.Items = append(page.Items, sub)
		page.Count++
	}
}

// cursorShard is the cursor attribute that names the shard a due query
// continues in.
const cursorShard = "shard"

// dueCursorNames are the attributes of a due index LastEvaluatedKey.
var dueCursorNames = []string{layout.AttrUserID, layout.AttrBillingDate, layout.AttrDue}

// queryDue reads one page of q from the due index: one query of one
// shard, the first of shards not yet done. Next continues in the same
// shard, or at the top of the next one.
func (r *Repository) queryDue(ctx context.Context, q billing.StatusQuery, shards []int) (billing.Page, error) {
	t := r.cfg.Tables
	scope := "due/" + t.Subscriptions + "/" + t.DueIndex + "/" + strconv.Itoa(t.DueShards) + "/" + string(q.Status) + shardScope(q.Shards, shards)
	shard, start, err := decodeDueCursor(scope, q.Cursor, shards)
	if err != nil {
		return billing.Page{}, err
	}
	key := layout.DueKey(q.Status, shard)
	expr, err := dateConditions(q, expression.Key(layout.AttrDue).Equal(expression.Value(layout.StringAV(key))), true)
	if err != nil {
		return billing.Page{}, err
	}
	page, next, err := r.statusPage(ctx, q, shards, &t.DueIndex, expr, start)
	if err != nil {
		return billing.Page{}, fmt.Errorf("billing: status page %s, shard %d: %w", q.Status, shard, err)
	}
	return finishDuePage(scope, q, page, shards, shard, next)
}

// finishDuePage sets the cursor of a due index page of shard, one of
// shards: next, the query's own LastEvaluatedKey, continues in the shard;
// without one the shard is done and the cursor is the top of the next
// shard, or there is none after the last. Both layouts' due queries end
// their pages with it.
func finishDuePage(scope string, q billing.StatusQuery, page billing.Page, shards []int, shard int, next map[string]types.AttributeValue) (billing.Page, error) {
	if len(next) == 0 {
		i := slices.Index(shards, shard)
		if i+1 == len(shards) {
			return page, nil // the last shard is done
		}
		shard, next = shards[i+1], map[string]types.AttributeValue{}
	}
	next[cursorShard] = layout.StringAV(strconv.Itoa(shard))
	var err error
	if page.Next, err = cursor.Encode(scope, next); err != nil {
		return billing.Page{}, fmt.Errorf("billing: status page %s: cursor: %w", q.Status, err)
	}
	return page, nil
}

// decodeDueCursor returns the shard a due query continues in and its
// start key (nil at the shard's top): the first of shards for "".
func decodeDueCursor(scope, token string, shards []int) (int, map[string]types.AttributeValue, error) {
	if token == "" {
		return shards[0], nil, nil
	}
	key, err := cursor.Decode(scope, token, cursorShard)
	if err != nil {
		key, err = cursor.Decode(scope, token, append([]string{cursorShard}, dueCursorNames...)...)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %v", billing.ErrInvalidCursor, err)
	}
	shard, err := strconv.Atoi(layout.StringOf(key[cursorShard]))
	if err != nil || !slices.Contains(shards, shard) {
		return 0, nil, fmt.Errorf("%w: shard %q is not one of the query's", billing.ErrInvalidCursor, layout.StringOf(key[cursorShard]))
	}
	delete(key, cursorShard)
	if len(key) == 0 {
		key = nil
	}
	return shard, key, nil
}

// BackfillPage is what one call of [Repository.BackfillDue] did.
type BackfillPage struct {
	// Scanned is the number of items read.
	Scanned int
	// Updated is the number of items whose due index key was written:
	// set where it was missing or named another shard, removed from a
	// record in a status runs do not read.
	Updated int
	// Changed is the number of items left alone because they changed
	// between the read and the write; their writer set the key.
	Changed int
	// Next continues the backfill; "" when the whole table is done.
	Next string
}

// BackfillDue gives existing items the due index key of
// [TableConfig.DueShards]: it scans up to limit items of the primary
// table from cursor ("" for the start) and writes billing_due where it is
// not what the record's status and user call for, each with an UpdateItem
// conditional on the status and key it read, so a record changed since
// by the engine is left to the engine. Nothing else on an item changes.
// It is idempotent (a second pass writes nothing) and resumable: pass the
// page's Next to continue, in this process or another, after a crash too.
// The caller paces the pages (a scan page of limit items costs about
// limit/40 read units; each write one write unit and its index writes).
func (r *Repository) BackfillDue(ctx context.Context, token string, limit int) (BackfillPage, error) {
	t := r.cfg.Tables
	if t.DueShards == 0 {
		return BackfillPage{}, fmt.Errorf("billing: backfill: TableConfig.DueShards is 0: no due index to fill")
	}
	b := dueBackfill{
		client: r.cfg.Client, table: &t.Subscriptions, shards: t.DueShards,
		scope: "backfill/" + t.Subscriptions + "/" + strconv.Itoa(t.DueShards),
		keys:  []string{layout.AttrUserID, layout.AttrBillingDate},
		keyText: func(it map[string]types.AttributeValue) string {
			return keyString(layout.StringOf(it[layout.AttrUserID]), layout.StringOf(it[layout.AttrBillingDate]))
		},
	}
	return b.page(ctx, token, cmp.Or(max(limit, 0), r.cfg.PageSize))
}

// dueBackfill is a layout's BackfillDue: the scan of one table whose items
// with a user and a billing status get the due key of shards.
type dueBackfill struct {
	client API
	table  *string
	shards int
	scope  string   // of the cursor
	keys   []string // the table's key attributes, user_id's first when it is one
	// skip reports whether a scanned item carries no due key whatever its
	// attributes (another entity); nil keeps every item.
	skip    func(it map[string]types.AttributeValue) bool
	keyText func(it map[string]types.AttributeValue) string
}

// page scans up to limit items from token and writes the due key of each
// that needs it (see backfillItem). A page whose write failed returns its
// own start as Next: its writes are idempotent, so it is redone whole.
func (b dueBackfill) page(ctx context.Context, token string, limit int) (BackfillPage, error) {
	start, err := cursor.Decode(b.scope, token, b.keys...)
	if err != nil {
		return BackfillPage{}, fmt.Errorf("%w: %v", billing.ErrInvalidCursor, err)
	}
	names := b.keys
	if !slices.Contains(names, layout.AttrUserID) {
		names = append(slices.Clip(names), layout.AttrUserID)
	}
	var proj expression.ProjectionBuilder
	for _, n := range append(slices.Clip(names), layout.AttrBillingStatus, layout.AttrDue) {
		proj = proj.AddNames(expression.Name(n))
	}
	expr, err := expression.NewBuilder().WithProjection(proj).Build()
	if err != nil {
		return BackfillPage{}, err
	}
	out, err := b.client.Scan(ctx, &dynamodb.ScanInput{
		TableName:                b.table,
		ProjectionExpression:     expr.Projection(),
		ExpressionAttributeNames: expr.Names(),
		ExclusiveStartKey:        start,
		Limit:                    aws.Int32(int32(min(limit, 1<<30))),
	})
	if err != nil {
		return BackfillPage{}, fmt.Errorf("billing: backfill: scan: %w", err)
	}
	page := BackfillPage{Scanned: int(out.ScannedCount)}
	for _, it := range out.Items {
		if err := b.item(ctx, it, &page); err != nil {
			page.Next = token
			return page, err
		}
	}
	if page.Next, err = cursor.Encode(b.scope, out.LastEvaluatedKey); err != nil {
		return page, fmt.Errorf("billing: backfill: cursor: %w", err)
	}
	return page, nil
}

// item writes the due key of one scanned item when it is not the one its
// status and user call for, with an UpdateItem of that attribute alone
// conditional on the status and key the scan showed, and counts it on
// page: Updated when it wrote, Changed when the item changed meanwhile
// (its writer set the key); an item whose key is right, or that carries
// none (skip, or no user), counts nowhere.
func (b dueBackfill) item(ctx context.Context, it map[string]types.AttributeValue, page *BackfillPage) error {
	user, status := layout.StringOf(it[layout.AttrUserID]), billing.Status(layout.StringOf(it[layout.AttrBillingStatus]))
	if user == "" || (b.skip != nil && b.skip(it)) {
		return nil
	}
	have, had := it[layout.AttrDue]
	want := ""
	if layout.DueStatus(status) {
		want = layout.DueKey(status, layout.DueShard(user, b.shards))
	}
	if (want == "" && !had) || (had && layout.StringOf(have) == want) {
		return nil
	}
	due := expression.Name(layout.AttrDue)
	cond := expression.Name(layout.AttrBillingStatus).Equal(expression.Value(layout.StringAV(string(status))))
	if had {
		cond = cond.And(due.Equal(expression.Value(have)))
	} else {
		cond = cond.And(expression.AttributeNotExists(due))
	}
	upd := expression.Remove(due)
	if want != "" {
		upd = expression.Set(due, expression.Value(layout.StringAV(want)))
	}
	expr, err := expression.NewBuilder().WithCondition(cond).WithUpdate(upd).Build()
	if err != nil {
		return err
	}
	key := make(map[string]types.AttributeValue, len(b.keys))
	for _, k := range b.keys {
		key[k] = it[k]
	}
	_, err = b.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 b.table,
		Key:                       key,
		ConditionExpression:       expr.Condition(),
		UpdateExpression:          expr.Update(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		page.Changed++
		return nil
	case err != nil:
		return fmt.Errorf("billing: backfill (%s): %w", b.keyText(it), err)
	}
	page.Updated++
	return nil
}
