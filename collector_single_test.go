package billing_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/memory"
	"github.com/stretchr/testify/require"
)

func TestCollectorSingleCollections(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		status  billing.Status
		due     bool
		noRetry bool
		op      func(c *billing.Collector, id string) (*billing.Report, error)
		wantErr error
		want    billing.Status
		process billing.Process
	}{
		{"batch collects due scheduled", billing.StatusScheduled, true, false,
			func(c *billing.Collector, id string) (*billing.Report, error) { return c.Periods().Collect(ctx, id) }, nil, billing.StatusCompleted, billing.ProcessBatch},
		{"batch refuses not due", billing.StatusScheduled, false, false,
			func(c *billing.Collector, id string) (*billing.Report, error) { return c.Periods().Collect(ctx, id) }, billing.ErrNotCollectible, billing.StatusScheduled, ""},
		{"batch refuses completed", billing.StatusCompleted, true, false,
			func(c *billing.Collector, id string) (*billing.Report, error) { return c.Periods().Collect(ctx, id) }, billing.ErrNotCollectible, billing.StatusCompleted, ""},
		{"batch refuses no-retry error", billing.StatusError, true, true,
			func(c *billing.Collector, id string) (*billing.Report, error) { return c.Periods().Collect(ctx, id) }, billing.ErrNotCollectible, billing.StatusError, ""},
		{"manual repayment of no-retry error", billing.StatusError, true, true,
			func(c *billing.Collector, id string) (*billing.Report, error) { return c.Periods().Repay(ctx, id) }, nil, billing.StatusCompleted, billing.ProcessManualRepayment},
		{"manual repayment refuses paused", billing.StatusPaused, true, false,
			func(c *billing.Collector, id string) (*billing.Report, error) { return c.Periods().Repay(ctx, id) }, billing.ErrNotCollectible, billing.StatusPaused, ""},
		{"unknown id", billing.StatusScheduled, true, false,
			func(c *billing.Collector, id string) (*billing.Report, error) {
				return c.Periods().Collect(ctx, "nope")
			}, billing.ErrNotFound, billing.StatusScheduled, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newCollectorEnv(t)
			date := jan31
			if !tt.due {
				date = jan31.AddDate(0, 0, 3)
			}
			s := e.add("u1", date, tt.status, func(s *billing.Period) {
				s.NoRetry = tt.noRetry
				if tt.status != billing.StatusScheduled && tt.status != billing.StatusPaused {
					s.InitialRunDate, s.Attempt = date, 1
				}
			})
			_, err := tt.op(e.c, s.SubscriptionID)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			cur, _ := e.repo.GetByID(ctx, s.SubscriptionID)
			require.Equal(t, tt.want, cur.Status, "status = %s, want %s", cur.Status, tt.want)
			if tt.wantErr == nil && cur.Process != tt.process {
				t.Fatalf("process = %s, want %s", cur.Process, tt.process)
			}
			if tt.wantErr != nil && e.pay.CallCount() != 0 {
				t.Fatal("provider called for a refused collection")
			}
		})
	}
}

func TestCollectorCollectUserTakesOldestFirst(t *testing.T) {
	e := newCollectorEnv(t)
	e.add("u1", jan31.AddDate(0, 0, -10), billing.StatusError, func(s *billing.Period) { s.InitialRunDate, s.Attempt = s.BillingDate, 1 })
	e.add("u1", jan31, billing.StatusScheduled, func(s *billing.Period) { s.InitialRunDate = time.Time{} })
	rep, err := e.c.CollectUser(context.Background(), "u1", billing.ProcessWebhookBalance)
	if err != nil || rep.Collected != 2 {
		t.Fatalf("report = %+v, %v", rep, err)
	}
	calls := e.pay.Calls()
	if len(calls) != 2 || !calls[0].Request.BillingDate.Before(calls[1].Request.BillingDate) || calls[0].Request.Attempt != 2 {
		t.Fatalf("calls = %+v", calls)
	}
	_, err = e.c.CollectUser(context.Background(), "u1", billing.ProcessInitial)
	require.ErrorIs(t, err, billing.ErrInvalidQuery, "CollectUser with INITIAL")
}

func TestCollectorLockedSingleCollectionReturnsErrAlreadyLocked(t *testing.T) {
	e := newCollectorEnv(t)
	s := e.add("u1", jan31, billing.StatusScheduled)
	lease, _ := e.locker.Lock(context.Background(), "u1")
	defer lease.Release(context.Background())
	_, err := e.c.Periods().Collect(context.Background(), s.SubscriptionID)
	require.ErrorIs(t, err, billing.ErrAlreadyLocked, "err =")
}

func TestReportIsJSON(t *testing.T) {
	e := newCollectorEnv(t)
	e.add("u1", jan31, billing.StatusScheduled)
	e.pay.SetUser("u1", billingtest.UnknownBeforeCharge(nil))
	rep := e.run(billing.RunScheduled)
	js, err := json.Marshal(rep)
	require.NoError(t, err)
	for _, want := range []string{`"kind":"scheduled"`, `"unknown":1`, `"failed":[{"user_id":"u1"`} {
		if !strings.Contains(string(js), want) {
			t.Errorf("report JSON %s lacks %s", js, want)
		}
	}
}

func TestNewCollectorValidates(t *testing.T) {
	store := billingtest.NewMemoryStore(t, memory.Options{})
	lk := billingtest.NewLocker(billing.SystemClock{}, time.Minute)
	pay := billingtest.NewProvider(billingtest.ProviderOptions{})
	for name, cfg := range map[string]billing.Config{
		"Repository":          {Locker: lk, Provider: pay},
		"Locker":              {Repository: store.Repository(), Provider: pay},
		"Provider":            {Repository: store.Repository(), Locker: lk},
		"OldSubscriptionDays": {Repository: store.Repository(), Locker: lk, Provider: pay, OldSubscriptionDays: -1},
		"Concurrency":         {Repository: store.Repository(), Locker: lk, Provider: pay, Concurrency: -1},
		"PagesPerInvocation":  {Repository: store.Repository(), Locker: lk, Provider: pay, PagesPerInvocation: -1},
	} {
		if _, err := billing.NewCollector(cfg); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: err = %v, want one naming the field", name, err)
		}
	}
	if _, err := billing.NewCollector(billing.Config{Repository: store.Repository(), Locker: lk, Provider: pay}); err != nil {
		t.Fatal(err)
	}
}

func TestDefaultRetryPolicy(t *testing.T) {
	p := billing.DefaultRetryPolicy{}
	bd := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		lastRun time.Time
		now     time.Time
		want    bool
	}{
		{"same UTC day", bd.Add(time.Hour), bd.Add(5 * time.Hour), false},
		{"next UTC day", bd.Add(time.Hour), bd.Add(13 * time.Hour), true},
		{"just before midnight then after", time.Date(2024, 3, 2, 23, 59, 0, 0, time.UTC), time.Date(2024, 3, 3, 0, 1, 0, 0, time.UTC), true},
		{"day 30", bd, bd.AddDate(0, 0, 30), true},
		{"past the window", bd, bd.AddDate(0, 0, 30).Add(time.Second), false},
		{"never run", time.Time{}, bd.Add(time.Hour), true},
	}
	for _, tt := range tests {
		s := billing.Period{BillingDate: bd, LastRunDate: tt.lastRun}
		if got := p.ShouldRetry(&s, tt.now); got != tt.want {
			t.Errorf("%s: ShouldRetry = %v", tt.name, got)
		}
	}
}
