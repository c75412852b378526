// Package tokens is the arithmetic of the shared processor budget: what a
// Take or a Slow decides from the budget's state. The in-memory budget
// (memory.Tokens) and the DynamoDB one (dynamostore.Tokens) both decide
// with it, so a fleet on either store is paced alike.
package tokens

import "time"

// Grant is tokens granted: N calls that may start at or after Start and
// before End (Start plus one second). It converts to billing.TokenGrant.
type Grant struct {
	N          int
	Start, End time.Time
}

// State is the shared state of a processor budget (billing.ProcessorTokens): the window
// (a Unix second) tokens were last granted for, how many, the rate of a
// window (at most the limit), the window the rate was last cut in and the
// Unix second before which no window is granted.
type State struct {
	Window, Used, Rate, CutWindow, SlowUntil int64
}

// Take decides a Take of n tokens at now against the state s for a
// budget of limit calls a second: it returns the state to write and the
// grant. Grants go to the current second, or to the next one when the
// current one is spent, never further ahead. The implementations of
// billing.ProcessorTokens (memory and dynamostore) share it so they
// decide alike.
func Take(s State, now time.Time, n, limit int64) (State, Grant) {
	sec := now.Unix()
	w := max(sec, s.SlowUntil)
	if s.Rate <= 0 || s.Rate > limit {
		s.Rate = limit
	}
	if w < s.Window {
		w = s.Window
	}
	if w > s.Window { // a new window: the rate grows back
		if s.Window != 0 && s.Rate < limit {
			s.Rate = min(limit, s.Rate+regrowth(limit)*(w-s.Window))
		}
		s.Window, s.Used = w, 0
	}
	if s.Used >= s.Rate {
		if w+1 > sec+1 || w+1 <= s.SlowUntil {
			return s, Grant{Start: time.Unix(w+1, 0)}
		}
		w++
		s.Rate = min(limit, s.Rate+regrowth(limit))
		s.Window, s.Used = w, 0
	}
	g := min(n, s.Rate-s.Used)
	s.Used += g
	return s, Grant{N: int(g), Start: time.Unix(w, 0), End: time.Unix(w+1, 0)}
}

// regrowth is what a window adds to a cut rate: a quarter of the limit,
// so a halved rate is whole again two windows later. (It was a tenth:
// five windows at a rate cut by up to half cost about 1.5 s of the
// limit after every rate-limited answer, 1.2 % of a 17-minute day at
// 1,000 a second with six 429 bursts in it.)
func regrowth(limit int64) int64 { return max(1, limit/4) }

// Slow decides a Slow at now: it halves the rate, at most once a window,
// and pauses the windows that lie wholly inside now plus retryAfter: the
// next window starts at the last whole second the pause reaches, and
// never before the next second. With the collector's default pause of a
// second that is the rest of the current second, whose count a processor
// counting calendar seconds has filled; the process that saw the answer
// waits the whole pause itself (its own pacer). (Pausing until the first
// window after the pause, as it did, left a whole window empty after
// every rate-limited answer.)
func Slow(s State, now time.Time, retryAfter time.Duration, limit int64) State {
	if retryAfter <= 0 {
		retryAfter = time.Second
	}
	u := max(now.Add(retryAfter).Unix(), now.Unix()+1)
	s.SlowUntil = max(s.SlowUntil, u)
	if s.Rate <= 0 || s.Rate > limit {
		s.Rate = limit
	}
	if sec := now.Unix(); s.CutWindow < sec {
		s.Rate = max(1, s.Rate/2)
		s.CutWindow = sec
	}
	return s
}
