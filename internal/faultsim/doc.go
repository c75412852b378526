// Package faultsim is a deterministic simulation of months of billing
// under faults, in the spirit of FoundationDB's simulation and
// TigerBeetle's VOPR: one seed drives the real engines of package billing
// (several hosts' collectors with configurations of their own, the
// notifier's scheduler and worker, admin operations, upgrades through
// Repository.AddAll, new subscriptions, ACH settlements) over a store
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
// Days are stormy (faults drawn), calm (none, in pairs: after the runs of
// the second one the strict checks run) or a processor outage. Each day:
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
//     COMPLETED record has its charge;
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
//   - runs: a run's own continuation is accepted by any host, another
//     run's cursor is refused.
package faultsim
