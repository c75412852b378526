package billing

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readOrders is, for fresh runs of a collector started one a day for days
// days from start, the order in which each reads its shards: its cursor
// state's chains one after the other.
func readOrders(t *testing.T, c *Collector, start time.Time, days int, shards []int, k int) [][]int {
	t.Helper()
	var orders [][]int
	for d := range days {
		st, err := c.runState(RunRequest{Kind: RunScheduled}, start.AddDate(0, 0, d), shards, k)
		require.NoError(t, err)
		require.NotEmpty(t, st.Left)
		var order []int
		for _, ch := range st.Left {
			if c.cfg.ShardConcurrency > 1 && len(ch.Shards) != 1 {
				require.Len(t, ch.Shards, 1, "one chain per shard when shards run at once")
			}
			if !slices.IsSorted(ch.Shards) {
				require.Fail(t, "the store walks a chain's shards in ascending order", "%v", ch.Shards)
			}
			order = append(order, ch.Shards...)
		}
		if !coversOnce(order, shards) {
			require.ElementsMatch(t, shards, order, "a fresh run's chains cover its shards once each")
		}
		orders = append(orders, order)
	}
	return orders
}

// coversOnce reports whether order names each of the ascending shards
// once.
func coversOnce(order, shards []int) bool {
	if len(order) != len(shards) {
		return false
	}
	seen := make([]bool, slices.Max(shards)+1)
	for _, s := range order {
		if _, ok := slices.BinarySearch(shards, s); !ok || seen[s] {
			return false
		}
		seen[s] = true
	}
	return true
}

// readFirst is the set of shards the first n of each order name.
func readFirst(orders [][]int, n int) []int {
	var read []int
	for _, o := range orders {
		read = append(read, o[:min(n, len(o))]...)
	}
	slices.Sort(read)
	return slices.Compact(read)
}

// TestRunRotationReachesEveryShard: a fresh run's first shard moves with
// the day so that, for every shard count K and every page budget P, any K
// days in a row start on every one of the K shards — in turn and with
// shards at once. A run whose page budget its first shard's backlog
// exhausts, never continued, thus still reads every shard within K days.
// And a run that finds at most a page in each shard (P shards a day)
// reads them all within two days of ceil(K/P).
func TestRunRotationReachesEveryShard(t *testing.T) {
	starts := []time.Time{
		time.Date(2024, 1, 31, 15, 0, 0, 0, time.UTC),
		time.Date(2026, 11, 28, 23, 59, 59, 0, time.UTC),
		time.Unix(0, 0).UTC(),
	}
	pageBudgets := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, DefaultRunPagesPerInvocation, 16, 32, 64}
	for k := 1; k <= 64; k++ {
		shards := make([]int, k)
		for i := range shards {
			shards[i] = i
		}
		for _, pages := range pageBudgets {
			for _, sc := range []int{1, 4} {
				c := &Collector{cfg: Config{PagesPerInvocation: pages, ShardConcurrency: sc}}
				for _, start := range starts {
					orders := readOrders(t, c, start, k, shards, k)
					if !assert.Equal(t, shards, readFirst(orders, 1),
						"K=%d P=%d shard concurrency=%d from %s: the shards %d days in a row start on", k, pages, sc, start, k) {
						return
					}
					light := (k+pages-1)/pages + 2
					if !assert.Equal(t, shards, readFirst(orders[:min(light, k)], pages),
						"K=%d P=%d shard concurrency=%d from %s: the shards %d days of P shards read", k, pages, sc, start, light) {
						return
					}
				}
			}
		}
	}
	// A run over some shards rotates over those.
	some := []int{1, 3, 5, 7, 9, 11}
	c := &Collector{cfg: Config{PagesPerInvocation: 2}}
	assert.Equal(t, some, readFirst(readOrders(t, c, starts[0], len(some), some, 16), 1))
}

// TestRotationStep: the step is a unit modulo the shard count for large
// stores too (up to the due index's 1024 shards), and with the default
// page budget over 32 shards it is not the budget's 10, which would start
// on even shards only.
func TestRotationStep(t *testing.T) {
	for _, n := range []int{2, 3, 8, 32, 100, 128, 1000, 1024} {
		for _, pages := range []int{1, 2, 7, DefaultRunPagesPerInvocation, 12, 1024} {
			s := rotationStep(pages, n)
			assert.Equal(t, 1, gcd(s, n), fmt.Sprintf("step %d of %d pages over %d shards", s, pages, n))
			assert.Equal(t, s, rotationStep(pages, n), "the step is the same every day")
		}
	}
	assert.NotEqual(t, DefaultRunPagesPerInvocation, rotationStep(DefaultRunPagesPerInvocation, 32))
}
