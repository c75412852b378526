package billingtest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/av"
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/memory"
)

// updateRacers is the number of goroutines racing to update one record.
const updateRacers = 8

// requireUnchanged checks that a failed write left the user's records and
// history exactly as before.
func (e *repoEnv) requireUnchanged(userID string, records, history []billing.Period) {
	e.t.Helper()
	got := e.list(userID)
	if len(got) != len(records) {
		e.t.Fatalf("user %s has %d records after a failed write, want %d", userID, len(got), len(records))
	}
	for i := range got {
		if d := diffStored(&got[i], &records[i]); d != "" {
			e.t.Fatalf("record %s changed by a failed write: %s", records[i].Key(), d)
		}
	}
	rows := e.historyRows(userID)
	if len(rows) != len(history) {
		e.t.Fatalf("user %s has %d history rows after a failed write, want %d", userID, len(rows), len(history))
	}
	for i := range rows {
		if d := diffHistoryRow(&rows[i], &history[i]); d != "" {
			e.t.Fatalf("history row %d changed by a failed write: %s", i, d)
		}
	}
}

// snapshot returns the user's records and history rows.
func (e *repoEnv) snapshot(userID string) (records, history []billing.Period) {
	e.t.Helper()
	return e.list(userID), e.historyRows(userID)
}

func (s *repoSuite) updateCases() []repoCase {
	ids := s.ids
	// added returns a fresh env and a stored SCHEDULED record.
	added := func(t *testing.T) (*repoEnv, billing.Period) {
		t.Helper()
		e := s.env(t, memory.Options{})
		r := ids.record(ids.user(), day(0), billing.StatusScheduled)
		e.add(r)
		return e, r
	}
	return []repoCase{
		{"ReopenCancelledNeverAttempted", func(t *testing.T) {
			// A user who cancelled at period end comes back on the
			// cancelled renewal's date: the record is reopened in place,
			// maybe under a new subscription ID, its history appended.
			e := s.env(t, memory.Options{})
			r := ids.record(ids.user(), day(0), billing.StatusScheduled)
			e.add(r)
			cancelled := ids.next(r, billing.StatusCancelled)
			cancelled.CompletionDate = cancelled.LastRunDate
			e.update(r, cancelled)
			back := ids.next(cancelled, billing.StatusScheduled)
			back.SubscriptionID = ids.subID()
			back.CompletionDate = time.Time{}
			back.Process = billing.ProcessSubscribe
			back.CreatedDate = back.LastRunDate
			e.update(cancelled, back)
			e.requireStored(back)
			got, err := e.repo.GetByID(e.ctx(), back.SubscriptionID)
			if err != nil || got.SubscriptionID != back.SubscriptionID || !got.BillingDate.Equal(r.BillingDate) {
				t.Fatalf("GetByID(new ID) = %s %v, %v; want the reopened record", got.SubscriptionID, got.BillingDate, err)
			}
			if _, err := e.repo.GetByID(e.ctx(), r.SubscriptionID); !errors.Is(err, billing.ErrNotFound) {
				t.Fatalf("GetByID(old ID) error = %v, want ErrNotFound: the record has the new ID", err)
			}
			rows, err := e.hist.ListBySubscription(e.ctx(), r.SubscriptionID)
			if err != nil || len(rows) != 2 || rows[1].Status != billing.StatusCancelled {
				t.Fatalf("history of the old ID = %d rows, %v; want SCHEDULED then CANCELLED, kept", len(rows), err)
			}
			e.requireHistoryCount(r.UserID, 3)
			e.requireLastHistoryRow(back)
			open := e.list(r.UserID)
			if len(open) != 1 || open[0].Status != billing.StatusScheduled {
				t.Fatalf("records after the reopen = %+v, want the one SCHEDULED", open)
			}
		}},
		{"ReopenAttemptedCancelledRefused", func(t *testing.T) {
			e := s.env(t, memory.Options{})
			r := ids.record(ids.user(), day(0), billing.StatusError)
			r.InitialRunDate, r.Attempt, r.PaymentError = r.LastRunDate, 1, "declined"
			e.add(r)
			cancelled := ids.next(r, billing.StatusCancelled)
			e.update(r, cancelled)
			records, history := e.snapshot(r.UserID)
			back := ids.next(cancelled, billing.StatusScheduled)
			requireRejected(t, e.repo.Update(e.ctx(), &cancelled, &back), billing.ErrIllegalTransition)
			back.SubscriptionID = ids.subID()
			requireRejected(t, e.repo.Update(e.ctx(), &cancelled, &back), billing.ErrIllegalTransition)
			e.requireUnchanged(r.UserID, records, history)
		}},
		{"Success", func(t *testing.T) {
			e, r := added(t)
			next := ids.next(r, billing.StatusError)
			next.PaymentError = "R01 insufficient funds"
			next.TransactionID = "txn-1"
			next.Process = billing.ProcessInitial
			next.InitialRunDate = next.LastRunDate
			next.Attempt = 1
			layout.SetDataAttributes(&next, map[string]av.AttributeValue{"data_reason": &av.AttributeValueMemberS{Value: "declined"}})
			e.update(r, next)
			e.requireStored(next)
			got := e.get(r.UserID, r.BillingDate)
			if got.Status != billing.StatusError || got.PaymentError != "R01 insufficient funds" || got.Attempt != 1 {
				t.Fatalf("record after Update = %s %q attempt %d", got.Status, got.PaymentError, got.Attempt)
			}
			rows, err := e.hist.ListBySubscription(e.ctx(), r.SubscriptionID)
			if err != nil || len(rows) != 2 || rows[0].Status != billing.StatusScheduled || rows[1].Status != billing.StatusError {
				t.Fatalf("history of the subscription = %d rows, %v; want SCHEDULED then ERROR", len(rows), err)
			}
			e.requireLastHistoryRow(next)
			RequireHistoryMatchesPrimary(t, e.repo, e.hist, r.UserID)
		}},
		{"ChainOfUpdates", func(t *testing.T) {
			e, r := added(t)
			statuses := []billing.Status{billing.StatusError, billing.StatusError, billing.StatusACHSent, billing.StatusCompleted, billing.StatusRefunded}
			prev := r
			for i, st := range statuses {
				next := ids.next(prev, st)
				next.Attempt = i + 1
				e.update(prev, next)
				prev = next
			}
			e.requireStored(prev)
			rows := e.historyRows(r.UserID)
			want := append([]billing.Status{billing.StatusScheduled}, statuses...)
			if len(rows) != len(want) {
				t.Fatalf("%d history rows, want %d", len(rows), len(want))
			}
			for i := range rows {
				if rows[i].Status != want[i] || rows[i].Attempt != i {
					t.Fatalf("history row %d = %s attempt %d, want %s attempt %d", i, rows[i].Status, rows[i].Attempt, want[i], i)
				}
			}
			RequireHistoryMatchesPrimary(t, e.repo, e.hist, r.UserID)
		}},
		{"KeepsUnknownAttributes", func(t *testing.T) {
			e := s.env(t, memory.Options{})
			r := ids.record(ids.user(), day(0), billing.StatusScheduled)
			layout.SetExtraAttributes(&r, map[string]av.AttributeValue{"other_service_flag": &av.AttributeValueMemberS{Value: "x"}})
			e.add(r)
			read := e.get(r.UserID, r.BillingDate)
			next := ids.next(read, billing.StatusACHSent)
			e.update(read, next)
			got := e.get(r.UserID, r.BillingDate)
			if v, ok := layout.ExtraAttributes(&got)["other_service_flag"].(*av.AttributeValueMemberS); !ok || v.Value != "x" || got.Status != billing.StatusACHSent {
				t.Fatalf("after Update: status %s, Extra %v; want ACHSENT with other_service_flag kept", got.Status, layout.ExtraAttributes(&got))
			}
		}},
		{"StaleStatus", func(t *testing.T) {
			e, r := added(t)
			cur := ids.next(r, billing.StatusError)
			e.update(r, cur)
			recs, hist := e.snapshot(r.UserID)
			stale := cur.Clone()
			stale.Status = billing.StatusScheduled // what the writer read; last_run_date current
			next := ids.next(stale, billing.StatusCompleted)
			requireConflict(t, e.repo.Update(e.ctx(), &stale, &next), billing.ErrConflict, "update", r.UserID)
			e.requireUnchanged(r.UserID, recs, hist)
		}},
		{"StaleLastRunDate", func(t *testing.T) {
			e, r := added(t)
			recs, hist := e.snapshot(r.UserID)
			stale := r.Clone()
			stale.LastRunDate = r.LastRunDate.Add(-time.Minute) // status current
			next := ids.next(stale, billing.StatusError)
			requireConflict(t, e.repo.Update(e.ctx(), &stale, &next), billing.ErrConflict, "update", r.UserID)
			e.requireUnchanged(r.UserID, recs, hist)
		}},
		{"LostRace", func(t *testing.T) {
			e, r := added(t)
			edit := ids.next(r, billing.StatusScheduled) // someone else's edit keeps the status
			edit.Amount = billing.Cents(599)
			e.update(r, edit)
			recs, hist := e.snapshot(r.UserID)
			mine := ids.next(r, billing.StatusCompleted)
			requireConflict(t, e.repo.Update(e.ctx(), &r, &mine), billing.ErrConflict, "update", r.UserID)
			e.requireUnchanged(r.UserID, recs, hist)
		}},
		{"RecordGone", func(t *testing.T) {
			e, r := added(t)
			moved := ids.next(r, billing.StatusScheduled)
			moved.BillingDate = day(3)
			moved.BillingPeriod = billing.BillingPeriod(moved.BillingDate)
			if err := e.repo.AdminUpdate(e.ctx(), &r, &moved); err != nil {
				t.Fatalf("AdminUpdate: %v", err)
			}
			recs, hist := e.snapshot(r.UserID)
			next := ids.next(r, billing.StatusError)
			requireConflict(t, e.repo.Update(e.ctx(), &r, &next), billing.ErrConflict, "update", r.UserID)
			e.requireAbsent(r.UserID, r.BillingDate)
			e.requireUnchanged(r.UserID, recs, hist)
		}},
		{"NeverAdded", func(t *testing.T) {
			e := s.env(t, memory.Options{})
			r := ids.record(ids.user(), day(0), billing.StatusScheduled)
			next := ids.next(r, billing.StatusError)
			requireConflict(t, e.repo.Update(e.ctx(), &r, &next), billing.ErrConflict, "update", r.UserID)
			e.requireAbsent(r.UserID, r.BillingDate)
			e.requireHistoryCount(r.UserID, 0)
		}},
		{"IllegalTransition", func(t *testing.T) {
			e := s.env(t, memory.Options{})
			for _, c := range []struct {
				from, to  billing.Status
				attempted bool
			}{
				{billing.StatusCompleted, billing.StatusScheduled, true},
				{billing.StatusACHSent, billing.StatusScheduled, true},
				// Only a cancelled period never attempted is reopened
				// (billing.CheckTransition), and only as SCHEDULED
				// or PAUSED.
				{billing.StatusCancelled, billing.StatusScheduled, true},
				{billing.StatusCancelled, billing.StatusError, false},
				{billing.StatusScheduled, billing.StatusRefunded, false},
				{billing.StatusScheduled, billing.StatusInactive, false},
			} {
				r := ids.record(ids.user(), day(0), c.from)
				if c.attempted {
					r.InitialRunDate, r.Attempt = r.LastRunDate, 1
				}
				e.add(r)
				recs, hist := e.snapshot(r.UserID)
				next := ids.next(r, c.to)
				err := e.repo.Update(e.ctx(), &r, &next)
				requireRejected(t, err, billing.ErrIllegalTransition)
				e.requireUnchanged(r.UserID, recs, hist)
			}
		}},
		{"LastRunDateMustAdvance", func(t *testing.T) {
			e, r := added(t)
			recs, hist := e.snapshot(r.UserID)
			for _, lr := range []time.Time{r.LastRunDate, r.LastRunDate.Add(-time.Nanosecond), r.LastRunDate.Add(-time.Hour)} {
				next := r.Clone()
				next.Status = billing.StatusError
				next.LastRunDate = lr
				requireRejected(t, e.repo.Update(e.ctx(), &r, &next), billing.ErrInvalidItem)
			}
			e.requireUnchanged(r.UserID, recs, hist)
		}},
		{"BillingDateChangeRejected", func(t *testing.T) {
			e, r := added(t)
			recs, hist := e.snapshot(r.UserID)
			next := ids.next(r, billing.StatusScheduled)
			next.BillingDate = day(1)
			requireRejected(t, e.repo.Update(e.ctx(), &r, &next), billing.ErrInvalidItem)
			e.requireAbsent(r.UserID, day(1))
			e.requireUnchanged(r.UserID, recs, hist)
		}},
		{"IdentityChangeRejected", func(t *testing.T) {
			e, r := added(t)
			recs, hist := e.snapshot(r.UserID)
			otherUser := ids.next(r, billing.StatusError)
			otherUser.UserID = ids.user()
			requireRejected(t, e.repo.Update(e.ctx(), &r, &otherUser), billing.ErrInvalidItem)
			otherID := ids.next(r, billing.StatusError)
			otherID.SubscriptionID = ids.subID()
			requireRejected(t, e.repo.Update(e.ctx(), &r, &otherID), billing.ErrInvalidItem)
			e.requireUnchanged(r.UserID, recs, hist)
			e.requireHistoryCount(otherUser.UserID, 0)
		}},
		{"HistoryRowTaken", func(t *testing.T) {
			e, r := added(t)
			other := ids.record(r.UserID, day(31), billing.StatusCompleted)
			e.add(other)
			recs, hist := e.snapshot(r.UserID)
			next := r.Clone()
			next.Status = billing.StatusError
			next.LastRunDate = other.LastRunDate // later than r's, but its history row exists
			requireConflict(t, e.repo.Update(e.ctx(), &r, &next), billing.ErrConflict, "update", r.UserID)
			e.requireUnchanged(r.UserID, recs, hist)
		}},
		{"ConcurrentRace", func(t *testing.T) {
			e, r := added(t)
			nexts := make([]billing.Period, updateRacers)
			for i := range nexts {
				nexts[i] = ids.next(r, billing.StatusError)
				nexts[i].TransactionID = "racer-" + string(rune('a'+i))
			}
			errs := make([]error, updateRacers)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range nexts {
				wg.Go(func() {
					<-start
					prev := r.Clone()
					errs[i] = e.repo.Update(e.ctx(), &prev, &nexts[i])
				})
			}
			close(start)
			wg.Wait()
			winner := -1
			for i, err := range errs {
				switch {
				case err == nil && winner < 0:
					winner = i
				case err == nil:
					t.Fatalf("racers %d and %d both updated from the same prev", winner, i)
				case !errors.Is(err, billing.ErrConflict):
					t.Fatalf("racer %d: %v, want ErrConflict", i, err)
				}
			}
			if winner < 0 {
				t.Fatalf("no racer won: %v", errs)
			}
			e.requireStored(nexts[winner])
			e.requireHistoryCount(r.UserID, 2)
			e.requireLastHistoryRow(nexts[winner])
		}},
	}
}

func (s *repoSuite) adminUpdateCases() []repoCase {
	ids := s.ids
	added := func(t *testing.T) (*repoEnv, billing.Period) {
		t.Helper()
		e := s.env(t, memory.Options{})
		r := ids.record(ids.user(), day(0), billing.StatusScheduled)
		e.add(r)
		return e, r
	}
	moveTo := func(prev billing.Period, d time.Time) billing.Period {
		next := ids.next(prev, billing.StatusScheduled)
		next.BillingDate = d
		next.BillingPeriod = billing.BillingPeriod(d)
		return next
	}
	return []repoCase{
		{"MovesBillingDate", func(t *testing.T) {
			e, r := added(t)
			next := moveTo(r, day(40))
			if err := e.repo.AdminUpdate(e.ctx(), &r, &next); err != nil {
				t.Fatalf("AdminUpdate: %v", err)
			}
			e.requireAbsent(r.UserID, r.BillingDate)
			e.requireStored(next)
			got, err := e.repo.GetByID(e.ctx(), r.SubscriptionID)
			if err != nil || !got.BillingDate.Equal(day(40)) {
				t.Fatalf("GetByID after the move = %s, %v; want the record at %s", got.Key(), err, day(40).Format(time.RFC3339))
			}
			if recs := e.list(r.UserID); len(recs) != 1 {
				t.Fatalf("user has %d records after the move, want 1", len(recs))
			}
			e.requireHistoryCount(r.UserID, 2)
			e.requireLastHistoryRow(next)
			RequireHistoryMatchesPrimary(t, e.repo, e.hist, r.UserID)
		}},
		{"OntoTakenKey", func(t *testing.T) {
			e, r := added(t)
			other := ids.record(r.UserID, day(31), billing.StatusCompleted)
			e.add(other)
			recs, hist := e.snapshot(r.UserID)
			next := moveTo(r, day(31))
			requireConflict(t, e.repo.AdminUpdate(e.ctx(), &r, &next), billing.ErrConflict, "admin update", r.UserID)
			e.requireUnchanged(r.UserID, recs, hist)
		}},
		{"StalePrev", func(t *testing.T) {
			e, r := added(t)
			cur := ids.next(r, billing.StatusPaused)
			cur.PauseDurationMonths = 2
			e.update(r, cur)
			recs, hist := e.snapshot(r.UserID)
			next := moveTo(r, day(10))
			requireConflict(t, e.repo.AdminUpdate(e.ctx(), &r, &next), billing.ErrConflict, "admin update", r.UserID)
			e.requireAbsent(r.UserID, day(10))
			e.requireUnchanged(r.UserID, recs, hist)
		}},
		{"RecordGone", func(t *testing.T) {
			e, r := added(t)
			first := moveTo(r, day(10))
			if err := e.repo.AdminUpdate(e.ctx(), &r, &first); err != nil {
				t.Fatalf("AdminUpdate: %v", err)
			}
			recs, hist := e.snapshot(r.UserID)
			second := moveTo(r, day(20))
			requireConflict(t, e.repo.AdminUpdate(e.ctx(), &r, &second), billing.ErrConflict, "admin update", r.UserID)
			e.requireAbsent(r.UserID, day(20))
			e.requireUnchanged(r.UserID, recs, hist)
		}},
		{"SameDateActsAsUpdate", func(t *testing.T) {
			e, r := added(t)
			next := ids.next(r, billing.StatusWaived)
			if err := e.repo.AdminUpdate(e.ctx(), &r, &next); err != nil {
				t.Fatalf("AdminUpdate with the same billing_date: %v", err)
			}
			e.requireStored(next)
			e.requireHistoryCount(r.UserID, 2)
			e.requireLastHistoryRow(next)
			recs, hist := e.snapshot(r.UserID)
			stale := ids.next(r, billing.StatusCancelled)
			err := e.repo.AdminUpdate(e.ctx(), &r, &stale)
			requireConflict(t, err, billing.ErrConflict, "", r.UserID)
			e.requireUnchanged(r.UserID, recs, hist)
		}},
		{"IllegalTransition", func(t *testing.T) {
			e := s.env(t, memory.Options{})
			r := ids.record(ids.user(), day(0), billing.StatusCompleted)
			e.add(r)
			recs, hist := e.snapshot(r.UserID)
			next := moveTo(r, day(5)) // COMPLETED -> SCHEDULED
			requireRejected(t, e.repo.AdminUpdate(e.ctx(), &r, &next), billing.ErrIllegalTransition)
			e.requireAbsent(r.UserID, day(5))
			e.requireUnchanged(r.UserID, recs, hist)
		}},
		{"HistoryRowTaken", func(t *testing.T) {
			e, r := added(t)
			other := ids.record(r.UserID, day(31), billing.StatusCompleted)
			e.add(other)
			recs, hist := e.snapshot(r.UserID)
			next := moveTo(r, day(5))
			next.LastRunDate = other.LastRunDate
			requireConflict(t, e.repo.AdminUpdate(e.ctx(), &r, &next), billing.ErrConflict, "admin update", r.UserID)
			e.requireAbsent(r.UserID, day(5))
			e.requireUnchanged(r.UserID, recs, hist)
		}},
	}
}
