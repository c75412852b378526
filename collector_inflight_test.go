package billing_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

// moneyEnv is a collector on one of the stores, for the exactly-once
// regression tests: each runs on the in-memory store, the legacy tables and
// the single table on the local DynamoDB server.
type moneyEnv struct {
	t      *testing.T
	repo   billing.Repository
	hist   billing.History
	clock  *billingtest.Clock
	pay    *billingtest.Provider
	events *billingtest.EventRecorder
	c      *billing.Collector
	user   string
}

type moneyStore struct {
	name string
	open func(t *testing.T, clock *billingtest.Clock) (billing.Repository, billing.History, string)
}

func moneyStores() []moneyStore {
	return []moneyStore{
		{"memory", func(t *testing.T, _ *billingtest.Clock) (billing.Repository, billing.History, string) {
			st := billingtest.NewMemoryStore(t, memory.Options{PageSize: 5})
			return st.Repository(), st.History(), "u1"
		}},
		{"memory-single", func(t *testing.T, clock *billingtest.Clock) (billing.Repository, billing.History, string) {
			st := billingtest.NewMemorySingleTable(t, memory.SingleTableOptions{Clock: clock, PageSize: 5})
			return st.Repository(), st.History(), layout.SubscriptionRef{AccountID: "a1", SubscriptionID: "s1", SKU: "PLUS"}.UserID()
		}},
		{"dynamodb", func(t *testing.T, _ *billingtest.Clock) (billing.Repository, billing.History, string) {
			repo, hist := storetest.DynamoStores(t, memory.Options{PageSize: 5})
			return repo, hist, "u1"
		}},
		{"dynamodb-single", func(t *testing.T, clock *billingtest.Clock) (billing.Repository, billing.History, string) {
			repo := singleTableOnServer(t, clock, memory.Options{PageSize: 5})
			return repo, repo.History(), layout.SubscriptionRef{AccountID: "a1", SubscriptionID: "s1", SKU: "PLUS"}.UserID()
		}},
	}
}

// eachStore runs fn on every store, in parallel.
func eachStore(t *testing.T, popts billingtest.ProviderOptions, fn func(t *testing.T, e *moneyEnv)) {
	for _, st := range moneyStores() {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			clock := billingtest.NewClock(jan31.Add(time.Hour))
			repo, hist, user := st.open(t, clock)
			popts := popts // each subtest its own copy: they run in parallel
			popts.Clock = clock
			e := &moneyEnv{t: t, repo: repo, hist: hist, clock: clock, pay: billingtest.NewProvider(popts),
				events: &billingtest.EventRecorder{}, user: user}
			ids := 0
			c, err := billing.NewCollector(billing.Config{Repository: repo, History: hist, Locker: billingtest.NewLocker(clock, time.Minute),
				Provider: e.pay, Clock: clock, Events: e.events, NewID: func() string { ids++; return fmt.Sprintf("%s-gen-%d", t.Name(), ids) }})
			require.NoError(t, err)
			e.c = c
			fn(t, e)
		})
	}
}

// add stores a SCHEDULED record of the env's user billed on jan31.
func (e *moneyEnv) add() billing.Period {
	e.t.Helper()
	s := billing.Period{UserID: e.user, SubscriptionID: fmt.Sprintf("%s-rec", e.t.Name()), BillingDate: jan31,
		Amount: billing.MustParseAmount("4.99"), Status: billing.StatusScheduled, BillingPeriod: billing.BillingPeriod(jan31),
		Term: billing.TermMonthly, AnchorDay: 31, ReceiptTierName: "Plus:v2", CreatedDate: jan31.AddDate(0, -1, 0), LastRunDate: jan31.AddDate(0, -1, 0)}
	require.NoError(e.t, e.repo.Add(e.t.Context(), &s))
	return s
}

func (e *moneyEnv) get(s billing.Period) billing.Period {
	e.t.Helper()
	got, err := e.repo.GetByID(e.t.Context(), s.SubscriptionID)
	require.NoError(e.t, err)
	return got
}

func (e *moneyEnv) run(kind billing.RunKind) *billing.Report {
	e.t.Helper()
	return runToCompletion(e.t, e.c, kind)
}

// chargedInFlight makes the scheduled run charge s while the processor's
// answer is lost (the money moved, the collector saw a timeout), and
// leaves the processor unreachable.
func (e *moneyEnv) chargedInFlight(s billing.Period, answer billingtest.Step) billing.Period {
	e.t.Helper()
	e.pay.SetAttempt(s.SubscriptionID, 1, billingtest.UnknownAfterCharge(answer, nil))
	rep := e.run(billing.RunScheduled)
	require.Equal(e.t, 1, rep.Unknown, "the charge's outcome is unknown")
	require.Len(e.t, e.pay.ChargesFor(s.SubscriptionID), 1, "the processor charged")
	e.pay.SetUnreachable(true)
	cur := e.get(s)
	require.True(e.t, cur.InFlight(), "the attempt is on the record before the charge")
	require.Equal(e.t, billing.StatusScheduled, cur.Status)
	require.Equal(e.t, billing.IdempotencyKey(s.SubscriptionID, 1), cur.LastAttempt.Key)
	require.Equal(e.t, s.Amount, cur.LastAttempt.Amount)
	return cur
}

// requireRecordedOnce checks that the one charge of s is recorded: the
// record COMPLETED with the charge's transaction and amount, a COMPLETED
// history row carrying the attempt, one next period.
func (e *moneyEnv) requireRecordedOnce(s billing.Period) billing.Period {
	e.t.Helper()
	charges := e.pay.ChargesFor(s.SubscriptionID)
	require.Len(e.t, charges, 1)
	got := e.get(s)
	assert.Equal(e.t, billing.StatusCompleted, got.Status)
	assert.Equal(e.t, charges[0].TransactionID, got.TransactionID)
	assert.Equal(e.t, charges[0].Amount, got.Amount)
	assert.False(e.t, got.InFlight())
	rows, err := e.hist.ListBySubscription(e.t.Context(), s.SubscriptionID)
	require.NoError(e.t, err)
	last := rows[len(rows)-1]
	assert.Equal(e.t, billing.StatusCompleted, last.Status)
	assert.Equal(e.t, charges[0].Key, last.LastAttempt.Key, "the outcome's history row carries the attempt's key")
	assert.False(e.t, last.LastAttempt.Started.IsZero())
	recs, err := e.repo.ListByUser(e.t.Context(), e.user)
	require.NoError(e.t, err)
	// One next period (a run that went on may have collected it already
	// and opened the one after).
	require.GreaterOrEqual(e.t, len(recs), 2, "the record and its next period")
	assert.Equal(e.t, time.Date(2024, 2, 29, 15, 0, 0, 0, time.UTC), recs[1].BillingDate)
	for i := 1; i < len(recs); i++ {
		assert.True(e.t, recs[i].BillingDate.After(recs[i-1].BillingDate))
	}
	billingtest.RequireNoDoubleCharge(e.t, e.pay)
	return got
}

// TestInFlightAttemptIsNotClosed (point 1): the processor charged, the
// collector saw a timeout; while the processor cannot be reached, neither
// the stale check nor waive, cancel or pause closes the record. Once it
// answers, each of them first records the charge.
func TestInFlightAttemptIsNotClosed(t *testing.T) {
	ops := []struct {
		name string
		do   func(e *moneyEnv, id string) error
	}{
		{"waive", func(e *moneyEnv, id string) error { _, err := e.c.Periods().WaiveByID(e.t.Context(), id); return err }},
		{"cancel", func(e *moneyEnv, id string) error { _, err := e.c.Periods().Cancel(e.t.Context(), id); return err }},
		{"pause", func(e *moneyEnv, id string) error { _, err := e.c.Periods().Pause(e.t.Context(), id, 2); return err }},
		{"change billing date", func(e *moneyEnv, id string) error {
			_, err := e.c.Periods().Move(e.t.Context(), id, jan31.AddDate(0, 0, 3))
			return err
		}},
		{"stale run", func(e *moneyEnv, id string) error {
			if e.clock.Now().Before(jan31.AddDate(0, 0, 30)) {
				e.clock.Advance(31 * 24 * time.Hour) // past the stale threshold
			}
			rep := e.run(billing.RunScheduled)
			if rep.Stale > 0 {
				return errors.New("marked stale")
			}
			if len(rep.Failed) > 0 {
				if r := rep.Failed[0].Reason; strings.Contains(r, billing.ErrAttemptInFlight.Error()) {
					return fmt.Errorf("%w: %s", billing.ErrAttemptInFlight, r)
				}
				return errors.New(rep.Failed[0].Reason)
			}
			return nil
		}},
	}
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			t.Parallel()
			eachStore(t, billingtest.ProviderOptions{}, func(t *testing.T, e *moneyEnv) {
				s := e.add()
				inflight := e.chargedInFlight(s, billingtest.Succeeded())
				e.clock.Advance(time.Hour)

				_, err := e.c.Reactivate(t.Context(), e.user, jan31.AddDate(0, 2, 0))
				require.ErrorIs(t, err, billing.ErrAttemptInFlight, "no reactivation over a charge in flight")
				err = op.do(e, s.SubscriptionID)
				require.ErrorIs(t, err, billing.ErrAttemptInFlight)
				require.ErrorContains(t, err, inflight.LastAttempt.Key)
				var ife *billing.InFlightError
				if op.name != "stale run" {
					require.ErrorAs(t, err, &ife)
					assert.Equal(t, inflight.LastAttempt.Key, ife.Key)
				} else {
					assert.Equal(t, 1, e.events.Count(billing.EventAttemptUnresolved), "the sweep reports the record")
				}
				after := e.get(s)
				assert.Equal(t, billing.StatusScheduled, after.Status, "nothing closed the record")
				assert.True(t, after.InFlight())
				assert.Equal(t, layout.LastRunDateKey(&inflight), layout.LastRunDateKey(&after))

				// The processor answers again: the operation replays the key
				// first, and finds the period paid.
				e.pay.SetUnreachable(false)
				err = op.do(e, s.SubscriptionID)
				if op.name != "stale run" {
					require.ErrorIs(t, err, billing.ErrNotCollectible, "a paid period is not waived, cancelled, paused or moved")
				} else {
					require.NoError(t, err)
				}
				got := e.requireRecordedOnce(s)
				assert.Equal(t, inflight.LastAttempt.Key, got.LastAttempt.Key)
				assert.Equal(t, 0, e.events.Count(billing.EventStale))
			})
		})
	}
}

// TestInFlightACHSettlementApplies (point 1): the settlement of a debit
// whose attempt is in flight first records the attempt, then applies.
func TestInFlightACHSettlementApplies(t *testing.T) {
	eachStore(t, billingtest.ProviderOptions{}, func(t *testing.T, e *moneyEnv) {
		s := e.add()
		e.chargedInFlight(s, billingtest.Pending())
		_, err := e.c.Periods().WaiveByID(t.Context(), s.SubscriptionID)
		require.ErrorIs(t, err, billing.ErrAttemptInFlight)
		e.pay.SetUnreachable(false)
		ch := e.pay.ChargesFor(s.SubscriptionID)[0]
		got, changed, err := e.c.ApplySettlement(t.Context(), billing.Settlement{SubscriptionID: s.SubscriptionID, TransactionID: ch.TransactionID, Kind: billing.SettlementSettled})
		require.NoError(t, err)
		assert.True(t, changed)
		assert.Equal(t, billing.StatusCompleted, got.Status)
		e.requireRecordedOnce(s)
	})
}

// TestInFlightTierChange (point 2): a tier change between the timeout
// and the replay is refused while the outcome is unknown, and the replay
// presents the recorded amount: the real charge is recorded, never a key
// reused with another amount.
func TestInFlightTierChange(t *testing.T) {
	eachStore(t, billingtest.ProviderOptions{}, func(t *testing.T, e *moneyEnv) {
		s := e.add()
		e.chargedInFlight(s, billingtest.Succeeded())
		_, err := e.c.Periods().ChangeTier(t.Context(), s.SubscriptionID, "Premium:v1", billing.MustParseAmount("9.99"), false)
		require.ErrorIs(t, err, billing.ErrAttemptInFlight)
		assert.Equal(t, s.Amount, e.get(s).Amount)

		e.pay.SetUnreachable(false)
		e.clock.Advance(time.Hour)
		_, err = e.c.Periods().ChangeTier(t.Context(), s.SubscriptionID, "Premium:v1", billing.MustParseAmount("9.99"), false)
		require.ErrorIs(t, err, billing.ErrNotCollectible, "the period turned out paid")
		got := e.requireRecordedOnce(s)
		assert.Equal(t, billing.MustParseAmount("4.99"), got.Amount)
		for _, c := range e.pay.Calls() {
			assert.NotErrorIs(t, c.Err, billingtest.ErrKeyReused)
			assert.Equal(t, billing.MustParseAmount("4.99"), c.Request.Amount)
		}
		// The change applies from the next attempt: the next period.
		recs, err := e.repo.ListByUser(t.Context(), e.user)
		require.NoError(t, err)
		_, err = e.c.Periods().ChangeTier(t.Context(), recs[1].SubscriptionID, "Premium:v1", billing.MustParseAmount("9.99"), false)
		require.NoError(t, err)
		e.clock.Set(recs[1].BillingDate.Add(time.Hour))
		e.run(billing.RunScheduled)
		next := e.get(recs[1])
		assert.Equal(t, billing.StatusCompleted, next.Status)
		assert.Equal(t, billing.MustParseAmount("9.99"), next.Amount)
		assert.Equal(t, billing.MustParseAmount("9.99"), e.pay.ChargesFor(recs[1].SubscriptionID)[0].Amount)
	})
}

// TestInFlightPastReplayWindow: a processor that forgets keys after a day
// is never asked to charge the old key again once the day is over; only a
// lookup resolves the attempt.
func TestInFlightPastReplayWindow(t *testing.T) {
	t.Run("no lookup", func(t *testing.T) {
		eachStore(t, billingtest.ProviderOptions{ReplayWindow: 24 * time.Hour}, func(t *testing.T, e *moneyEnv) {
			s := e.add()
			e.chargedInFlight(s, billingtest.Succeeded())
			e.pay.SetUnreachable(false)
			e.clock.Advance(48 * time.Hour)
			calls := e.pay.CallCount()
			rep := e.run(billing.RunScheduled)
			assert.Equal(t, calls, e.pay.CallCount(), "no replay past the window")
			assert.Equal(t, 1, rep.Unknown)
			require.Len(t, rep.Failed, 1)
			assert.Contains(t, rep.Failed[0].Reason, "replay window")
			after := e.get(s)
			assert.True(t, after.InFlight())
			assert.Len(t, e.pay.ChargesFor(s.SubscriptionID), 1)
		})
	})
	t.Run("lookup finds the charge", func(t *testing.T) {
		eachStore(t, billingtest.ProviderOptions{ReplayWindow: 24 * time.Hour, Lookup: true}, func(t *testing.T, e *moneyEnv) {
			s := e.add()
			e.chargedInFlight(s, billingtest.Succeeded())
			e.pay.SetUnreachable(false)
			e.clock.Advance(48 * time.Hour)
			calls := e.pay.CallCount()
			e.run(billing.RunScheduled)
			assert.Equal(t, calls, e.pay.CallCount(), "resolved by the lookup alone")
			assert.Equal(t, 1, e.pay.Lookups())
			e.requireRecordedOnce(s)
		})
	})
	t.Run("lookup finds nothing", func(t *testing.T) {
		eachStore(t, billingtest.ProviderOptions{ReplayWindow: 24 * time.Hour, Lookup: true}, func(t *testing.T, e *moneyEnv) {
			s := e.add()
			e.pay.SetAttempt(s.SubscriptionID, 1, billingtest.UnknownBeforeCharge(nil))
			e.run(billing.RunScheduled)
			first := e.get(s)
			require.True(t, first.InFlight())
			e.clock.Advance(48 * time.Hour)
			e.run(billing.RunScheduled) // the lookup settles attempt 1 as never made
			got := e.get(s)
			assert.False(t, got.InFlight())
			assert.Equal(t, 1, got.Attempt)
			assert.Equal(t, billing.StatusScheduled, got.Status)
			e.clock.Advance(time.Hour)
			e.run(billing.RunScheduled) // attempt 2, with a fresh key
			e.requireRecordedOnce(s)
			assert.Equal(t, billing.IdempotencyKey(s.SubscriptionID, 2), e.pay.ChargesFor(s.SubscriptionID)[0].Key)
		})
	})
}

// TestACHSettlementDeadline (point 6): an ACH debit nobody settles does
// not stay ACHSENT for ever: past the deadline the retry run looks it up
// or gives up on it (STALE, ach-overdue, an event), which unblocks
// reactivation; a late settlement still completes it.
func TestACHSettlementDeadline(t *testing.T) {
	t.Run("given up", func(t *testing.T) {
		eachStore(t, billingtest.ProviderOptions{Default: billingtest.Always(billingtest.Pending())}, func(t *testing.T, e *moneyEnv) {
			s := e.add()
			e.run(billing.RunScheduled)
			require.Equal(t, billing.StatusACHSent, e.get(s).Status)
			_, err := e.c.Reactivate(t.Context(), e.user, jan31.AddDate(0, 3, 0))
			require.ErrorIs(t, err, billing.ErrNotCollectible, "an ACHSENT record blocks reactivation")

			e.clock.Advance(13 * 24 * time.Hour)
			assert.Equal(t, 0, e.run(billing.RunRetry).ACHOverdue, "within the deadline")
			assert.Equal(t, billing.StatusACHSent, e.get(s).Status)

			e.clock.Advance(2 * 24 * time.Hour)
			rep := e.run(billing.RunRetry)
			assert.Equal(t, 1, rep.ACHOverdue)
			got := e.get(s)
			assert.Equal(t, billing.StatusStale, got.Status)
			assert.Equal(t, billing.UpdatedACHOverdue, got.UpdatedEvent)
			require.Len(t, e.events.OfType(billing.EventPaymentACHOverdue), 1)
			assert.Equal(t, s.SubscriptionID, e.events.OfType(billing.EventPaymentACHOverdue)[0].SubscriptionID)

			// Cancel the open next period; reactivation is then allowed.
			recs, err := e.repo.ListByUser(t.Context(), e.user)
			require.NoError(t, err)
			_, err = e.c.Periods().Cancel(t.Context(), recs[1].SubscriptionID)
			require.NoError(t, err)
			_, err = e.c.Reactivate(t.Context(), e.user, jan31.AddDate(0, 3, 0))
			require.NoError(t, err)

			// The debit settles after all: recorded.
			ch := e.pay.ChargesFor(s.SubscriptionID)[0]
			late, changed, err := e.c.ApplySettlement(t.Context(), billing.Settlement{SubscriptionID: s.SubscriptionID, TransactionID: ch.TransactionID, Kind: billing.SettlementSettled})
			require.NoError(t, err)
			assert.True(t, changed)
			assert.Equal(t, billing.StatusCompleted, late.Status)
		})
	})
	t.Run("looked up", func(t *testing.T) {
		eachStore(t, billingtest.ProviderOptions{Default: billingtest.Always(billingtest.Pending()), Lookup: true}, func(t *testing.T, e *moneyEnv) {
			s := e.add()
			e.run(billing.RunScheduled)
			require.NoError(t, e.pay.Settle(e.pay.ChargesFor(s.SubscriptionID)[0].Key))
			e.clock.Advance(15 * 24 * time.Hour)
			e.run(billing.RunRetry)
			assert.Equal(t, 1, e.pay.Lookups())
			got := e.get(s)
			assert.Equal(t, billing.StatusCompleted, got.Status, "the lookup says it settled")
		})
	})
}

// TestCollectorStopsOnLostLease (point 7): a lease lost before the charge
// stops the collection: nothing is charged, and the next holder collects.
func TestCollectorStopsOnLostLease(t *testing.T) {
	c, locker, pay := newLeaseEnv(t, false)

	locker.lose = true
	rep, err := c.Run(t.Context(), billing.RunRequest{Kind: billing.RunScheduled})
	require.NoError(t, err)
	assert.Equal(t, 0, pay.CallCount(), "no charge under a lost lease")
	require.Len(t, rep.Failed, 1)
	assert.Contains(t, rep.Failed[0].Reason, billing.ErrLeaseLost.Error())

	locker.lose = false
	rep, err = c.Run(t.Context(), billing.RunRequest{Kind: billing.RunScheduled})
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Collected)
	billingtest.RequireNoDoubleCharge(t, pay)
}

// TestCollectorReportsFailedRelease (point 7): a release that keeps
// failing is retried and then returned, not only logged.
func TestCollectorReportsFailedRelease(t *testing.T) {
	c, locker, pay := newLeaseEnv(t, true)

	rep, err := c.Periods().Collect(t.Context(), "s1")
	require.ErrorIs(t, err, errReleaseFailed)
	assert.Equal(t, 1, rep.Collected, "the collection itself is done")
	assert.Equal(t, 3, locker.releases, "retried")
	assert.Len(t, pay.ChargesFor("s1"), 1)

	rep, err = c.Run(t.Context(), billing.RunRequest{Kind: billing.RunRetry})
	require.NoError(t, err)
	assert.Empty(t, rep.Failed, "nothing to do, no lock taken")
}

// newLeaseEnv is a collector on the in-memory store behind a losingLocker,
// with one due SCHEDULED record, s1 of u1.
func newLeaseEnv(t *testing.T, failRelease bool) (*billing.Collector, *losingLocker, *billingtest.Provider) {
	t.Helper()
	clock := billingtest.NewClock(jan31.Add(time.Hour))
	st := billingtest.NewMemoryStore(t, memory.Options{})
	locker := &losingLocker{Locker: billingtest.NewLocker(clock, time.Minute), failRelease: failRelease}
	pay := billingtest.NewProvider(billingtest.ProviderOptions{Clock: clock})
	c, err := billing.NewCollector(billing.Config{Repository: st.Repository(), Locker: locker, Provider: pay, Clock: clock})
	require.NoError(t, err)
	s := billing.Period{UserID: "u1", SubscriptionID: "s1", BillingDate: jan31, Amount: billing.MustParseAmount("4.99"),
		Status: billing.StatusScheduled, Term: billing.TermMonthly, LastRunDate: jan31.AddDate(0, -1, 0)}
	require.NoError(t, st.Repository().Add(t.Context(), &s))
	return c, locker, pay
}

var errReleaseFailed = errors.New("release: throttled")

// losingLocker hands out leases that are already lost (lose) or whose
// Release fails (failRelease).
type losingLocker struct {
	billing.Locker
	lose, failRelease bool
	releases          int
}

func (l *losingLocker) Lock(ctx context.Context, userID string) (billing.Lease, error) {
	lease, err := l.Locker.Lock(ctx, userID)
	if err != nil {
		return nil, err
	}
	return &losingLease{Lease: lease, l: l, lost: l.lose}, nil
}

type losingLease struct {
	billing.Lease
	l    *losingLocker
	lost bool
}

func (s *losingLease) Lost() <-chan struct{} {
	if s.lost {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	return s.Lease.Lost()
}

func (s *losingLease) Release(ctx context.Context) error {
	if s.l.failRelease {
		s.l.releases++
		return errReleaseFailed
	}
	return s.Lease.Release(ctx)
}
