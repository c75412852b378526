package billing_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/internal/preview"
	"github.com/dynabill/billing/internal/storetest"
	"github.com/dynabill/billing/memory"
)

// comebackStore is a layout the come-back tests run on, with its history.
type comebackStore struct {
	name string
	open func(t *testing.T, clock billing.Clock) (billing.Repository, billing.History)
	user string
}

// comebackStores are both layouts, in memory and on the local DynamoDB
// server (moto).
func comebackStores() []comebackStore {
	single := layout.SubscriptionRef{AccountID: "acct-1", SubscriptionID: "S1", SKU: "PLUS"}.UserID()
	return []comebackStore{
		{"memory-legacy", func(t *testing.T, _ billing.Clock) (billing.Repository, billing.History) {
			s := billingtest.NewMemoryStore(t, memory.Options{})
			return s.Repository(), s.History()
		}, "u1"},
		{"memory-single", func(t *testing.T, clock billing.Clock) (billing.Repository, billing.History) {
			s := billingtest.NewMemorySingleTable(t, memory.SingleTableOptions{Clock: clock, Table: dynamostore.SingleTableConfig{}})
			return s.Repository(), s.History()
		}, single},
		{"dynamodb-legacy", func(t *testing.T, _ billing.Clock) (billing.Repository, billing.History) {
			return storetest.DynamoStores(t, memory.Options{})
		}, "u1"},
		{"dynamodb-single", func(t *testing.T, clock billing.Clock) (billing.Repository, billing.History) {
			s := singleTableOnServer(t, clock, memory.Options{})
			return s, s.History()
		}, single},
	}
}

// comebackEnv is a collector on one store, its clock at jan31+1h.
type comebackEnv struct {
	t     *testing.T
	c     *billing.Collector
	repo  billing.Repository
	hist  billing.History
	clock *billingtest.Clock
	pay   *billingtest.Provider
	user  string
}

func newComebackEnv(t *testing.T, st comebackStore, wrap ...func(billing.Repository) billing.Repository) *comebackEnv {
	t.Helper()
	clock := billingtest.NewClock(jan31.Add(time.Hour))
	repo, hist := st.open(t, clock)
	e := &comebackEnv{t: t, repo: repo, hist: hist, clock: clock, user: st.user,
		pay: billingtest.NewProvider(billingtest.ProviderOptions{Clock: clock})}
	var used billing.Repository = repo
	for _, w := range wrap {
		used = w(used)
	}
	c, err := billing.NewCollector(billing.Config{Repository: used, History: hist, Provider: e.pay, Clock: clock,
		Locker: billingtest.NewLocker(clock, time.Minute)})
	require.NoError(t, err)
	e.c = c
	return e
}

func (e *comebackEnv) records() []billing.Period {
	e.t.Helper()
	recs, err := e.repo.ListByUser(e.t.Context(), e.user)
	require.NoError(e.t, err)
	return recs
}

func (e *comebackEnv) history() []billing.Period {
	e.t.Helper()
	rows, err := e.hist.ListByUser(e.t.Context(), e.user)
	require.NoError(e.t, err)
	return rows
}

// runAt runs the scheduled collection an hour after date.
func (e *comebackEnv) runAt(date time.Time) *billing.Report {
	e.t.Helper()
	e.clock.Set(date.Add(time.Hour))
	return runToCompletion(e.t, e.c, billing.RunScheduled)
}

// cancelAtPeriodEnd subscribes the user on jan31+1h, collects the first
// period and cancels the renewal the collection opened: the user keeps
// the paid month until Feb 29 and is not charged again. It returns the
// cancelled renewal.
func (e *comebackEnv) cancelAtPeriodEnd() billing.Period {
	e.t.Helper()
	ctx := e.t.Context()
	first, err := e.c.Subscribe(ctx, billing.SubscribeRequest{RequestKey: "signup", UserID: e.user, Tier: "Plus:v2",
		Amount: billing.MustParseAmount("4.99"), FirstBillingDate: jan31.Add(time.Hour)})
	require.NoError(e.t, err)
	rep := e.runAt(first.Subscription.BillingDate)
	require.Equal(e.t, 1, rep.Collected, "%+v", rep)
	recs := e.records()
	require.Len(e.t, recs, 2)
	renewal := recs[1]
	require.Equal(e.t, billing.StatusScheduled, renewal.Status)
	require.Equal(e.t, time.Date(2024, 2, 29, 16, 0, 0, 0, time.UTC), renewal.BillingDate.UTC(), "anchored on the 31st")
	e.clock.Set(jan31.AddDate(0, 0, 3))
	ch, err := e.c.Periods().Cancel(ctx, renewal.SubscriptionID)
	require.NoError(e.t, err)
	require.Equal(e.t, billing.StatusCancelled, ch.After.Status)
	return ch.After
}

// TestComeBackOnTheRenewalDate: a user who cancelled at period end comes
// back, by Reactivate or by Subscribe, on the day the paid period ends —
// the cancelled renewal's date. The subscription goes on from that very
// date (no gap), each period after it is charged exactly once, a repeated
// Subscribe answers the first result, and the cancelled renewal's history
// rows are all still there. Before, both calls failed with
// ErrAlreadyExists on every retry, because the never-charged CANCELLED
// record held the key.
func TestComeBackOnTheRenewalDate(t *testing.T) {
	t.Parallel()
	for _, st := range comebackStores() {
		for _, how := range []string{"reactivate", "subscribe"} {
			t.Run(st.name+"/"+how, func(t *testing.T) {
				t.Parallel()
				ctx := t.Context()
				e := newComebackEnv(t, st)
				cancelled := e.cancelAtPeriodEnd()
				before := e.history()
				e.clock.Set(jan31.AddDate(0, 0, 10))

				var back billing.Period
				req := billing.SubscribeRequest{RequestKey: "comeback", UserID: e.user, Tier: "Pro:v1",
					Amount: billing.MustParseAmount("9.99"), FirstBillingDate: cancelled.BillingDate}
				switch how {
				case "reactivate":
					r, err := e.c.Reactivate(ctx, e.user, cancelled.BillingDate)
					require.NoError(t, err)
					back = r
					assert.Equal(t, cancelled.SubscriptionID, back.SubscriptionID, "the cancelled renewal goes on")
					assert.Equal(t, billing.ProcessReactivation, back.Process)
					assert.Equal(t, 31, back.AnchorDay, "its anchor kept")
				case "subscribe":
					r, err := e.c.Subscribe(ctx, req)
					require.NoError(t, err)
					require.False(t, r.Repeated)
					back = r.Subscription
					assert.Equal(t, billing.FirstPeriodID(e.user, "comeback"), back.SubscriptionID)
					assert.Equal(t, "Pro:v1", back.ReceiptTierName)
				}
				assert.Equal(t, billing.StatusScheduled, back.Status)
				assert.True(t, back.BillingDate.Equal(cancelled.BillingDate), "no gap: %v", back.BillingDate)

				recs := e.records()
				require.Len(t, recs, 2, "reopened in place, nothing beside it")
				assert.Equal(t, back.SubscriptionID, recs[1].SubscriptionID)
				assert.Equal(t, billing.StatusScheduled, recs[1].Status)
				assert.True(t, recs[1].CompletionDate.IsZero(), "the cancellation's completion date stays behind")
				got, err := e.repo.GetByID(ctx, back.SubscriptionID)
				require.NoError(t, err)
				assert.True(t, got.BillingDate.Equal(cancelled.BillingDate))

				// History: every row before is still there, unchanged, and
				// one row more records the come-back.
				after := e.history()
				require.Len(t, after, len(before)+1)
				for i := range before {
					assert.Equal(t, before[i].SubscriptionID, after[i].SubscriptionID)
					assert.Equal(t, before[i].Status, after[i].Status)
					assert.True(t, before[i].LastRunDate.Equal(after[i].LastRunDate), "row %d replaced", i)
				}
				assert.Equal(t, billing.StatusCancelled, after[len(before)-1].Status, "the cancellation's row")
				assert.Equal(t, back.SubscriptionID, after[len(before)].SubscriptionID)
				assert.Equal(t, billing.StatusScheduled, after[len(before)].Status)

				if how == "subscribe" {
					e.clock.Advance(time.Hour)
					again, err := e.c.Subscribe(ctx, req)
					require.NoError(t, err)
					assert.True(t, again.Repeated, "a repeat answers the first result")
					assert.Equal(t, back.SubscriptionID, again.Subscription.SubscriptionID)
					assert.Len(t, e.history(), len(after), "a repeat wrote")
				}

				// Three months on: exactly one charge per period, from the
				// cancelled renewal's date.
				for _, d := range []time.Time{
					time.Date(2024, 2, 29, 16, 0, 0, 0, time.UTC),
					time.Date(2024, 3, 31, 16, 0, 0, 0, time.UTC),
					time.Date(2024, 4, 30, 16, 0, 0, 0, time.UTC),
				} {
					rep := e.runAt(d)
					require.Equal(t, 1, rep.Collected, "%v: %+v", d, rep)
				}
				calls := e.pay.Calls()
				require.Len(t, calls, 4, "Jan 31 and the three periods after the come-back")
				for i, want := range []string{"2024-01-31", "2024-02-29", "2024-03-31", "2024-04-30"} {
					assert.Equal(t, want, calls[i].Request.BillingDate.UTC().Format(time.DateOnly))
					assert.False(t, calls[i].Replayed)
				}
				assert.Equal(t, back.SubscriptionID, calls[1].Request.SubscriptionID)
				billingtest.RequireNoDoubleCharge(t, e.pay)
				recs = e.records()
				require.Len(t, recs, 5)
				assert.Equal(t, billing.StatusScheduled, recs[4].Status, "the subscription goes on")
			})
		}
	}
}

// TestComeBackInsidePaidPeriodRefused: a first billing date before the
// end of the user's last paid period (its next billing date) bills days
// already paid for and is refused, by Subscribe and Reactivate alike,
// with a *FieldError wrapping ErrInvalidDate naming the paid period and
// the first free date; the end date itself is accepted. Before, only a
// date on or before the paid period's billing date was refused: a date a
// day after it billed the paid month again.
func TestComeBackInsidePaidPeriodRefused(t *testing.T) {
	t.Parallel()
	paidOn := jan31.Add(time.Hour)
	end := time.Date(2024, 2, 29, 16, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		date time.Time
		ok   bool
	}{
		{"day after paid billing date", paidOn.AddDate(0, 0, 1), false},
		{"end minus a day", end.AddDate(0, 0, -1), false},
		{"end minus a second", end.Add(-time.Second), false},
		{"end", end, true},
	}
	for _, st := range comebackStores()[:2] {
		for _, how := range []string{"reactivate", "subscribe"} {
			for _, tc := range cases {
				t.Run(st.name+"/"+how+"/"+tc.name, func(t *testing.T) {
					t.Parallel()
					ctx := t.Context()
					e := newComebackEnv(t, st)
					paid := envRecord(e.user, paidOn, billing.StatusCompleted)
					paid.AnchorDay = 31
					require.NoError(t, e.repo.Add(ctx, &paid))
					e.clock.Set(jan31.AddDate(0, 0, 5))
					recs := e.records()
					var err, checked error
					switch how {
					case "reactivate":
						_, err = e.c.Reactivate(ctx, e.user, tc.date)
						checked = preview.CheckReactivate(e.c, e.user, recs, tc.date)
					case "subscribe":
						req := billing.SubscribeRequest{RequestKey: "k", UserID: e.user, Tier: "Plus:v2",
							Amount: billing.MustParseAmount("4.99"), FirstBillingDate: tc.date}
						_, err = e.c.Subscribe(ctx, req)
						_, checked = preview.CheckSubscribe(ctx, e.c, req, recs)
					}
					if tc.ok {
						require.NoError(t, err)
						require.NoError(t, checked)
						require.Len(t, e.records(), 2)
						return
					}
					require.ErrorIs(t, err, billing.ErrInvalidDate)
					require.ErrorIs(t, checked, billing.ErrInvalidDate, "the check agrees")
					var fe *billing.FieldError
					require.ErrorAs(t, err, &fe)
					assert.Contains(t, err.Error(), paid.SubscriptionID, "names the paid period")
					assert.Contains(t, err.Error(), "the first date not paid for is 2024-02-29T16:00:00Z")
					assert.Len(t, e.records(), 1, "a refused call wrote")
					assert.Zero(t, e.pay.CallCount())
				})
			}
		}
	}
}

// TestSubscribeAnchorDayMustFitFirstDate: an AnchorDay other than the
// first billing date's day would charge a full period on the first date
// and again days later (first date the 28th, anchor 2: the 28th, then
// the 2nd); it is refused with a *FieldError on AnchorDay. A month's last
// day takes a later anchor (the schedule's clamp): anchor 31 on 30
// April, anchor 30 on 28 February 2025, billed on the 31st of May and the
// 30th of March.
func TestSubscribeAnchorDayMustFitFirstDate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		first  time.Time
		anchor int
		next   time.Time // zero: refused
	}{
		{time.Date(2024, 2, 28, 10, 0, 0, 0, time.UTC), 2, time.Time{}},
		{time.Date(2024, 2, 28, 10, 0, 0, 0, time.UTC), 29, time.Time{}}, // 2024 is a leap year: the 28th is not the last day
		{time.Date(2024, 3, 15, 10, 0, 0, 0, time.UTC), 14, time.Time{}},
		{time.Date(2024, 4, 30, 10, 0, 0, 0, time.UTC), 31, time.Date(2024, 5, 31, 10, 0, 0, 0, time.UTC)},
		{time.Date(2025, 2, 28, 10, 0, 0, 0, time.UTC), 30, time.Date(2025, 3, 30, 10, 0, 0, 0, time.UTC)},
		{time.Date(2024, 3, 15, 10, 0, 0, 0, time.UTC), 15, time.Date(2024, 4, 15, 10, 0, 0, 0, time.UTC)},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s/anchor-%d", tc.first.Format(time.DateOnly), tc.anchor), func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			e := newComebackEnv(t, comebackStores()[0])
			req := billing.SubscribeRequest{RequestKey: "k", UserID: e.user, Tier: "Plus:v2",
				Amount: billing.MustParseAmount("4.99"), FirstBillingDate: tc.first, AnchorDay: tc.anchor}
			got, err := e.c.Subscribe(ctx, req)
			if tc.next.IsZero() {
				require.ErrorIs(t, err, billing.ErrInvalidRequest)
				var fe *billing.FieldError
				require.ErrorAs(t, err, &fe)
				assert.Equal(t, "AnchorDay", fe.Field)
				assert.Empty(t, e.records(), "a refused subscribe wrote")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.anchor, got.Subscription.AnchorDay)
			next, err := got.Subscription.Schedule().Next(got.Subscription.BillingDate)
			require.NoError(t, err)
			assert.Equal(t, tc.next, next.UTC())
		})
	}
}

// racingRepo puts a record another writer wrote on the user's record
// just before the first write of the kind it watches: the record appears
// after the call read the user's records, under its lock.
type racingRepo struct {
	billing.Repository
	on   string // "add", "update" or "admin"
	put  func(ctx context.Context) error
	once sync.Once
}

func (r *racingRepo) race(ctx context.Context, op string) error {
	var err error
	if op == r.on {
		r.once.Do(func() { err = r.put(ctx) })
	}
	return err
}

func (r *racingRepo) Add(ctx context.Context, s *billing.Period) error {
	if err := r.race(ctx, "add"); err != nil {
		return err
	}
	return r.Repository.Add(ctx, s)
}

func (r *racingRepo) Update(ctx context.Context, prev, next *billing.Period, create ...*billing.Period) error {
	if err := r.race(ctx, "update"); err != nil {
		return err
	}
	return r.Repository.Update(ctx, prev, next, create...)
}

func (r *racingRepo) AdminUpdate(ctx context.Context, prev, next *billing.Period) error {
	if err := r.race(ctx, "admin"); err != nil {
		return err
	}
	return r.Repository.AdminUpdate(ctx, prev, next)
}

// TestLifecycleCallsNeverAnswerAlreadyExists: a record another writer
// puts on the key a lifecycle call writes, after the call read the user's
// records, never comes back to the host as ErrAlreadyExists: Subscribe
// and Reactivate read again and judge the record (a cancelled renewal is
// reopened, an open period is an *OpenSubscriptionError, another record a
// *FieldError naming it), a date move onto it is a *DateMoveError naming
// it, and a waive whose next period appeared is an ErrConflict to retry.
// Before, each answered ErrAlreadyExists.
func TestLifecycleCallsNeverAnswerAlreadyExists(t *testing.T) {
	t.Parallel()
	date := jan31.AddDate(0, 0, 10)
	for _, st := range comebackStores()[:2] {
		setup := func(t *testing.T, on string, rec billing.Period) *comebackEnv {
			var inner billing.Repository
			e := newComebackEnv(t, st, func(r billing.Repository) billing.Repository {
				inner = r
				return &racingRepo{Repository: r, on: on, put: func(ctx context.Context) error {
					rec.UserID = st.user
					_, err := inner.AddAll(ctx, []billing.Period{rec}) // as another program would, beside an open period too
					return err
				}}
			})
			e.clock.Set(jan31.AddDate(0, 0, 2))
			return e
		}
		subscribe := func(e *comebackEnv) (billing.Subscribed, error) {
			return e.c.Subscribe(e.t.Context(), billing.SubscribeRequest{RequestKey: "k", UserID: e.user, Tier: "Plus:v2",
				Amount: billing.MustParseAmount("4.99"), FirstBillingDate: date})
		}
		t.Run(st.name+"/subscribe onto a cancelled renewal", func(t *testing.T) {
			t.Parallel()
			e := setup(t, "add", envRecord("", date, billing.StatusCancelled))
			got, err := subscribe(e)
			require.NoError(t, err)
			recs := e.records()
			require.Len(t, recs, 1)
			assert.Equal(t, got.Subscription.SubscriptionID, recs[0].SubscriptionID)
			assert.Equal(t, billing.StatusScheduled, recs[0].Status)
		})
		t.Run(st.name+"/subscribe onto an open period", func(t *testing.T) {
			t.Parallel()
			e := setup(t, "add", envRecord("", date, billing.StatusScheduled))
			_, err := subscribe(e)
			require.ErrorIs(t, err, billing.ErrOpenSubscription)
			assert.NotErrorIs(t, err, billing.ErrAlreadyExists)
		})
		t.Run(st.name+"/reactivate onto a waived period", func(t *testing.T) {
			t.Parallel()
			waived := envRecord("", date, billing.StatusWaived)
			e := setup(t, "add", waived)
			old := envRecord(e.user, jan31.AddDate(0, 0, -20), billing.StatusCancelled)
			require.NoError(t, e.repo.Add(t.Context(), &old))
			_, err := e.c.Reactivate(t.Context(), e.user, date)
			require.ErrorIs(t, err, billing.ErrInvalidDate)
			assert.NotErrorIs(t, err, billing.ErrAlreadyExists)
			var fe *billing.FieldError
			require.ErrorAs(t, err, &fe)
			assert.Contains(t, err.Error(), waived.SubscriptionID, "names the record in the way")
		})
		t.Run(st.name+"/move onto a new record", func(t *testing.T) {
			t.Parallel()
			in := envRecord("", date, billing.StatusCancelled)
			e := setup(t, "admin", in)
			cur := envRecord(e.user, jan31.AddDate(0, 0, 5), billing.StatusScheduled)
			require.NoError(t, e.repo.Add(t.Context(), &cur))
			_, err := e.c.Periods().Move(t.Context(), cur.SubscriptionID, date)
			require.ErrorIs(t, err, billing.ErrDateMove)
			assert.NotErrorIs(t, err, billing.ErrAlreadyExists)
			var dm *billing.DateMoveError
			require.ErrorAs(t, err, &dm)
			assert.Equal(t, in.SubscriptionID, dm.PeriodID)
			assert.True(t, dm.Later)
		})
		t.Run(st.name+"/waive when the next period appeared", func(t *testing.T) {
			t.Parallel()
			cur := envRecord(st.user, jan31.AddDate(0, 0, 1), billing.StatusScheduled) // Feb 1
			next := envRecord("", cur.BillingDate.AddDate(0, 1, 0), billing.StatusScheduled)
			next.CreatedDate, next.LastRunDate = jan31.Add(time.Minute), jan31.Add(time.Minute)
			e := setup(t, "update", next)
			require.NoError(t, e.repo.Add(t.Context(), &cur))
			_, err := e.c.Periods().WaiveByID(t.Context(), cur.SubscriptionID)
			require.ErrorIs(t, err, billing.ErrConflict)
			assert.NotErrorIs(t, err, billing.ErrAlreadyExists)
			e.clock.Advance(time.Minute)
			ch, err := e.c.Periods().WaiveByID(t.Context(), cur.SubscriptionID)
			require.NoError(t, err, "the retry finds the next period")
			assert.Empty(t, ch.Created)
			assert.Len(t, e.records(), 2)
		})
	}
}

// TestComeBackOnAnAttemptedCancelledPeriodRefused: a cancelled period
// that was attempted (declined, then cancelled) is not reopened: coming
// back on its date is refused with a *FieldError naming it, and nothing
// is written.
func TestComeBackOnAnAttemptedCancelledPeriodRefused(t *testing.T) {
	t.Parallel()
	for _, st := range comebackStores()[:2] {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			e := newComebackEnv(t, st)
			date := jan31.AddDate(0, 0, 3)
			c := envRecord(e.user, date, billing.StatusCancelled)
			c.InitialRunDate, c.Attempt, c.LastAttempt.Number = date.Add(time.Hour), 1, 1
			require.NoError(t, e.repo.Add(ctx, &c))
			e.clock.Set(jan31.AddDate(0, 0, 5))
			_, err := e.c.Reactivate(ctx, e.user, date)
			require.ErrorIs(t, err, billing.ErrInvalidDate)
			assert.NotErrorIs(t, err, billing.ErrAlreadyExists)
			assert.True(t, strings.Contains(err.Error(), c.SubscriptionID) && strings.Contains(err.Error(), "attempted"), "%v", err)
			_, err = e.c.Subscribe(ctx, billing.SubscribeRequest{RequestKey: "k", UserID: e.user, Tier: "Plus:v2",
				Amount: billing.MustParseAmount("4.99"), FirstBillingDate: date})
			require.ErrorIs(t, err, billing.ErrInvalidDate)
			recs := e.records()
			require.Len(t, recs, 1)
			assert.Equal(t, billing.StatusCancelled, recs[0].Status)
			assert.False(t, errors.Is(err, billing.ErrConflict))
		})
	}
}

// TestComeBackPausedBySubscribe: a come-back that starts paused reopens
// the cancelled renewal as PAUSED, and the pause run takes it on from
// there: the first charge is a month after the renewal's date.
func TestComeBackPausedBySubscribe(t *testing.T) {
	t.Parallel()
	for _, st := range comebackStores()[:2] {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			e := newComebackEnv(t, st)
			cancelled := e.cancelAtPeriodEnd()
			got, err := e.c.Subscribe(ctx, billing.SubscribeRequest{RequestKey: "paused", UserID: e.user, Tier: "Plus:v2",
				Amount: billing.MustParseAmount("4.99"), FirstBillingDate: cancelled.BillingDate, PauseMonths: 1})
			require.NoError(t, err)
			assert.Equal(t, billing.StatusPaused, got.Subscription.Status)
			recs := e.records()
			require.Len(t, recs, 2)
			assert.Equal(t, billing.StatusPaused, recs[1].Status)
			e.clock.Set(cancelled.BillingDate.Add(time.Hour))
			runToCompletion(t, e.c, billing.RunPause)
			rep := e.runAt(time.Date(2024, 3, 31, 16, 0, 0, 0, time.UTC))
			assert.Equal(t, 1, rep.Collected, "%+v", rep)
			assert.Equal(t, 2, e.pay.CallCount(), "Jan 31, then Mar 31")
			billingtest.RequireNoDoubleCharge(t, e.pay)
		})
	}
}

// TestNewFirstPeriodMeetingALaterRecordRefused: a user subscribed for a
// later date (Mar 15) and cancelled before the first charge; a new
// Subscribe (or Reactivate) on Feb 15, whose schedule lands on that
// cancelled record's date, would be collected once and then stop for
// good: the collector continues a subscription from the user's latest
// record, and the next period's key is taken. It is refused, naming the
// later record, and nothing is written; a date after it is accepted and
// billed month after month.
func TestNewFirstPeriodMeetingALaterRecordRefused(t *testing.T) {
	t.Parallel()
	for _, st := range comebackStores()[:2] {
		for _, how := range []string{"subscribe", "reactivate"} {
			t.Run(st.name+"/"+how, func(t *testing.T) {
				t.Parallel()
				e := newComebackEnv(t, st)
				ctx := t.Context()
				mar15 := time.Date(2024, 3, 15, 10, 0, 0, 0, time.UTC)
				first, err := e.c.Subscribe(ctx, billing.SubscribeRequest{RequestKey: "later", UserID: e.user, Tier: "Plus:v2",
					Amount: billing.MustParseAmount("4.99"), FirstBillingDate: mar15})
				require.NoError(t, err)
				_, err = e.c.Periods().Cancel(ctx, first.Subscription.SubscriptionID)
				require.NoError(t, err)
				before := e.history()

				feb15 := mar15.AddDate(0, -1, 0)
				again := func(d time.Time) error {
					if how == "reactivate" {
						_, err := e.c.Reactivate(ctx, e.user, d)
						return err
					}
					_, err := e.c.Subscribe(ctx, billing.SubscribeRequest{RequestKey: "again-" + d.Format(time.DateOnly), UserID: e.user,
						Tier: "Plus:v2", Amount: billing.MustParseAmount("4.99"), FirstBillingDate: d})
					return err
				}
				err = again(feb15)
				var fe *billing.FieldError
				require.ErrorAs(t, err, &fe)
				assert.ErrorIs(t, err, billing.ErrInvalidDate)
				assert.Contains(t, err.Error(), first.Subscription.SubscriptionID, "the refusal names the later record")
				assert.Len(t, e.records(), 1, "nothing written")
				assert.Equal(t, before, e.history(), "no history row")

				// After it: billed on Mar 20, Apr 20 and May 20, once each.
				mar20 := mar15.AddDate(0, 0, 5)
				require.NoError(t, again(mar20))
				for m := range 3 {
					rep := e.runAt(mar20.AddDate(0, m, 0))
					require.Equal(t, 1, rep.Collected, "month %d: %+v", m, rep)
				}
				recs := e.records()
				require.Len(t, recs, 5)
				assert.Equal(t, billing.StatusScheduled, recs[4].Status, "the subscription goes on")
				assert.Equal(t, mar20.AddDate(0, 3, 0), recs[4].BillingDate.UTC())
				assert.Len(t, e.pay.Calls(), 3)
			})
		}
	}
}

// TestDateMoveMeetingALaterRecordRefused: a period moved so that its
// schedule later bills on the date of a record of the user's earlier
// life (a renewal cancelled before its charge, Mar 15) is refused, naming
// it: its collection could not open that period, and the subscription
// would stop. A move whose schedule avoids it is accepted.
func TestDateMoveMeetingALaterRecordRefused(t *testing.T) {
	t.Parallel()
	e := newComebackEnv(t, comebackStores()[0])
	ctx := t.Context()
	mar15 := time.Date(2024, 3, 15, 10, 0, 0, 0, time.UTC)
	feb5 := time.Date(2024, 2, 5, 10, 0, 0, 0, time.UTC)
	old := billing.Period{UserID: e.user, SubscriptionID: "earlier-life", BillingDate: mar15, BillingPeriod: billing.BillingPeriod(mar15),
		Amount: billing.MustParseAmount("4.99"), Status: billing.StatusCancelled, Term: billing.TermMonthly, AnchorDay: 15,
		ReceiptTierName: "Plus:v2", CreatedDate: jan31, LastRunDate: jan31}
	cur := billing.Period{UserID: e.user, SubscriptionID: "now", BillingDate: feb5, BillingPeriod: billing.BillingPeriod(feb5),
		Amount: billing.MustParseAmount("4.99"), Status: billing.StatusScheduled, Term: billing.TermMonthly, AnchorDay: 5,
		ReceiptTierName: "Plus:v2", CreatedDate: jan31.Add(time.Hour), LastRunDate: jan31.Add(time.Hour)}
	require.NoError(t, e.repo.Add(ctx, &old))
	require.NoError(t, e.repo.Add(ctx, &cur))

	_, err := e.c.Periods().Move(ctx, "now", mar15.AddDate(0, -1, 0))
	var fe *billing.FieldError
	require.ErrorAs(t, err, &fe)
	assert.ErrorIs(t, err, billing.ErrInvalidDate)
	assert.Contains(t, err.Error(), "earlier-life")
	got, err := e.repo.GetByID(ctx, "now")
	require.NoError(t, err)
	assert.Equal(t, feb5, got.BillingDate.UTC(), "not moved")

	ch, err := e.c.Periods().Move(ctx, "now", mar15.AddDate(0, -1, 1))
	require.NoError(t, err)
	assert.Equal(t, mar15.AddDate(0, -1, 1), ch.After.BillingDate.UTC())
}

// TestSubscribeKeyOfAReopenedPeriodIsStillARepeat: a subscribe request
// K whose period, cancelled before its charge, was reopened by a
// come-back under another key K2 is still a repeat: while K2's period is
// open and after the user cancelled again, a redelivery of K answers
// Repeated with K's period as its history last left it, writes nothing,
// and never bills the user again (found by review: before, it was
// refused as an open subscription, then, once cancelled, it reopened the
// period and the next run charged a user who had left).
func TestSubscribeKeyOfAReopenedPeriodIsStillARepeat(t *testing.T) {
	t.Parallel()
	for _, st := range comebackStores() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			e := newComebackEnv(t, st)
			ctx := t.Context()
			d := jan31.Add(10 * 24 * time.Hour)
			req := billing.SubscribeRequest{RequestKey: "K", UserID: e.user, Tier: "Plus:v2", Amount: billing.MustParseAmount("9.99"), FirstBillingDate: d}
			first, err := e.c.Subscribe(ctx, req)
			require.NoError(t, err)
			cancel := func(key string) {
				_, err := e.c.Cancel(ctx, billing.CancelRequest{UserRequest: billing.UserRequest{UserID: e.user, RequestKey: key}})
				require.NoError(t, err)
			}
			cancel("c1")
			req2 := req
			req2.RequestKey = "K2"
			back, err := e.c.Subscribe(ctx, req2)
			require.NoError(t, err)
			require.Equal(t, d, back.Subscription.BillingDate.UTC(), "reopened on its date")

			again, err := e.c.Subscribe(ctx, req)
			require.NoError(t, err, "a repeat of K answers what K did")
			assert.True(t, again.Repeated)
			assert.Equal(t, first.Subscription.SubscriptionID, again.Subscription.SubscriptionID)

			cancel("c2")
			rows := len(e.history())
			again, err = e.c.Subscribe(ctx, req)
			require.NoError(t, err)
			assert.True(t, again.Repeated)
			assert.Len(t, e.history(), rows, "nothing written")
			for _, r := range e.records() {
				assert.Equal(t, billing.StatusCancelled, r.Status, "the user who left stays gone")
			}
			rep := e.runAt(d)
			assert.Zero(t, rep.Attempted)
			assert.Empty(t, e.pay.Calls())
		})
	}
}
