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

// errTimeout is the processor's answer when the caller cannot tell what
// happened: the request may or may not have acted.
var errTimeout = errors.New("faultsim: processor: request timed out (outcome unknown)")

// Processor is the payment processor model. It keeps its own ledger: at
// most one answer per idempotency key (a replay with the same key and
// amount gets the first answer, while the processor still knows the key),
// each answer acted on once. It implements [billing.PaymentLookup],
// [billing.ReplayWindow] and [billing.RequestTimeout], and keeps the
// contract the last one states: a request still running at the processor
// finishes, and a lookup that lags behind a charge catches up, within
// RequestTimeout of the request's presentation.
//
// Faults, drawn from (seed, key, call index of the key): rate limits
// (nothing done), timeouts before it acts, timeouts after it charged,
// requests still running when the caller gives up (the charge is applied
// later; a replay meanwhile gets [billing.ErrKeyInUse], a lookup finds
// nothing), the caller's lease lost during the call, lookups that fail
// or lag, and outages when nothing answers. ACH debits settle one to
// three days later, some two weeks later, some are returned.
type Processor struct {
	env     *env
	locker  *Locker
	timeout time.Duration
	window  time.Duration
	calls   *counter
	lookups *counter
	// touch is told the user of every answer acted on.
	touch func(user string)
	// lags enables requests still running after the caller gave up and
	// lookups that lag behind a charge.
	lags bool
	// dun, when set (the Dunning scenario), draws a kind for every
	// decline, makes a user's new card pay, and is told of every request
	// the processor acts on (dunning.go).
	dun *dunModel

	mu      sync.Mutex
	keys    map[string]*keyState
	charges []*Charge
	// zero are the requests of zero amount the processor received: none
	// may come (a free period is completed without the processor).
	zero []billing.PaymentRequest
}

var (
	_ billing.PaymentProvider = (*Processor)(nil)
	_ billing.PaymentLookup   = (*Processor)(nil)
	_ billing.ReplayWindow    = (*Processor)(nil)
	_ billing.RequestTimeout  = (*Processor)(nil)
)

// keyState is what the processor knows of one idempotency key.
type keyState struct {
	// running is a request with the key still being processed: it acts
	// at completeAt, and lookups see it lag later.
	running    bool
	runReq     billing.PaymentRequest
	completeAt time.Time
	lag        time.Duration
	// answer is the answer the key was given, nil before one.
	answer *Charge
}

// Charge is one answer the processor acted on: a collection (succeeded,
// or an ACH debit pending settlement) or a decline.
type Charge struct {
	Key            string
	UserID         string
	SubscriptionID string
	Attempt        int
	Amount         billing.Amount
	Result         billing.PaymentResult
	// At is when the processor acted; lookups see the answer from
	// VisibleAt.
	At, VisibleAt time.Time
	// SettleAt is when a pending debit settles or comes back (Returns).
	SettleAt          time.Time
	Returns           bool
	Settled, Returned bool
	// Recovered: a declined card charge the customer confirmed later, on
	// session (the same payment, now succeeded); Told: its settled event
	// was applied by the host, which knows of it from then on.
	Recovered, Told bool
	// Retried: a declined card charge a later attempt confirmed again
	// (the same payment, Result.TransactionID, under that attempt's key):
	// the later charge holds the payment's state from then on.
	Retried bool
	// Reports: an answer about the period's earlier payment, which went
	// through before this request (the customer confirmed it on
	// session): no money moved with it.
	Reports bool
}

// Kept reports whether the charge moved money that stayed moved: a
// collection that succeeded, or an ACH debit not returned.
func (c *Charge) Kept() bool {
	if c.Reports {
		return false
	}
	if c.Recovered {
		return true
	}
	switch c.Result.Outcome {
	case billing.OutcomeSucceeded:
		return true
	case billing.OutcomePending:
		return !c.Returned
	}
	return false
}

func newProcessor(e *env, l *Locker, timeout, window time.Duration) *Processor {
	return &Processor{env: e, locker: l, timeout: timeout, window: window, calls: newCounter(), lookups: newCounter(), keys: map[string]*keyState{}}
}

// RequestTimeout implements [billing.RequestTimeout].
func (p *Processor) RequestTimeout() time.Duration { return p.timeout }

// ReplayWindow implements [billing.ReplayWindow]: past it the processor
// forgets a key, and a request with it is a new one.
func (p *Processor) ReplayWindow() time.Duration { return p.window }

// outcomeOf draws the answer to the first request acting on key.
func (p *Processor) outcomeOf(req billing.PaymentRequest) billing.PaymentResult {
	res := billing.PaymentResult{TransactionID: "txn-" + req.IdempotencyKey, AccountMask: "6789", PaymentType: "CARD"}
	if p.dun != nil {
		return p.dun.outcomeOf(req, res)
	}
	if p.insolvent(req.UserID) {
		res.Outcome, res.DeclineReason, res.Retryable = billing.OutcomeDeclined, "R01: insufficient funds", true
		return res
	}
	switch u := draw(p.env.seed, "outcome", req.IdempotencyKey); {
	case u < 0.10:
		res.Outcome, res.DeclineReason, res.Retryable = billing.OutcomeDeclined, "R01: insufficient funds", true
	case u < 0.12:
		res.Outcome, res.DeclineReason = billing.OutcomeDeclined, "R02: account closed"
	case u < 0.42:
		res.Outcome, res.PaymentType = billing.OutcomePending, "ACH"
	default:
		res.Outcome = billing.OutcomeSucceeded
	}
	return res
}

// insolvent reports whether the user's collections are all declined (as
// worth retrying) for a stretch of the simulation: their records are
// retried daily until they turn stale.
func (p *Processor) insolvent(user string) bool {
	return draw(p.env.seed, "insolvent", user) < 0.08
}

// prior is the latest charge of the period's earlier payment req names
// (req.PriorPayment), when it is a card payment of req's subscription and
// amount that has not been retried since; nil otherwise. The caller
// holds p.mu.
func (p *Processor) prior(req billing.PaymentRequest) *Charge {
	if req.PriorPayment == "" {
		return nil
	}
	for i := len(p.charges) - 1; i >= 0; i-- {
		c := p.charges[i]
		if c.Result.TransactionID != req.PriorPayment || c.SubscriptionID != req.SubscriptionID {
			continue
		}
		if c.Retried || c.Result.PaymentType != "CARD" || c.Amount != req.Amount {
			return nil
		}
		return c
	}
	return nil
}

// outcomeAfter draws the answer to req, which names the period's earlier
// payment prior (nil: none the processor can retry), as billingstripe
// answers from the earlier PaymentIntent: one the customer paid on
// session is the answer, nothing charged (reports); a declined one is
// confirmed again, the same payment under req's key (a bank debit's
// outcome drawn for it reads as a card's success); otherwise a new
// payment.
func (p *Processor) outcomeAfter(req billing.PaymentRequest, prior *Charge) (res billing.PaymentResult, reports bool) {
	switch {
	case prior == nil:
		return p.outcomeOf(req), false
	case prior.Recovered || prior.Result.Outcome == billing.OutcomeSucceeded:
		res = prior.Result
		res.Outcome, res.DeclineReason, res.Retryable = billing.OutcomeSucceeded, "", false
		return res, true
	}
	res = p.outcomeOf(req)
	res.TransactionID, res.PaymentType = prior.Result.TransactionID, "CARD"
	if res.Outcome == billing.OutcomePending {
		res.Outcome = billing.OutcomeSucceeded
	}
	return res, false
}

// act applies req's answer at at; lookups see it from visible.
func (p *Processor) act(st *keyState, req billing.PaymentRequest, at, visible time.Time) *Charge {
	prior := p.prior(req)
	res, reports := p.outcomeAfter(req, prior)
	if prior != nil && !reports {
		prior.Retried = true
	}
	c := &Charge{Key: req.IdempotencyKey, UserID: req.UserID, SubscriptionID: req.SubscriptionID, Attempt: req.Attempt,
		Amount: req.Amount, Result: res, At: at, VisibleAt: visible, Reports: reports}
	if c.Result.Outcome == billing.OutcomePending {
		// Drawn from the key and how often it was acted on, not from the
		// ledger's order, which concurrent collections decide.
		n := 0
		for _, o := range p.charges {
			if o.Key == c.Key {
				n++
			}
		}
		c.SettleAt = at.Add(between(p.env.seed, 20*time.Hour, 72*time.Hour, "settle", c.Key, n))
		if draw(p.env.seed, "late", c.Key, n) < 0.06 {
			c.SettleAt = at.Add(between(p.env.seed, 15*24*time.Hour, 20*24*time.Hour, "late-at", c.Key, n))
		}
		c.Returns = draw(p.env.seed, "returns", c.Key, n) < 0.15
	}
	st.answer, st.running = c, false
	p.charges = append(p.charges, c)
	if p.touch != nil {
		p.touch(c.UserID)
	}
	return c
}

// advanceLocked lets the requests still running act once their time has
// come; p.mu is held.
func (p *Processor) advanceLocked(now time.Time) {
	var done []string
	for k, st := range p.keys {
		if st.running && !now.Before(st.completeAt) {
			done = append(done, k)
		}
	}
	slices.Sort(done)
	for _, k := range done {
		st := p.keys[k]
		p.act(st, st.runReq, st.completeAt, st.completeAt.Add(st.lag))
	}
}

func (p *Processor) timedOut(req billing.PaymentRequest) error {
	return fmt.Errorf("%w: key %s", errTimeout, req.IdempotencyKey)
}

// Collect implements [billing.PaymentProvider].
func (p *Processor) Collect(ctx context.Context, req billing.PaymentRequest) (billing.PaymentResult, error) {
	if err := ctx.Err(); err != nil {
		return billing.PaymentResult{}, err
	}
	key := req.IdempotencyKey
	if req.Amount == 0 {
		p.mu.Lock()
		p.zero = append(p.zero, req)
		p.mu.Unlock()
	}
	if key == "" || req.Amount < 0 {
		return billing.PaymentResult{}, fmt.Errorf("faultsim: processor: bad request %+v", req)
	}
	now := p.env.clock.Now()
	n := p.calls.next(key)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.advanceLocked(now)
	if p.env.outage() {
		p.env.faults.add("processor: outage")
		return billing.PaymentResult{}, p.timedOut(req)
	}
	stormy := p.env.stormy()
	u := draw(p.env.seed, "collect", key, n)
	if stormy && u < 0.03 {
		p.env.faults.add("processor: rate limited")
		return billing.PaymentResult{}, &billing.RateLimitedError{RetryAfter: time.Second, Err: errors.New("HTTP 429")}
	}
	st := p.keys[key]
	if st == nil {
		st = &keyState{}
		p.keys[key] = st
	}
	if st.running {
		p.env.faults.add("processor: replay while the request runs (key in use)")
		return billing.PaymentResult{}, fmt.Errorf("faultsim: processor: key %s: %w", key, billing.ErrKeyInUse)
	}
	if a := st.answer; a != nil && (p.window <= 0 || now.Sub(a.At) <= p.window) {
		if a.UserID != req.UserID || a.SubscriptionID != req.SubscriptionID || a.Amount != req.Amount {
			p.env.faults.add("processor: key reused with other parameters (refused)")
			return billing.PaymentResult{}, fmt.Errorf("faultsim: processor: key %s first used for %s %s %s, now %s %s %s",
				key, a.UserID, a.SubscriptionID, a.Amount, req.UserID, req.SubscriptionID, req.Amount)
		}
		if stormy && u < 0.05 {
			p.env.faults.add("processor: timeout before acting (replay)")
			return billing.PaymentResult{}, p.timedOut(req)
		}
		return a.Result, nil // the first answer
	}
	// A new request: the key was never acted on, or was forgotten.
	if stormy {
		switch v := draw(p.env.seed, "collect-fault", key, n); {
		case v < 0.04:
			p.env.faults.add("processor: timeout before acting")
			return billing.PaymentResult{}, p.timedOut(req)
		case v < 0.08:
			p.env.faults.add("processor: timeout after the charge")
			p.presented(req, now)
			lag := time.Duration(0)
			if p.lags && draw(p.env.seed, "lags", key, n) < 0.5 {
				lag = between(p.env.seed, time.Second, p.timeout, "lag", key, n)
				p.env.faults.add("processor: lookup lags behind the charge")
			}
			p.act(st, req, now, now.Add(lag))
			return billing.PaymentResult{}, p.timedOut(req)
		case v < 0.11 && p.lags:
			p.env.faults.add("processor: request still running when the caller gave up")
			p.presented(req, now)
			d := between(p.env.seed, time.Minute, p.timeout*6/10, "runs", key, n)
			st.running, st.runReq, st.completeAt = true, req, now.Add(d)
			st.lag = between(p.env.seed, 0, p.timeout-d, "run-lag", key, n)
			if draw(p.env.seed, "stall", key, n) < 0.5 {
				p.env.faults.add("lock: lease lost during the processor call")
				p.locker.stall(req.UserID)
			}
			return billing.PaymentResult{}, p.timedOut(req)
		case v < 0.12:
			p.env.faults.add("lock: lease lost during a processor call that answered")
			p.locker.stall(req.UserID)
		}
	}
	p.presented(req, now)
	return p.act(st, req, now, now).Result, nil
}

// presented tells the Dunning scenario of req, a request the processor
// acts on (now, or later while it runs), presented at now.
func (p *Processor) presented(req billing.PaymentRequest, now time.Time) {
	if p.dun != nil {
		p.dun.presented(req, now)
	}
}

// LookupPayment implements [billing.PaymentLookup]: the answer given to
// the key as it stands now (a settled debit succeeded, a returned one was
// declined), or not found before the processor acted on the key or while
// its lookups lag.
func (p *Processor) LookupPayment(ctx context.Context, req billing.PaymentRequest) (billing.PaymentResult, bool, error) {
	if err := ctx.Err(); err != nil {
		return billing.PaymentResult{}, false, err
	}
	key := req.IdempotencyKey
	now := p.env.clock.Now()
	n := p.lookups.next(key)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.advanceLocked(now)
	if p.env.outage() {
		p.env.faults.add("processor: outage")
		return billing.PaymentResult{}, false, fmt.Errorf("faultsim: processor: lookup of %s: %w", key, errTimeout)
	}
	if p.env.stormy() {
		switch u := draw(p.env.seed, "lookup", key, n); {
		case u < 0.02:
			p.env.faults.add("processor: lookup rate limited")
			return billing.PaymentResult{}, false, &billing.RateLimitedError{Err: errors.New("HTTP 429")}
		case u < 0.05:
			p.env.faults.add("processor: lookup failed")
			return billing.PaymentResult{}, false, fmt.Errorf("faultsim: processor: lookup of %s: %w", key, errTimeout)
		}
	}
	st := p.keys[key]
	if st == nil || st.answer == nil || now.Before(st.answer.VisibleAt) {
		return billing.PaymentResult{}, false, nil
	}
	res := st.answer.Result
	switch {
	case res.Outcome != billing.OutcomePending:
	case st.answer.Settled:
		res.Outcome = billing.OutcomeSucceeded
	case st.answer.Returned:
		res.Outcome, res.DeclineReason, res.Retryable = billing.OutcomeDeclined, "R01: ACH returned", true
	}
	if st.answer.Recovered {
		res.Outcome, res.DeclineReason, res.Retryable = billing.OutcomeSucceeded, "", false
	}
	return res, true, nil
}

// advance lets the requests still running act up to now.
func (p *Processor) advance(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.advanceLocked(now)
}

// settle settles or returns the ACH debits whose time has come and
// returns the settlement events the processor sends for them.
func (p *Processor) settle(now time.Time) []billing.Settlement {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.advanceLocked(now)
	var due []*Charge
	for _, c := range p.charges {
		if c.Result.Outcome == billing.OutcomePending && !c.Settled && !c.Returned && !now.Before(c.SettleAt) {
			due = append(due, c)
		}
	}
	// In key order: the ledger's order is the order concurrent
	// collections happened to reach the processor.
	slices.SortFunc(due, func(a, b *Charge) int { return strings.Compare(a.Key, b.Key) })
	var out []billing.Settlement
	for _, c := range due {
		ev := billing.Settlement{SubscriptionID: c.SubscriptionID, TransactionID: c.Result.TransactionID, Kind: billing.SettlementSettled}
		if c.Returns {
			c.Returned = true
			ev.Kind, ev.Reason = billing.SettlementReturned, "R01: insufficient funds"
		} else {
			c.Settled = true
		}
		out = append(out, ev)
	}
	return out
}

// ledger returns copies of every answer acted on, in order.
// takeZero returns the zero-amount requests received since the last call.
func (p *Processor) takeZero() []billing.PaymentRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	z := p.zero
	p.zero = nil
	return z
}

func (p *Processor) ledger() []Charge {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Charge, len(p.charges))
	for i, c := range p.charges {
		out[i] = *c
	}
	return out
}
