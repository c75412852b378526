package billingtest

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/memory"
)

// totalsEnv is a fresh env whose repository keeps day totals; the case
// is skipped when the store keeps none (a DynamoDB store not configured
// to: its factory decides).
func (s *repoSuite) totalsEnv(t *testing.T) (*repoEnv, billing.TotalsRepository) {
	t.Helper()
	e := s.env(t, memory.Options{})
	tr, ok := e.repo.(billing.TotalsRepository)
	if !ok {
		t.Skip("the repository keeps no day totals (billing.TotalsRepository)")
	}
	if _, err := tr.Totals(e.ctx(), totalsFrom, totalsFrom.AddDate(0, 0, 1)); errors.Is(err, billing.ErrNoTotals) {
		t.Skip("the repository is configured to keep no day totals")
	}
	return e, tr
}

// totalsFrom and totalsTo span every day the suite's records are written
// on (runDate and the completion days below).
var (
	totalsFrom = runBase.AddDate(0, 0, -1)
	totalsTo   = runBase.AddDate(0, 0, 40)
)

// sumTotals reads the totals of [totalsFrom, totalsTo) and adds them up,
// with the reasons of the days that have declines (checked to add up to
// the day's count).
func sumTotals(t *testing.T, e *repoEnv, tr billing.TotalsRepository) (sum totalsSum) {
	t.Helper()
	days, err := tr.Totals(e.ctx(), totalsFrom, totalsTo)
	if err != nil {
		t.Fatalf("Totals: %v", err)
	}
	reasons := map[string]int64{}
	defer func() {
		for r, n := range reasons {
			sum.DeclineReasons = append(sum.DeclineReasons, billing.ReasonCount{Reason: r, Count: n})
		}
	}()
	for _, d := range days {
		sum.Collected.Count += d.Collected.Count
		sum.Collected.Amount += d.Collected.Amount
		sum.Declined.Count += d.Declined.Count
		sum.Declined.Amount += d.Declined.Amount
		sum.Waived.Count += d.Waived.Count
		sum.Waived.Amount += d.Waived.Amount
		sum.Refunded.Count += d.Refunded.Count
		sum.Refunded.Amount += d.Refunded.Amount
		if d.Declined.Count == 0 {
			continue
		}
		rs, err := tr.DeclineReasons(e.ctx(), d.Day)
		if err != nil {
			t.Fatalf("DeclineReasons(%s): %v", d.Day.Format(time.DateOnly), err)
		}
		n := int64(0)
		for _, r := range rs {
			reasons[r.Reason] += r.Count
			n += r.Count
		}
		if n != d.Declined.Count {
			t.Fatalf("%s: reasons %v add up to %d declines, the day's total is %d", d.Day.Format(time.DateOnly), rs, n, d.Declined.Count)
		}
	}
	return sum
}

func (s *repoSuite) totalsCases() []repoCase {
	ids := s.ids
	completeOn := func(prev billing.Period, at time.Time) billing.Period {
		n := ids.next(prev, billing.StatusCompleted)
		n.CompletionDate = at
		n.Attempt = prev.Attempt + 1
		n.TransactionID = "tx-" + n.SubscriptionID
		return n
	}
	decline := func(prev billing.Period, reason string) billing.Period {
		n := ids.next(prev, billing.StatusError)
		n.Attempt = prev.Attempt + 1
		n.PaymentError = reason
		return n
	}
	return []repoCase{
		{"CountsEachOutcomeOnItsDay", func(t *testing.T) {
			// Collections by completion day, declines by reason (a retry
			// declined again counts again), waivers and refunds: each
			// outcome once, on the UTC day the write records.
			e, tr := s.totalsEnv(t)
			day1 := time.Date(2024, 1, 20, 23, 59, 59, 0, time.UTC)
			day2 := time.Date(2024, 1, 21, 0, 0, 1, 0, time.UTC)
			a := ids.record(ids.user(), day(0), billing.StatusScheduled)
			b := ids.record(ids.user(), day(0), billing.StatusScheduled)
			b.Amount = billing.Cents(1000)
			c := ids.record(ids.user(), day(0), billing.StatusScheduled)
			w := ids.record(ids.user(), day(0), billing.StatusScheduled)
			w.Amount = billing.Cents(250)
			e.add(a, b, c, w)
			a2 := completeOn(a, day1)
			e.update(a, a2)
			b2 := completeOn(b, day2)
			e.update(b, b2)
			c2 := decline(c, "insufficient funds")
			e.update(c, c2)
			c3 := decline(c2, "card.declined#do_not_honor") // dots and # in a reason
			e.update(c2, c3)
			c4 := completeOn(c3, day2)
			e.update(c3, c4)
			w2 := ids.next(w, billing.StatusWaived)
			w2.CompletionDate = w2.LastRunDate
			e.update(w, w2)
			r := ids.next(b2, billing.StatusRefunded)
			e.update(b2, r)
			// A write that records no outcome adds nothing.
			p := ids.record(ids.user(), day(0), billing.StatusScheduled)
			e.add(p)
			e.update(p, ids.next(p, billing.StatusPaused))

			days, err := tr.Totals(e.ctx(), day1, day2.AddDate(0, 0, 1))
			if err != nil {
				t.Fatalf("Totals: %v", err)
			}
			if len(days) != 2 || !days[0].Day.Equal(time.Date(2024, 1, 20, 0, 0, 0, 0, time.UTC)) || !days[1].Day.Equal(time.Date(2024, 1, 21, 0, 0, 0, 0, time.UTC)) {
				t.Fatalf("Totals(Jan 20, Jan 22) = %d days %v; want Jan 20 and Jan 21", len(days), days)
			}
			if got := days[0].Collected; got != (billing.Tally{Count: 1, Amount: 499}) {
				t.Errorf("Jan 20 collected %+v, want 1 period of 4.99", got)
			}
			if got := days[1].Collected; got != (billing.Tally{Count: 2, Amount: 1499}) {
				t.Errorf("Jan 21 collected %+v, want 2 periods, 14.99", got)
			}
			sum := sumTotals(t, e, tr)
			if sum.Collected != (billing.Tally{Count: 3, Amount: 1998}) {
				t.Errorf("collected in all %+v, want 3 periods, 19.98", sum.Collected)
			}
			if sum.Declined != (billing.Tally{Count: 2, Amount: 998}) {
				t.Errorf("declined %+v, want 2 attempts of 4.99", sum.Declined)
			}
			requireReasons(t, sum.DeclineReasons, map[string]int64{"insufficient funds": 1, "card.declined#do_not_honor": 1})
			if sum.Waived != (billing.Tally{Count: 1, Amount: 250}) {
				t.Errorf("waived %+v, want 1 period of 2.50", sum.Waived)
			}
			if sum.Refunded != (billing.Tally{Count: 1, Amount: 1000}) {
				t.Errorf("refunded %+v, want 1 period of 10.00", sum.Refunded)
			}
		}},
		{"RefusedOrRepeatedWriteCountsOnce", func(t *testing.T) {
			// The same outcome written twice (a retry after a crash, a
			// second instance) is refused the second time, and counted once;
			// a write refused for a stale read counts nothing.
			e, tr := s.totalsEnv(t)
			a := ids.record(ids.user(), day(0), billing.StatusScheduled)
			e.add(a)
			a2 := completeOn(a, runBase)
			e.update(a, a2)
			err := e.repo.Update(e.ctx(), &a, &a2)
			requireConflict(t, err, billing.ErrConflict, "", a.UserID)
			stale := completeOn(a, runBase)
			requireConflict(t, e.repo.Update(e.ctx(), &a, &stale), billing.ErrConflict, "", a.UserID)
			d := ids.record(ids.user(), day(0), billing.StatusScheduled)
			e.add(d)
			d2 := decline(d, "expired card")
			e.update(d, d2)
			requireConflict(t, e.repo.Update(e.ctx(), &d, &d2), billing.ErrConflict, "", d.UserID)
			sum := sumTotals(t, e, tr)
			if sum.Collected != (billing.Tally{Count: 1, Amount: 499}) || sum.Declined.Count != 1 {
				t.Fatalf("totals after repeats: collected %+v, declined %+v; want 1 and 1", sum.Collected, sum.Declined)
			}
		}},
		{"CreatedRecordsAndAddsCount", func(t *testing.T) {
			// A record added, or created with an update, in an outcome
			// (an import of a collected period) counts; a host's batch
			// (AddAll) does not.
			e, tr := s.totalsEnv(t)
			done := ids.record(ids.user(), day(-30), billing.StatusCompleted)
			done.CompletionDate = runBase
			e.add(done)
			a := ids.record(ids.user(), day(0), billing.StatusScheduled)
			e.add(a)
			a2 := ids.next(a, billing.StatusCancelled)
			a2.CompletionDate = a2.LastRunDate
			imported := ids.record(a.UserID, day(-60), billing.StatusCompleted)
			imported.CompletionDate = runBase
			if err := e.repo.Update(e.ctx(), &a, &a2, &imported); err != nil {
				t.Fatalf("Update with a created record: %v", err)
			}
			batch := ids.record(ids.user(), day(-90), billing.StatusCompleted)
			batch.CompletionDate = runBase
			if _, err := e.repo.AddAll(e.ctx(), []billing.Period{batch}); err != nil {
				t.Fatalf("AddAll: %v", err)
			}
			if sum := sumTotals(t, e, tr); sum.Collected != (billing.Tally{Count: 2, Amount: 998}) {
				t.Fatalf("collected %+v, want the added and the created record: 2, 9.98", sum.Collected)
			}
		}},
		{"ConcurrentWritersOfOneDay", func(t *testing.T) {
			// Collections of many users on one day, at once: none is lost
			// (on DynamoDB they share counter items, and a transaction
			// cancelled by another's write of them is retried).
			e, tr := s.totalsEnv(t)
			const n = 12
			recs := make([]billing.Period, n)
			for i := range recs {
				recs[i] = ids.record(ids.user(), day(0), billing.StatusScheduled)
				recs[i].Amount = billing.Cents(int64(100 + i))
			}
			e.add(recs...)
			var wg sync.WaitGroup
			errs := make([]error, n)
			for i := range recs {
				wg.Go(func() {
					next := completeOn(recs[i], runBase)
					errs[i] = e.repo.Update(e.ctx(), &recs[i], &next)
				})
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatalf("concurrent collections: %v", err)
			}
			want := billing.Tally{Count: n}
			for i := range recs {
				want.Amount += recs[i].Amount
			}
			if sum := sumTotals(t, e, tr); sum.Collected != want {
				t.Fatalf("collected %+v, want %+v", sum.Collected, want)
			}
		}},
		{"ReasonsAreCutAndRangeChecked", func(t *testing.T) {
			e, tr := s.totalsEnv(t)
			long := strings.Repeat("é", billing.MaxTotalsReason) // 2 bytes each
			a := ids.record(ids.user(), day(0), billing.StatusScheduled)
			e.add(a)
			a2 := decline(a, long)
			e.update(a, a2)
			sum := sumTotals(t, e, tr)
			requireReasons(t, sum.DeclineReasons, map[string]int64{long[:billing.MaxTotalsReason]: 1})
			if _, err := tr.Totals(e.ctx(), runBase, runBase); !errors.Is(err, billing.ErrInvalidQuery) {
				t.Errorf("Totals of an empty range: %v, want ErrInvalidQuery", err)
			}
			if _, err := tr.Totals(e.ctx(), runBase, runBase.AddDate(0, 0, billing.MaxTotalsDays+1)); !errors.Is(err, billing.ErrInvalidQuery) {
				t.Errorf("Totals of %d days: %v, want ErrInvalidQuery", billing.MaxTotalsDays+1, err)
			}
			days, err := tr.Totals(e.ctx(), runBase.AddDate(0, 0, 100), runBase.AddDate(0, 0, 103))
			if err != nil || len(days) != 3 || days[2].Collected.Count != 0 || !days[2].Day.Equal(runBase.Truncate(24*time.Hour).AddDate(0, 0, 102)) {
				t.Fatalf("Totals of 3 empty days = %v, %v; want 3 zero days", days, err)
			}
		}},
	}
}

// totalsSum is the totals of many days, with their decline reasons.
type totalsSum struct {
	billing.DayTotal
	DeclineReasons []billing.ReasonCount
}

// requireReasons checks the decline reasons, in any order.
func requireReasons(t *testing.T, got []billing.ReasonCount, want map[string]int64) {
	t.Helper()
	m := map[string]int64{}
	for _, r := range got {
		m[r.Reason] += r.Count
	}
	if len(m) != len(want) {
		t.Fatalf("decline reasons %v, want %v", got, want)
	}
	for r, n := range want {
		if m[r] != n {
			t.Fatalf("decline reasons %v, want %v", got, want)
		}
	}
}
