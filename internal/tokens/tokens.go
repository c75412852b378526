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
			s.Rate = min(limit, s.Rate+max(1, limit/10)*(w-s.Window))
		}
		s.Window, s.Used = w, 0
	}
	if s.Used >= s.Rate {
		if w+1 > sec+1 || w+1 <= s.SlowUntil {
			return s, Grant{Start: time.Unix(w+1, 0)}
		}
		w++
		s.Rate = min(limit, s.Rate+max(1, limit/10))
		s.Window, s.Used = w, 0
	}
	g := min(n, s.Rate-s.Used)
	s.Used += g
	return s, Grant{N: int(g), Start: time.Unix(w, 0), End: time.Unix(w+1, 0)}
}

// Slow decides a Slow at now: it pauses windows until now plus
// retryAfter and halves the rate, at most once a window.
func Slow(s State, now time.Time, retryAfter time.Duration, limit int64) State {
	if retryAfter <= 0 {
		retryAfter = time.Second
	}
	until := now.Add(retryAfter)
	u := until.Unix()
	if until.After(time.Unix(u, 0)) {
		u++
	}
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
