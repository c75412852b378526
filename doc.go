// Package billing runs recurring subscription billing inside a host's own
// Lambdas and servers.
//
// It owns the subscription records and their audit history, per-user billing
// locks, the collection engine and the pre-billing notifier; the host plugs
// in its payment processor, notification channel, user directory and queues
// through small interfaces. Billing is money: every design choice here leans
// towards "never charge twice, never lose a record, never skip a user
// silently".
//
// # A subscription's life
//
// A host holds a [Subscription] by its user: one per user (on the single
// table, one per account and SKU), billed as a series of billing periods,
// each a [Period] record of its own. Every call a host makes is on the
// [Collector] built on its stores ([NewCollector]), by user, with a
// request key of the host's own (a repeat with the same parameters
// answers what the first call did; with others it is refused):
//
//	start          c.Subscribe(ctx, billing.SubscribeRequest{RequestKey: orderID, UserID: u, Tier: "Plus:v2"})
//	               (amount from Config.Prices or given; first date, term, interval, anchor day,
//	               Friday billing, a trial (TrialDays) and a paused start optional)
//	charge         c.Run(ctx, billing.RunRequest{Kind: billing.RunScheduled}) every day,
//	               RunRetry for declined periods and RunPause for paused ones (rep.Next continues
//	               a long run in a later invocation); c.CollectUser from a queue or a webhook
//	read           c.Subscription(ctx, u): Status (TRIALING, ACTIVE, PAST_DUE, PAUSED, ENDED),
//	               CancelAt, the current period, the trial, NextChargeDate and NextChargeAmount,
//	               PaidThrough, the pending plan change and the periods
//	change plan    c.ChangePlan(ctx, billing.ChangePlanRequest{UserRequest: ur, Tier: "Pro:v1"}):
//	               an upgrade now, a downgrade from the next period on
//	pause, resume  c.Pause(ctx, billing.PauseRequest{UserRequest: ur, Months: 2}), c.Resume
//	move the date  c.MoveBillingDate(ctx, billing.MoveBillingDateRequest{UserRequest: ur, Date: d})
//	trial          c.EndTrial, c.ExtendTrial
//	cancel         c.Cancel(ctx, billing.CancelRequest{UserRequest: ur}): nothing more is charged;
//	               the paid period runs to its end (Status ACTIVE with CancelAt until then,
//	               ENDED after), or ends now with the refund the host owes (When: CancelNow)
//	come back      c.Subscribe again (the cancelled renewal goes on, no gap), or c.Reactivate
//	settle         c.ApplySettlement for an ACH debit's settlement or return
//
// A host gating access reads Status: TRIALING and ACTIVE have access;
// PAST_DUE owes a declined charge the retry run keeps collecting; PAUSED
// is charged again on NextChargeDate; ENDED has none. [ExampleCollector_Subscribe]
// follows three months of charges, [ExampleCollector_ChangePlan] a
// subscription from sign-up to cancel.
//
// Under the calls, each billing period is a record with its own ID (its
// SubscriptionID, on the wire) and status ([Status]: SCHEDULED, ERROR,
// PAUSED, ACHSENT, COMPLETED, ...). A declined attempt leaves its period
// ERROR and opens the next one SCHEDULED; an ERROR period is still
// collected (by the retry run unless the decline was final, by a queued
// collection) until it turns STALE, [Config.OldSubscriptionDays] after its
// billing date: the debt stands. With [Config.Dunning] the retries follow
// a schedule from the first decline instead, the customer is told, the
// next period waits, a final action ends it, and
// [Collector.PaymentMethodUpdated] pays what is owed at once (see
// [DunningPolicy]). Every change is made under the user's
// billing lock, conditional on the periods read, each with its history
// row. The stores cannot write several periods in one transaction: a
// crash between two leaves the first changed, and the same call with the
// same key completes the rest.
//
// An operator who has looked a period up acts on it alone through
// [Collector.Periods]: Collect or Retry it now, Repay, Waive (keyed) or
// WaiveByID, Cancel or CancelUnowed (which refuses a period still owed),
// Move, Pause, Resume, ChangeTier. A period call given a user's ID says so
// in its [ErrNotFound].
//
// A request key names one request. [Collector.Subscribe] and the changes
// above record what was asked on the history rows they write
// ([Period.Request], the history-only attribute billing_request): the
// same key again with the same parameters answers what the first call did
// (Repeated set), with other parameters it is a [*RequestKeyError]
// ([ErrRequestKeyReused]) naming the fields that differ, and so is a key
// given to another call than the first (a cancel's key given to
// Subscribe, a Subscribe key given to a pause). A Subscribe key
// whose first period's opening row records no request (written before
// this version, or without [Config.History]) is answered as a repeat, as
// it always was. [ExampleCollector_ChangePlan] follows a subscription from
// subscribe to cancel by its user.
//
// # Trials and free tiers
//
// A trial is asked for at Subscribe: [SubscribeRequest.TrialDays] (or
// TrialEnd). It is a period of its own at zero, billed on the first date
// and carrying the trial's end and the plan's price
// ([Period.TrialEnd], TrialAmount). The scheduled run completes it
// without the processor and opens the first paid period on the trial's
// end at that price; the anchor day (or the Friday of Friday billing,
// which then needs the trial to end on a Friday) is the trial end's, as
// Stripe's is. While it lasts, [Collector.Subscription] says
// [SubscriptionTrialing], with the first charge on NextChargeDate. During
// the trial:
//
//	change plan    c.ChangePlan: the first charge is the new plan's
//	cancel         c.Cancel: nothing is ever charged
//	end it now     c.EndTrial(ctx, billing.UserRequest{...}): the first paid period is billed
//	               now (the next scheduled run, or c.CollectUser at once, charges it)
//	extend it      c.ExtendTrial(ctx, billing.TrialRequest{UserRequest: ..., End: d})
//
// The first paid period carries [Period.AfterTrial]
// (billing_after_trial): a pause and resume, a plan change or a date move
// during the trial keep it, so the trial stays a trial until that period
// is charged. A host batch that reprices records sets TrialAmount on a
// trial period (its Amount is the trial's zero, never charged) and Amount
// on the first paid period, each as read.
//
// A user has one trial: a trial for a user whose records or history show
// one is refused ([ErrTrialUsed]) unless [SubscribeRequest.AllowRepeatTrial].
// The pre-billing notifier (package notice) announces the first charge
// after a trial with its own event type, [TrialEndingNoticeEvent], once per trial.
//
// A free tier is a plan priced at zero, allowed by [Config.AllowFreeTiers].
// A period of zero (a free tier, a trial, an amount set to zero later) is
// never presented to the processor: when due, the engine completes it in
// one conditional write with its history row
// ([EventFreePeriodCompleted], or [EventTrialEnded]) and opens the next
// period, on every run kind and collection call ([Report.Free] counts
// them). The worker does not announce a period of zero. Without
// AllowFreeTiers, a zero record that is not a trial is refused before any
// charge (reported every run), so a period nobody meant to be free is not
// given away.
//
// # Packages
//
// This package is what a host reads: the domain types, the ports and the
// engines. It knows nothing of how a record is laid out in a table. The
// implementations of its ports live below it:
//
//	github.com/dynabill/billing/dynamostore   Repository, History and Locker on DynamoDB
//	                                          (the legacy two tables or one single table)
//	github.com/dynabill/billing/memory        Repository and History in memory: the embedded
//	                                          default for examples, local runs and development
//	github.com/dynabill/billing/billingtest   fakes (provider, notifier, clock, locker) and the
//	                                          conformance suites every store passes
//	github.com/dynabill/billing/notice        the pre-billing notifier: a daily scheduler and
//	                                          a queue worker that send each RenewalNotice once
//	github.com/dynabill/billing/entitlement   the provider-billed tiers domain: tiers, passes,
//	                                          credits, provider subscriptions, recurring payments
//	github.com/dynabill/billing/billinghttp   an admin HTTP handler a host may mount
//
// # The domain model
//
// A [Period] is one billing period of one user. Its [Status] moves
// only along the transition table documented on [Status] and checked by
// [CanTransition]. Money is an [Amount] in integer cents, parsed and printed
// exactly ("4.99"); there are no floats in any money path. Billing dates
// follow a [Schedule]: monthly or yearly, anchored on the day the
// subscription started so that a Jan 31 subscription bills on Feb 29 and
// then Mar 31, or on the n-th Friday of the month for Friday billing.
//
// # Errors
//
// Errors wrap the package's sentinels (ErrInvalidAmount, ErrConflict,
// ErrIllegalTransition, ErrAttemptInFlight, …) for [errors.Is], and carry
// data in typed errors ([*FieldError], [*TransitionError], [*ConflictError],
// [*InFlightError], [*OwedError]) for [errors.As].
//
// # Storage
//
// [Repository] and [History] are the storage ports. Writes are conditional
// on what the writer read, so a stale reader gets [ErrConflict] instead of
// overwriting newer state. Wiring the in-memory store and then DynamoDB:
//
//	store, err := memory.New(memory.Options{})
//	if err != nil { ... } // options out of range
//	repo, hist := store.Repository(), store.History()
//
//	client := dynamodb.NewFromConfig(awsCfg)
//	cfg := dynamostore.Config{Client: client} // default table names
//	repo, err := dynamostore.NewRepository(cfg)
//	hist, err := dynamostore.NewHistory(cfg)
//
// # Locks
//
// A [Locker] hands out per-user billing leases (dynamostore.NewLocker on
// dynamolock, memory.NewLocker in one process). The lock keeps two processes
// from working on one user at once; the conditional writes are what make
// that safe when a lease is lost. The collector checks its lease right
// before each charge.
//
// # Collector
//
// A [Collector] charges through the host's [PaymentProvider]: scheduled,
// retry and pause runs page through their status queries and hand back a
// continuation (Report.Next) for the next invocation, which continues the
// same run (its instant, shards and position) however much later it
// comes (sign it with [Config.RunCursorKeys] when the queue it travels
// through is writable by anyone who should not steer runs); CollectUser,
// CollectByID and ManualRepayment serve queue workers and APIs;
// ApplySettlement applies ACH settlement events; Waive, Cancel, Pause,
// Resume, ChangeBillingDate, ChangeTier and Reactivate are the admin
// changes. See ExampleCollector and examples/lambda.
//
// Before each charge the attempt is written on the record
// ([Period.LastAttempt]); a record whose attempt has no recorded
// outcome is in flight, and nothing closes or changes it before the
// attempt is resolved by a replay of the same request or through the
// optional [PaymentLookup] port: otherwise the operation fails with
// [ErrAttemptInFlight]. A provider that forgets idempotency keys says so
// with [ReplayWindow]. ACH debits not settled within
// [Config.ACHSettlementDeadline] are resolved or given up on by the retry
// run.
//
//	c, err := billing.NewCollector(billing.Config{Repository: repo, Locker: locker, Provider: processor})
//	rep, err := c.Run(ctx, billing.RunRequest{Kind: billing.RunScheduled, Cursor: cursorFromQueue})
//	if rep.Next != "" {
//		// re-enqueue billing.RunRequest{Kind: billing.RunScheduled, Cursor: rep.Next}
//	}
//
// What a caller gives is checked where it enters: a billing date (a
// wall-clock date and time in UTC, at least a day inside the
// stale threshold before now and at most [MaxDateAhead] after it) and a
// tier's amount (from [Config.Prices], or more than zero and at most
// [Config.MaxCharge]); a refusal is a [*FieldError] and writes nothing. What goes wrong inside is contained: a
// panic of the host's code becomes a [*PanicError] after the user's lock
// is released, and a stored item that does not decode is skipped and
// reported ([WithInvalidItems], [EventInvalidRecord]) without stopping the
// user's other records, unless it may be the very period a charge or
// change must rule out: then that one is refused until the item is
// repaired.
//
// # Notifier
//
// The pre-billing notifier is package
// [github.com/dynabill/billing/notice]: its daily Scheduler pages through
// the records billed [NoticeLeadDays] ahead and enqueues a message per
// record; its Worker turns each message into a [RenewalNotice] for the
// host's [Notifier], looking the [User] up in the host's [UserDirectory],
// and claims each reminder on its record first (notice.ReminderClaimer), so
// that it is sent at most once. This package holds only those ports (package
// prenote is the legacy host's ACH prenote step). See package notice's
// ExampleScheduler, ExampleWorker and examples/lambda.
//
// # Observability
//
// The [Collector], the notifier's Scheduler and
// Worker (package notice), and the DynamoDB stores of package dynamostore record through the
// OpenTelemetry API with the MeterProvider and TracerProvider of their
// configs. Nil providers mean otel.GetMeterProvider() and
// otel.GetTracerProvider(), the global ones: no-ops unless the host
// installs providers (with otel.SetMeterProvider and
// otel.SetTracerProvider, before or after the components are built).
//
// Metrics (durations in seconds, with explicit buckets from 5ms to 10s):
//
//	name                          instrument          attributes
//	dynabill.collection.attempts  Int64Counter        outcome, process, run
//	dynabill.provider.duration    Float64Histogram    outcome, error
//	dynabill.dynamodb.duration    Float64Histogram    operation, error
//	dynabill.notifier.messages    Int64Counter        outcome
//	dynabill.notifier.enqueued    Int64Counter        (none)
//
// dynabill.collection.attempts counts the records the collector handled,
// once per record, by what came of it. Its outcome is one of collected,
// pending (an ACH debit submitted), declined, unknown (the provider
// returned an error: outcome unknown, retried later with the same key),
// rate_limited (the processor refused the call for its rate limit: nothing
// charged, tried again later), stale, advanced (a PAUSED record moved on), free (a period of zero
// completed without the processor), skipped_locked, not_eligible,
// conflict (a write lost to a concurrent writer) and failed (any other
// error). process is the record's process (INITIAL, RETRY, PAUSE, WEBHOOK,
// WEBHOOK_BALANCE, BATCH, MANUAL_REPAYMENT) and run the run kind or
// single-collection entry point (scheduled, retry, pause, webhook, batch,
// manual). A run counts every record of its pages; a single collection
// ([Collector.CollectUser], [Periods.Collect],
// [Periods.Repay]) counts the records it attempts, not those it
// finds locked or ineligible (it returns those as errors).
//
// dynabill.provider.duration times each [PaymentProvider] Collect call;
// outcome is succeeded, pending, declined or, when Collect returned an
// error, rate_limited or unknown, and error is true exactly then.
//
// dynabill.dynamodb.duration times each call of a DynamoDB client made
// by the stores of package dynamostore (their batch writes included);
// operation is the API name (GetItem, Query, TransactWriteItems,
// BatchWriteItem, ...) and error whether the call returned an error
// (conditional-check failures and throttling included).
//
// dynabill.notifier.messages counts the worker messages handled, by
// outcome: sent, skipped_pending_cancellation, skipped_inactive_user,
// skipped_test_environment, dropped_invalid (the body cannot be parsed or
// decoded: the worker's HandleBatch logs it and acknowledges it, since a
// redelivery would fail the same way), or failed (the message goes back to
// the queue: not tried before the deadline, or the worker's Handle returned
// an error). dynabill.notifier.enqueued counts the messages the scheduler's
// Enqueuer accepted.
//
// Spans (user and subscription IDs are span attributes only, never metric
// attributes):
//
//	name                          attributes
//	dynabill.collection.run       dynabill.run.kind; when it ends dynabill.run.pages, .scanned,
//	                              .invalid, .attempted, .collected, .pending, .declined, .unknown,
//	                              .rate_limited, .advanced, .free, .stale, .skipped_locked, .not_eligible, .conflicts,
//	                              .failed and .continues (Report.Next is set)
//	dynabill.collection.attempt   dynabill.user_id, dynabill.subscription_id, dynabill.process,
//	                              dynabill.run.kind, dynabill.attempt (the attempt number, when
//	                              the provider is called), dynabill.outcome
//	dynabill.notifier.schedule    dynabill.notifier.status; when it ends dynabill.notifier.pages,
//	                              .scanned, .enqueued, .skipped and .continues
//	dynabill.notifier.message     dynabill.user_id, dynabill.subscription_id, dynabill.outcome
//	dynabill.dynamodb.OPERATION   (client) rpc.system "aws-api", rpc.service "DynamoDB",
//	                              rpc.method OPERATION
//
// A run's attempt spans are children of its run span; a DynamoDB span is a
// child of whatever span the context carries. Spans of failures (outcomes
// unknown, conflict and failed; worker messages that failed; DynamoDB
// errors) have an error status and the error as an event.
package billing

import "errors"

// The package's errors, for [errors.Is]. The errors returned by the package
// wrap them with the operation and the key; several are carried by a typed
// error that says more (named in each one's comment).
var (
	// ErrRequestKeyReused reports a request key given again with other
	// parameters: a request key names one request, so the second request is
	// refused and nothing is written. It is carried by a [*RequestKeyError]
	// naming the fields that differ.
	ErrRequestKeyReused = errors.New("billing: request key reused with other parameters")

	// ErrNoChange reports a change that would leave the subscription as it is
	// (a plan change to the tier and amount it has): nothing is written, no
	// history row either.
	ErrNoChange = errors.New("billing: nothing to change")

	// ErrTrialUsed is wrapped by the [*FieldError] of a trial requested for a
	// user who had one before, without [SubscribeRequest.AllowRepeatTrial].
	ErrTrialUsed = errors.New("billing: the user had a trial already")

	// ErrNoTotals is the answer of [TotalsRepository.Totals] by a store that
	// keeps no totals (a DynamoDB store not configured to): the figures are
	// to be read from the records, and are then only as complete as the read.
	ErrNoTotals = errors.New("billing: the store keeps no day totals")

	// Records. The storage implementations translate DynamoDB's exceptions
	// into these; callers never match SDK types or strings.

	// ErrNotFound reports that no record has the requested key or ID.
	ErrNotFound = errors.New("billing: not found")

	// ErrConflict reports a conditional write that failed because the stored
	// record is not what the writer read: someone else wrote first, or the
	// record is gone. The error is a [*ConflictError].
	ErrConflict = errors.New("billing: conflict")

	// ErrAlreadyExists reports an add whose key is already taken.
	ErrAlreadyExists = errors.New("billing: already exists")

	// ErrOpenSubscription reports a new open record (SCHEDULED or PAUSED)
	// for a user of the legacy layout (one subscription per user) who
	// already has an open one: a SCHEDULED or PAUSED record, which an
	// active subscription always has. Nothing is written. The error is an
	// [*OpenSubscriptionError] naming the open record.
	ErrOpenSubscription = errors.New("billing: user has an open subscription")

	// ErrInvalidCursor reports a continuation token that is malformed,
	// edited, or belongs to another query. A run never restarts from the top
	// on such a token: it fails.
	ErrInvalidCursor = errors.New("billing: invalid cursor")

	// ErrInvalidRequest reports a request field that is missing or out of
	// range ([Collector.Subscribe]); the error is a [*FieldError] naming
	// the field.
	ErrInvalidRequest = errors.New("billing: invalid request")

	// ErrInvalidQuery reports query parameters that contradict each other or
	// are missing (e.g. no status).
	ErrInvalidQuery = errors.New("billing: invalid query")

	// ErrThrottled reports a store call refused for capacity (DynamoDB
	// throttling, after the SDK's own retries): that call wrote nothing.
	// The collector backs off (see [StoreBudget]) and leaves the record
	// to a later page or run.
	ErrThrottled = errors.New("billing: store throttled")

	// Values. The errors returned wrap these with the operation, the key and
	// the offending value.

	// ErrInvalidAmount reports a money amount that is not an exact,
	// non-negative decimal with at most two fraction digits.
	ErrInvalidAmount = errors.New("billing: invalid amount")

	// ErrUnknownTier reports a tier the host's [PriceList] does not have,
	// or an empty tier name.
	ErrUnknownTier = errors.New("billing: unknown tier")

	// ErrInvalidStatus reports a billing_status value the library does not know.
	ErrInvalidStatus = errors.New("billing: invalid status")

	// ErrInvalidTerm reports a term value the library does not know.
	ErrInvalidTerm = errors.New("billing: invalid term")

	// ErrInvalidDate reports a malformed or out-of-range date or timestamp.
	ErrInvalidDate = errors.New("billing: invalid date")

	// ErrInvalidInvoice reports an [Invoice] or [CreditNote] that does not
	// add up or is not a draft the store may create. The error is a
	// [*FieldError] naming the field.
	ErrInvalidInvoice = errors.New("billing: invalid invoice")

	// ErrInvalidItem reports a stored item that cannot be decoded into a
	// [Period]. The error is always a [*FieldError] naming the attribute.
	ErrInvalidItem = errors.New("billing: invalid item")

	// Status changes.

	// ErrIllegalTransition reports a status change the transition table
	// forbids. The error is a [*TransitionError] carrying both statuses.
	ErrIllegalTransition = errors.New("billing: illegal status transition")

	// Locks.

	// ErrAlreadyLocked reports that another holder has the user's billing
	// lock. It is returned at once, without waiting: the caller skips the
	// user and leaves the record untouched.
	ErrAlreadyLocked = errors.New("billing: user's billing is locked")

	// ErrLeaseLost reports that a lease expired or could not be renewed
	// before it was released: another process may have taken the lock since.
	ErrLeaseLost = errors.New("billing: lock lease lost")

	// Collections.

	// ErrNotCollectible reports a single collection of a record that is not
	// eligible now (already collected, not due, paused, cancelled, ...), or
	// a change a record's status does not take.
	ErrNotCollectible = errors.New("billing: record not collectible")

	// ErrPlanChangeRefused, ErrPauseRefused and ErrResumeRefused report a
	// plan change ([Collector.ChangePlan], [Periods.ChangeTier]), a pause
	// or a resume the subscription does not take as it is now: paused, owed,
	// ended, not paused, or with a payment whose outcome is not known yet.
	// Nothing was written, and the message says what to do first (resume,
	// collect the owed period, wait for a payment to settle). A refusal for
	// a period's status matches [ErrNotCollectible] too; one for an attempt
	// in flight is an [*InFlightError]. A request field out of range (a
	// pause's months, an unknown tier) is a [*FieldError] instead.
	ErrPlanChangeRefused = errors.New("billing: plan change refused")
	ErrPauseRefused      = errors.New("billing: pause refused")
	ErrResumeRefused     = errors.New("billing: resume refused")

	// ErrDateMove reports a billing date move that would take a record onto or
	// across another period of its user (see [Periods.Move]).
	// The error is a [*DateMoveError].
	ErrDateMove = errors.New("billing: billing date move out of order")

	// ErrOwed reports a [Periods.CancelUnowed] of a record whose
	// cancelling would forgive money: ERROR, ACHSENT, or with an attempt in
	// flight. Nothing was changed. The error is an [*OwedError].
	ErrOwed = errors.New("billing: period owed or payment pending")

	// ErrTransactionMismatch reports a settlement event whose transaction ID is
	// not the one recorded on the subscription record: nothing is written.
	ErrTransactionMismatch = errors.New("billing: transaction ID does not match the record")

	// ErrDuplicatePayment reports a settled event for a period that another
	// transaction has paid already (the customer paid twice), or that was
	// waived or cancelled after a charge was attempted. Nothing is
	// written; the collector logs it and emits [EventDuplicatePayment]. The
	// error also wraps [ErrTransactionMismatch].
	ErrDuplicatePayment = errors.New("billing: period paid twice")

	// ErrSettlementEarly reports a settlement event for a record that is still
	// waiting to be collected (SCHEDULED, or ERROR for a return) and does not carry the
	// event's transaction, or whose latest attempt is in flight and could
	// not be resolved: most likely the attempt that created the
	// transaction ended with an unknown outcome and has not been recorded yet.
	// Nothing is written; the host should deliver the event again later (the
	// next run replays the attempt's idempotency key and records it). The error
	// also wraps [ErrTransactionMismatch].
	ErrSettlementEarly = errors.New("billing: settlement arrived before its attempt was recorded")

	// ErrRateLimited reports a request the processor refused for its rate
	// limit before acting on it: nothing was charged. See [PaymentProvider].
	ErrRateLimited = errors.New("billing: processor rate limit")

	// ErrAttemptInFlight reports a record whose latest collection attempt
	// has no known outcome: the processor may have charged it, and neither a
	// replay nor a lookup could tell. Nothing was changed; try again later.
	// The error is an [*InFlightError] naming the key.
	ErrAttemptInFlight = errors.New("billing: attempt in flight, outcome unknown")

	// ErrKeyInUse reports a request the processor refused because another
	// request with the same idempotency key is still being processed (Stripe
	// answers 409 idempotency_key_in_use). A provider wraps it in the error
	// Collect returns. The first request may still charge: the attempt stays
	// in flight, and a lookup that finds nothing for the key is not believed
	// until no request for it can still be running (see [RequestTimeout]).
	ErrKeyInUse = errors.New("billing: idempotency key in use by a request still running")

	// Notifications.

	// ErrReminderClaimed reports that the reminder of a record for its billing
	// date was claimed already, by this worker or another one: the
	// notifier's worker skips the message as a duplicate and sends nothing.
	ErrReminderClaimed = errors.New("billing: reminder already claimed")
)
