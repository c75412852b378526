package layout

import (
	"fmt"
	"reflect"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/av"
	"github.com/dynabill/billing/internal/timefmt"
)

// HistoryKeySpan is how far past its own last_run_date a batch record's
// history row may move when another row holds its key: to the first
// free nanosecond after it, at most HistoryKeySpan - 1ns on. A thousand
// keys within a microsecond of one user's write are never all taken by
// real writes; when they are, the record is refused.
const HistoryKeySpan = time.Microsecond

// RowPlan is where a record of a batch ([billing.Repository.AddAll])
// writes its history row.
type RowPlan struct {
	// LastRunDate is the record's history key, and so its last_run_date:
	// the record's own, or a later one when another row holds that key.
	LastRunDate time.Time
	// Moved reports that LastRunDate is not the record's own.
	Moved bool
	// RowStored reports that the very row the record writes is already
	// stored at LastRunDate: an earlier try of the batch wrote it (or the
	// host imported it). The row is not written again.
	RowStored bool
	// Err refuses the record: every key of the span holds another row. It
	// is a [*billing.ConflictError] wrapping [billing.ErrAlreadyExists]
	// with HistoryRow set.
	Err error
}

// PlanHistoryRows decides where each record of a batch writes its
// history row so that no stored row is ever replaced (history is
// append-only). recs are the batch after its collision policy, which
// left no two of one user sharing a last_run_date. stored returns the
// row stored at a history key of record i's user (a last_run_date as
// [LastRunDateKey] writes it); want returns the row record i writes when
// its last_run_date is at. For each record, in order:
//
//   - its own key, when free or holding the very row want gives;
//   - else the first of its last_run_date + 1ns, + 2ns, … (less than
//     [HistoryKeySpan] on) that no record of the batch takes and that is
//     free or holds the very row (an earlier try moved it there);
//   - else the record is refused ([RowPlan.Err]).
//
// A moved record's primary item must take the moved last_run_date too:
// the engine finds a record's latest row by it and fences its writes
// on it. stored is asked only about the record's own key and, when that
// holds another row, the keys of the span after it ([HistorySpanKeys]).
func PlanHistoryRows(recs []billing.Period, stored func(i int, key string) (map[string]av.AttributeValue, bool),
	want func(i int, at time.Time) (map[string]av.AttributeValue, error)) ([]RowPlan, error) {
	plans := make([]RowPlan, len(recs))
	taken := make(map[string]bool, len(recs))
	for i := range recs {
		taken[recs[i].UserID+"\x00"+LastRunDateKey(&recs[i])] = true
	}
	for i := range recs {
		own := LastRunDateKey(&recs[i])
		plans[i].LastRunDate = recs[i].LastRunDate
		row, ok := stored(i, own)
		if !ok {
			continue
		}
		w, err := want(i, recs[i].LastRunDate)
		if err != nil {
			return nil, err
		}
		if SameItem(row, w) {
			plans[i].RowStored = true
			continue
		}
		plans[i].Err = &billing.ConflictError{Op: "add all", Key: recs[i].Key(),
			Reason: fmt.Sprintf("another history row holds last_run_date %s and every key of the %v after it", own, HistoryKeySpan), Err: billing.ErrAlreadyExists, HistoryRow: true}
		for n := time.Duration(1); n < HistoryKeySpan; n++ {
			at := recs[i].LastRunDate.Add(n)
			key, _ := timefmt.Nanos(at)
			if taken[recs[i].UserID+"\x00"+key] {
				continue
			}
			row, ok := stored(i, key)
			if ok {
				w, err := want(i, at)
				if err != nil {
					return nil, err
				}
				if !SameItem(row, w) {
					continue
				}
			}
			taken[recs[i].UserID+"\x00"+key] = true
			plans[i] = RowPlan{LastRunDate: at, Moved: true, RowStored: ok}
			break
		}
	}
	return plans, nil
}

// HistorySpanKeys returns the lowest and highest history keys a record
// whose own key is taken may move to (see [PlanHistoryRows]): the range
// of a key condition that reads every row it may be asked about.
func HistorySpanKeys(s *billing.Period) (lo, hi string) {
	lo, _ = timefmt.Nanos(s.LastRunDate.Add(1))
	hi, _ = timefmt.Nanos(s.LastRunDate.Add(HistoryKeySpan - 1))
	return lo, hi
}

// SameItem reports whether two stored items hold the same attributes
// with the same values, an absent item being an empty one.
func SameItem(a, b map[string]av.AttributeValue) bool {
	if len(a) != len(b) {
		return false
	}
	return len(a) == 0 || reflect.DeepEqual(a, b)
}

// WrittenSince reports whether the stored primary item prim has a
// last_run_date at or after at: a record whose history row at at is
// stored ([RowPlan.RowStored]) was written there by an earlier try of
// the batch, and maybe changed since, so it is not written again. An
// item with an older last_run_date (the row was imported before the
// record) is written, without its row.
func WrittenSince(prim map[string]av.AttributeValue, at time.Time) bool {
	t, err := timefmt.Parse(StringOf(prim[AttrLastRunDate]))
	return err == nil && !t.Before(at)
}

// ChangedSince reports whether the stored primary item prim was written
// after at, the last_run_date of the copy a batch record was made from:
// the record changed after the host read it (a collection, an admin
// change), so the copy is stale and must not be written over it.
func ChangedSince(prim map[string]av.AttributeValue, at time.Time) bool {
	t, err := timefmt.Parse(StringOf(prim[AttrLastRunDate]))
	return err == nil && t.After(at)
}

// StaleCopyError refuses a batch record whose stored record
// [ChangedSince] the copy it was made from: a [*billing.ConflictError]
// wrapping [billing.ErrConflict]. Written over, a period collected since
// would go back to being owed, and be charged again.
func StaleCopyError(rec *billing.Period) error {
	return &billing.ConflictError{Op: "add all", Key: rec.Key(),
		Reason: "the stored record was written after the copy this record was made from (a later last_run_date): not overwritten; read it again",
		Err:    billing.ErrConflict}
}
