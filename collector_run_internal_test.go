package billing

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// firstShardsRead is, for fresh runs of a collector started one a day for
// days days from start, the shard each reads first: the first shard of
// the first chain of its cursor state.
func firstShardsRead(t *testing.T, c *Collector, start time.Time, days int, shards []int, k int) []int {
	t.Helper()
	var firsts []int
	for d := range days {
		st, err := c.runState(RunRequest{Kind: RunScheduled}, start.AddDate(0, 0, d), shards, k)
		require.NoError(t, err)
		require.NotEmpty(t, st.Left)
		var all []int
		for _, ch := range st.Left {
			if c.cfg.ShardConcurrency > 1 && len(ch.Shards) != 1 {
				require.Len(t, ch.Shards, 1, "one chain per shard when shards run at once")
			}
			if !slices.IsSorted(ch.Shards) {
				require.Fail(t, "the store walks a chain's shards in ascending order", "%v", ch.Shards)
			}
			all = append(all, ch.Shards...)
		}
		if slices.Sort(all); !slices.Equal(shards, all) {
			require.Equal(t, shards, all, "a fresh run's chains cover its shards once each")
		}
		firsts = append(firsts, st.Left[0].Shards[0])
	}
	return firsts
}

// TestRunRotationReachesEveryShard: a fresh run's first shard moves with
// the day so that, for every shard count K and every page budget, any K
// days in a row start on every one of the K shards — in turn and with
// shards at once. A run whose page budget its first shard's backlog
// exhausts, never continued, thus still reads every shard within K days.
func TestRunRotationReachesEveryShard(t *testing.T) {
	starts := []time.Time{
		time.Date(2024, 1, 31, 15, 0, 0, 0, time.UTC),
		time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC),
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
					firsts := firstShardsRead(t, c, start, k, shards, k)
					slices.Sort(firsts)
					if !assert.Equal(t, shards, slices.Compact(firsts),
						"K=%d pages=%d shard concurrency=%d from %s: the shards %d days in a row start on", k, pages, sc, start, k) {
						return
					}
				}
			}
		}
	}
	// A run over some shards rotates over those.
	some := []int{1, 3, 5, 7, 9, 11}
	c := &Collector{cfg: Config{PagesPerInvocation: 2}}
	firsts := firstShardsRead(t, c, starts[0], len(some), some, 16)
	slices.Sort(firsts)
	assert.Equal(t, some, firsts)
}

func TestRotationStep(t *testing.T) {
	for _, c := range []struct{ pages, n, want int }{
		{10, 8, 3}, {10, 32, 11}, {1, 8, 1}, {2, 2, 1}, {3, 9, 4}, {8, 8, 1}, {0, 5, 1}, {7, 64, 7}, {12, 12, 1}, {6, 7, 6},
	} {
		s := rotationStep(c.pages, c.n)
		assert.Equal(t, c.want, s, fmt.Sprintf("step of %d pages over %d shards", c.pages, c.n))
		assert.Equal(t, 1, gcd(s, c.n))
	}
}
