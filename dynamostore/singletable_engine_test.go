package dynamostore_test

import (
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
		assert.Equal(t, c.ok, err == nil, "ParseSubscriptionRef(%q) = %+v, %v; want ok %v", c.in, got, err, c.ok)
		assert.Equal(t, c.want, got, "ParseSubscriptionRef(%q)", c.in)
		if err != nil {
			assert.ErrorIs(t, err, entitlement.ErrInvalidPayment, "ParseSubscriptionRef(%q): %v does not wrap ErrInvalidPayment", c.in, err)
		} else {
			assert.Equal(t, c.in, got.UserID(), "UserID of %+v", got)
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
		require.Equal(t, s, ref.UserID(), "%q parsed as %+v", s, ref)
		require.NotContains(t, ref.SubscriptionID, "#", "%q parsed as %+v", s, ref)
		require.NotContains(t, ref.SKU, "#", "%q parsed as %+v", s, ref)
		again, err := layout.ParseSubscriptionRef(ref.UserID())
		require.NoError(t, err, "round trip of %+v", ref)
		require.Equal(t, ref, again, "round trip of %+v", ref)
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
		assert.True(t, p.Equal(c.payment), "%s: Due payment = %v, want %v", c.name, p, c.payment)
		assert.True(t, r.Equal(c.reminder), "%s: Due reminder = %v, want %v", c.name, r, c.reminder)
	}
	o := layout.OpenPeriods{}
	rec := billing.Period{BillingDate: time.Date(2024, 3, 5, 0, 0, 0, 0, time.UTC), Status: billing.StatusScheduled}
	o.Record(&rec)
	rec.Status = billing.StatusACHSent // still open: the retry run gives up on it past its deadline
	o.Record(&rec)
	assert.Len(t, o, 1, "an ACHSENT period is not recorded as open: %v", o)
	assert.Equal(t, billing.StatusACHSent, o[layout.BillingDateKey(&rec)], "an ACHSENT period is not recorded as open: %v", o)
	rec.Status = billing.StatusCompleted
	o.Record(&rec)
	assert.Empty(t, o, "a period that left the open statuses is still recorded: %v", o)
}

func TestPeriodReceipt(t *testing.T) {
	ref := layout.SubscriptionRef{AccountID: "a", SubscriptionID: "s", SKU: "k"}
	done := time.Date(2024, 3, 5, 12, 0, 0, 7, time.UTC)
	rec := func(st billing.Status) *billing.Period {
		return &billing.Period{Status: st, Amount: billing.Cents(999), TransactionID: "tx", CompletionDate: done, LastRunDate: done.Add(time.Second)}
	}
	for _, c := range []struct {
		name       string
		prev, next *billing.Period
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
		if !assert.Equal(t, c.want, ok, "%s: receipt", c.name) {
			continue
		}
		if ok {
			assert.Equal(t, "a", r.AccountID, "%s: receipt %+v", c.name, r)
			assert.Equal(t, "s", r.SubscriptionID, "%s: receipt %+v", c.name, r)
			assert.Equal(t, "k", r.SKU, "%s: receipt %+v", c.name, r)
			assert.True(t, r.ProcessedDate.Equal(done), "%s: receipt %+v", c.name, r)
			assert.Equal(t, billing.Cents(999), r.ProcessedAmount, "%s: receipt %+v", c.name, r)
			assert.Equal(t, "tx", r.TransactionID, "%s: receipt %+v", c.name, r)
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
		if !assert.NoError(t, err, c.name) {
			continue
		}
		assert.True(t, w.First.Equal(c.first), "%s: walk %+v; want first day %v", c.name, w, c.first)
		assert.True(t, w.Last.Equal(c.last), "%s: walk %+v; want last day %v", c.name, w, c.last)
		assert.Equal(t, c.lo, w.Lo, "%s: walk %+v", c.name, w)
		assert.Equal(t, c.hi, w.Hi, "%s: walk %+v", c.name, w)
	}
	_, err := layout.SingleTableWalk(billing.StatusQuery{Status: billing.StatusError, Before: time.Date(1, 1, 2, 0, 0, 0, 0, time.UTC)}, now, 45)
	assert.ErrorIs(t, err, billing.ErrInvalidQuery, "walk before year 1")
}
