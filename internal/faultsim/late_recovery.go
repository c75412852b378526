package faultsim

import (
	"context"
	"fmt"
	"time"

	"github.com/dynabill/billing"
)

// invLateRecovery is the invariant of the LateRecoveryNotices scenario.
const invLateRecovery = "a decline paid on session, told after the retry runs, is paid once"

// recoverDeclinesLate runs at the settlement step, before
// [Sim.recoverDeclines]: of the card declines of the last day that that
// scenario leaves alone, some are confirmed by their customer on session
// now, but the processor's notice reaches the host only after one, two
// or three retry runs, sometimes twice, sometimes after or before a
// payment_failed. Meanwhile the retry runs present the period's next
// attempts, which name the declined payment (PriorPayment): the
// processor answers them from it, so the customer pays once, and the
// late notice must then find the period paid by that payment (a replay),
// never a second payment to refund. Without that contract the retry
// charges a second payment and the late notice is refused as a
// duplicate; the money invariant and this one fail.
func (s *Sim) recoverDeclinesLate(ctx context.Context) {
	if s.opts.without(LateRecoveryNotices) {
		return
	}
	seed, now := s.opts.Seed, s.clock.Now()
	day := now.Truncate(24 * time.Hour)
	for _, c := range s.proc.declinedSince(now.Add(-24*time.Hour), now) {
		if !s.opts.without(DeclineRecoveries) && draw(seed, "recovers", c.Key) < 0.2 {
			continue // confirmed on session, told at once: decline-recoveries
		}
		if draw(seed, "recovers late", c.Key) >= 0.3 || !s.unpaidWith(&c) {
			continue
		}
		s.proc.recoverKey(c.Key)
		s.env.faults.add("processor: a decline confirmed on session, its notice after the retry runs")
		settled := billing.Settlement{SubscriptionID: c.SubscriptionID, TransactionID: c.Result.TransactionID, Kind: billing.SettlementSettled}
		failed := settled
		failed.Kind, failed.Reason = billing.SettlementReturned, "card_declined: insufficient_funds"
		rc := &recovery{charge: c, inv: invLateRecovery, late: true, events: []billing.Settlement{settled}}
		switch u := draw(seed, "late recovery shape", c.Key); {
		case u < 0.25:
			rc.events = []billing.Settlement{failed, settled}
		case u < 0.5:
			rc.events = []billing.Settlement{settled, failed}
		case u < 0.75:
			rc.events = []billing.Settlement{settled, settled}
		}
		runs := 1 + pick(seed, 3, "late recovery runs", c.Key)
		s.res.Ops[fmt.Sprintf("late recovery notice, after %d retry runs", runs)]++
		at := day.Add(time.Duration(runs-1)*24*time.Hour + retryAt + 3*time.Hour)
		h := s.pickHost("late recovery", c.Key)
		s.at(at, h.name, "settlement of a decline confirmed on session, after the retry runs", func(ctx context.Context) {
			s.deliverRecovery(ctx, rc)
		})
	}
}

// closedOtherwise reports whether c's period, as stored now, was closed
// without its payment since the customer paid it on session (waived,
// cancelled, paused): the late notice is then a payment of a period no
// longer owed, which the collector reports for a refund, as it must.
// The scenario leaves those out.
func (s *Sim) closedOtherwise(ctx context.Context, c *Charge) bool {
	recs, err := s.raw.ListByUser(ctx, c.UserID)
	if err != nil {
		return false // delivered; a store fault is retried there
	}
	for i := range recs {
		if r := &recs[i]; r.SubscriptionID == c.SubscriptionID {
			switch r.Status {
			case billing.StatusError, billing.StatusStale, billing.StatusCompleted, billing.StatusACHSent, billing.StatusScheduled:
				return false
			}
			return !r.InFlight()
		}
	}
	return true
}
