package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/av"
	"github.com/dynabill/billing/internal/cursor"
	"github.com/dynabill/billing/internal/layout"
)

var _ billing.ShardedRepository = (*stRepository)(nil)

// DueShards implements [billing.ShardedRepository] as
// dynamostore.SingleTableRepository.DueShards does: the table's
// DueShards while status queries read the due index, else 1.
func (r *stRepository) DueShards() int {
	s := (*SingleTable)(r)
	if !s.dueReads() {
		return 1
	}
	return s.table.DueShards
}

// dueReads reports whether status queries read the due index.
func (s *SingleTable) dueReads() bool { return s.table.DueShards > 0 && !s.duePending }

// periodOptions configures the store of the periods and history rows:
// with due shards it keeps their due index, which a due-mode status query
// of the single table reads exactly as the legacy table's (the period
// items and the due keys are the same, only the table's keys differ), one
// shard a page of the table's page size.
func periodOptions(table layout.SingleTableConfig, opts SingleTableOptions, keep layout.CollisionPolicy) Options {
	o := Options{Collisions: keep, Logger: opts.Logger}
	if table.DueShards > 0 {
		o.DueShards, o.StatusIndexMode, o.PageSize = table.DueShards, StatusIndexDue, opts.PageSize
	}
	return o
}

// stCursorPage is the attribute of a due-mode status cursor holding the
// cursor of the periods' store.
const stCursorPage = "page"

// queryDue reads one page of q from the periods' due index, with a
// cursor bound to q's status and range as the DynamoDB store's is. The
// caller holds s.mu.
func (s *SingleTable) queryDue(ctx context.Context, q billing.StatusQuery) (billing.Page, error) {
	scope := fmt.Sprintf("billingtest/single-due/%s/%s/%d/%s/%s/%s/%s", s.table.Table, s.table.DueIndex, s.table.DueShards, q.Status,
		q.Since.UTC().Format(time.RFC3339Nano), q.After.UTC().Format(time.RFC3339Nano), q.Before.UTC().Format(time.RFC3339Nano))
	inner := q
	if q.Cursor != "" {
		key, err := cursor.Decode(scope, q.Cursor, stCursorPage)
		if err != nil {
			return billing.Page{}, fmt.Errorf("%w: %v", billing.ErrInvalidCursor, err)
		}
		inner.Cursor = str(key[stCursorPage])
	}
	p, err := s.periods.Repository().QueryStatus(ctx, inner)
	if err != nil || p.Next == "" {
		return p, err
	}
	if p.Next, err = cursor.Encode(scope, map[string]av.AttributeValue{stCursorPage: &av.AttributeValueMemberS{Value: p.Next}}); err != nil {
		return billing.Page{}, fmt.Errorf("memory: encode cursor: %w", err)
	}
	return p, nil
}
