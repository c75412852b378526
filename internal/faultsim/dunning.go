package faultsim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dynabill/billing"
)

// This file is the Dunning scenario: the hosts' collectors run with
// Config.Dunning (the default schedule, a final action drawn for the
// seed, notices through a Notifier and UserDirectory that fail, time out
// and lose answers); the processor gives every decline a kind (mostly
// insufficient funds, some hard, expired, authentication required); and
// declined customers recover by a new card (Collector.PaymentMethodUpdated
// with a request key, sometimes repeated later with it), on session
// (recovery.go's confirmations and their settled events), or never. Its
// invariants are checked as the processor acts (an attempt outside the
// schedule, a held period charged), after every step (notices, ends) and
// on every user checked (dunchecks.go).

// The invariants of the Dunning scenario.
const (
	invDunSchedule  = "no attempt outside a period's dunning schedule, none after its final action but the customer's own"
	invDunOthers    = "a period in dunning is attempted only by the retry run and the customer's own payment"
	invDunHeld      = "a period held while an earlier one is in dunning is not charged by a run, webhook or batch"
	invDunNotice    = "each dunning notice (period, kind, attempt) sent at most once"
	invDunFinal     = "a period's dunning ends at most once, and its end is never rewritten"
	invDunRecovered = "a paid period's dunning ended (recovered), and no retry follows"
	invDunRepeat    = "a card update repeated with its request key charges nothing more"
)

// dunFinalDay is the final day of the default schedule
// (billing.DefaultRetryDays' last plus one).
var dunFinalDay = billing.DefaultRetryDays[len(billing.DefaultRetryDays)-1] + 1

// dunModel is the state of the Dunning scenario. Its methods are called
// from the collectors' goroutines (the processor, the notifier, the event
// sink): what they find is kept under mu and reported after the step.
type dunModel struct {
	s      *Sim
	action billing.FinalAction

	mu sync.Mutex
	// bad are the problems found since the last step, by invariant.
	bad map[string][]string
	// entries counts the retry attempts made per schedule entry
	// (subscription, dunning start, retries made before it).
	entries map[string]int
	// sent counts the deliveries of each notice (user, billing date,
	// kind, attempt); lost the notices a delivery of which had its
	// answer lost (the engine cannot tell it went out).
	sent map[string]int
	lost map[string]bool
	// ends are the EventDunningEnded reasons emitted, by subscription.
	ends map[string][]string
	// carded are the users who gave a new card, and when.
	carded map[string]time.Time
	calls  *counter
	// strictNotices counts a second delivery after a lost answer as a
	// broken invariant too (see noteDelivered).
	strictNotices bool
}

func newDunModel(s *Sim) *dunModel {
	actions := []billing.FinalAction{billing.FinalCancel, billing.FinalPause, billing.FinalLeavePastDue}
	return &dunModel{s: s, action: actions[pick(s.opts.Seed, len(actions), "dunning final action")],
		bad: map[string][]string{}, entries: map[string]int{}, sent: map[string]int{}, lost: map[string]bool{},
		ends: map[string][]string{}, carded: map[string]time.Time{}, calls: newCounter()}
}

// policy is a host's Config.Dunning: the default schedule, the drawn
// final action, notices through the model.
func (m *dunModel) policy() *billing.DunningPolicy {
	return &billing.DunningPolicy{RetryDays: slices.Clone(billing.DefaultRetryDays), FinalAction: m.action,
		Notifier: m, Users: m, UpdatePaymentURL: "https://host.example/billing/card"}
}

// retryDays is the schedule of a decline of kind k, as the policy's
// defaults say: expired cards and authentication are not retried off
// session, hard declines never.
func retryDays(k billing.DeclineKind) []int {
	switch k {
	case billing.DeclineExpiredCard, billing.DeclineAuthenticationRequired, billing.DeclineHard:
		return nil
	}
	return billing.DefaultRetryDays
}

// dayOf is the start of the UTC day d days after t's.
func dayOf(t time.Time, d int) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC).AddDate(0, 0, d)
}

func (m *dunModel) report(inv string, problem string) {
	m.mu.Lock()
	m.bad[inv] = append(m.bad[inv], problem)
	m.mu.Unlock()
}

// flush reports what the step broke.
func (m *dunModel) flush(ctx context.Context) {
	m.mu.Lock()
	bad := m.bad
	m.bad = map[string][]string{}
	m.mu.Unlock()
	for _, inv := range []string{invDunSchedule, invDunOthers, invDunHeld, invDunNotice, invDunFinal} {
		m.s.res.Checks[inv]++
		if p := bad[inv]; len(p) > 0 {
			u := strings.TrimSuffix(strings.Fields(p[0])[1], ":")
			m.s.fail(inv, withTrail(p, m.s.trail(ctx, u)))
		}
	}
}

// outcomeOf draws the answer to the first request acting on req's key
// (res its defaults): a user who gave a new card pays with it (a tenth of
// its charges declined for funds); an insolvent user's charges, and the
// charges of a period declined before, are declined for funds; others are declined a sixth of the time, of a
// drawn kind, pending as a bank debit or paid.
func (m *dunModel) outcomeOf(req billing.PaymentRequest, res billing.PaymentResult) billing.PaymentResult {
	seed := m.s.opts.Seed
	m.mu.Lock()
	_, carded := m.carded[req.UserID]
	m.mu.Unlock()
	declined := func(kind billing.DeclineKind) billing.PaymentResult {
		res.Outcome, res.Decline, res.Retryable = billing.OutcomeDeclined, kind, kind != billing.DeclineHard
		switch kind {
		case billing.DeclineInsufficientFunds:
			res.DeclineReason = "card_declined: insufficient_funds"
		case billing.DeclineHard:
			res.DeclineReason = "card_declined: stolen_card"
		case billing.DeclineExpiredCard:
			res.DeclineReason = "expired_card"
		case billing.DeclineAuthenticationRequired:
			res.DeclineReason = "authentication_required"
			res.ActionURL = "https://processor.example/confirm/" + req.IdempotencyKey
		}
		return res
	}
	u := draw(seed, "outcome", req.IdempotencyKey)
	switch {
	case carded && u < 0.1:
		return declined(billing.DeclineInsufficientFunds)
	case carded:
		res.Outcome = billing.OutcomeSucceeded
		return res
	case m.s.proc.insolvent(req.UserID) || m.declinedBefore(req.SubscriptionID):
		// The card that failed the period fails it again: only a new
		// card or the customer on session pays it.
		return declined(billing.DeclineInsufficientFunds)
	case u < 0.16:
		switch k := draw(seed, "decline kind", req.IdempotencyKey); {
		case k < 0.62:
			return declined(billing.DeclineInsufficientFunds)
		case k < 0.74:
			return declined(billing.DeclineHard)
		case k < 0.87:
			return declined(billing.DeclineExpiredCard)
		default:
			return declined(billing.DeclineAuthenticationRequired)
		}
	case u < 0.42:
		res.Outcome, res.PaymentType = billing.OutcomePending, "ACH"
	default:
		res.Outcome = billing.OutcomeSucceeded
	}
	return res
}

// presented checks req, a request the processor acts on, presented at
// now, against its period as stored (in flight with req's key: the
// dunning state before the attempt): a retry only on a day the schedule
// allows, once per entry, never for a kind not retried nor after the
// final action; no other process but the customer's own payment on a
// declined period; no run, webhook or batch charging a period while an
// earlier one of its user is in dunning. The processor holds its lock.
func (m *dunModel) presented(req billing.PaymentRequest, now time.Time) {
	recs, err := m.s.raw.ListByUser(context.Background(), req.UserID)
	if err != nil {
		m.report(invDunSchedule, fmt.Sprintf("user %s: ListByUser: %v", req.UserID, err))
		return
	}
	var r *billing.Period
	for i := range recs {
		if recs[i].SubscriptionID == req.SubscriptionID {
			r = &recs[i]
		}
	}
	if r == nil {
		return
	}
	started := now
	if r.InFlight() && r.LastAttempt.Key == req.IdempotencyKey {
		started = r.LastAttempt.Started
	}
	fresh := !started.Before(now.Add(-time.Second))
	d := &r.Dunning
	what := fmt.Sprintf("user %s: %s attempt (key %s, started %s) of %s", req.UserID, req.Process, req.IdempotencyKey, started.Format(time.DateTime), descDunning(r))
	switch req.Process {
	case billing.ProcessManualRepayment:
		// The customer's own payment: a new card, a repayment.
		return
	case billing.ProcessRetry:
		if r.Status != billing.StatusError || !d.Started() {
			return // not a period in dunning (resolved since, or declined before it)
		}
		days := retryDays(d.Kind)
		switch {
		case !d.Active():
			m.report(invDunSchedule, what+": after its dunning ended")
		case r.NoRetry:
			m.report(invDunSchedule, what+": declined as final")
		case d.Retries >= len(days):
			m.report(invDunSchedule, fmt.Sprintf("%s: no retry left on the %q schedule %v", what, d.Kind, days))
		case started.Before(dayOf(d.Since, days[d.Retries])):
			m.report(invDunSchedule, fmt.Sprintf("%s: before its day %s (retry %d of %v)", what, dayOf(d.Since, days[d.Retries]).Format(time.DateOnly), d.Retries+1, days))
		case started.After(dayOf(d.Since, dunFinalDay)):
			m.report(invDunSchedule, what+": after the final day "+dayOf(d.Since, dunFinalDay).Format(time.DateOnly))
		}
		entry := fmt.Sprintf("%s|%s|%d", r.SubscriptionID, d.Since.Format(time.RFC3339Nano), d.Retries)
		m.mu.Lock()
		m.entries[entry]++
		n := m.entries[entry]
		m.mu.Unlock()
		if n > 1 {
			m.report(invDunSchedule, fmt.Sprintf("%s: attempt %d for retry %d of the schedule", what, n, d.Retries+1))
		}
		return
	}
	if r.Status == billing.StatusError && d.Started() {
		m.report(invDunOthers, what+": a declined period attempted by "+string(req.Process)+", outside its schedule")
	}
	if !fresh {
		return
	}
	for i := range recs {
		e := &recs[i]
		if e.BillingDate.Before(r.BillingDate) && e.Status == billing.StatusError && e.Dunning.Active() {
			m.report(invDunHeld, fmt.Sprintf("%s: charged while the earlier %s is in dunning", what, descDunning(e)))
		}
	}
}

// declinedBefore reports whether the processor declined a card charge of
// sub before. The processor holds its lock.
func (m *dunModel) declinedBefore(sub string) bool {
	for _, c := range m.s.proc.charges {
		if c.SubscriptionID == sub && c.Result.Outcome == billing.OutcomeDeclined && c.Result.PaymentType == "CARD" {
			return true
		}
	}
	return false
}

// descDunning describes a record with its dunning.
func descDunning(r *billing.Period) string {
	d := &r.Dunning
	if !d.Started() {
		return desc(r)
	}
	s := fmt.Sprintf("%s, dunning since %s (%q, %d retries", desc(r), d.Since.Format(time.DateTime), d.Kind, d.Retries)
	if !d.Ended.IsZero() {
		s += fmt.Sprintf(", ended %s %s", d.End, d.Ended.Format(time.DateTime))
	}
	return s + ")"
}

// GetUser implements billing.UserDirectory: on stormy days it fails now
// and then.
func (m *dunModel) GetUser(ctx context.Context, id string) (billing.User, error) {
	if err := ctx.Err(); err != nil {
		return billing.User{}, err
	}
	c := m.calls.next("user " + id)
	if m.s.env.stormy() && draw(m.s.opts.Seed, "dunning user", id, c) < 0.03 {
		m.s.env.faults.add("user directory: lookup failed")
		return billing.User{}, errors.New("faultsim: user directory unavailable")
	}
	return billing.User{ID: id, Email: id + "@example.com", Status: billing.UserStatusActive}, nil
}

// Send implements billing.Notifier for the notices of dunning: on stormy
// days it fails before delivering, times out before delivering, or
// delivers and loses its answer (the caller sees an error).
func (m *dunModel) Send(ctx context.Context, email string, n billing.RenewalNotice) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	key := fmt.Sprintf("%s %s %s %d", n.UserID, n.BillingDate, n.EventType, n.Attempt)
	c := m.calls.next(key)
	lost := false
	if m.s.env.stormy() {
		switch u := draw(m.s.opts.Seed, "dunning send", key, c); {
		case u < 0.04:
			m.s.env.faults.add("notifier: dunning notice failed")
			return errors.New("faultsim: notification channel unavailable")
		case u < 0.06:
			m.s.env.faults.add("notifier: dunning notice timed out before delivering")
			return fmt.Errorf("faultsim: notification channel: %w", context.DeadlineExceeded)
		case u < 0.08:
			m.s.env.faults.add("notifier: dunning notice delivered, answer lost")
			lost = true
		}
	}
	m.noteDelivered(n, key, lost)
	if lost {
		return fmt.Errorf("faultsim: notification channel: answer lost: %w", context.DeadlineExceeded)
	}
	return nil
}

// noteDelivered counts a delivery of notice key: a second one breaks the
// invariant, unless an earlier delivery's answer was lost (the engine was
// told the send failed, so it releases the claim and sends again: at
// most once cannot be kept through a channel that loses answers without
// a key it dedupes by; counted apart, or as broken with strictNotices).
func (m *dunModel) noteDelivered(n billing.RenewalNotice, key string, lost bool) {
	m.mu.Lock()
	m.sent[key]++
	count, wasLost := m.sent[key], m.lost[key]
	if lost {
		m.lost[key] = true
	}
	m.mu.Unlock()
	switch {
	case count == 1:
		m.s.countOp("dunning notice sent: " + n.EventType)
	case wasLost && !m.strictNotices:
		m.s.countOp("dunning notice sent again after its answer was lost: " + n.EventType)
	default:
		m.report(invDunNotice, fmt.Sprintf("user %s: the %s notice of the period billed %s, attempt %d, delivered %d times (at %s)",
			n.UserID, n.EventType, n.BillingDate, n.Attempt, count, m.s.clock.Now().Format(time.DateTime)))
	}
}

// Emit implements billing.EventSink: it counts the ends of dunning per
// period; a second breaks the invariant.
func (m *dunModel) Emit(_ context.Context, e billing.Event) error {
	if e.Type != billing.EventDunningEnded {
		return nil
	}
	m.mu.Lock()
	m.ends[e.SubscriptionID] = append(m.ends[e.SubscriptionID], e.Reason)
	ends := slices.Clone(m.ends[e.SubscriptionID])
	m.mu.Unlock()
	m.s.countOp("dunning ended: " + e.Reason)
	if len(ends) > 1 {
		m.report(invDunFinal, fmt.Sprintf("user %s: period %s: its dunning ended %d times: %v", e.UserID, e.SubscriptionID, len(ends), ends))
	}
	return nil
}

// countOp counts an operation's outcome from any goroutine.
func (s *Sim) countOp(what string) {
	s.mu.Lock()
	s.res.Ops[what]++
	s.mu.Unlock()
}
