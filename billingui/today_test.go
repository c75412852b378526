package billingui_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/billingui"
	"github.com/dynabill/billing/memory"
)

// recordsOnly hides a repository's day totals: a store that keeps none.
type recordsOnly struct{ billing.Repository }

// fleet is a console over a store holding more records than one view
// reads (2 records a page, 1 page a list, 8 for the chart): paid periods
// completed today and in the last days, declines of today, and as many
// SCHEDULED records not yet due.
type fleet struct {
	store     *memory.Store
	clock     *billingtest.Clock
	collected billing.Amount // completed in the last 30 days
	today     billing.Amount // completed today
	declined  int            // declined today
}

const fleetUsers = 60

func newFleet(t *testing.T) *fleet {
	t.Helper()
	ctx := context.Background()
	now := time.Date(2025, 3, 20, 15, 0, 0, 0, time.UTC)
	f := &fleet{store: billingtest.NewMemoryStore(t, memory.Options{}), clock: billingtest.NewClock(now)}
	repo := f.store.Repository()
	for i := range fleetUsers {
		user := fmt.Sprintf("fleet-%03d", i)
		due := now.Truncate(24*time.Hour).AddDate(0, 0, -(i % 10))
		s := billing.Period{UserID: user, BillingDate: due, SubscriptionID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i),
			Amount: billing.Cents(int64(500 + i)), Status: billing.StatusScheduled, BillingPeriod: billing.BillingPeriod(due),
			LastRunDate: due.Add(-time.Hour), CreatedDate: due.Add(-time.Hour), Process: billing.ProcessInitial, Term: billing.TermMonthly,
			ReceiptTierName: "Plus:v2"}
		require.NoError(t, repo.Add(ctx, &s))
		next := s.Clone()
		next.LastRunDate = due.Add(9*time.Hour + time.Duration(i)*time.Second)
		next.Attempt = 1
		if i%4 == 3 {
			next.Status, next.PaymentError = billing.StatusError, "insufficient funds"
			if i%10 == 0 {
				f.declined++
			}
		} else {
			next.Status, next.CompletionDate, next.TransactionID = billing.StatusCompleted, next.LastRunDate, fmt.Sprintf("tx-%d", i)
			f.collected += next.Amount
			if i%10 == 0 {
				f.today += next.Amount
			}
		}
		require.NoError(t, repo.Update(ctx, &s, &next))
		// The user's next period, not due yet: read by the lists, never
		// shown.
		later := s.Clone()
		later.BillingDate, later.SubscriptionID = due.AddDate(0, 1, 0), fmt.Sprintf("00000000-0000-4000-9000-%012d", i)
		later.LastRunDate = next.LastRunDate.Add(time.Millisecond)
		require.NoError(t, repo.Add(ctx, &later))
	}
	return f
}

func (f *fleet) console(t *testing.T, repo billing.Repository) *browser {
	t.Helper()
	c, err := billing.NewCollector(billing.Config{Repository: repo, History: f.store.History(),
		Locker: billingtest.NewLocker(f.clock, time.Minute), Provider: billingtest.NewProvider(billingtest.ProviderOptions{Clock: f.clock}),
		Clock: f.clock, Prices: billing.PriceListMap{"Plus:v2": billing.MustParseAmount("9.99")}})
	require.NoError(t, err)
	h, err := billingui.New(billingui.Config{Collector: c, Repository: repo, History: f.store.History(), Authorizer: roles,
		CSRFKey: []byte(strings.Repeat("k", 32)), PageSize: 2, MaxPages: 1})
	require.NoError(t, err)
	return (&env{h: h}).as(t, "operator")
}

var (
	revenueTotal  = regexp.MustCompile(`id="revenue-total"[^>]*>([^<]+)<`)
	collectedDay  = regexp.MustCompile(`id="collected-today">([^<]+)<`)
	declinedToday = regexp.MustCompile(`id="declined-today">(\d+) declined today`)
)

// TestTodayReadsTheDayTotals: with more records than the page reads, the
// collected total of the 30 days, today's and today's declines are the
// store's exact figures (issue 40: the page summed a bounded read and
// showed it as the whole).
func TestTodayReadsTheDayTotals(t *testing.T) {
	f := newFleet(t)
	page := f.console(t, f.store.Repository()).get("/")
	require.Equal(t, http.StatusOK, page.code, page.body)
	m := revenueTotal.FindStringSubmatch(page.body)
	require.NotNil(t, m, page.body)
	assert.Contains(t, m[1], f.collected.String(), "the 30 days' collected total")
	m = collectedDay.FindStringSubmatch(page.body)
	require.NotNil(t, m, "today's collected figure")
	assert.Contains(t, m[1], f.today.String())
	m = declinedToday.FindStringSubmatch(page.body)
	require.NotNil(t, m, "today's declines")
	assert.Equal(t, fmt.Sprint(f.declined), m[1])
	assert.Contains(t, page.body, `id="revenue-source"`)
	assert.NotContains(t, page.body, "partial")
}

// TestTodayWithoutTotalsSaysPartial: a store that keeps no day totals
// gets the sums of the records read, each marked partial with the number
// read, never a total presented as whole.
func TestTodayWithoutTotalsSaysPartial(t *testing.T) {
	f := newFleet(t)
	page := f.console(t, recordsOnly{f.store.Repository()}).get("/")
	require.Equal(t, http.StatusOK, page.code, page.body)
	assert.Regexp(t, `Collected, partial</span><b id="revenue-total" class="partial">[^<]+</b><span class="muted">from the 16 records read</span>`, page.body)
	assert.Contains(t, page.body, `id="revenue-partial"`)
	assert.NotContains(t, page.body, `id="collected-today"`)
	assert.NotContains(t, page.body, `id="revenue-source"`)
	assert.Contains(t, page.body, `id="declines-partial">Partly read: counted from the 2 ERROR records`)
}

// TestAttentionPartlyReadIsNotNone: a list that stopped at its read bound
// without finding anything says how much it read and links on, instead
// of "None." (issue 40: "None." after reading 200 of 20,000 records).
func TestAttentionPartlyReadIsNotNone(t *testing.T) {
	f := newFleet(t)
	page := f.console(t, f.store.Repository()).get("/attention")
	require.Equal(t, http.StatusOK, page.code, page.body)
	i := strings.Index(page.body, "In flight past the request timeout")
	j := strings.Index(page.body, "ACH debits past")
	require.True(t, i >= 0 && j > i, page.body)
	inflight := page.body[i:j]
	assert.NotContains(t, inflight, "None.")
	assert.Regexp(t, `Partly read: [0-9]+ records, nothing found yet\. <a href="attention\?section=inflight&amp;cursor=[^"]+">continue →</a>`, inflight)
}
