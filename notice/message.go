package notice

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/dynabill/billing"
)

// eventDateLayout is the scheduler event's date format, YYYYMMDD.
const eventDateLayout = "20060102"

// Event is the input of [Scheduler.Run]: the detail of the daily
// trigger, or a continuation the scheduler handed back. Its JSON form keeps
// the legacy field names:
//
//	{"date": "20240314", "status": "SCHEDULED", "start_key": "AQ…"}
type Event struct {
	// Date, "YYYYMMDD", is the billing date to notify about; empty means
	// today (UTC, by the scheduler's clock) + [billing.NoticeLeadDays]. Set it
	// for manual backfill runs. A continuation always carries it, so a run
	// that goes on after midnight UTC keeps reading the window it started.
	Date string `json:"date"`
	// Status is the billing_status to query. Empty means SCHEDULED.
	Status billing.Status `json:"status"`
	// StartKey continues a run from where the previous invocation stopped;
	// empty starts at the top of the window. It is the repository's opaque
	// [billing.Page.Next] token (a URL-safe string), which replaces the raw DynamoDB
	// LastEvaluatedKey map the legacy service put here: a legacy map, or a
	// token that is malformed or belongs to another query, is an error,
	// never a restart from the top.
	StartKey string `json:"start_key"`
}

// ParseEvent parses a scheduler event: the trigger's detail object
// or a scheduler-queue message body. Empty input and JSON null give the zero
// event (today's window, SCHEDULED). Unknown fields are ignored; start_key
// may be absent, null or a string. Errors wrap [ErrInvalidEvent]: input that
// is not a JSON object, a status that is unknown or never stored, a date
// that is not a real "YYYYMMDD", a start_key that is not a string (such as
// a legacy LastEvaluatedKey map).
func ParseEvent(data []byte) (Event, error) {
	var ev Event
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return ev, nil
	}
	var w struct {
		Date     *string         `json:"date"`
		Status   *string         `json:"status"`
		StartKey json.RawMessage `json:"start_key"`
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return ev, fmt.Errorf("%w: %v", ErrInvalidEvent, err)
	}
	if w.Date != nil && *w.Date != "" {
		if _, err := parseDay(*w.Date); err != nil {
			return ev, fmt.Errorf("%w: %w", ErrInvalidEvent, err)
		}
		ev.Date = *w.Date
	}
	if w.Status != nil && *w.Status != "" {
		st, err := billing.ParseStatus(*w.Status)
		if err != nil {
			return ev, fmt.Errorf("%w: %w", ErrInvalidEvent, err)
		}
		if !st.Storable() {
			return ev, fmt.Errorf("%w: status %q is never stored", ErrInvalidEvent, st)
		}
		ev.Status = st
	}
	switch key := bytes.TrimSpace(w.StartKey); {
	case len(key) == 0 || string(key) == "null":
	case key[0] == '"':
		if err := json.Unmarshal(key, &ev.StartKey); err != nil {
			return Event{}, fmt.Errorf("%w: start_key: %v", ErrInvalidEvent, err)
		}
	case key[0] == '{':
		return Event{}, fmt.Errorf("%w: start_key is a DynamoDB LastEvaluatedKey map (legacy format); "+
			"the continuation token is a string: rerun the day with date set instead", ErrInvalidEvent)
	default:
		return Event{}, fmt.Errorf("%w: start_key must be a string, got %.32s", ErrInvalidEvent, key)
	}
	return ev, nil
}

// Message is one worker-queue message: the fields of a due
// record the [Worker] needs. [Message.MarshalJSON] gives the
// body, with the record's attribute names:
//
//	{"event_type":"three_day_notification","user_id":"u1","subscription_id":"…",
//	 "billing_date":"2024-03-14T15:00:00Z","billing_amount":"4.99",
//	 "billing_status":"SCHEDULED","receipt_tier_name":"Plus:v2","updated_event":""}
type Message struct {
	// UserID is the record's user_id. Required.
	UserID string
	// SubscriptionID is the record's subscription_id.
	SubscriptionID string
	// BillingDate is the record's billing_date, in UTC. Required.
	BillingDate time.Time
	// Amount is what the record will charge ([billing.Period.Due]): its
	// billing_amount, with a plan change's proration, less the balance;
	// never negative.
	Amount billing.Amount
	// Status is the record's billing_status when it was enqueued.
	Status billing.Status
	// TierName is the record's receipt_tier_name, "Name:Version".
	TierName string
	// UpdatedEvent is the record's updated_event when it was enqueued.
	UpdatedEvent billing.UpdatedEvent
	// AfterTrial is set when the record is the first paid period after a
	// trial, SCHEDULED and not attempted: the trial is still running, and
	// the notice is [billing.TrialEndingNoticeEvent]. In the body it is
	// billing_after_trial (true), left out when false.
	AfterTrial bool
}

// NewMessage builds the message for a record. It fails, with a
// [*billing.FieldError] naming the record, for a record without user_id, with a
// billing_date outside years 1–9999 or a negative amount: the scheduler
// logs and skips such records.
func NewMessage(sub *billing.Period) (Message, error) {
	due := sub.Amount
	if len(sub.Adjustments) > 0 || sub.Balance != 0 {
		due, _, _ = sub.Due() // with a plan change's proration, less the balance
	}
	m := Message{
		UserID:         sub.UserID,
		SubscriptionID: sub.SubscriptionID,
		BillingDate:    sub.BillingDate.UTC(),
		Amount:         due,
		Status:         sub.Status,
		TierName:       sub.ReceiptTierName,
		UpdatedEvent:   sub.UpdatedEvent,
		AfterTrial:     afterTrial(sub),
	}
	if err := m.validate(); err != nil {
		err.Key = sub.Key()
		return Message{}, err
	}
	return m, nil
}

// Tier returns the tier name of TierName ("Plus" for "Plus:v2").
func (m *Message) Tier() string {
	name, _, _ := strings.Cut(m.TierName, ":") // "Name:Version"
	return name
}

// messageWire is the JSON form of a Message.
type messageWire struct {
	EventType      string `json:"event_type"`
	UserID         string `json:"user_id"`
	SubscriptionID string `json:"subscription_id"`
	BillingDate    string `json:"billing_date"`
	Amount         string `json:"billing_amount"`
	Status         string `json:"billing_status"`
	TierName       string `json:"receipt_tier_name"`
	UpdatedEvent   string `json:"updated_event"`
	AfterTrial     bool   `json:"billing_after_trial,omitempty"`
}

// MarshalJSON implements [json.Marshaler]: the message body. A message that
// [ParseMessage] would reject is an error.
func (m Message) MarshalJSON() ([]byte, error) {
	if err := m.validate(); err != nil {
		return nil, err
	}
	return json.Marshal(messageWire{
		EventType:      billing.RenewalNoticeEvent,
		UserID:         m.UserID,
		SubscriptionID: m.SubscriptionID,
		BillingDate:    m.BillingDate.UTC().Format(time.RFC3339Nano),
		Amount:         m.Amount.String(),
		Status:         string(m.Status),
		TierName:       m.TierName,
		UpdatedEvent:   string(m.UpdatedEvent),
		AfterTrial:     m.AfterTrial,
	})
}

// UnmarshalJSON implements [json.Unmarshaler] with [ParseMessage].
func (m *Message) UnmarshalJSON(data []byte) error {
	v, err := ParseMessage(data)
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// ParseMessage parses a worker-queue message body in two steps,
// as the legacy worker did. Parsing fails when the body is not a JSON object
// with string fields (billing_after_trial, when present, a boolean); the error wraps [ErrInvalidMessage]. Decoding then
// fails, with a [*billing.FieldError] wrapping ErrInvalidMessage and naming the
// field, when event_type is not [billing.RenewalNoticeEvent], user_id is
// empty, billing_date is not RFC 3339 (or falls outside years 1–9999 in
// UTC), billing_amount is not an exact non-negative amount, or
// billing_status is not a known status. Unknown fields are ignored.
func ParseMessage(body []byte) (Message, error) {
	var w messageWire
	if t := bytes.TrimSpace(body); len(t) == 0 || t[0] != '{' {
		return Message{}, fmt.Errorf("%w: parse: not a JSON object", ErrInvalidMessage)
	}
	if err := json.Unmarshal(body, &w); err != nil {
		return Message{}, fmt.Errorf("%w: parse: %v", ErrInvalidMessage, err)
	}
	bad := func(field, value string, why any) (Message, error) {
		return Message{}, &billing.FieldError{Field: field, Value: value, Err: fmt.Errorf("%w: %v", ErrInvalidMessage, why)}
	}
	if w.EventType != billing.RenewalNoticeEvent {
		return bad("event_type", w.EventType, "want "+billing.RenewalNoticeEvent)
	}
	m := Message{
		UserID:         w.UserID,
		SubscriptionID: w.SubscriptionID,
		TierName:       w.TierName,
		UpdatedEvent:   billing.UpdatedEvent(w.UpdatedEvent),
		AfterTrial:     w.AfterTrial,
	}
	t, err := time.Parse(time.RFC3339Nano, w.BillingDate)
	if err != nil {
		return bad("billing_date", w.BillingDate, "want RFC 3339")
	}
	m.BillingDate = t.UTC()
	if m.Amount, err = billing.ParseAmount(w.Amount); err != nil {
		return bad("billing_amount", w.Amount, err)
	}
	if w.Status != "" {
		if m.Status, err = billing.ParseStatus(w.Status); err != nil {
			return bad("billing_status", w.Status, err)
		}
	}
	if err := m.validate(); err != nil {
		return Message{}, err
	}
	return m, nil
}

// validate checks what both the encoder and the parser require.
func (m *Message) validate() *billing.FieldError {
	bad := func(field, value, why string) *billing.FieldError {
		return &billing.FieldError{Field: field, Value: value, Err: fmt.Errorf("%w: %s", ErrInvalidMessage, why)}
	}
	switch y := m.BillingDate.UTC().Year(); {
	case m.UserID == "":
		return bad("user_id", "", "required")
	case m.BillingDate.IsZero():
		return bad("billing_date", "", "required")
	case y < 1 || y > 9999:
		return bad("billing_date", m.BillingDate.UTC().String(), "year outside 1–9999")
	case m.Amount < 0:
		return bad("billing_amount", m.Amount.String(), "negative")
	case m.Status != "" && !m.Status.Valid():
		return bad("billing_status", string(m.Status), "unknown status")
	}
	return nil
}
