package memory

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/entitlement"
	"github.com/dynabill/billing/internal/av"
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/internal/timefmt"
	"github.com/dynabill/billing/notice"
)

var (
	_ notice.ReminderClaimer = (*Repository)(nil)
	_ notice.ReminderClaimer = (*stRepository)(nil)
)

// ClaimReminder implements [notice.ReminderClaimer] as
// dynamostore.Repository.ClaimReminder does: on the conditions of
// [notice.ReminderClaimer.ClaimReminder], the record's item gains
// billing_reminded_for, billing_reminded_at and billing_reminder_claim,
// and nothing else changes.
func (r *Repository) ClaimReminder(ctx context.Context, rem notice.Reminder, at time.Time) (notice.ReminderClaim, error) {
	if err := ctx.Err(); err != nil {
		return notice.ReminderClaim{}, err
	}
	c, attrs, bd, err := layout.ReminderClaimItem(rem, at)
	if err != nil {
		return notice.ReminderClaim{}, err
	}
	s := r.s
	user := s.locks.of(rem.UserID)
	s.locks.lock(user)
	defer s.locks.unlock(user)
	if err := s.claimReminder(rem, bd, attrs); err != nil {
		return notice.ReminderClaim{}, err
	}
	return c, nil
}

// ReleaseReminder implements [notice.ReminderClaimer]: the claim's
// attributes are removed if the record still holds c's claim.
func (r *Repository) ReleaseReminder(ctx context.Context, c notice.ReminderClaim) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	tok, bd, err := releaseArgs(c)
	if err != nil {
		return err
	}
	s := r.s
	user := s.locks.of(c.UserID)
	s.locks.lock(user)
	defer s.locks.unlock(user)
	return s.releaseReminder(c, tableKey{c.UserID, bd}, tok.ID)
}

func releaseArgs(c notice.ReminderClaim) (layout.ReminderToken, string, error) {
	tok, err := layout.ParseReminderToken(c.Token)
	if err != nil {
		return tok, "", err
	}
	bd, err := timefmt.Seconds(c.BillingDate)
	if err != nil {
		return tok, "", fmt.Errorf("billing: release reminder (%s): %w: %w", c.Key(), billing.ErrInvalidDate, err)
	}
	return tok, bd, nil
}

// claimReminder checks and writes a claim on the record at rem's key. The
// caller holds the stripe of rem's user.
func (s *Store) claimReminder(rem notice.Reminder, bd string, attrs map[string]av.AttributeValue) error {
	key := tableKey{rem.UserID, bd}
	cur, _ := s.primary.get(key)
	if err := layout.ReminderClaimRefused(rem, bd, cur); err != nil {
		return err
	}
	s.primary.update(key, func(item map[string]av.AttributeValue) {
		for name, v := range attrs {
			item[name] = cloneValue(v)
		}
	})
	return nil
}

// releaseReminder removes the claim with ID id from the record at key. The
// caller holds the stripe of key's user.
func (s *Store) releaseReminder(c notice.ReminderClaim, key tableKey, id string) error {
	cur, _ := s.primary.get(key)
	if err := layout.ReminderReleaseRefused(c, id, cur); err != nil {
		return err
	}
	s.primary.update(key, func(item map[string]av.AttributeValue) {
		for _, a := range layout.ReminderAttributes() {
			delete(item, a)
		}
	})
	return nil
}

// ClaimReminder implements [notice.ReminderClaimer] as
// dynamostore.SingleTableRepository.ClaimReminder does: the period is
// claimed and, in the same write, its subscription item's
// LastReminderDate becomes at's day with the next Version and UpdatedAt
// (only those attributes change); a period without a subscription item is
// claimed alone.
func (r *stRepository) ClaimReminder(ctx context.Context, rem notice.Reminder, at time.Time) (notice.ReminderClaim, error) {
	if err := ctx.Err(); err != nil {
		return notice.ReminderClaim{}, err
	}
	c, attrs, bd, err := layout.ReminderClaimItem(rem, at)
	if err != nil {
		return notice.ReminderClaim{}, err
	}
	ref, err := layout.ParseSubscriptionRef(rem.UserID)
	if err != nil {
		return notice.ReminderClaim{}, &billing.ConflictError{Op: "claim reminder", Key: rem.Key(),
			Reason: "record does not exist: the user ID names no subscription", Err: billing.ErrConflict}
	}
	s := (*SingleTable)(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	user := s.periods.locks.of(rem.UserID)
	s.periods.locks.lock(user)
	defer s.periods.locks.unlock(user)
	period, _ := s.periods.primary.get(tableKey{rem.UserID, bd})
	if err := layout.ReminderClaimRefused(rem, bd, period); err != nil {
		return notice.ReminderClaim{}, err
	}
	s.pay.mu.Lock()
	defer s.pay.mu.Unlock()
	stored, ok := s.pay.items[s.subItemKey(ref)]
	if ok {
		cur, err := s.table.DecodeRecurringSubscription(stored)
		if err != nil {
			return notice.ReminderClaim{}, fmt.Errorf("billing: claim reminder (%s): subscription (%s): %w", rem.Key(), s.subKeyText(ref), err)
		}
		item, err := s.reminderSubItem(stored, cur, entitlement.PaymentDate(at))
		if err != nil {
			return notice.ReminderClaim{}, fmt.Errorf("billing: claim reminder (%s): %w", rem.Key(), err)
		}
		s.pay.put(item)
		c.Token = layout.ReminderToken{ID: c.Token, Sub: true, Version: cur.Version + 1,
			PrevLastReminder: layout.StringOf(stored[layout.AttrLastReminderDate])}.String()
	}
	if err := s.periods.claimReminder(rem, bd, attrs); err != nil {
		return notice.ReminderClaim{}, err // checked above: cannot happen
	}
	return c, nil
}

// ReleaseReminder implements [notice.ReminderClaimer] as
// dynamostore.SingleTableRepository.ReleaseReminder does: the period's
// claim is removed if it is still c's, and the subscription item's
// LastReminderDate put back if its version is still the one the claim
// left.
func (r *stRepository) ReleaseReminder(ctx context.Context, c notice.ReminderClaim) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	tok, bd, err := releaseArgs(c)
	if err != nil {
		return err
	}
	ref, err := layout.ParseSubscriptionRef(c.UserID)
	if err != nil {
		return layout.ReminderNotOurs(c)
	}
	s := (*SingleTable)(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	user := s.periods.locks.of(c.UserID)
	s.periods.locks.lock(user)
	defer s.periods.locks.unlock(user)
	if err := s.periods.releaseReminder(c, tableKey{c.UserID, bd}, tok.ID); err != nil {
		return err
	}
	if !tok.Sub {
		return nil
	}
	var prev time.Time
	if tok.PrevLastReminder != "" {
		if prev, err = time.Parse(layout.PayDayLayout, tok.PrevLastReminder); err != nil {
			return nil
		}
	}
	s.pay.mu.Lock()
	defer s.pay.mu.Unlock()
	stored, ok := s.pay.items[s.subItemKey(ref)]
	if !ok {
		return nil
	}
	cur, err := s.table.DecodeRecurringSubscription(stored)
	if err != nil || cur.Version != tok.Version {
		return nil
	}
	if item, err := s.reminderSubItem(stored, cur, prev); err == nil {
		s.pay.put(item)
	}
	return nil
}

// reminderSubItem returns the subscription item stored (decoded as cur)
// with LastReminderDate lastReminder, UpdatedAt now and the next version,
// as DynamoDB's write-back leaves it. The caller holds s.pay.mu.
func (s *SingleTable) reminderSubItem(stored map[string]av.AttributeValue, cur entitlement.RecurringSubscription, lastReminder time.Time) (map[string]av.AttributeValue, error) {
	was, err := s.table.EncodeRecurringSubscription(cur)
	if err != nil {
		return nil, err
	}
	next := cur
	next.LastReminderDate, next.UpdatedAt, next.Version = lastReminder, s.pay.now(), cur.Version+1
	enc, err := s.table.EncodeRecurringSubscription(next)
	if err != nil {
		return nil, err
	}
	return writeBackItem(stored, was, enc, []string{layout.AttrPK, layout.AttrSK}, nil), nil
}

// writeBackItem is the item cur after DynamoDB's write-back update from
// prev to next (the encodings of the record read and of the record to
// write): an attribute whose encodings are equal keeps its stored bytes, a
// changed one takes next's, one only prev has is removed, and attributes
// in neither (unknown ones) stay. keys are never written; always are
// written even when unchanged.
func writeBackItem(cur, prev, next map[string]av.AttributeValue, keys, always []string) map[string]av.AttributeValue {
	out := cloneItem(cur)
	for name, n := range next {
		if slices.Contains(keys, name) {
			continue
		}
		if p, ok := prev[name]; !ok || !reflect.DeepEqual(p, n) || slices.Contains(always, name) {
			out[name] = cloneValue(n)
		}
	}
	for name := range prev {
		if _, ok := next[name]; !ok && !slices.Contains(keys, name) {
			delete(out, name)
		}
	}
	return out
}
