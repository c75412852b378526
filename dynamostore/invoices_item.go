package dynamostore

import (
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/timefmt"
)

// Sort keys of the invoice items, in the account's partition (or, for a
// sequence shared by the host, the partition "SEQ#<name>"):
//
//	INV#<local>             the invoice (local: the ID's creation stamp and key hash, so the
//	                        account's invoices sort by creation)
//	INVKEY#<key>            the issuance key's claim: the ID of its invoice
//	INVH#<local>#<version>  a history row, the invoice as that version left it (a credit
//	                        note's row carries the note's ID, number, total and issue time)
//	CN#<note local>         a credit note
//	SEQ#INV, SEQ#CN         a sequence's counters: last_seq, the last number given
//	INVNO#<seq>, CNNO#<seq> a number's claim: the ID it was given to
const (
	skInvoice      = "INV#"
	skInvoiceKey   = "INVKEY#"
	skInvoiceHist  = "INVH#"
	skNote         = "CN#"
	skCounterInv   = "SEQ#INV"
	skCounterNote  = "SEQ#CN"
	skNumberInv    = "INVNO#"
	skNumberNote   = "CNNO#"
	pkSharedPrefix = "SEQ#"
	// legacyInvoiceAccountPrefix starts an account's partition in the
	// legacy layout's invoices table.
	legacyInvoiceAccountPrefix = "USER#"
)

// Attribute names of the invoice items (new names of their own on either
// layout).
const (
	attrInvoicePK = "pk" // the legacy layout's invoices table's keys
	attrInvoiceSK = "sk"
	attrInvoiceID = "invoice_id"
	attrNoteID    = "credit_note_id"
	attrLastSeq   = "last_seq"
	attrVersion   = "version"
	attrStatus    = "invoice_status"
	attrEntity    = "entity"
)

// invoiceItem is the wire form of an invoice and of its history rows.
type invoiceItem struct {
	Entity          string     `dynamodbav:"entity"`
	ID              string     `dynamodbav:"invoice_id"`
	UserID          string     `dynamodbav:"user_id"`
	Key             string     `dynamodbav:"invoice_key"`
	Sequence        string     `dynamodbav:"sequence,omitempty"`
	Prefix          string     `dynamodbav:"prefix"`
	Number          string     `dynamodbav:"number,omitempty"`
	Seq             int64      `dynamodbav:"seq,omitempty"`
	Currency        string     `dynamodbav:"currency"`
	Lines           []lineItem `dynamodbav:"lines"`
	Subtotal        int64      `dynamodbav:"subtotal"`
	Discounts       int64      `dynamodbav:"discounts"`
	Tax             int64      `dynamodbav:"tax"`
	TaxInclusive    bool       `dynamodbav:"tax_inclusive,omitempty"`
	Total           int64      `dynamodbav:"total"`
	AmountPaid      int64      `dynamodbav:"amount_paid"`
	AmountDue       int64      `dynamodbav:"amount_due"`
	AmountCredited  int64      `dynamodbav:"amount_credited,omitempty"`
	Status          string     `dynamodbav:"invoice_status"`
	Created         string     `dynamodbav:"created_at"`
	IssuedAt        string     `dynamodbav:"issued_at,omitempty"`
	DueAt           string     `dynamodbav:"due_at,omitempty"`
	PaidAt          string     `dynamodbav:"paid_at,omitempty"`
	VoidedAt        string     `dynamodbav:"voided_at,omitempty"`
	UncollectibleAt string     `dynamodbav:"uncollectible_at,omitempty"`
	PeriodIDs       []string   `dynamodbav:"period_ids,omitempty"`
	TransactionID   string     `dynamodbav:"transaction_id,omitempty"`
	Version         int64      `dynamodbav:"version"`
	Event           string     `dynamodbav:"event,omitempty"`
}

type lineItem struct {
	Description string `dynamodbav:"description,omitempty"`
	PeriodStart string `dynamodbav:"period_start,omitempty"`
	PeriodEnd   string `dynamodbav:"period_end,omitempty"`
	Quantity    int64  `dynamodbav:"quantity,omitempty"`
	UnitAmount  int64  `dynamodbav:"unit_amount,omitempty"`
	Amount      int64  `dynamodbav:"amount"`
	Kind        string `dynamodbav:"kind"`
}

// noteItem is the wire form of a credit note.
type noteItem struct {
	Entity    string     `dynamodbav:"entity"`
	ID        string     `dynamodbav:"credit_note_id"`
	Key       string     `dynamodbav:"credit_note_key"`
	InvoiceID string     `dynamodbav:"invoice_id"`
	UserID    string     `dynamodbav:"user_id"`
	Currency  string     `dynamodbav:"currency"`
	Sequence  string     `dynamodbav:"sequence,omitempty"`
	Prefix    string     `dynamodbav:"prefix"`
	Number    string     `dynamodbav:"number"`
	Seq       int64      `dynamodbav:"seq"`
	Lines     []lineItem `dynamodbav:"lines"`
	Total     int64      `dynamodbav:"total"`
	Reason    string     `dynamodbav:"reason,omitempty"`
	IssuedAt  string     `dynamodbav:"issued_at"`
}

// noteOnHistory is what the history row of a credit note's issue carries
// besides the invoice: the note's ID, number, total and issue time, so
// the row alone makes the stream's credit_note_issued event (attributes
// of history rows only, optional on read elsewhere).
type noteOnHistory struct {
	ID       string `dynamodbav:"credit_note_id"`
	Number   string `dynamodbav:"credit_note_number"`
	Total    int64  `dynamodbav:"credit_note_total"`
	IssuedAt string `dynamodbav:"credit_note_issued_at"`
}

func encodeNoteOnHistory(n *billing.CreditNote) map[string]types.AttributeValue {
	m, err := attributevalue.MarshalMap(noteOnHistory{ID: n.ID, Number: n.Number, Total: n.Total, IssuedAt: invoiceTime(n.IssuedAt)})
	if err != nil {
		panic("billing: encode credit note on history: " + err.Error()) // plain strings and numbers: cannot fail
	}
	return m
}

// invoiceTime writes t as the library writes timestamps (timefmt.Nanos: a
// fixed nine-digit fraction, so string order is time order); the zero
// time is "". invoicedoc checked every time the store is given
// (invoicedoc.CheckTime), so the range error cannot happen.
func invoiceTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	s, err := timefmt.Nanos(t)
	if err != nil {
		panic("billing: invoice time unchecked: " + err.Error())
	}
	return s
}

func parseInvoiceTime(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := timefmt.Parse(s)
	if err != nil {
		return time.Time{}, &billing.FieldError{Field: field, Value: s, Err: fmt.Errorf("%w: %w", billing.ErrInvalidDate, err)}
	}
	return t, nil
}

func encodeLines(ls []billing.InvoiceLine) []lineItem {
	out := make([]lineItem, len(ls))
	for i, l := range ls {
		out[i] = lineItem{Description: l.Description, PeriodStart: invoiceTime(l.PeriodStart), PeriodEnd: invoiceTime(l.PeriodEnd),
			Quantity: l.Quantity, UnitAmount: l.UnitAmount, Amount: l.Amount, Kind: string(l.Kind)}
	}
	return out
}

func decodeLines(ls []lineItem) ([]billing.InvoiceLine, error) {
	out := make([]billing.InvoiceLine, len(ls))
	for i, l := range ls {
		s, err := parseInvoiceTime("period_start", l.PeriodStart)
		if err != nil {
			return nil, err
		}
		e, err := parseInvoiceTime("period_end", l.PeriodEnd)
		if err != nil {
			return nil, err
		}
		out[i] = billing.InvoiceLine{Description: l.Description, PeriodStart: s, PeriodEnd: e, Quantity: l.Quantity,
			UnitAmount: l.UnitAmount, Amount: l.Amount, Kind: billing.LineKind(l.Kind)}
	}
	return out, nil
}

// encodeInvoice returns the attributes of inv (without keys).
func encodeInvoice(inv *billing.Invoice, entity string) map[string]types.AttributeValue {
	it := invoiceItem{Entity: entity, ID: inv.ID, UserID: inv.UserID, Key: inv.Key, Sequence: inv.Sequence, Prefix: inv.Prefix,
		Number: inv.Number, Seq: inv.Seq, Currency: inv.Currency, Lines: encodeLines(inv.Lines), Subtotal: inv.Subtotal,
		Discounts: inv.Discounts, Tax: inv.Tax, TaxInclusive: inv.TaxInclusive, Total: inv.Total, AmountPaid: inv.AmountPaid, AmountDue: inv.AmountDue,
		AmountCredited: inv.AmountCredited, Status: string(inv.Status), Created: invoiceTime(inv.Created),
		IssuedAt: invoiceTime(inv.IssuedAt), DueAt: invoiceTime(inv.DueAt), PaidAt: invoiceTime(inv.PaidAt),
		VoidedAt: invoiceTime(inv.VoidedAt), UncollectibleAt: invoiceTime(inv.UncollectibleAt), PeriodIDs: inv.PeriodIDs,
		TransactionID: inv.TransactionID, Version: inv.Version, Event: inv.Event}
	m, err := attributevalue.MarshalMap(it)
	if err != nil {
		panic("billing: encode invoice: " + err.Error()) // plain strings and numbers: cannot fail
	}
	return m
}

// decodeInvoice reads an invoice or history item; a malformed one is a
// [*billing.FieldError] wrapping [billing.ErrInvalidItem].
func decodeInvoice(m map[string]types.AttributeValue, key string) (billing.Invoice, error) {
	var it invoiceItem
	if err := attributevalue.UnmarshalMap(m, &it); err != nil {
		return billing.Invoice{}, &billing.FieldError{Field: "invoice", Key: key, Err: fmt.Errorf("%w: %w", billing.ErrInvalidItem, err)}
	}
	inv := billing.Invoice{ID: it.ID, UserID: it.UserID, Key: it.Key, Sequence: it.Sequence, Prefix: it.Prefix, Number: it.Number,
		Seq: it.Seq, Currency: it.Currency, Subtotal: it.Subtotal, Discounts: it.Discounts, Tax: it.Tax, TaxInclusive: it.TaxInclusive, Total: it.Total,
		AmountPaid: it.AmountPaid, AmountDue: it.AmountDue, AmountCredited: it.AmountCredited, Status: billing.InvoiceStatus(it.Status),
		PeriodIDs: it.PeriodIDs, TransactionID: it.TransactionID, Version: it.Version, Event: it.Event}
	var err error
	if inv.Lines, err = decodeLines(it.Lines); err != nil {
		return billing.Invoice{}, itemError(err, key)
	}
	for _, f := range []struct {
		name string
		s    string
		t    *time.Time
	}{
		{"created_at", it.Created, &inv.Created}, {"issued_at", it.IssuedAt, &inv.IssuedAt}, {"due_at", it.DueAt, &inv.DueAt},
		{"paid_at", it.PaidAt, &inv.PaidAt}, {"voided_at", it.VoidedAt, &inv.VoidedAt},
		{"uncollectible_at", it.UncollectibleAt, &inv.UncollectibleAt},
	} {
		if *f.t, err = parseInvoiceTime(f.name, f.s); err != nil {
			return billing.Invoice{}, itemError(err, key)
		}
	}
	return inv, nil
}

// itemError names key on a FieldError and makes it wrap ErrInvalidItem.
func itemError(err error, key string) error {
	if fe, ok := err.(*billing.FieldError); ok {
		fe.Key = key
		fe.Err = fmt.Errorf("%w: %w", billing.ErrInvalidItem, fe.Err)
		return fe
	}
	return err
}

func encodeNote(n *billing.CreditNote) map[string]types.AttributeValue {
	m, err := attributevalue.MarshalMap(noteItem{Entity: "CreditNote", ID: n.ID, Key: n.Key, InvoiceID: n.InvoiceID,
		UserID: n.UserID, Currency: n.Currency, Sequence: n.Sequence, Prefix: n.Prefix, Number: n.Number, Seq: n.Seq,
		Lines: encodeLines(n.Lines), Total: n.Total, Reason: n.Reason, IssuedAt: invoiceTime(n.IssuedAt)})
	if err != nil {
		panic("billing: encode credit note: " + err.Error())
	}
	return m
}

func decodeNote(m map[string]types.AttributeValue, key string) (billing.CreditNote, error) {
	var it noteItem
	if err := attributevalue.UnmarshalMap(m, &it); err != nil {
		return billing.CreditNote{}, &billing.FieldError{Field: "credit note", Key: key, Err: fmt.Errorf("%w: %w", billing.ErrInvalidItem, err)}
	}
	n := billing.CreditNote{ID: it.ID, Key: it.Key, InvoiceID: it.InvoiceID, UserID: it.UserID, Currency: it.Currency,
		Sequence: it.Sequence, Prefix: it.Prefix, Number: it.Number, Seq: it.Seq, Total: it.Total, Reason: it.Reason}
	var err error
	if n.Lines, err = decodeLines(it.Lines); err != nil {
		return n, itemError(err, key)
	}
	if n.IssuedAt, err = parseInvoiceTime("issued_at", it.IssuedAt); err != nil {
		return n, itemError(err, key)
	}
	return n, nil
}
