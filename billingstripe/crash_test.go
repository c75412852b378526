package billingstripe_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/stretchr/testify/require"
)

var errCrash = errors.New("injected store failure")

// faultyRepo fails store calls: the failAt-th call (before it applies, or
// after it applied when after is set), and any call fail draws true for.
type faultyRepo struct {
	billing.Repository
	mu     sync.Mutex
	calls  int
	failAt int
	after  bool
	fail   func(call int) (fail, after bool)
}

func (r *faultyRepo) do(apply func() error) error {
	r.mu.Lock()
	r.calls++
	n := r.calls
	hit, after := n == r.failAt, r.after
	if !hit && r.fail != nil {
		hit, after = r.fail(n)
	}
	r.mu.Unlock()
	if hit && os.Getenv("SIM_DEBUG") != "" {
		fmt.Fprintf(os.Stderr, "store fault: call %d, after applying: %v\n", n, after)
	}
	if hit && !after {
		return fmt.Errorf("call %d: %w", n, errCrash)
	}
	err := apply()
	if hit && err == nil {
		return fmt.Errorf("call %d (applied): %w", n, errCrash)
	}
	return err
}

func (r *faultyRepo) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

func (r *faultyRepo) Add(ctx context.Context, s *billing.Period) error {
	return r.do(func() error { return r.Repository.Add(ctx, s) })
}

func (r *faultyRepo) Get(ctx context.Context, userID string, billingDate time.Time) (s billing.Period, err error) {
	err = r.do(func() (err error) { s, err = r.Repository.Get(ctx, userID, billingDate); return err })
	return s, err
}

func (r *faultyRepo) GetByID(ctx context.Context, id string) (s billing.Period, err error) {
	err = r.do(func() (err error) { s, err = r.Repository.GetByID(ctx, id); return err })
	return s, err
}

func (r *faultyRepo) ListByUser(ctx context.Context, userID string) (s []billing.Period, err error) {
	err = r.do(func() (err error) { s, err = r.Repository.ListByUser(ctx, userID); return err })
	return s, err
}

func (r *faultyRepo) QueryStatus(ctx context.Context, q billing.StatusQuery) (p billing.Page, err error) {
	err = r.do(func() (err error) { p, err = r.Repository.QueryStatus(ctx, q); return err })
	return p, err
}

func (r *faultyRepo) Update(ctx context.Context, prev, next *billing.Period, create ...*billing.Period) error {
	return r.do(func() error { return r.Repository.Update(ctx, prev, next, create...) })
}

func (r *faultyRepo) AdminUpdate(ctx context.Context, prev, next *billing.Period) error {
	return r.do(func() error { return r.Repository.AdminUpdate(ctx, prev, next) })
}

func (r *faultyRepo) SetAttempt(ctx context.Context, prev, next *billing.Period) error {
	return r.do(func() error { return r.Repository.SetAttempt(ctx, prev, next) })
}

// crashEnv is three card users due on billed, charged through the
// Provider and the fake Stripe by a collector whose store fails as told.
func newCrashEnv(t *testing.T, failAt int, after bool) (*collEnv, *faultyRepo) {
	t.Helper()
	var fr *faultyRepo
	e := newCollEnv(t, collOptions{repo: func(r billing.Repository) billing.Repository {
		fr = &faultyRepo{Repository: r}
		return fr
	}})
	for _, u := range []string{"u1", "u2", "u3"} {
		e.addCard(u)
		e.subscribe(t, u)
	}
	fr.mu.Lock()
	fr.calls, fr.failAt, fr.after = 0, failAt, after
	fr.mu.Unlock()
	return e, fr
}

// runUntilDone reruns the scheduled run, a minute apart, until a run finds
// nothing to do.
func (e *collEnv) runUntilDone(t *testing.T) {
	t.Helper()
	for range 6 {
		e.clock.Advance(time.Minute)
		rep, err := e.c.Run(t.Context(), billing.RunRequest{Kind: billing.RunScheduled})
		if err == nil && rep.Attempted == 0 && len(rep.Failed) == 0 && rep.Next == "" {
			return
		}
	}
	t.Fatal("the scheduled run did not settle after 6 reruns")
}

func (e *collEnv) checkCrash(t *testing.T) {
	t.Helper()
	for _, u := range []string{"u1", "u2", "u3"} {
		recs, err := e.repo.ListByUser(t.Context(), u)
		require.NoError(t, err)
		require.Len(t, recs, 2, "user %s: the period and the next, none lost or doubled", u)
		require.Equal(t, billing.StatusCompleted, recs[0].Status, "user %s", u)
		require.Equal(t, billing.StatusScheduled, recs[1].Status, "user %s", u)
		require.False(t, recs[0].InFlight())
	}
	require.Len(t, e.srv.Charged(), 3, "one charge per user")
	requireOneChargePerPeriod(t, e.srv, e.repo)
}

// TestCrashAtEveryStoreCall fails the collector's k-th store call, for
// every k of a clean run, before or after it applies, then reruns: every
// user is charged exactly once and every charge is recorded.
func TestCrashAtEveryStoreCall(t *testing.T) {
	probe, fr := newCrashEnv(t, 0, false)
	probe.runUntilDone(t)
	probe.checkCrash(t)
	calls := fr.total()
	require.GreaterOrEqual(t, calls, 9, "a clean run makes at least a query and three calls a user")
	for _, after := range []bool{false, true} {
		for k := 1; k <= calls; k++ {
			name := fmt.Sprintf("before-%d", k)
			if after {
				name = fmt.Sprintf("after-%d", k)
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				e, _ := newCrashEnv(t, k, after)
				e.runUntilDone(t)
				e.checkCrash(t)
			})
		}
	}
}
