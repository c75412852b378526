package billingtest

import (
	"errors"
	"testing"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/memory"
	"github.com/stretchr/testify/require"
)

// inFlight returns r with attempt n made durable at the suite's next run
// time.
func (ids *suiteIDs) inFlight(r billing.Period, n int, amount billing.Amount) billing.Period {
	next := r.Clone()
	next.LastAttempt = billing.Attempt{
		Number: n, Key: billing.IdempotencyKey(r.SubscriptionID, n), Amount: amount,
		Tier: r.ReceiptTierName, Process: billing.ProcessInitial, Started: ids.runDate(),
	}
	return next
}

func (e *repoEnv) setAttempt(prev, next billing.Period) {
	e.t.Helper()
	if err := e.repo.SetAttempt(e.ctx(), &prev, &next); err != nil {
		e.t.Fatalf("SetAttempt(%s): %v", prev.Key(), err)
	}
}

func (s *repoSuite) attemptCases() []repoCase {
	ids := s.ids
	added := func(t *testing.T) (*repoEnv, billing.Period) {
		t.Helper()
		e := s.env(t, memory.Options{})
		r := ids.record(ids.user(), day(0), billing.StatusScheduled)
		r.ReceiptTierName = "Plus:v2"
		e.add(r)
		return e, r
	}
	return []repoCase{
		{"MarkInFlight", func(t *testing.T) {
			e, r := added(t)
			_, hist := e.snapshot(r.UserID)
			marked := ids.inFlight(r, 1, r.Amount+100)
			e.setAttempt(r, marked)
			got := e.get(r.UserID, r.BillingDate)
			if !got.InFlight() || got.LastAttempt.Key != marked.LastAttempt.Key || got.LastAttempt.Amount != r.Amount+100 ||
				got.LastAttempt.Number != 1 || got.LastAttempt.Tier != "Plus:v2" || got.LastAttempt.Process != billing.ProcessInitial ||
				!got.LastAttempt.Started.Equal(marked.LastAttempt.Started) {
				t.Fatalf("attempt after SetAttempt = %+v (in flight %v), want %+v", got.LastAttempt, got.InFlight(), marked.LastAttempt)
			}
			if got.Status != r.Status || layout.LastRunDateKey(&got) != layout.LastRunDateKey(&r) || got.Amount != r.Amount || got.Attempt != 0 {
				t.Fatalf("SetAttempt changed more than the attempt: %s %s amount %s count %d", got.Status, layout.LastRunDateKey(&got), got.Amount, got.Attempt)
			}
			if rows := e.historyRows(r.UserID); len(rows) != len(hist) {
				t.Fatalf("SetAttempt wrote %d history rows, want none", len(rows)-len(hist))
			}
		}},
		{"WithdrawRefusedAttempt", func(t *testing.T) {
			// An attempt the processor refused (rate limit) is withdrawn:
			// the record reads exactly as before it went in flight, and
			// the same attempt can be made again.
			e, r := added(t)
			recs, hist := e.snapshot(r.UserID)
			marked := ids.inFlight(r, 1, r.Amount)
			e.setAttempt(r, marked)
			e.setAttempt(marked, r)
			e.requireUnchanged(r.UserID, recs, hist)
			again := ids.inFlight(r, 1, r.Amount)
			e.setAttempt(r, again)
			got := e.get(r.UserID, r.BillingDate)
			require.True(t, got.InFlight())

			// After a settled attempt, withdrawal restores that attempt.
			settled := again.Clone()
			settled.Attempt = 1
			e.setAttempt(again, settled)
			recs, hist = e.snapshot(r.UserID)
			second := ids.inFlight(settled, 2, r.Amount)
			second.Attempt = 1
			e.setAttempt(settled, second)
			e.setAttempt(second, settled)
			e.requireUnchanged(r.UserID, recs, hist)

			// A withdrawal by a writer whose marker is gone loses.
			err := e.repo.SetAttempt(e.ctx(), &second, &settled)
			require.ErrorIs(t, err, billing.ErrConflict)
			e.requireUnchanged(r.UserID, recs, hist)
		}},
		{"FencesUpdates", func(t *testing.T) {
			// A writer that read the record before it went in flight
			// cannot overwrite it: the attempt is part of the fence.
			e, r := added(t)
			e.setAttempt(r, ids.inFlight(r, 1, r.Amount))
			recs, hist := e.snapshot(r.UserID)
			next := ids.next(r, billing.StatusWaived)
			err := e.repo.Update(e.ctx(), &r, &next)
			if !errors.Is(err, billing.ErrConflict) {
				t.Fatalf("Update of a record read before it went in flight: %v, want ErrConflict", err)
			}
			e.requireUnchanged(r.UserID, recs, hist)
			moved := next
			moved.BillingDate = day(3)
			if err := e.repo.AdminUpdate(e.ctx(), &r, &moved); !errors.Is(err, billing.ErrConflict) {
				t.Fatalf("AdminUpdate of a record read before it went in flight: %v, want ErrConflict", err)
			}
			e.requireUnchanged(r.UserID, recs, hist)
		}},
		{"StaleWriterLoses", func(t *testing.T) {
			e, r := added(t)
			e.setAttempt(r, ids.inFlight(r, 1, r.Amount))
			recs, hist := e.snapshot(r.UserID)
			// Read before the first marker: the second one must fail.
			if err := e.repo.SetAttempt(e.ctx(), &r, new(ids.inFlight(r, 1, r.Amount+1))); !errors.Is(err, billing.ErrConflict) {
				t.Fatalf("second SetAttempt from the same read: %v, want ErrConflict", err)
			}
			e.requireUnchanged(r.UserID, recs, hist)
			gone := r
			gone.BillingDate = day(9)
			if err := e.repo.SetAttempt(e.ctx(), &gone, new(ids.inFlight(gone, 1, r.Amount))); !errors.Is(err, billing.ErrConflict) {
				t.Fatalf("SetAttempt of a missing record: %v, want ErrConflict", err)
			}
		}},
		{"OutcomeRecordedThroughUpdate", func(t *testing.T) {
			e, r := added(t)
			marked := ids.inFlight(r, 1, r.Amount)
			e.setAttempt(r, marked)
			cur := e.get(r.UserID, r.BillingDate)
			done := ids.next(cur, billing.StatusCompleted)
			done.Attempt, done.TransactionID = 1, "txn-1"
			e.update(cur, done)
			got := e.get(r.UserID, r.BillingDate)
			if got.InFlight() || got.Attempt != 1 || got.LastAttempt.Key != marked.LastAttempt.Key {
				t.Fatalf("after the outcome: in flight %v, count %d, attempt %+v", got.InFlight(), got.Attempt, got.LastAttempt)
			}
			e.requireLastHistoryRow(done)
			rows := e.historyRows(r.UserID)
			if last := rows[len(rows)-1]; last.LastAttempt.Key != marked.LastAttempt.Key || !last.LastAttempt.Started.Equal(marked.LastAttempt.Started) {
				t.Fatalf("the outcome's history row carries attempt %+v, want the key and start of %+v", last.LastAttempt, marked.LastAttempt)
			}
		}},
		{"Abandon", func(t *testing.T) {
			// An attempt the processor never saw is settled by counting
			// it: the next attempt takes a fresh key.
			e, r := added(t)
			marked := ids.inFlight(r, 1, r.Amount)
			e.setAttempt(r, marked)
			settled := marked.Clone()
			settled.Attempt = 1
			e.setAttempt(marked, settled)
			got := e.get(r.UserID, r.BillingDate)
			if got.InFlight() || got.Attempt != 1 || got.Status != billing.StatusScheduled {
				t.Fatalf("after settling: in flight %v, count %d, %s", got.InFlight(), got.Attempt, got.Status)
			}
		}},
		{"AddAllSparesInFlight", func(t *testing.T) {
			// A batch upgrade never overwrites a record whose charge may
			// have happened; the rest of the batch is written.
			e, r := added(t)
			e.setAttempt(r, ids.inFlight(r, 1, r.Amount))
			recs, hist := e.snapshot(r.UserID)
			upgrade := r.Clone()
			upgrade.Amount, upgrade.ReceiptTierName = r.Amount+500, "Premium:v1"
			upgrade.LastRunDate = ids.runDate()
			other := ids.record(ids.user(), day(0), billing.StatusScheduled)
			_, err := e.repo.AddAll(e.ctx(), []billing.Period{upgrade, other})
			var be *billing.BatchError
			if !errors.As(err, &be) || !errors.Is(err, billing.ErrAttemptInFlight) || len(be.Unwritten) != 1 || be.Unwritten[0] != r.Key() {
				t.Fatalf("AddAll over a record in flight: %v, want a BatchError naming %s, wrapping ErrAttemptInFlight", err, r.Key())
			}
			e.requireUnchanged(r.UserID, recs, hist)
			e.requireStored(other)
		}},
		{"Invalid", func(t *testing.T) {
			e, r := added(t)
			recs, hist := e.snapshot(r.UserID)
			bad := ids.inFlight(r, 1, r.Amount)
			bad.Status = billing.StatusCompleted
			if err := e.repo.SetAttempt(e.ctx(), &r, &bad); !errors.Is(err, billing.ErrInvalidItem) {
				t.Fatalf("SetAttempt changing the status: %v, want ErrInvalidItem", err)
			}
			noKey := ids.inFlight(r, 1, r.Amount)
			noKey.LastAttempt.Key = ""
			if err := e.repo.SetAttempt(e.ctx(), &r, &noKey); !errors.Is(err, billing.ErrInvalidItem) {
				t.Fatalf("SetAttempt without a key: %v, want ErrInvalidItem", err)
			}
			e.requireUnchanged(r.UserID, recs, hist)
		}},
	}
}
