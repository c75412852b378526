// Package invoicedoc holds what every invoice store shares: the shape of
// invoice and credit-note IDs, numbers, the check that a repeated draft
// asks for the same thing, and the status changes. The stores keep the
// conditions; this package decides what a change writes.
package invoicedoc

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/internal/timefmt"
)

// Events written on history rows.
const (
	EventCreated       = "invoice_created"
	EventFinalized     = "invoice_finalized"
	EventPaid          = "invoice_paid"
	EventVoided        = "invoice_voided"
	EventUncollectible = "invoice_uncollectible"
	EventCreditNote    = "credit_note_issued"
)

// Kinds of ID.
const (
	invoiceIDPrefix = "in_"
	noteIDPrefix    = "cn_"
)

// stamp is a creation time as text whose string order is time order.
func stamp(t time.Time) string { return t.UTC().Format("20060102T150405.000000000Z") }

// newID is prefix, the account in base64url, and a local part
// "<created>_<hash of key>" that sorts by creation time: the local part is
// the item's sort key suffix, the account its partition.
func newID(prefix, userID, key string, created time.Time) string {
	h := sha256.Sum256([]byte(userID + "\x00" + key))
	return prefix + base64.RawURLEncoding.EncodeToString([]byte(userID)) + "." + stamp(created) + "_" + hex.EncodeToString(h[:6])
}

// Account is whose sequence and partition hold userID's invoices on the
// single table: the account of a subscription's user ID
// (account#subscription#SKU), or userID itself when it is not one.
func Account(userID string) string {
	if ref, err := layout.ParseSubscriptionRef(userID); err == nil {
		return ref.AccountID
	}
	return userID
}

// NoteID is the ID of the credit note of invoice invoiceID and key: the
// invoice's, with a hash of the key, so the note's item is its key's guard
// and the notes of an invoice share the prefix NoteIDPrefix(invoiceID).
func NoteID(invoiceID, key string) string {
	h := sha256.Sum256([]byte(key))
	return NoteIDPrefix(invoiceID) + hex.EncodeToString(h[:8])
}

// NoteIDPrefix starts the IDs of the notes of invoiceID.
func NoteIDPrefix(invoiceID string) string {
	return noteIDPrefix + strings.TrimPrefix(invoiceID, invoiceIDPrefix) + "_"
}

// ParseID splits an invoice ID (note false) or credit-note ID (note true)
// into the account and the local part. A malformed ID wraps
// [billing.ErrNotFound]: no invoice has it.
func ParseID(id string, note bool) (userID, local string, err error) {
	prefix := invoiceIDPrefix
	if note {
		prefix = noteIDPrefix
	}
	rest, ok := strings.CutPrefix(id, prefix)
	enc, local, ok2 := strings.Cut(rest, ".")
	u, err := base64.RawURLEncoding.DecodeString(enc)
	if !ok || !ok2 || err != nil || len(u) == 0 || len(local) < 20 {
		return "", "", fmt.Errorf("%w: malformed ID %q", billing.ErrNotFound, id)
	}
	return string(u), local, nil
}

// Number formats the seq-th number of prefix: "ACME-0001"; a credit note's
// "ACME-CN-0001".
func Number(prefix string, seq int64, note bool) string {
	if note {
		return fmt.Sprintf("%s-CN-%04d", prefix, seq)
	}
	return fmt.Sprintf("%s-%04d", prefix, seq)
}

// ParseSeq returns the place in its sequence of a number made by Number.
func ParseSeq(number string) (int64, bool) {
	i := strings.LastIndexByte(number, '-')
	n, err := strconv.ParseInt(number[i+1:], 10, 64)
	return n, i >= 0 && err == nil && n > 0
}

// Draft checks inv and returns the draft to store: ID, Created (now when
// unset), Prefix default, Status, Version 1 and Event set, slices copied.
func Draft(inv *billing.Invoice, now time.Time) (billing.Invoice, error) {
	d := Clone(*inv)
	if d.Status == "" {
		d.Status = billing.InvoiceDraft
	}
	if d.Status != billing.InvoiceDraft || d.Number != "" || d.Seq != 0 || d.Version != 0 || d.AmountCredited != 0 {
		return billing.Invoice{}, &billing.FieldError{Field: "Status", Value: string(d.Status), Key: inv.Key,
			Err: fmt.Errorf("%w: a new invoice is a draft without number, version or credits", billing.ErrInvalidInvoice)}
	}
	if err := d.Validate(); err != nil {
		return billing.Invoice{}, err
	}
	if d.Created.IsZero() {
		d.Created = now
	}
	times := []time.Time{d.Created, d.DueAt}
	for _, l := range d.Lines {
		times = append(times, l.PeriodStart, l.PeriodEnd)
	}
	if err := CheckTime(inv.Key, times...); err != nil {
		return billing.Invoice{}, err
	}
	d.Created = d.Created.UTC()
	if d.Prefix == "" {
		d.Prefix = d.Sequence
		if d.Prefix == "" {
			d.Prefix = d.UserID
		}
	}
	d.ID = newID(invoiceIDPrefix, d.UserID, d.Key, d.Created)
	d.Version, d.Event = 1, EventCreated
	return d, nil
}

// CheckTime refuses a time the items cannot hold (timefmt: years
// 0000-9999), as a [*billing.FieldError] naming key and wrapping
// [billing.ErrInvalidDate]; the zero time (unset) passes.
func CheckTime(key string, ts ...time.Time) error {
	for _, t := range ts {
		if t.IsZero() {
			continue
		}
		if err := timefmt.Check(t); err != nil {
			return &billing.FieldError{Field: "time", Value: t.String(), Key: key, Err: fmt.Errorf("%w: %w", billing.ErrInvalidDate, err)}
		}
	}
	return nil
}

// Clone copies inv and its slices.
func Clone(inv billing.Invoice) billing.Invoice {
	inv.Lines = slices.Clone(inv.Lines)
	inv.PeriodIDs = slices.Clone(inv.PeriodIDs)
	return inv
}

// CloneNote copies n and its lines.
func CloneNote(n billing.CreditNote) billing.CreditNote {
	n.Lines = slices.Clone(n.Lines)
	return n
}

// Differs returns the fields of what was asked whose values differ between
// stored (the draft as created: its first history row) and asked (a new request of the same key),
// sorted; nil when they ask for the same invoice.
func Differs(stored, asked *billing.Invoice) []string {
	a, err := Draft(asked, stored.Created)
	if err != nil {
		return []string{"Status"}
	}
	var out []string
	sv, av := reflect.ValueOf(*stored), reflect.ValueOf(a)
	for i := range sv.NumField() {
		name := sv.Type().Field(i).Name
		switch name {
		case "ID", "Number", "Seq", "Status", "IssuedAt", "PaidAt", "VoidedAt", "UncollectibleAt", "TransactionID",
			"Version", "Event", "AmountPaid", "AmountDue", "AmountCredited", "Created":
			continue // what the store and later changes decide
		}
		if !equal(sv.Field(i).Interface(), av.Field(i).Interface()) {
			out = append(out, name)
		}
	}
	// What was paid at draft (the balance applied) is asked too: stored is
	// the draft as created, its first history row.
	if stored.AmountPaid != a.AmountPaid {
		out = append(out, "AmountPaid")
	}
	if stored.AmountDue != a.AmountDue {
		out = append(out, "AmountDue")
	}
	slices.Sort(out)
	return out
}

// NoteDiffers is Differs of credit notes.
func NoteDiffers(stored, asked *billing.CreditNote) []string {
	var out []string
	if stored.InvoiceID != asked.InvoiceID {
		out = append(out, "InvoiceID")
	}
	if !equal(stored.Lines, asked.Lines) {
		out = append(out, "Lines")
	}
	if stored.Total != asked.Total {
		out = append(out, "Total")
	}
	if stored.Reason != asked.Reason {
		out = append(out, "Reason")
	}
	return out
}

func equal(a, b any) bool {
	switch x := a.(type) {
	case time.Time:
		return x.Equal(b.(time.Time))
	case []billing.InvoiceLine:
		y := b.([]billing.InvoiceLine)
		return slices.EqualFunc(x, y, func(l, m billing.InvoiceLine) bool {
			return l.Description == m.Description && l.PeriodStart.Equal(m.PeriodStart) && l.PeriodEnd.Equal(m.PeriodEnd) &&
				l.Quantity == m.Quantity && l.UnitAmount == m.UnitAmount && l.Amount == m.Amount && l.Kind == m.Kind
		})
	case []string:
		return slices.Equal(x, b.([]string))
	}
	return reflect.DeepEqual(a, b)
}

// KeyReused is the error of a repeated key asking for something else.
func KeyReused(userID, key, op string, fields []string) error {
	return &billing.RequestKeyError{UserID: userID, RequestKey: key, Op: op, Fields: fields}
}

// Finalized is cur numbered seq and opened at at.
func Finalized(cur billing.Invoice, seq int64, at time.Time) billing.Invoice {
	next := Clone(cur)
	next.Seq, next.Number = seq, Number(cur.Prefix, seq, false)
	next.Status, next.IssuedAt = billing.InvoiceOpen, at.UTC()
	next.Version, next.Event = cur.Version+1, EventFinalized
	return next
}

// Change is a status change after finalization.
type Change struct {
	To   billing.InvoiceStatus
	TxID string // MarkPaid's transaction
}

// Apply returns what ch makes of cur. repeat is set when cur is already
// what ch asks (nothing to write).
func Apply(cur billing.Invoice, ch Change, at time.Time) (next billing.Invoice, repeat bool, err error) {
	if err := CheckTime(cur.Key, at); err != nil {
		return cur, false, err
	}
	if cur.Status == ch.To {
		if ch.To == billing.InvoicePaid && cur.TransactionID != ch.TxID {
			return cur, false, fmt.Errorf("%w: invoice %s (key %s) was paid by transaction %s, not %s",
				billing.ErrTransactionMismatch, cur.ID, cur.Key, cur.TransactionID, ch.TxID)
		}
		return cur, true, nil
	}
	if err := cur.Status.CheckTransition(ch.To); err != nil {
		return cur, false, fmt.Errorf("invoice %s (key %s): %w", cur.ID, cur.Key, err)
	}
	next = Clone(cur)
	next.Status, next.Version = ch.To, cur.Version+1
	at = at.UTC()
	switch ch.To {
	case billing.InvoicePaid:
		next.TransactionID, next.PaidAt = ch.TxID, at
		next.AmountPaid, next.AmountDue = next.Total, 0
		next.Event = EventPaid
	case billing.InvoiceVoid:
		next.VoidedAt, next.Event = at, EventVoided
	case billing.InvoiceUncollectible:
		next.UncollectibleAt, next.Event = at, EventUncollectible
	}
	return next, false, nil
}

// Note checks note against its invoice inv and returns the note to store
// (ID and the invoice's fields set; unnumbered) and what the invoice
// becomes.
func Note(inv billing.Invoice, note *billing.CreditNote, at time.Time) (billing.CreditNote, billing.Invoice, error) {
	n := CloneNote(*note)
	bad := func(field string, v any, why string) error {
		return &billing.FieldError{Field: field, Value: fmt.Sprint(v), Key: note.Key,
			Err: fmt.Errorf("%w: credit note of invoice %s: %s", billing.ErrInvalidInvoice, inv.ID, why)}
	}
	switch {
	case n.Key == "":
		return n, inv, bad("Key", "", "missing")
	case inv.Status != billing.InvoiceOpen && inv.Status != billing.InvoicePaid && inv.Status != billing.InvoiceUncollectible:
		return n, inv, fmt.Errorf("%w: credit note of invoice %s (key %s) in status %s", billing.ErrIllegalTransition, inv.ID, inv.Key, inv.Status)
	}
	var sum int64
	for i, l := range n.Lines {
		if l.Amount < 0 {
			return n, inv, bad(fmt.Sprintf("Lines[%d].Amount", i), l.Amount, "negative")
		}
		sum += l.Amount
	}
	switch {
	case n.Total <= 0 || sum != n.Total:
		return n, inv, bad("Total", n.Total, fmt.Sprintf("not the lines' sum %d, or not above 0", sum))
	case n.Total > inv.Total-inv.AmountCredited:
		return n, inv, bad("Total", n.Total, fmt.Sprintf("more than the %d left to credit", inv.Total-inv.AmountCredited))
	}
	n.UserID, n.Currency, n.Sequence, n.Prefix = inv.UserID, inv.Currency, inv.Sequence, inv.Prefix
	if n.IssuedAt.IsZero() {
		n.IssuedAt = at // the caller's time when it gives one (the collector's clock), else the store's
	}
	n.IssuedAt = n.IssuedAt.UTC()
	if err := CheckTime(n.Key, n.IssuedAt); err != nil {
		return n, inv, err
	}
	n.ID = NoteID(inv.ID, n.Key)
	next := Clone(inv)
	next.AmountCredited += n.Total
	next.Version, next.Event = inv.Version+1, EventCreditNote
	return n, next, nil
}
