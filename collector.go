package billing

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
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
	// Defaults to DefaultRetryPolicy{} (once a day for 30 days). Not
	// with Dunning, whose schedule decides instead.
	RetryPolicy RetryPolicy
	// Dunning, when set, bounds what follows a declined charge: retries
	// on a schedule counted from the first decline and by kind of decline,
	// notices to the customer, a final action when the schedule ends
	// unpaid, and periods after an owed one held until it is paid (see
	// [DunningPolicy]). Defaults to nil: the RetryPolicy retries, nobody
	// is told, nothing ends but the stale threshold (the behaviour before
	// dunning, kept so that an upgrade never starts cancelling by itself).
	Dunning *DunningPolicy
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
	// Invoices, when set, has the collector issue an [Invoice] for every
	// charge: decided as a draft (keyed by the period) and numbered before
	// the processor is called, so the amount charged is the invoice's
	// total; paid when the charge succeeds (or its bank debit settles),
	// void when the period is waived or cancelled unpaid, uncollectible
	// when the period goes stale, and credited (a [CreditNote]) when the
	// payment is refunded. A period of zero (a trial, a free tier) is not
	// charged and gets none; a charge that a plan change's credit, a coupon
	// or the customer's balance covers in full gets one, paid without a
	// charge. Defaults to none.
	Invoices Invoices
	// Invoicing sets the currency and the number sequence of the invoices
	// issued. See [Invoicing].
	Invoicing Invoicing
	// Coupons, when set, stores the host's coupons and promotion codes and
	// counts their redemptions: [Collector.ApplyCoupon] needs it. A
	// coupon's discount comes off the plan of each charge it lasts for
	// (see [Period.Due]). Defaults to none.
	Coupons Coupons
	// Tax, when set, is asked for the tax of each period's charge before
	// the period's first attempt (see [TaxProvider]); the period keeps the
	// answer ([Period.Tax]) and its invoice has a tax line. Defaults to
	// nil: no tax.
	Tax TaxProvider
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
	if c.Dunning != nil {
		if c.RetryPolicy != nil {
			return c, errors.New("billing: Config.RetryPolicy and Config.Dunning: set one, the dunning schedule decides the retries")
		}
		pol, err := c.Dunning.withDefaults()
		if err != nil {
			return c, err
		}
		c.Dunning = &pol
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
	if c.Invoicing.Currency == "" {
		c.Invoicing.Currency = "USD"
	}
	if _, ok := currencyDigits(c.Invoicing.Currency); !ok {
		return c, fmt.Errorf("billing: Config.Invoicing.Currency: %q is not an ISO 4217 code", c.Invoicing.Currency)
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
	if c.cfg.Dunning != nil && kind == RunRetry && cur.Status == StatusError {
		return c.dun(ctx, cur, rep)
	}
	declined := rep.Declined
	err = c.attemptRecord(ctx, kind.process(), cur, rep)
	if rep.Declined > declined {
		c.afterDecline(ctx, cur)
	}
	return err
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
	if c.cfg.Dunning != nil {
		return c.stale(it, now) || c.dunningWorth(it, now)
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

// A run owns its instant. Its kind, its "now" (the instant its status
// queries are bounded by), the store and shards it reads and how far it
// got travel in its cursor (Report.Next), so that an invocation that
// continues the run later — a second or a day later, on another host —
// reads exactly the ranges the first one started, and resumes where it
// stopped. A cursor of another kind, store or shard set is refused; an old
// one never is. With Config.RunCursorKeys the cursor is signed (HMAC-SHA256
// over its state), so only a cursor the engine made is read; without, it
// carries a checksum that catches corruption, not a forgery.
//
// A run reads its shards as chains of pages: one chain over all its
// shards when it works them one after the other (the store walks them in
// order), or one chain per shard when it works them at once
// ([Config.ShardConcurrency]). A fresh run starts at a shard that moves
// with the day (see firstShard), so a host that drops a run's continuation
// leaves different shards unread each day rather than the same ones for
// ever: with n shards, every shard is the first one read at least once in
// any n days in a row.

// runState is a run's cursor, decoded.
type runState struct {
	Kind   RunKind   `json:"kind"`
	At     time.Time `json:"at"`
	Store  string    `json:"store"`
	Shards []int     `json:"shards"`
	// Left are the chains not finished, in the order the run works them.
	Left []chain `json:"left"`
}

// chain is a sequence of pages of the run's queries over some shards: the
// query it is at (Phase, an index into runQueries) and the store's cursor
// in it ("" at its top).
type chain struct {
	Shards []int  `json:"shards"`
	Phase  int    `json:"phase,omitempty"`
	Cursor string `json:"cursor,omitempty"`
}

// Run cursor prefixes: an unkeyed cursor (its state and a checksum), and
// one signed with Config.RunCursorKeys.
const (
	runCursorPrefix       = "run1."
	signedRunCursorPrefix = "run2."
)

// runCursorMACLabel starts every signed message, so that a key a host
// also uses elsewhere cannot be made to sign a run cursor by another
// party's message (or the reverse).
const runCursorMACLabel = "dynabill run cursor v2\x00"

// runCursorKeys checks and copies Config.RunCursorKeys.
func runCursorKeys(keys [][]byte) ([][]byte, error) {
	var out [][]byte
	for i, k := range keys {
		if len(k) < MinRunCursorKeyLen {
			return nil, fmt.Errorf("billing: Config.RunCursorKeys[%d]: %d bytes, want at least %d", i, len(k), MinRunCursorKeyLen)
		}
		out = append(out, bytes.Clone(k))
	}
	return out, nil
}

// runCursorMAC is the HMAC-SHA256 of a cursor's state under key.
func runCursorMAC(key, js []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(runCursorMACLabel))
	m.Write(js)
	return m.Sum(nil)
}

func (c *Collector) run(ctx context.Context, req RunRequest) (*Report, error) {
	now := c.cfg.Clock.Now()
	rep := &Report{Kind: string(req.Kind), Started: now}
	defer func() { rep.Finished = c.cfg.Clock.Now() }()
	k := shardsOf(c.cfg.Repository)
	shards, err := shardList(req.Shards, k)
	if err != nil {
		return rep, err
	}
	st, err := c.runState(req, now, shards, k)
	if err != nil {
		return rep, err
	}
	queries, err := c.runQueries(req.Kind, st.At)
	if err != nil {
		return rep, err
	}
	for _, ch := range st.Left {
		if ch.Phase >= len(queries) {
			return rep, fmt.Errorf("%w: a chain at query %d of a %s run", ErrInvalidCursor, ch.Phase, req.Kind)
		}
	}
	if len(st.Left) > 1 && c.cfg.ShardConcurrency > 1 {
		err = c.runChainsAtOnce(ctx, st, queries, k, rep)
	} else {
		err = c.runChainsInTurn(ctx, st, queries, k, rep)
	}
	return rep, err
}

// runState decodes the run req continues, or starts a run at now over
// shards of a store with k shards.
func (c *Collector) runState(req RunRequest, now time.Time, shards []int, k int) (runState, error) {
	store := fmt.Sprintf("%T/%d", c.cfg.Repository, k)
	if req.Cursor != "" {
		return decodeRunCursor(req.Cursor, c.cfg.RunCursorKeys, req.Kind, store, shards)
	}
	st := runState{Kind: req.Kind, At: now.UTC(), Store: store, Shards: shards}
	first := firstShard(now, len(shards), c.cfg.PagesPerInvocation)
	order := append(slices.Clone(shards[first:]), shards[:first]...)
	if c.cfg.ShardConcurrency > 1 {
		for _, s := range order {
			st.Left = append(st.Left, chain{Shards: []int{s}})
		}
		return st, nil
	}
	// In turn: the store walks a chain's shards in ascending order, so the
	// rotated order is two ascending chains.
	for _, part := range [][]int{shards[first:], shards[:first]} {
		if len(part) > 0 {
			st.Left = append(st.Left, chain{Shards: slices.Clone(part)})
		}
	}
	return st, nil
}

// firstShard is the index, among a run's n shards, of the one a fresh run
// at now reads first: the day's number times rotationStep(pages, n),
// modulo n. The step is a unit modulo n (coprime with it), so any n days
// in a row start on n different shards: however large a backlog, a run
// that is never continued still reads every shard within n days.
func firstShard(now time.Time, n, pages int) int {
	if n <= 1 {
		return 0
	}
	day := now.Unix() / 86400
	if now.Unix() < 0 && now.Unix()%86400 != 0 {
		day-- // floor, for clocks before 1970
	}
	d := int(((day % int64(n)) + int64(n)) % int64(n))
	return d * rotationStep(pages, n) % n
}

// rotationSteps caches rotationStep by {pages, n}.
var rotationSteps sync.Map

// rotationStep is the step of firstShard for a run of pages pages over n
// shards (n at least 2): of the units modulo n, the one with which days
// that each read pages shards from their first one (a run that finds at
// most a page in each) read every shard soonest, the smallest on a tie.
// That is within a few days of ceil(n/pages) — the pace a step of pages
// itself keeps, which is no unit when pages and n share a factor (with
// 32 shards and 10 pages it would start only on even shards).
func rotationStep(pages, n int) int {
	if pages >= n {
		return 1
	}
	key := [2]int{pages, n}
	if s, ok := rotationSteps.Load(key); ok {
		return s.(int)
	}
	best, step := n+1, 1
	seen := make([]bool, n)
	for s := 1; s < n; s++ {
		if gcd(s, n) != 1 {
			continue
		}
		clear(seen)
		left, days := n, 0
		for ; left > 0 && days < best; days++ {
			for j := range pages {
				if i := (days*s + j) % n; !seen[i] {
					seen[i] = true
					left--
				}
			}
		}
		if left == 0 && days < best {
			best, step = days, s
		}
	}
	rotationSteps.Store(key, step)
	return step
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// runQueries returns the status queries a run of kind at reads, one after
// the other: its records (see runQuery); for the retry run also
// ACH debits past their settlement deadline, and ERROR records older than
// its window — only records whose attempt is in flight (they cannot be
// closed before it is resolved) or that missed being marked STALE are
// there, and the run resolves or closes them.
func (c *Collector) runQueries(kind RunKind, at time.Time) ([]StatusQuery, error) {
	q, err := c.runQuery(kind, at)
	if err != nil {
		return nil, err
	}
	if kind != RunRetry {
		return []StatusQuery{q}, nil
	}
	return []StatusQuery{q,
		{Status: StatusACHSent, Before: at.Add(-c.cfg.ACHSettlementDeadline)},
		{Status: StatusError, Before: q.After.Truncate(time.Second).Add(time.Second)},
	}, nil
}

// runChainsInTurn works the chains of st one after the other, reading at
// most PagesPerInvocation pages in all.
func (c *Collector) runChainsInTurn(ctx context.Context, st runState, queries []StatusQuery, k int, rep *Report) error {
	pages := c.cfg.PagesPerInvocation
	for len(st.Left) > 0 && pages > 0 && ctx.Err() == nil {
		ch := &st.Left[0]
		done, err := c.runChain(ctx, st.Kind, ch, queries, k, &pages, rep)
		if err != nil {
			rep.Next = st.encode(c.cfg.RunCursorKeys)
			return err
		}
		if done {
			st.Left = st.Left[1:]
		}
	}
	if len(st.Left) > 0 {
		rep.Next = st.encode(c.cfg.RunCursorKeys)
	}
	return ctx.Err()
}

// runChainsAtOnce works the chains of st ShardConcurrency at a time, each
// for up to PagesPerInvocation pages, with its own share of the report.
func (c *Collector) runChainsAtOnce(ctx context.Context, st runState, queries []StatusQuery, k int, rep *Report) error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		work = make(chan int)
		left = make([]bool, len(st.Left))
	)
	for range min(c.cfg.ShardConcurrency, len(st.Left)) {
		wg.Go(func() {
			for i := range work {
				sub := &Report{Kind: rep.Kind}
				pages := c.cfg.PagesPerInvocation
				done, err := c.runChain(ctx, st.Kind, &st.Left[i], queries, k, &pages, sub)
				rep.add(sub)
				mu.Lock()
				left[i] = !done || err != nil
				if err != nil {
					errs = append(errs, fmt.Errorf("shards %v: %w", st.Left[i].Shards, err))
				}
				mu.Unlock()
			}
		})
	}
	for i := range st.Left {
		if ctx.Err() != nil {
			for j := i; j < len(st.Left); j++ {
				left[j] = true
			}
			break
		}
		work <- i
	}
	close(work)
	wg.Wait()
	var rest []chain
	for i, ch := range st.Left {
		if left[i] {
			rest = append(rest, ch)
		}
	}
	if st.Left = rest; len(rest) > 0 {
		rep.Next = st.encode(c.cfg.RunCursorKeys)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return ctx.Err()
}

// runChain reads ch's pages, while *pages allows, and handles their
// records; ch is left where the next page starts. done reports that the
// chain has no page left. After a failed page read, or a page whose
// handling ctx cut short, ch is where it was before that page.
func (c *Collector) runChain(ctx context.Context, kind RunKind, ch *chain, queries []StatusQuery, k int, pages *int, rep *Report) (done bool, err error) {
	for *pages > 0 {
		q := queries[ch.Phase]
		if len(ch.Shards) < k {
			q.Shards = ch.Shards // a chain over every shard reads them as the store's own query
		}
		q.Cursor = ch.Cursor
		p, err := c.cfg.Repository.QueryStatus(ctx, q)
		if err != nil {
			return false, fmt.Errorf("billing: %s run: page %d: %w", kind, rep.Pages+1, err)
		}
		*pages--
		rep.Pages++
		rep.Scanned += p.Scanned
		rep.Invalid += len(p.Invalid)
		for _, bad := range p.Invalid {
			c.invalidRecord(ctx, string(kind), "", bad)
		}
		c.handlePage(ctx, kind, p.Items, rep)
		if ctx.Err() != nil {
			// The page may be half handled: the continuation reads it
			// again (its handled records are no longer eligible), even
			// when it was the chain's last.
			return false, nil
		}
		if ch.Cursor = p.Next; ch.Cursor == "" {
			if ch.Phase++; ch.Phase == len(queries) {
				return true, nil
			}
		}
	}
	return false, nil
}

// encode is the run's cursor: its state as JSON, base64url, with an
// HMAC-SHA256 under keys[0] when there are keys, else with a checksum.
func (st runState) encode(keys [][]byte) string {
	js, _ := json.Marshal(st) // plain fields always marshal
	if len(keys) > 0 {
		return signedRunCursorPrefix + base64.RawURLEncoding.EncodeToString(append(js, runCursorMAC(keys[0], js)...))
	}
	sum := sha256.Sum256(js)
	return runCursorPrefix + base64.RawURLEncoding.EncodeToString(append(js, sum[:8]...))
}

// maxRunCursor bounds the cursors decodeRunCursor reads.
const maxRunCursor = 64 << 10

// decodeRunCursor decodes the cursor of a run of kind over shards of store,
// refusing one of another run as [ErrInvalidCursor]. With keys, only a
// cursor signed by one of them is read; without, only an unkeyed one.
func decodeRunCursor(token string, keys [][]byte, kind RunKind, store string, shards []int) (runState, error) {
	bad := func(why string, args ...any) (runState, error) {
		return runState{}, fmt.Errorf("%w: %s", ErrInvalidCursor, fmt.Sprintf(why, args...))
	}
	if len(token) > maxRunCursor {
		return bad("not the cursor of a run (Report.Next)")
	}
	var js []byte
	switch unkeyed, signed := strings.HasPrefix(token, runCursorPrefix), strings.HasPrefix(token, signedRunCursorPrefix); {
	case unkeyed && len(keys) > 0:
		return bad("an unsigned cursor, and Config.RunCursorKeys is set (forged, or of a run started before the keys were)")
	case signed && len(keys) == 0:
		return bad("a signed cursor, and Config.RunCursorKeys is not set")
	case unkeyed:
		raw, err := base64.RawURLEncoding.DecodeString(token[len(runCursorPrefix):])
		if err != nil || len(raw) < 8 {
			return bad("not base64url")
		}
		var sum []byte
		js, sum = raw[:len(raw)-8], raw[len(raw)-8:]
		if want := sha256.Sum256(js); !bytes.Equal(sum, want[:8]) {
			return bad("checksum mismatch (corrupted or edited)")
		}
	case signed:
		raw, err := base64.RawURLEncoding.DecodeString(token[len(signedRunCursorPrefix):])
		if err != nil || len(raw) < sha256.Size {
			return bad("not base64url")
		}
		var mac []byte
		js, mac = raw[:len(raw)-sha256.Size], raw[len(raw)-sha256.Size:]
		if !slices.ContainsFunc(keys, func(k []byte) bool { return hmac.Equal(mac, runCursorMAC(k, js)) }) {
			return bad("signature mismatch (edited, corrupted, or signed with a key not in Config.RunCursorKeys)")
		}
	default:
		return bad("not the cursor of a run (Report.Next)")
	}
	var st runState
	if err := json.Unmarshal(js, &st); err != nil {
		return bad("%v", err)
	}
	switch {
	case st.Kind != kind:
		return bad("a %s run's cursor given to a %s run", st.Kind, kind)
	case st.Store != store:
		return bad("a cursor of store %s given to store %s", st.Store, store)
	case !slices.Equal(st.Shards, shards):
		return bad("a cursor of a run over shards %v given to a run over shards %v", st.Shards, shards)
	case st.At.IsZero():
		return bad("no instant")
	}
	for _, ch := range st.Left {
		if len(ch.Shards) == 0 || ch.Phase < 0 || ch.Phase > 2 {
			return bad("a chain of shards %v at query %d", ch.Shards, ch.Phase)
		}
		for _, s := range ch.Shards {
			if !slices.Contains(shards, s) {
				return bad("shard %d is not one of the run's %v", s, shards)
			}
		}
	}
	return st, nil
}

// leaseKey carries the lease a collection runs under in its context.
type leaseKey struct{}

func withLease(ctx context.Context, l Lease) context.Context {
	return context.WithValue(ctx, leaseKey{}, l)
}

// checkLease fails when the lease the collection runs under is lost or
// past its local deadline. It reads nothing: the lease's own signal and
// its local expiry are enough to stop before a charge or a write; the
// conditional writes remain the fence for a holder that paused after it.
func checkLease(ctx context.Context) error {
	l, _ := ctx.Value(leaseKey{}).(Lease)
	if l == nil {
		return nil
	}
	select {
	case <-l.Lost():
		return fmt.Errorf("billing: lock of %s: %w", l.UserID(), ErrLeaseLost)
	default:
	}
	if dl := l.Deadline(); !dl.IsZero() && time.Now().After(dl) {
		return fmt.Errorf("billing: lock of %s: past its local deadline %v: %w", l.UserID(), dl.Format(time.RFC3339Nano), ErrLeaseLost)
	}
	return nil
}

// release gives a lease back, retrying a failed release a few times. A
// lease lost meanwhile is not an error of the caller's (its writes were
// fenced); any other failure is returned: the lock then expires by itself,
// within two lease durations, since nothing renews it any more.
func (c *Collector) release(ctx context.Context, l Lease) error {
	// Not cancelled with the work (a cancelled request still gives its lock
	// back), but bounded: a store that does not answer cannot hold the
	// caller for ever.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	var err error
	for i := range releaseTries {
		if err = l.Release(ctx); err == nil {
			return nil
		}
		if errors.Is(err, ErrLeaseLost) {
			c.cfg.Logger.WarnContext(ctx, "billing: lease lost before release", "user_id", l.UserID(), "error", err)
			return nil
		}
		time.Sleep(time.Duration(i+1) * 20 * time.Millisecond)
	}
	c.cfg.Logger.ErrorContext(ctx, "billing: releasing lock failed", "user_id", l.UserID(), "error", err)
	return fmt.Errorf("billing: release lock of %s: %w", l.UserID(), err)
}

// releaseTries bounds the tries of a failed release, and releaseTimeout
// the time all of them take.
const (
	releaseTries   = 3
	releaseTimeout = 10 * time.Second
)

// PanicError reports a panic during a collection or a change: of the
// host's code (a payment provider, an event sink, a store) or of the
// library's. The collector does not let it unwind past the user's lock:
// it releases the lock, turns the panic into this error for the record at
// hand (a run goes on with the other records) and logs it with its stack.
// A payment attempt made durable before the panic stays in flight and is
// resolved by the next collection of the record, as after a crash.
type PanicError struct {
	// Value is what was passed to panic.
	Value any
	// Stack is the panicking goroutine's stack.
	Stack []byte
}

// Error implements error.
func (e *PanicError) Error() string {
	return fmt.Sprintf("billing: panic during a collection: %v", e.Value)
}

// Unwrap returns Value when it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// recoverPanic, deferred, turns a panic into a [*PanicError] in *err.
func recoverPanic(ctx context.Context, log *slog.Logger, userID string, err *error) {
	v := recover()
	if v == nil {
		return
	}
	pe := &PanicError{Value: v, Stack: debug.Stack()}
	log.ErrorContext(ctx, "billing: panic during a collection", "user_id", userID, "panic", fmt.Sprint(v), "stack", string(pe.Stack))
	*err = errors.Join(*err, pe)
}
