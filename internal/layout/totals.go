package layout

import (
	"cmp"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/dynabill/billing"
)

// TotalsKind is which day total an outcome adds to.
type TotalsKind int

// The outcomes counted (see billing.TotalsRepository).
const (
	TotalsCollected TotalsKind = iota + 1
	TotalsDeclined
	TotalsWaived
	TotalsRefunded
)

// TotalsDelta is what one record's write adds to the day totals: one
// period of Kind, its Amount, on Day (UTC midnight); Reason for a decline.
type TotalsDelta struct {
	Day    time.Time
	Kind   TotalsKind
	Amount billing.Amount
	Reason string
}

// TotalsOf returns what the write of prev into next adds to the day
// totals (prev nil for a record added), and false when it adds nothing:
// the rules of billing.TotalsRepository. Every store derives its counter
// updates from it, in the transaction of the write.
func TotalsOf(prev, next *billing.Period) (TotalsDelta, bool) {
	if next == nil {
		return TotalsDelta{}, false
	}
	was := billing.Status("")
	if prev != nil {
		was = prev.Status
	}
	day := func(t time.Time) time.Time {
		if t.IsZero() {
			t = next.LastRunDate
		}
		return t.UTC().Truncate(24 * time.Hour)
	}
	switch {
	case next.Status == billing.StatusCompleted && was != billing.StatusCompleted && next.Amount > 0:
		return TotalsDelta{Day: day(next.CompletionDate), Kind: TotalsCollected, Amount: next.Amount}, true
	case next.Status == billing.StatusError && (was != billing.StatusError || next.Attempt > prev.Attempt):
		return TotalsDelta{Day: day(time.Time{}), Kind: TotalsDeclined, Amount: next.Amount, Reason: TotalsReason(next.PaymentError)}, true
	case next.Status == billing.StatusWaived && was != billing.StatusWaived:
		return TotalsDelta{Day: day(time.Time{}), Kind: TotalsWaived, Amount: next.Amount}, true
	case next.Status == billing.StatusRefunded && was != billing.StatusRefunded:
		return TotalsDelta{Day: day(time.Time{}), Kind: TotalsRefunded, Amount: next.Amount}, true
	}
	return TotalsDelta{}, false
}

// TotalsReason is reason cut to billing.MaxTotalsReason bytes at a
// character boundary.
func TotalsReason(reason string) string {
	if len(reason) <= billing.MaxTotalsReason {
		return reason
	}
	cut := billing.MaxTotalsReason
	for cut > 0 && !utf8.RuneStart(reason[cut]) {
		cut--
	}
	return reason[:cut]
}

// TotalsShard is the counter shard of userID's outcomes among k: the
// shard of the due index (FNV-1a of the user ID), so that concurrent
// writers of one day spread over k items.
func TotalsShard(userID string, k int) int { return DueShard(userID, k) }

// AddTo adds d to t, t's day being d's.
func (d TotalsDelta) AddTo(t *billing.DayTotal) {
	switch d.Kind {
	case TotalsCollected:
		t.Collected.Count++
		t.Collected.Amount += d.Amount
	case TotalsDeclined:
		t.Declined.Count++
		t.Declined.Amount += d.Amount
	case TotalsWaived:
		t.Waived.Count++
		t.Waived.Amount += d.Amount
	case TotalsRefunded:
		t.Refunded.Count++
		t.Refunded.Amount += d.Amount
	}
}

// SortReasons orders reasons as billing.TotalsRepository.DeclineReasons
// returns them: the most frequent first, ties by reason.
func SortReasons(reasons []billing.ReasonCount) {
	slices.SortFunc(reasons, func(a, b billing.ReasonCount) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return cmp.Compare(a.Reason, b.Reason)
	})
}

// MergeTotals adds the counts of from into into (the same day).
func MergeTotals(into *billing.DayTotal, from billing.DayTotal) {
	into.Collected.Count += from.Collected.Count
	into.Collected.Amount += from.Collected.Amount
	into.Declined.Count += from.Declined.Count
	into.Declined.Amount += from.Declined.Amount
	into.Waived.Count += from.Waived.Count
	into.Waived.Amount += from.Waived.Amount
	into.Refunded.Count += from.Refunded.Count
	into.Refunded.Amount += from.Refunded.Amount
}

// TotalsDays returns the UTC midnights of the days [billing.TotalsRepository.Totals]
// reads for from and to, checking the range: not empty, at most
// [billing.MaxTotalsDays] days. Stores check their queries with it.
func TotalsDays(from, to time.Time) ([]time.Time, error) {
	first, end := from.UTC().Truncate(24*time.Hour), to.UTC().Truncate(24*time.Hour)
	n := int(end.Sub(first) / (24 * time.Hour))
	switch {
	case n <= 0:
		return nil, fmt.Errorf("%w: empty day range [%s, %s)", billing.ErrInvalidQuery, first.Format(time.DateOnly), end.Format(time.DateOnly))
	case n > billing.MaxTotalsDays:
		return nil, fmt.Errorf("%w: %d days of totals, at most %d", billing.ErrInvalidQuery, n, billing.MaxTotalsDays)
	}
	days := make([]time.Time, n)
	for i := range days {
		days[i] = first.AddDate(0, 0, i)
	}
	return days, nil
}
