package dynamostore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/dynabill/billing/internal/av"
	"github.com/dynabill/billing/internal/sdkav"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

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
// about to be written to a table of shards due shards, and returns item:
// billing_due is the store's own attribute, so a record (or period) in a
// status runs do not read never keeps one; one in a due status gets its
// shard's key when the table has shards (without them, an existing key is
// left for the backfill of a later configuration). Both layouts' writes
// pass here.
func withDue(item map[string]av.AttributeValue, sub *billing.Period, shards int) map[string]av.AttributeValue {
	switch {
	case !layout.DueStatus(sub.Status):
		delete(item, layout.AttrDue)
	case shards > 0:
		item[layout.AttrDue] = layout.StringAV(layout.DueKey(sub.Status, layout.DueShard(sub.UserID, shards)))
	}
	return item
}

// writesDue makes a write-back of a record to next (prevItem the encoding
// it compares against) write next's due key (see withDue) whatever the
// stored one is: records are read without their due key (decodeRecord,
// decodeEngineItem), so prevItem cannot show it; a null there differs
// from any key and from none, so the update sets the key of a record runs
// read and removes it from any other. Without shards a record in a due
// status keeps the key it has.
func writesDue(prevItem map[string]av.AttributeValue, next *billing.Period, shards int) {
	if !layout.DueStatus(next.Status) || shards > 0 {
		prevItem[layout.AttrDue] = &av.AttributeValueMemberNULL{Value: true}
	}
}

// decodeRecord decodes a primary item without its due key: billing_due is
// the store's own, derived from the record, so it is neither carried in
// the record's stored attributes nor compared when the record is written
// back (withDue writes it anew).
func decodeRecord(item map[string]av.AttributeValue) (billing.Period, error) {
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
		sub, err := decodeRecord(sdkav.FromSDK(it))
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

// queryDue reads one page of q from the due index (see [dueIndex.page]).
func (r *Repository) queryDue(ctx context.Context, q billing.StatusQuery) (billing.Page, error) {
	t := &r.cfg.Tables
	return dueIndex{
		client: r.cfg.Client, logger: r.cfg.Logger, table: &t.Subscriptions, index: &t.DueIndex,
		shards: t.DueShards, pageSize: r.cfg.PageSize,
		scope:  "due/" + t.Subscriptions + "/" + t.DueIndex,
		keys:   []string{layout.AttrUserID, layout.AttrBillingDate, layout.AttrDue},
		decode: decodeRecord,
	}.page(ctx, q)
}

// dueIndex is a layout's sharded due index as its status queries read it:
// both layouts' queryDue fill it in, as their BackfillDue fill in a
// dueBackfill.
type dueIndex struct {
	client       API
	logger       *slog.Logger
	table, index *string
	shards       int    // the table's due shards
	pageSize     int    // a page's Limit when the query has none
	scope        string // of the cursors: the table and the index
	// keys are the attributes of the index's LastEvaluatedKey: the
	// table's keys and the index's.
	keys []string
	// decode decodes an index item into its record, the layout's own
	// attributes left out.
	decode func(map[string]av.AttributeValue) (billing.Period, error)
}

// page reads one page of q: one query of one shard, the first of q's
// shards not yet done, from the cursor's position. Next continues in the
// same shard, or at the top of the next one; it is "" after the last
// shard's last page. A status runs do not read is not in the index: an
// [billing.ErrInvalidQuery].
func (d dueIndex) page(ctx context.Context, q billing.StatusQuery) (billing.Page, error) {
	if !layout.DueStatus(q.Status) {
		return billing.Page{}, fmt.Errorf("%w: status %s is not in the due index (only the statuses runs read are)", billing.ErrInvalidQuery, q.Status)
	}
	shards, err := q.ShardsIn(d.shards)
	if err != nil {
		return billing.Page{}, err
	}
	// The scope binds a cursor to the query's status, range and shards.
	scope := fmt.Sprintf("%s/%d/%s/%s/%s/%s%s", d.scope, d.shards, q.Status,
		q.Since.UTC().Format(time.RFC3339Nano), q.After.UTC().Format(time.RFC3339Nano), q.Before.UTC().Format(time.RFC3339Nano), shardScope(q.Shards, shards))
	shard, start, err := d.decodeCursor(scope, q, shards)
	if err != nil {
		return billing.Page{}, err
	}
	expr, err := dateConditions(q, expression.Key(layout.AttrDue).Equal(exprValue(layout.StringAV(layout.DueKey(q.Status, shard)))), true)
	if err != nil {
		return billing.Page{}, err
	}
	out, err := d.client.Query(ctx, &dynamodb.QueryInput{
		TableName: d.table, IndexName: d.index,
		KeyConditionExpression:    expr.KeyCondition(),
		FilterExpression:          expr.Filter(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		ExclusiveStartKey:         sdkav.ToSDK(start),
		Limit:                     aws.Int32(int32(min(cmp.Or(q.Limit, d.pageSize), 1<<30))),
	})
	if err != nil {
		return billing.Page{}, fmt.Errorf("billing: status page %s, shard %d: %w", q.Status, shard, err)
	}
	page := billing.Page{Scanned: int(out.ScannedCount)}
	for _, it := range out.Items {
		sub, err := d.decode(sdkav.FromSDK(it))
		switch {
		case err != nil:
			d.logger.WarnContext(ctx, "billing: skipping undecodable item", "status", q.Status, "error", err)
			page.Invalid = append(page.Invalid, err)
			page.Count++
		case sub.Status == q.Status:
			// The index is eventually consistent: a record that has left
			// the status may still be listed under it.
			page.Items = append(page.Items, sub)
			page.Count++
		}
	}
	next := sdkav.FromSDK(out.LastEvaluatedKey)
	if len(next) == 0 {
		i := slices.Index(shards, shard)
		if i+1 == len(shards) {
			return page, nil // the last shard is done
		}
		shard, next = shards[i+1], map[string]av.AttributeValue{}
	}
	next[cursorShard] = layout.StringAV(strconv.Itoa(shard))
	if page.Next, err = cursor.Encode(scope, next); err != nil {
		return billing.Page{}, fmt.Errorf("billing: status page %s: cursor: %w", q.Status, err)
	}
	return page, nil
}

// decodeCursor returns the shard a due query continues in and its start
// key (nil at the shard's top): the first of shards for "". A start key
// must be in the shard's partition of q's status.
func (d dueIndex) decodeCursor(scope string, q billing.StatusQuery, shards []int) (int, map[string]av.AttributeValue, error) {
	if q.Cursor == "" {
		return shards[0], nil, nil
	}
	key, err := cursor.Decode(scope, q.Cursor, cursorShard)
	if err != nil {
		key, err = cursor.Decode(scope, q.Cursor, append([]string{cursorShard}, d.keys...)...)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %v", billing.ErrInvalidCursor, err)
	}
	shard, err := strconv.Atoi(stringOf(key[cursorShard]))
	if err != nil || !slices.Contains(shards, shard) {
		return 0, nil, fmt.Errorf("%w: shard %q is not one of the query's", billing.ErrInvalidCursor, stringOf(key[cursorShard]))
	}
	delete(key, cursorShard)
	if len(key) == 0 {
		return shard, nil, nil
	}
	if due := stringOf(key[layout.AttrDue]); due != layout.DueKey(q.Status, shard) {
		return 0, nil, fmt.Errorf("%w: index key %q is not of shard %d of %s", billing.ErrInvalidCursor, due, shard, q.Status)
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
			return keyString(stringOf(it[layout.AttrUserID]), stringOf(it[layout.AttrBillingDate]))
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
		ExclusiveStartKey:        sdkav.ToSDK(start),
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
	if page.Next, err = cursor.Encode(b.scope, sdkav.FromSDK(out.LastEvaluatedKey)); err != nil {
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
	user, status := stringOf(it[layout.AttrUserID]), billing.Status(stringOf(it[layout.AttrBillingStatus]))
	if user == "" || (b.skip != nil && b.skip(it)) {
		return nil
	}
	have, had := it[layout.AttrDue]
	want := ""
	if layout.DueStatus(status) {
		want = layout.DueKey(status, layout.DueShard(user, b.shards))
	}
	if (want == "" && !had) || (had && stringOf(have) == want) {
		return nil
	}
	due := expression.Name(layout.AttrDue)
	cond := expression.Name(layout.AttrBillingStatus).Equal(exprValue(layout.StringAV(string(status))))
	if had {
		cond = cond.And(due.Equal(exprValue(have)))
	} else {
		cond = cond.And(expression.AttributeNotExists(due))
	}
	upd := expression.Remove(due)
	if want != "" {
		upd = expression.Set(due, exprValue(layout.StringAV(want)))
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
