package dynamostore

import (
	"cmp"
	"context"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
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
	return gsi(codecOf(config).DueIndex, keyElem(layout.AttrDue, types.KeyTypeHash), keyElem(layout.AttrBillingDate, types.KeyTypeRange))
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

// queryDue reads one page of q from the due index (see [dueIndex.page]).
func (r *SingleTableRepository) queryDue(ctx context.Context, q billing.StatusQuery) (billing.Page, error) {
	return dueIndex{
		client: r.cfg.Client, logger: r.cfg.Logger, table: r.table(), index: &r.tbl.DueIndex,
		shards: r.tbl.DueShards, pageSize: r.cfg.PageSize,
		scope:  "single-due/" + r.tbl.Table + "/" + r.tbl.DueIndex,
		keys:   []string{layout.AttrPK, layout.AttrSK, layout.AttrDue, layout.AttrBillingDate},
		decode: decodeEngineItem,
	}.page(ctx, q)
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
			return !r.tbl.IsPeriodKey(stringOf(it[layout.AttrPK]), stringOf(it[layout.AttrSK]))
		},
		keyText: func(it map[string]types.AttributeValue) string {
			return "PK=" + stringOf(it[layout.AttrPK]) + " SK=" + stringOf(it[layout.AttrSK])
		},
	}
	return b.page(ctx, token, cmp.Or(max(limit, 0), r.cfg.PageSize))
}
