package billingtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
)

// invoiceT0 is when the suites' drafts are made, one a second from it.
var invoiceT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// NewTestInvoice returns a draft for user and key that adds up: a plan line
// of 2 × 499 USD cents, a 100 discount and 81 tax (total 979), made n
// seconds after a fixed instant (so a user's invoices sort by n).
func NewTestInvoice(user, key string, n int) *billing.Invoice {
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	return &billing.Invoice{
		UserID: user, Key: key, Currency: "USD",
		Lines: []billing.InvoiceLine{
			{Description: "Plus monthly", PeriodStart: start, PeriodEnd: start.AddDate(0, 1, 0), Quantity: 2, UnitAmount: 499, Amount: 998, Kind: billing.LinePlan},
			{Description: "Welcome", Amount: 100, Kind: billing.LineDiscount},
			{Description: "VAT", Amount: 81, Kind: billing.LineTax},
		},
		Subtotal: 998, Discounts: 100, Tax: 81, Total: 979, AmountDue: 979,
		DueAt: start.AddDate(0, 0, 7), PeriodIDs: []string{"period-" + key},
		Created: invoiceT0.Add(time.Duration(n) * time.Second),
	}
}

// RunInvoiceConformance runs the conformance suite of [billing.Invoices]
// on the store newStore returns, called once per subtest with a fresh,
// empty store. It checks issuance by key (a repeat returns the draft,
// other content under the key is refused), numbering (1..N without gaps
// per sequence, a repeat of Finalize gives the same number, a void draft
// leaves no gap, accounts' sequences independent, a host-wide one shared),
// the status changes and their refusals, credit notes in a series of their
// own, a history row for every change, and the reads.
func RunInvoiceConformance(t *testing.T, newStore func(t *testing.T) billing.Invoices) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, s billing.Invoices)
	}{
		{"DraftRepeat", invoiceDraftRepeat},
		{"DraftKeyReused", invoiceDraftKeyReused},
		{"TaxInclusive", invoiceTaxInclusive},
		{"DraftInvalid", invoiceDraftInvalid},
		{"TimeOutOfRange", invoiceTimeOutOfRange},
		{"FinalizeGapless", invoiceFinalizeGapless},
		{"FinalizeRepeat", invoiceFinalizeRepeat},
		{"FinalizeRefused", invoiceFinalizeRefused},
		{"Transitions", invoiceTransitions},
		{"CreditNotes", invoiceCreditNotes},
		{"History", invoiceHistory},
		{"AccountSequences", invoiceAccountSequences},
		{"HostSequence", invoiceHostSequence},
		{"Reads", invoiceReads},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

func draft(t *testing.T, s billing.Invoices, inv *billing.Invoice) billing.Invoice {
	t.Helper()
	got, err := s.CreateDraft(t.Context(), inv)
	require.NoError(t, err)
	return got
}

func finalize(t *testing.T, s billing.Invoices, id string) billing.Invoice {
	t.Helper()
	got, err := s.Finalize(t.Context(), id, invoiceT0.Add(time.Hour))
	require.NoError(t, err)
	return got
}

func invoiceDraftRepeat(t *testing.T, s billing.Invoices) {
	ctx := t.Context()
	first := draft(t, s, NewTestInvoice("u1", "p1", 1))
	assert.NotEmpty(t, first.ID)
	assert.Equal(t, billing.InvoiceDraft, first.Status)
	assert.Equal(t, int64(1), first.Version)
	assert.Equal(t, "u1", first.Prefix, "the account's own sequence is prefixed by the account")
	assert.Empty(t, first.Number, "a draft has no number")

	again := NewTestInvoice("u1", "p1", 5) // later, same content
	second := draft(t, s, again)
	assert.Equal(t, first.ID, second.ID, "a repeat returns the draft")
	page, _, err := s.ByUser(ctx, "u1", "", 10)
	require.NoError(t, err)
	assert.Len(t, page, 1, "one invoice per key")

	// After it is finalized, a repeat returns it as it is now.
	fin := finalize(t, s, first.ID)
	third := draft(t, s, NewTestInvoice("u1", "p1", 9))
	assert.Equal(t, fin.Number, third.Number)
	assert.Equal(t, billing.InvoiceOpen, third.Status)
	hist, err := s.History(ctx, first.ID)
	require.NoError(t, err)
	assert.Len(t, hist, 2, "repeats write no history row")
}

func invoiceDraftKeyReused(t *testing.T, s billing.Invoices) {
	draft(t, s, NewTestInvoice("u1", "p1", 1))
	other := NewTestInvoice("u1", "p1", 1)
	other.Lines[0].Quantity, other.Lines[0].Amount, other.Subtotal, other.Total, other.AmountDue = 3, 1497, 1497, 1478, 1478
	_, err := s.CreateDraft(t.Context(), other)
	require.ErrorIs(t, err, billing.ErrRequestKeyReused)
	var rk *billing.RequestKeyError
	require.ErrorAs(t, err, &rk)
	assert.Equal(t, "p1", rk.RequestKey)
	assert.Equal(t, []string{"AmountDue", "Lines", "Subtotal", "Total"}, rk.Fields)

	// Another account's key of the same name is its own.
	other.UserID = "u2"
	draft(t, s, other)
}

// invoiceTaxInclusive: an invoice whose prices include the tax keeps
// TaxInclusive through every read and change, and its history rows; a
// repeat of its key with the tax added instead asks for another invoice
// (the fields that differ name TaxInclusive). An invoice whose tax is
// added reads back without it.
func invoiceTaxInclusive(t *testing.T, s billing.Invoices) {
	ctx := t.Context()
	incl := NewTestInvoice("u1", "p-incl", 1)
	incl.TaxInclusive, incl.Total, incl.AmountDue = true, 898, 898
	first := draft(t, s, incl)
	assert.True(t, first.TaxInclusive)
	fin := finalize(t, s, first.ID)
	assert.True(t, fin.TaxInclusive)
	got, err := s.Invoice(ctx, first.ID)
	require.NoError(t, err)
	assert.True(t, got.TaxInclusive, "read back")
	assert.Equal(t, int64(898), got.Total)
	assert.Equal(t, int64(81), got.Tax)
	hist, err := s.History(ctx, first.ID)
	require.NoError(t, err)
	require.Len(t, hist, 2)
	for _, h := range hist {
		assert.True(t, h.TaxInclusive, "history row %s", h.Event)
	}

	added := NewTestInvoice("u1", "p-incl", 1)
	_, err = s.CreateDraft(ctx, added)
	var rk *billing.RequestKeyError
	require.ErrorAs(t, err, &rk)
	assert.Contains(t, rk.Fields, "TaxInclusive")

	excl := draft(t, s, NewTestInvoice("u1", "p-excl", 2))
	got, err = s.Invoice(ctx, excl.ID)
	require.NoError(t, err)
	assert.False(t, got.TaxInclusive)
	assert.Equal(t, int64(979), got.Total)
}

func invoiceDraftInvalid(t *testing.T, s billing.Invoices) {
	ctx := t.Context()
	for name, edit := range map[string]func(*billing.Invoice){
		"Total":    func(inv *billing.Invoice) { inv.Total++ },
		"Currency": func(inv *billing.Invoice) { inv.Currency = "XYZ" },
		"Lines[0].Amount": func(inv *billing.Invoice) {
			inv.Lines[0].Amount, inv.Subtotal, inv.Total, inv.AmountDue = 999, 999, 980, 980
		},
		"Status": func(inv *billing.Invoice) { inv.Status = billing.InvoiceOpen },
	} {
		inv := NewTestInvoice("u1", "bad-"+name, 1)
		edit(inv)
		_, err := s.CreateDraft(ctx, inv)
		require.ErrorIs(t, err, billing.ErrInvalidInvoice, name)
		var fe *billing.FieldError
		require.ErrorAs(t, err, &fe, name)
		assert.Equal(t, name, fe.Field)
	}
	page, _, err := s.ByUser(ctx, "u1", "", 10)
	require.NoError(t, err)
	assert.Empty(t, page, "nothing written")
}

func invoiceFinalizeGapless(t *testing.T, s billing.Invoices) {
	ctx := t.Context()
	var ids []string
	for i := range 6 {
		inv := NewTestInvoice("u1", fmt.Sprintf("p%d", i), i)
		inv.Prefix = "ACME"
		ids = append(ids, draft(t, s, inv).ID)
	}
	// A draft discarded (voided) before it is finalized leaves no gap.
	_, err := s.Void(ctx, ids[2], invoiceT0)
	require.NoError(t, err)
	want := int64(0)
	for i, id := range ids {
		if i == 2 {
			continue
		}
		want++
		got := finalize(t, s, id)
		assert.Equal(t, want, got.Seq)
		assert.Equal(t, fmt.Sprintf("ACME-%04d", want), got.Number)
		assert.Equal(t, billing.InvoiceOpen, got.Status)
		assert.True(t, got.IssuedAt.Equal(invoiceT0.Add(time.Hour)))
		read, err := s.Invoice(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, got.Number, read.Number)
	}
	RequireGaplessInvoices(t, s, []string{"u1"}, "", 5)
}

func invoiceFinalizeRepeat(t *testing.T, s billing.Invoices) {
	ctx := t.Context()
	a := draft(t, s, NewTestInvoice("u1", "p1", 1))
	first := finalize(t, s, a.ID)
	again, err := s.Finalize(ctx, a.ID, invoiceT0.Add(2*time.Hour))
	require.NoError(t, err)
	assert.Equal(t, first.Number, again.Number, "a repeat keeps the number")
	assert.Equal(t, first.Version, again.Version, "a repeat writes nothing")
	assert.True(t, again.IssuedAt.Equal(first.IssuedAt))
	b := draft(t, s, NewTestInvoice("u1", "p2", 2))
	assert.Equal(t, int64(2), finalize(t, s, b.ID).Seq, "a repeat takes no number")
}

func invoiceFinalizeRefused(t *testing.T, s billing.Invoices) {
	ctx := t.Context()
	a := draft(t, s, NewTestInvoice("u1", "p1", 1))
	_, err := s.Void(ctx, a.ID, invoiceT0)
	require.NoError(t, err)
	_, err = s.Finalize(ctx, a.ID, invoiceT0)
	require.ErrorIs(t, err, billing.ErrIllegalTransition)
	got, err := s.Invoice(ctx, a.ID)
	require.NoError(t, err)
	assert.Equal(t, billing.InvoiceVoid, got.Status)
	assert.Empty(t, got.Number)

	_, err = s.Finalize(ctx, a.ID+"x", invoiceT0)
	require.ErrorIs(t, err, billing.ErrNotFound)
	_, err = s.Finalize(ctx, "nonsense", invoiceT0)
	require.ErrorIs(t, err, billing.ErrNotFound)
}

func invoiceTransitions(t *testing.T, s billing.Invoices) {
	ctx := t.Context()
	at := invoiceT0.Add(24 * time.Hour)
	open := func(key string, n int) billing.Invoice {
		return finalize(t, s, draft(t, s, NewTestInvoice("u1", key, n)).ID)
	}
	// draft -> paid is refused: a draft is finalized first.
	d := draft(t, s, NewTestInvoice("u1", "d", 0))
	_, err := s.MarkPaid(ctx, d.ID, "tx0", at)
	require.ErrorIs(t, err, billing.ErrIllegalTransition)
	_, err = s.MarkUncollectible(ctx, d.ID, at)
	require.ErrorIs(t, err, billing.ErrIllegalTransition)

	// open -> paid; a repeat with the same transaction is no change, another
	// transaction is refused, and a paid invoice is never voided.
	a := open("a", 1)
	paid, err := s.MarkPaid(ctx, a.ID, "tx1", at)
	require.NoError(t, err)
	assert.Equal(t, billing.InvoicePaid, paid.Status)
	assert.Equal(t, "tx1", paid.TransactionID)
	assert.Equal(t, paid.Total, paid.AmountPaid)
	assert.Zero(t, paid.AmountDue)
	assert.True(t, paid.PaidAt.Equal(at))
	again, err := s.MarkPaid(ctx, a.ID, "tx1", at.Add(time.Hour))
	require.NoError(t, err)
	assert.Equal(t, paid.Version, again.Version)
	_, err = s.MarkPaid(ctx, a.ID, "tx2", at)
	require.ErrorIs(t, err, billing.ErrTransactionMismatch)
	for name, op := range map[string]func() (billing.Invoice, error){
		"void":          func() (billing.Invoice, error) { return s.Void(ctx, a.ID, at) },
		"uncollectible": func() (billing.Invoice, error) { return s.MarkUncollectible(ctx, a.ID, at) },
		"finalize":      func() (billing.Invoice, error) { return s.Finalize(ctx, a.ID, at) },
	} {
		got, err := op()
		if name == "finalize" { // a finalized invoice: a repeat
			require.NoError(t, err)
			assert.Equal(t, billing.InvoicePaid, got.Status)
			continue
		}
		require.ErrorIs(t, err, billing.ErrIllegalTransition, name)
	}

	// open -> uncollectible -> paid (a late payment).
	b := open("b", 2)
	unc, err := s.MarkUncollectible(ctx, b.ID, at)
	require.NoError(t, err)
	assert.Equal(t, billing.InvoiceUncollectible, unc.Status)
	assert.True(t, unc.UncollectibleAt.Equal(at))
	late, err := s.MarkPaid(ctx, b.ID, "tx3", at.Add(time.Hour))
	require.NoError(t, err)
	assert.Equal(t, billing.InvoicePaid, late.Status)

	// open -> void, then nothing.
	c := open("c", 3)
	void, err := s.Void(ctx, c.ID, at)
	require.NoError(t, err)
	assert.Equal(t, billing.InvoiceVoid, void.Status)
	assert.True(t, void.VoidedAt.Equal(at))
	assert.Equal(t, c.Number, void.Number, "a void invoice keeps its number")
	_, err = s.Void(ctx, c.ID, at)
	require.NoError(t, err, "a repeated void")
	_, err = s.MarkPaid(ctx, c.ID, "tx4", at)
	require.ErrorIs(t, err, billing.ErrIllegalTransition)
	_, err = s.MarkPaid(ctx, "in_nothing.x", "tx4", at)
	require.ErrorIs(t, err, billing.ErrNotFound)
}

func invoiceCreditNotes(t *testing.T, s billing.Invoices) {
	ctx := t.Context()
	inv := NewTestInvoice("u1", "p1", 1)
	inv.Prefix = "ACME"
	a := finalize(t, s, draft(t, s, inv).ID)
	_, err := s.MarkPaid(ctx, a.ID, "tx1", invoiceT0)
	require.NoError(t, err)
	refund := func(key string, amount int64) *billing.CreditNote {
		return &billing.CreditNote{Key: key, InvoiceID: a.ID, Total: amount, Reason: "requested_by_customer",
			Lines: []billing.InvoiceLine{{Description: "Refund", Amount: amount, Kind: billing.LineCredit}}}
	}
	n1, err := s.IssueCreditNote(ctx, refund("r1", 300))
	require.NoError(t, err)
	assert.Equal(t, "ACME-CN-0001", n1.Number)
	assert.Equal(t, "u1", n1.UserID)
	assert.Equal(t, "USD", n1.Currency)
	n2, err := s.IssueCreditNote(ctx, refund("r2", 200))
	require.NoError(t, err)
	assert.Equal(t, int64(2), n2.Seq)

	rep, err := s.IssueCreditNote(ctx, refund("r1", 300))
	require.NoError(t, err, "a repeated refund")
	assert.Equal(t, n1.ID, rep.ID)
	assert.Equal(t, n1.Number, rep.Number)
	_, err = s.IssueCreditNote(ctx, refund("r1", 301))
	require.ErrorIs(t, err, billing.ErrRequestKeyReused)
	_, err = s.IssueCreditNote(ctx, refund("r3", 480)) // 979 - 500 = 479 left
	require.ErrorIs(t, err, billing.ErrInvalidInvoice)

	got, err := s.Invoice(ctx, a.ID)
	require.NoError(t, err)
	assert.Equal(t, int64(500), got.AmountCredited)
	assert.Equal(t, billing.InvoicePaid, got.Status)
	notes, err := s.CreditNotes(ctx, a.ID)
	require.NoError(t, err)
	require.Len(t, notes, 2)
	assert.Equal(t, []string{"ACME-CN-0001", "ACME-CN-0002"}, []string{notes[0].Number, notes[1].Number})

	// The invoices' own numbers go on from where they were.
	inv2 := NewTestInvoice("u1", "p2", 2)
	inv2.Prefix = "ACME"
	assert.Equal(t, "ACME-0002", finalize(t, s, draft(t, s, inv2).ID).Number)

	// A draft is not credited.
	d := draft(t, s, NewTestInvoice("u1", "p3", 3))
	_, err = s.IssueCreditNote(ctx, &billing.CreditNote{Key: "r9", InvoiceID: d.ID, Total: 1,
		Lines: []billing.InvoiceLine{{Amount: 1, Kind: billing.LineCredit}}})
	require.ErrorIs(t, err, billing.ErrIllegalTransition)
}

func invoiceHistory(t *testing.T, s billing.Invoices) {
	ctx := t.Context()
	a := draft(t, s, NewTestInvoice("u1", "p1", 1))
	finalize(t, s, a.ID)
	_, err := s.MarkUncollectible(ctx, a.ID, invoiceT0.Add(2*time.Hour))
	require.NoError(t, err)
	_, err = s.MarkPaid(ctx, a.ID, "tx1", invoiceT0.Add(3*time.Hour))
	require.NoError(t, err)
	_, err = s.IssueCreditNote(ctx, &billing.CreditNote{Key: "r1", InvoiceID: a.ID, Total: 979,
		Lines: []billing.InvoiceLine{{Amount: 979, Kind: billing.LineCredit}}})
	require.NoError(t, err)
	b := draft(t, s, NewTestInvoice("u1", "p2", 2))
	_, err = s.Void(ctx, b.ID, invoiceT0)
	require.NoError(t, err)

	for id, want := range map[string][]string{
		a.ID: {"invoice_created", "invoice_finalized", "invoice_uncollectible", "invoice_paid", "credit_note_issued"},
		b.ID: {"invoice_created", "invoice_voided"},
	} {
		rows, err := s.History(ctx, id)
		require.NoError(t, err)
		var events []string
		for i, r := range rows {
			events = append(events, r.Event)
			assert.Equal(t, int64(i+1), r.Version, "one row per version, in order")
			assert.Equal(t, id, r.ID)
		}
		assert.Equal(t, want, events)
		cur, err := s.Invoice(ctx, id)
		require.NoError(t, err)
		last := rows[len(rows)-1]
		assert.Equal(t, cur.Status, last.Status, "the last row is the invoice as it is")
		assert.Equal(t, cur.Version, last.Version)
	}
	rows, err := s.History(ctx, a.ID)
	require.NoError(t, err)
	assert.Equal(t, "u1-0001", rows[1].Number)
	assert.Equal(t, "tx1", rows[3].TransactionID)
	assert.Equal(t, int64(979), rows[4].AmountCredited)
}

func invoiceAccountSequences(t *testing.T, s billing.Invoices) {
	for i := range 3 {
		for _, u := range []string{"acme", "globex"} {
			inv := NewTestInvoice(u, fmt.Sprintf("p%d", i), i)
			inv.Prefix = map[string]string{"acme": "ACME", "globex": "GLBX"}[u]
			got := finalize(t, s, draft(t, s, inv).ID)
			assert.Equal(t, fmt.Sprintf("%s-%04d", inv.Prefix, i+1), got.Number)
		}
	}
	RequireGaplessInvoices(t, s, []string{"acme"}, "", 3)
	RequireGaplessInvoices(t, s, []string{"globex"}, "", 3)
}

func invoiceHostSequence(t *testing.T, s billing.Invoices) {
	ctx := t.Context()
	users := []string{"acme", "globex", "initech"}
	for i := range 7 {
		inv := NewTestInvoice(users[i%3], fmt.Sprintf("p%d", i), i)
		inv.Sequence = "INV"
		got := finalize(t, s, draft(t, s, inv).ID)
		assert.Equal(t, fmt.Sprintf("INV-%04d", i+1), got.Number, "one sequence across accounts, prefixed by its name")
	}
	// An account's own sequence beside it starts at 1.
	own := finalize(t, s, draft(t, s, NewTestInvoice("acme", "own", 9)).ID)
	assert.Equal(t, "acme-0001", own.Number)
	RequireGaplessInvoices(t, s, users, "INV", 7)

	got, err := s.ByNumber(ctx, "", "INV", "INV-0005")
	require.NoError(t, err)
	assert.Equal(t, "globex", got.UserID)
	_, err = s.ByNumber(ctx, "globex", "", "INV-0005")
	require.ErrorIs(t, err, billing.ErrNotFound, "not in the account's own sequence")
}

func invoiceReads(t *testing.T, s billing.Invoices) {
	ctx := t.Context()
	var made []billing.Invoice
	for i := range 5 {
		made = append(made, draft(t, s, NewTestInvoice("u1", fmt.Sprintf("p%d", i), i)))
	}
	draft(t, s, NewTestInvoice("u2", "p0", 0))
	var seen []string
	after := ""
	for range 5 {
		page, next, err := s.ByUser(ctx, "u1", after, 2)
		require.NoError(t, err)
		for _, inv := range page {
			seen = append(seen, inv.Key)
		}
		if next == "" {
			break
		}
		after = next
	}
	assert.Equal(t, []string{"p4", "p3", "p2", "p1", "p0"}, seen, "newest first, every page")

	fin := finalize(t, s, made[3].ID)
	got, err := s.ByNumber(ctx, "u1", "", fin.Number)
	require.NoError(t, err)
	assert.Equal(t, made[3].ID, got.ID)
	_, err = s.ByNumber(ctx, "u1", "", "u1-0002")
	require.ErrorIs(t, err, billing.ErrNotFound)
	_, err = s.ByNumber(ctx, "u2", "", fin.Number)
	require.ErrorIs(t, err, billing.ErrNotFound)
	_, err = s.Invoice(ctx, made[0].ID+"0")
	require.ErrorIs(t, err, billing.ErrNotFound)
	got, err = s.Invoice(ctx, made[0].ID)
	require.NoError(t, err)
	assert.Equal(t, made[0].Lines, got.Lines)
	assert.True(t, made[0].DueAt.Equal(got.DueAt))
}

// RequireGaplessInvoices asserts that the finalized invoices of users in
// sequence ("" for each user's own) are numbered exactly 1..n, none twice,
// and that no user has two invoices of one key.
func RequireGaplessInvoices(t testing.TB, s billing.Invoices, users []string, sequence string, n int) {
	t.Helper()
	ctx := context.Background()
	seqs := map[int64]string{}
	for _, u := range users {
		keys := map[string]bool{}
		var all []billing.Invoice
		for after := ""; ; {
			page, next, err := s.ByUser(ctx, u, after, 100)
			require.NoError(t, err)
			all = append(all, page...)
			if next == "" {
				break
			}
			after = next
		}
		for _, inv := range all {
			require.False(t, keys[inv.Key], "user %s has two invoices of key %s", u, inv.Key)
			keys[inv.Key] = true
			if inv.Number == "" || inv.Sequence != sequence {
				continue
			}
			if other, dup := seqs[inv.Seq]; dup {
				require.Failf(t, "duplicate number", "%s numbered %d, as is %s", inv.ID, inv.Seq, other)
			}
			seqs[inv.Seq] = inv.ID
		}
	}
	for i := int64(1); i <= int64(n); i++ {
		if _, ok := seqs[i]; !ok {
			require.Failf(t, "gap", "no invoice numbered %d of 1..%d (%d numbered)", i, n, len(seqs))
		}
	}
	require.Len(t, seqs, n, "numbers beyond 1..%d", n)
}

var _ = errors.Is

// invoiceTimeOutOfRange: a time the items cannot hold (past the year 9999)
// is refused with ErrInvalidDate and nothing is written: on a draft's due
// date, and as the time of a finalization or payment.
func invoiceTimeOutOfRange(t *testing.T, s billing.Invoices) {
	ctx := t.Context()
	far := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	bad := NewTestInvoice("u-far", "due-far", 1)
	bad.DueAt = far
	_, err := s.CreateDraft(ctx, bad)
	require.ErrorIs(t, err, billing.ErrInvalidDate)
	page, _, err := s.ByUser(ctx, "u-far", "", 10)
	require.NoError(t, err)
	require.Empty(t, page, "a refused draft writes nothing")

	d, err := s.CreateDraft(ctx, NewTestInvoice("u-far", "ok", 2))
	require.NoError(t, err)
	_, err = s.Finalize(ctx, d.ID, far)
	require.ErrorIs(t, err, billing.ErrInvalidDate)
	open, err := s.Finalize(ctx, d.ID, time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC))
	require.NoError(t, err)
	require.Equal(t, int64(1), open.Seq, "the refused finalization took no number")
	_, err = s.MarkPaid(ctx, d.ID, "tx-1", far)
	require.ErrorIs(t, err, billing.ErrInvalidDate)
	got, err := s.Invoice(ctx, d.ID)
	require.NoError(t, err)
	require.Equal(t, billing.InvoiceOpen, got.Status)
}
