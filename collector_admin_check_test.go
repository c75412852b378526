package billing_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/internal/preview"
	"github.com/dynabill/billing/memory"
)

// adminRules is what each admin change accepts and records, written out
// from the changes' documentation rather than read from the engine, so a
// change to the engine's table (a status added to Cancel or Waive, say
// ACHSENT, whose charge is still in flight at the bank) fails a test:
//
//   - Waive: a SCHEDULED or ERROR record (a charge that has not happened);
//   - Cancel: SCHEDULED, ERROR or PAUSED (every open period);
//   - Pause: SCHEDULED, or PAUSED to change its months;
//   - Resume: PAUSED;
//   - ChangeBillingDate: SCHEDULED, ERROR or PAUSED;
//   - ChangeTier: SCHEDULED.
//
// Each records its own change on the history row it writes.
var adminRules = map[preview.Op]struct {
	statuses []billing.Status
	change   billing.EventType
}{
	preview.Waive:      {[]billing.Status{billing.StatusScheduled, billing.StatusError}, billing.EventWaived},
	preview.Cancel:     {[]billing.Status{billing.StatusScheduled, billing.StatusError, billing.StatusPaused}, billing.EventCancelled},
	preview.Pause:      {[]billing.Status{billing.StatusScheduled, billing.StatusPaused}, billing.EventPaused},
	preview.Resume:     {[]billing.Status{billing.StatusPaused}, billing.EventResumed},
	preview.ChangeDate: {[]billing.Status{billing.StatusScheduled, billing.StatusError, billing.StatusPaused}, billing.EventBillingDateMoved},
	preview.ChangeTier: {[]billing.Status{billing.StatusScheduled}, billing.EventTierChanged},
}

// TestCheckChangeAgreesWithTheChange: for every admin change and every
// status, the change is applied exactly when adminRules accepts the
// status (and then records the rule's change on its history row), and
// refused otherwise; CheckChange refuses exactly when the change itself
// refuses, with the same error, and reads nothing; invalid inputs are
// refused alike.
func TestCheckChangeAgreesWithTheChange(t *testing.T) {
	t.Parallel()
	now := jan31.Add(time.Hour)
	changes := []struct {
		ch    preview.Change
		apply func(c *billing.Collector, ctx context.Context, id string) error
	}{
		{preview.Change{Op: preview.Waive}, func(c *billing.Collector, ctx context.Context, id string) error {
			_, err := c.Periods().WaiveByID(ctx, id)
			return err
		}},
		{preview.Change{Op: preview.Cancel}, func(c *billing.Collector, ctx context.Context, id string) error {
			_, err := c.Periods().Cancel(ctx, id)
			return err
		}},
		{preview.Change{Op: preview.Pause, Months: 2}, func(c *billing.Collector, ctx context.Context, id string) error {
			_, err := c.Periods().Pause(ctx, id, 2)
			return err
		}},
		{preview.Change{Op: preview.Resume}, func(c *billing.Collector, ctx context.Context, id string) error {
			_, err := c.Periods().Resume(ctx, id)
			return err
		}},
		{preview.Change{Op: preview.ChangeDate, Date: jan31.AddDate(0, 0, 3)}, func(c *billing.Collector, ctx context.Context, id string) error {
			_, err := c.Periods().Move(ctx, id, jan31.AddDate(0, 0, 3))
			return err
		}},
		{preview.Change{Op: preview.ChangeTier, Tier: "Premium:v1", Amount: 999}, func(c *billing.Collector, ctx context.Context, id string) error {
			_, err := c.Periods().ChangeTier(ctx, id, "Premium:v1", 999, false)
			return err
		}},
	}
	statuses := []billing.Status{billing.StatusScheduled, billing.StatusError, billing.StatusPaused, billing.StatusACHSent,
		billing.StatusCompleted, billing.StatusWaived, billing.StatusCancelled, billing.StatusStale}
	for _, tc := range changes {
		for _, st := range statuses {
			t.Run(fmt.Sprintf("%s/%s", tc.ch.Op, st), func(t *testing.T) {
				t.Parallel()
				clock := billingtest.NewClock(now)
				store := billingtest.NewMemoryStore(t, memory.Options{})
				repo := store.Repository()
				c, err := billing.NewCollector(billing.Config{Repository: repo, History: store.History(),
					Locker: billingtest.NewLocker(clock, time.Minute), Provider: billingtest.NewProvider(billingtest.ProviderOptions{Clock: clock}), Clock: clock})
				require.NoError(t, err)
				rec := billing.Period{UserID: "u1", SubscriptionID: "s1", BillingDate: jan31, BillingPeriod: billing.BillingPeriod(jan31),
					Amount: 499, Status: st, Term: billing.TermMonthly, AnchorDay: 31, ReceiptTierName: "Plus:v2",
					Process: billing.ProcessInitial, CreatedDate: jan31.Add(-time.Hour), LastRunDate: jan31.Add(-time.Hour)}
				if st == billing.StatusPaused {
					rec.PauseDurationMonths = 1
				}
				if st == billing.StatusACHSent {
					rec.Attempt, rec.InitialRunDate = 1, jan31.Add(-time.Hour)
				}
				require.NoError(t, repo.Add(t.Context(), &rec))

				rule, ok := adminRules[tc.ch.Op]
				require.True(t, ok, "no rule written for %s", tc.ch.Op)
				want := containsStatus(rule.statuses, st)
				before, err := store.History().ListBySubscription(t.Context(), "s1")
				require.NoError(t, err)
				checked := preview.CheckChange(t.Context(), c, tc.ch, &rec)
				applied := tc.apply(c, t.Context(), "s1")
				assert.Equal(t, want, applied == nil, "%s of a %s record: want accepted %v, got %v", tc.ch.Op, st, want, applied)
				if assert.Equal(t, applied == nil, checked == nil, "check: %v, change: %v", checked, applied) && checked != nil {
					assert.ErrorIs(t, checked, billing.ErrNotCollectible, "check: %v (rule %v)", checked, rule.statuses)
					assert.Equal(t, applied.Error(), checked.Error(), "the check and the change say different things")
				}
				rows, err := store.History().ListBySubscription(t.Context(), "s1")
				require.NoError(t, err)
				if want {
					if assert.Len(t, rows, len(before)+1, "one history row for the change") {
						assert.Equal(t, rule.change, rows[len(rows)-1].Change, "the change %s records", tc.ch.Op)
					}
				} else {
					assert.Equal(t, before, rows, "a refused change wrote history")
				}
			})
		}
	}

	t.Run("the engine's table", func(t *testing.T) {
		t.Parallel()
		for _, tc := range changes {
			assert.ElementsMatch(t, adminRules[tc.ch.Op].statuses, billing.AdminStatuses(tc.ch.Op), "statuses %s accepts", tc.ch.Op)
		}
		assert.Len(t, changes, len(adminRules), "a change without a rule, or a rule without a change")
	})

	t.Run("inputs", func(t *testing.T) {
		t.Parallel()
		clock := billingtest.NewClock(now)
		c, err := billing.NewCollector(billing.Config{Repository: billingtest.NewMemoryStore(t, memory.Options{}).Repository(),
			Locker: billingtest.NewLocker(clock, time.Minute), Provider: billingtest.NewProvider(billingtest.ProviderOptions{Clock: clock}), Clock: clock})
		require.NoError(t, err)
		rec := billing.Period{UserID: "u1", SubscriptionID: "s1", BillingDate: jan31, Status: billing.StatusScheduled}
		later := rec
		later.SubscriptionID, later.BillingDate = "s2", jan31.AddDate(0, 1, 0)
		var fe *billing.FieldError
		for _, bad := range []struct {
			ch    preview.Change
			field string
			err   error
		}{
			{preview.Change{Op: preview.Pause, Months: 0}, "", billing.ErrInvalidQuery},
			{preview.Change{Op: preview.Pause, Months: 121}, "", billing.ErrInvalidQuery},
			{preview.Change{Op: preview.ChangeTier, Tier: "Plus:v2", Amount: 0}, "amount", billing.ErrInvalidAmount},
			{preview.Change{Op: preview.ChangeTier, Tier: "Plus:v2", Amount: billing.DefaultMaxCharge + 1}, "amount", billing.ErrInvalidAmount},
			{preview.Change{Op: preview.ChangeTier, Amount: 499}, "tier", billing.ErrUnknownTier},
			{preview.Change{Op: preview.ChangeDate, Date: jan31.AddDate(-1, 0, 0)}, "billing_date", billing.ErrInvalidDate},
			{preview.Change{Op: preview.ChangeDate}, "billing_date", billing.ErrInvalidDate},
			{preview.Change{Op: preview.ChangeDate, Date: later.BillingDate, UserRecords: []billing.Period{rec, later}}, "", billing.ErrDateMove},
			{preview.Change{Op: "refund"}, "", billing.ErrInvalidQuery},
		} {
			err := preview.CheckChange(t.Context(), c, bad.ch, &rec)
			assert.ErrorIs(t, err, bad.err, "%+v", bad.ch)
			if bad.field != "" && assert.ErrorAs(t, err, &fe, "%+v", bad.ch) {
				assert.Equal(t, bad.field, fe.Field, "%+v: %v", bad.ch, err)
			}
		}
		// The same move without the user's records: only the date itself is checked.
		assert.NoError(t, preview.CheckChange(t.Context(), c, preview.Change{Op: preview.ChangeDate, Date: later.BillingDate}, &rec))
	})
}

func containsStatus(list []billing.Status, s billing.Status) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestCheckReactivateAndSubscribeAgreeWithTheCalls: the checks refuse
// what Reactivate and Subscribe refuse, with the same errors, and say
// what Subscribe then does.
func TestCheckReactivateAndSubscribeAgreeWithTheCalls(t *testing.T) {
	t.Parallel()
	clock := billingtest.NewClock(jan31.Add(time.Hour))
	store := billingtest.NewMemoryStore(t, memory.Options{})
	repo := store.Repository()
	c, err := billing.NewCollector(billing.Config{Repository: repo, History: store.History(),
		Locker: billingtest.NewLocker(clock, time.Minute), Provider: billingtest.NewProvider(billingtest.ProviderOptions{Clock: clock}), Clock: clock})
	require.NoError(t, err)
	ctx := t.Context()
	list := func() []billing.Period {
		recs, err := repo.ListByUser(ctx, "u1")
		require.NoError(t, err)
		return recs
	}
	req := billing.SubscribeRequest{RequestKey: "k1", UserID: "u1", Tier: "Plus:v2", Amount: 499}

	// No records: nothing to reactivate; a subscription is planned.
	assert.ErrorIs(t, preview.CheckReactivate(c, "u1", list(), jan31), billing.ErrNotFound)
	plan, err := preview.CheckSubscribe(ctx, c, req, list())
	require.NoError(t, err)
	assert.False(t, plan.Repeated)
	got, err := c.Subscribe(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, plan.Subscription.SubscriptionID, got.Subscription.SubscriptionID)
	assert.Equal(t, plan.Subscription.BillingDate, got.Subscription.BillingDate)
	assert.Equal(t, plan.Subscription.Status, got.Subscription.Status)

	// The same key again: repeated; another key: an open period.
	plan, err = preview.CheckSubscribe(ctx, c, req, list())
	require.NoError(t, err)
	assert.True(t, plan.Repeated)
	other := req
	other.RequestKey = "k2"
	_, checked := preview.CheckSubscribe(ctx, c, other, list())
	_, applied := c.Subscribe(ctx, other)
	var open *billing.OpenSubscriptionError
	assert.ErrorAs(t, checked, &open)
	require.Error(t, applied)
	assert.Equal(t, applied.Error(), checked.Error())
	bad := req
	bad.RequestKey, bad.Amount = "k3", 0 // a repeated key is answered first
	_, checked = preview.CheckSubscribe(ctx, c, bad, list())
	var fe *billing.FieldError
	if assert.ErrorAs(t, checked, &fe) {
		assert.Equal(t, "amount", fe.Field)
	}

	// An open period refuses reactivation; once cancelled, a date too old
	// is refused and a good one accepted, as by Reactivate.
	checked = preview.CheckReactivate(c, "u1", list(), jan31.AddDate(0, 0, 2))
	_, applied = c.Reactivate(ctx, "u1", jan31.AddDate(0, 0, 2))
	assert.ErrorIs(t, checked, billing.ErrNotCollectible)
	assert.Equal(t, applied.Error(), checked.Error())
	_, err = c.Periods().Cancel(ctx, got.Subscription.SubscriptionID)
	require.NoError(t, err)
	checked = preview.CheckReactivate(c, "u1", list(), jan31.AddDate(-1, 0, 0))
	_, applied = c.Reactivate(ctx, "u1", jan31.AddDate(-1, 0, 0))
	assert.ErrorIs(t, checked, billing.ErrInvalidDate)
	assert.Equal(t, applied.Error(), checked.Error())
	assert.NoError(t, preview.CheckReactivate(c, "u1", list(), jan31.AddDate(0, 0, 2)))
	_, err = c.Reactivate(ctx, "u1", jan31.AddDate(0, 0, 2))
	assert.NoError(t, err)
	assert.True(t, errors.Is(preview.CheckReactivate(c, "u1", list(), jan31.AddDate(0, 0, 3)), billing.ErrNotCollectible))
}
