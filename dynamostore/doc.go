// Package dynamostore implements the storage ports of package billing on
// Amazon DynamoDB: a service team imports it in the Lambdas and servers that
// run the collector and the notifier against real tables.
//
// It serves two layouts with one engine. [NewRepository] and [NewHistory]
// work on the legacy two tables (billing-activity and
// billing-activity-history, [TableConfig]); [NewSingleTableRepository]
// works on one single table that also holds the provider-billed tiers'
// accounts ([NewAccounts]) and recurring payments ([NewPayments]).
// [NewLocker] hands out per-user billing leases on a dynamolock table that
// other services may share. [CreateTables] and [CreateSingleTable] create
// the tables for tests and local runs. [StreamDecoder] reads the history
// rows from a table's DynamoDB stream as events a host cannot miss.
//
//	client := dynamodb.NewFromConfig(awsCfg) // or any API
//	cfg := dynamostore.Config{Client: client} // default table names
//	repo, err := dynamostore.NewRepository(cfg)
//	if err != nil {
//		return err
//	}
//	hist, err := dynamostore.NewHistory(cfg)
//	if err != nil {
//		return err
//	}
//	locker, err := dynamostore.NewLocker(client, dynamostore.WithLockTable("locks"))
//	if err != nil {
//		return err
//	}
//	defer locker.Close()
//	c, err := billing.NewCollector(billing.Config{Repository: repo, History: hist, Locker: locker, Provider: processor})
//
// # The wire contract
//
// Existing tables and data must keep working, so attribute names, key
// schema and encodings are fixed: billing_date is written in whole seconds
// and last_run_date with a fixed nine-digit fraction, so that string order
// equals time order in keys and range conditions. Items written by older
// services (NULLs, trimmed fractions, "5" for 5.00, a missing term) still
// decode. An update sets or removes only the attributes the operation
// changes, so data_ attributes, unknown attributes and a legacy writer's
// timestamp text keep their bytes; the record carries them in
// Subscription.Stored. History rows the engine writes also carry
// billing_change, the change they record (history rows only, optional on
// read).
//
// Attributes this library adds are optional on read. Among them, a
// period's tax (billing.Period.Tax), fixed before the period's first
// attempt and written with it, is billing_tax (an amount like
// billing_amount, "2.00", written even at zero), billing_tax_inclusive
// (BOOL true, omitted when false) and billing_tax_description (S, "VAT
// 20%"), all absent until the tax is fixed; an invoice item says
// tax_inclusive (BOOL true, omitted when false) when its prices include
// the tax.
//
// # Single table
//
// [NewAccounts] serves the provider-billed tiers' entities on one
// table ([SingleTableDefinition]): a credit balance changed only atomically
// (Consume fails with entitlement.ErrInsufficientCredits) and once per
// caller request ID (a marker item SK CREDITS#REQUEST#<id> is written in
// the same transaction, so a retry changes nothing twice; see
// [Accounts.Consume]), subscriptions mirrored
// from an external processor's events, lifetime founder passes, and
// entitlement.ResolveAccess: the highest tier of a pass or an active or
// in-grace subscription, else the profile tier, else free. (This
// entitlement.Tier is an access tier; a record's receipt tier
// "Name:Version" is split at its first colon.)
//
// # Single-table layout
//
// The same table holds recurring payments ([Payments]: subscriptions,
// receipts, the two due-date indexes), and
// [SingleTableRepository] lets the collector and the notifier run on it
// unchanged: it is a billing.Repository and, through History, a billing.History. One
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
//	PK TOTALS#<day>#<shard>       the day totals, with SingleTableStoreConfig.Totals
//	                              (SK "#" the counts, SK R#<reason> a decline reason's)
//	PK COUPON#<id>, SK COUPON     a coupon and its count ([Coupons])
//	PK PROMO#<code>, SK PROMO     a promotion code (folded) and its count
//	SK REDEEM#<user hash>#<key>   one coupon redemption of the account's user
//
// The engine's user ID of S is SubscriptionRef.UserID, "A#S#K": locks,
// runs and idempotency keys are per subscription, so an account may hold
// several SKUs billed on the same day. (The notifier's worker hands that
// ID to the host's billing.UserDirectory; the prefix before the first "#" gives the
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
// is retried); NextReminderDate is billing.NoticeLeadDays before the day
// of the earliest SCHEDULED one. With nothing open both are removed and
// the item leaves the sparse indexes; LastPaymentDate is the day of the
// latest completed period ("0001-01-01" before the first, because the
// indexes need both of their keys). begins_with(SK, "SUB#") still lists
// subscriptions only.
//
// The two daily jobs of recurring payments are the engine's own runs on this
// repository: reminders due today are the notifier's daily notice.Scheduler.Run
// (its window, billing dates billing.NoticeLeadDays days ahead, is exactly
// the subscriptions whose NextReminderDate is today, which
// Payments.DueRemindersByDate lists from GSI-1), and payments due today
// are the collector's scheduled run, then its retry and pause runs. A
// worker with Reminders set claims each reminder before sending it
// ([SingleTableRepository.ClaimReminder]): the period records the billing
// date reminded and the subscription item's LastReminderDate the day, so
// a rerun the same day sends nothing again.
// [SingleTableRepository.QueryStatus] answers their status queries from
// GSI-2 by walking its days, from CatchUpDays before today (or the
// query's start, when earlier) to the query's end, and expanding each subscription found into its periods in the
// range. A period left open longer than CatchUpDays (45 by default) is not
// found: runs close SCHEDULED and ERROR periods (STALE) within 30 days and
// advance PAUSED ones the day they are due, so only weeks of missed runs
// leave one behind.
//
// # Day totals
//
// With [TableConfig.Totals] (a table of its own: the legacy tables are
// shared with systems that scan them) or [SingleTableStoreConfig.Totals]
// (items of the single table's own partitions, above), a repository is a
// billing.TotalsRepository: each outcome its writes record (a period
// collected, an attempt declined, a period waived or refunded) adds to a
// counter item of its UTC day and of its user's shard
// ([TableConfig.TotalsShards], 16 by default), with ADD updates in the
// same transaction as the write. A write refused by its condition adds
// nothing, so a repeated or replayed outcome counts once; a transaction
// cancelled only because another was writing the same counter item is
// tried again. It costs 2 WCU more a collection and 4 more a decline;
// reading a day costs half an RCU per shard (docs/capacity.md). A host's
// AddAll batches do not count. Totals count from the day writers are
// configured with them; days before read as zero.
package dynamostore
