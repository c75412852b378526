package billing_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/internal/storetest"
	"github.com/dynabill/billing/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const shardTestShards = 4

// shardEnv is a collector on a repository with shardTestShards shards read
// through the due index, with due SCHEDULED records of many users and
// records not due yet.
type shardEnv struct {
	repo  billing.Repository
	pay   *billingtest.Provider
	clock *billingtest.Clock
	lock  *billingtest.Locker
	due   []billing.Period
}

func newShardEnv(t *testing.T, repo billing.Repository, users int) *shardEnv {
	t.Helper()
	e := &shardEnv{repo: repo, clock: billingtest.NewClock(jan31.Add(time.Hour))}
	e.pay = billingtest.NewProvider(billingtest.ProviderOptions{Clock: e.clock})
	e.lock = billingtest.NewLocker(e.clock, time.Minute)
	for i := range users {
		for j, bd := range []time.Time{jan31, time.Date(2024, 2, 29, 15, 0, 0, 0, time.UTC)} { // due, and its next period
			s := billing.Period{UserID: fmt.Sprintf("shard-user-%03d", i), SubscriptionID: fmt.Sprintf("shard-sub-%03d-%02d", i, bd.Day()),
				BillingDate: bd, Amount: billing.MustParseAmount("9.99"), Status: billing.StatusScheduled, BillingPeriod: billing.BillingPeriod(bd),
				Term: billing.TermMonthly, AnchorDay: bd.Day(), CreatedDate: jan31.AddDate(0, -1, 0), LastRunDate: jan31.AddDate(0, -1, 0).Add(time.Duration(j) * time.Second)}
			if j == 0 {
				require.NoError(t, repo.Add(context.Background(), &s))
			} else {
				_, err := repo.AddAll(context.Background(), []billing.Period{s}) // the next period, from a batch
				require.NoError(t, err)
			}
			if !bd.After(jan31) {
				e.due = append(e.due, s)
			}
		}
	}
	return e
}

func (e *shardEnv) collector(t *testing.T, mut func(*billing.Config)) *billing.Collector {
	t.Helper()
	var seq atomic.Int64
	cfg := billing.Config{Repository: e.repo, Locker: e.lock, Provider: e.pay, Clock: e.clock, Concurrency: 2, PagesPerInvocation: 2,
		NewID: func() string { return fmt.Sprintf("next-%d", seq.Add(1)) }}
	if mut != nil {
		mut(&cfg)
	}
	c, err := billing.NewCollector(cfg)
	require.NoError(t, err)
	return c
}

// runShard runs req through every continuation and returns the sum of the
// reports' collections.
func runShard(ctx context.Context, c *billing.Collector, req billing.RunRequest) (collected int, err error) {
	for {
		rep, err := c.Run(ctx, req)
		if rep != nil {
			collected += rep.Collected
		}
		if err != nil {
			return collected, err
		}
		if req.Cursor = rep.Next; req.Cursor == "" {
			return collected, nil
		}
	}
}

// requireCollectedOnce checks that every due record was charged exactly
// once and is COMPLETED, and that no user got more than one next period.
func (e *shardEnv) requireCollectedOnce(t *testing.T) {
	t.Helper()
	billingtest.RequireNoDoubleCharge(t, e.pay)
	assert.Len(t, e.pay.Charges(), len(e.due), "one charge per due record")
	for _, d := range e.due {
		got, err := e.repo.Get(context.Background(), d.UserID, d.BillingDate)
		require.NoError(t, err)
		assert.Equal(t, billing.StatusCompleted, got.Status, d.Key())
		recs, err := e.repo.ListByUser(context.Background(), d.UserID)
		require.NoError(t, err)
		assert.Len(t, recs, 2, "%s: the collected period and the one not due; the next period is the existing later record", d.UserID)
	}
}

// shardedStores are the repositories the sharded-run tests run on: the
// in-memory store and the legacy tables on the local DynamoDB server,
// both reading the due index.
func shardedStores() map[string]func(t *testing.T) billing.Repository {
	opts := memory.Options{PageSize: 3, StatusIndexMode: dynamostore.StatusIndexDue, DueShards: shardTestShards}
	return map[string]func(t *testing.T) billing.Repository{
		"memory": func(t *testing.T) billing.Repository { return billingtest.NewMemoryStore(t, opts).Repository() },
		"dynamodb": func(t *testing.T) billing.Repository {
			repo, _ := storetest.DynamoStores(t, opts)
			return repo
		},
	}
}

// TestCollectorShardedRunsCollectOnce: a day's run spread over shard
// runs collects every due record exactly once, whether the shards run as
// separate invocations at once (one of them delivered twice, as a queue
// may), in one process with ShardConcurrency, or with one shard's run
// crashing and run again.
func TestCollectorShardedRunsCollectOnce(t *testing.T) {
	for name, newRepo := range shardedStores() {
		t.Run(name, func(t *testing.T) {
			t.Run("fan-out", func(t *testing.T) {
				e := newShardEnv(t, newRepo(t), 24)
				c := e.collector(t, nil)
				var wg sync.WaitGroup
				var total atomic.Int64
				for _, s := range []int{0, 1, 2, 3, 0} { // shard 0 delivered twice
					wg.Go(func() {
						n, err := runShard(t.Context(), c, billing.RunRequest{Kind: billing.RunScheduled, Shards: []int{s}})
						assert.NoError(t, err, "shard %d", s)
						total.Add(int64(n))
					})
				}
				wg.Wait()
				assert.Equal(t, int64(len(e.due)), total.Load())
				e.requireCollectedOnce(t)
			})
			t.Run("one process", func(t *testing.T) {
				e := newShardEnv(t, newRepo(t), 24)
				c := e.collector(t, func(cfg *billing.Config) { cfg.ShardConcurrency = 3 })
				invocations := 0
				req := billing.RunRequest{Kind: billing.RunScheduled}
				collected := 0
				for {
					rep, err := c.Run(t.Context(), req)
					require.NoError(t, err)
					invocations++
					collected += rep.Collected
					if req.Cursor = rep.Next; req.Cursor == "" {
						break
					}
				}
				assert.Equal(t, len(e.due), collected)
				assert.Greater(t, invocations, 1, "the run continues through a cursor of every shard")
				e.requireCollectedOnce(t)
			})
			t.Run("crashed shard rerun", func(t *testing.T) {
				e := newShardEnv(t, newRepo(t), 24)
				c := e.collector(t, nil)
				// Shard 2's first run dies after its second charge: the
				// processor answers, the process is gone before recording.
				ctx, cancel := context.WithCancel(t.Context())
				var calls atomic.Int64
				dying := e.collector(t, func(cfg *billing.Config) {
					cfg.Provider = providerFunc(func(pctx context.Context, req billing.PaymentRequest) (billing.PaymentResult, error) {
						res, err := e.pay.Collect(pctx, req)
						if calls.Add(1) == 2 {
							cancel()
							return billing.PaymentResult{}, errors.New("process killed")
						}
						return res, err
					})
				})
				_, err := runShard(ctx, dying, billing.RunRequest{Kind: billing.RunScheduled, Shards: []int{2}})
				require.Error(t, err)
				e.clock.Advance(2 * time.Minute) // the dead run's locks expire
				var wg sync.WaitGroup
				for s := range shardTestShards {
					wg.Go(func() {
						_, err := runShard(t.Context(), c, billing.RunRequest{Kind: billing.RunScheduled, Shards: []int{s}})
						assert.NoError(t, err, "shard %d", s)
					})
				}
				wg.Wait()
				e.requireCollectedOnce(t)
			})
			t.Run("bad shards", func(t *testing.T) {
				e := newShardEnv(t, newRepo(t), 1)
				_, err := e.collector(t, nil).Run(t.Context(), billing.RunRequest{Kind: billing.RunScheduled, Shards: []int{shardTestShards}})
				require.ErrorIs(t, err, billing.ErrInvalidQuery)
				c := e.collector(t, func(cfg *billing.Config) { cfg.ShardConcurrency = 2 })
				_, err = c.Run(t.Context(), billing.RunRequest{Kind: billing.RunScheduled, Cursor: "not-a-shard-cursor"})
				require.ErrorIs(t, err, billing.ErrInvalidCursor)
			})
		})
	}
}

// providerFunc adapts a function to billing.PaymentProvider.
type providerFunc func(ctx context.Context, req billing.PaymentRequest) (billing.PaymentResult, error)

func (f providerFunc) Collect(ctx context.Context, req billing.PaymentRequest) (billing.PaymentResult, error) {
	return f(ctx, req)
}

// throttlingRepo refuses some writes for capacity, as a throttled table
// or index does: the write does not happen.
type throttlingRepo struct {
	billing.Repository
	mu                          sync.Mutex
	setAttempts, updates, reads int // still to refuse (reads: Get and Recent)
}

func (r *throttlingRepo) refuse(n *int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if *n > 0 {
		*n--
		return true
	}
	return false
}

func (r *throttlingRepo) Get(ctx context.Context, userID string, billingDate time.Time) (billing.Period, error) {
	if r.refuse(&r.reads) {
		return billing.Period{}, fmt.Errorf("get: %w", billing.ErrThrottled)
	}
	return r.Repository.Get(ctx, userID, billingDate)
}

func (r *throttlingRepo) Recent(ctx context.Context, userID string, limit int) ([]billing.Period, error) {
	if r.refuse(&r.reads) {
		return nil, fmt.Errorf("recent: %w", billing.ErrThrottled)
	}
	return r.Repository.Recent(ctx, userID, limit)
}

func (r *throttlingRepo) SetAttempt(ctx context.Context, prev, next *billing.Period) error {
	if r.refuse(&r.setAttempts) {
		return fmt.Errorf("set attempt: %w", billing.ErrThrottled)
	}
	return r.Repository.SetAttempt(ctx, prev, next)
}

func (r *throttlingRepo) Update(ctx context.Context, prev, next *billing.Period, create ...*billing.Period) error {
	if r.refuse(&r.updates) {
		return fmt.Errorf("update: %w", billing.ErrThrottled)
	}
	return r.Repository.Update(ctx, prev, next, create...)
}

// TestCollectorThrottledStoreLosesNothing: store calls throttled before
// the charge (the re-read, the in-flight write) and after it (the outcome
// write, the case a throttled index causes) leave their records for the
// next run, which collects them: every due record charged exactly once,
// with the store budget's backoff in between.
func TestCollectorThrottledStoreLosesNothing(t *testing.T) {
	mem := billingtest.NewMemoryStore(t, memory.Options{PageSize: 3, StatusIndexMode: dynamostore.StatusIndexDue, DueShards: shardTestShards})
	repo := &throttlingRepo{Repository: mem.Repository(), reads: 2, setAttempts: 2, updates: 2}
	e := newShardEnv(t, repo, 12)
	c := e.collector(t, func(cfg *billing.Config) {
		cfg.StoreBudget = billing.StoreBudget{WriteUnitsPerSecond: 1e6, Backoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond}
	})
	var failed []billing.ItemFailure
	collected := 0
	for range 3 { // a day's run, then the retry of what was throttled
		req := billing.RunRequest{Kind: billing.RunScheduled}
		for {
			rep, err := c.Run(t.Context(), req)
			require.NoError(t, err)
			failed = append(failed, rep.Failed...)
			collected += rep.Collected
			if req.Cursor = rep.Next; req.Cursor == "" {
				break
			}
		}
		e.clock.Advance(2 * time.Minute)
	}
	require.Len(t, failed, 6, "each throttled call fails its record's collection in that run")
	for _, f := range failed {
		assert.Contains(t, f.Reason, billing.ErrThrottled.Error())
	}
	assert.Equal(t, len(e.due), collected)
	e.requireCollectedOnce(t)
}

func TestStatusQueryShardsIn(t *testing.T) {
	for _, c := range []struct {
		named []int
		k     int
		want  []int
	}{
		{nil, 0, []int{0}},
		{nil, 3, []int{0, 1, 2}},
		{[]int{2, 0, 2}, 3, []int{0, 2}},
		{[]int{0}, 1, []int{0}},
	} {
		got, err := billing.StatusQuery{Shards: c.named}.ShardsIn(c.k)
		require.NoError(t, err, "%v of %d", c.named, c.k)
		assert.Equal(t, c.want, got, "%v of %d", c.named, c.k)
	}
	for _, c := range []struct {
		named []int
		k     int
	}{{[]int{1}, 1}, {[]int{3}, 3}, {[]int{-1, 0}, 2}, {[]int{5}, 0}} {
		_, err := billing.StatusQuery{Shards: c.named}.ShardsIn(c.k)
		require.ErrorIs(t, err, billing.ErrInvalidQuery, "%v of %d", c.named, c.k)
	}
}

// TestCollectorFreshDailyRunsReachEveryShard: a host whose daily run is
// never continued (its continuation dropped, or never sent), with a
// backlog that fills the run's page budget in its first shard, still
// charges the users of every shard within as many days as there are
// shards: a fresh run's first shard moves with the day over all of them,
// not over the shards a multiple of the page budget away from 0.
func TestCollectorFreshDailyRunsReachEveryShard(t *testing.T) {
	const pageSize, pages = 3, 2
	for _, k := range []int{4, 8} {
		t.Run(fmt.Sprintf("%d shards", k), func(t *testing.T) {
			mem := billingtest.NewMemoryStore(t, memory.Options{PageSize: pageSize, StatusIndexMode: dynamostore.StatusIndexDue, DueShards: k})
			repo := mem.Repository()
			// Each shard holds a run's page budget of due users: a run
			// that starts on it spends its budget there.
			perShard := make([][]billing.Period, k)
			for i := 0; slices.ContainsFunc(perShard, func(s []billing.Period) bool { return len(s) < pageSize*pages }); i++ {
				u := fmt.Sprintf("rot-user-%04d", i)
				s := layout.DueShard(u, k)
				if len(perShard[s]) == pageSize*pages {
					continue
				}
				rec := envRecord(u, jan31, billing.StatusScheduled)
				require.NoError(t, repo.Add(t.Context(), &rec))
				perShard[s] = append(perShard[s], rec)
			}
			clock := billingtest.NewClock(jan31.Add(time.Hour))
			pay := billingtest.NewProvider(billingtest.ProviderOptions{Clock: clock})
			c, err := billing.NewCollector(billing.Config{Repository: repo, Locker: billingtest.NewLocker(clock, time.Minute), Provider: pay,
				Clock: clock, Concurrency: 2, PagesPerInvocation: pages})
			require.NoError(t, err)
			for day := range k {
				rep, err := c.Run(t.Context(), billing.RunRequest{Kind: billing.RunScheduled})
				require.NoError(t, err, "day %d", day)
				require.Equal(t, pages, rep.Pages, "day %d: the run spends its page budget", day)
				require.NotEmpty(t, rep.Next, "day %d: the run leaves a continuation, which the host drops", day)
				clock.Advance(24 * time.Hour)
			}
			billingtest.RequireNoDoubleCharge(t, pay)
			for s, recs := range perShard {
				for _, r := range recs {
					got, err := repo.Get(t.Context(), r.UserID, r.BillingDate)
					require.NoError(t, err)
					assert.Equal(t, billing.StatusCompleted, got.Status, "shard %d: %s charged within %d days", s, r.UserID, k)
					assert.Len(t, pay.ChargesFor(r.SubscriptionID), 1, "shard %d: %s", s, r.SubscriptionID)
				}
			}
		})
	}
}
