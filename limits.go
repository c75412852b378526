package billing

import "time"

// Limits and defaults. A Config field left zero takes its default; the
// limits bound what a request, a store call or a queue batch may carry.
const (
	// DefaultMaxCharge is the default [Config.MaxCharge]: 10,000.00.
	DefaultMaxCharge = Amount(1_000_000)

	// DefaultACHSettlementDeadline is [Config.ACHSettlementDeadline] unless
	// configured.
	DefaultACHSettlementDeadline = 14 * 24 * time.Hour

	// DefaultRequestTimeout is the [RequestTimeout] of a provider that names
	// none: an hour, far beyond any processor's client timeout and retries.
	DefaultRequestTimeout = time.Hour

	// DefaultRunPagesPerInvocation is the default [Config.PagesPerInvocation]
	// of a [Collector]: the status pages one run invocation reads.
	DefaultRunPagesPerInvocation = 10

	// MaxActorLen bounds [UserRequest.Operator] and [UserRequest.Reason], in
	// bytes.
	MaxActorLen = 1024

	// MaxDateAhead is how far after now an operator may set a billing date
	// ([Periods.Move], [Collector.Reactivate]): three years. A
	// date further out is nearly always a typing error ("2205" for "2025")
	// that would leave a user unbilled for ever.
	MaxDateAhead = 3 * 366 * 24 * time.Hour

	// MaxTrialDays bounds [SubscribeRequest.TrialDays].
	MaxTrialDays = 730

	// MaxInterval bounds [Schedule.Interval]: ten years of months.
	MaxInterval = 120

	// MaxUpdateCreates bounds the records [Repository.Update] creates in its
	// transaction (DynamoDB allows 100 actions; each record takes two).
	MaxUpdateCreates = 8

	// MaxTotalsDays bounds the days of one [TotalsRepository.Totals] call.
	MaxTotalsDays = 366

	// MaxTotalsReason is the length in bytes a decline reason is cut to in
	// [TotalsRepository.DeclineReasons] (at a character boundary).
	MaxTotalsReason = 200

	// MinRunCursorKeyLen is the shortest key [Config.RunCursorKeys] takes: 32
	// bytes, the size of the HMAC-SHA256 output.
	MinRunCursorKeyLen = 32
)
