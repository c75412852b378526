package billing_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/internal/storetest"
	"github.com/dynabill/billing/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// userStore is a layout the by-user calls are tested on, with its history.
type userStore struct {
	name string
	open func(t *testing.T, clock billing.Clock) (billing.Repository, billing.History)
	user string
}

var singleUserID = layout.SubscriptionRef{AccountID: "acct-1", SubscriptionID: "S1", SKU: "PLUS"}.UserID()

func userStores() []userStore {
	return []userStore{
		{"memory-legacy", func(t *testing.T, _ billing.Clock) (billing.Repository, billing.History) {
			s := billingtest.NewMemoryStore(t, memory.Options{})
			return s.Repository(), s.History()
		}, "u1"},
		{"memory-single", func(t *testing.T, clock billing.Clock) (billing.Repository, billing.History) {
			s := billingtest.NewMemorySingleTable(t, memory.SingleTableOptions{Clock: clock})
			return s.Repository(), s.History()
		}, singleUserID},
		{"dynamodb-legacy", func(t *testing.T, _ billing.Clock) (billing.Repository, billing.History) {
			return storetest.DynamoStores(t, memory.Options{})
		}, "u1"},
		{"dynamodb-single", func(t *testing.T, clock billing.Clock) (billing.Repository, billing.History) {
			s := singleTableOnServer(t, clock, memory.Options{})
			return s, s.History()
		}, singleUserID},
	}
}

// memoryUserStores are the in-memory layouts, for the refusal tests.
func memoryUserStores() []userStore { return userStores()[:2] }

type userEnv struct {
	c     *billing.Collector
	repo  billing.Repository
	hist  billing.History
	clock *billingtest.Clock
	pay   *billingtest.Provider
	user  string
}

var feb3 = time.Date(2025, 2, 3, 9, 0, 0, 0, time.UTC)

func newUserEnv(t *testing.T, st userStore, wrap ...func(billing.Repository) billing.Repository) *userEnv {
	t.Helper()
	clock := billingtest.NewClock(feb3)
	repo, hist := st.open(t, clock)
	e := &userEnv{repo: repo, hist: hist, clock: clock, user: st.user,
		pay: billingtest.NewProvider(billingtest.ProviderOptions{Clock: clock})}
	for _, w := range wrap {
		repo = w(repo)
	}
	c, err := billing.NewCollector(billing.Config{Repository: repo, History: hist, Locker: billingtest.NewLocker(clock, time.Minute),
		Provider: e.pay, Clock: clock,
		Prices: billing.PriceListMap{"Basic:v1": billing.MustParseAmount("4.99"), "Plus:v2": billing.MustParseAmount("9.99"),
			"Pro:v1": billing.MustParseAmount("19.99")}})
	require.NoError(t, err)
	e.c = c
	return e
}

// rows returns the user's history rows.
func (e *userEnv) rows(t *testing.T) []billing.Period {
	t.Helper()
	rows, err := e.hist.ListByUser(t.Context(), e.user)
	require.NoError(t, err)
	return rows
}

// subscribeAndPay subscribes the user to Plus:v2 and collects the first
// period: one paid period, the next SCHEDULED.
func (e *userEnv) subscribeAndPay(t *testing.T) {
	t.Helper()
	_, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "order-1", UserID: e.user, Tier: "Plus:v2"})
	require.NoError(t, err)
	e.clock.Advance(time.Hour)
	_, err = e.c.CollectUser(t.Context(), e.user, billing.ProcessWebhook)
	require.NoError(t, err)
	require.Equal(t, 1, e.pay.CallCount())
}

func ur(user, key string) billing.UserRequest {
	return billing.UserRequest{UserID: user, RequestKey: key}
}

// TestByUserFlow: subscribe, change plan, pause, resume and cancel, each
// by the user, on both layouts in memory and on the local DynamoDB
// server: every period changed, each change one history row that records
// its request, one charge only, and the refund of a cancellation now.
func TestByUserFlow(t *testing.T) {
	t.Parallel()
	for _, st := range userStores() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			e := newUserEnv(t, st)
			e.subscribeAndPay(t)

			v, err := e.c.Subscription(ctx, e.user)
			require.NoError(t, err)
			assert.Equal(t, billing.SubscriptionActive, v.Status)
			assert.Equal(t, "Plus:v2", v.Tier)
			assert.Equal(t, billing.MustParseAmount("9.99"), v.Amount)
			require.Len(t, v.Paid, 1)
			require.Len(t, v.Open, 1)
			assert.Equal(t, feb3.AddDate(0, 1, 0), v.NextBillingDate)
			assert.Equal(t, feb3.AddDate(0, 1, 0), v.PaidThrough)
			before := len(e.rows(t))

			up, err := e.c.ChangePlan(ctx, billing.ChangePlanRequest{UserRequest: ur(e.user, "plan-1"), Tier: "Pro:v1"})
			require.NoError(t, err)
			require.Len(t, up.Changes, 1)
			assert.Equal(t, billing.MustParseAmount("19.99"), up.Changes[0].After.Amount)
			assert.Equal(t, "Pro:v1", up.Subscription.Tier)

			p, err := e.c.Pause(ctx, billing.PauseRequest{UserRequest: ur(e.user, "pause-1"), Months: 2})
			require.NoError(t, err)
			// Asked in the paid month: the month runs on, the pause begins
			// on the date it skips.
			assert.Equal(t, billing.SubscriptionActive, p.Subscription.Status)
			assert.Equal(t, feb3.AddDate(0, 1, 0), p.Subscription.PauseAt)
			assert.Equal(t, billing.StatusPaused, p.Changes[0].After.Status)
			assert.Equal(t, 2, p.Changes[0].After.PauseDurationMonths)

			r, err := e.c.Resume(ctx, billing.ResumeRequest{UserRequest: ur(e.user, "resume-1")})
			require.NoError(t, err)
			assert.Equal(t, billing.SubscriptionActive, r.Subscription.Status)
			assert.Equal(t, billing.StatusScheduled, r.Changes[0].After.Status)

			e.clock.Set(feb3.Add(14 * 24 * time.Hour)) // half of the 28-day paid period left
			cx, err := e.c.Cancel(ctx, billing.CancelRequest{UserRequest: ur(e.user, "cancel-1"), When: billing.CancelNow})
			require.NoError(t, err)
			assert.Equal(t, billing.SubscriptionEnded, cx.Subscription.Status)
			assert.Equal(t, billing.StatusCancelled, cx.Changes[0].After.Status)
			assert.Equal(t, billing.MustParseAmount("4.99"), cx.Refund, "half of 9.99, rounded down")
			assert.Equal(t, cx.Subscription.Paid[0].SubscriptionID, cx.RefundPeriodID)
			assert.Equal(t, e.clock.Now(), cx.AccessUntil)

			rows := e.rows(t)
			require.Len(t, rows, before+4, "one history row per change")
			for i, op := range []string{"change+plan", "pause", "resume", "cancel"} {
				assert.Contains(t, rows[before+i].Request, "Op="+op)
			}
			assert.Equal(t, 1, e.pay.CallCount(), "nothing charged by a change")
		})
	}
}

// TestSubscribeRequestKeyReused: a subscribe request key given again with
// another tier and term is a RequestKeyError naming them, and writes
// nothing; the exact request again is a repeat, also after the period's
// tier changed.
func TestSubscribeRequestKeyReused(t *testing.T) {
	t.Parallel()
	for _, st := range userStores() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			e := newUserEnv(t, st)
			first := billing.SubscribeRequest{RequestKey: "order-9", UserID: e.user, Tier: "Basic:v1"}
			sub, err := e.c.Subscribe(ctx, first)
			require.NoError(t, err)
			n := len(e.rows(t))

			other := first
			other.Tier, other.Term = "Plus:v2", billing.TermYearly
			_, err = e.c.Subscribe(ctx, other)
			require.ErrorIs(t, err, billing.ErrRequestKeyReused)
			var rk *billing.RequestKeyError
			require.ErrorAs(t, err, &rk)
			assert.Equal(t, []string{"Term", "Tier"}, rk.Fields)
			assert.Equal(t, "subscribe", rk.Op)
			assert.Len(t, e.rows(t), n, "nothing written")

			_, err = e.c.Periods().ChangeTier(ctx, sub.Subscription.SubscriptionID, "Plus:v2", billing.ListPrice, false)
			require.NoError(t, err)
			again, err := e.c.Subscribe(ctx, first)
			require.NoError(t, err, "an exact repeat after a tier change")
			assert.True(t, again.Repeated)
			assert.Equal(t, sub.Subscription.SubscriptionID, again.Subscription.SubscriptionID)
			assert.Equal(t, "Plus:v2", again.Subscription.ReceiptTierName, "the period as it is now")
		})
	}
}

// TestSubscribeRepeatOfAnOldRow: a first period whose opening row records
// no request (written before the library recorded requests) answers any
// request with its key as a repeat.
func TestSubscribeRepeatOfAnOldRow(t *testing.T) {
	t.Parallel()
	e := newUserEnv(t, memoryUserStores()[0])
	ctx := t.Context()
	old := billing.Period{UserID: e.user, SubscriptionID: billing.FirstPeriodID(e.user, "order-1"), BillingDate: feb3,
		Amount: billing.MustParseAmount("4.99"), Status: billing.StatusScheduled, BillingPeriod: billing.BillingPeriod(feb3),
		Term: billing.TermMonthly, ReceiptTierName: "Basic:v1", CreatedDate: feb3, LastRunDate: feb3}
	require.NoError(t, e.repo.Add(ctx, &old))
	got, err := e.c.Subscribe(ctx, billing.SubscribeRequest{RequestKey: "order-1", UserID: e.user, Tier: "Plus:v2"})
	require.NoError(t, err)
	assert.True(t, got.Repeated)
	assert.Equal(t, "Basic:v1", got.Subscription.ReceiptTierName)
}

// TestByUserRequestKeyReused: each keyed call by user refuses its key given
// again with other parameters (or for another call), naming the fields,
// and writes nothing.
func TestByUserRequestKeyReused(t *testing.T) {
	t.Parallel()
	for _, st := range memoryUserStores() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			e := newUserEnv(t, st)
			e.subscribeAndPay(t)
			u := e.user
			_, err := e.c.ChangePlan(ctx, billing.ChangePlanRequest{UserRequest: ur(u, "k-plan"), Tier: "Pro:v1"})
			require.NoError(t, err)
			_, err = e.c.MoveBillingDate(ctx, billing.MoveBillingDateRequest{UserRequest: ur(u, "k-move"), Date: feb3.AddDate(0, 1, 2)})
			require.NoError(t, err)
			_, err = e.c.Pause(ctx, billing.PauseRequest{UserRequest: ur(u, "k-pause"), Months: 2})
			require.NoError(t, err)
			_, err = e.c.Resume(ctx, billing.ResumeRequest{UserRequest: ur(u, "k-resume")})
			require.NoError(t, err)
			_, err = e.c.Cancel(ctx, billing.CancelRequest{UserRequest: ur(u, "k-cancel")})
			require.NoError(t, err)
			n := len(e.rows(t))

			cases := []struct {
				name   string
				call   func() error
				op     string
				fields []string
			}{
				{"plan", func() error {
					_, err := e.c.ChangePlan(ctx, billing.ChangePlanRequest{UserRequest: ur(u, "k-plan"), Tier: "Basic:v1", When: billing.ChangeAtNextPeriod})
					return err
				}, "change plan", []string{"Tier", "When"}},
				{"move", func() error {
					_, err := e.c.MoveBillingDate(ctx, billing.MoveBillingDateRequest{UserRequest: ur(u, "k-move"), Date: feb3.AddDate(0, 1, 3)})
					return err
				}, "move billing date", []string{"Date"}},
				{"pause", func() error {
					_, err := e.c.Pause(ctx, billing.PauseRequest{UserRequest: ur(u, "k-pause"), Months: 3})
					return err
				}, "pause", []string{"Months"}},
				{"resume key for a cancel", func() error {
					_, err := e.c.Cancel(ctx, billing.CancelRequest{UserRequest: ur(u, "k-resume")})
					return err
				}, "resume", []string{"Op", "When"}},
				{"cancel", func() error {
					_, err := e.c.Cancel(ctx, billing.CancelRequest{UserRequest: ur(u, "k-cancel"), When: billing.CancelNow})
					return err
				}, "cancel", []string{"When"}},
				{"subscribe key for a pause", func() error {
					_, err := e.c.Pause(ctx, billing.PauseRequest{UserRequest: ur(u, "order-1"), Months: 1})
					return err
				}, "subscribe", []string{"Interval", "Months", "Op", "Term", "Tier"}},
			}
			for _, tc := range cases {
				err := tc.call()
				require.ErrorIs(t, err, billing.ErrRequestKeyReused, tc.name)
				var rk *billing.RequestKeyError
				require.ErrorAs(t, err, &rk, tc.name)
				assert.Equal(t, tc.op, rk.Op, tc.name)
				assert.Equal(t, tc.fields, rk.Fields, tc.name)
			}
			assert.Len(t, e.rows(t), n, "nothing written")
		})
	}
}

// TestByUserExactRepeatAnswersFirst: the same request again answers what
// the first call did, Repeated set, and writes nothing; also once the
// subscription has changed since.
func TestByUserExactRepeatAnswersFirst(t *testing.T) {
	t.Parallel()
	for _, st := range userStores() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			e := newUserEnv(t, st)
			e.subscribeAndPay(t)
			req := billing.PauseRequest{UserRequest: ur(e.user, "pause-7"), Months: 2}
			first, err := e.c.Pause(ctx, req)
			require.NoError(t, err)
			require.False(t, first.Repeated)
			_, err = e.c.Resume(ctx, billing.ResumeRequest{UserRequest: ur(e.user, "resume-7")})
			require.NoError(t, err)
			n := len(e.rows(t))

			again, err := e.c.Pause(ctx, req)
			require.NoError(t, err)
			assert.True(t, again.Repeated)
			require.Len(t, again.Changes, 1)
			assert.Equal(t, first.Changes[0].After.SubscriptionID, again.Changes[0].After.SubscriptionID)
			assert.Equal(t, billing.StatusPaused, again.Changes[0].After.Status)
			assert.Equal(t, 2, again.Changes[0].After.PauseDurationMonths)
			assert.Equal(t, billing.StatusScheduled, again.Changes[0].Before.Status)
			assert.Equal(t, billing.SubscriptionActive, again.Subscription.Status, "the subscription as it is now: resumed")
			assert.Len(t, e.rows(t), n, "nothing written")
		})
	}
}

// TestChangeTierToSameTierWritesNothing: a tier change to the tier and
// amount the period has is ErrNoChange and writes no history row, by
// period and by user.
func TestChangeTierToSameTierWritesNothing(t *testing.T) {
	t.Parallel()
	for _, st := range memoryUserStores() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			e := newUserEnv(t, st)
			e.subscribeAndPay(t)
			v, err := e.c.Subscription(ctx, e.user)
			require.NoError(t, err)
			n := len(e.rows(t))
			_, err = e.c.Periods().ChangeTier(ctx, v.Open[0].SubscriptionID, "Plus:v2", billing.ListPrice, false)
			require.ErrorIs(t, err, billing.ErrNoChange)
			_, err = e.c.Periods().ChangeTier(ctx, v.Open[0].SubscriptionID, "Plus:v2", billing.ListPrice, true)
			require.ErrorIs(t, err, billing.ErrNoChange, "a downgrade to what it has")
			_, err = e.c.ChangePlan(ctx, billing.ChangePlanRequest{UserRequest: ur(e.user, "same"), Tier: "Plus:v2"})
			require.ErrorIs(t, err, billing.ErrNoChange)
			assert.Len(t, e.rows(t), n, "no history row")
			got, err := e.repo.ListByUser(ctx, e.user)
			require.NoError(t, err)
			assert.Equal(t, v.Open[0].LastRunDate, got[len(got)-1].LastRunDate, "the period unwritten")
		})
	}
}

// TestPeriodCallGivenUserID: a period call given a user ID is still
// ErrNotFound, and says that the ID is a user's and what to call instead.
func TestPeriodCallGivenUserID(t *testing.T) {
	t.Parallel()
	for _, st := range memoryUserStores() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			e := newUserEnv(t, st)
			e.subscribeAndPay(t)
			n := len(e.rows(t))
			_, err := e.c.Periods().Cancel(ctx, e.user)
			require.ErrorIs(t, err, billing.ErrNotFound)
			assert.ErrorContains(t, err, "is a user ID: this call expects a period ID; see Collector.Subscription")
			_, err = e.c.Periods().Repay(ctx, e.user)
			assert.ErrorContains(t, err, "expects a period ID")
			_, err = e.c.Periods().Cancel(ctx, "nobody")
			require.ErrorIs(t, err, billing.ErrNotFound)
			assert.NotContains(t, err.Error(), "user ID", "an ID that is no user's gets no hint")
			assert.Len(t, e.rows(t), n)
		})
	}
}

// TestPauseZeroMonthsIsFieldError: a pause of 0 months is a FieldError
// naming months (still ErrInvalidQuery), by period and by user.
func TestPauseZeroMonthsIsFieldError(t *testing.T) {
	t.Parallel()
	e := newUserEnv(t, memoryUserStores()[0])
	ctx := t.Context()
	e.subscribeAndPay(t)
	v, err := e.c.Subscription(ctx, e.user)
	require.NoError(t, err)
	_, err = e.c.Periods().Pause(ctx, v.Open[0].SubscriptionID, 0)
	var fe *billing.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "months", fe.Field)
	assert.Equal(t, "0", fe.Value)
	assert.ErrorIs(t, err, billing.ErrInvalidQuery)
	_, err = e.c.Pause(ctx, billing.PauseRequest{UserRequest: ur(e.user, "p0")})
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "months", fe.Field)
}

// failingUpdates fails the Update calls whose numbers (from 1) are in fail,
// before writing: a crash between two writes.
type failingUpdates struct {
	billing.Repository
	n    int
	fail map[int]bool
}

func (f *failingUpdates) Update(ctx context.Context, prev, next *billing.Period, create ...*billing.Period) error {
	f.n++
	if f.fail[f.n] {
		return errors.New("crash")
	}
	return f.Repository.Update(ctx, prev, next, create...)
}

// TestByUserCrashBetweenPeriodsCompletedByRepeat: a cancellation of a user
// with an owed ERROR period and the next SCHEDULED one that stops after the
// first period leaves that one cancelled; the same request again cancels
// the other, and only it, and a third time is a repeat. Without
// ForgiveOwed the owed period refuses the cancellation, unwritten.
func TestByUserCrashBetweenPeriodsCompletedByRepeat(t *testing.T) {
	t.Parallel()
	for _, st := range userStores() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			fu := &failingUpdates{fail: map[int]bool{2: true}}
			e := newUserEnv(t, st, func(r billing.Repository) billing.Repository { fu.Repository = r; return fu })
			owed := billing.Period{UserID: e.user, SubscriptionID: "p-jan", BillingDate: feb3.AddDate(0, 0, -7),
				Amount: billing.MustParseAmount("9.99"), Status: billing.StatusError, BillingPeriod: "01/2025", Term: billing.TermMonthly,
				ReceiptTierName: "Plus:v2", InitialRunDate: feb3.AddDate(0, 0, -7), CreatedDate: feb3.AddDate(0, 0, -8), LastRunDate: feb3.AddDate(0, 0, -7)}
			next := owed
			next.SubscriptionID, next.BillingDate, next.Status, next.BillingPeriod, next.InitialRunDate = "p-feb", feb3.AddDate(0, 0, 21), billing.StatusScheduled, "02/2025", time.Time{}
			next.LastRunDate = owed.LastRunDate.Add(time.Second)
			require.NoError(t, e.repo.Add(ctx, &owed))
			require.NoError(t, e.repo.Add(ctx, &next))
			_, err := e.c.Cancel(ctx, billing.CancelRequest{UserRequest: ur(e.user, "cancel-8")})
			require.ErrorIs(t, err, billing.ErrNotCollectible, "an owed period is not forgiven unasked")
			require.ErrorContains(t, err, "p-jan is ERROR")
			require.Empty(t, e.rows(t)[len(e.rows(t))-1].Request, "nothing written")
			req := billing.CancelRequest{UserRequest: ur(e.user, "cancel-9"), ForgiveOwed: true}

			_, err = e.c.Cancel(ctx, req)
			require.ErrorContains(t, err, "crash")
			recs, err := e.repo.ListByUser(ctx, e.user)
			require.NoError(t, err)
			assert.Equal(t, billing.StatusCancelled, recs[0].Status)
			assert.Equal(t, billing.StatusScheduled, recs[1].Status, "left by the crash")

			// Meanwhile another period opens: the repeat does not touch it.
			later := next
			later.SubscriptionID, later.BillingDate, later.BillingPeriod = "p-mar", feb3.AddDate(0, 1, 21), "03/2025"
			later.Status = billing.StatusCompleted // not open: the legacy store allows one open SCHEDULED
			later.LastRunDate = next.LastRunDate.Add(time.Second)
			require.NoError(t, e.repo.Add(ctx, &later))

			done, err := e.c.Cancel(ctx, req)
			require.NoError(t, err)
			assert.False(t, done.Repeated, "it wrote the rest")
			require.Len(t, done.Changes, 2)
			assert.Equal(t, "p-jan", done.Changes[0].After.SubscriptionID)
			assert.Equal(t, billing.StatusError, done.Changes[0].Before.Status)
			assert.Equal(t, "p-feb", done.Changes[1].After.SubscriptionID)
			assert.Equal(t, billing.StatusCancelled, done.Changes[1].After.Status)
			recs, err = e.repo.ListByUser(ctx, e.user)
			require.NoError(t, err)
			require.Len(t, recs, 3)
			assert.Equal(t, billing.StatusCancelled, recs[1].Status)

			again, err := e.c.Cancel(ctx, req)
			require.NoError(t, err)
			assert.True(t, again.Repeated)
			assert.Len(t, again.Changes, 2)
			rows := e.rows(t)
			stamped := 0
			for _, r := range rows {
				if r.Request != "" {
					stamped++
				}
			}
			assert.Equal(t, 2, stamped, "one history row per period, each once")
			assert.Equal(t, 0, e.pay.CallCount())
		})
	}
}

// TestByUserResolvesAttemptInFlight: a cancellation by user while the
// first period's charge is in flight and the processor unreachable is
// refused (ErrAttemptInFlight) and writes nothing; the same request once
// the processor answers records the charge once and cancels the period
// it opened, charging nothing more.
func TestByUserResolvesAttemptInFlight(t *testing.T) {
	t.Parallel()
	for _, st := range memoryUserStores() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			e := newUserEnv(t, st)
			sub, err := e.c.Subscribe(ctx, billing.SubscribeRequest{RequestKey: "order-1", UserID: e.user, Tier: "Plus:v2"})
			require.NoError(t, err)
			id := sub.Subscription.SubscriptionID
			e.pay.SetAttempt(id, 1, billingtest.UnknownAfterCharge(billingtest.Succeeded(), nil))
			e.clock.Advance(time.Hour)
			_, err = e.c.CollectUser(ctx, e.user, billing.ProcessWebhook)
			require.ErrorIs(t, err, billing.ErrAttemptInFlight)
			require.Len(t, e.pay.ChargesFor(id), 1, "the processor charged")
			e.pay.SetUnreachable(true)
			n := len(e.rows(t))

			req := billing.CancelRequest{UserRequest: ur(e.user, "cancel-1")}
			_, err = e.c.Cancel(ctx, req)
			require.ErrorIs(t, err, billing.ErrAttemptInFlight)
			assert.Len(t, e.rows(t), n, "nothing written")
			v, err := e.c.Subscription(ctx, e.user)
			require.NoError(t, err)
			require.Len(t, v.InFlight, 1)
			assert.Equal(t, billing.StatusScheduled, v.InFlight[0].Status)

			e.pay.SetUnreachable(false)
			done, err := e.c.Cancel(ctx, req)
			require.NoError(t, err)
			require.Len(t, done.Changes, 1)
			assert.NotEqual(t, id, done.Changes[0].After.SubscriptionID, "the period the charge opened")
			assert.Equal(t, billing.StatusCancelled, done.Changes[0].After.Status)
			require.Len(t, done.Subscription.Paid, 1)
			assert.Equal(t, id, done.Subscription.Paid[0].SubscriptionID, "the charge recorded")
			// Cancelled at period end: active until the paid period ends.
			assert.Equal(t, billing.SubscriptionActive, done.Subscription.Status)
			assert.Equal(t, done.Subscription.PaidThrough, done.Subscription.CancelAt)
			assert.Equal(t, done.Subscription.PaidThrough, done.AccessUntil)
			assert.Len(t, e.pay.ChargesFor(id), 1, "charged once")
			assert.Len(t, e.pay.Charges(), 1)
		})
	}
}
