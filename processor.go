package billing

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// PaymentProvider is the host's payment processor: the port the collector
// charges through.
//
// Collect asks for one collection. A nil error means the provider gave an
// answer ([PaymentResult.Outcome]). An error means the outcome is unknown
// (a timeout, a 5xx, a dropped connection): the money may or may not have
// moved.
//
// # Attempts in flight
//
// Before it calls Collect the collector records the attempt on the record
// (its key, amount, tier, process and start: [Period.LastAttempt]).
// Until the outcome is recorded the record is in flight: runs, single
// collections and every operator action (waive, cancel, pause, tier and
// date changes, stale marking) first resolve the attempt, by presenting
// exactly the recorded request again — the same
// [PaymentRequest.IdempotencyKey] and amount, which the provider must
// answer with the first call's outcome instead of charging again — or, when
// the provider implements [PaymentLookup], by asking what became of the
// key. While neither gives an answer the record is left as it is and the
// operation fails with an [*InFlightError] ([ErrAttemptInFlight]). Every
// real processor used for recurring billing offers such keys; an adapter
// for one that does not must keep its own table of keys.
//
// A processor that forgets keys after a while (Stripe keeps them for 24
// hours) must say so by implementing [ReplayWindow]: past the window a
// replay could charge again, so the collector only resolves such an
// attempt through [PaymentLookup], never by calling Collect with the old
// key.
//
// # One payment per period
//
// A retry must not create a payment while an earlier payment of the same
// period can still succeed: a card declined off-session can be confirmed
// by the customer on session later (Stripe's standard recovery of a
// decline), and the processor's word of that may reach the host only
// after the next retry run. So every attempt after the period's first
// names, in [PaymentRequest.PriorPayment], the processor payment the
// period's earlier attempts left on the record (its transaction_id), and
// the provider must answer from that payment before it makes a new one:
// one that succeeded (or is pending) is the answer, with its transaction
// ID, and nothing is charged again; one that can still succeed is retried
// itself (on Stripe: the same PaymentIntent confirmed again, which
// succeeds at most once) or ended first (canceled) so that it never can;
// only a payment that can no longer succeed lets a new one be made. The
// processor serialises these, so no race is left between the customer's
// confirmation and the retry: whichever comes second finds the payment
// succeeded. A provider for a processor whose payments cannot succeed
// after a decline may ignore the field.
//
// # Rate limits
//
// When the processor refuses a request for its rate limit before acting on
// it (an HTTP 429 from Stripe, for one), Collect returns an error wrapping
// [ErrRateLimited], ideally a [*RateLimitedError] with the wait the
// processor asked for. Nothing was charged: the collector withdraws the
// attempt it recorded (the record is as it was, the attempt not counted),
// waits, and tries again within [ProcessorBudget.RateLimitRetries] or
// leaves the record to a later run. Only say rate-limited when the
// processor guarantees it did nothing; any other error keeps the attempt
// in flight. A rate-limited answer that guarantees nothing (an earlier try
// of the same call may have acted) is such an other error; when it has a
// method ProcessorThrottled() time.Duration (the wait asked for, 0 when
// unknown) anywhere in its chain, the collector slows down for it as for
// [ErrRateLimited], and still keeps the attempt in flight.
type PaymentProvider interface {
	Collect(ctx context.Context, req PaymentRequest) (PaymentResult, error)
}

// RateLimitedError is a rate-limited answer from the processor. It
// matches [ErrRateLimited] with [errors.Is].
type RateLimitedError struct {
	// RetryAfter is how long the processor asked callers to wait; 0 when
	// it did not say ([ProcessorBudget.Backoff] applies then).
	RetryAfter time.Duration
	// Err is the processor's error, if any.
	Err error
}

func (e *RateLimitedError) Error() string {
	msg := ErrRateLimited.Error()
	if e.RetryAfter > 0 {
		msg += fmt.Sprintf(" (retry after %v)", e.RetryAfter)
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns [ErrRateLimited] and the processor's error.
func (e *RateLimitedError) Unwrap() []error { return []error{ErrRateLimited, e.Err} }

// retryAfter is the wait a rate-limited error asks for, 0 when it names
// none.
func retryAfter(err error) time.Duration {
	var rl *RateLimitedError
	if errors.As(err, &rl) {
		return rl.RetryAfter
	}
	return 0
}

// PaymentLookup is implemented by providers that can tell what became of
// an earlier request by its idempotency key, without charging.
type PaymentLookup interface {
	// LookupPayment returns the outcome of the request with
	// req.IdempotencyKey (req is the request as first made). found is false
	// when the processor certainly has no payment for that key, so nothing
	// was charged: the collector then counts the attempt as made and the
	// next attempt takes a new key. An error means the processor could not
	// tell; the attempt stays in flight.
	LookupPayment(ctx context.Context, req PaymentRequest) (res PaymentResult, found bool, err error)
}

// ReplayWindow is implemented by providers whose processor forgets
// idempotency keys: a request replayed after the window may be charged as
// a new one. The collector replays an attempt in flight only while
// it is younger than the window (by the collector's clock, from
// [Attempt.Started]); older ones are resolved only through
// [PaymentLookup]. A provider that does not implement it, or returns 0,
// is taken to keep its keys for ever.
type ReplayWindow interface {
	ReplayWindow() time.Duration
}

// RequestTimeout is implemented by providers that know the longest a
// request can keep running at the processor once sent: the HTTP client's
// timeout times the tries the client makes with one key, plus their
// backoff (Stripe's Go client: 80 seconds a try, 3 tries by default). A
// lookup that finds no payment for a key proves nothing while a request
// with that key may still be running (a holder that lost its lease
// mid-call, a replay answered [ErrKeyInUse]): the collector counts the
// attempt as never made only once its latest presentation
// ([Attempt.LastPresented]) is older than this; until then the attempt
// stays in flight. Providers that do not implement it, or return 0, get
// [DefaultRequestTimeout].
type RequestTimeout interface {
	RequestTimeout() time.Duration
}

// PaymentRequest is one collection attempt.
type PaymentRequest struct {
	UserID         string
	SubscriptionID string
	Amount         Amount
	BillingDate    time.Time
	// Tier is the record's receipt_tier_name, e.g. "Plus:v2".
	Tier    string
	Process Process
	// Attempt numbers the attempts of this billing period from 1. It
	// advances only when an attempt's outcome has been recorded.
	Attempt int
	// IdempotencyKey is the same for every try of one attempt, across
	// crashes and reruns: see [IdempotencyKey].
	IdempotencyKey string
	// Started is when the attempt was recorded, before its first
	// presentation, by the collector's clock ([Attempt.Started]); no
	// request with the key reached the processor earlier. Zero when the
	// caller does not know.
	Started time.Time
	// PriorPayment is the processor's ID of the payment the period's
	// earlier attempts left on the record (its transaction_id, e.g. a
	// declined PaymentIntent), or "" for the period's first attempt and
	// records that name none. A provider must not create a new payment
	// while this one can still succeed (see One payment per period on
	// [PaymentProvider]). It is the same for every presentation of one
	// attempt: the record does not change while the attempt is in
	// flight.
	PriorPayment string
	// InvoiceID and InvoiceNumber name the invoice the charge pays, when
	// the collector issues invoices ([Config.Invoices]); the same on every
	// presentation of the attempt. A provider may show the number to the
	// customer (a statement descriptor, a receipt).
	InvoiceID, InvoiceNumber string `json:",omitempty"`
}

// PaymentOutcome is what the provider answered.
type PaymentOutcome int

const (
	// OutcomePending: an ACH debit was submitted and awaits settlement.
	// The record becomes ACHSENT until a settlement event arrives.
	OutcomePending PaymentOutcome = iota + 1
	// OutcomeSucceeded: the money was collected. The record becomes
	// COMPLETED.
	OutcomeSucceeded
	// OutcomeDeclined: the collection failed (e.g. insufficient funds).
	// The record becomes ERROR; Retryable says whether a retry run should
	// try again.
	OutcomeDeclined
)

// String names the outcome.
func (o PaymentOutcome) String() string {
	switch o {
	case OutcomePending:
		return "pending"
	case OutcomeSucceeded:
		return "succeeded"
	case OutcomeDeclined:
		return "declined"
	}
	return fmt.Sprintf("PaymentOutcome(%d)", int(o))
}

// PaymentResult is the provider's answer to a [PaymentRequest].
type PaymentResult struct {
	Outcome PaymentOutcome
	// TransactionID is the processor's confirmation ID (transaction_id).
	TransactionID string
	// DeclineReason is the processor's message for a decline (usio_error).
	DeclineReason string
	// Retryable says whether a declined collection is worth retrying.
	Retryable bool
	// Decline says why a declined collection was declined, for the
	// dunning schedule ([Config.Dunning]). A decline not Retryable is
	// [DeclineHard] unless it says [DeclineExpiredCard] or
	// [DeclineAuthenticationRequired] (not retried either, but the
	// customer's to fix).
	Decline DeclineKind
	// ActionURL is the processor's link where the customer confirms a
	// payment held for authentication ([DeclineAuthenticationRequired]),
	// sent in the action-required notice.
	ActionURL string
	// AccountMask is the last four digits of the charged account
	// (receipt_account_mask).
	AccountMask string
	// PaymentType is the payment method, e.g. "ACH" (receipt_payment_type).
	PaymentType string
}

// IdempotencyKey derives the key of attempt n of a subscription record:
// "dynabill:<subscription ID>:<n>".
//
// Attempt n is made only after the outcomes of attempts 1..n-1 are
// recorded (billing_attempt), and it is written on the record with its key
// before the call (billing_attempt_number, billing_attempt_key), so a
// crash or an unknown outcome leaves the same key for the rerun to replay.
func IdempotencyKey(subscriptionID string, attempt int) string {
	return "dynabill:" + subscriptionID + ":" + strconv.Itoa(attempt)
}

// ProcessorBudget paces a Collector's calls to the payment processor
// (Collect and LookupPayment), which is the real ceiling of a billing
// run: processors cap requests per second per account (Stripe allows 100
// operations a second in live mode, 25 a second per endpoint by default)
// and answer requests over the cap with a rate-limit error.
//
// The budget belongs to one Collector: every run, shard and single
// collection of that Collector draws on it, so the shards a process runs
// in parallel share it. A run fanned out over many Lambdas or servers
// makes up to their number times the budget's calls: either give each
// process its share of the processor's limit (the limit divided by the
// processes that run at once; a share is lost while its process is done,
// backing off or dead), or let them all draw on one budget, Shared.
//
// The zero ProcessorBudget sets no cap; a rate-limited answer is still
// honoured (see [ErrRateLimited]).
type ProcessorBudget struct {
	// RequestsPerSecond caps how many processor calls start per second,
	// spaced evenly. 0 means no cap.
	RequestsPerSecond float64
	// Concurrency caps the processor calls in progress at once. 0 means no
	// cap beyond [Config.Concurrency].
	Concurrency int
	// RateLimitRetries is how many more times the collector tries a record
	// the processor refused for its rate limit in the same collection,
	// after backing off. Past that the record is left as it was, for a
	// later run. Defaults to 3; negative means no retry in the same
	// collection.
	RateLimitRetries int
	// Backoff is how long every call waits after a rate-limited answer
	// that does not say how long to wait ([RateLimitedError.RetryAfter]);
	// it doubles with each rate-limited answer in a row, up to MaxBackoff.
	// Defaults to one second.
	Backoff time.Duration
	// MaxBackoff caps Backoff and RetryAfter. Defaults to 30 seconds.
	MaxBackoff time.Duration
	// Shared, when set, is a budget the processes of a fleet draw from
	// together (see [ProcessorTokens]): every call also waits for one of
	// its tokens and is sent only inside the token's one-second window,
	// and a rate-limited answer slows the whole fleet. Its clock must be
	// the machine's (the processor counts real seconds), not the
	// Collector's Clock. nil means the budget is this process's only.
	Shared ProcessorTokens
	// SharedBatch is how many tokens one Take of Shared asks for.
	// Defaults to 10.
	SharedBatch int
}

func (b ProcessorBudget) withDefaults() (ProcessorBudget, error) {
	switch {
	case b.RequestsPerSecond < 0:
		return b, fmt.Errorf("billing: Config.ProcessorBudget.RequestsPerSecond: negative %v", b.RequestsPerSecond)
	case b.Concurrency < 0:
		return b, fmt.Errorf("billing: Config.ProcessorBudget.Concurrency: negative %d", b.Concurrency)
	case b.Backoff < 0 || b.MaxBackoff < 0:
		return b, fmt.Errorf("billing: Config.ProcessorBudget: negative backoff %v / %v", b.Backoff, b.MaxBackoff)
	}
	if b.SharedBatch <= 0 {
		b.SharedBatch = 10
	}
	if b.RateLimitRetries == 0 {
		b.RateLimitRetries = 3
	}
	if b.Backoff == 0 {
		b.Backoff = time.Second
	}
	if b.MaxBackoff == 0 {
		b.MaxBackoff = 30 * time.Second
	}
	return b, nil
}

// StoreBudget paces the collector's work to the store's write capacity:
// a run of many shards at once can otherwise outrun a table's or an
// index partition's throughput. The zero value sets no cap and backs off
// after throttling with the defaults.
type StoreBudget struct {
	// WriteUnitsPerSecond caps the write capacity the Collector's runs
	// spend per second, across all their shards: records are handled at
	// most WriteUnitsPerSecond / WriteUnitsPerCollection a second,
	// spaced evenly. 0 means no cap.
	WriteUnitsPerSecond float64
	// WriteUnitsPerCollection is what handling one record is taken to
	// cost, lock included. Defaults to 11 (measured on the legacy tables:
	// 9 for the record, its history row and the next period, 2 for the
	// lock).
	WriteUnitsPerCollection float64
	// Backoff is how long every record waits after a store call was
	// throttled ([ErrThrottled]); it doubles with each throttled record in
	// a row, up to MaxBackoff. Defaults to one second; MaxBackoff to 30
	// seconds.
	Backoff, MaxBackoff time.Duration
}

func (b StoreBudget) withDefaults() (StoreBudget, error) {
	if b.WriteUnitsPerSecond < 0 || b.WriteUnitsPerCollection < 0 {
		return b, fmt.Errorf("billing: Config.StoreBudget: negative write units %v / %v", b.WriteUnitsPerSecond, b.WriteUnitsPerCollection)
	}
	if b.WriteUnitsPerCollection == 0 {
		b.WriteUnitsPerCollection = 11
	}
	// The backoff is the processor budget's, with its defaults.
	p, err := ProcessorBudget{Backoff: b.Backoff, MaxBackoff: b.MaxBackoff}.withDefaults()
	if err != nil {
		return b, fmt.Errorf("billing: Config.StoreBudget: negative backoff %v / %v", b.Backoff, b.MaxBackoff)
	}
	b.Backoff, b.MaxBackoff = p.Backoff, p.MaxBackoff
	return b, nil
}

// pacer returns the pacer that spends b: one start per handled record.
func (b StoreBudget) pacer() *pacer {
	return newPacer(ProcessorBudget{RequestsPerSecond: b.WriteUnitsPerSecond / b.WriteUnitsPerCollection, Backoff: b.Backoff, MaxBackoff: b.MaxBackoff})
}

// pacer spends a ProcessorBudget (or a StoreBudget, as records a
// second). Its times are the machine's, not the Collector's Clock (which
// tells business time and may stand still in tests); now and sleep are
// fields so tests can drive it.
type pacer struct {
	interval    time.Duration // between call starts; 0: no rate cap
	slots       chan struct{} // calls in progress; nil: no cap
	backoff     time.Duration
	maxBackoff  time.Duration
	now         func() time.Time
	sleep       func(context.Context, time.Duration) error
	mu          sync.Mutex
	next        time.Time // earliest start of the next call
	pausedUntil time.Time // no call starts before (rate-limited)
	streak      int       // rate-limited answers in a row
	shared      *sharedTurns
}

func newPacer(b ProcessorBudget) *pacer {
	p := &pacer{backoff: b.Backoff, maxBackoff: b.MaxBackoff, now: time.Now, sleep: sleepCtx}
	if b.RequestsPerSecond > 0 {
		p.interval = time.Duration(float64(time.Second) / b.RequestsPerSecond)
	}
	if b.Concurrency > 0 {
		p.slots = make(chan struct{}, b.Concurrency)
	}
	if b.Shared != nil {
		p.shared = &sharedTurns{tokens: b.Shared, batch: max(1, b.SharedBatch)}
	}
	return p
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// acquire waits for the budget to allow a processor call and returns the
// function that ends it.
func (p *pacer) acquire(ctx context.Context) (done func(), err error) {
	done, _, err = p.acquireCall(ctx)
	return done, err
}

// acquireLocal waits for this process's own budget.
func (p *pacer) acquireLocal(ctx context.Context) (done func(), err error) {
	done = func() {}
	if p.slots != nil {
		select {
		case p.slots <- struct{}{}:
			done = func() { <-p.slots }
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	p.mu.Lock()
	now := p.now()
	start := now
	if p.next.After(start) {
		start = p.next
	}
	if p.pausedUntil.After(start) {
		start = p.pausedUntil
	}
	if p.interval > 0 {
		p.next = start.Add(p.interval)
	}
	p.mu.Unlock()
	if wait := start.Sub(now); wait > 0 {
		if err := p.sleep(ctx, wait); err != nil {
			done()
			return nil, err
		}
	}
	return done, nil
}

// limited pauses every call after a rate-limited answer: for retryAfter
// when the processor said, else for the backoff doubled per answer in a
// row; both capped at maxBackoff. It returns the pause.
func (p *pacer) limited(retryAfter time.Duration) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.streak++
	d := retryAfter
	if d <= 0 {
		d = p.backoff
		for i := 1; i < p.streak && d < p.maxBackoff; i++ {
			d *= 2
		}
	}
	d = min(d, p.maxBackoff)
	if until := p.now().Add(d); until.After(p.pausedUntil) {
		p.pausedUntil = until
	}
	return d
}

// answered ends a streak of rate-limited answers.
func (p *pacer) answered() {
	p.mu.Lock()
	p.streak = 0
	p.mu.Unlock()
}

// storeTurn waits until the store budget allows handling one more record.
func (c *Collector) storeTurn(ctx context.Context) error {
	done, err := c.store.acquire(ctx)
	if err != nil {
		return err
	}
	done()
	return nil
}

// storeAnswered pauses every run after a record whose handling was
// throttled, and ends the pause streak after one that was not.
func (c *Collector) storeAnswered(err error) {
	if errors.Is(err, ErrThrottled) {
		c.store.limited(0)
		return
	}
	c.store.answered()
}

// ProcessorTokens is a processor budget that several processes draw from
// together, so that a fleet of collectors keeps the processor at its limit
// until the last shard is done instead of each process keeping a fixed
// share that is lost when it finishes, waits or dies.
//
// Tokens are granted for one whole second (a window): a call spent from a
// grant must start inside its window, and tokens not spent in it are lost.
// An implementation never grants more than its limit for one window, so
// no second can see more than the limit's calls from the fleet, even when
// a process dies holding tokens.
type ProcessorTokens interface {
	// Take asks for up to n tokens. A grant with N == 0 means the budget
	// is spent for now: ask again at Start.
	Take(ctx context.Context, n int) (TokenGrant, error)
	// Slow tells the fleet that the processor answered a call with its
	// rate limit: the budget grants no window that lies wholly inside
	// retryAfter from now (a second when 0), nor the rest of the current
	// one, and halves its rate, at most once a window, which grows back
	// by a quarter of the limit a window. (The process that saw the
	// answer waits out the whole pause itself.)
	Slow(ctx context.Context, retryAfter time.Duration) error
}

// TokenGrant is tokens granted by [ProcessorTokens.Take]: N calls that may
// start at or after Start and before End (Start plus one second).
type TokenGrant struct {
	N          int
	Start, End time.Time
}

// sharedTurns spends a ProcessorBudget.Shared budget for one process: it
// takes batches of tokens and hands them to calls one by one, each starting
// inside its grant's window.
type sharedTurns struct {
	tokens ProcessorTokens
	batch  int
	mu     sync.Mutex
	grant  TokenGrant // what is left of the last grant
}

// turn waits until a token of the shared budget lets one call start and
// returns the end of the token's window: the call must start before it.
func (s *sharedTurns) turn(ctx context.Context, now func() time.Time, sleep func(context.Context, time.Duration) error) (time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		t := now()
		if s.grant.N > 0 && t.Before(s.grant.End) {
			if wait := s.grant.Start.Sub(t); wait > 0 {
				if err := sleep(ctx, wait); err != nil {
					return time.Time{}, err
				}
				continue // the window may have passed while asleep
			}
			s.grant.N--
			return s.grant.End, nil
		}
		g, err := s.tokens.Take(ctx, s.batch)
		if err != nil {
			return time.Time{}, fmt.Errorf("taking %d processor tokens: %w", s.batch, err)
		}
		if g.N > 0 && !g.End.After(t) || g.N == 0 && g.Start.Before(t.Add(-time.Second)) {
			// Asking again would spin: a budget on another clock (a test
			// clock, say) grants only windows this machine has left.
			return time.Time{}, fmt.Errorf("billing: ProcessorBudget.Shared granted %d tokens from %v to %v at %v: its clock must be the machine's",
				g.N, g.Start.Format(time.RFC3339Nano), g.End.Format(time.RFC3339Nano), t.Format(time.RFC3339Nano))
		}
		s.grant = g
		if g.N == 0 {
			if err := sleep(ctx, max(g.Start.Sub(t), time.Millisecond)); err != nil {
				return time.Time{}, err
			}
		}
	}
}

// errWindowClosed is a call not sent because the window of its shared
// budget's token closed while the attempt was being recorded: sent later,
// it would land in a second whose tokens other processes hold. Nothing
// reached the processor, so it is handled as a call refused for the rate
// limit (withdrawn, tried again with a fresh token).
var errWindowClosed = fmt.Errorf("the shared processor budget's one-second window closed before the call was sent: %w", ErrRateLimited)

// acquireCall is acquire for a call that is recorded before it is sent:
// it also returns the end of the shared budget's window the call must
// start in (zero without a shared budget), for [pacer.windowClosed].
func (p *pacer) acquireCall(ctx context.Context) (done func(), end time.Time, err error) {
	done, err = p.acquireLocal(ctx)
	if err != nil || p.shared == nil {
		return done, time.Time{}, err
	}
	if end, err = p.shared.turn(ctx, p.now, p.sleep); err != nil {
		done()
		return nil, time.Time{}, err
	}
	return done, end, nil
}

// windowClosed reports whether a call whose token's window ends at end
// may no longer start.
func (p *pacer) windowClosed(end time.Time) bool {
	return !end.IsZero() && !p.now().Before(end)
}

// slowShared tells the shared budget, if any, that the processor answered
// with its rate limit and asked for a pause of d. It is called outside the
// pacer's lock, on the caller's context: a slow or failing shared store
// delays only the call that saw the answer, and the local pause holds
// whatever becomes of it.
func (p *pacer) slowShared(ctx context.Context, d time.Duration) {
	if p.shared != nil {
		_ = p.shared.tokens.Slow(ctx, d)
	}
}
