package billingtest

import (
	"errors"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/memory"
)

// taxCases cover a period's tax ([billing.Period.Tax]): fixed by the
// write that makes its first attempt durable (SetAttempt, no history
// row), taken off by that attempt's withdrawal, kept by the outcome's
// Update and its history row, and never changed once fixed by SetAttempt.
func (s *repoSuite) taxCases() []repoCase {
	ids := s.ids
	tax := billing.Tax{Amount: billing.Cents(200), Description: "VAT 20%"}
	added := func(t *testing.T) (*repoEnv, billing.Period) {
		t.Helper()
		e := s.env(t, memory.Options{})
		r := ids.record(ids.user(), day(0), billing.StatusScheduled)
		r.Amount, r.ReceiptTierName = billing.Cents(1000), "Plus:v2"
		e.add(r)
		return e, r
	}
	taxed := func(r billing.Period, n int, t billing.Tax) billing.Period {
		m := ids.inFlight(r, n, r.Amount+t.Amount)
		m.Tax = t
		return m
	}
	return []repoCase{
		{"KeptByAddAllFromScratch", func(t *testing.T) {
			// A host's batch written from what it knows over a declined
			// record keeps its attempt and the tax fixed with it: what
			// the next attempt asks for goes on including it.
			e, r := added(t)
			marked := taxed(r, 1, tax)
			e.setAttempt(r, marked)
			got := e.get(r.UserID, r.BillingDate)
			done := ids.next(got, billing.StatusError)
			done.Attempt = 1
			e.update(got, done)
			scratch := ids.record(r.UserID, r.BillingDate, billing.StatusError)
			scratch.SubscriptionID, scratch.Amount, scratch.ReceiptTierName = r.SubscriptionID, r.Amount, r.ReceiptTierName
			scratch.LastRunDate = done.LastRunDate.Add(time.Second)
			e.addAll([]billing.Period{scratch})
			got = e.get(r.UserID, r.BillingDate)
			if got.Tax != tax || got.Attempt != 1 || got.LastAttempt.Number != 1 {
				t.Fatalf("after AddAll from scratch: tax %+v, attempt %d/%d; want %+v, 1/1", got.Tax, got.Attempt, got.LastAttempt.Number, tax)
			}
			RequireHistoryMatchesPrimary(t, e.repo, e.hist, r.UserID)
		}},
		{"FixedWithTheAttempt", func(t *testing.T) {
			e, r := added(t)
			_, hist := e.snapshot(r.UserID)
			marked := taxed(r, 1, tax)
			e.setAttempt(r, marked)
			got := e.get(r.UserID, r.BillingDate)
			if got.Tax != tax || !got.InFlight() {
				t.Fatalf("after SetAttempt: tax %+v (in flight %v), want %+v", got.Tax, got.InFlight(), tax)
			}
			if d := diffStored(&got, &marked); d != "" {
				t.Fatalf("record differs from the one written: %s", d)
			}
			if rows := e.historyRows(r.UserID); len(rows) != len(hist) {
				t.Fatalf("SetAttempt wrote %d history rows, want none", len(rows)-len(hist))
			}
			// The outcome keeps it, on the record and its history row.
			done := ids.next(got, billing.StatusError)
			done.Attempt = 1
			e.update(got, done)
			if got := e.get(r.UserID, r.BillingDate); got.Tax != tax {
				t.Fatalf("after the outcome: tax %+v, want %+v", got.Tax, tax)
			}
			if row := e.newestRow(r.UserID, r.SubscriptionID); row.Tax != tax {
				t.Fatalf("the outcome's history row: tax %+v, want %+v", row.Tax, tax)
			}
			// A retry keeps it; it cannot change it.
			cur := e.get(r.UserID, r.BillingDate)
			recs, hist := e.snapshot(r.UserID)
			other := taxed(cur, 2, billing.Tax{Amount: billing.Cents(100), Description: "VAT 10%"})
			other.Attempt = 1
			if err := e.repo.SetAttempt(e.ctx(), &cur, &other); !errors.Is(err, billing.ErrInvalidItem) {
				t.Fatalf("SetAttempt changing a fixed tax: %v, want ErrInvalidItem", err)
			}
			e.requireUnchanged(r.UserID, recs, hist)
			retry := taxed(cur, 2, tax)
			retry.Attempt = 1
			e.setAttempt(cur, retry)
			if got := e.get(r.UserID, r.BillingDate); got.Tax != tax || got.LastAttempt.Number != 2 {
				t.Fatalf("after the retry's SetAttempt: tax %+v, attempt %d", got.Tax, got.LastAttempt.Number)
			}
		}},
		{"WithdrawnWithTheAttempt", func(t *testing.T) {
			e, r := added(t)
			recs, hist := e.snapshot(r.UserID)
			marked := taxed(r, 1, tax)
			e.setAttempt(r, marked)
			e.setAttempt(marked, r)
			e.requireUnchanged(r.UserID, recs, hist)
			if got := e.get(r.UserID, r.BillingDate); got.Tax.Fixed() {
				t.Fatalf("after the withdrawal: tax %+v, want none", got.Tax)
			}
		}},
		{"OnlyWithAnAttempt", func(t *testing.T) {
			e, r := added(t)
			recs, hist := e.snapshot(r.UserID)
			// A write that makes no new attempt cannot fix a tax.
			marked := ids.inFlight(r, 1, r.Amount)
			e.setAttempt(r, marked)
			settled := marked.Clone()
			settled.Attempt, settled.Tax = 1, tax
			if err := e.repo.SetAttempt(e.ctx(), &marked, &settled); !errors.Is(err, billing.ErrInvalidItem) {
				t.Fatalf("SetAttempt settling with a tax: %v, want ErrInvalidItem", err)
			}
			// A tax without its description is not stored.
			e.setAttempt(marked, r)
			e.requireUnchanged(r.UserID, recs, hist)
			bad := taxed(r, 1, billing.Tax{Amount: billing.Cents(200)})
			if err := e.repo.SetAttempt(e.ctx(), &r, &bad); !errors.Is(err, billing.ErrInvalidItem) {
				t.Fatalf("SetAttempt with a tax without description: %v, want ErrInvalidItem", err)
			}
			e.requireUnchanged(r.UserID, recs, hist)
		}},
	}
}
