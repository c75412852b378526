package billinghttp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dynabill/billing"
)

// TestClassify checks the error mapping, including errors the handler
// tests cannot easily provoke, and that messages never carry the error's
// text.
func TestClassify(t *testing.T) {
	const leak = "secret-detail"
	wrap := func(err error) error { return fmt.Errorf("cancel s1 (%s): %w", leak, err) }
	cases := []struct {
		name   string
		err    error
		status int
		code   string
		field  string
	}{
		{"unauthenticated", wrap(ErrUnauthenticated), 401, CodeUnauthenticated, ""},
		{"forbidden", wrap(ErrForbidden), 403, CodeForbidden, ""},
		{"not found", wrap(billing.ErrNotFound), 404, CodeNotFound, ""},
		{"locked", wrap(billing.ErrAlreadyLocked), 409, CodeLocked, ""},
		{"not collectible", wrap(billing.ErrNotCollectible), 409, CodeNotCollectible, ""},
		{"illegal transition", wrap(&billing.TransitionError{From: billing.StatusCompleted, To: billing.StatusError}), 409, CodeIllegalTransition, ""},
		{"already exists", wrap(&billing.ConflictError{Op: "add", Key: leak, Err: billing.ErrAlreadyExists}), 409, CodeAlreadyExists, ""},
		{"conflict", wrap(&billing.ConflictError{Op: "update", Key: leak, Err: billing.ErrConflict}), 409, CodeConflict, ""},
		{"invalid query", wrap(billing.ErrInvalidQuery), 400, CodeInvalidRequest, ""},
		{"invalid date", wrap(billing.ErrInvalidDate), 400, CodeInvalidRequest, ""},
		{"invalid amount", wrap(billing.ErrInvalidAmount), 400, CodeInvalidRequest, "amount"},
		{"input field", wrap(&billing.FieldError{Field: "billing_date", Value: leak, Err: billing.ErrInvalidDate}), 400, CodeInvalidRequest, "billing_date"},
		{"input field of another kind", wrap(&billing.FieldError{Field: "term", Value: leak, Err: billing.ErrInvalidTerm}), 400, CodeInvalidRequest, "term"},
		{"date out of range", wrap(&billing.FieldError{Field: "billing_date", Value: leak, Err: fmt.Errorf("%w: %s", billing.ErrInvalidDate, leak)}), 400, CodeInvalidRequest, "billing_date"},
		{"date move", wrap(&billing.DateMoveError{SubscriptionID: leak, PeriodID: leak}), 422, CodeDateOutOfOrder, "billing_date"},
		{"amount of a tier change", wrap(&billing.FieldError{Field: "amount", Value: leak, Err: fmt.Errorf("%w: %s", billing.ErrInvalidAmount, leak)}), 400, CodeInvalidRequest, "amount"},
		{"tier of a tier change", wrap(&billing.FieldError{Field: "tier", Value: leak, Err: billing.ErrUnknownTier}), 400, CodeInvalidRequest, "tier"},
		{"unknown tier of a host's price list", wrap(fmt.Errorf("plans service: %s: %w", leak, billing.ErrUnknownTier)), 400, CodeInvalidRequest, "tier"},
		{"stored amount", wrap(&billing.FieldError{Field: "billing_amount", Value: leak, Key: "user_id=u", Err: billing.ErrInvalidAmount}), 500, CodeInternal, ""},
		{"stored item field", wrap(&billing.FieldError{Field: "billing_amount", Value: leak, Key: "user_id=u", Err: billing.ErrInvalidAmount}), 500, CodeInternal, ""},
		{"invalid item", wrap(billing.ErrInvalidItem), 500, CodeInternal, ""},
		{"joined with a lock", errors.Join(errors.New(leak), billing.ErrAlreadyLocked), 409, CodeLocked, ""},
		{"canceled", wrap(context.Canceled), 500, CodeInternal, ""},
		{"anything else", errors.New(leak), 500, CodeInternal, ""},
		{"the handler's own", fmt.Errorf("x: %w", errSubscriptionNotFound), 404, CodeNotFound, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := classify(tc.err)
			if got.status != tc.status || got.code != tc.code || got.field != tc.field {
				t.Errorf("classify = %d %s %q, want %d %s %q", got.status, got.code, got.field, tc.status, tc.code, tc.field)
			}
			if got.message == "" || strings.Contains(got.message, leak) {
				t.Errorf("message %q", got.message)
			}
		})
	}
}

// TestRefusal checks that only ErrUnauthenticated is a 401: any other
// error of the authorizer is a 403 without its text.
func TestRefusal(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
	}{
		{ErrUnauthenticated, 401},
		{fmt.Errorf("token expired: %w", ErrUnauthenticated), 401},
		{ErrForbidden, 403},
		{errors.New("secret-detail"), 403},
		{billing.ErrNotFound, 403},
	} {
		got := refusal(tc.err)
		if got.status != tc.status || strings.Contains(got.message, "secret") {
			t.Errorf("refusal(%v) = %d %q, want %d", tc.err, got.status, got.message, tc.status)
		}
	}
}

func TestParseDate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"2024-03-15", time.Date(2024, 3, 15, 0, 0, 0, 0, time.UTC), true},
		{"2024-03-15T09:30:00Z", time.Date(2024, 3, 15, 9, 30, 0, 0, time.UTC), true},
		{"2024-03-15T09:30:00+00:00", time.Date(2024, 3, 15, 9, 30, 0, 0, time.UTC), true},
		{"2024-03-15T09:30:00.5Z", time.Date(2024, 3, 15, 9, 30, 0, 5e8, time.UTC), true},
		{"9999-12-31", time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), true},
		// An offset would move the calendar day; it is refused, not converted.
		{"2024-03-15T09:30:00-05:00", time.Time{}, false},
		{"2024-04-16T09:30:00+14:00", time.Time{}, false},
		{"2024-03-15T00:00:00-00:00", time.Time{}, false},
		{"2024-03-15T00:00:00+00:01", time.Time{}, false},
		{"0000-01-01", time.Time{}, false},
		{"0000-01-01T00:00:00Z", time.Time{}, false},
		{"10000-01-01", time.Time{}, false},
		{"-0001-01-01", time.Time{}, false},
		{"2024-03-15Z", time.Time{}, false},
		{"2024-03-15T09:30:00", time.Time{}, false},
		{"", time.Time{}, false},
		{"2024-02-30", time.Time{}, false},
		{"2024-3-5", time.Time{}, false},
		{"15/03/2024", time.Time{}, false},
		{"2024-03-15 09:30:00", time.Time{}, false},
		{"0001-01-01", time.Time{}, false},
	} {
		got, err := parseDate("billing_date", tc.in)
		if (err == nil) != tc.ok || !got.Equal(tc.want) {
			t.Errorf("parseDate(%q) = %v, %v; want %v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
		var ae *apiError
		if err != nil && (!errors.As(err, &ae) || ae.field != "billing_date" || ae.status != 400) {
			t.Errorf("parseDate(%q) error %v does not name billing_date", tc.in, err)
		}
	}
}
