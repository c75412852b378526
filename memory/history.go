package memory

import (
	"context"
	"errors"
	"fmt"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/av"
	"github.com/dynabill/billing/internal/layout"
)

// Add implements [billing.History.Add]: a put conditional on the key being
// free.
func (h *History) Add(ctx context.Context, sub *billing.Period) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	item, err := historyItem(sub)
	if err != nil {
		return err
	}
	hk := historyKey(item)
	user := h.s.locks.of(hk.pk)
	h.s.locks.lock(user)
	defer h.s.locks.unlock(user)
	if h.s.history.has(hk) {
		return &billing.ConflictError{Op: "history add", Key: historyRowKey(sub), Reason: "history row exists", Err: billing.ErrAlreadyExists, HistoryRow: true}
	}
	h.s.history.put(hk, item)
	return nil
}

// AddAll implements [billing.History.AddAll]. Rows that cannot be encoded
// or that share a key within the call are a *billing.BatchError naming
// every row, and nothing is written; otherwise every row is written
// whose key is free, as the DynamoDB store's conditional puts do. A row
// whose key holds the very same row is written already; one whose key
// holds another row is not written (history is append-only) but named
// in the *billing.BatchError.
func (h *History) AddAll(ctx context.Context, subs []billing.Period) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	items := make([]map[string]av.AttributeValue, len(subs))
	seen := map[tableKey]int{}
	for i := range subs {
		item, err := historyItem(&subs[i])
		if err != nil {
			return historyBatchError(subs, fmt.Errorf("row %d: %w", i, err))
		}
		items[i] = item
		hk := historyKey(items[i])
		if j, dup := seen[hk]; dup {
			return historyBatchError(subs, &billing.ConflictError{
				Op: "history add", Key: historyRowKey(&subs[i]),
				Reason: fmt.Sprintf("rows %d and %d share user_id and last_run_date", j, i), Err: billing.ErrAlreadyExists,
			})
		}
		seen[hk] = i
	}
	h.s.locks.lock(allStripes)
	defer h.s.locks.unlock(allStripes)
	be := &billing.BatchError{}
	for i, item := range items {
		hk := historyKey(item)
		if cur, ok := h.s.history.get(hk); ok {
			if !layout.SameItem(cur, item) {
				be.Unwritten = append(be.Unwritten, historyRowKey(&subs[i]))
				be.Err = errors.Join(be.Err, &billing.ConflictError{Op: "history add", Key: historyRowKey(&subs[i]),
					Reason: "another history row has this user_id and last_run_date: not replaced", Err: billing.ErrAlreadyExists, HistoryRow: true})
			}
			continue
		}
		h.s.history.put(hk, item)
	}
	if len(be.Unwritten) > 0 {
		return be
	}
	return nil
}

// ListBySubscription implements [billing.History.ListBySubscription]:
// rows ascending by last_run_date (then user_id).
func (h *History) ListBySubscription(ctx context.Context, subscriptionID string) ([]billing.Period, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	h.s.locks.rlock(allStripes)
	defer h.s.locks.runlock(allStripes)
	found := h.s.history.withSub(subscriptionID)
	sortByKey(found, true)
	return decodeAll(found)
}

// ListByUser implements [billing.History.ListByUser]: rows that do not
// decode are skipped and reported (see [billing.WithInvalidItems]).
func (h *History) ListByUser(ctx context.Context, userID string) ([]billing.Period, error) {
	rows, invalid, err := h.s.listUser(ctx, h.s.history, userID, false, 0)
	h.s.skipItems(ctx, "history of user ", userID, invalid)
	return rows, err
}

// historyItem encodes sub as a history row to store: EncodeHistoryItem's
// item, sharing no attribute values with sub.
func historyItem(sub *billing.Period) (map[string]av.AttributeValue, error) {
	f := layout.NewFlat()
	defer f.Release()
	if err := f.EncodeHistory(sub); err != nil {
		return nil, err
	}
	return f.Item(true, cloneValue), nil
}

func historyRowKey(s *billing.Period) string {
	return s.Key() + " last_run_date=" + layout.LastRunDateKey(s)
}

func historyBatchError(subs []billing.Period, err error) error {
	keys := make([]string, len(subs))
	for i := range subs {
		keys[i] = historyRowKey(&subs[i])
	}
	return &billing.BatchError{Unwritten: keys, Err: err}
}
