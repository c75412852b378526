// Package billing runs recurring subscription billing on Amazon DynamoDB
// inside a host's own Lambdas and servers.
//
// It owns the subscription records and their audit history, per-user billing
// locks, the collection engine and the pre-billing notifier; the host plugs
// in its payment processor, notification channel, user directory and queues
// through small interfaces. Billing is money: every design choice here leans
// towards "never charge twice, never lose a record, never skip a user
// silently".
//
// # The domain model
//
// A [Subscription] is one billing period of one user: one item of the legacy
// billing-activity table (partition key user_id, sort key billing_date). Its
// [Status] moves only along the transition table documented on [Status] and
// checked by [CanTransition]. Money is an [Amount] in integer cents, parsed
// and printed exactly ("4.99"); there are no floats in any money path.
// Billing dates follow a [Schedule]: monthly or yearly, anchored on the day
// the subscription started so that a Jan 31 subscription bills on Feb 29 and
// then Mar 31, or on the n-th Friday of the month for Friday billing.
//
// # The wire contract
//
// Existing tables and data must keep working, so attribute names, key schema
// and encodings are fixed: [EncodeItem], [EncodeHistoryItem] and
// [DecodeItem] convert between a Subscription and its DynamoDB item, and the
// Attr… constants name every attribute. billing_date is written in whole
// seconds and last_run_date with a fixed nine-digit fraction, so that string
// order equals time order in keys and range conditions. Items written by
// older services (NULLs, trimmed fractions, "5" for 5.00, a missing term)
// still decode; attributes this library does not know are kept and written
// back.
//
// # Errors
//
// Errors wrap the package's sentinels (ErrInvalidAmount, ErrInvalidStatus,
// ErrInvalidItem, ErrIllegalTransition, …) for [errors.Is], and carry data in
// typed errors ([*FieldError], [*TransitionError]) for [errors.As].
//
// # Wiring
//
// A host decodes items it receives (for example from a DynamoDB stream),
// decides, and encodes its writes:
//
//	sub, err := billing.DecodeItem(record.NewImage)
//	if err != nil {
//		var fe *billing.FieldError
//		if errors.As(err, &fe) {
//			log.Printf("skipping bad item %s: attribute %s", fe.Key, fe.Field)
//		}
//		return err
//	}
//	if err := billing.CheckTransition(sub.Status, billing.StatusCompleted); err != nil {
//		return err // e.g. a settlement for a record that was cancelled
//	}
//	next, err := billing.NextBillingDate(sub.BillingDate, sub.Schedule())
//
// # Storage
//
// [Repository] and [History] are the storage ports; [NewDynamoRepository]
// and [NewDynamoHistory] implement them on the legacy tables, and package
// billingtest has an in-memory twin that passes the same conformance suites.
// Writes are transactions conditional on what the writer read, so a stale
// reader gets [ErrConflict] instead of overwriting newer state:
//
//	client := dynamodb.NewFromConfig(awsCfg) // or any DynamoDBAPI
//	cfg := billing.DynamoConfig{Client: client} // default table names
//	if err := billing.CreateTables(ctx, client, cfg.Tables); err != nil { // tests and local runs
//		return err
//	}
//	repo, err := billing.NewDynamoRepository(cfg)
//	if err != nil {
//		return err
//	}
//	page, err := billing.ScheduledPage(ctx, repo, clock.Now(), cursor)
//	for _, sub := range page.Items {
//		next := sub.Clone()
//		next.Status = billing.StatusWaived
//		next.LastRunDate = clock.Now()
//		if err := repo.Update(ctx, &sub, &next); billing.IsConflict(err) {
//			// someone else wrote first: re-read and decide again
//		}
//	}
//	// page.Next continues the run in the next invocation
//
// # Locks
//
// A [Locker] hands out per-user billing leases ([NewDynamoLocker] on
// dynamolock). The lock keeps two processes from working on one user at
// once; the conditional writes are what make that safe when a lease is
// lost. Any instance takes over a lock whose holder stopped heartbeating
// within two lease durations, and the collector checks its lease right
// before each charge.
//
// # Collector
//
// A [Collector] charges through the host's [PaymentProvider]: scheduled,
// retry and pause runs page through their status queries and hand back a
// continuation (Report.Next) for the next invocation; CollectUser,
// CollectByID and ManualRepayment serve queue workers and APIs;
// ApplySettlement applies ACH settlement events; Waive, Cancel, Pause,
// Resume, ChangeBillingDate, ChangeTier and Reactivate are the admin
// changes. See ExampleCollector and examples/lambda.
//
// Before each charge the attempt is written on the record
// ([Subscription.LastAttempt]); a record whose attempt has no recorded
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
// # Notifier
//
// [Scheduler] pages through the records due in [NotificationWindow] and
// hands each page to an [Enqueuer] in batches of 10, returning a
// continuation [SchedulerEvent] while pages remain; [Worker] turns each
// message into a [ThreeDayNotification] for the host's [Notifier] and then
// applies a [PrenotePolicy]. See ExampleScheduler, ExampleWorker and
// examples/lambda.
//
// # Observability
//
// The collector, the notifier's Scheduler and Worker, and the DynamoDB
// Repository and History report metrics and traces through the
// OpenTelemetry API. Set MeterProvider and TracerProvider in their configs,
// or leave them nil to use the global providers, which do nothing unless the
// host installs some. The names are listed at [MetricCollectionAttempts]:
// a counter per collection outcome and per notifier outcome, histograms of
// payment-provider and DynamoDB latency, and a span per run and per record
// attempt (with the user and subscription IDs as attributes).
//
// # Single table
//
// [NewDynamoAccounts] serves the provider-billed tiers' entities on one
// table ([SingleTableDefinition]): a credit balance changed only atomically
// (Consume fails with [ErrInsufficientCredits]), subscriptions mirrored
// from an external processor's events, lifetime founder passes, and
// [ResolveAccess]: pass > active or in-grace subscription > profile tier >
// free. (This [Tier] is an access tier; a record's receipt tier
// "Name:Version" is read with [SplitTier].)
//
// # Single-table layout
//
// The same table holds recurring payments ([Payments]: subscriptions,
// receipts, the two due-date indexes), and
// [SingleTableRepository] lets the collector and the notifier run on it
// unchanged: it is a [Repository] and, through History, a [History]. One
// engine, two layouts. The mapping, for an account A (PK
// <AccountPrefix>A) with a subscription S of SKU K:
//
//	SK SUB#S#SKU#K                the subscription: Email, PaymentDay,
//	                              PaymentAmount, PaymentDetails, Version,
//	                              NextPaymentDate, NextReminderDate,
//	                              LastPaymentDate, LastReminderDate, OpenPeriods
//	SK PER#S#SKU#K#<billing_date> one billing period: the legacy record's
//	                              attributes (billing_status, billing_amount, …)
//	SK HIST#S#SKU#K#<last_run>    one history row per write of a period
//	SK REC#<processed>#SKU#K      one receipt per completed period (TTL)
//	PK PERIODID#<id>, SK <user>   a period's subscription_id → its key
//
// The engine's user ID of S is [SubscriptionRef.UserID], "A#S#K": locks,
// runs and idempotency keys are per subscription, so an account may hold
// several SKUs billed on the same day. (The notifier's worker hands that
// ID to the host's [UserDirectory]; [ParseSubscriptionRef] gives the
// account.) A subscription is driven either by the engine or by the host
// through Payments.RecordPayment, not both. Every write of a period is one
// transaction with its history row and the subscription item (conditional
// on the version read; re-read and retried when only that moved), plus
// the receipt when an update completes the period (retries of the same
// period are not payments; records added already complete are not
// either).
//
// The subscription item's OpenPeriods maps the billing dates of its open
// periods (SCHEDULED, ERROR, PAUSED: what a run may still act on) to their
// status. NextPaymentDate is the day of the earliest one: the first day a
// run acts on the subscription (an unpaid period keeps it there while it
// is retried); NextReminderDate is [NotificationLeadDays] before the day
// of the earliest SCHEDULED one. With nothing open both are removed and
// the item leaves the sparse indexes; LastPaymentDate is the day of the
// latest completed period ("0001-01-01" before the first, because the
// indexes need both of their keys). begins_with(SK, "SUB#") still lists
// subscriptions only.
//
// The two daily jobs of recurring payments are the engine's own runs on this
// repository: reminders due today are the notifier's daily [Scheduler.Run]
// (its window, billing dates [NotificationLeadDays] days ahead, is exactly
// the subscriptions whose NextReminderDate is today, which
// Payments.DueRemindersByDate lists from GSI-1), and payments due today
// are the collector's scheduled run, then its retry and pause runs.
// [SingleTableRepository.QueryStatus] answers their status queries from
// GSI-2 by walking its days, from CatchUpDays before today (or the
// query's start, when earlier) to the query's end, and expanding each subscription found into its periods in the
// range. A period left open longer than CatchUpDays (45 by default) is not
// found: runs close SCHEDULED and ERROR periods (STALE) within 30 days and
// advance PAUSED ones the day they are due, so only weeks of missed runs
// leave one behind.
package billing
