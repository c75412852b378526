// Package faultsim is a deterministic simulation of months of billing
// under faults, in the spirit of FoundationDB's simulation and
// TigerBeetle's VOPR: one seed drives the real engines of package billing
// (several hosts' collectors with configurations of their own, the
// notifier's scheduler and worker, admin operations, upgrades and price
// changes through Repository.AddAll, sign-ups through Collector.Subscribe,
// cancellations at period end and come-backs, ACH settlements and
// declines confirmed on session later) over a store
// under test, and the money and lifecycle invariants are checked after
// every step from what the store, its history and the processor's ledger
// hold. Only tests import it (TestFaultSimulation in the root package).
//
// # Determinism
//
// The clock (a billingtest.Clock) moves only between steps, and every decision is drawn
// by hashing the seed with the identity of what is decided (a user, an
// idempotency key, the call index of that key, a day), never from a
// shared random stream, so the goroutines of a run (Config.Concurrency,
// ShardConcurrency) cannot change what happens. Subscription IDs the
// collectors make are replaced by IDs derived from the record they follow
// for the same reason. A seed replays exactly.
//
// # The world
//
// The users sign up through Collector.Subscribe the day before the start
// (those whose first billing date is older than the stale threshold
// allows, the day before that date), and so do the new users of later
// days (now and then twice with one request key, as a redelivered
// request); a legacy user with a subscription open sometimes gets a
// second one through Repository.Add, which the store refuses.
//
// Days are stormy (faults drawn), calm (none, in pairs: after the runs of
// the second one the strict checks run) or a processor outage; on a
// sharded store, a stretch of days (the shards, and three more) has no
// faults but its runs are started by one more host (in turn over the
// shards, with a page budget of 2, 4, 6 or 10) and stopped after their
// first invocation, never continued. Each day:
// ACH settlements at 08:00, the notifier at 09:00 (sometimes again at
// 15:00), admin operations, upgrades and new subscriptions through the
// day, the scheduled, retry and pause runs at 12:00, 12:10 and 12:20,
// started by a host over every shard or split in shard ranges over
// hosts; on stormy days runs stop after their PagesPerInvocation and are
// continued later (at once, 30 s, 3 min, an hour or a day later, by any
// host) or abandoned, continuations are handed to a wrong run now and
// then, a second scheduled run may start, and webhooks come for users
// whose attempt is in flight.
//
// The life of a subscription: a user whose paid period runs cancels at
// period end (the renewal, never attempted, is cancelled) and comes back
// before that period ends, by Reactivate or Subscribe, on the date it
// ends (tried again an hour later while refused for a reason that may
// pass), sometimes first on a date inside it. A host's batch re-reads
// SCHEDULED records and writes them again with Repository.AddAll, the
// amount changed and the last_run_date as read (or, as an upgrade, the
// old and the new record with one last_run_date). A card decline of the
// last day is confirmed on session by its customer now and then, while
// its period is still ERROR with that transaction: the processor holds
// the charge as succeeded from then on, and the settlement step delivers
// its settled event (sometimes twice, sometimes after a payment_failed
// applied as a return), again 15 minutes later while it is refused for a
// reason that may pass.
//
// Faults: store calls that fail before they apply, apply and then fail,
// or are throttled; locks that fail, are acquired ambiguously, are lost
// by a stalled holder, or are left held by a release that never arrives
// (taken over later); a processor (Processor) that rate-limits, times out
// before acting or after charging, keeps a request running after the
// caller gave up (a replay meanwhile gets billing.ErrKeyInUse, a lookup
// finds nothing), lags in its lookups, and is down for days; ACH debits
// that settle late or come back; settlement events and reminder messages
// delivered twice. Every request still running and every lookup lag ends
// within the processor's RequestTimeout of the request's presentation, as
// the port's contract says.
//
// # The invariants
//
//   - money: every charge the processor kept is on exactly one record of
//     its subscription (recorded with its transaction and amount, or in
//     flight with its key); no subscription ID charged twice; every
//     COMPLETED record has its charge (a decline confirmed on session
//     counts once its settled event was applied);
//   - decline recovery: once the settled event of a decline confirmed on
//     session is applied, its record is COMPLETED with that transaction
//     and amount, recorded by exactly one history row;
//   - late recovery notices: a decline the customer confirms on session
//     whose settled event comes after one to three retry runs (once or
//     twice, before or after a payment_failed) finds its period paid once,
//     by that payment: the retries named it (PriorPayment) and the
//     processor answered from it rather than charging again;
//   - open periods: a user has at most one SCHEDULED or PAUSED record, and
//     one unless cancelled after its newest record was created;
//   - due periods (strict, after two calm days): nothing due before the
//     scheduled run is left SCHEDULED, no attempt from before the calm
//     days is still in flight, every retryable ERROR record was retried
//     that day, none is older than the stale threshold, no PAUSED record
//     is past due and no ACH debit past its settlement deadline;
//   - locks: no user locked past two lease durations, no lease left
//     renewed after its holder returned;
//   - reminders: at most one per record and billing date;
//   - history: the newest history row of every record equals it (but for
//     the attempt bookkeeping SetAttempt writes alone);
//   - history append-only: every history row a check saw (a shadow kept
//     by last_run_date and subscription ID) is still there, byte for
//     byte, at every later check of its user;
//   - come-backs: coming back on the date the paid period ends succeeds
//     (or is refused for a reason that passes) and leaves one open period,
//     billed on that date; a first date inside the paid period is refused
//     with billing.ErrInvalidDate;
//   - request keys: a Subscribe repeated with its request key answers the
//     period the first call created, Repeated set;
//   - rotation: on the abandoned days, within every window of K days (K
//     the shards), the fresh runs of each kind started reading every
//     shard (a run that finished in its first invocation read them all);
//   - runs: a run's own continuation is accepted by any host, another
//     run's cursor is refused.
package faultsim
