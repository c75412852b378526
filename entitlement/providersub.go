package entitlement

import (
	"fmt"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/enum"
	"github.com/dynabill/billing/internal/timefmt"
)

// ProviderStatus is the status of a subscription billed by an external
// processor, spelled as the processor (Stripe) spells it.
type ProviderStatus string

// The provider subscription statuses.
const (
	ProviderActive            ProviderStatus = "active"
	ProviderCanceled          ProviderStatus = "canceled"
	ProviderPastDue           ProviderStatus = "past_due"
	ProviderTrialing          ProviderStatus = "trialing"
	ProviderIncomplete        ProviderStatus = "incomplete"
	ProviderIncompleteExpired ProviderStatus = "incomplete_expired"
)

// providerStatuses is every known status, in the order of [ProviderStatuses].
var providerStatuses = enum.New(ProviderActive, ProviderCanceled, ProviderPastDue, ProviderTrialing, ProviderIncomplete, ProviderIncompleteExpired)

// ProviderStatuses returns every known status.
func ProviderStatuses() []ProviderStatus { return providerStatuses.Values() }

// Valid reports whether s is a known status.
func (s ProviderStatus) Valid() bool { return providerStatuses.Valid(s) }

// ParseProviderStatus reads a status strictly: exactly one of the six
// lower-case values. Anything else, including a status a processor adds
// later ("paused", "unpaid"), is a [*billing.FieldError] wrapping
// [ErrInvalidProviderStatus], so that a new status surfaces as an error
// instead of silently granting or denying access.
func ParseProviderStatus(s string) (ProviderStatus, error) {
	return providerStatuses.Parse(s, nil, invalidField("status", ErrInvalidProviderStatus))
}

// ProviderEvent is one subscription event of the external processor
// (customer.subscription.created/updated/deleted), already mapped by the
// host to the user and the tier.
type ProviderEvent struct {
	// EventID is the processor's event ID ("evt_…"). Required.
	EventID string
	// Created is when the processor created the event; events apply in
	// this order (see [ProviderEvent.NewerThan] for events of the same
	// instant). Required.
	Created time.Time
	// UserID is the account the subscription belongs to. Required.
	UserID string
	// SubscriptionID is the processor's subscription ID ("sub_…"). Required.
	SubscriptionID string
	// Customer is the processor's customer ID ("cus_…"). Required.
	Customer string
	// Tier is the plan's tier: INITIATE, JOURNEYMAN, SAGE or GUILDMASTER
	// (any case). Required.
	Tier Tier
	// Status is the subscription's status. Required.
	Status ProviderStatus
	// CurrentPeriodStart and CurrentPeriodEnd bound the paid period
	// (optional; the end is the grace limit of a cancelled subscription).
	CurrentPeriodStart, CurrentPeriodEnd time.Time
	// CancelAtPeriodEnd reports a cancellation scheduled for the period end.
	CancelAtPeriodEnd bool
}

// MaxProviderID bounds the processor's IDs (event, subscription,
// customer, payment intent) stored in keys and attributes.
const MaxProviderID = 255

// Normalize validates ev and returns it with its tier in canonical case
// and its times in UTC. A bad field is a [*billing.FieldError] naming it, wrapping
// [ErrInvalidProviderEvent], [ErrInvalidProviderStatus], [ErrInvalidTier] or
// [ErrInvalidAccount].
func (ev ProviderEvent) Normalize() (ProviderEvent, error) {
	bad := func(field, value string, err error) (ProviderEvent, error) {
		return ProviderEvent{}, &billing.FieldError{Field: field, Value: value, Err: err}
	}
	if err := CheckAccountID(ev.UserID); err != nil {
		return bad("UserID", ev.UserID, ErrInvalidAccount)
	}
	for _, f := range []struct{ name, v string }{{"EventID", ev.EventID}, {"SubscriptionID", ev.SubscriptionID}, {"Customer", ev.Customer}} {
		if f.v == "" || len(f.v) > MaxProviderID {
			return bad(f.name, f.v, fmt.Errorf("%w: 1 to %d bytes required", ErrInvalidProviderEvent, MaxProviderID))
		}
	}
	if _, err := ParseProviderStatus(string(ev.Status)); err != nil {
		return ProviderEvent{}, err
	}
	t, err := ParseTier(string(ev.Tier))
	if err != nil {
		return ProviderEvent{}, err
	}
	if t == TierFree {
		return bad("tier", string(ev.Tier), fmt.Errorf("%w: a provider subscription has a paid tier", ErrInvalidTier))
	}
	ev.Tier = t
	for _, f := range []struct {
		name string
		t    *time.Time
	}{{"Created", &ev.Created}, {"CurrentPeriodStart", &ev.CurrentPeriodStart}, {"CurrentPeriodEnd", &ev.CurrentPeriodEnd}} {
		if f.t.IsZero() {
			if f.name == "Created" {
				return bad(f.name, "", fmt.Errorf("%w: required", ErrInvalidProviderEvent))
			}
			continue
		}
		if _, err := timefmt.Nanos(*f.t); err != nil {
			return bad(f.name, f.t.String(), billing.ErrInvalidDate)
		}
		*f.t = f.t.UTC()
	}
	if !ev.CurrentPeriodStart.IsZero() && !ev.CurrentPeriodEnd.IsZero() && ev.CurrentPeriodEnd.Before(ev.CurrentPeriodStart) {
		return bad("CurrentPeriodEnd", ev.CurrentPeriodEnd.String(), fmt.Errorf("%w: before CurrentPeriodStart", ErrInvalidProviderEvent))
	}
	return ev, nil
}

// NewerThan reports whether ev orders after the last event applied to s.
// Events apply in the order of their Created time. A processor stamps
// events in whole seconds, so events of one change (a deletion and the
// update before it) often share an instant; among those, the event that
// ends more of the subscription orders last, so a deletion or
// cancellation is final over an update of the same instant whatever the
// delivery order:
//
//  1. an incomplete subscription (only ever its first state);
//  2. any other update (active, trialing, past_due, ...);
//  3. an update that sets CancelAtPeriodEnd;
//  4. a cancellation or deletion (status canceled or incomplete_expired).
//
// Events of the same instant and rank are ordered by EventID, so the
// order is total and every store picks the same winner. The rank of the
// last event applied is that of s's Status and CancelAtPeriodEnd, which
// the event wrote. ev is newer when s has no last event (never written by
// an event), when ev was created later, or when it was created at the
// same instant and orders after by rank, then EventID. A replay of the
// last event (same instant, rank and ID) is not newer.
func (ev ProviderEvent) NewerThan(s ProviderSubscription) bool {
	if s.LastEventAt.IsZero() {
		return true
	}
	if !ev.Created.Equal(s.LastEventAt) {
		return ev.Created.After(s.LastEventAt)
	}
	if r, last := providerRank(ev.Status, ev.CancelAtPeriodEnd), providerRank(s.Status, s.CancelAtPeriodEnd); r != last {
		return r > last
	}
	return ev.EventID > s.LastEventID
}

// Rank orders the state ev carries among events of the same instant, as
// [ProviderEvent.NewerThan] does: 3 ended, 2 cancelling at the period end,
// 1 any other, 0 incomplete. A store that applies events with a
// conditional write puts the same order in its condition.
func (ev ProviderEvent) Rank() int { return providerRank(ev.Status, ev.CancelAtPeriodEnd) }

// providerRank orders the states events of the same instant carry (see
// [ProviderEvent.NewerThan]): 3 ended, 2 cancelling at the period end, 1
// any other, 0 incomplete.
func providerRank(st ProviderStatus, cancelAtPeriodEnd bool) int {
	switch {
	case st == ProviderCanceled || st == ProviderIncompleteExpired:
		return 3
	case cancelAtPeriodEnd:
		return 2
	case st == ProviderIncomplete:
		return 0
	}
	return 1
}

// ProviderSubscription is the mirror of a processor's subscription: the
// item PK=USER#<id>, SK=SUBSCRIPTION#<subscriptionId>.
type ProviderSubscription struct {
	UserID         string
	SubscriptionID string
	// CustomerID is stripeCustomerId.
	CustomerID string
	// Tier is planTier.
	Tier   Tier
	Status ProviderStatus
	// CurrentPeriodStart and CurrentPeriodEnd bound the paid period; zero
	// when unknown.
	CurrentPeriodStart, CurrentPeriodEnd time.Time
	CancelAtPeriodEnd                    bool
	// AuthProvider is the host's "provider" attribute (local or cognito):
	// read, never written, by the library.
	AuthProvider string
	// LastEventID and LastEventAt identify the newest event applied
	// (attributes added by this library; empty on records written by
	// others, which any event overwrites).
	LastEventID string
	LastEventAt time.Time
	// CreatedAt and UpdatedAt are the record's timestamps.
	CreatedAt, UpdatedAt time.Time
}
