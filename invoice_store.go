package billing

import (
	"context"
	"time"
)

// Invoices stores an account's invoices and credit notes. Every change is
// one conditional write on what the store read (a status, a counter), with
// the invoice's history row in the same transaction, so a change repeated
// after a crash or a lost answer changes nothing more, and no number is
// skipped or given twice.
//
// Implementations: the Invoices of package memory and of dynamostore (both
// layouts); each passes billingtest.RunInvoiceConformance.
type Invoices interface {
	// CreateDraft stores inv as a draft under its UserID and Key and returns
	// what is stored, ID and Version set. inv must pass [Invoice.Validate]
	// and be a draft without a number. A draft of the same account and key
	// with the same content is returned as it is stored now (a repeat,
	// whatever its status since); one with other content is a
	// [*RequestKeyError] naming the fields that differ.
	CreateDraft(ctx context.Context, inv *Invoice) (Invoice, error)

	// Finalize numbers the draft id and opens it, in one transaction: the
	// next number of its sequence (conditional on the counter read), the
	// number and status on the invoice (conditional on it being a draft)
	// and an item claiming the number. A lost race reads the counter again
	// and tries again. An invoice finalized already is returned as it is
	// (a repeat); a void one is an error wrapping [ErrIllegalTransition].
	Finalize(ctx context.Context, id string, at time.Time) (Invoice, error)

	// MarkPaid records that transaction txID paid the invoice: AmountPaid
	// becomes Total, AmountDue 0. A repeat with the same txID returns the
	// invoice; a paid invoice and another txID is an error wrapping
	// [ErrTransactionMismatch].
	MarkPaid(ctx context.Context, id, txID string, at time.Time) (Invoice, error)
	// Void and MarkUncollectible close the invoice; a repeat returns it.
	// A change the status does not take wraps [ErrIllegalTransition].
	Void(ctx context.Context, id string, at time.Time) (Invoice, error)
	MarkUncollectible(ctx context.Context, id string, at time.Time) (Invoice, error)

	// IssueCreditNote numbers note in the credit series of its invoice's
	// sequence and stores it, adding its Total to the invoice's
	// AmountCredited, in one transaction. The invoice must be open, paid or
	// uncollectible, and the note at most what is left to credit. A note
	// of the same invoice and key with the same content is returned (a
	// repeat); with other content it is a [*RequestKeyError].
	IssueCreditNote(ctx context.Context, note *CreditNote) (CreditNote, error)

	// Invoice returns the invoice id; [ErrNotFound] when there is none.
	Invoice(ctx context.Context, id string) (Invoice, error)
	// ByUser returns a page of the account's invoices, newest first, at
	// most limit, after the invoice ID after ("" for the first page); next
	// is the ID to give for the next page, "" after the last.
	ByUser(ctx context.Context, userID, after string, limit int) (page []Invoice, next string, err error)
	// ByNumber returns the invoice numbered number in sequence (or, for
	// sequence "", in the account's own); [ErrNotFound] when none is.
	ByNumber(ctx context.Context, userID, sequence, number string) (Invoice, error)
	// History returns the invoice's history rows, one per version, oldest
	// first: the invoice as each change left it, Event naming the change.
	History(ctx context.Context, id string) ([]Invoice, error)
	// CreditNotes returns the notes issued against the invoice, oldest
	// first.
	CreditNotes(ctx context.Context, invoiceID string) ([]CreditNote, error)
}
