package dynamostore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/cursor"
	"github.com/dynabill/billing/internal/layout"
)

var _ billing.ShardedRepository = (*SingleTableRepository)(nil)

// SingleTableDueIndexDefinition is the sharded due GSI of config (see
// [SingleTableConfig.DueShards]): key billing_due (hash) and billing_date
// (range), every attribute projected, since a status page decodes the
// periods it returns from the index items. Only period items carry
// billing_due, so nothing else of the table is in it. Add it to an
// existing table with UpdateTable (with the attribute definitions of its
// two keys, both strings), then run [SingleTableRepository.BackfillDue].
func SingleTableDueIndexDefinition(config SingleTableConfig) types.GlobalSecondaryIndex {
	return gsi(config.codec().DueIndex, keyElem(layout.AttrDue, types.KeyTypeHash), keyElem(layout.AttrBillingDate, types.KeyTypeRange))
}

// DueShards implements [billing.ShardedRepository]: the table's
// DueShards while status queries read the due index, else 1 (the
// payment-index walk is one shard).
func (r *SingleTableRepository) DueShards() int {
	if !r.dueReads() {
		return 1
	}
	return r.tbl.DueShards
}

// dueReads reports whether status queries read the due index.
func (r *SingleTableRepository) dueReads() bool { return r.tbl.DueShards > 0 && !r.cfg.DueIndexPending }

// withDue sets or removes the due key of item, the period item of sub
// about to be written, as [Repository.withDue] does on the legacy table:
// a period in a status runs do not read never keeps one, a period in a due
// status gets its shard's key when the table has shards (without them an
// existing key is left for the backfill of a later configuration).
func (r *SingleTableRepository) withDue(item map[string]types.AttributeValue, sub *billing.Subscription) {
	switch {
	case !layout.DueStatus(sub.Status):
		delete(item, layout.AttrDue)
	case r.tbl.DueShards > 0:
		item[layout.AttrDue] = layout.StringAV(layout.DueKey(sub.Status, layout.DueShard(sub.UserID, r.tbl.DueShards)))
	}
}

// stDueCursorNames are the attributes of a due index LastEvaluatedKey on
// the single table: the table's keys and the index's.
var stDueCursorNames = []string{cursorShard, layout.AttrPK, layout.AttrSK, layout.AttrDue, layout.AttrBillingDate}

// queryDue reads one page of q from the due index: one query of one
// shard, the first of shards not yet done, from the cursor's position.
// Next continues in the same shard, or at the top of the next one; it is
// "" after the last shard's last page.
func (r *SingleTableRepository) queryDue(ctx context.Context, q billing.StatusQuery) (billing.Page, error) {
	if !layout.DueStatus(q.Status) {
		return billing.Page{}, fmt.Errorf("%w: status %s is not in the due index (only the statuses runs read are)", billing.ErrInvalidQuery, q.Status)
	}
	shards, err := q.ShardsIn(r.tbl.DueShards)
	if err != nil {
		return billing.Page{}, err
	}
	// The scope binds a cursor to the query's status, range and shards.
	scope := fmt.Sprintf("single-due/%s/%s/%d/%s/%s/%s/%s%s", r.tbl.Table, r.tbl.DueIndex, r.tbl.DueShards, q.Status,
		q.Since.UTC().Format(time.RFC3339Nano), q.After.UTC().Format(time.RFC3339Nano), q.Before.UTC().Format(time.RFC3339Nano), shardScope(q.Shards, shards))
	shard, start, err := r.decodeDueCursor(scope, q, shards)
	if err != nil {
		return billing.Page{}, err
	}
	expr, err := dateConditions(q, expression.Key(layout.AttrDue).Equal(expression.Value(layout.StringAV(layout.DueKey(q.Status, shard)))), true)
	if err != nil {
		return billing.Page{}, err
	}
	limit := q.Limit
	if limit == 0 {
		limit = r.cfg.PageSize
	}
	out, err := r.cfg.Client.Query(ctx, &dynamodb.QueryInput{
		TableName: r.table(), IndexName: &r.tbl.DueIndex,
		KeyConditionExpression:    expr.KeyCondition(),
		FilterExpression:          expr.Filter(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		ExclusiveStartKey:         start,
		Limit:                     aws.Int32(int32(min(limit, 1<<30))),
	})
	if err != nil {
		return billing.Page{}, fmt.Errorf("billing: status page %s, shard %d: %w", q.Status, shard, err)
	}
	page := billing.Page{Scanned: int(out.ScannedCount)}
	for _, it := range out.Items {
		sub, err := decodeEngineItem(it)
		switch {
		case err != nil:
			r.cfg.Logger.WarnContext(ctx, "billing: skipping undecodable item", "status", q.Status, "error", err)
			page.Invalid = append(page.Invalid, err)
			page.Count++
		case sub.Status == q.Status:
			// The index is eventually consistent: a period that has left
			// the status may still be listed under it.
			page.Items = append(page.Items, sub)
			page.Count++
		}
	}
	return finishDuePage(scope, q, page, shards, shard, out.LastEvaluatedKey)
}

// decodeDueCursor returns the shard a due query continues in and its
// start key (nil at the shard's top): the first of shards for "". A start
// key must be in the shard's partition of q's status.
func (r *SingleTableRepository) decodeDueCursor(scope string, q billing.StatusQuery, shards []int) (int, map[string]types.AttributeValue, error) {
	if q.Cursor == "" {
		return shards[0], nil, nil
	}
	key, err := cursor.Decode(scope, q.Cursor, cursorShard)
	if err != nil {
		key, err = cursor.Decode(scope, q.Cursor, stDueCursorNames...)
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
		return shard, nil, nil
	}
	if due := layout.StringOf(key[layout.AttrDue]); due != layout.DueKey(q.Status, shard) {
		return 0, nil, fmt.Errorf("%w: index key %q is not of shard %d of %s", billing.ErrInvalidCursor, due, shard, q.Status)
	}
	return shard, key, nil
}

// BackfillDue gives the existing period items of the table the due key
// of [SingleTableConfig.DueShards], as [Repository.BackfillDue] does on
// the legacy table: it scans up to limit items from cursor ("" for the
// start), and writes billing_due on each period item where it is not
// what the period's status and subscription call for (set where missing
// or of another shard, removed from a period in a status runs do not
// read), with an UpdateItem of that attribute alone, conditional on the
// status and key the scan showed, so a period the engine changed since is
// left to the engine. History rows, ID pointers and the other entities
// of the table are read and left alone. It is idempotent (a second pass
// writes nothing) and resumable: pass the page's Next to continue, in
// this process or another, after a crash too; a page whose write failed
// returns its own start as Next. The caller paces the pages (a scan page
// of limit items costs about limit/12 read units, each write one write
// unit and the index's).
func (r *SingleTableRepository) BackfillDue(ctx context.Context, token string, limit int) (BackfillPage, error) {
	if r.tbl.DueShards == 0 {
		return BackfillPage{}, fmt.Errorf("billing: backfill: SingleTableConfig.DueShards is 0: no due index to fill")
	}
	b := dueBackfill{
		client: r.cfg.Client, table: r.table(), shards: r.tbl.DueShards,
		scope: "single-backfill/" + r.tbl.Table + "/" + strconv.Itoa(r.tbl.DueShards),
		keys:  []string{layout.AttrPK, layout.AttrSK},
		skip: func(it map[string]types.AttributeValue) bool {
			return !r.tbl.IsPeriodKey(layout.StringOf(it[layout.AttrPK]), layout.StringOf(it[layout.AttrSK]))
		},
		keyText: func(it map[string]types.AttributeValue) string {
			return "PK=" + layout.StringOf(it[layout.AttrPK]) + " SK=" + layout.StringOf(it[layout.AttrSK])
		},
	}
	return b.page(ctx, token, cmp.Or(max(limit, 0), r.cfg.PageSize))
}
