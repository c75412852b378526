package billingtest

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/seedhash"
)

// Errors of a [Provider], for errors.Is.
var (
	// ErrTimeout is what a scripted unknown outcome returns when its Step
	// names no error: the caller cannot tell whether money moved.
	ErrTimeout = errors.New("billingtest: payment provider timed out (outcome unknown)")
	// ErrKeyReused is returned for a request whose idempotency key was
	// first used with a different user, subscription or amount, as a real
	// processor rejects a reused key with different parameters. Nothing is
	// charged.
	ErrKeyReused = errors.New("billingtest: idempotency key reused with different parameters")
	// ErrNoLookup is returned by [Provider.LookupPayment] unless
	// [ProviderOptions.Lookup] is set.
	ErrNoLookup = errors.New("billingtest: payment provider offers no lookup")
	// ErrPriorPaid is returned, outcome unknown, for a request whose
	// PriorPayment went through for another amount than the request's.
	ErrPriorPaid = errors.New("billingtest: the earlier payment went through for another amount")
)

// Step is what a [Provider] does with one request: answer it (succeeded,
// pending or declined), or fail with an outcome unknown to the caller,
// before or after acting. Build steps with [Succeeded], [Pending],
// [Declined], [RateLimited], [UnknownBeforeCharge] and [UnknownAfterCharge]. The zero Step
// succeeds.
type Step struct {
	// Outcome is the processor's answer. Zero means
	// [billing.OutcomeSucceeded].
	Outcome billing.PaymentOutcome
	// DeclineReason and Retryable describe a decline; they are ignored
	// for other outcomes.
	DeclineReason string
	Retryable     bool
	// Decline and ActionURL are what the answer's Decline and ActionURL
	// say (see [DeclinedAs]).
	Decline   billing.DeclineKind
	ActionURL string
	// Err, when not nil, is returned to the caller instead of the answer.
	Err error
	// Charged, with Err, says the processor acted before the error: the
	// answer is stored under the key (and charged, if it moves money), and
	// a retry with the same key replays it with a nil error. Without
	// Charged the processor did nothing: no answer is stored, and a retry
	// with the same key is a new request.
	Charged bool
}

// Succeeded is a Step that collects the money at once.
func Succeeded() Step { return Step{Outcome: billing.OutcomeSucceeded} }

// Pending is a Step that submits an ACH debit awaiting settlement; the
// charge shows in [Provider.PendingSettlements] until settled or returned.
func Pending() Step { return Step{Outcome: billing.OutcomePending} }

// Declined is a Step that declines the collection with reason; retryable
// is what the answer's Retryable says.
func Declined(reason string, retryable bool) Step {
	return Step{Outcome: billing.OutcomeDeclined, DeclineReason: reason, Retryable: retryable}
}

// DeclinedAs is a Step that declines the collection as kind, with
// reason, retryable as a processor says it is (billingstripe): a lack of
// funds and an unexplained decline are, an expired card, an
// authentication and a hard decline are not. An
// authentication-required decline carries actionURL.
func DeclinedAs(kind billing.DeclineKind, reason, actionURL string) Step {
	retryable := kind == billing.DeclineInsufficientFunds || kind == billing.DeclineOther
	return Step{Outcome: billing.OutcomeDeclined, DeclineReason: reason, Retryable: retryable,
		Decline: kind, ActionURL: actionURL}
}

// UnknownBeforeCharge is a Step that fails with err (nil means
// [ErrTimeout]) before the processor acts: nothing is charged or stored,
// so a retry with the same key is answered afresh by the next Step.
func UnknownBeforeCharge(err error) Step {
	return Step{Err: cmp.Or(err, ErrTimeout)}
}

// RateLimited is a Step that refuses the request for the processor's rate
// limit, asking the caller to wait retryAfter (0: unsaid), before acting:
// nothing is charged or stored, and the error wraps
// [billing.ErrRateLimited].
func RateLimited(retryAfter time.Duration) Step {
	return Step{Err: &billing.RateLimitedError{RetryAfter: retryAfter, Err: errors.New("HTTP 429 Too Many Requests")}}
}

// UnknownAfterCharge is a Step that performs s (its answer stored under the
// key and charged if it moves money) and then fails with err (nil means
// [ErrTimeout]), like a timeout after the processor acted. A retry with the
// same key gets s's answer with a nil error and charges nothing more.
func UnknownAfterCharge(s Step, err error) Step {
	s.Err = cmp.Or(err, ErrTimeout)
	s.Charged = true
	return s
}

// Script decides the Step for a request that no [Provider.SetAttempt] or
// [Provider.SetUser] script covers. It is called with the provider's lock
// held, once per request that is not a replay, and must not call the
// Provider.
type Script func(req billing.PaymentRequest) Step

// Always is a Script giving s to every request.
func Always(s Step) Script { return func(billing.PaymentRequest) Step { return s } }

// Sequence is a Script giving steps in order, one per request, the last
// repeating; with no steps it gives [Succeeded]. It keeps its position, so
// hand each Provider its own Sequence. Safe for concurrent use.
func Sequence(steps ...Step) Script {
	var (
		mu sync.Mutex
		sq = sequence{steps: slices.Clone(steps)}
	)
	return func(billing.PaymentRequest) Step {
		mu.Lock()
		defer mu.Unlock()
		return sq.next()
	}
}

// RandomScript is a Script for simulations: it declines (retryably, reason
// "R01: insufficient funds") with probability declineRate, leaves a debit
// pending with probability pendingRate, and succeeds otherwise. The draw is
// a hash of seed and the request's idempotency key, with no shared random
// state, so the same seed and keys give the same steps whatever the order
// of the calls. It panics unless both rates and their sum lie in [0, 1].
func RandomScript(seed int64, declineRate, pendingRate float64) Script {
	for _, r := range []float64{declineRate, pendingRate, declineRate + pendingRate} {
		if !(r >= 0 && r <= 1) { // also rejects NaN
			panic(fmt.Sprintf("billingtest: RandomScript: rates %v (decline) and %v (pending) must each lie in [0, 1] and sum to at most 1", declineRate, pendingRate))
		}
	}
	return func(req billing.PaymentRequest) Step {
		switch u := unitHash(seed, req.IdempotencyKey); {
		case u < declineRate:
			return Declined("R01: insufficient funds", true)
		case u < declineRate+pendingRate:
			return Pending()
		}
		return Succeeded()
	}
}

// unitHash maps seed and key to a float in [0, 1).
func unitHash(seed int64, key string) float64 {
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(seed))
	h.Write(b[:])
	h.Write([]byte(key))
	return seedhash.Unit(h.Sum64())
}

// sequence hands out steps in order, the last repeating.
type sequence struct {
	steps []Step
	pos   int
}

func (s *sequence) next() Step {
	if len(s.steps) == 0 {
		return Succeeded()
	}
	st := s.steps[min(s.pos, len(s.steps)-1)]
	s.pos++
	return st
}

// ProviderOptions configures a [Provider]. The zero value succeeds every
// collection at once.
type ProviderOptions struct {
	// Default decides requests no SetAttempt or SetUser script covers.
	// Defaults to Always(Succeeded()).
	Default Script
	// Clock stamps calls and charges. Defaults to [billing.SystemClock].
	Clock billing.Clock
	// AccountMask is the answers' account mask. Defaults to "6789".
	AccountMask string
	// PaymentType is the answers' payment type. Defaults to "ACH".
	PaymentType string
	// ReplayWindow is how long the provider keeps idempotency keys: a key
	// first answered longer ago (by Clock) is forgotten, and a request with
	// it is a new one that may charge again, as with processors that prune
	// keys. The provider reports it through [billing.ReplayWindow]. 0 keeps
	// keys for ever.
	ReplayWindow time.Duration
	// IgnorePriorPayment makes every attempt a new payment, whatever
	// [billing.PaymentRequest.PriorPayment] names: an adapter that breaks
	// that contract, or was written before it, for tests of what the
	// collector does with a payment the record no longer carries (an
	// earlier attempt's, paid later). See also
	// [Provider.SetIgnorePriorPayment].
	IgnorePriorPayment bool
	// Lookup makes [Provider.LookupPayment] answer from the provider's
	// ledger, which never forgets; without it LookupPayment fails with
	// [ErrNoLookup], as for a processor that offers no lookup.
	Lookup bool
}

// Call is one request a [Provider] received and what it answered.
type Call struct {
	Request billing.PaymentRequest
	// Result is the answer; zero when Err is not nil.
	Result billing.PaymentResult
	Err    error
	// Replayed says the key had been answered before: Result is that
	// first answer and nothing was charged.
	Replayed bool
	At       time.Time
}

// Charge is a collection that moved money: one answered succeeded or
// pending. There is at most one per idempotency key.
type Charge struct {
	Key            string
	UserID         string
	SubscriptionID string
	Attempt        int
	Amount         billing.Amount
	Outcome        billing.PaymentOutcome
	TransactionID  string
	At             time.Time
	// Settled and Returned record what [Provider.Settle] and
	// [Provider.Return] did to a pending charge.
	Settled  bool
	Returned bool
}

// Provider is a scripted [billing.PaymentProvider] that keeps idempotency
// keys like a real processor: the first request with a key is answered by
// a Step, later requests with that key replay the stored answer (with a nil
// error, even when the first one timed out after acting) and charge
// nothing; a key reused with a different user, subscription or amount
// fails with [ErrKeyReused]. A request with an empty key, a negative
// amount or a done context fails and charges nothing.
//
// The Step for a new key comes, in order of precedence, from the script
// set for its subscription and attempt ([Provider.SetAttempt]), for its
// user ([Provider.SetUser]), or the default Script. Each request that is
// not a replay consumes one step of the script that decides it.
//
// Answers carry the transaction ID "txn-" + key, the account mask and the
// payment type of the options.
//
// Like a processor whose declined payments the customer can still pay
// ([Provider.ConfirmOnSession]), it keeps the contract of
// [billing.PaymentRequest.PriorPayment]: a request naming an earlier
// payment of its subscription retries that payment rather than making a
// new one. A prior payment that succeeded or is pending is the answer
// (with its transaction ID, nothing charged); a declined one is tried
// again, the step deciding, and a success charges it, under its own
// transaction ID. One of another amount than the request's is ended when
// declined (a new payment is made) and an error ([ErrPriorPaid]) when it
// went through. The zero value is ready to use with default
// options. Safe for concurrent use: requests are handled one at a time, so
// concurrent requests with one key charge once.
type Provider struct {
	mu       sync.Mutex
	opts     ProviderOptions
	users    map[string]*sequence
	attempts map[attemptKey]*sequence
	keys     map[string]keyAnswers // by idempotency key
	calls    []Call
	charges  []Charge
	down     bool
	lookups  int
	// payments are the payments answered, by transaction ID: what a later
	// attempt naming one as its PriorPayment retries.
	payments map[string]*payment
}

// payment is one payment the provider made: its current outcome, and the
// key of the request that made it.
type payment struct {
	key, userID, subscriptionID string
	amount                      billing.Amount
	outcome                     billing.PaymentOutcome
}

var (
	_ billing.PaymentProvider = (*Provider)(nil)
	_ billing.PaymentLookup   = (*Provider)(nil)
	_ billing.ReplayWindow    = (*Provider)(nil)
)

// ReplayWindow implements [billing.ReplayWindow]: [ProviderOptions.ReplayWindow].
func (p *Provider) ReplayWindow() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.opts.ReplayWindow
}

// SetUnreachable makes every request and lookup fail with [ErrTimeout]
// before acting (true), as a processor that cannot be reached, or serve
// them again (false).
func (p *Provider) SetUnreachable(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
}

// LookupPayment implements [billing.PaymentLookup] when
// [ProviderOptions.Lookup] is set: the answer first given to the key, from
// a ledger that outlives the replay window (a pending ACH debit that was
// settled or returned since reads as succeeded or declined), or
// found=false when the key was never answered. Lookups are recorded in [Provider.Lookups].
func (p *Provider) LookupPayment(ctx context.Context, req billing.PaymentRequest) (billing.PaymentResult, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lookups++
	switch {
	case ctx.Err() != nil:
		return billing.PaymentResult{}, false, ctx.Err()
	case !p.opts.Lookup:
		return billing.PaymentResult{}, false, ErrNoLookup
	case p.down:
		return billing.PaymentResult{}, false, ErrTimeout
	}
	k, ok := p.keys[req.IdempotencyKey]
	var res billing.PaymentResult
	if ok {
		res = k.first.result
	}
	for _, c := range p.charges {
		// An ACH debit's answer changes when it settles or comes back.
		switch {
		case c.Key != req.IdempotencyKey || c.Outcome != billing.OutcomePending:
		case c.Settled:
			res.Outcome = billing.OutcomeSucceeded
		case c.Returned:
			res.Outcome, res.DeclineReason = billing.OutcomeDeclined, "ACH returned"
		}
	}
	return res, ok, nil
}

// Lookups returns the number of LookupPayment calls.
func (p *Provider) Lookups() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lookups
}

// attemptKey names one attempt of one subscription record.
type attemptKey struct {
	subscriptionID string
	attempt        int
}

// answer is what a key was first answered, with the parameters it was
// answered for.
// keyAnswers are the answers given to one idempotency key: the one a
// replay gets (nil once the replay window forgot it) and the first ever,
// which lookups read (the processor's ledger never forgets).
type keyAnswers struct {
	replay, first *answer
}

type answer struct {
	userID, subscriptionID string
	amount                 billing.Amount
	result                 billing.PaymentResult
	at                     time.Time
}

// NewProvider returns a Provider with opts.
func NewProvider(opts ProviderOptions) *Provider { return &Provider{opts: opts} }

// NewRandomProvider returns a Provider deciding every request by
// [RandomScript](seed, declineRate, pendingRate). It panics on rates out of
// range.
func NewRandomProvider(seed int64, declineRate, pendingRate float64) *Provider {
	return NewProvider(ProviderOptions{Default: RandomScript(seed, declineRate, pendingRate)})
}

// SetIgnorePriorPayment sets [ProviderOptions.IgnorePriorPayment].
func (p *Provider) SetIgnorePriorPayment(ignore bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.opts.IgnorePriorPayment = ignore
}

// SetDefault replaces the default Script; nil restores Always(Succeeded()).
func (p *Provider) SetDefault(s Script) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.opts.Default = s
}

// SetUser scripts the requests of userID: each new request consumes the
// next step, the last repeating. No steps removes the script.
func (p *Provider) SetUser(userID string, steps ...Step) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(steps) == 0 {
		delete(p.users, userID)
		return
	}
	if p.users == nil {
		p.users = map[string]*sequence{}
	}
	p.users[userID] = &sequence{steps: slices.Clone(steps)}
}

// SetAttempt scripts this fake processor's answers to attempt n of
// subscriptionID (unlike billing.Repository.SetAttempt, which records an
// attempt on a stored record): the requests for it,
// overriding SetUser and the default: each new request consumes the next
// step, the last repeating (so UnknownBeforeCharge(nil), Succeeded() times
// out once and then succeeds). No steps removes the script.
func (p *Provider) SetAttempt(subscriptionID string, n int, steps ...Step) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := attemptKey{subscriptionID, n}
	if len(steps) == 0 {
		delete(p.attempts, k)
		return
	}
	if p.attempts == nil {
		p.attempts = map[attemptKey]*sequence{}
	}
	p.attempts[k] = &sequence{steps: slices.Clone(steps)}
}

// Collect implements [billing.PaymentProvider].
func (p *Provider) Collect(ctx context.Context, req billing.PaymentRequest) (billing.PaymentResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := Call{Request: req, At: p.now()}
	c.Result, c.Replayed, c.Err = p.collect(ctx, req, c.At)
	if c.Err != nil {
		c.Result = billing.PaymentResult{}
	}
	p.calls = appendDoubling(p.calls, c)
	return c.Result, c.Err
}

// appendDoubling is append that doubles a full slice's capacity, where
// append grows a long one by a quarter: a fake that logs every call of a
// long run should not copy its log a dozen times over.
func appendDoubling[T any](s []T, v T) []T {
	if len(s) == cap(s) {
		s = slices.Grow(s, max(cap(s), 16))
	}
	return append(s, v)
}

// collect answers req; p.mu is held.
func (p *Provider) collect(ctx context.Context, req billing.PaymentRequest, at time.Time) (billing.PaymentResult, bool, error) {
	if err := ctx.Err(); err != nil {
		return billing.PaymentResult{}, false, err
	}
	key := req.IdempotencyKey
	if key == "" {
		return billing.PaymentResult{}, false, errors.New("billingtest: Provider.Collect: empty IdempotencyKey")
	}
	if req.Amount < 0 {
		return billing.PaymentResult{}, false, fmt.Errorf("billingtest: Provider.Collect: negative amount %s", req.Amount)
	}
	if p.down {
		return billing.PaymentResult{}, false, ErrTimeout
	}
	k, seen := p.keys[key]
	if k.replay != nil && p.opts.ReplayWindow > 0 && at.Sub(k.replay.at) > p.opts.ReplayWindow {
		k.replay = nil // forgotten: the request is a new one
		p.keys[key] = k
	}
	if k.replay != nil {
		a := k.replay
		if a.userID != req.UserID || a.subscriptionID != req.SubscriptionID || a.amount != req.Amount {
			return billing.PaymentResult{}, false, fmt.Errorf("%w: key %q was first used for user %q, subscription %q, amount %s; now user %q, subscription %q, amount %s",
				ErrKeyReused, key, a.userID, a.subscriptionID, a.amount, req.UserID, req.SubscriptionID, req.Amount)
		}
		return a.result, true, nil
	}

	prior := p.payments[req.PriorPayment]
	switch {
	case prior == nil:
	case p.opts.IgnorePriorPayment || prior.subscriptionID != req.SubscriptionID:
		prior = nil // another period's: a new payment
	case prior.amount != req.Amount && prior.outcome != billing.OutcomeDeclined:
		// Paid for another amount: billingstripe cannot take it as this
		// attempt's answer either.
		return billing.PaymentResult{}, false, fmt.Errorf("%w: key %q: the earlier payment %q went through for %s, the attempt is for %s",
			ErrPriorPaid, key, req.PriorPayment, prior.amount, req.Amount)
	case prior.amount != req.Amount:
		prior = nil // declined for another amount: ended, and a new payment made
	}
	res := billing.PaymentResult{
		AccountMask: cmp.Or(p.opts.AccountMask, "6789"),
		PaymentType: cmp.Or(p.opts.PaymentType, "ACH"),
	}
	var st Step
	moved := true // the answer is this request's own, not an earlier payment's
	if prior != nil && prior.outcome != billing.OutcomeDeclined {
		// The earlier payment went through: it is the answer.
		res.Outcome, res.TransactionID, moved = prior.outcome, req.PriorPayment, false
	} else {
		st = p.step(req)
		if st.Err != nil && !st.Charged {
			return billing.PaymentResult{}, false, st.Err
		}
		res.Outcome, res.TransactionID = cmp.Or(st.Outcome, billing.OutcomeSucceeded), "txn-"+key
		if res.Outcome == billing.OutcomeDeclined {
			res.DeclineReason, res.Retryable = st.DeclineReason, st.Retryable
			res.Decline, res.ActionURL = st.Decline, st.ActionURL
		}
		if prior != nil {
			// The declined earlier payment, tried again.
			res.TransactionID = req.PriorPayment
			prior.outcome = res.Outcome
		} else {
			if p.payments == nil {
				p.payments = map[string]*payment{}
			}
			p.payments[res.TransactionID] = &payment{key: key, userID: req.UserID, subscriptionID: req.SubscriptionID,
				amount: req.Amount, outcome: res.Outcome}
		}
	}
	a := &answer{userID: req.UserID, subscriptionID: req.SubscriptionID, amount: req.Amount, result: res, at: at}
	if !seen {
		k.first = a
	}
	if p.keys == nil {
		p.keys = map[string]keyAnswers{}
	}
	k.replay = a
	p.keys[key] = k
	if moved && (res.Outcome == billing.OutcomeSucceeded || res.Outcome == billing.OutcomePending) {
		p.charges = appendDoubling(p.charges, Charge{
			Key: key, UserID: req.UserID, SubscriptionID: req.SubscriptionID, Attempt: req.Attempt,
			Amount: req.Amount, Outcome: res.Outcome, TransactionID: res.TransactionID, At: at,
		})
	}
	return res, false, st.Err
}

// step picks the Step for a new request; p.mu is held.
func (p *Provider) step(req billing.PaymentRequest) Step {
	if sq, ok := p.attempts[attemptKey{req.SubscriptionID, req.Attempt}]; ok {
		return sq.next()
	}
	if sq, ok := p.users[req.UserID]; ok {
		return sq.next()
	}
	if p.opts.Default != nil {
		return p.opts.Default(req)
	}
	return Succeeded()
}

func (p *Provider) now() time.Time {
	if p.opts.Clock == nil {
		return billing.SystemClock{}.Now()
	}
	return p.opts.Clock.Now()
}

// Calls returns every request received, replays and failures included, in
// order.
func (p *Provider) Calls() []Call {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.calls)
}

// CallCount returns the number of requests received.
func (p *Provider) CallCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.calls)
}

// Charges returns every charge, in the order they were made.
func (p *Provider) Charges() []Charge {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.charges)
}

// ChargesFor returns the charges of subscriptionID, in order.
func (p *Provider) ChargesFor(subscriptionID string) []Charge {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Charge
	for _, c := range p.charges {
		if c.SubscriptionID == subscriptionID {
			out = append(out, c)
		}
	}
	return out
}

// KeysFor returns the distinct idempotency keys requests for
// subscriptionID presented, failed requests included, in order of first
// use.
func (p *Provider) KeysFor(subscriptionID string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, c := range p.calls {
		if c.Request.SubscriptionID == subscriptionID && !slices.Contains(out, c.Request.IdempotencyKey) {
			out = append(out, c.Request.IdempotencyKey)
		}
	}
	return out
}

// PendingSettlements returns the pending charges neither settled nor
// returned, in order. A simulation settles or returns each (Settle,
// Return) and tells the code under test, as the processor's settlement
// events would.
func (p *Provider) PendingSettlements() []Charge {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Charge
	for _, c := range p.charges {
		if c.Outcome == billing.OutcomePending && !c.Settled && !c.Returned {
			out = append(out, c)
		}
	}
	return out
}

// Settle marks the pending charge of key settled: the money arrived. A
// replay of the key still answers pending, as the processor replays its
// first response.
func (p *Provider) Settle(key string) error { return p.resolve("Settle", key, false) }

// Return marks the pending charge of key returned: the debit bounced and
// the money went back, so [RequireNoDoubleCharge] no longer counts it.
func (p *Provider) Return(key string) error { return p.resolve("Return", key, true) }

func (p *Provider) resolve(op, key string, returned bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := slices.IndexFunc(p.charges, func(c Charge) bool { return c.Key == key })
	switch {
	case i < 0:
		return fmt.Errorf("billingtest: Provider.%s: no charge with key %q", op, key)
	case p.charges[i].Outcome != billing.OutcomePending:
		return fmt.Errorf("billingtest: Provider.%s: charge %q is %v, not pending", op, key, p.charges[i].Outcome)
	case p.charges[i].Settled || p.charges[i].Returned:
		return fmt.Errorf("billingtest: Provider.%s: charge %q is already resolved", op, key)
	}
	if returned {
		p.charges[i].Returned = true
		// A debit that came back is not retried: the next attempt makes a
		// new payment (as billingstripe cancels a failed debit first).
		delete(p.payments, p.charges[i].TransactionID)
	} else {
		p.charges[i].Settled = true
		if pay := p.payments[p.charges[i].TransactionID]; pay != nil {
			pay.outcome = billing.OutcomeSucceeded
		}
	}
	return nil
}

// RequireNoDoubleCharge fails t if money moved twice for one billing
// period: a subscription ID with more than one charge (succeeded, or
// pending and not returned), listing their keys.
func RequireNoDoubleCharge(t testing.TB, p *Provider) {
	t.Helper()
	bySub := map[string][]string{}
	for _, c := range p.Charges() {
		if !c.Returned {
			bySub[c.SubscriptionID] = append(bySub[c.SubscriptionID], c.Key)
		}
	}
	var problems []string
	for sub, keys := range bySub {
		if len(keys) > 1 {
			problems = append(problems, fmt.Sprintf("subscription %q charged %d times, keys %q", sub, len(keys), keys))
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		t.Fatalf("double charge:\n\t%s", strings.Join(problems, "\n\t"))
	}
}

// ConfirmOnSession is the customer paying, on session, the declined
// payment with transaction ID txn (a card declined off-session and
// confirmed by its holder, Stripe's recovery of a decline): it succeeds,
// and is charged under the key of the request that last answered it. A
// payment succeeds at most once: one that is not declined, or unknown, is
// an error. The processor's notice of it ([billing.SettlementSettled]) is
// the caller's to deliver.
func (p *Provider) ConfirmOnSession(txn string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	pay := p.payments[txn]
	switch {
	case pay == nil:
		return fmt.Errorf("billingtest: Provider.ConfirmOnSession: no payment %q", txn)
	case pay.outcome != billing.OutcomeDeclined:
		return fmt.Errorf("billingtest: Provider.ConfirmOnSession: payment %q is %v, not declined", txn, pay.outcome)
	}
	pay.outcome = billing.OutcomeSucceeded
	p.charges = appendDoubling(p.charges, Charge{
		Key: pay.key, UserID: pay.userID, SubscriptionID: pay.subscriptionID, Amount: pay.amount,
		Outcome: billing.OutcomeSucceeded, TransactionID: txn, At: p.now(),
	})
	return nil
}
