package capacity

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lat is the default latency of a collection, worked out by hand:
// (3.05 data calls + 3.0 lock calls) × 5 ms + 300 ms = 330.25 ms.
const lat = 0.33025

// find returns the row of index, k shards and processor limit.
func find(t *testing.T, rows []Row, index Index, k int, limit float64) Row {
	t.Helper()
	i := slices.IndexFunc(rows, func(r Row) bool { return r.Index == index && r.Shards == k && r.ProcessorLimit == limit })
	require.GreaterOrEqual(t, i, 0, "no row %s K=%d processor %v", index, k, limit)
	return rows[i]
}

// near asserts got is want to 1e-9 relative.
func near(t *testing.T, want, got float64, msg string) {
	t.Helper()
	assert.InEpsilon(t, want, got, 1e-9, msg)
}

func TestEvaluateDefaults(t *testing.T) {
	t.Parallel()
	rows, err := Evaluate(Params{})
	require.NoError(t, err)
	// Legacy then K = 1, 8, 32, for processor limits 100 and none.
	require.Len(t, rows, 8)
	var order []string
	for _, r := range rows {
		order = append(order, fmt.Sprintf("%s K=%d %v/s", r.Index, r.Shards, r.ProcessorLimit))
	}
	assert.Equal(t, []string{"legacy K=1 100/s", "due K=1 100/s", "due K=8 100/s", "due K=32 100/s",
		"legacy K=1 0/s", "due K=1 0/s", "due K=8 0/s", "due K=32 0/s"}, order)

	// Caps that do not depend on the row, in collections a second.
	const (
		tableWCU = 40000.0 / 9    // 4,444.4: the data tables' 9 WCU bind before the lock table's 2.1
		tableRCU = 40000.0 / 1.06 // 37,735.8
		// (9 + 2.1 + 3 due index) WCU × $0.625 + 1.06 RCU × $0.125 per million
		dollars = 14.1*0.625 + 1.06*0.125 // 8.945
		// the legacy status index: 4 index WCU
		legacyDollars = 15.1*0.625 + 1.06*0.125 // 9.57
	)
	for _, tc := range []struct {
		name     string
		index    Index
		k        int
		limit    float64
		indexWCU float64 // K × 1000 / 3 (legacy: 1000 / 3, three of its four index writes on the SCHEDULED partition)
		indexRCU float64 // K × 3000 / 0.5 (legacy: 0.5 × 2.5 items read per due item)
		conc     float64 // K × 4 / 0.33025
		binding  Limit
		rate     float64
		took     string
	}{
		{"legacy, processor 100", IndexLegacy, 1, 100, 1000.0 / 3, 2400, 4 / lat, LimitConcurrency, 4 / lat, "3d 19h 45m"},
		{"K=1, processor 100", IndexDue, 1, 100, 1000.0 / 3, 6000, 4 / lat, LimitConcurrency, 4 / lat, "3d 19h 45m"},
		{"K=8, processor 100", IndexDue, 8, 100, 8000.0 / 3, 48000, 32 / lat, LimitConcurrency, 32 / lat, "11h 29m"},
		{"K=32, processor 100", IndexDue, 32, 100, 32000.0 / 3, 192000, 128 / lat, LimitProcessor, 100, "11h 7m"},
		{"legacy, no processor limit", IndexLegacy, 1, 0, 1000.0 / 3, 2400, 4 / lat, LimitConcurrency, 4 / lat, "3d 19h 45m"},
		{"K=1, no processor limit", IndexDue, 1, 0, 1000.0 / 3, 6000, 4 / lat, LimitConcurrency, 4 / lat, "3d 19h 45m"},
		{"K=8, no processor limit", IndexDue, 8, 0, 8000.0 / 3, 48000, 32 / lat, LimitConcurrency, 32 / lat, "11h 29m"},
		{"K=32, no processor limit", IndexDue, 32, 0, 32000.0 / 3, 192000, 128 / lat, LimitConcurrency, 128 / lat, "2h 53m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := find(t, rows, tc.index, tc.k, tc.limit)
			for l, want := range map[Limit]float64{LimitIndexWCU: tc.indexWCU, LimitIndexRCU: tc.indexRCU,
				LimitTableWCU: tableWCU, LimitTableRCU: tableRCU, LimitConcurrency: tc.conc} {
				got, ok := r.Cap(l)
				require.True(t, ok, "no %s cap", l)
				near(t, want, got, string(l))
			}
			p, ok := r.Cap(LimitProcessor)
			assert.Equal(t, tc.limit > 0, ok, "processor cap present")
			if ok {
				assert.Equal(t, tc.limit, p)
			}
			assert.Equal(t, tc.binding, r.Binding)
			near(t, tc.rate, r.PerSecond, "collections/s")
			near(t, tc.rate*3600, r.PerHour, "invoices/hour")
			assert.Equal(t, int64(4_000_000), r.Due)
			near(t, 4e6/tc.rate, r.Seconds, "seconds to bill")
			assert.Equal(t, tc.took, FormatDuration(r.Seconds))
			want := dollars
			if tc.index == IndexLegacy {
				want = legacyDollars
			}
			near(t, want, r.DollarsPerMillion, "$ per million")
		})
	}
	// The worked numbers of docs/capacity.md.
	near(t, 330250, find(t, rows, IndexDue, 1, 0).Seconds, "K=1: 4M / (4 / 0.33025)")
	near(t, 10320.3125, find(t, rows, IndexDue, 32, 0).Seconds, "K=32: 4M / (128 / 0.33025)")
	near(t, 40000, find(t, rows, IndexDue, 32, 100).Seconds, "K=32 at 100/s: 4M / 100")
	near(t, 8.945, find(t, rows, IndexDue, 32, 0).DollarsPerMillion, "$ per million")
}

// TestEvaluateRaisedConcurrency: with workers enough that the runs no
// longer bind (200 a shard: 605.6/s a run, above a partition's 333/s), the
// index binds at K = 1 and 8 and the table's WCU at K = 32; a processor
// limit of 100/s binds on every row.
func TestEvaluateRaisedConcurrency(t *testing.T) {
	t.Parallel()
	rows, err := Evaluate(Params{Workers: 200})
	require.NoError(t, err)
	for _, tc := range []struct {
		index   Index
		k       int
		binding Limit
		rate    float64
		took    string
	}{
		{IndexLegacy, 1, LimitIndexWCU, 1000.0 / 3, "3h 20m"}, // one partition, 3 of the 4 index WCU on it: 1000 / 3; 4M / 333.3 = 12,000 s
		{IndexDue, 1, LimitIndexWCU, 1000.0 / 3, "3h 20m"},
		{IndexDue, 8, LimitIndexWCU, 8000.0 / 3, "25m"},   // 8 × 1000 / 3; 1,500 s
		{IndexDue, 32, LimitTableWCU, 40000.0 / 9, "15m"}, // 4M / 4,444.4 = 900 s; the index would allow 16,000
	} {
		r := find(t, rows, tc.index, tc.k, 0)
		assert.Equal(t, tc.binding, r.Binding, "%s K=%d", tc.index, tc.k)
		near(t, tc.rate, r.PerSecond, string(tc.index))
		assert.Equal(t, tc.took, FormatDuration(r.Seconds), "%s K=%d", tc.index, tc.k)
		conc, _ := r.Cap(LimitConcurrency)
		near(t, float64(tc.k)*200/lat, conc, "K × 200 / 0.33025")

		limited := find(t, rows, tc.index, tc.k, 100)
		assert.Equal(t, LimitProcessor, limited.Binding, "%s K=%d at 100/s", tc.index, tc.k)
		assert.Equal(t, 100.0, limited.PerSecond)
		assert.Equal(t, "11h 7m", FormatDuration(limited.Seconds))
	}
}

func TestEvaluateInputs(t *testing.T) {
	t.Parallel()
	t.Run("zero is the default", func(t *testing.T) {
		explicit := Params{
			Subscriptions: 10_000_000, DueFraction: 0.4, DataCalls: 3.05, LockCalls: 3, BaseWCU: 9, LockWCU: 2.1,
			RCU: 1.06, IndexWCU: 3, IndexReadRCU: 0.5, LegacyIndexWCU: 4, LegacyPartitionIndexWCU: 3, LegacyItemsReadPerDue: 2.5,
			PartitionWCU: 1000, PartitionRCU: 3000, TableWCU: 40000, TableRCU: 40000, Workers: 4,
			CallLatency: 5 * time.Millisecond, ProcessorLatency: 300 * time.Millisecond,
			Shards: []int{1, 8, 32}, ProcessorLimits: []float64{100, 0},
			WriteRequestUnitPrice: 0.625, ReadRequestUnitPrice: 0.125,
		}
		assert.Equal(t, explicit, Params{}.WithDefaults())
		a, err := Evaluate(Params{})
		require.NoError(t, err)
		b, err := Evaluate(explicit)
		require.NoError(t, err)
		assert.Equal(t, a, b, "deterministic, and the defaults are the documented values")
		assert.Equal(t, 330250*time.Microsecond, Params{}.Latency())
		assert.Equal(t, int64(4_000_000), Params{}.Due())
	})
	t.Run("negative means none", func(t *testing.T) {
		p := Params{LockCalls: -1, LockWCU: -1, IndexReadRCU: -1, ProcessorLatency: -1,
			Shards: []int{2}, ProcessorLimits: []float64{0}}
		// 3.05 calls × 5 ms, no lock calls, no processor wait.
		assert.Equal(t, 15250*time.Microsecond, p.Latency())
		rows, err := Evaluate(p)
		require.NoError(t, err)
		r := find(t, rows, IndexDue, 2, 0)
		_, ok := r.Cap(LimitIndexRCU)
		assert.False(t, ok, "no index reads, no index RCU cap")
		conc, _ := r.Cap(LimitConcurrency)
		near(t, 2*4/0.01525, conc, "2 runs × 4 workers / 15.25 ms")
		near(t, 12*0.625+1.06*0.125, r.DollarsPerMillion, "(9 + 0 + 3) WCU, 1.06 RCU")
		assert.Equal(t, LimitConcurrency, r.Binding) // 524.6/s against 666.7/s of index (2 × 1,000 / 3)
	})
	t.Run("lock table binds when its WCU is the larger", func(t *testing.T) {
		rows, err := Evaluate(Params{BaseWCU: 1, LockWCU: 4, Workers: 100000, Shards: []int{64}, ProcessorLimits: []float64{0}})
		require.NoError(t, err)
		r := find(t, rows, IndexDue, 64, 0)
		assert.Equal(t, LimitTableWCU, r.Binding)
		near(t, 10000, r.PerSecond, "40,000 / 4")
	})
	t.Run("index RCU binds when reads are heavy", func(t *testing.T) {
		rows, err := Evaluate(Params{IndexReadRCU: 10, Workers: 1000, Shards: []int{1}, ProcessorLimits: []float64{0}})
		require.NoError(t, err)
		r := find(t, rows, IndexDue, 1, 0)
		assert.Equal(t, LimitIndexRCU, r.Binding)
		near(t, 300, r.PerSecond, "3,000 / 10")
		legacy := find(t, rows, IndexLegacy, 1, 0)
		near(t, 120, legacy.PerSecond, "3,000 / (10 × 2.5)")
	})
	t.Run("due count", func(t *testing.T) {
		rows, err := Evaluate(Params{Subscriptions: 1000, DueFraction: 1, Shards: []int{1}, ProcessorLimits: []float64{0}})
		require.NoError(t, err)
		r := find(t, rows, IndexDue, 1, 0)
		assert.Equal(t, int64(1000), r.Due)
		near(t, 1000*lat/4, r.Seconds, "1,000 at 4 / 0.33025")
		legacy := find(t, rows, IndexLegacy, 1, 0)
		rcu, _ := legacy.Cap(LimitIndexRCU)
		near(t, 6000, rcu, "everything due: the legacy index reads 1 item per due item")
	})
}

// TestLegacyPartitionShare: the legacy index's day partition takes three
// of its four index writes unless told otherwise, and the ceiling follows
// it while the cost counts all four.
func TestLegacyPartitionShare(t *testing.T) {
	t.Parallel()
	rows, err := Evaluate(Params{LegacyIndexWCU: 8, Shards: []int{1}, ProcessorLimits: []float64{0}})
	require.NoError(t, err)
	legacy := find(t, rows, IndexLegacy, 1, 0)
	wcu, _ := legacy.Cap(LimitIndexWCU)
	near(t, 1000.0/6, wcu, "1000 / (0.75 × 8)")
	near(t, (9+2.1+8)*0.625+1.06*0.125, legacy.DollarsPerMillion, "the cost counts all 8")

	rows, err = Evaluate(Params{LegacyPartitionIndexWCU: 4, Shards: []int{1}, ProcessorLimits: []float64{0}})
	require.NoError(t, err)
	wcu, _ = find(t, rows, IndexLegacy, 1, 0).Cap(LimitIndexWCU)
	near(t, 250, wcu, "every legacy index write on one partition: 1000 / 4")
}

func TestValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		p    Params
		want string
	}{
		{"negative subscriptions", Params{Subscriptions: -1}, "Subscriptions"},
		{"due fraction above 1", Params{DueFraction: 1.5}, "DueFraction"},
		{"negative due fraction", Params{DueFraction: -0.1}, "DueFraction"},
		{"NaN", Params{DataCalls: math.NaN()}, "DataCalls"},
		{"infinite", Params{TableWCU: math.Inf(1)}, "TableWCU"},
		{"negative WCU", Params{BaseWCU: -1}, "BaseWCU"},
		{"negative index WCU", Params{IndexWCU: -2}, "IndexWCU"},
		{"legacy reads below 1", Params{LegacyItemsReadPerDue: 0.5}, "LegacyItemsReadPerDue"},
		{"legacy partition above the legacy index", Params{LegacyIndexWCU: 2, LegacyPartitionIndexWCU: 3}, "LegacyPartitionIndexWCU"},
		{"negative legacy partition WCU", Params{LegacyPartitionIndexWCU: -1}, "LegacyPartitionIndexWCU"},
		{"negative workers", Params{Workers: -1}, "Workers"},
		{"no shards", Params{Shards: []int{}}, "Shards"},
		{"zero shards", Params{Shards: []int{8, 0}}, "Shards: 0"},
		{"no processor limits", Params{ProcessorLimits: []float64{}}, "ProcessorLimits"},
		{"negative processor limit", Params{ProcessorLimits: []float64{-5}}, "ProcessorLimits"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Evaluate(tc.p)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestEvaluateProperties checks, over random inputs, that more shards never
// lower throughput, that a processor limit never raises it (nor a lower
// limit above a higher one), that the binding limit is the smallest cap,
// and that the time and cost follow from the rate.
func TestEvaluateProperties(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	between := func(lo, hi float64) float64 { return lo + rng.Float64()*(hi-lo) }
	for i := range 2000 {
		shards := []int{1 + rng.IntN(4), 1 + rng.IntN(16), 1 + rng.IntN(128), 1 + rng.IntN(1024)}
		slices.Sort(shards)
		limits := []float64{0, between(1, 20000), between(1, 20000)}
		p := Params{
			Subscriptions: 1 + rng.Int64N(100_000_000), DueFraction: between(0.01, 1),
			DataCalls: between(-1, 20), LockCalls: between(-1, 10), BaseWCU: between(0.5, 40), LockWCU: between(-1, 10),
			RCU: between(-1, 10), IndexWCU: between(0.5, 4), IndexReadRCU: between(-1, 4), LegacyIndexWCU: between(0.5, 4),
			PartitionWCU: between(100, 2000), PartitionRCU: between(100, 6000), TableWCU: between(1000, 100000),
			TableRCU: between(1000, 100000), Workers: 1 + rng.IntN(500),
			CallLatency:      time.Duration(between(-1, 50) * float64(time.Millisecond)),
			ProcessorLatency: time.Duration(between(-100, 2000) * float64(time.Millisecond)),
			Shards:           shards, ProcessorLimits: limits,
		}
		rows, err := Evaluate(p)
		require.NoError(t, err, "inputs %d: %+v", i, p)
		require.Len(t, rows, len(limits)*(len(shards)+1))
		rate := func(index Index, k int, limit float64) float64 { return find(t, rows, index, k, limit).PerSecond }
		for _, limit := range limits {
			for j := 1; j < len(shards); j++ {
				assert.GreaterOrEqual(t, rate(IndexDue, shards[j], limit), rate(IndexDue, shards[j-1], limit),
					"inputs %d: K=%d below K=%d at limit %v", i, shards[j], shards[j-1], limit)
			}
		}
		for _, k := range shards {
			unlimited := rate(IndexDue, k, 0)
			lo, hi := min(limits[1], limits[2]), max(limits[1], limits[2])
			assert.LessOrEqual(t, rate(IndexDue, k, hi), unlimited, "inputs %d: a limit raised K=%d", i, k)
			assert.LessOrEqual(t, rate(IndexDue, k, lo), rate(IndexDue, k, hi), "inputs %d: K=%d", i, k)
			assert.LessOrEqual(t, rate(IndexDue, k, hi), hi, "inputs %d: above the processor's limit", i)
		}
		assert.LessOrEqual(t, rate(IndexLegacy, 1, limits[1]), rate(IndexLegacy, 1, 0), "inputs %d: legacy", i)
		for _, r := range rows {
			for _, c := range r.Caps {
				require.Greater(t, c.PerSecond, 0.0, "inputs %d: %s", i, c.Limit)
				require.False(t, math.IsInf(c.PerSecond, 0), "inputs %d: %s", i, c.Limit)
			}
			binding, ok := r.Cap(r.Binding)
			require.True(t, ok)
			assert.Equal(t, binding, r.PerSecond)
			for _, c := range r.Caps {
				assert.GreaterOrEqual(t, c.PerSecond, r.PerSecond, "inputs %d: %s below the binding %s", i, c.Limit, r.Binding)
			}
			assert.InEpsilon(t, float64(r.Due)/r.PerSecond+1, r.Seconds+1, 1e-12)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	t.Parallel()
	for s, want := range map[float64]string{
		0:          "0s",
		0.2:        "1s",
		45.2:       "46s",
		60:         "1m",
		900:        "15m",
		900.0001:   "16m",
		3600:       "1h 0m",
		10320.31:   "2h 53m",
		40000:      "11h 7m",
		86400:      "1d 0h 0m",
		330250:     "3d 19h 45m",
		math.NaN(): "never",
		1e300:      "never",
	} {
		assert.Equal(t, want, FormatDuration(s), "%v s", s)
	}
}
