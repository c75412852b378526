package billing_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// invoiceEnv is a collector issuing invoices into an in-memory invoice
// store, on one layout of periods.
type invoiceEnv struct {
	*freeEnv
	inv    *memory.Invoices
	events *billingtest.EventRecorder
}

func newInvoiceEnv(t *testing.T, st userStore, mut ...func(*billing.Config)) *invoiceEnv {
	t.Helper()
	e := &invoiceEnv{events: &billingtest.EventRecorder{}}
	e.freeEnv = newFreeEnv(t, st, billingtest.ProviderOptions{}, append([]func(*billing.Config){func(c *billing.Config) {
		e.inv = memory.NewInvoices(c.Clock)
		c.Invoices, c.Events = e.inv, e.events
		c.Invoicing = billing.Invoicing{Prefix: "ACME"}
		c.Prices = billing.PriceListMap{"Free:v1": 0, "Plus:v2": billing.MustParseAmount("9.99"), "Pro:v1": billing.MustParseAmount("19.99")}
	}}, mut...)...)
	return e
}

// invoices returns the user's invoices, oldest first.
func (e *invoiceEnv) invoices(t *testing.T) []billing.Invoice {
	t.Helper()
	page, next, err := e.inv.ByUser(t.Context(), e.user, "", 100)
	require.NoError(t, err)
	require.Empty(t, next)
	out := make([]billing.Invoice, 0, len(page))
	for i := len(page) - 1; i >= 0; i-- {
		out = append(out, page[i])
	}
	return out
}

// TestCollectorIssuesInvoices: each charged period gets one invoice,
// numbered before the processor is called (the request names it), paid
// with the charge's transaction; the next period's is the next number;
// events tell each step.
func TestCollectorIssuesInvoices(t *testing.T) {
	t.Parallel()
	for _, st := range memoryUserStores() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			e := newInvoiceEnv(t, st)
			_, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "s1", UserID: e.user, Tier: "Plus:v2"})
			require.NoError(t, err)
			e.runAt(t, feb3.Add(time.Hour), billing.RunScheduled)
			e.runAt(t, feb3.AddDate(0, 1, 0).Add(time.Hour), billing.RunScheduled)

			invs := e.invoices(t)
			require.Len(t, invs, 2)
			calls := e.pay.Calls()
			require.Len(t, calls, 2)
			for i, inv := range invs {
				assert.Equal(t, fmt.Sprintf("ACME-%04d", i+1), inv.Number)
				assert.Equal(t, int64(i+1), inv.Seq)
				assert.Equal(t, billing.InvoicePaid, inv.Status)
				assert.Equal(t, "USD", inv.Currency)
				assert.Equal(t, int64(999), inv.Total)
				assert.Equal(t, int64(999), inv.AmountPaid)
				assert.Zero(t, inv.AmountDue)
				// What was charged is the invoice's total, and the request
				// named the invoice.
				req := calls[i].Request
				assert.Equal(t, inv.ID, req.InvoiceID)
				assert.Equal(t, inv.Number, req.InvoiceNumber)
				assert.Equal(t, billing.Amount(inv.Total), req.Amount)
				assert.Equal(t, calls[i].Result.TransactionID, inv.TransactionID)
				assert.Equal(t, []string{req.SubscriptionID}, inv.PeriodIDs)
			}
			assert.Equal(t, 2, e.events.Count(billing.EventInvoiceFinalized))
			assert.Equal(t, 2, e.events.Count(billing.EventInvoicePaid))
			for _, ev := range e.events.OfType(billing.EventInvoicePaid) {
				assert.NotEmpty(t, ev.InvoiceNumber)
			}
		})
	}
}

// TestInvoiceSurvivesDeclines: a declined charge leaves its invoice open;
// each retry presents the same invoice, and the one that succeeds pays it:
// one invoice, one number, for the period.
func TestInvoiceSurvivesDeclines(t *testing.T) {
	t.Parallel()
	e := newInvoiceEnv(t, memoryUserStores()[0])
	e.pay.SetUser(e.user, billingtest.Declined("insufficient funds", true), billingtest.Declined("insufficient funds", true), billingtest.Succeeded())
	_, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "s1", UserID: e.user, Tier: "Plus:v2"})
	require.NoError(t, err)
	e.runAt(t, feb3.Add(time.Hour), billing.RunScheduled)
	invs := e.invoices(t)
	require.Len(t, invs, 1)
	assert.Equal(t, billing.InvoiceOpen, invs[0].Status)
	for d := 1; d <= 3; d++ {
		e.runAt(t, feb3.AddDate(0, 0, d).Add(2*time.Hour), billing.RunRetry)
	}
	invs = e.invoices(t)
	require.Len(t, invs, 1)
	assert.Equal(t, billing.InvoicePaid, invs[0].Status)
	assert.Equal(t, "ACME-0001", invs[0].Number)
	calls := e.pay.Calls()
	require.Len(t, calls, 3)
	for _, c := range calls {
		assert.Equal(t, invs[0].Number, c.Request.InvoiceNumber)
	}
	assert.Equal(t, calls[2].Result.TransactionID, invs[0].TransactionID)
}

// TestInvoiceVoidedWhenWaived: waiving a declined period voids its
// invoice; the number stays taken (a void invoice keeps its number).
func TestInvoiceVoidedWhenWaived(t *testing.T) {
	t.Parallel()
	e := newInvoiceEnv(t, memoryUserStores()[0])
	e.pay.SetUser(e.user, billingtest.Declined("insufficient funds", true))
	_, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "s1", UserID: e.user, Tier: "Plus:v2"})
	require.NoError(t, err)
	e.runAt(t, feb3.Add(time.Hour), billing.RunScheduled)
	recs := e.records(t)
	var owed billing.Period
	for _, r := range recs {
		if r.Status == billing.StatusError {
			owed = r
		}
	}
	require.NotEmpty(t, owed.SubscriptionID, "%+v", recs)
	e.clock.Advance(26 * time.Hour) // an operator's waive the next day
	_, err = e.c.Periods().WaiveByID(t.Context(), owed.SubscriptionID)
	require.NoError(t, err)
	invs := e.invoices(t)
	require.Len(t, invs, 1)
	assert.Equal(t, billing.InvoiceVoid, invs[0].Status)
	assert.Equal(t, "ACME-0001", invs[0].Number)
	assert.Equal(t, 1, e.events.Count(billing.EventInvoiceVoided))
	hist, err := e.inv.History(t.Context(), invs[0].ID)
	require.NoError(t, err)
	var evs []string
	for _, h := range hist {
		evs = append(evs, h.Event)
	}
	assert.Equal(t, []string{"invoice_created", "invoice_finalized", "invoice_voided"}, evs)
}

// TestInvoiceUncollectibleWhenStale: a period given up on (stale) makes
// its invoice uncollectible.
func TestInvoiceUncollectibleWhenStale(t *testing.T) {
	t.Parallel()
	e := newInvoiceEnv(t, memoryUserStores()[0])
	steps := make([]billingtest.Step, 40)
	for i := range steps {
		steps[i] = billingtest.Declined("insufficient funds", true)
	}
	e.pay.SetUser(e.user, steps...)
	_, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "s1", UserID: e.user, Tier: "Plus:v2"})
	require.NoError(t, err)
	e.runAt(t, feb3.Add(time.Hour), billing.RunScheduled)
	for d := 1; d <= 32; d++ {
		e.clock.Set(feb3.AddDate(0, 0, d).Add(2 * time.Hour))
		_, err := e.c.Run(t.Context(), billing.RunRequest{Kind: billing.RunRetry})
		require.NoError(t, err)
	}
	var first billing.Invoice
	for _, inv := range e.invoices(t) {
		if inv.Number == "ACME-0001" {
			first = inv
		}
	}
	assert.Equal(t, billing.InvoiceUncollectible, first.Status, "%+v", e.invoices(t))
	assert.GreaterOrEqual(t, e.events.Count(billing.EventInvoiceUncollectible), 1)
}

// TestInvoiceCreditedOnRefund: a refund of a paid period is a credit note
// for the whole invoice, numbered in its own series, once however often
// the refund is delivered.
func TestInvoiceCreditedOnRefund(t *testing.T) {
	t.Parallel()
	e := newInvoiceEnv(t, memoryUserStores()[0])
	_, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "s1", UserID: e.user, Tier: "Plus:v2"})
	require.NoError(t, err)
	e.runAt(t, feb3.Add(time.Hour), billing.RunScheduled)
	invs := e.invoices(t)
	require.Len(t, invs, 1)
	paid := e.pay.Calls()[0]
	for range 2 {
		// The refund, then its redelivery an hour later.
		e.clock.Advance(time.Hour)
		_, _, err = e.c.ApplySettlement(t.Context(), billing.Settlement{SubscriptionID: paid.Request.SubscriptionID,
			TransactionID: paid.Result.TransactionID, Kind: billing.SettlementRefunded})
		require.NoError(t, err)
	}
	notes, err := e.inv.CreditNotes(t.Context(), invs[0].ID)
	require.NoError(t, err)
	require.Len(t, notes, 1)
	assert.Equal(t, int64(999), notes[0].Total)
	assert.Equal(t, "ACME-CN-0001", notes[0].Number)
	inv, err := e.inv.Invoice(t.Context(), invs[0].ID)
	require.NoError(t, err)
	assert.Equal(t, int64(999), inv.AmountCredited)
	assert.Equal(t, 1, e.events.Count(billing.EventCreditNoteIssued))
}

// TestNoInvoiceForTrialsAndFreePeriods: a trial and a free tier are never
// charged, so no invoice is issued for them (see Config.Invoices); the
// first paid period after the trial gets ACME-0001.
func TestNoInvoiceForTrialsAndFreePeriods(t *testing.T) {
	t.Parallel()
	e := newInvoiceEnv(t, memoryUserStores()[0])
	_, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "s1", UserID: e.user, Tier: "Plus:v2", TrialDays: 14})
	require.NoError(t, err)
	e.runAt(t, feb3.Add(time.Hour), billing.RunScheduled)
	assert.Empty(t, e.invoices(t))
	e.runAt(t, feb3.AddDate(0, 0, 14).Add(time.Hour), billing.RunScheduled)
	invs := e.invoices(t)
	require.Len(t, invs, 1)
	assert.Equal(t, "ACME-0001", invs[0].Number)

	free := newInvoiceEnv(t, memoryUserStores()[0])
	_, err = free.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "s1", UserID: free.user, Tier: "Free:v1"})
	require.NoError(t, err)
	free.runAt(t, feb3.Add(time.Hour), billing.RunScheduled)
	free.runAt(t, feb3.AddDate(0, 1, 0).Add(time.Hour), billing.RunScheduled)
	assert.Empty(t, free.invoices(t))
}

// TestInvoiceInZeroDecimalCurrency: a JPY host's ¥500 (Amount 500.00) is
// an invoice of 500 minor units, not 50000.
func TestInvoiceInZeroDecimalCurrency(t *testing.T) {
	t.Parallel()
	e := newInvoiceEnv(t, memoryUserStores()[0], func(c *billing.Config) {
		c.Invoicing.Currency = "JPY"
		c.Prices = billing.PriceListMap{"Plus:v2": billing.MustParseAmount("500")}
	})
	_, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "s1", UserID: e.user, Tier: "Plus:v2"})
	require.NoError(t, err)
	e.runAt(t, feb3.Add(time.Hour), billing.RunScheduled)
	invs := e.invoices(t)
	require.Len(t, invs, 1)
	assert.Equal(t, "JPY", invs[0].Currency)
	assert.Equal(t, int64(500), invs[0].Total)
	assert.Equal(t, "500", invs[0].FormatAmount(invs[0].Total))
}

// failFirstAttempt is a repository whose first SetAttempt fails: a run
// that crashed after numbering the invoice, before recording the attempt.
type failFirstAttempt struct {
	billing.Repository
	failed bool
}

func (r *failFirstAttempt) SetAttempt(ctx context.Context, prev, next *billing.Period) error {
	if !r.failed {
		r.failed = true
		return errors.New("injected: the process died")
	}
	return r.Repository.SetAttempt(ctx, prev, next)
}

// TestOrphanInvoiceVoidedByCancel: a run numbers a period's invoice and
// dies before recording the attempt; the period is then cancelled
// without ever being attempted. Its invoice does not stay open.
func TestOrphanInvoiceVoidedByCancel(t *testing.T) {
	t.Parallel()
	st := memoryUserStores()[0]
	open := st.open
	st.open = func(t *testing.T, c billing.Clock) (billing.Repository, billing.History) {
		repo, hist := open(t, c)
		return &failFirstAttempt{Repository: repo}, hist
	}
	e := newInvoiceEnv(t, st)
	_, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "s1", UserID: e.user, Tier: "Plus:v2"})
	require.NoError(t, err)
	e.clock.Set(feb3.Add(time.Hour))
	rep, err := e.c.Run(t.Context(), billing.RunRequest{Kind: billing.RunScheduled})
	require.NoError(t, err)
	require.Len(t, rep.Failed, 1, "the attempt was not recorded")
	invs := e.invoices(t)
	require.Len(t, invs, 1)
	require.Equal(t, billing.InvoiceOpen, invs[0].Status)
	assert.Zero(t, e.pay.CallCount(), "nothing was charged")

	e.clock.Advance(time.Hour) // the user cancels an hour later
	_, err = e.c.Cancel(t.Context(), billing.CancelRequest{UserRequest: ur(e.user, "c1"), When: billing.CancelNow})
	require.NoError(t, err)
	invs = e.invoices(t)
	require.Len(t, invs, 1)
	assert.Equal(t, billing.InvoiceVoid, invs[0].Status)
}
