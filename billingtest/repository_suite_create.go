package billingtest

import (
	"errors"
	"testing"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/memory"
)

// updateCreateCases cover Update with records to create in the same
// transaction: how the collector records an attempt and opens the next
// period at once.
func (s *repoSuite) updateCreateCases() []repoCase {
	ids := s.ids
	setup := func(t *testing.T) (*repoEnv, billing.Period, billing.Period, billing.Period) {
		t.Helper()
		e := s.env(t, memory.Options{})
		r := ids.record(ids.user(), day(0), billing.StatusScheduled)
		e.add(r)
		next := ids.next(r, billing.StatusACHSent)
		next.Attempt = 1
		following := ids.record(r.UserID, day(31), billing.StatusScheduled)
		return e, r, next, following
	}
	return []repoCase{
		{"CreatesInSameTransaction", func(t *testing.T) {
			e, r, next, following := setup(t)
			if err := e.repo.Update(e.ctx(), &r, &next, &following); err != nil {
				t.Fatal(err)
			}
			e.requireStored(next)
			e.requireStored(following)
			e.requireHistoryCount(r.UserID, 3)
			got, err := e.repo.GetByID(e.ctx(), following.SubscriptionID)
			if err != nil || got.Status != billing.StatusScheduled || !got.BillingDate.Equal(day(31)) {
				t.Fatalf("GetByID(created) = %+v, %v", got, err)
			}
			RequireHistoryMatchesPrimary(t, e.repo, e.hist, r.UserID)
		}},
		{"CreateOntoExistingKeyWritesNothing", func(t *testing.T) {
			e, r, next, following := setup(t)
			// Another service wrote the next period (Add refuses a second
			// open record on the legacy layout; a batch import does not).
			squatter := ids.record(r.UserID, day(31), billing.StatusScheduled)
			e.addAll([]billing.Period{squatter})
			recs, hist := e.snapshot(r.UserID)
			err := e.repo.Update(e.ctx(), &r, &next, &following)
			requireConflict(t, err, billing.ErrAlreadyExists, "", r.UserID)
			e.requireUnchanged(r.UserID, recs, hist)
		}},
		{"StalePrevCreatesNothing", func(t *testing.T) {
			e, r, next, following := setup(t)
			other := ids.next(r, billing.StatusError)
			e.update(r, other)
			recs, hist := e.snapshot(r.UserID)
			err := e.repo.Update(e.ctx(), &r, &next, &following)
			requireConflict(t, err, billing.ErrConflict, "update", r.UserID)
			e.requireUnchanged(r.UserID, recs, hist)
			e.requireAbsent(r.UserID, day(31))
		}},
		{"TwoCreatesSameKeyRejected", func(t *testing.T) {
			e, r, next, following := setup(t)
			twin := ids.record(r.UserID, day(31), billing.StatusScheduled)
			recs, hist := e.snapshot(r.UserID)
			if err := e.repo.Update(e.ctx(), &r, &next, &following, &twin); err == nil {
				t.Fatal("two records to create with one key were accepted")
			}
			e.requireUnchanged(r.UserID, recs, hist)
		}},
		{"HistoryKeyConflictIsMarked", func(t *testing.T) {
			e, r, next, _ := setup(t)
			other := ids.record(r.UserID, day(60), billing.StatusCancelled)
			e.add(other)
			clash := next.Clone()
			clash.LastRunDate = other.LastRunDate // a history row of the user has it
			if !clash.LastRunDate.After(r.LastRunDate) {
				t.Skip("fixture order: other record's run date is not after r's")
			}
			recs, hist := e.snapshot(r.UserID)
			err := e.repo.Update(e.ctx(), &r, &clash)
			requireConflict(t, err, billing.ErrConflict, "update", r.UserID)
			if !historyKeyConflict(err) {
				t.Fatalf("history key conflict not marked: %v", err)
			}
			e.requireUnchanged(r.UserID, recs, hist)
			stale := ids.next(r, billing.StatusError)
			e.update(r, stale)
			if err := e.repo.Update(e.ctx(), &r, &next); historyKeyConflict(err) || !billing.IsConflict(err) {
				t.Fatalf("stale record conflict marked as history key conflict: %v", err)
			}
			dup := ids.record(r.UserID, day(90), billing.StatusScheduled)
			dup.LastRunDate = other.LastRunDate
			if err := e.repo.Add(e.ctx(), &dup); !historyKeyConflict(err) {
				t.Fatalf("Add onto a taken history key: %v", err)
			}
		}},
		{"TooManyCreatesRejected", func(t *testing.T) {
			e, r, next, _ := setup(t)
			var many []*billing.Period
			for i := range billing.MaxUpdateCreates + 1 {
				c := ids.record(r.UserID, day(40+i), billing.StatusScheduled)
				many = append(many, &c)
			}
			recs, hist := e.snapshot(r.UserID)
			if err := e.repo.Update(e.ctx(), &r, &next, many...); err == nil {
				t.Fatal("more than MaxUpdateCreates records accepted")
			}
			e.requireUnchanged(r.UserID, recs, hist)
		}},
	}
}

// historyKeyConflict reports whether err is a conflict caused only by a
// taken history key.
func historyKeyConflict(err error) bool {
	var ce *billing.ConflictError
	return errors.As(err, &ce) && ce.HistoryRow
}
