package billing

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// allowed is the transition table written out independently of the
// implementation, as documented on Status: "from": "to to to".
var allowed = map[Status]string{
	StatusScheduled:     "SCHEDULED ACHSENT COMPLETED ERROR WAIVED CANCELLED PAUSED STALE",
	StatusACHSent:       "COMPLETED ERROR STALE",
	StatusError:         "ERROR ACHSENT COMPLETED WAIVED CANCELLED STALE",
	StatusPaused:        "PAUSED PAUSED_SKIPPED SCHEDULED CANCELLED",
	StatusCompleted:     "REFUNDED",
	StatusWaived:        "",
	StatusCancelled:     "",
	StatusPausedSkipped: "",
	StatusRefunded:      "",
	StatusStale:         "COMPLETED",
	StatusInactive:      "",
}

func TestCanTransitionEveryPair(t *testing.T) {
	all := statusValues()
	require.Len(t, all, 11, "statusValues() = %d values, want 11", len(all))
	checked := 0
	for _, from := range all {
		want := map[Status]bool{}
		for _, to := range strings.Fields(allowed[from]) {
			want[Status(to)] = true
		}
		for _, to := range all {
			checked++
			got := canTransition(from, to)
			assert.Equal(t, want[to], got, "canTransition(%s, %s) = %v, want %v", from, to, got, want[to])
			err := checkTransition(from, to)
			assert.Equal(t, want[to], err == nil, "checkTransition(%s, %s) = %v", from, to, err)
			if err != nil {
				var te *TransitionError
				assert.ErrorIs(t, err, ErrIllegalTransition, "checkTransition(%s, %s) error %v does not carry the pair", from, to, err)
				if assert.ErrorAs(t, err, &te, "checkTransition(%s, %s) error %v does not carry the pair", from, to, err) {
					assert.Equal(t, from, te.From, "checkTransition(%s, %s) error %v does not carry the pair", from, to, err)
					assert.Equal(t, to, te.To, "checkTransition(%s, %s) error %v does not carry the pair", from, to, err)
				}
				assert.Contains(t, err.Error(), string(from)+" -> "+string(to), "error does not name the pair")
			}
		}
	}
	require.Equal(t, 121, checked, "checked %d pairs, want 121", checked)
	// Unknown statuses never transition.
	for _, s := range []Status{"", "scheduled", "PENDING"} {
		assert.False(t, canTransition(s, StatusScheduled), "unknown status %q transitions", s)
		assert.False(t, canTransition(StatusScheduled, s), "unknown status %q transitions", s)
	}
}

func TestTerminalStatusesHaveNoWayBack(t *testing.T) {
	for _, s := range statusValues() {
		outs := strings.Fields(allowed[s])
		switch {
		case s == StatusCompleted:
			assert.True(t, s.IsTerminal(), "COMPLETED: terminal=%v outs=%v", s.IsTerminal(), outs)
			assert.Equal(t, []string{"REFUNDED"}, outs, "COMPLETED: terminal=%v outs=%v", s.IsTerminal(), outs)
		case s == StatusStale:
			// Only the late settlement of an overdue ACH debit.
			assert.True(t, s.IsTerminal(), "STALE: terminal=%v outs=%v", s.IsTerminal(), outs)
			assert.Equal(t, []string{"COMPLETED"}, outs, "STALE: terminal=%v outs=%v", s.IsTerminal(), outs)
		case s.IsTerminal():
			assert.Empty(t, outs, "terminal %s has transitions %v", s, outs)
		default:
			assert.NotEmpty(t, outs, "non-terminal %s has no transitions", s)
		}
	}
}

func TestStatusPredicates(t *testing.T) {
	tests := []struct {
		s                                      Status
		terminal, collectible, storable, valid bool
	}{
		{StatusScheduled, false, true, true, true},
		{StatusACHSent, false, false, true, true},
		{StatusCompleted, true, false, true, true},
		{StatusError, false, true, true, true},
		{StatusWaived, true, false, true, true},
		{StatusCancelled, true, false, true, true},
		{StatusPaused, false, false, true, true},
		{StatusPausedSkipped, true, false, true, true},
		{StatusRefunded, true, false, true, true},
		{StatusStale, true, false, true, true},
		{StatusInactive, true, false, false, true},
		{"", false, false, false, false},
		{"Completed", false, false, false, false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.terminal, tt.s.IsTerminal(), "%q.IsTerminal()", tt.s)
		assert.Equal(t, tt.collectible, tt.s.IsCollectible(), "%q.IsCollectible()", tt.s)
		assert.Equal(t, tt.storable, tt.s.Storable(), "%q.Storable()", tt.s)
		assert.Equal(t, tt.valid, tt.s.Valid(), "%q.Valid()", tt.s)
	}
}

func TestParseStatus(t *testing.T) {
	for _, s := range statusValues() {
		got, err := ParseStatus(string(s))
		assert.NoError(t, err, "ParseStatus(%q)", s)
		assert.Equal(t, s, got, "ParseStatus(%q)", s)
	}
	for _, bad := range []string{"", "scheduled", "ACH_SENT", " SCHEDULED", "PENDING_CANCELLATION"} {
		_, err := ParseStatus(bad)
		if !assert.ErrorIs(t, err, ErrInvalidStatus, "ParseStatus(%q) err = %v, want ErrInvalidStatus", bad, err) {
			continue
		}
		var fe *FieldError
		if assert.ErrorAs(t, err, &fe, "ParseStatus(%q) err = %#v, want FieldError naming the value", bad, err) {
			assert.Equal(t, "billing_status", fe.Field, "ParseStatus(%q) err = %#v, want FieldError naming the value", bad, err)
			assert.Equal(t, bad, fe.Value, "ParseStatus(%q) err = %#v, want FieldError naming the value", bad, err)
		}
		assert.Contains(t, err.Error(), `"`+bad+`"`, "error does not quote the value")
	}
}

func TestParseTerm(t *testing.T) {
	for in, want := range map[string]Term{"": TermMonthly, "MONTHLY": TermMonthly, "YEARLY": TermYearly} {
		got, err := ParseTerm(in)
		assert.NoError(t, err, "ParseTerm(%q)", in)
		assert.Equal(t, want, got, "ParseTerm(%q)", in)
	}
	for _, bad := range []string{"monthly", " YEARLY", "weekly", "DAILY"} {
		got, err := ParseTerm(bad)
		var fe *FieldError
		assert.Empty(t, got, "ParseTerm(%q) = %q, %#v", bad, got, err)
		assert.ErrorIs(t, err, ErrInvalidTerm, "ParseTerm(%q) = %q, %#v", bad, got, err)
		if assert.ErrorAs(t, err, &fe, "ParseTerm(%q) = %q, %#v", bad, got, err) {
			assert.Equal(t, FieldError{Field: "term", Value: bad, Err: ErrInvalidTerm}, *fe, "ParseTerm(%q) = %q, %#v", bad, got, err)
		}
	}
}

func TestProcessesValid(t *testing.T) {
	all := processValues()
	want := []Process{"INITIAL", "RETRY", "PAUSE", "WEBHOOK", "WEBHOOK_BALANCE", "BATCH", "REACTIVATION", "MANUAL_REPAYMENT", "NOT_IDENTIFIED", "SUBSCRIBE"}
	require.Equal(t, want, all, "processValues()")
	for _, p := range all {
		assert.True(t, p.Valid(), "%q.Valid() = false", p)
	}
	for _, bad := range []Process{"", "initial", "UNKNOWN"} {
		assert.False(t, bad.Valid(), "%q.Valid() = true", bad)
	}
	all[0] = "CHANGED"
	assert.Equal(t, ProcessInitial, processValues()[0], "Processes/Statuses must return a fresh slice")
	assert.Equal(t, StatusScheduled, statusValues()[0], "Processes/Statuses must return a fresh slice")
}

// TestCheckTransitionReopensOnlyNeverAttempted: beyond the table, a
// CANCELLED record that was never attempted may be reopened as SCHEDULED
// or PAUSED (a come-back on its date); one that was attempted may not,
// nor may it go anywhere else. Before, every change out of CANCELLED was
// refused, and a user coming back on the cancelled renewal's date could
// never be billed there.
func TestCheckTransitionReopensOnlyNeverAttempted(t *testing.T) {
	fresh := &Period{Status: StatusCancelled}
	for _, to := range statusValues() {
		next := &Period{Status: to}
		err := CheckTransition(fresh, next)
		if to == StatusScheduled || to == StatusPaused {
			assert.NoError(t, err, "reopen as %s", to)
		} else {
			assert.ErrorIs(t, err, ErrIllegalTransition, "CANCELLED -> %s", to)
		}
	}
	for name, mut := range map[string]func(*Period){
		"initial run":     func(s *Period) { s.InitialRunDate = time.Unix(1, 0) },
		"transaction":     func(s *Period) { s.TransactionID = "txn" },
		"attempt":         func(s *Period) { s.Attempt = 1 },
		"attempt durable": func(s *Period) { s.LastAttempt.Number = 1 },
	} {
		prev := &Period{Status: StatusCancelled}
		mut(prev)
		require.True(t, prev.Attempted(), name)
		err := CheckTransition(prev, &Period{Status: StatusScheduled})
		var te *TransitionError
		require.ErrorAs(t, err, &te, name)
		assert.Contains(t, te.Reason, "never attempted", name)
	}
	// The table itself is unchanged: its pairs are what checkTransition says.
	for _, from := range statusValues() {
		for _, to := range statusValues() {
			if from == StatusCancelled {
				continue
			}
			assert.Equal(t, canTransition(from, to), CheckTransition(&Period{Status: from}, &Period{Status: to}) == nil, "%s -> %s", from, to)
		}
	}
}
