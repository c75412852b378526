package billing

import (
	"context"
	"time"
)

// ProcessorTokens is a processor budget that several processes draw from
// together, so that a fleet of collectors keeps the processor at its limit
// until the last shard is done instead of each process keeping a fixed
// share that is lost when it finishes, waits or dies.
//
// Tokens are granted for one whole second (a window): a call spent from a
// grant must start inside its window, and tokens not spent in it are lost.
// An implementation never grants more than its limit for one window, so
// no second can see more than the limit's calls from the fleet, even when
// a process dies holding tokens.
type ProcessorTokens interface {
	// Take asks for up to n tokens. A grant with N == 0 means the budget
	// is spent for now: ask again at Start.
	Take(ctx context.Context, n int) (TokenGrant, error)
	// Slow tells the fleet that the processor answered a call with its
	// rate limit: the budget pauses every process for retryAfter (a
	// second when 0) and halves its rate, which grows back by a tenth of
	// the limit a window.
	Slow(ctx context.Context, retryAfter time.Duration) error
}

// TokenGrant is tokens granted by [ProcessorTokens.Take]: N calls that may
// start at or after Start and before End (Start plus one second).
type TokenGrant struct {
	N          int
	Start, End time.Time
}
