package billing

import (
	"context"
	"time"
)

// TotalsRepository is a [Repository] that keeps the day totals of the
// periods' outcomes: how many periods were collected on a day and for how
// much, how many attempts were declined and why, what was waived and
// refunded. The store adds to them in the same transaction as the write
// that records the outcome, so they are exact whatever crashes or
// repeats: a write that is refused (its record changed since it was read)
// adds nothing, and an outcome is counted once.
//
// A console reads a month of totals with a few calls, however many records
// the month holds, where summing the records means reading every one of
// them. The in-memory store keeps them always; the DynamoDB stores when
// configured to (see package dynamostore), and answer [ErrNoTotals]
// otherwise.
//
// What counts, by the record's write from prev to next (prev none for a
// record added):
//   - Collected: a record becoming COMPLETED with an amount above zero, on
//     the UTC day of its completion date (its last_run_date when it has
//     none). A trial or a free period completes with nothing collected and
//     does not count.
//   - Declined: a record becoming ERROR, or an ERROR record whose recorded
//     attempts advance (a retry declined again), on the UTC day of its
//     last_run_date, by its payment error (the reason, cut to
//     [MaxTotalsReason] bytes).
//   - Waived: a record becoming WAIVED, with its amount.
//   - Refunded: a record becoming REFUNDED, with its amount.
//
// A host's batch of records ([Repository.AddAll]: upgrades, downgrades,
// imports of past periods) is not an outcome and adds nothing; nor do the
// days before a store began to keep totals.
type TotalsRepository interface {
	Repository
	// Totals returns the totals of the UTC days from the day of from up to
	// the day before that of to, one per day, ascending, days with
	// nothing included (as zero totals). At most [MaxTotalsDays] days;
	// an empty or longer range is an [ErrInvalidQuery]. A store that does not
	// keep totals answers [ErrNoTotals].
	Totals(ctx context.Context, from, to time.Time) ([]DayTotal, error)
	// DeclineReasons splits the declines of the UTC day of day by the
	// processor's reason, the most frequent first (ties by reason). An
	// attempt declined with no reason recorded has the reason "". A store
	// that does not keep totals answers [ErrNoTotals].
	DeclineReasons(ctx context.Context, day time.Time) ([]ReasonCount, error)
}

// DayTotal is the outcomes of one UTC day (see [TotalsRepository]).
type DayTotal struct {
	// Day is the day's midnight, UTC.
	Day time.Time
	// Collected is the periods collected and the money they brought.
	Collected Tally
	// Declined is the attempts declined, with the amounts asked (their
	// reasons: [TotalsRepository.DeclineReasons]).
	Declined Tally
	// Waived is the periods waived and the amounts forgiven.
	Waived Tally
	// Refunded is the periods refunded and the amounts given back.
	Refunded Tally
}

// Tally is a count of periods and the sum of their amounts.
type Tally struct {
	Count  int64
	Amount Amount
}

// ReasonCount is a decline reason and how many attempts it declined.
type ReasonCount struct {
	Reason string
	Count  int64
}
