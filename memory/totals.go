package memory

import (
	"context"
	"sync"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/layout"
)

// totals are a store's day totals (see [billing.TotalsRepository]),
// added to under the locks of the write that records the outcome, so a
// write refused adds nothing.
type totals struct {
	mu      sync.Mutex
	days    map[time.Time]*billing.DayTotal
	reasons map[time.Time]map[string]int64
}

// count adds what the write of prev into next adds to the totals (prev
// nil for a record added). The caller holds the locks of the write and
// calls it only once the write is certain.
func (t *totals) count(prev, next *billing.Period) {
	d, ok := layout.TotalsOf(prev, next)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.days == nil {
		t.days = map[time.Time]*billing.DayTotal{}
	}
	day := t.days[d.Day]
	if day == nil {
		day = &billing.DayTotal{Day: d.Day}
		t.days[d.Day] = day
	}
	d.AddTo(day)
	if d.Kind == layout.TotalsDeclined {
		if t.reasons == nil {
			t.reasons = map[time.Time]map[string]int64{}
		}
		if t.reasons[d.Day] == nil {
			t.reasons[d.Day] = map[string]int64{}
		}
		t.reasons[d.Day][d.Reason]++
	}
}

// declineReasons returns the reasons of day's declines.
func (t *totals) declineReasons(ctx context.Context, day time.Time) ([]billing.ReasonCount, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []billing.ReasonCount
	for r, n := range t.reasons[day.UTC().Truncate(24*time.Hour)] {
		out = append(out, billing.ReasonCount{Reason: r, Count: n})
	}
	layout.SortReasons(out)
	return out, nil
}

// read returns the totals of the days of [from, to).
func (t *totals) read(ctx context.Context, from, to time.Time) ([]billing.DayTotal, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	days, err := layout.TotalsDays(from, to)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]billing.DayTotal, len(days))
	for i, d := range days {
		out[i] = billing.DayTotal{Day: d}
		if got := t.days[d]; got != nil {
			out[i] = *got
		}
	}
	return out, nil
}

var _ billing.TotalsRepository = (*Repository)(nil)

// Totals implements [billing.TotalsRepository]: the in-memory store
// always keeps the day totals.
func (r *Repository) Totals(ctx context.Context, from, to time.Time) ([]billing.DayTotal, error) {
	return r.s.totals.read(ctx, from, to)
}

// DeclineReasons implements [billing.TotalsRepository].
func (r *Repository) DeclineReasons(ctx context.Context, day time.Time) ([]billing.ReasonCount, error) {
	return r.s.totals.declineReasons(ctx, day)
}

var _ billing.TotalsRepository = (*stRepository)(nil)

// Totals implements [billing.TotalsRepository] on the single table: the
// totals of its periods' outcomes, always kept.
func (r *stRepository) Totals(ctx context.Context, from, to time.Time) ([]billing.DayTotal, error) {
	return (*SingleTable)(r).periods.totals.read(ctx, from, to)
}

// DeclineReasons implements [billing.TotalsRepository] on the single table.
func (r *stRepository) DeclineReasons(ctx context.Context, day time.Time) ([]billing.ReasonCount, error) {
	return (*SingleTable)(r).periods.totals.declineReasons(ctx, day)
}
