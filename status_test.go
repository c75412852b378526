package billing

import (
	"errors"
	"slices"
	"strings"
	"testing"

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
	all := Statuses()
	require.Len(t, all, 11, "Statuses() = %d values, want 11", len(all))
	checked := 0
	for _, from := range all {
		want := map[Status]bool{}
		for _, to := range strings.Fields(allowed[from]) {
			want[Status(to)] = true
		}
		for _, to := range all {
			checked++
			got := CanTransition(from, to)
			assert.Equal(t, want[to], got, "CanTransition(%s, %s) = %v, want %v", from, to, got, want[to])
			err := CheckTransition(from, to)
			if want[to] != (err == nil) {
				t.Errorf("CheckTransition(%s, %s) = %v", from, to, err)
			}
			if err != nil {
				var te *TransitionError
				if !errors.Is(err, ErrIllegalTransition) || !errors.As(err, &te) || te.From != from || te.To != to {
					t.Errorf("CheckTransition(%s, %s) error %v does not carry the pair", from, to, err)
				}
				if !strings.Contains(err.Error(), string(from)+" -> "+string(to)) {
					t.Errorf("error %q does not name the pair", err)
				}
			}
		}
	}
	require.Equal(t, 121, checked, "checked %d pairs, want 121", checked)
	// Unknown statuses never transition.
	for _, s := range []Status{"", "scheduled", "PENDING"} {
		if CanTransition(s, StatusScheduled) || CanTransition(StatusScheduled, s) {
			t.Errorf("unknown status %q transitions", s)
		}
	}
}

func TestTerminalStatusesHaveNoWayBack(t *testing.T) {
	for _, s := range Statuses() {
		outs := strings.Fields(allowed[s])
		switch {
		case s == StatusCompleted:
			if !s.IsTerminal() || len(outs) != 1 || outs[0] != "REFUNDED" {
				t.Errorf("COMPLETED: terminal=%v outs=%v", s.IsTerminal(), outs)
			}
		case s == StatusStale:
			// Only the late settlement of an overdue ACH debit.
			if !s.IsTerminal() || len(outs) != 1 || outs[0] != "COMPLETED" {
				t.Errorf("STALE: terminal=%v outs=%v", s.IsTerminal(), outs)
			}
		case s.IsTerminal():
			assert.Empty(t, outs, "terminal %s has transitions %v", s, outs)
		default:
			if len(outs) == 0 {
				t.Errorf("non-terminal %s has no transitions", s)
			}
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
		if got := tt.s.IsTerminal(); got != tt.terminal {
			t.Errorf("%q.IsTerminal() = %v", tt.s, got)
		}
		if got := tt.s.IsCollectible(); got != tt.collectible {
			t.Errorf("%q.IsCollectible() = %v", tt.s, got)
		}
		if got := tt.s.Storable(); got != tt.storable {
			t.Errorf("%q.Storable() = %v", tt.s, got)
		}
		if got := tt.s.Valid(); got != tt.valid {
			t.Errorf("%q.Valid() = %v", tt.s, got)
		}
	}
}

func TestParseStatus(t *testing.T) {
	for _, s := range Statuses() {
		got, err := ParseStatus(string(s))
		if err != nil || got != s {
			t.Errorf("ParseStatus(%q) = %q, %v", s, got, err)
		}
	}
	for _, bad := range []string{"", "scheduled", "ACH_SENT", " SCHEDULED", "PENDING_CANCELLATION"} {
		_, err := ParseStatus(bad)
		if !errors.Is(err, ErrInvalidStatus) {
			t.Errorf("ParseStatus(%q) err = %v, want ErrInvalidStatus", bad, err)
			continue
		}
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "billing_status" || fe.Value != bad {
			t.Errorf("ParseStatus(%q) err = %#v, want FieldError naming the value", bad, err)
		}
		if !strings.Contains(err.Error(), `"`+bad+`"`) {
			t.Errorf("error %q does not quote the value", err)
		}
	}
}

func TestParseTerm(t *testing.T) {
	for in, want := range map[string]Term{"": TermMonthly, "MONTHLY": TermMonthly, "YEARLY": TermYearly} {
		if got, err := ParseTerm(in); err != nil || got != want {
			t.Errorf("ParseTerm(%q) = %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"monthly", " YEARLY", "weekly", "DAILY"} {
		got, err := ParseTerm(bad)
		var fe *FieldError
		if got != "" || !errors.Is(err, ErrInvalidTerm) || !errors.As(err, &fe) || *fe != (FieldError{Field: "term", Value: bad, Err: ErrInvalidTerm}) {
			t.Errorf("ParseTerm(%q) = %q, %#v", bad, got, err)
		}
	}
}

func TestProcessesValid(t *testing.T) {
	all := Processes()
	want := []Process{"INITIAL", "RETRY", "PAUSE", "WEBHOOK", "WEBHOOK_BALANCE", "BATCH", "REACTIVATION", "MANUAL_REPAYMENT", "NOT_IDENTIFIED"}
	if !slices.Equal(all, want) {
		t.Fatalf("Processes() = %v", all)
	}
	for _, p := range all {
		if !p.Valid() {
			t.Errorf("%q.Valid() = false", p)
		}
	}
	for _, bad := range []Process{"", "initial", "UNKNOWN"} {
		if bad.Valid() {
			t.Errorf("%q.Valid() = true", bad)
		}
	}
	all[0] = "CHANGED"
	if Processes()[0] != ProcessInitial || Statuses()[0] != StatusScheduled {
		t.Error("Processes/Statuses must return a fresh slice")
	}
}
