package notice

import (
	"context"
	"fmt"
	"time"

	"github.com/dynabill/billing"
)

// Reminder names the pre-billing reminder of one record as the worker
// message showed it: the record's key and what a claim checks is still
// true of the stored record.
type Reminder struct {
	// UserID and BillingDate are the record's key. Required.
	UserID      string
	BillingDate time.Time
	// SubscriptionID, when set, must be the stored record's
	// subscription_id: a record rewritten under the same key for another
	// subscription is not reminded.
	SubscriptionID string
	// Status, when set, must be the stored record's billing_status: a
	// record collected, cancelled or paused since the message was built is
	// not reminded.
	Status billing.Status
}

// Key names the record, as [Period.Key] does.
func (r Reminder) Key() string {
	return fmt.Sprintf("user_id=%s billing_date=%s", r.UserID, r.BillingDate.UTC().Format(time.RFC3339))
}

// Validate checks what every store needs of a reminder: a user ID, a
// billing date a record can have (years 1–9999, not zero) and, when set,
// a status the store keeps. The error is a [*billing.FieldError].
func (r Reminder) Validate() error {
	switch y := r.BillingDate.UTC().Year(); {
	case r.UserID == "":
		return &billing.FieldError{Field: "user_id", Err: fmt.Errorf("%w: reminder: required", billing.ErrInvalidQuery)}
	case r.BillingDate.IsZero() || y < 1 || y > 9999:
		return &billing.FieldError{Field: "billing_date", Value: r.BillingDate.String(), Key: r.Key(), Err: billing.ErrInvalidDate}
	case r.Status != "" && !r.Status.Storable():
		return &billing.FieldError{Field: "billing_status", Value: string(r.Status), Key: r.Key(), Err: billing.ErrInvalidStatus}
	}
	return nil
}

// ReminderClaim is a reminder a [ReminderClaimer] claimed: what
// [ReminderClaimer.ReleaseReminder] needs to undo it.
type ReminderClaim struct {
	Reminder
	// At is when the reminder was claimed: the day it is sent.
	At time.Time
	// Token identifies the claim. The store makes it and keeps part of it
	// on the record; it is opaque and means something only to the
	// ReleaseReminder of the store that made it.
	Token string
}

// ReminderClaimer is implemented by repositories that record, on the record
// a pre-billing reminder is about, that the reminder was sent: every
// repository of this module does. Given as the Reminders of package
// notice's WorkerConfig, it makes the worker send each reminder at most
// once per record and billing date, however often the scheduler runs and
// however many workers receive the message.
//
// The guarantee is at most once, not exactly once: the claim is written
// before the send, so a worker that crashes between the two loses that
// reminder rather than risking a second one, and a send that fails is
// followed by a release that may itself fail (the reminder is then lost
// too, and the worker logs it).
type ReminderClaimer interface {
	// ClaimReminder records, in one conditional write, that r's record is
	// reminded for its billing date at at. The write is conditional on the
	// stored record existing with r's subscription ID and status (when r
	// sets them) and on no claim for that billing date: when the
	// reminder was claimed already the error wraps [billing.ErrReminderClaimed];
	// when the record is gone or differs it is a [*ConflictError] wrapping
	// [billing.ErrConflict]. Either way nothing is written. The write sets only the
	// claim's own attributes: every other attribute keeps its bytes.
	ClaimReminder(ctx context.Context, r Reminder, at time.Time) (ReminderClaim, error)
	// ReleaseReminder undoes c after a failed send, so that a retry can
	// claim the reminder again: one conditional write that removes the
	// claim only while it is still c (else a [*ConflictError] wrapping
	// [billing.ErrConflict], and nothing is written).
	ReleaseReminder(ctx context.Context, c ReminderClaim) error
}
