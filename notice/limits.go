package notice

import "errors"

// The notifier's limits and defaults.
const (
	// DefaultPagesPerInvocation is the number of status pages one
	// [Scheduler] invocation reads before it hands back a continuation (the
	// legacy PAGES_PER_INVOKE), unless [SchedulerConfig.PagesPerInvocation]
	// says otherwise.
	DefaultPagesPerInvocation = 3

	// MaxEnqueueBatch is the largest batch an [Enqueuer] is handed: SQS
	// SendMessageBatch takes at most 10 entries.
	MaxEnqueueBatch = 10
)

// The notifier's errors.
var (
	// ErrTooManyRecords reports a scheduler-queue batch with more than one
	// continuation message. The scheduler queue's event source mapping has
	// batch size 1; a larger batch fails whole, without processing any of its
	// messages, so no continuation is run twice or lost.
	ErrTooManyRecords = errors.New("billing: notifier: more than one continuation in the batch")

	// ErrInvalidEvent reports a scheduler event that cannot be parsed: not a
	// JSON object, an unknown status, a malformed date or a start_key that
	// is not a continuation token (see [ParseEvent]).
	ErrInvalidEvent = errors.New("billing: invalid scheduler event")

	// ErrInvalidMessage reports a worker-queue message that cannot be parsed
	// or decoded (see [ParseMessage]); [Worker.HandleBatch] drops such
	// messages rather than have them redelivered.
	ErrInvalidMessage = errors.New("billing: invalid notification message")
)

// What the notice shows.
const (
	// DateLayout formats the billing date in the notification:
	// "01/02/2006" (MM/DD/YYYY).
	DateLayout = "01/02/2006"

	// DefaultTierName is the membership tier of the notification when the
	// record has no receipt_tier_name.
	DefaultTierName = "LITE"
)
