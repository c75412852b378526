package billing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Config configures a [Collector]. Repository, Locker and Provider are
// required; every other field has a default.
type Config struct {
	// Repository stores the records (and their history, atomically).
	Repository Repository
	// History is read by callers that show a record's audit trail; the
	// collector writes history through Repository. Optional.
	History History
	// Locker serializes collections per user.
	Locker Locker
	// Provider charges.
	Provider PaymentProvider
	// Clock tells the time. Defaults to SystemClock.
	Clock Clock
	// Logger receives logs. Defaults to discarding them.
	Logger *slog.Logger
	// RetryPolicy decides which ERROR records the retry run attempts.
	// Defaults to DefaultRetryPolicy{} (once a day for 30 days).
	RetryPolicy RetryPolicy
	// OldSubscriptionDays is the age (now minus billing date) past which a
	// SCHEDULED or ERROR record is marked STALE instead of collected. A
	// billing date the engine sets (a caller's, or the date a stale record
	// goes on at) must be at least a day newer than that, so
	// the next run still collects it: with 30 days, at most 29 days old.
	// Defaults to 30.
	OldSubscriptionDays int
	// ACHSettlementDeadline is how long an ACH debit may wait for its
	// settlement (from the attempt that submitted it). The retry run looks
	// at ACHSENT records past it: it asks the processor through
	// [PaymentLookup] when the provider offers that and records the answer;
	// otherwise (or when the processor still says pending) it moves the
	// record to STALE with updated_event ach-overdue and emits
	// [EventPaymentACHOverdue]. Such a record no longer blocks
	// [Collector.Reactivate], and a settlement that arrives later still
	// completes it. Defaults to 14 days.
	ACHSettlementDeadline time.Duration
	// Concurrency bounds the collections a run makes at once. Defaults to 4.
	Concurrency int
	// ShardConcurrency is how many shards of a [ShardedRepository] one Run
	// works at once, each with its own pages and Concurrency collections,
	// sharing the ProcessorBudget. Defaults to 1: the shards one after the
	// other, as one chain of pages.
	ShardConcurrency int
	// ProcessorBudget paces the calls to the processor: requests per
	// second and in progress, and the backoff after a rate-limited answer.
	// The zero value sets no cap (see [ProcessorBudget]).
	ProcessorBudget ProcessorBudget
	// StoreBudget paces the records runs handle to the store's write
	// capacity, and backs every run off after a throttled store call. The
	// zero value sets no cap (see [StoreBudget]).
	StoreBudget StoreBudget
	// PagesPerInvocation bounds the status pages one Run reads (each shard's,
	// when shards run at once); the rest continues from Report.Next.
	// Defaults to [DefaultRunPagesPerInvocation] (10).
	PagesPerInvocation int
	// RunCursorKeys sign and verify the cursors runs hand back
	// (Report.Next) with HMAC-SHA256. The first key signs; every key
	// verifies. Each is a secret of at least [MinRunCursorKeyLen] random
	// bytes, the same on every host and invocation that continues runs (a
	// key made per process would refuse every other process's cursors).
	// To rotate, put the new key first, keep the old one after it until
	// the runs it signed are done, then drop it. A cursor no key verifies,
	// an unsigned one included, is refused with [ErrInvalidCursor]; what
	// it would have read is the next run's.
	//
	// Defaults to none: cursors then carry a checksum anyone can
	// recompute, which catches corruption and a cursor handed to another
	// run, not a forged one. Whoever can write the queue or state a cursor
	// travels through can then choose a run's instant, shards and
	// position, and so hold records back until a later run reads them;
	// with keys, only cursors the engine made (old ones included) are
	// read. Either way a cursor cannot get a record charged before it is
	// due, or twice: each record is re-read and checked against the clock
	// under its user's lock before it is charged.
	RunCursorKeys [][]byte
	// Events receives events after the changes they describe are stored.
	// Defaults to discarding them.
	Events EventSink
	// NewID makes subscription IDs for new records. Defaults to random
	// UUIDs.
	NewID func() string
	// Prices is the host's price list, by plan: a tier on a term and
	// interval ([PricePlan]; [PriceListMap] holds one in memory). When set,
	// Subscribe, a tier or plan change take their amount from it (see
	// [Periods.ChangeTier]), so a caller never sets a price. Optional.
	Prices PriceList
	// MaxCharge is the largest amount a record may be charged per period.
	// It is checked when a price is set (a subscription or tier change to
	// more is refused) and again before every charge, whoever wrote the
	// record: a record over it is not charged, nothing is written to it,
	// and the run reports it as failed with a [*FieldError] on
	// billing_amount wrapping [ErrInvalidAmount], every run until it is
	// corrected. Defaults to [DefaultMaxCharge].
	MaxCharge Amount
	// AllowFreeTiers lets a subscription or tier change set an amount of
	// zero, and lets the engine complete a record of zero when it is due:
	// one conditional write with its history row
	// ([EventFreePeriodCompleted]), no attempt, no key and no call to the
	// processor, on every run kind and single collection; the next period
	// opens as after a payment. A zero is never presented to the
	// processor. A zero record attempted by an earlier version (still in
	// flight) is resolved first like any other, then completed. Defaults
	// to false: a zero amount is refused when a price is set and again
	// before every collection (reported like an amount over MaxCharge), so
	// that a period nobody meant to be free is not given away.
	AllowFreeTiers bool
	// MeterProvider makes the collection metrics (see
	// dynabill.collection.attempts in the package doc). Defaults to otel.GetMeterProvider(), a
	// no-op unless the host installs a global provider.
	MeterProvider metric.MeterProvider
	// TracerProvider makes the run and attempt spans (see
	// the dynabill.collection.run span). Defaults to otel.GetTracerProvider(), a no-op
	// unless the host installs a global provider.
	TracerProvider trace.TracerProvider
}

func (c Config) withDefaults() (Config, error) {
	switch {
	case c.Repository == nil:
		return c, errors.New("billing: Config.Repository is required")
	case c.Locker == nil:
		return c, errors.New("billing: Config.Locker is required")
	case c.Provider == nil:
		return c, errors.New("billing: Config.Provider is required")
	case c.OldSubscriptionDays < 0:
		return c, fmt.Errorf("billing: Config.OldSubscriptionDays: negative %d", c.OldSubscriptionDays)
	case c.ACHSettlementDeadline < 0:
		return c, fmt.Errorf("billing: Config.ACHSettlementDeadline: negative %v", c.ACHSettlementDeadline)
	case c.Concurrency < 0:
		return c, fmt.Errorf("billing: Config.Concurrency: negative %d", c.Concurrency)
	case c.PagesPerInvocation < 0:
		return c, fmt.Errorf("billing: Config.PagesPerInvocation: negative %d", c.PagesPerInvocation)
	case c.MaxCharge < 0:
		return c, fmt.Errorf("billing: Config.MaxCharge: negative %s", c.MaxCharge)
	}
	if c.MaxCharge == 0 {
		c.MaxCharge = DefaultMaxCharge
	}
	if c.Clock == nil {
		c.Clock = SystemClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.RetryPolicy == nil {
		c.RetryPolicy = DefaultRetryPolicy{}
	}
	if c.OldSubscriptionDays == 0 {
		c.OldSubscriptionDays = 30
	}
	budget, err := c.ProcessorBudget.withDefaults()
	if err != nil {
		return c, err
	}
	c.ProcessorBudget = budget
	if c.StoreBudget, err = c.StoreBudget.withDefaults(); err != nil {
		return c, err
	}
	if c.RunCursorKeys, err = runCursorKeys(c.RunCursorKeys); err != nil {
		return c, err
	}
	if c.Concurrency == 0 {
		c.Concurrency = 4
	}
	if c.ShardConcurrency < 0 {
		return c, fmt.Errorf("billing: Config.ShardConcurrency: negative %d", c.ShardConcurrency)
	}
	c.ShardConcurrency = max(c.ShardConcurrency, 1)
	if c.ACHSettlementDeadline == 0 {
		c.ACHSettlementDeadline = DefaultACHSettlementDeadline
	}
	if c.PagesPerInvocation == 0 {
		c.PagesPerInvocation = DefaultRunPagesPerInvocation
	}
	if c.Events == nil {
		c.Events = eventSinkFunc(func(context.Context, Event) error { return nil })
	}
	if c.NewID == nil {
		c.NewID = uuid.NewString
	}
	return c, nil
}

// Collector is the collection engine: runs over status pages (scheduled,
// retry, pause), single collections for queue workers and APIs, ACH
// settlement and admin changes. It is safe for concurrent use; all state
// lives in the repository.
//
// # Correctness
//
// Every attempt takes the user's lock (a held lock skips the user and
// leaves the record untouched), re-reads the record with a consistent read,
// checks it is still eligible, and charges with an idempotency key derived
// from the record's attempt number ([IdempotencyKey]). The outcome, the
// attempt number, the run timestamps and, on the period's first attempt,
// the next period's SCHEDULED record are written in one transaction
// conditional on the record read. So a crash anywhere, a provider error
// ("outcome unknown") or a lost lease never charges twice: the rerun finds
// either the recorded outcome (nothing left to do) or the same attempt
// number (the same key, which the provider replays).
type Collector struct {
	cfg   Config
	tel   *telemetry
	pace  *pacer // the processor's budget
	store *pacer // the store's budget
}

// NewCollector checks cfg, fills its defaults and returns a Collector.
func NewCollector(cfg Config) (*Collector, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Collector{cfg: cfg, tel: newTelemetry(cfg.MeterProvider, cfg.TracerProvider), pace: newPacer(cfg.ProcessorBudget), store: cfg.StoreBudget.pacer()}, nil
}

// Clock returns the clock the collector reads: [Config.Clock], or
// [SystemClock] when none was set. Test harnesses compare it with the clock
// they move, so that a collector built without the test's clock is refused
// rather than left billing on wall time.
func (c *Collector) Clock() Clock { return c.cfg.Clock }

// RunKind names a run over a status query.
type RunKind string

// The runs.
const (
	// RunScheduled collects SCHEDULED records due before now (INITIAL).
	RunScheduled RunKind = "scheduled"
	// RunRetry retries ERROR records the retry policy selects (RETRY).
	RunRetry RunKind = "retry"
	// RunPause advances PAUSED records past due (PAUSE).
	RunPause RunKind = "pause"
)

// RunRequest starts or continues a run. It is JSON so a host can put it in
// a queue message to continue a run in another invocation.
type RunRequest struct {
	Kind RunKind `json:"kind"`
	// Cursor continues a run: the Next of the previous invocation's report.
	// The run keeps its instant (the "now" its queries started with), so an
	// invocation an hour or a day later reads exactly the records the run
	// started on, from where it stopped; records due since are the next
	// run's. A cursor of another kind, store or Shards is refused with
	// [ErrInvalidCursor]; an old one never is.
	Cursor string `json:"cursor,omitempty"`
	// Shards are the shards of a [ShardedRepository] the run works; empty
	// works every shard. A host that spreads a day over many invocations
	// gives each its own shards (one, or a range), with a cursor of its
	// own; a cursor continues only a run of the same Shards.
	Shards []int `json:"shards,omitempty"`
}

// Report counts what a run or a single collection did. It is
// JSON-serializable for logs and operator tools.
type Report struct {
	Kind     string    `json:"kind"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Pages and Scanned are the status pages read and the items they read.
	Pages   int `json:"pages"`
	Scanned int `json:"scanned"`
	// Invalid counts items that could not be decoded (skipped, logged).
	Invalid int `json:"invalid"`
	// Attempted counts provider calls.
	Attempted int `json:"attempted"`
	Collected int `json:"collected"`
	Pending   int `json:"pending"`
	Declined  int `json:"declined"`
	// Unknown counts provider errors: the attempt stays open and is
	// retried later with the same idempotency key.
	Unknown int `json:"unknown"`
	// RateLimited counts calls the processor refused for its rate limit
	// (see [ErrRateLimited]): not attempted, nothing charged; the record
	// is tried again later in the run or by the next one. A rate-limited
	// call whose outcome stays unknown (see [PaymentProvider]) is counted
	// here and in Unknown. So is a call a shared budget did not send
	// because its token's window closed while the attempt was recorded
	// (see [ProcessorBudget.Shared]).
	RateLimited int `json:"rate_limited"`
	// Free counts zero-amount periods completed without the processor
	// (see [Config.AllowFreeTiers]).
	Free int `json:"free,omitempty"`
	// Advanced counts PAUSED records moved on by the pause run.
	Advanced int `json:"advanced"`
	Stale    int `json:"stale"`
	// ACHOverdue counts ACH debits given up on past the settlement
	// deadline (STALE, ach-overdue).
	ACHOverdue int `json:"ach_overdue"`
	// SkippedLocked counts users skipped because their lock was held.
	SkippedLocked int `json:"skipped_locked"`
	// NotEligible counts records found by the query that were no longer
	// eligible when re-read (already handled, changed, retried today).
	NotEligible int `json:"not_eligible"`
	// Conflicts counts writes that lost to a concurrent writer.
	Conflicts int `json:"conflicts"`
	// Unexpected counts later open records of a user that were neither the
	// period handled nor its successor (see [EventUnexpectedRecord]).
	Unexpected int `json:"unexpected"`
	// Failed lists the records whose handling failed, with the reason.
	Failed []ItemFailure `json:"failed,omitempty"`
	// Next continues the run in another invocation; "" when it is done.
	Next string `json:"next,omitempty"`

	mu sync.Mutex
}

// ItemFailure is one record a run could not handle.
type ItemFailure struct {
	UserID         string `json:"user_id"`
	SubscriptionID string `json:"subscription_id,omitempty"`
	Reason         string `json:"reason"`
}

func (r *Report) count(p *int) {
	r.mu.Lock()
	*p++
	r.mu.Unlock()
}

func (r *Report) fail(userID, subID string, err error) {
	r.mu.Lock()
	r.Failed = append(r.Failed, ItemFailure{UserID: userID, SubscriptionID: subID, Reason: err.Error()})
	r.mu.Unlock()
}

// Run reads up to PagesPerInvocation pages of the run's status queries,
// starting at req.Cursor, and handles every record with bounded
// concurrency. When pages remain, Report.Next is set: the host hands
// RunRequest{Kind: req.Kind, Shards: req.Shards, Cursor: report.Next} to
// the next invocation, whenever that comes. A run not continued is not
// lost: the next run (of the next day, say) reads everything due before
// its own instant, starting at another shard (a fresh run's first shard
// moves with the day). A failed page read returns the report so far and
// the error; Next then holds the cursor to retry from.
//
// The retry run also reads ACH debits past their settlement deadline,
// and ERROR records older than its window: a record whose attempt is in
// flight cannot be closed before the attempt is resolved, so it is
// revisited (and reported) every day, whatever its age.
func (c *Collector) Run(ctx context.Context, req RunRequest) (*Report, error) {
	ctx, span := c.tel.startRun(ctx, req.Kind)
	rep, err := c.run(ctx, req)
	c.tel.endRun(span, rep, err)
	return rep, err
}

// runQuery returns the status query a run of kind makes at now (without a
// cursor): SCHEDULED due at now ([Period.DueAt]: billed before
// now), ERROR billed after now minus the
// stale threshold and a week (so a record crossing the threshold is seen and
// marked STALE even when some daily runs were missed), PAUSED due before
// now. Operator tools use it to preview a run.
func (c *Collector) runQuery(kind RunKind, now time.Time) (StatusQuery, error) {
	switch kind {
	case RunScheduled:
		return StatusQuery{Status: StatusScheduled, Before: now}, nil
	case RunRetry:
		since := now.Add(-time.Duration(c.cfg.OldSubscriptionDays+7) * 24 * time.Hour)
		return StatusQuery{Status: StatusError, After: since}, nil
	case RunPause:
		return StatusQuery{Status: StatusPaused, Before: now}, nil
	}
	return StatusQuery{}, fmt.Errorf("%w: run kind %q", ErrInvalidQuery, kind)
}

// planAction is what a run would do with a record.
type planAction string

// The plan actions.
const (
	// planCollect: the record is charged (process INITIAL or RETRY).
	planCollect planAction = "collect"
	// planCompleteFree: the record's amount is zero; it is completed
	// without the processor (see [Config.AllowFreeTiers]).
	planCompleteFree planAction = "complete free"
	// planMarkStale: the record is too old to collect and becomes STALE.
	planMarkStale planAction = "mark stale"
	// planAdvancePause: the paused period is skipped and the next opened.
	planAdvancePause planAction = "advance pause"
	// planResolve: the record's attempt is in flight; the run replays it
	// or looks it up, and records its outcome (see [PaymentLookup]).
	planResolve planAction = "resolve attempt"
	// planACHOverdue: an ACH debit past its settlement deadline is looked
	// up with the processor, or marked STALE (ach-overdue).
	planACHOverdue planAction = "ach overdue"
	// planSkip: the run leaves the record alone (Reason says why).
	planSkip planAction = "skip"
)

// runPlan is what a run would do with one record, and why.
type runPlan struct {
	Action planAction
	Reason string
}

// planRecord says what a run of kind would do at now with sub as read
// under the user's lock: the same decision the run makes, for operator
// previews. It does no I/O.
func (c *Collector) planRecord(kind RunKind, sub *Period, now time.Time) runPlan {
	if kind == RunRetry && sub.Status == StatusACHSent {
		if now.Sub(sub.LastRunDate) <= c.cfg.ACHSettlementDeadline {
			return runPlan{planSkip, "ACH debit within its settlement deadline"}
		}
		return runPlan{planACHOverdue, fmt.Sprintf("no settlement within %v", c.cfg.ACHSettlementDeadline)}
	}
	if kind == RunPause {
		if sub.Status != StatusPaused || !sub.DueAt(now) {
			return runPlan{planSkip, "not a PAUSED record past due"}
		}
		return runPlan{planAdvancePause, ""}
	}
	if sub.InFlight() {
		return runPlan{planResolve, fmt.Sprintf("attempt %d in flight (key %s)", sub.LastAttempt.Number, sub.LastAttempt.Key)}
	}
	proc := kind.process()
	if c.staleable(proc, sub, now) {
		return runPlan{planMarkStale, fmt.Sprintf("older than %d days", c.cfg.OldSubscriptionDays)}
	}
	if ok, why := c.eligible(proc, sub, now); !ok {
		return runPlan{planSkip, why}
	}
	if c.freeable(sub) {
		return runPlan{planCompleteFree, ""}
	}
	return runPlan{planCollect, ""}
}

// handlePage handles a page's records with at most Concurrency users at
// once. A user's records on the page are handled in index order under one
// hold of the user's lock: concurrent holds would skip all but one of them.
// Each record is observed (span, outcome metric) on its own.
func (c *Collector) handlePage(ctx context.Context, kind RunKind, items []Period, rep *Report) {
	// The users in order of first appearance, and each user's indexes in
	// one slice of the page's (not one slice per user).
	var order []string
	var ends []int // each user's count, then where its indexes end in idx
	rank := make(map[string]int, len(items))
	for i := range items {
		r, seen := rank[items[i].UserID]
		if !seen {
			r = len(order)
			rank[items[i].UserID] = r
			order = append(order, items[i].UserID)
			ends = append(ends, 0)
		}
		ends[r]++
	}
	for r := 1; r < len(ends); r++ {
		ends[r] += ends[r-1]
	}
	idx := make([]int, len(items))
	for i := len(items) - 1; i >= 0; i-- { // backwards, so each user's stay in index order
		r := rank[items[i].UserID]
		ends[r]--
		idx[ends[r]] = i
	}
	// ends[r] is now where user r's indexes start.
	// Concurrency workers take the users in turn: a worker's stack grows
	// once for the page, not once for every user (a goroutine a user spent
	// a tenth of the engine's time copying stacks).
	workers := min(c.cfg.Concurrency, len(order))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				r := int(next.Add(1) - 1)
				if r >= len(order) || ctx.Err() != nil {
					return
				}
				end := len(idx)
				if r+1 < len(ends) {
					end = ends[r+1]
				}
				c.handleUser(ctx, kind, order[r], items, idx[ends[r]:end:end], rep)
			}
		})
	}
	wg.Wait()
}

// handleUser handles the records items[idx] of one user under one hold of
// the user's lock.
func (c *Collector) handleUser(ctx context.Context, kind RunKind, userID string, items []Period, idx []int, rep *Report) {
	now := c.cfg.Clock.Now()
	// Records the index shows as not worth a lock are skipped first, so an
	// ineligible record never costs a lock and a read (they are checked
	// again, on the consistent read, when they are handled).
	var todo []int
	for _, i := range idx {
		if c.worthHandling(kind, &items[i], now) {
			todo = append(todo, i)
			continue
		}
		rctx, obs := c.tel.startRecord(ctx, string(kind), kind.process(), userID, items[i].SubscriptionID)
		obs.rep.count(&obs.rep.NotEligible)
		obs.end(rctx, rep)
	}
	if len(todo) == 0 {
		return
	}
	lease, lockErr := c.cfg.Locker.Lock(ctx, userID)
	if lockErr == nil {
		ctx = withLease(ctx, lease)
		defer func() {
			if err := c.release(ctx, lease); err != nil {
				rep.fail(userID, "", err)
			}
		}()
	}
	for _, i := range todo {
		it := &items[i]
		rctx, obs := c.tel.startRecord(ctx, string(kind), kind.process(), it.UserID, it.SubscriptionID)
		switch {
		case errors.Is(lockErr, ErrAlreadyLocked):
			obs.rep.count(&obs.rep.SkippedLocked)
			c.cfg.Logger.DebugContext(rctx, "billing: user locked, skipped", "user_id", userID)
		case lockErr != nil:
			obs.rep.fail(userID, it.SubscriptionID, fmt.Errorf("lock: %w", lockErr))
		case rctx.Err() != nil:
			obs.rep.fail(userID, it.SubscriptionID, rctx.Err())
		default:
			if obs.err = c.storeTurn(rctx); obs.err == nil {
				obs.err = c.handleRecordSafely(rctx, kind, it, obs.rep)
				c.storeAnswered(obs.err)
			}
			if obs.err != nil {
				if IsConflict(obs.err) {
					obs.rep.count(&obs.rep.Conflicts)
				}
				obs.rep.fail(userID, it.SubscriptionID, obs.err)
				c.cfg.Logger.WarnContext(rctx, "billing: collection failed", "user_id", userID, "subscription_id", it.SubscriptionID, "error", obs.err)
			}
		}
		obs.end(rctx, rep)
	}
}

// handleRecord re-reads a record found by a run (indexes are eventually
// consistent) and handles it; the caller holds the user's lock.
func (c *Collector) handleRecord(ctx context.Context, kind RunKind, it *Period, rep *Report) error {
	cur, ctx, err := c.readLatest(ctx, it)
	if errors.Is(err, ErrNotFound) {
		rep.count(&rep.NotEligible) // moved or deleted since the index read
		return nil
	}
	if err != nil {
		return err
	}
	if kind == RunPause {
		return c.advancePause(ctx, cur, rep)
	}
	if kind == RunRetry && cur.Status == StatusACHSent {
		return c.achOverdue(ctx, cur, rep)
	}
	return c.attemptRecord(ctx, kind.process(), cur, rep)
}

// handleRecordSafely is handleRecord with a panic of the host's code
// turned into a [*PanicError] for this record alone: the run goes on with
// the others, and the user's lock is released as usual.
func (c *Collector) handleRecordSafely(ctx context.Context, kind RunKind, it *Period, rep *Report) (err error) {
	defer recoverPanic(ctx, c.cfg.Logger, it.UserID, &err)
	return c.handleRecord(c.reportInvalid(ctx, string(kind), it.UserID, rep), kind, it, rep)
}

// worthHandling reports whether a record as the index shows it may need
// the run: the retry run skips records the policy would not attempt today
// and that are not old enough to be marked stale.
func (c *Collector) worthHandling(kind RunKind, it *Period, now time.Time) bool {
	if kind != RunRetry {
		return true
	}
	if it.Status != StatusError || it.InFlight() {
		return true // changed since (the consistent read decides), or an attempt to resolve
	}
	return c.stale(it, now) || (!it.NoRetry && c.cfg.RetryPolicy.ShouldRetry(it, now))
}

func (c *Collector) emit(ctx context.Context, e Event) {
	// A sink that calls the collector back gets no part of the call it is
	// told about: not the user's lock a change by user holds (it would
	// re-enter without locking), nor that change's request.
	// Hiding a value ctx does not carry changes nothing, so the common
	// case (a run, which holds neither) allocates no contexts.
	if ctx.Value(heldLockKey{}) != nil {
		ctx = context.WithValue(ctx, heldLockKey{}, nil)
	}
	if ctx.Value(requestKey{}) != nil {
		ctx = context.WithValue(ctx, requestKey{}, nil)
	}
	if err := c.cfg.Events.Emit(ctx, e); err != nil {
		c.cfg.Logger.WarnContext(ctx, "billing: event sink", "type", e.Type, "subscription_id", e.SubscriptionID, "error", err)
	}
}

func eventFor(t EventType, s *Period, at time.Time) Event {
	return Event{Type: t, At: at, UserID: s.UserID, SubscriptionID: s.SubscriptionID, BillingDate: s.BillingDate,
		Amount: s.Amount, Process: s.Process, TransactionID: s.TransactionID, Reason: s.PaymentError}
}
