package billing

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Invoice is the numbered document a customer receives for a charge: what
// was billed (its lines), the totals, and where it stands (its status).
// It is decided as a draft before the processor is called, numbered when it
// is finalized, and paid when the charge succeeds. Amounts are integer
// minor units of Currency: 499 is 4.99 USD, 500 is ¥500 (JPY has no minor
// unit, so nothing is scaled by 100).
//
// An account's invoices are stored by an [Invoices] store; a draft is
// created once per issuance key ([Invoice.Key]) however often it is asked
// for.
type Invoice struct {
	// ID names the invoice; the store gives it at [Invoices.CreateDraft].
	ID string
	// UserID is the account billed.
	UserID string
	// Key is what is billed: the period's ID, or a change's request key. An
	// account has at most one invoice per key.
	Key string

	// Sequence names a sequence shared by every invoice that names it: give
	// one name for the whole host (one partition: about 1,000 numbers a
	// second). Defaults to "": the account's own sequence.
	Sequence string
	// Prefix starts the number: "ACME" numbers ACME-0001, ACME-0002, ...
	// Defaults to the Sequence, or the UserID for the account's own.
	Prefix string
	// Number and Seq are the invoice's number and its place in the sequence
	// (1, 2, ...), given at [Invoices.Finalize]; a draft has none.
	Number string
	Seq    int64

	// Currency is the ISO 4217 code of every amount, e.g. "USD", "JPY".
	Currency string
	// Lines are what is billed, in order.
	Lines []InvoiceLine
	// Subtotal is the sum of the plan and proration lines less the unused
	// time lines, Discounts of the discount lines and Tax of the tax lines. Total is
	// Subtotal - Discounts + Tax, never negative; with TaxInclusive it is
	// Subtotal - Discounts, of which Tax is the tax.
	Subtotal, Discounts, Tax, Total int64
	// TaxInclusive says the prices include the tax ([Tax.Inclusive]): the
	// tax lines say how much of the total is tax and add nothing to it.
	TaxInclusive bool
	// AmountPaid is what has been paid of Total (the balance applied, then
	// the charge); AmountDue is Total - AmountPaid. AmountCredited is the
	// sum of the credit notes issued against it.
	AmountPaid, AmountDue, AmountCredited int64

	// Status is where the invoice stands; see [InvoiceStatus].
	Status InvoiceStatus
	// Created is when the draft was made (defaults to the store's now);
	// IssuedAt when it was finalized; DueAt when it is due; PaidAt, VoidedAt
	// and UncollectibleAt when it was paid, voided or given up.
	Created, IssuedAt, DueAt, PaidAt, VoidedAt, UncollectibleAt time.Time

	// PeriodIDs are the billing periods it bills; TransactionID is the
	// processor's transaction that paid it.
	PeriodIDs     []string
	TransactionID string

	// Version counts the invoice's writes: the draft is 1, each change
	// adds one, and each writes the history row of that version.
	Version int64
	// Event names the change that wrote this version on a history row:
	// "invoice_created", "invoice_finalized", "invoice_paid",
	// "invoice_voided", "invoice_uncollectible", "credit_note_issued".
	Event string
}

// InvoiceLine is one line of an [Invoice] or a [CreditNote]. Amount is
// never negative: its Kind says whether it adds (plan, proration, tax) or
// takes off (discount, credit).
type InvoiceLine struct {
	Description            string
	PeriodStart, PeriodEnd time.Time
	// Quantity times UnitAmount is Amount on a plan line; other lines
	// carry the Amount computed (and rounded) on its own.
	Quantity   int64
	UnitAmount int64
	Amount     int64
	Kind       LineKind
}

// LineKind says what an [InvoiceLine] is.
type LineKind string

// The kinds of line.
const (
	LinePlan      LineKind = "plan"
	LineProration LineKind = "proration"
	// LineUnusedTime is the credit for a plan's unused time (a plan
	// change's proration): it comes off the subtotal.
	LineUnusedTime LineKind = "unused_time"
	LineDiscount   LineKind = "discount"
	// LineCredit is the customer's balance applied: it counts in AmountPaid.
	LineCredit LineKind = "credit"
	LineTax    LineKind = "tax"
)

// InvoiceStatus is where an [Invoice] stands:
//
//	draft  → open (finalized: numbered), void
//	open   → paid, void, uncollectible
//	uncollectible → paid (a late payment), void
//	paid   → nothing (a refund is a [CreditNote])
//	void   → nothing
type InvoiceStatus string

// The statuses of an invoice.
const (
	InvoiceDraft         InvoiceStatus = "draft"
	InvoiceOpen          InvoiceStatus = "open"
	InvoicePaid          InvoiceStatus = "paid"
	InvoiceVoid          InvoiceStatus = "void"
	InvoiceUncollectible InvoiceStatus = "uncollectible"
)

var invoiceTransitions = map[InvoiceStatus][]InvoiceStatus{
	InvoiceDraft:         {InvoiceOpen, InvoiceVoid},
	InvoiceOpen:          {InvoicePaid, InvoiceVoid, InvoiceUncollectible},
	InvoiceUncollectible: {InvoicePaid, InvoiceVoid},
}

// CheckTransition returns nil when an invoice in status s may move to
// next, and otherwise an error wrapping [ErrIllegalTransition] naming both.
func (s InvoiceStatus) CheckTransition(next InvoiceStatus) error {
	for _, to := range invoiceTransitions[s] {
		if to == next {
			return nil
		}
	}
	return fmt.Errorf("%w: invoice %s -> %s", ErrIllegalTransition, s, next)
}

// CreditNote is the document of a refund, against a finalized [Invoice]:
// numbered in a series of its own beside the invoice's sequence
// (ACME-CN-0001), for at most what the invoice has not been credited yet.
type CreditNote struct {
	// ID names the note; the store gives it.
	ID string
	// Key is the refund's key: an invoice has one note per key.
	Key string
	// InvoiceID is the invoice it credits; UserID, Currency, Sequence and
	// Prefix are the invoice's, set by the store.
	InvoiceID        string
	UserID           string
	Currency         string
	Sequence, Prefix string
	Number           string
	Seq              int64
	Lines            []InvoiceLine
	Total            int64
	Reason           string
	// IssuedAt is when the note was issued: the time given, or the store's
	// now when none is.
	IssuedAt time.Time
}

// Validate checks that the invoice adds up: a known currency, lines of a
// known kind with amounts never negative (a plan line's is quantity times
// unit amount), the totals the sums of their lines, Total = Subtotal -
// Discounts + Tax (with TaxInclusive, Total = Subtotal - Discounts and Tax
// at most Total) and AmountDue = Total - AmountPaid, none negative. The
// error is a [*FieldError] naming the field and the invoice's key,
// wrapping [ErrInvalidInvoice].
func (inv *Invoice) Validate() error {
	bad := func(field string, v any, format string, args ...any) error {
		return &FieldError{Field: field, Value: fmt.Sprint(v), Key: inv.Key,
			Err: fmt.Errorf("%w: %s", ErrInvalidInvoice, fmt.Sprintf(format, args...))}
	}
	if inv.UserID == "" {
		return bad("UserID", "", "missing")
	}
	if inv.Key == "" {
		return bad("Key", "", "missing")
	}
	if _, ok := currencyDigits(inv.Currency); !ok {
		return bad("Currency", inv.Currency, "not an ISO 4217 code")
	}
	sums := map[LineKind]int64{}
	for i, l := range inv.Lines {
		f := func(name string) string { return fmt.Sprintf("Lines[%d].%s", i, name) }
		switch l.Kind {
		case LinePlan, LineProration, LineUnusedTime, LineDiscount, LineCredit, LineTax:
		default:
			return bad(f("Kind"), l.Kind, "unknown kind")
		}
		if l.Amount < 0 || l.Quantity < 0 || l.UnitAmount < 0 {
			return bad(f("Amount"), l.Amount, "negative")
		}
		if l.Kind == LinePlan {
			hi, lo := bits.Mul64(uint64(l.Quantity), uint64(l.UnitAmount))
			if hi != 0 || lo != uint64(l.Amount) {
				return bad(f("Amount"), l.Amount, "is not quantity %d × unit amount %d", l.Quantity, l.UnitAmount)
			}
		}
		s, ok := add(sums[l.Kind], l.Amount)
		if !ok {
			return bad(f("Amount"), l.Amount, "sum overflows")
		}
		sums[l.Kind] = s
	}
	sub, ok := add(sums[LinePlan], sums[LineProration])
	switch {
	case !ok:
		return bad("Subtotal", inv.Subtotal, "sum overflows")
	case sums[LineUnusedTime] > sub:
		return bad("Subtotal", inv.Subtotal, "the unused time lines (%d) are more than the plan and proration lines (%d)", sums[LineUnusedTime], sub)
	case inv.Subtotal != sub-sums[LineUnusedTime]:
		return bad("Subtotal", inv.Subtotal, "the plan and proration lines less the unused time lines sum to %d", sub-sums[LineUnusedTime])
	case inv.Discounts != sums[LineDiscount]:
		return bad("Discounts", inv.Discounts, "the discount lines sum to %d", sums[LineDiscount])
	case inv.Discounts > inv.Subtotal:
		return bad("Discounts", inv.Discounts, "more than the subtotal %d", inv.Subtotal)
	case inv.Tax != sums[LineTax]:
		return bad("Tax", inv.Tax, "the tax lines sum to %d", sums[LineTax])
	}
	total, ok := add(inv.Subtotal-inv.Discounts, inv.Tax)
	if inv.TaxInclusive {
		total, ok = inv.Subtotal-inv.Discounts, true
	}
	switch {
	case !ok || inv.Total != total && !inv.TaxInclusive:
		return bad("Total", inv.Total, "is not subtotal - discounts + tax = %d", total)
	case inv.Total != total:
		return bad("Total", inv.Total, "is not subtotal - discounts = %d (the tax is included)", total)
	case inv.TaxInclusive && inv.Tax > inv.Total:
		return bad("Tax", inv.Tax, "more than the total %d that includes it", inv.Total)
	case inv.AmountPaid < 0 || inv.AmountPaid > inv.Total:
		return bad("AmountPaid", inv.AmountPaid, "outside 0..total %d", inv.Total)
	case inv.AmountPaid < sums[LineCredit]:
		return bad("AmountPaid", inv.AmountPaid, "less than the credit lines' %d", sums[LineCredit])
	case inv.AmountDue != inv.Total-inv.AmountPaid:
		return bad("AmountDue", inv.AmountDue, "is not total - paid = %d", inv.Total-inv.AmountPaid)
	case inv.AmountCredited < 0 || inv.AmountCredited > inv.Total:
		return bad("AmountCredited", inv.AmountCredited, "outside 0..total %d", inv.Total)
	}
	return nil
}

func add(a, b int64) (int64, bool) {
	s := a + b
	return s, (s > a) == (b > 0)
}

// FormatAmount writes v, in minor units of the invoice's currency, as a
// decimal with the currency's digits: "4.99", "500" (JPY), "1.250" (KWD).
// Rendering with symbols and grouping is left to the host.
func (inv *Invoice) FormatAmount(v int64) string {
	return formatMinor(v, inv.MinorDigits())
}

// MinorDigits is the number of minor-unit digits of the invoice's
// currency in ISO 4217: 2 for USD, 0 for JPY, 3 for KWD (and 2 for a code
// the table does not know, which Validate refuses).
func (inv *Invoice) MinorDigits() int {
	d, _ := currencyDigits(inv.Currency)
	return d
}

func formatMinor(v int64, digits int) string {
	neg := v < 0
	u := uint64(v)
	if neg {
		u = -u
	}
	s := strconv.FormatUint(u, 10)
	if digits > 0 {
		if len(s) <= digits {
			s = strings.Repeat("0", digits-len(s)+1) + s
		}
		s = s[:len(s)-digits] + "." + s[len(s)-digits:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// currencyDigits returns the number of minor-unit digits of an ISO 4217
// currency code (2 for USD, 0 for JPY, 3 for KWD) and whether the code is
// known.
func currencyDigits(code string) (int, bool) {
	if len(code) != 3 || strings.ContainsFunc(code, func(r rune) bool { return r < 'A' || r > 'Z' }) {
		return 0, false
	}
	if d, ok := currencyExceptions[code]; ok {
		return d, true
	}
	return 2, strings.Contains(twoDigitCurrencies, code)
}

// currencyExceptions are the active ISO 4217 codes whose minor unit is
// not 2 digits.
var currencyExceptions = map[string]int{
	"BIF": 0, "CLP": 0, "DJF": 0, "GNF": 0, "ISK": 0, "JPY": 0, "KMF": 0, "KRW": 0, "PYG": 0,
	"RWF": 0, "UGX": 0, "UYI": 0, "VND": 0, "VUV": 0, "XAF": 0, "XOF": 0, "XPF": 0,
	"BHD": 3, "IQD": 3, "JOD": 3, "KWD": 3, "LYD": 3, "OMR": 3, "TND": 3,
	"CLF": 4, "UYW": 4,
}

// twoDigitCurrencies are the other active ISO 4217 codes (minor unit 2).
const twoDigitCurrencies = "AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BMD BND BOB BOV BRL BSD " +
	"BTN BWP BYN BZD CAD CDF CHE CHF CHW CNY COP COU CRC CUP CVE CZK DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP " +
	"GEL GHS GIP GMD GTQ GYD HKD HNL HTG HUF IDR ILS INR IRR JMD KES KGS KHR KPW KYD KZT LAK LBP LKR LRD LSL " +
	"MAD MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK MXN MXV MYR MZN NAD NGN NIO NOK NPR NZD PAB PEN PGK PHP PKR " +
	"PLN QAR RON RSD RUB SAR SBD SCR SDG SEK SGD SHP SLE SOS SRD SSP STN SVC SYP SZL THB TJS TMT TOP TRY TTD " +
	"TWD TZS UAH USD USN UYU UZS VES VED WST XCD XCG YER ZAR ZMW ZWG"

// Invoicing sets what the invoices the collector issues carry
// ([Config.Invoices]).
type Invoicing struct {
	// Currency is the ISO 4217 code of the invoices' amounts: a period's
	// amount in cents ([Amount]) is written in the currency's own minor
	// units (¥500 is 500, not 50000). Defaults to "USD".
	Currency string
	// Sequence numbers every invoice in one sequence of that name, for the
	// whole host (one counter item: about 1,000 invoices a second).
	// Defaults to "": each account numbers its own invoices.
	Sequence string
	// Prefix starts each number ("ACME" gives ACME-0001). Defaults to the
	// store's: the Sequence, or the account's ID.
	Prefix string
}

// maxInvoiceKeys bounds the invoices one period is issued: a period whose
// charge is decided again (its amount or dates changed since its invoice
// was numbered) voids that invoice and takes the next key.
const maxInvoiceKeys = 16

// invoice decides the invoice the next attempt on cur pays, before the
// attempt is recorded: the period's draft, created once per key (a rerun
// after a crash gets the same one back) and numbered. An invoice of the
// period that bills something else (the amount or dates changed since it
// was made) is voided, unless paid, and the period takes its next key
// ("<period ID>/2", ...). Without [Config.Invoices] it returns the zero
// Invoice.
func (c *Collector) invoice(ctx context.Context, cur *Period) (Invoice, error) {
	return c.invoiceKeeping(ctx, cur, nil)
}

// invoiceKeeping is [Collector.invoice], returning a paid or void
// invoice of the period that keep accepts rather than taking the next key.
func (c *Collector) invoiceKeeping(ctx context.Context, cur *Period, keep func(*Invoice) bool) (Invoice, error) {
	if c.cfg.Invoices == nil {
		return Invoice{}, nil
	}
	now := c.cfg.Clock.Now().UTC()
	draft, err := c.invoiceDraft(cur, now)
	if err != nil {
		return Invoice{}, err
	}
	for n := 1; n <= maxInvoiceKeys; n++ {
		d := draft
		d.Lines = slices.Clone(draft.Lines)
		if n > 1 {
			d.Key = cur.SubscriptionID + "/" + strconv.Itoa(n)
		}
		inv, err := c.cfg.Invoices.CreateDraft(ctx, &d)
		if reused := (*RequestKeyError)(nil); errors.As(err, &reused) {
			// This key's invoice bills what the period no longer is.
			if err := c.closeInvoices(ctx, cur, func(inv *Invoice) bool { return inv.Key == d.Key }, InvoiceVoid); err != nil {
				return Invoice{}, err
			}
			continue
		}
		if err != nil {
			return Invoice{}, fmt.Errorf("invoice %s of %s: %w", d.Key, cur.SubscriptionID, err)
		}
		switch inv.Status {
		case InvoiceVoid, InvoicePaid:
			if keep != nil && keep(&inv) {
				return inv, nil
			}
			continue // closed: a returned payment, a change decided again
		case InvoiceDraft:
			id := inv.ID
			if inv, err = c.cfg.Invoices.Finalize(ctx, id, now); err != nil {
				return Invoice{}, fmt.Errorf("finalize invoice %s of %s: %w", id, cur.SubscriptionID, err)
			}
			c.emitInvoice(ctx, EventInvoiceFinalized, cur, &inv, now)
		}
		return inv, nil
	}
	return Invoice{}, fmt.Errorf("invoice of %s: %d keys taken by invoices closed or billing something else", cur.SubscriptionID, maxInvoiceKeys)
}

// invoiceDraft is the draft of cur's invoice: one plan line for the
// period, at its amount in the configured currency's minor units.
func (c *Collector) invoiceDraft(cur *Period, now time.Time) (Invoice, error) {
	iv := c.cfg.Invoicing
	amount, err := minorUnits(cur.Amount, iv.Currency)
	if err != nil {
		return Invoice{}, fmt.Errorf("invoice of %s: %w", cur.SubscriptionID, err)
	}
	end, err := followingDate(cur)
	if err != nil {
		return Invoice{}, fmt.Errorf("invoice of %s: %w", cur.SubscriptionID, err)
	}
	desc := cur.Tier()
	if desc == "" {
		desc = "Subscription"
	}
	if cur.BillingPeriod != "" {
		desc += " " + cur.BillingPeriod
	}
	inv := Invoice{
		UserID: cur.UserID, Key: cur.SubscriptionID, Sequence: iv.Sequence, Prefix: iv.Prefix,
		Currency: iv.Currency, Status: InvoiceDraft, Created: now, DueAt: cur.BillingDate.UTC(),
		Lines: []InvoiceLine{{Description: desc, PeriodStart: cur.BillingDate.UTC(), PeriodEnd: end.UTC(),
			Quantity: 1, UnitAmount: amount, Amount: amount, Kind: LinePlan}},
		Subtotal:  amount,
		PeriodIDs: []string{cur.SubscriptionID},
	}
	if cur.IsOneOff() {
		// A plan change's difference charged at once: its lines alone,
		// over the time they prorate.
		inv.Lines, inv.Subtotal = nil, 0
	}
	if err := c.adjustmentLines(&inv, cur); err != nil {
		return Invoice{}, fmt.Errorf("invoice of %s: %w", cur.SubscriptionID, err)
	}
	inv.Total = inv.Subtotal - inv.Discounts
	if !inv.TaxInclusive {
		inv.Total += inv.Tax
	}
	inv.AmountDue = inv.Total - inv.AmountPaid
	return inv, nil
}

// adjustmentLines adds to inv the lines of cur's discounts, adjustments,
// tax and the balance it applies, as [Period.Due] counts them: the
// discounts off the plan line, each a percent of what the ones before
// left; a plan change's charges (proration); its credits for unused time,
// each at most what is left of the total (a credit larger than the charge
// goes to the customer's balance: never below zero); the tax fixed for the
// charge ([Period.Tax]: added to the total, or included in it); then the
// balance applied, which pays part of the total (AmountPaid).
func (c *Collector) adjustmentLines(inv *Invoice, cur *Period) error {
	line := func(desc string, a Amount, kind LineKind) (InvoiceLine, error) {
		v, err := minorUnits(a, inv.Currency)
		return InvoiceLine{Description: desc, Quantity: 1, UnitAmount: v, Amount: v, Kind: kind}, err
	}
	_, offs := discounted(cur.Amount, cur.Discounts)
	for i := range cur.Discounts {
		if offs[i] == 0 {
			continue
		}
		l, err := line(cur.Discounts[i].label(), offs[i], LineDiscount)
		if err != nil {
			return err
		}
		inv.Lines = append(inv.Lines, l)
		inv.Discounts += l.Amount
	}
	for _, credits := range []bool{false, true} {
		for i := range cur.Adjustments {
			a := &cur.Adjustments[i]
			if a.Credit != credits {
				continue
			}
			kind := LineProration
			if a.Credit {
				kind = LineUnusedTime
			}
			l, err := line(a.Description, a.Amount, kind)
			if err != nil {
				return err
			}
			l.PeriodStart, l.PeriodEnd = a.Start, a.End
			if a.Credit {
				l.Amount = min(l.Amount, inv.Subtotal-inv.Discounts)
				l.UnitAmount = l.Amount
				inv.Subtotal -= l.Amount
			} else {
				inv.Subtotal += l.Amount
			}
			if l.Amount > 0 {
				inv.Lines = append(inv.Lines, l)
			}
		}
	}
	if t := cur.Tax; t.Fixed() {
		l, err := line(t.Description, t.Amount, LineTax)
		if err != nil {
			return err
		}
		inv.Lines = append(inv.Lines, l)
		inv.Tax, inv.TaxInclusive = l.Amount, t.Inclusive
	}
	if _, applied, _ := cur.Due(); applied > 0 {
		l, err := line("Applied balance", applied, LineCredit)
		if err != nil {
			return err
		}
		inv.Lines = append(inv.Lines, l)
		inv.AmountPaid = l.Amount
	}
	return nil
}

// minorUnits writes a (cents) in the minor units of currency.
func minorUnits(a Amount, currency string) (int64, error) {
	d, ok := currencyDigits(currency)
	if !ok {
		return 0, fmt.Errorf("%w: currency %q", ErrInvalidInvoice, currency)
	}
	v := int64(a)
	for ; d < 2; d++ {
		if v%10 != 0 {
			return 0, fmt.Errorf("%w: %s has cents, %s has none", ErrInvalidInvoice, a, currency)
		}
		v /= 10
	}
	for ; d > 2; d-- {
		if v > math.MaxInt64/10 {
			return 0, fmt.Errorf("%w: %s overflows in %s", ErrInvalidInvoice, a, currency)
		}
		v *= 10
	}
	return v, nil
}

// invoiceFollows brings the invoices of the period cur along with the
// change to next, before next is written (one record's change, under its
// user's lock): a payment marks the attempt's invoice paid; a waive or
// cancel voids the period's unpaid invoices, a period gone stale makes
// them uncollectible, and a refund credits the paid one in full. Each
// invoice change is conditional on the invoice's status and repeats as a
// no-op, so a write of next that fails and is made again changes nothing
// more; a void or uncollectible invoice of a period collected after all
// is replaced by the next attempt's (see [Collector.invoice]).
func (c *Collector) invoiceFollows(ctx context.Context, cur, next *Period) error {
	if c.cfg.Invoices == nil || cur.Status == next.Status {
		return nil
	}
	now := c.cfg.Clock.Now().UTC()
	switch next.Status {
	case StatusCompleted:
		id := next.LastAttempt.Invoice
		if id == "" || next.TransactionID == "" {
			return nil // free, or paid before invoices were issued
		}
		inv, err := c.cfg.Invoices.MarkPaid(ctx, id, next.TransactionID, now)
		switch {
		case errors.Is(err, ErrIllegalTransition) || errors.Is(err, ErrTransactionMismatch):
			// Voided meanwhile (a lease lost to an operator's waive), or
			// paid by another transaction: the payment is recorded on the
			// period whatever the invoice says.
			c.cfg.Logger.WarnContext(ctx, "billing: invoice not marked paid", "invoice_id", id, "subscription_id", next.SubscriptionID, "error", err)
			return nil
		case err != nil:
			return fmt.Errorf("mark invoice %s of %s paid: %w", id, next.SubscriptionID, err)
		}
		if inv.Version > 0 && inv.PaidAt.Equal(now) {
			c.emitInvoice(ctx, EventInvoicePaid, next, &inv, now)
		}
	case StatusWaived, StatusCancelled:
		// Read even for a period never attempted: a run that crashed
		// between numbering the invoice and recording the attempt left it
		// open.
		return c.closeInvoices(ctx, cur, unpaidInvoice, InvoiceVoid)
	case StatusStale:
		return c.closeInvoices(ctx, cur, unpaidInvoice, InvoiceUncollectible)
	case StatusRefunded:
		id := cur.LastAttempt.Invoice
		if id == "" {
			return nil
		}
		inv, err := c.cfg.Invoices.Invoice(ctx, id)
		if err != nil {
			return fmt.Errorf("invoice %s of %s: %w", id, cur.SubscriptionID, err)
		}
		left := inv.AmountPaid - inv.AmountCredited
		if left <= 0 {
			return nil
		}
		note, err := c.cfg.Invoices.IssueCreditNote(ctx, &CreditNote{
			Key: "refund/" + cur.TransactionID, InvoiceID: id, Reason: "refund",
			Lines: []InvoiceLine{{Description: "Refund of " + inv.Number, Quantity: 1, UnitAmount: left, Amount: left, Kind: LineCredit}},
			Total: left, IssuedAt: now,
		})
		if err != nil {
			return fmt.Errorf("credit note for invoice %s of %s: %w", id, cur.SubscriptionID, err)
		}
		e := eventFor(EventCreditNoteIssued, next, now)
		e.InvoiceID, e.InvoiceNumber = note.ID, note.Number
		c.emit(ctx, e)
	}
	return nil
}

func unpaidInvoice(inv *Invoice) bool {
	return inv.Status == InvoiceDraft || inv.Status == InvoiceOpen || inv.Status == InvoiceUncollectible
}

// closeInvoices voids (or makes uncollectible) the invoices of the period
// cur that match: found among its user's invoices, newest first.
func (c *Collector) closeInvoices(ctx context.Context, cur *Period, match func(*Invoice) bool, to InvoiceStatus) error {
	now := c.cfg.Clock.Now().UTC()
	after := ""
	for range maxInvoicePages {
		page, next, err := c.cfg.Invoices.ByUser(ctx, cur.UserID, after, 50)
		if err != nil {
			return fmt.Errorf("invoices of %s: %w", cur.UserID, err)
		}
		for i := range page {
			inv := &page[i]
			if !slices.Contains(inv.PeriodIDs, cur.SubscriptionID) || !match(inv) || inv.Status == to {
				continue
			}
			if to == InvoiceUncollectible && inv.Status != InvoiceOpen {
				continue // a draft is voided, never given up on
			}
			var closed Invoice
			ev := EventInvoiceVoided
			if to == InvoiceVoid {
				closed, err = c.cfg.Invoices.Void(ctx, inv.ID, now)
			} else {
				closed, err = c.cfg.Invoices.MarkUncollectible(ctx, inv.ID, now)
				ev = EventInvoiceUncollectible
			}
			if err != nil {
				return fmt.Errorf("%s invoice %s of %s: %w", to, inv.ID, cur.SubscriptionID, err)
			}
			c.emitInvoice(ctx, ev, cur, &closed, now)
		}
		if next == "" {
			return nil
		}
		after = next
	}
	return nil
}

// maxInvoicePages bounds the pages of a user's invoices read to find a
// period's: its invoices are among the newest.
const maxInvoicePages = 20

func (c *Collector) emitInvoice(ctx context.Context, t EventType, p *Period, inv *Invoice, at time.Time) {
	e := eventFor(t, p, at)
	e.InvoiceID, e.InvoiceNumber = inv.ID, inv.Number
	c.emit(ctx, e)
}

// coveredBy is the transaction an invoice paid without a charge records:
// its period's charge was covered by a plan change's credit or the
// customer's balance ([Collector.coveredInvoice]).
func coveredBy(periodID string) string { return "covered:" + periodID }

// coveredInvoice issues the invoice of cur, a period whose charge its
// credits or the customer's balance cover in full (nothing is charged),
// before the period is completed: numbered and paid by
// coveredBy(cur's ID), so that its lines (the plan, the discounts, the
// proration, the balance applied) are on a document. A rerun after a crash
// finds that invoice paid and keeps it. A trial and a free plan (nothing
// but a zero plan) get none, as before.
func (c *Collector) coveredInvoice(ctx context.Context, cur *Period) error {
	if c.cfg.Invoices == nil || cur.IsTrial() || !cur.charged() || cur.Amount == 0 && len(cur.Adjustments) == 0 {
		return nil
	}
	tx := coveredBy(cur.SubscriptionID)
	inv, err := c.invoiceKeeping(ctx, cur, func(inv *Invoice) bool { return inv.TransactionID == tx })
	if err != nil || inv.Status == InvoicePaid {
		return err
	}
	now := c.cfg.Clock.Now().UTC()
	paid, err := c.cfg.Invoices.MarkPaid(ctx, inv.ID, tx, now)
	if err != nil {
		return fmt.Errorf("mark invoice %s of %s paid (covered): %w", inv.ID, cur.SubscriptionID, err)
	}
	c.emitInvoice(ctx, EventInvoicePaid, cur, &paid, now)
	return nil
}
