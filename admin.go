package billing

import (
	"context"
	"fmt"
	"time"
)

// Change is the result of an admin change: the record before and after,
// and any records the change created.
type Change struct {
	Before  Subscription   `json:"before"`
	After   Subscription   `json:"after"`
	Created []Subscription `json:"created,omitempty"`
}

// admin applies edit to the record subscriptionID under the user's lock
// and writes it (with its history row) conditionally on the record read.
// edit returns the records to create in the same transaction.
func (c *Collector) admin(ctx context.Context, op, subscriptionID string, edit func(cur, next *Subscription, now time.Time) ([]*Subscription, error)) (Change, error) {
	found, err := c.cfg.Repository.GetByID(ctx, subscriptionID)
	if err != nil {
		return Change{}, err
	}
	var ch Change
	_, err = c.single(ctx, op, found.UserID, subscriptionID, func(ctx context.Context, _ *Report) error {
		cur, err := c.reread(ctx, &found)
		if err != nil {
			return err
		}
		// Nothing changes a record whose charge may have happened: its
		// attempt is resolved first, or the change is refused.
		if cur, err = c.resolve(ctx, &cur, &Report{}); err != nil {
			return fmt.Errorf("%s %s: %w", op, subscriptionID, err)
		}
		now := c.cfg.Clock.Now()
		next := cur.Clone()
		next.LastRunDate = runTime(&cur, now)
		create, err := edit(&cur, &next, now)
		if err != nil {
			return fmt.Errorf("%s %s: %w", op, subscriptionID, err)
		}
		for i, f := range create {
			f.LastRunDate = next.LastRunDate.Add(time.Duration(i+1) * time.Nanosecond)
			f.CreatedDate = f.LastRunDate
		}
		if err := c.write(ctx, &cur, &next, create); err != nil {
			return fmt.Errorf("%s %s: %w", op, subscriptionID, err)
		}
		ch = Change{Before: cur, After: next}
		for _, f := range create {
			ch.Created = append(ch.Created, *f)
		}
		return nil
	})
	return ch, err
}

func requireStatus(cur *Subscription, allowed ...Status) error {
	for _, s := range allowed {
		if cur.Status == s {
			return nil
		}
	}
	return fmt.Errorf("%w: record is %s, want one of %v", ErrNotCollectible, cur.Status, allowed)
}

// Waive forgives a SCHEDULED or ERROR record without payment (WAIVED).
// A record never attempted also opens the next period, as an attempt would.
func (c *Collector) Waive(ctx context.Context, subscriptionID string) (Change, error) {
	return c.admin(ctx, "waive", subscriptionID, func(cur, next *Subscription, now time.Time) ([]*Subscription, error) {
		if err := requireStatus(cur, StatusScheduled, StatusError); err != nil {
			return nil, err
		}
		next.Status, next.CompletionDate = StatusWaived, next.LastRunDate
		return c.openNext(cur, now)
	})
}

// Cancel cancels a SCHEDULED, ERROR or PAUSED record (CANCELLED). The
// subscription ends: no next period is opened.
func (c *Collector) Cancel(ctx context.Context, subscriptionID string) (Change, error) {
	return c.admin(ctx, "cancel", subscriptionID, func(cur, next *Subscription, _ time.Time) ([]*Subscription, error) {
		if err := requireStatus(cur, StatusScheduled, StatusError, StatusPaused); err != nil {
			return nil, err
		}
		next.Status, next.CompletionDate = StatusCancelled, next.LastRunDate
		return nil, nil
	})
}

// Pause pauses a SCHEDULED record for months billing periods (PAUSED), or
// changes the months of a PAUSED one. The pause run advances it.
func (c *Collector) Pause(ctx context.Context, subscriptionID string, months int) (Change, error) {
	return c.admin(ctx, "pause", subscriptionID, func(cur, next *Subscription, _ time.Time) ([]*Subscription, error) {
		if months < 1 || months > 120 {
			return nil, fmt.Errorf("%w: pause of %d months", ErrInvalidQuery, months)
		}
		if err := requireStatus(cur, StatusScheduled, StatusPaused); err != nil {
			return nil, err
		}
		next.Status, next.PauseDurationMonths = StatusPaused, months
		next.UpdatedEvent = ""
		if months == 1 {
			next.UpdatedEvent = EventPausePendingResume
		}
		return nil, nil
	})
}

// Resume ends the pause of a PAUSED record: it becomes SCHEDULED again
// (pause-resume) on its billing date.
func (c *Collector) Resume(ctx context.Context, subscriptionID string) (Change, error) {
	return c.admin(ctx, "resume", subscriptionID, func(cur, next *Subscription, _ time.Time) ([]*Subscription, error) {
		if err := requireStatus(cur, StatusPaused); err != nil {
			return nil, err
		}
		next.Status, next.PauseDurationMonths, next.UpdatedEvent = StatusScheduled, 0, EventPauseResume
		return nil, nil
	})
}

// ChangeBillingDate moves a SCHEDULED, ERROR or PAUSED record to another
// billing date (delete + put + history in one transaction). The new date's
// day becomes the anchor day; a Friday-billing record takes the Friday week
// of the new date.
func (c *Collector) ChangeBillingDate(ctx context.Context, subscriptionID string, date time.Time) (Change, error) {
	return c.admin(ctx, "change billing date", subscriptionID, func(cur, next *Subscription, _ time.Time) ([]*Subscription, error) {
		if err := requireStatus(cur, StatusScheduled, StatusError, StatusPaused); err != nil {
			return nil, err
		}
		if date.IsZero() {
			return nil, fmt.Errorf("%w: zero billing date", ErrInvalidDate)
		}
		d := date.UTC().Truncate(time.Second)
		next.BillingDate, next.BillingPeriod, next.AnchorDay = d, BillingPeriod(d), d.Day()
		if cur.BillingWeek != 0 {
			if w := FridayWeek(d); w != 0 {
				next.BillingWeek = w
			}
		}
		return nil, nil
	})
}

// ChangeTier changes the tier and amount of a SCHEDULED record. An upgrade
// applies to this period at once; a downgrade is marked pending
// (is_pending_downgrade) and applies from the next period, which the
// collector opens with the new tier and amount.
func (c *Collector) ChangeTier(ctx context.Context, subscriptionID, tier string, amount Amount, downgrade bool) (Change, error) {
	return c.admin(ctx, "change tier", subscriptionID, func(cur, next *Subscription, _ time.Time) ([]*Subscription, error) {
		if err := requireStatus(cur, StatusScheduled); err != nil {
			return nil, err
		}
		if tier == "" || amount < 0 {
			return nil, fmt.Errorf("%w: tier %q amount %s", ErrInvalidQuery, tier, amount)
		}
		if downgrade {
			next.IsPendingDowngrade, next.PendingTierName, next.PendingAmount = true, tier, amount
			return nil, nil
		}
		next.ReceiptTierName, next.Amount = tier, amount
		next.IsPendingDowngrade, next.PendingTierName, next.PendingAmount = false, "", 0
		return nil, nil
	})
}

// Reactivate opens a new SCHEDULED record for a user whose subscription
// ended (REACTIVATION, user-reactivated), billed on date with the tier,
// amount, term and Friday week of the user's latest record. The user must
// have no SCHEDULED, ERROR, ACHSENT or PAUSED record.
func (c *Collector) Reactivate(ctx context.Context, userID string, date time.Time) (Subscription, error) {
	var created Subscription
	_, err := c.single(ctx, "reactivate", userID, "", func(ctx context.Context, _ *Report) error {
		recs, err := c.cfg.Repository.ListByUser(ctx, userID)
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			return fmt.Errorf("%w: user %s has no records to reactivate", ErrNotFound, userID)
		}
		for _, r := range recs {
			if !r.Status.IsTerminal() {
				return fmt.Errorf("%w: user %s has an open record %s (%s)", ErrNotCollectible, userID, r.SubscriptionID, r.Status)
			}
		}
		last := recs[len(recs)-1]
		now := c.cfg.Clock.Now()
		for i := range recs {
			now = runTime(&recs[i], now) // after every row of the user
		}
		d := date.UTC().Truncate(time.Second)
		created = Subscription{
			UserID: userID, BillingDate: d, SubscriptionID: c.cfg.NewID(), Amount: last.Amount,
			Status: StatusScheduled, BillingPeriod: BillingPeriod(d), Process: ProcessReactivation,
			UpdatedEvent: EventUserReactivated, Term: last.Term, AnchorDay: d.Day(), ReceiptTierName: last.ReceiptTierName,
			CreatedDate: now, LastRunDate: now,
		}
		if last.BillingWeek != 0 {
			created.BillingWeek = FridayWeek(d)
		}
		for i := 0; ; i++ {
			err := c.cfg.Repository.Add(ctx, &created)
			if !IsHistoryKeyConflict(err) || i == historyKeyRetries {
				return err
			}
			created.LastRunDate = created.LastRunDate.Add(time.Millisecond)
			created.CreatedDate = created.LastRunDate
		}
	})
	return created, err
}

// openNext returns the next period's record for a record leaving SCHEDULED
// without an attempt (so the subscription goes on), or nil.
func (c *Collector) openNext(cur *Subscription, now time.Time) ([]*Subscription, error) {
	if !cur.InitialRunDate.IsZero() {
		return nil, nil
	}
	f, err := c.nextPeriod(context.Background(), ProcessNotIdentified, cur, now)
	if err != nil || f == nil {
		return nil, err
	}
	return []*Subscription{f}, nil
}
