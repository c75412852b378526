package faultsim

import (
	"context"
	"fmt"
	"time"

	"github.com/dynabill/billing"
)

// invRecovery is the invariant of declines the processor later reports
// paid.
const invRecovery = "a decline's later success recorded once"

// recovery is a declined card charge the customer confirmed on session
// later: the processor now holds it as succeeded and tells the host with
// the events a Stripe webhook produces for it.
type recovery struct {
	charge Charge
	events []billing.Settlement
	// next is the first event not applied yet; tries counts deliveries.
	next, tries int
	// inv is the invariant the recovery is checked under (invRecovery
	// when empty); late: its notice comes after the retry runs
	// ([LateRecoveryNotices]).
	inv  string
	late bool
	// first is when the notice was first delivered.
	first time.Time
}

// redeliver says whether a delivery of rc refused for a reason that may
// pass is made again, and after how long: every 15 minutes, 14 times;
// a late notice as Stripe redelivers, with a growing wait (15 minutes
// doubling, at most 6 hours) for up to three days.
func (rc *recovery) redeliver(now time.Time) (time.Duration, bool) {
	if !rc.late {
		return 15 * time.Minute, rc.tries < 14
	}
	wait := min(15*time.Minute<<min(rc.tries-1, 6), 6*time.Hour)
	return wait, now.Add(wait).Sub(rc.first) <= 72*time.Hour
}

// invariant is the invariant rc is checked under.
func (rc *recovery) invariant() string {
	if rc.inv == "" {
		return invRecovery
	}
	return rc.inv
}

// declinedSince returns copies of the retryable card declines the
// processor answered in [from, to), each the current answer of its key.
func (p *Processor) declinedSince(from, to time.Time) []Charge {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Charge
	for _, c := range p.charges {
		r := c.Result
		if r.Outcome == billing.OutcomeDeclined && r.Retryable && r.PaymentType == "CARD" && !c.Recovered && !c.Retried &&
			!c.At.Before(from) && c.At.Before(to) && p.keys[c.Key] != nil && p.keys[c.Key].answer == c {
			out = append(out, *c)
		}
	}
	return out
}

// recoverKey turns the declined answer of key into a success: the
// customer confirmed the same payment on session.
func (p *Processor) recoverKey(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st := p.keys[key]; st != nil && st.answer != nil {
		st.answer.Recovered = true
		if p.touch != nil {
			p.touch(st.answer.UserID)
		}
	}
}

// tell records that the host applied the settled event of key's
// recovered charge: from then on the money invariant holds it to it.
func (p *Processor) tell(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st := p.keys[key]; st != nil && st.answer != nil {
		st.answer.Told = true
		if p.touch != nil {
			p.touch(st.answer.UserID)
		}
	}
}

// recoverDeclines runs at the settlement step: of the card declines of
// the last day, some are confirmed by their customer on session, if
// their period is still unpaid with that payment (ERROR with its
// transaction, no attempt since); the processor then holds the charge as
// succeeded and sends its succeeded event, sometimes twice, sometimes
// after a payment_failed the webhook applies as a return.
func (s *Sim) recoverDeclines(ctx context.Context) {
	s.recoverDeclinesLate(ctx)
	if s.opts.without(DeclineRecoveries) {
		return
	}
	seed, now := s.opts.Seed, s.clock.Now()
	for _, c := range s.proc.declinedSince(now.Add(-24*time.Hour), now) {
		if draw(seed, "recovers", c.Key) >= 0.2 || !s.unpaidWith(&c) {
			continue
		}
		s.proc.recoverKey(c.Key)
		s.env.faults.add("processor: a decline confirmed on session later (succeeded)")
		settled := billing.Settlement{SubscriptionID: c.SubscriptionID, TransactionID: c.Result.TransactionID, Kind: billing.SettlementSettled}
		rc := &recovery{charge: c, events: []billing.Settlement{settled}}
		switch u := draw(seed, "recovery shape", c.Key); {
		case u < 0.25:
			failed := settled
			failed.Kind, failed.Reason = billing.SettlementReturned, "card_declined: insufficient_funds"
			rc.events = []billing.Settlement{failed, settled}
		case u < 0.45:
			rc.events = append(rc.events, settled)
		}
		s.deliverRecovery(ctx, rc)
	}
}

// unpaidWith reports whether c's period is ERROR with c's transaction and
// no attempt since, as the checks last read it.
func (s *Sim) unpaidWith(c *Charge) bool {
	for _, r := range s.records[c.UserID] {
		if r.SubscriptionID == c.SubscriptionID {
			return r.Status == billing.StatusError && r.TransactionID == c.Result.TransactionID && !r.NoRetry && !r.InFlight()
		}
	}
	return false
}

// paidWith reports whether c's period is COMPLETED with c's
// transaction, as the checks last read it.
func (s *Sim) paidWith(c *Charge) bool {
	for _, r := range s.records[c.UserID] {
		if r.SubscriptionID == c.SubscriptionID {
			return r.Status == billing.StatusCompleted && r.TransactionID == c.Result.TransactionID
		}
	}
	return false
}

// deliverRecovery applies rc's events not applied yet, through the
// collector of a host; an event refused for a reason that may pass is
// delivered again 15 minutes later (before the day's runs), as the
// webhook sender retries. Once the settled event is applied, the record
// must be COMPLETED with the charge's transaction, recorded by one
// history row.
func (s *Sim) deliverRecovery(ctx context.Context, rc *recovery) {
	rc.tries++
	if rc.tries == 1 {
		rc.first = s.clock.Now()
	}
	c := &rc.charge
	if rc.late && s.closedOtherwise(ctx, c) {
		s.res.Ops["late recovery notice of a period closed otherwise (a payment to refund)"]++
		return
	}
	if !rc.late && rc.tries > 1 && !s.unpaidWith(c) && !s.paidWith(c) {
		// Another attempt was made on the period before the event got
		// through (a webhook collection, a manual repayment): the
		// customer paid an earlier attempt after a later one started,
		// which this scenario leaves out. The charge stays out of the
		// money invariant.
		s.res.Ops["recovered decline overtaken by another attempt before its event got through"]++
		return
	}
	for rc.next < len(rc.events) {
		ev := rc.events[rc.next]
		h := s.pickHost("recovery", c.Key, rc.next, rc.tries)
		_, _, err := h.col.ApplySettlement(ctx, ev)
		s.res.Ops["recovered decline, "+string(ev.Kind)+" event: "+classify(err)]++
		wait, again := rc.redeliver(s.clock.Now())
		switch {
		case err != nil && retriable(err) && again:
			s.at(s.clock.Now().Add(wait), h.name, "settlement of a decline confirmed on session (again)", func(ctx context.Context) {
				s.deliverRecovery(ctx, rc)
			})
			return
		case err != nil && retriable(err) && rc.late:
			// Stripe stops redelivering after three days (a processor
			// outage longer than that): the collector records the payment
			// itself once the processor answers the attempt in flight.
			// The charge stays out of the money invariant.
			s.res.Ops["late recovery notice given up after three days of redeliveries"]++
			return
		case err != nil && ev.Kind == billing.SettlementSettled:
			s.fail(rc.invariant(), withTrail([]string{fmt.Sprintf("user %s: the settled event of %s, a decline confirmed on session, was refused: %v",
				c.UserID, descCharge(c), err)}, s.trail(ctx, c.UserID)))
			return
		}
		rc.next++
	}
	s.proc.tell(c.Key)
	s.checkRecovered(ctx, c, rc.invariant())
}

// checkRecovered checks that c, a decline the processor reported paid,
// is recorded: its record COMPLETED with its transaction and amount, by
// exactly one history row.
func (s *Sim) checkRecovered(ctx context.Context, c *Charge, inv string) {
	s.res.Checks[inv]++
	recs, err := s.raw.ListByUser(ctx, c.UserID)
	if err != nil {
		s.fail("the store answers", []string{fmt.Sprintf("ListByUser(%s): %v", c.UserID, err)})
		return
	}
	rows, err := s.hist.ListByUser(ctx, c.UserID)
	if err != nil {
		s.fail("the store answers", []string{fmt.Sprintf("History.ListByUser(%s): %v", c.UserID, err)})
		return
	}
	txn := c.Result.TransactionID
	var bad []string
	found := false
	for i := range recs {
		r := &recs[i]
		if r.SubscriptionID != c.SubscriptionID {
			continue
		}
		found = true
		if due, _, _ := r.Due(); r.Status != billing.StatusCompleted || r.TransactionID != txn || due != c.Amount {
			bad = append(bad, fmt.Sprintf("user %s: charge %s was declined, then confirmed on session and its settled event applied; its record is %s, not COMPLETED with it",
				c.UserID, descCharge(c), desc(r)))
		}
	}
	if !found {
		bad = append(bad, fmt.Sprintf("user %s: charge %s was confirmed on session; subscription %s has no record", c.UserID, descCharge(c), c.SubscriptionID))
	}
	n := 0
	for i := range rows {
		if r := &rows[i]; r.SubscriptionID == c.SubscriptionID && r.Status == billing.StatusCompleted && r.TransactionID == txn {
			n++
		}
	}
	if len(bad) == 0 && n != 1 {
		bad = append(bad, fmt.Sprintf("user %s: charge %s, confirmed on session, is recorded COMPLETED by %d history rows, not one", c.UserID, descCharge(c), n))
	}
	s.fail(inv, withTrail(bad, s.trail(ctx, c.UserID)))
}
