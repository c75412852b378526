package billing_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/storetest"
	"github.com/dynabill/billing/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readCountingRepo counts the reads of each user's records.
type readCountingRepo struct {
	billing.Repository
	mu     sync.Mutex
	recent map[string]int
	gets   map[string]int
}

func (r *readCountingRepo) Recent(ctx context.Context, userID string, limit int) ([]billing.Period, error) {
	r.mu.Lock()
	r.recent[userID]++
	r.mu.Unlock()
	return r.Repository.Recent(ctx, userID, limit)
}

func (r *readCountingRepo) Get(ctx context.Context, userID string, billingDate time.Time) (billing.Period, error) {
	r.mu.Lock()
	r.gets[userID]++
	r.mu.Unlock()
	return r.Repository.Get(ctx, userID, billingDate)
}

// TestCollectorReadsTheUserOnce: a run re-reads the record it found, and
// learns whether a later period is open, with one consistent read of the
// user's latest records; only a record older than those is read by its
// key. The next period is opened only when no later record exists, and a
// later record written during the charge at the next period's date is
// found by the conditional create: the outcome is recorded alone.
func TestCollectorReadsTheUserOnce(t *testing.T) {
	var counted *readCountingRepo
	var e *collectorEnv
	var raceUser string
	e = newCollectorEnv(t, func(cfg *billing.Config) {
		counted = &readCountingRepo{Repository: cfg.Repository, recent: map[string]int{}, gets: map[string]int{}}
		cfg.Repository = counted
		pay := cfg.Provider
		cfg.Provider = providerFunc(func(ctx context.Context, req billing.PaymentRequest) (billing.PaymentResult, error) {
			if req.UserID == raceUser {
				// Another writer opens the next period while the
				// processor is charging this one.
				e.addBatch(raceUser, time.Date(2024, 2, 29, 15, 0, 0, 0, time.UTC))
			}
			return pay.Collect(ctx, req)
		})
	})
	feb29, mar31 := time.Date(2024, 2, 29, 15, 0, 0, 0, time.UTC), time.Date(2024, 3, 31, 15, 0, 0, 0, time.UTC)
	e.add("alone", jan31, billing.StatusScheduled)
	// Later periods open already: written by another service's batch (a
	// user has one open record through Add).
	e.add("later", jan31, billing.StatusScheduled)
	e.addBatch("later", feb29)
	e.add("older", jan31, billing.StatusScheduled)
	e.addBatch("older", feb29, mar31)
	raceUser = "race"
	e.add(raceUser, jan31, billing.StatusScheduled)

	rep := e.run(billing.RunScheduled)
	assert.Equal(t, 4, rep.Collected)
	assert.Equal(t, 4, e.pay.CallCount(), "one charge per due record")

	for _, c := range []struct {
		user        string
		gets, dates int
	}{
		{"alone", 0, 2}, // collected, the next period opened
		{"later", 0, 2}, // no period opened: one is open
		{"older", 1, 3}, // not among the two latest: read by key
		{"race", 0, 2},  // the period opened meanwhile is the next one
	} {
		assert.Equal(t, 1, counted.recent[c.user], "%s: the user's latest records read once", c.user)
		assert.Equal(t, c.gets, counted.gets[c.user], "%s: reads by key", c.user)
		recs := e.records(c.user)
		require.Len(t, recs, c.dates, c.user)
		assert.Equal(t, billing.StatusCompleted, recs[0].Status, c.user)
		for _, r := range recs[1:] {
			assert.Equal(t, billing.StatusScheduled, r.Status, "%s %v", c.user, r.BillingDate)
		}
	}
	assert.Equal(t, time.Date(2024, 2, 29, 15, 0, 0, 0, time.UTC), e.records("alone")[1].BillingDate)
}

// TestCollectorNextPeriodBesideBatchRecords: a batch write (AddAll) moves
// a non-SCHEDULED record sharing a SCHEDULED record's date an hour on.
// That record is not a later period: collecting the SCHEDULED one still
// opens the next period, or the subscription would silently stop. A later
// SCHEDULED or PAUSED record, or any record on or after the next billing
// date, is the next period already.
func TestCollectorNextPeriodBesideBatchRecords(t *testing.T) {
	for name, stores := range map[string]func(t *testing.T) (billing.Repository, billing.History){
		"memory": func(t *testing.T) (billing.Repository, billing.History) { return nil, nil },
		"dynamodb": func(t *testing.T) (billing.Repository, billing.History) {
			return storetest.DynamoStores(t, memory.Options{})
		},
	} {
		t.Run(name, func(t *testing.T) {
			repo, hist := stores(t)
			e := newCollectorEnv(t, func(cfg *billing.Config) {
				if repo != nil {
					cfg.Repository, cfg.History = repo, hist
				}
			})
			if repo != nil {
				e.repo, e.hist = repo, hist
			}
			testNextPeriodBesideBatchRecords(t, e)
		})
	}
}

func testNextPeriodBesideBatchRecords(t *testing.T, e *collectorEnv) {
	feb29 := time.Date(2024, 2, 29, 15, 0, 0, 0, time.UTC)
	rec := func(user, id string, date time.Time, st billing.Status) billing.Period {
		s := billing.Period{UserID: user, SubscriptionID: id, BillingDate: date, Amount: billing.MustParseAmount("4.99"),
			Status: st, BillingPeriod: billing.BillingPeriod(date), Term: billing.TermMonthly, AnchorDay: 31,
			CreatedDate: jan31.AddDate(0, -1, 0), LastRunDate: jan31.AddDate(0, -1, 0)}
		if st != billing.StatusScheduled && st != billing.StatusPaused {
			s.InitialRunDate = s.LastRunDate
		}
		return s
	}
	for _, c := range []struct {
		user   string
		beside billing.Period
		opens  bool
	}{
		{"beside-completed", rec("beside-completed", "beside-completed-charge", jan31, billing.StatusCompleted), true},
		{"beside-error", rec("beside-error", "beside-error-charge", jan31, billing.StatusError), true},
		{"beside-cancelled", rec("beside-cancelled", "beside-cancelled-charge", jan31, billing.StatusCancelled), true},
		{"prepaid", rec("prepaid", "prepaid-next", feb29, billing.StatusCompleted), false},
		// A later open record far from the next billing date is no next
		// period (a second plan another service wrote): it is reported,
		// and the subscription's next period opens all the same.
		{"paused-later", rec("paused-later", "paused-later-other", jan31.AddDate(0, 0, 10), billing.StatusPaused), true},
		{"scheduled-later", rec("scheduled-later", "scheduled-later-other", jan31.AddDate(0, 0, 10), billing.StatusScheduled), true},
		// Within a day of it, a later open record is the next period.
		{"successor", rec("successor", "successor-next", feb29.Add(2*time.Hour), billing.StatusScheduled), false},
	} {
		written, err := e.repo.AddAll(context.Background(), []billing.Period{rec(c.user, c.user+"-due", jan31, billing.StatusScheduled), c.beside})
		require.NoError(t, err, c.user)
		require.True(t, written[1].BillingDate.After(jan31), "%s: the batch keeps the other record after the SCHEDULED one", c.user)
	}
	rep := e.run(billing.RunScheduled)
	assert.Equal(t, 7, rep.Collected)
	assert.Equal(t, 2, rep.Unexpected, "the later open records that are no next period are reported")

	for _, c := range []struct {
		user  string
		opens bool
	}{{"beside-completed", true}, {"beside-error", true}, {"beside-cancelled", true}, {"prepaid", false}, {"paused-later", true}, {"scheduled-later", true}, {"successor", false}} {
		recs := e.records(c.user)
		opened := 0
		for _, r := range recs {
			if r.BillingDate.Equal(feb29) && r.Status == billing.StatusScheduled {
				opened++
			}
		}
		if c.opens {
			assert.Len(t, recs, 3, c.user)
			assert.Equal(t, 1, opened, "%s: the next period is opened", c.user)
		} else {
			assert.Len(t, recs, 2, c.user)
			assert.Zero(t, opened, "%s: the later record is the next period", c.user)
		}
	}
}
