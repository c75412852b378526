package dynamostore

import (
	"errors"
	"fmt"
	"github.com/dynabill/billing/internal/sdkav"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/layout"
	"github.com/google/uuid"
)

// HistoryEvent is one history row read from a table's stream: a row of a
// period (subscription record) or of an invoice.
type HistoryEvent struct {
	// ID identifies the row: a name-based UUID (SHA-1) of the layout and
	// the text of the row's key attributes. Every delivery of the row and
	// every replay of the stream give the same ID, and rows of the legacy
	// history table, of the legacy invoices table and of a single table
	// never share one, so a consumer can use it as an idempotency key.
	ID string
	// Event is the row as an event: ID as above, its Type (see
	// [StreamDecoder]). Of a period's row: At the row's LastRunDate, and
	// the row's user, subscription, billing date, amount, process and
	// transaction ID; Reason is the row's PaymentError for declines and
	// returns. Of an invoice's row: At the change's time, UserID,
	// TransactionID, InvoiceID and InvoiceNumber the invoice's (the credit
	// note's ID and number for [billing.EventCreditNoteIssued], as the
	// collector's event names them), SubscriptionID the period the invoice
	// bills when it bills one, and Amount in cents: the invoice's total,
	// or the note's (what that change credited).
	Event billing.Event
	// Row is the period's history row as written, decoded as the store's
	// History reads it; the zero Period for an invoice's row.
	Row billing.Period
	// Invoice is the invoice as the version its row records left it
	// (what [billing.Invoices.History] reads); nil for a period's row.
	Invoice *billing.Invoice
	// SequenceNumber is the stream record's sequence number: the item
	// identifier a Lambda partial batch response names.
	SequenceNumber string
}

// StreamResult is the outcome of one record of a Lambda event
// ([StreamDecoder.DecodeLambda]).
type StreamResult struct {
	// SequenceNumber is the record's sequence number ("" when the record
	// does not carry one).
	SequenceNumber string
	// Event is the decoded history row when OK.
	Event HistoryEvent
	// OK is true when the record is a history row and decoded. False
	// means skipped when Err is nil (not a history row, a history row
	// deleted by TTL, or an invoice's draft row), reported when Err is set.
	OK bool
	// Err is the [*StreamRecordError] of a record that is (or may be) a
	// history row and does not decode, or that modifies or deletes one: a
	// Lambda consumer reports its SequenceNumber as a batch item failure
	// rather than drop it.
	Err error
}

// ErrHistoryRowChanged reports a stream record that modifies or deletes
// (other than by TTL) a history row, which is written once and never
// changed: a row was replaced or deleted by another program (the library
// never replaces a row), and no event tells a consumer.
var ErrHistoryRowChanged = errors.New("billing: history row modified or deleted")

// StreamRecordError reports a stream record that is a history row (or may
// be one) and cannot be decoded: its image does not decode, it carries no
// new image (the stream's view type is KEYS_ONLY or OLD_IMAGE), the row's
// change cannot be told, or the record modifies or deletes the row
// ([ErrHistoryRowChanged]). It wraps the decoding error, which wraps
// [billing.ErrInvalidItem].
type StreamRecordError struct {
	// SequenceNumber is the record's sequence number.
	SequenceNumber string
	// Key is the item's key as text ("user_id=… last_run_date=…",
	// "pk=… sk=…" or "PK=… SK=…"), or "" when the record has none.
	Key string
	// Err is why the record does not decode.
	Err error
}

func (e *StreamRecordError) Error() string {
	return fmt.Sprintf("billing: stream record %s (%s): %v", e.SequenceNumber, e.Key, e.Err)
}

func (e *StreamRecordError) Unwrap() error { return e.Err }

// streamLayout is the table layout a decoder reads.
type streamLayout int

const (
	streamLegacy streamLayout = iota + 1
	streamSingle
	streamInvoices // the legacy layout's invoices table
)

// rowKind is what a stream record's item is to a decoder.
type rowKind int

const (
	rowOther   rowKind = iota // not a history row: skipped
	rowPeriod                 // a period's history row
	rowInvoice                // an invoice's history row (INVH#…)
)

// streamIDSpace is the UUID namespace of [HistoryEvent.ID].
var streamIDSpace = uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://github.com/dynabill/billing/history-stream"))

// StreamDecoder decodes the records of a table's DynamoDB stream (view
// type NEW_IMAGE or NEW_AND_OLD_IMAGES) into [HistoryEvent]s: one for
// each history row the table received. The history row written with
// every change of a record or of an invoice is the durable event, and the
// stream delivers each at least once and in order per item key;
// [HistoryEvent.ID] tells the deliveries of one row apart from other rows.
// Which rows a decoder reads:
//
//	decoder                         table                        history rows
//	[NewHistoryStreamDecoder]       legacy history table         every item (a period's row)
//	[NewInvoiceStreamDecoder]       legacy invoices table        sort key INVH#… (an invoice's row)
//	[NewSingleTableStreamDecoder]   single table                 in an account partition: sort key
//	                                                             HIST#… (a period's) and INVH#… (an invoice's)
//
// # Periods
//
// The type of a period's event is the row's [billing.Period.Change] (the
// billing_change attribute) when the row carries one, passed on as written
// even when this version of the library does not know it. A row without
// it (written by an earlier version or another program) gets a type
// derived from its status, updated_event, process and dates, by the first
// line that matches. "opening" means created_date equals last_run_date
// (the row that created the record); "subscribed" means updated_event
// user-subscribed or process SUBSCRIBE; "trial" means billing_trial_end is
// set (a trial period); "after trial" means billing_after_trial is true or
// updated_event is trial-converted (the first paid period after a trial,
// [billing.Period.IsAfterTrial]):
//
//	billing_status  condition                       type
//	COMPLETED       billing_trial_end set           subscription_trial_ended
//	COMPLETED                                       payment_succeeded
//	ACHSENT                                         payment_pending
//	ERROR                                           payment_declined (a returned ACH debit too)
//	REFUNDED                                        payment_refunded
//	STALE           updated_event ach-overdue       payment_ach_overdue
//	STALE           otherwise                       subscription_stale
//	PAUSED_SKIPPED                                  subscription_pause_skipped
//	WAIVED                                          payment_waived
//	CANCELLED                                       subscription_cancelled
//	SCHEDULED       opening, subscribed, trial      subscription_trial_started
//	SCHEDULED       opening, subscribed             subscription_created
//	SCHEDULED       opening, after trial            subscription_trial_converted
//	SCHEDULED       opening, user-reactivated       subscription_reactivated
//	SCHEDULED       opening                         subscription_period_opened
//	SCHEDULED       updated_event pause-resume      subscription_resumed
//	SCHEDULED       otherwise                       subscription_changed
//	PAUSED          opening, subscribed             subscription_created
//	PAUSED          opening                         subscription_period_opened
//	PAUSED          otherwise                       subscription_paused
//
// Any other status (INACTIVE, one this library does not know) is an
// error: the record is reported, never dropped. updated_event stays on a
// record until a later write replaces it, so a derived type is a best
// reading: a tier change of a resumed record reads as resumed, and a
// returned ACH debit as a decline.
//
// # Invoices
//
// Every change of an invoice writes a history row, the invoice as that
// version left it ([HistoryEvent.Invoice]); its event attribute names the
// change and gives the event's type, time and amount. Amounts are
// converted from the currency's minor units into cents ([billing.Amount]):
// ¥500 is 500.00, and the total of a currency with three digits is
// rounded half to even (1.255 KWD is 1.26; the exact total is on the
// invoice).
//
//	event                  type                    At                      Amount
//	invoice_created        none: skipped (a draft)
//	invoice_finalized      invoice_finalized       issued_at               the invoice's total
//	invoice_paid           invoice_paid            paid_at                 the invoice's total
//	invoice_voided         invoice_voided          voided_at               the invoice's total
//	invoice_uncollectible  invoice_uncollectible   uncollectible_at        the invoice's total
//	credit_note_issued     credit_note_issued      credit_note_issued_at   credit_note_total (what it credited)
//
// A row of another event (of a newer library), one whose time is missing,
// or one whose invoice does not add up ([billing.Invoice.Validate]) is an
// error: the record is reported, never dropped.
//
// # Changes of history rows
//
// History is append-only, so a record that changes or deletes a history
// row, a period's or an invoice's, is reported, never dropped:
//
//	record   item                                   outcome
//	INSERT   history row                            a HistoryEvent (or an error if it does not decode;
//	                                                none for an invoice's draft row)
//	MODIFY   history row                            error: the row was replaced (by another program:
//	                                                the library's writes never replace one)
//	REMOVE   history row, deleted by TTL            skipped
//	REMOVE   history row, any other deletion        error: the row was deleted
//	any      not a history row (single table,       skipped: a period, an invoice, its counters,
//	         invoices table)                        claims and credit notes, every other entity
//
// These errors are [*StreamRecordError]s wrapping [ErrHistoryRowChanged]
// and [billing.ErrInvalidItem]. A TTL deletion is a record whose
// userIdentity has principalId "dynamodb.amazonaws.com" and type
// "Service". On a single table and the invoices table, the MODIFY and
// REMOVE records of every item that is not a history row are skipped like
// its INSERTs. A StreamDecoder holds no state and is safe for concurrent
// use.
type StreamDecoder struct {
	layout streamLayout
	tbl    layout.SingleTableConfig
}

// NewHistoryStreamDecoder returns the decoder of the legacy history
// table's stream (billing-activity-history).
func NewHistoryStreamDecoder() *StreamDecoder {
	return &StreamDecoder{layout: streamLegacy}
}

// NewInvoiceStreamDecoder returns the decoder of the legacy layout's
// invoices table's stream ([TableConfig.Invoices], made with a stream by
// [InvoicesTableDefinition]): its invoices' history rows (sort key INVH#…
// in an account partition); every other item of the table is skipped.
func NewInvoiceStreamDecoder() *StreamDecoder {
	return &StreamDecoder{layout: streamInvoices}
}

// NewSingleTableStreamDecoder returns the decoder of a single table's
// stream: its history items, a period's (sort key HIST#…) and an
// invoice's (sort key INVH#…), in an account partition of
// cfg.AccountPrefix; every other item of the table is skipped. cfg is
// checked as [NewSingleTableRepository] checks it.
func NewSingleTableStreamDecoder(cfg SingleTableConfig) (*StreamDecoder, error) {
	tbl := codecOf(cfg)
	if err := tbl.Validate(); err != nil {
		return nil, err
	}
	if err := tbl.CheckEngine("billing: SingleTableConfig"); err != nil {
		return nil, err
	}
	return &StreamDecoder{layout: streamSingle, tbl: tbl}, nil
}

// Decode decodes one record of the DynamoDB Streams API. ok is false and
// err nil for a record that carries no history row (skipped). err is a
// [*StreamRecordError] when the record is a history row that cannot be
// decoded or carries no new image, or when it modifies or deletes a
// history row (see the table on [StreamDecoder]).
func (d *StreamDecoder) Decode(r streamtypes.Record) (ev HistoryEvent, ok bool, err error) {
	rec := streamRecord{event: string(r.EventName)}
	if id := r.UserIdentity; id != nil {
		rec.ttl = isTTLDeletion(aws.ToString(id.PrincipalId), aws.ToString(id.Type))
	}
	if r.Dynamodb != nil {
		if r.Dynamodb.SequenceNumber != nil {
			rec.seq = *r.Dynamodb.SequenceNumber
		}
		rec.keys, rec.keysErr = convertStreamItem(r.Dynamodb.Keys)
		rec.image, rec.imageErr = convertStreamItem(r.Dynamodb.NewImage)
	}
	return d.decode(rec)
}

// streamRecord is a stream record of either input form with the
// attribute values converted to the dynamodb types.
type streamRecord struct {
	event string
	seq   string
	keys  map[string]types.AttributeValue
	// image is the new image, nil when the record has none.
	image map[string]types.AttributeValue
	// keysErr and imageErr report keys and an image that did not convert.
	keysErr, imageErr error
	// ttl is true when the record's userIdentity names DynamoDB's TTL
	// service: the item expired.
	ttl bool
}

// isTTLDeletion tells whether a record's userIdentity (principalId and
// type) is DynamoDB's time-to-live service.
func isTTLDeletion(principalID, typ string) bool {
	return principalID == "dynamodb.amazonaws.com" && typ == "Service"
}

// decode is Decode of either input form.
func (d *StreamDecoder) decode(r streamRecord) (HistoryEvent, bool, error) {
	fail := func(key string, err error) (HistoryEvent, bool, error) {
		return HistoryEvent{}, false, &StreamRecordError{SequenceNumber: r.seq, Key: key, Err: err}
	}
	switch r.event {
	case "INSERT", "MODIFY", "REMOVE":
	default:
		return fail("", fmt.Errorf("%w: stream record event name %q", billing.ErrInvalidItem, r.event))
	}
	if r.keysErr != nil {
		return fail("", fmt.Errorf("keys: %w", r.keysErr))
	}
	keys := r.keys
	if len(keys) == 0 && r.imageErr == nil {
		keys = r.image // the key attributes are on the image too
	}
	key, name, kind, err := d.keyOf(keys)
	if err != nil {
		return fail(key, err)
	}
	if kind == rowOther {
		return HistoryEvent{}, false, nil
	}
	switch {
	case r.event == "MODIFY":
		return fail(key, fmt.Errorf("%w: %w: the row was replaced", ErrHistoryRowChanged, billing.ErrInvalidItem))
	case r.event == "REMOVE" && r.ttl:
		return HistoryEvent{}, false, nil // expired: not a change of the history
	case r.event == "REMOVE":
		return fail(key, fmt.Errorf("%w: %w: the row was deleted", ErrHistoryRowChanged, billing.ErrInvalidItem))
	}
	if r.imageErr != nil {
		return fail(key, fmt.Errorf("new image: %w", r.imageErr))
	}
	if r.image == nil {
		return fail(key, fmt.Errorf("%w: history row without a new image (the stream's view type must be NEW_IMAGE or NEW_AND_OLD_IMAGES)", billing.ErrInvalidItem))
	}
	id := uuid.NewSHA1(streamIDSpace, []byte(name)).String()
	if kind == rowInvoice {
		ev, ok, err := invoiceHistoryEvent(r.image, key)
		if err != nil {
			return fail(key, err)
		}
		if ok {
			ev.ID, ev.Event.ID, ev.SequenceNumber = id, id, r.seq
		}
		return ev, ok, nil
	}
	var row billing.Period
	if d.layout == streamSingle {
		row, err = decodeEngineItem(sdkav.FromSDK(r.image))
	} else {
		row, err = layout.DecodeItem(sdkav.FromSDK(r.image))
	}
	if err != nil {
		return fail(key, err)
	}
	typ, err := historyEventType(&row)
	if err != nil {
		return fail(key, err)
	}
	e := billing.Event{
		ID: id, Type: typ, At: row.LastRunDate, UserID: row.UserID, SubscriptionID: row.SubscriptionID,
		BillingDate: row.BillingDate, Amount: row.Amount, Process: row.Process, TransactionID: row.TransactionID,
	}
	if typ == billing.EventPaymentDeclined || typ == billing.EventPaymentReturned {
		e.Reason = row.PaymentError
	}
	return HistoryEvent{
		ID:             id,
		Event:          e,
		Row:            row,
		SequenceNumber: r.seq,
	}, true, nil
}

// keyOf reads a record's key: its text for errors, the name its ID is
// derived from, and what the item is to the layout.
func (d *StreamDecoder) keyOf(keys map[string]types.AttributeValue) (text, name string, kind rowKind, err error) {
	str := func(attr string) (string, bool) {
		s, ok := keys[attr].(*types.AttributeValueMemberS)
		if !ok {
			return "", false
		}
		return s.Value, true
	}
	switch d.layout {
	case streamSingle:
		pk, okPK := str(layout.AttrPK)
		sk, okSK := str(layout.AttrSK)
		text = "PK=" + pk + " SK=" + sk
		if !okPK || !okSK {
			return text, "", rowOther, fmt.Errorf("%w: stream record of table %s without string keys PK and SK", billing.ErrInvalidItem, d.tbl.Table)
		}
		switch {
		case !strings.HasPrefix(pk, d.tbl.AccountPrefix):
			return text, "", rowOther, nil
		case strings.HasPrefix(sk, layout.SKHistoryPrefix):
			kind = rowPeriod
		case strings.HasPrefix(sk, skInvoiceHist):
			kind = rowInvoice
		default:
			return text, "", rowOther, nil
		}
		return text, "single-table\x00" + pk + "\x00" + sk, kind, nil
	case streamInvoices:
		pk, okPK := str(attrInvoicePK)
		sk, okSK := str(attrInvoiceSK)
		text = attrInvoicePK + "=" + pk + " " + attrInvoiceSK + "=" + sk
		if !okPK || !okSK {
			return text, "", rowOther, fmt.Errorf("%w: invoices stream record without string keys %s and %s", billing.ErrInvalidItem, attrInvoicePK, attrInvoiceSK)
		}
		if !strings.HasPrefix(pk, legacyInvoiceAccountPrefix) || !strings.HasPrefix(sk, skInvoiceHist) {
			return text, "", rowOther, nil
		}
		return text, "legacy-invoices\x00" + pk + "\x00" + sk, rowInvoice, nil
	}
	user, okUser := str(layout.AttrUserID)
	run, okRun := str(layout.AttrLastRunDate)
	text = "user_id=" + user + " last_run_date=" + run
	if !okUser || !okRun {
		return text, "", rowPeriod, fmt.Errorf("%w: history stream record without string keys user_id and last_run_date", billing.ErrInvalidItem)
	}
	return text, "legacy-history\x00" + user + "\x00" + run, rowPeriod, nil
}
