package dynamostore

import (
	"fmt"
	"math"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/invoicedoc"
)

// invoiceHistoryEvent makes the event of an invoice's history row (the new
// image of an INSERT; key is the item's key as text), by the table on
// [StreamDecoder]: ok is false for a draft's row. ID and SequenceNumber
// are left to the caller. An error wraps [billing.ErrInvalidItem].
func invoiceHistoryEvent(image map[string]types.AttributeValue, key string) (HistoryEvent, bool, error) {
	inv, err := decodeInvoice(image, key)
	if err != nil {
		return HistoryEvent{}, false, err
	}
	if inv.Event == invoicedoc.EventCreated {
		return HistoryEvent{}, false, nil // a draft: no event until it is numbered
	}
	if err := inv.Validate(); err != nil {
		return HistoryEvent{}, false, fmt.Errorf("%w: %w", billing.ErrInvalidItem, err)
	}
	e := billing.Event{UserID: inv.UserID, TransactionID: inv.TransactionID, InvoiceID: inv.ID, InvoiceNumber: inv.Number}
	if len(inv.PeriodIDs) == 1 {
		e.SubscriptionID = inv.PeriodIDs[0]
	}
	amount, amountField := inv.Total, "total"
	var atField string
	switch inv.Event {
	case invoicedoc.EventFinalized:
		e.Type, e.At, atField = billing.EventInvoiceFinalized, inv.IssuedAt, "issued_at"
	case invoicedoc.EventPaid:
		e.Type, e.At, atField = billing.EventInvoicePaid, inv.PaidAt, "paid_at"
	case invoicedoc.EventVoided:
		e.Type, e.At, atField = billing.EventInvoiceVoided, inv.VoidedAt, "voided_at"
	case invoicedoc.EventUncollectible:
		e.Type, e.At, atField = billing.EventInvoiceUncollectible, inv.UncollectibleAt, "uncollectible_at"
	case invoicedoc.EventCreditNote:
		var n noteOnHistory
		if err := attributevalue.UnmarshalMap(image, &n); err != nil {
			return HistoryEvent{}, false, &billing.FieldError{Field: "credit note", Key: key, Err: fmt.Errorf("%w: %w", billing.ErrInvalidItem, err)}
		}
		for _, f := range []struct{ name, v string }{{"credit_note_id", n.ID}, {"credit_note_number", n.Number}} {
			if f.v == "" {
				return HistoryEvent{}, false, invoiceRowError(f.name, "", key, "a credit note's history row without it")
			}
		}
		if n.Total <= 0 || n.Total > inv.AmountCredited {
			return HistoryEvent{}, false, invoiceRowError("credit_note_total", fmt.Sprint(n.Total), key,
				fmt.Sprintf("not in 1..%d, the invoice's amount credited", inv.AmountCredited))
		}
		at, err := parseInvoiceTime("credit_note_issued_at", n.IssuedAt)
		if err != nil {
			return HistoryEvent{}, false, itemError(err, key)
		}
		e.Type, e.At, atField = billing.EventCreditNoteIssued, at, "credit_note_issued_at"
		e.InvoiceID, e.InvoiceNumber = n.ID, n.Number // as the collector's event names them
		amount, amountField = n.Total, "credit_note_total"
	default:
		return HistoryEvent{}, false, invoiceRowError("event", inv.Event, key, "an invoice history row records no known change")
	}
	if e.At.IsZero() {
		return HistoryEvent{}, false, invoiceRowError(atField, "", key, "the row's change has no time")
	}
	if e.Amount, err = invoiceCents(&inv, amount); err != nil {
		return HistoryEvent{}, false, invoiceRowError(amountField, fmt.Sprint(amount), key, err.Error())
	}
	return HistoryEvent{Event: e, Invoice: &inv}, true, nil
}

// invoiceRowError is the error of attribute field of an invoice history
// row: a [*billing.FieldError] wrapping [billing.ErrInvalidItem].
func invoiceRowError(field, value, key, why string) error {
	return &billing.FieldError{Field: field, Value: value, Key: key, Err: fmt.Errorf("%w: %s", billing.ErrInvalidItem, why)}
}

// invoiceCents converts v (never negative), in minor units of inv's
// currency, into cents: multiplied by 100 for a currency without minor
// units (¥500 is 500.00), by 10 for one of a single digit, divided for
// one of three or four digits and rounded half to even.
func invoiceCents(inv *billing.Invoice, v int64) (billing.Amount, error) {
	d := inv.MinorDigits()
	if d <= 2 {
		m := pow10(2 - d)
		if v > math.MaxInt64/m {
			return 0, fmt.Errorf("%d %s overflows in cents", v, inv.Currency)
		}
		return billing.Cents(v * m), nil
	}
	m := pow10(d - 2)
	q, r := v/m, v%m
	if 2*r > m || (2*r == m && q%2 == 1) {
		q++
	}
	return billing.Cents(q), nil
}

func pow10(n int) int64 {
	p := int64(1)
	for range n {
		p *= 10
	}
	return p
}
