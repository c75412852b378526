package dynamostore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/entitlement"
	"github.com/dynabill/billing/internal/layout"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseSubscriptionRef(t *testing.T) {
	for _, c := range []struct {
		in   string
		want layout.SubscriptionRef
		ok   bool
	}{
		{"123#s1#999", layout.SubscriptionRef{AccountID: "123", SubscriptionID: "s1", SKU: "999"}, true},
		{"org#7#s1#999", layout.SubscriptionRef{AccountID: "org#7", SubscriptionID: "s1", SKU: "999"}, true}, // '#' only in the account
		{"", layout.SubscriptionRef{}, false},
		{"user-1", layout.SubscriptionRef{}, false},
		{"a#b", layout.SubscriptionRef{}, false},
		{"#s#k", layout.SubscriptionRef{}, false},
		{"a##k", layout.SubscriptionRef{}, false},
		{"a#s#", layout.SubscriptionRef{}, false},
		{"a#s#" + strings.Repeat("k", layout.MaxPaymentID+1), layout.SubscriptionRef{}, false},
	} {
		got, err := layout.ParseSubscriptionRef(c.in)
		if c.ok != (err == nil) || got != c.want {
			t.Errorf("ParseSubscriptionRef(%q) = %+v, %v; want %+v, ok %v", c.in, got, err, c.want, c.ok)
		}
		if err != nil && !errors.Is(err, entitlement.ErrInvalidPayment) {
			t.Errorf("ParseSubscriptionRef(%q): %v does not wrap ErrInvalidPayment", c.in, err)
		}
		if err == nil && got.UserID() != c.in {
			t.Errorf("UserID of %+v = %q, want %q", got, got.UserID(), c.in)
		}
	}
}

// FuzzParseSubscriptionRef: the parser never panics, and what it accepts
// is exactly what UserID makes of the result.
func FuzzParseSubscriptionRef(f *testing.F) {
	for _, s := range []string{"123#s1#999", "a#b#c#d", "##", "a#b", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ref, err := layout.ParseSubscriptionRef(s)
		if err != nil {
			require.ErrorIs(t, err, entitlement.ErrInvalidPayment, "%q: %v does not wrap ErrInvalidPayment", s, err)
			return
		}
		if ref.UserID() != s || strings.Contains(ref.SubscriptionID, "#") || strings.Contains(ref.SKU, "#") {
			t.Fatalf("%q parsed as %+v", s, ref)
		}
		if again, err := layout.ParseSubscriptionRef(ref.UserID()); err != nil || again != ref {
			t.Fatalf("round trip of %+v: %+v, %v", ref, again, err)
		}
	})
}

func TestOpenPeriodsDue(t *testing.T) {
	d := func(day int) string { return time.Date(2024, 3, day, 9, 30, 0, 0, time.UTC).Format(time.RFC3339) }
	day := func(n int) time.Time { return time.Date(2024, 3, n, 0, 0, 0, 0, time.UTC) }
	for _, c := range []struct {
		name              string
		open              layout.OpenPeriods
		payment, reminder time.Time
	}{
		{"nothing open", layout.OpenPeriods{}, time.Time{}, time.Time{}},
		{"one scheduled", layout.OpenPeriods{d(10): billing.StatusScheduled}, day(10), day(6)},
		{"error before scheduled", layout.OpenPeriods{d(2): billing.StatusError, d(30): billing.StatusScheduled}, day(2), day(26)},
		{"only error", layout.OpenPeriods{d(2): billing.StatusError}, day(2), time.Time{}},
		{"paused", layout.OpenPeriods{d(12): billing.StatusPaused}, day(12), time.Time{}},
		{"two scheduled", layout.OpenPeriods{d(20): billing.StatusScheduled, d(10): billing.StatusScheduled}, day(10), day(6)},
		{"unparsable key ignored", layout.OpenPeriods{"garbage": billing.StatusScheduled, d(15): billing.StatusError}, day(15), time.Time{}},
	} {
		p, r := c.open.Due(4)
		if !p.Equal(c.payment) || !r.Equal(c.reminder) {
			t.Errorf("%s: Due = %v, %v; want %v, %v", c.name, p, r, c.payment, c.reminder)
		}
	}
	o := layout.OpenPeriods{}
	rec := billing.Subscription{BillingDate: time.Date(2024, 3, 5, 0, 0, 0, 0, time.UTC), Status: billing.StatusScheduled}
	o.Record(&rec)
	rec.Status = billing.StatusACHSent // still open: the retry run gives up on it past its deadline
	o.Record(&rec)
	if len(o) != 1 || o[layout.BillingDateKey(&rec)] != billing.StatusACHSent {
		t.Errorf("an ACHSENT period is not recorded as open: %v", o)
	}
	rec.Status = billing.StatusCompleted
	o.Record(&rec)
	assert.Empty(t, o, "a period that left the open statuses is still recorded: %v", o)
}

func TestPeriodReceipt(t *testing.T) {
	ref := layout.SubscriptionRef{AccountID: "a", SubscriptionID: "s", SKU: "k"}
	done := time.Date(2024, 3, 5, 12, 0, 0, 7, time.UTC)
	rec := func(st billing.Status) *billing.Subscription {
		return &billing.Subscription{Status: st, Amount: billing.Cents(999), TransactionID: "tx", CompletionDate: done, LastRunDate: done.Add(time.Second)}
	}
	for _, c := range []struct {
		name       string
		prev, next *billing.Subscription
		want       bool
	}{
		{"collected", rec(billing.StatusScheduled), rec(billing.StatusCompleted), true},
		{"ach settled", rec(billing.StatusACHSent), rec(billing.StatusCompleted), true},
		{"retry collected", rec(billing.StatusError), rec(billing.StatusCompleted), true},
		{"declined", rec(billing.StatusScheduled), rec(billing.StatusError), false},
		{"ach sent", rec(billing.StatusScheduled), rec(billing.StatusACHSent), false},
		{"refund of a completed period", rec(billing.StatusCompleted), rec(billing.StatusRefunded), false},
		{"added complete (an import)", nil, rec(billing.StatusCompleted), false},
	} {
		r, ok := layout.PeriodReceipt(ref, c.prev, c.next)
		if ok != c.want {
			t.Errorf("%s: receipt %v, want %v", c.name, ok, c.want)
			continue
		}
		if ok && (r.AccountID != "a" || r.SubscriptionID != "s" || r.SKU != "k" || !r.ProcessedDate.Equal(done) || r.ProcessedAmount != billing.Cents(999) || r.TransactionID != "tx") {
			t.Errorf("%s: receipt %+v", c.name, r)
		}
	}
}

func TestSingleTableWalk(t *testing.T) {
	now := time.Date(2024, 5, 15, 12, 0, 0, 0, time.UTC)
	day := func(n int) time.Time { return time.Date(2024, 5, 15+n, 0, 0, 0, 0, time.UTC) }
	for _, c := range []struct {
		name        string
		q           billing.StatusQuery
		first, last time.Time
		lo, hi      string
	}{
		{"scheduled run", billing.StatusQuery{Status: billing.StatusScheduled, Before: now}, day(-45), day(0), "", "2024-05-15T11:59:59Z"},
		{"before midnight", billing.StatusQuery{Status: billing.StatusScheduled, Before: day(0)}, day(-46), day(-1), "", "2024-05-14T23:59:59Z"},
		{"retry run", billing.StatusQuery{Status: billing.StatusError, After: now.AddDate(0, 0, -37)}, day(-45), day(1), "2024-04-08T12:00:01Z", "~"},
		{"notifier window", billing.StatusQuery{Status: billing.StatusScheduled, Since: day(4), Before: day(5)}, day(-45), day(4), "2024-05-19T00:00:00Z", "2024-05-19T23:59:59Z"},
		{"since long ago", billing.StatusQuery{Status: billing.StatusError, Since: day(-100)}, day(-100), day(1), "2024-02-05T00:00:00Z", "~"},
		{"future upper bound", billing.StatusQuery{Status: billing.StatusScheduled, Before: day(10)}, day(-45), day(9), "", "2024-05-24T23:59:59Z"},
	} {
		w, err := layout.SingleTableWalk(c.q, now, 45)
		if err != nil || !w.First.Equal(c.first) || !w.Last.Equal(c.last) || w.Lo != c.lo || w.Hi != c.hi {
			t.Errorf("%s: walk %+v, %v; want days %v..%v, keys %q..%q", c.name, w, err, c.first, c.last, c.lo, c.hi)
		}
	}
	if _, err := layout.SingleTableWalk(billing.StatusQuery{Status: billing.StatusError, Before: time.Date(1, 1, 2, 0, 0, 0, 0, time.UTC)}, now, 45); !errors.Is(err, billing.ErrInvalidQuery) {
		t.Errorf("walk before year 1: %v; want ErrInvalidQuery", err)
	}
}
