package layout

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/av"
	"github.com/dynabill/billing/internal/timefmt"
	"github.com/dynabill/billing/notice"
)

// Attributes of a pre-billing reminder's claim ([notice.ReminderClaimer]),
// added by this library on a record's item: the legacy tables' record, the
// single table's period. Optional on read, and unknown to the record's
// codec, so they travel as extra attributes: updates of the record never
// touch them (see dynamostore's write-back), a move to another billing_date
// carries them along (harmless: they name the billing date reminded, not
// the new one), AddAll's rewrite of the record carries them (see
// CarryOwned).
const (
	// AttrRemindedFor is the billing_date the record was last reminded
	// for, written as billing_date is ("2006-01-02T15:04:05Z"). A claim
	// requires it to be absent or another date.
	AttrRemindedFor = "billing_reminded_for"
	// AttrRemindedAt is when that reminder was claimed (sent), with a
	// fixed nine-digit fraction as last_run_date.
	AttrRemindedAt = "billing_reminded_at"
	// AttrReminderClaim is the claim's random ID: a release removes the
	// claim only while it still holds this ID.
	AttrReminderClaim = "billing_reminder_claim"
)

// ReminderAttributes returns the claim's attributes on a record's item.
func ReminderAttributes() []string {
	return []string{AttrRemindedFor, AttrRemindedAt, AttrReminderClaim}
}

// SubscriptionReminderAttributes returns the attributes a reminder's
// claim, and its release, write on the single table's subscription item:
// LastReminderDate, and the Version and UpdatedAt every write of the item
// moves.
func SubscriptionReminderAttributes() []string {
	return []string{AttrLastReminderDate, PayVersion, payUpdatedAt}
}

// ReminderClaimItem checks r and at and returns a new claim of r (with a
// fresh random ID as its Token), the claim attributes to SET on the
// record's item, and the record's billing_date key.
func ReminderClaimItem(r notice.Reminder, at time.Time) (notice.ReminderClaim, map[string]av.AttributeValue, string, error) {
	if err := r.Validate(); err != nil {
		return notice.ReminderClaim{}, nil, "", fmt.Errorf("billing: claim reminder: %w", err)
	}
	bd, err := timefmt.Seconds(r.BillingDate)
	if err != nil {
		return notice.ReminderClaim{}, nil, "", fmt.Errorf("billing: claim reminder (%s): %w: %w", r.Key(), billing.ErrInvalidDate, err)
	}
	ts, err := timefmt.Nanos(at)
	if err != nil || at.IsZero() {
		return notice.ReminderClaim{}, nil, "", fmt.Errorf("billing: claim reminder (%s): %w: claim time %v", r.Key(), billing.ErrInvalidDate, at)
	}
	c := notice.ReminderClaim{Reminder: r, At: at.UTC(), Token: uuid.NewString()}
	return c, map[string]av.AttributeValue{
		AttrRemindedFor:   StringAV(bd),
		AttrRemindedAt:    StringAV(ts),
		AttrReminderClaim: StringAV(c.Token),
	}, bd, nil
}

// ReminderClaimRefused returns why the claim of r (its billing_date key
// bd) may not be written on item, the record's item as stored (nil when
// there is none), or nil when it may: the error of
// [notice.ReminderClaimer.ClaimReminder]. The DynamoDB stores express the
// same rule as their condition and call this on the item a failed
// condition returns; the in-memory stores call it before writing.
func ReminderClaimRefused(r notice.Reminder, bd string, item map[string]av.AttributeValue) error {
	conflict := func(reason string) error {
		return &billing.ConflictError{Op: "claim reminder", Key: r.Key(), Reason: reason, Err: billing.ErrConflict}
	}
	if len(item) == 0 {
		return conflict("record does not exist")
	}
	if v, ok := item[AttrRemindedFor]; ok && StringOf(v) == bd {
		return fmt.Errorf("%w: %s: claimed at %s", billing.ErrReminderClaimed, r.Key(), StringOf(item[AttrRemindedAt]))
	}
	switch {
	case r.Status != "" && StringOf(item[AttrBillingStatus]) != string(r.Status):
		return conflict(fmt.Sprintf("billing_status is %q, not %q", StringOf(item[AttrBillingStatus]), r.Status))
	case r.SubscriptionID != "" && StringOf(item[AttrSubscriptionID]) != r.SubscriptionID:
		return conflict("the record has another subscription_id")
	}
	return nil
}

// ReminderReleaseRefused returns the error of a release of the claim whose
// ID is id on item (nil: none), or nil when the item still holds it.
func ReminderReleaseRefused(c notice.ReminderClaim, id string, item map[string]av.AttributeValue) error {
	if v, ok := item[AttrReminderClaim]; ok && StringOf(v) == id && id != "" {
		return nil
	}
	return ReminderNotOurs(c)
}

// ReminderNotOurs is the error of a release whose claim the record no
// longer holds.
func ReminderNotOurs(c notice.ReminderClaim) error {
	return &billing.ConflictError{Op: "release reminder", Key: c.Key(),
		Reason: "the record no longer holds this claim (released, claimed again, or gone)", Err: billing.ErrConflict}
}

// ReminderToken is the [notice.ReminderClaim.Token] of the single table:
// the claim's ID (kept on the period as AttrReminderClaim) and, when the
// claim also wrote the subscription item, that item's Version after the
// claim and its LastReminderDate before it, which a release puts back
// while the version holds (nothing else wrote the item since). The legacy
// tables' token is the ID alone.
type ReminderToken struct {
	ID string
	// Sub is set when the claim wrote the subscription item.
	Sub bool
	// Version is the subscription item's version after the claim.
	Version int
	// PrevLastReminder is its LastReminderDate before the claim as stored;
	// "" when it had none.
	PrevLastReminder string
}

// String encodes t: "<id>" or "<id>|<version>|<previous LastReminderDate>".
func (t ReminderToken) String() string {
	if !t.Sub {
		return t.ID
	}
	return t.ID + "|" + strconv.Itoa(t.Version) + "|" + t.PrevLastReminder
}

// ParseReminderToken decodes [ReminderToken.String]'s form.
func ParseReminderToken(s string) (ReminderToken, error) {
	parts := strings.SplitN(s, "|", 3)
	t := ReminderToken{ID: parts[0]}
	if t.ID == "" {
		return t, errors.New("billing: release reminder: empty claim token")
	}
	if len(parts) == 1 {
		return t, nil
	}
	if len(parts) != 3 {
		return t, fmt.Errorf("billing: release reminder: malformed claim token %q", s)
	}
	v, err := strconv.Atoi(parts[1])
	if err != nil || v < 1 {
		return t, fmt.Errorf("billing: release reminder: malformed claim token %q", s)
	}
	t.Sub, t.Version, t.PrevLastReminder = true, v, parts[2]
	return t, nil
}
