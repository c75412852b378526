package loadsim

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/dynabill/billing/internal/capacity"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// simRow is one row of the simulation's table: a configuration and how
// many due records it runs.
type simRow struct {
	cfg Config
	// full is the due records without -short; short, with.
	full, short int
}

// simRows are the rows of TestSimulationConfirmsModel: the model's
// default rows (4 workers a shard, processor limits 100/s and none, the
// legacy index and K = 1, 8, 32), and the same with 200 workers a shard
// and no processor limit, where the index and the table bind and writes
// are throttled. With 200 workers a page holds 2 × W items read, so that
// a run's one page at a time never caps its workers (the model has no
// pages; docs/capacity.md).
func simRows() []simRow {
	var rows []simRow
	for _, limit := range []float64{100, 0} {
		// The rows with a processor limit are the same runs but for the
		// processor's clock, and the one-run rows need no skew measured:
		// fewer records keep the test fast.
		n := func(k int) int {
			if limit == 0 && k > 1 {
				return 100_000
			}
			return 20_000
		}
		rows = append(rows, simRow{Config{Index: capacity.IndexLegacy, Shards: 1, ProcessorLimit: limit}, n(1), 4000})
		for _, k := range []int{1, 8, 32} {
			rows = append(rows, simRow{Config{Index: capacity.IndexDue, Shards: k, ProcessorLimit: limit}, n(k), 4000})
		}
	}
	rows = append(rows, simRow{Config{Index: capacity.IndexLegacy, Shards: 1, Workers: 200, PageSize: 800}, 100_000, 10_000})
	for _, k := range []int{1, 8, 32} {
		rows = append(rows, simRow{Config{Index: capacity.IndexDue, Shards: k, Workers: 200, PageSize: 400}, 100_000, 10_000})
	}
	return rows
}

// TestSimulationConfirmsModel runs the collector over 100,000 due records
// (20,000 for the rows of one run or with a processor limit; 4,000 to
// 10,000 under -short) for each row of the model's defaults and of raised concurrency,
// and checks that the simulated collections a second are within 10% of
// capacity.Evaluate's with the simulation's measured inputs (under -short,
// within 10% plus the imbalance expected of so few users over K shards,
// see expectedSkew), that the same
// limit binds, and that every due record was charged once and collected
// however often its writes were throttled. The table it logs is
// docs/capacity.md's "Simulation":
//
//	go test -run TestSimulationConfirmsModel -count=1 -v ./internal/loadsim
func TestSimulationConfirmsModel(t *testing.T) {
	if small() {
		t.Log("-short or -race: the small sizes (under -race, four rows); the 100k rows run without either")
	}
	var table strings.Builder
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "INDEX\tK\tW\tPROCESSOR\tDUE\tMODEL/H\tSIMULATED/H\tDIFF\tMODEL_BINDING\tSIMULATED_BINDING\tTHROTTLED\tREPLAYS\tPASSES")
	for _, row := range simRows() {
		if raceBuild && !raceRow(row.cfg) {
			continue // CI's long step runs every row, at full size, without -race
		}
		cfg := row.cfg
		cfg.Due = row.full
		if small() {
			cfg.Due = row.short
		}
		res, err := Run(context.Background(), cfg)
		require.NoError(t, err, "%+v", cfg)
		model, err := res.Model()
		require.NoError(t, err)
		c := res.Config
		name := fmt.Sprintf("%s K=%d W=%d processor %v", c.Index, c.Shards, c.Workers, c.ProcessorLimit)

		// Every due record charged once and collected (Run checked the
		// store); a replay is the charge of a record whose outcome write
		// was throttled, asked again with its key.
		assert.Equal(t, c.Due, res.Collected, name)
		assert.Equal(t, c.Due+res.Replays, res.ProviderCalls, name)
		assert.LessOrEqual(t, res.Replays, res.ThrottledUpdates, name)
		// The items cost what the model's defaults say (they were
		// measured on DynamoDB with the same items).
		assert.InDelta(t, capacity.DefaultBaseWCU, res.BaseWCU, 0.05, name)
		wantIndex := capacity.DefaultIndexWCU
		if c.Index == capacity.IndexLegacy {
			wantIndex = capacity.DefaultLegacyIndexWCU
			assert.InDelta(t, capacity.DefaultLegacyPartitionShare*capacity.DefaultLegacyIndexWCU, res.PartitionIndexWCU, 0.05, name)
		}
		assert.InDelta(t, wantIndex, res.IndexWCU, 0.05, name)
		assert.Less(t, res.MaxItemSize, 1024, name)

		assert.Equal(t, model.Binding, res.Binding, "%s: clocks %v, model caps %v", name, res.Clocks, model.Caps)
		tolerance := 0.10
		if small() {
			tolerance += expectedSkew(c.Due, c.Shards)
		}
		assert.InEpsilon(t, model.PerHour, res.PerHour, tolerance, "%s: clocks %v, model caps %v", name, res.Clocks, model.Caps)
		if c.Workers > capacity.DefaultWorkers {
			// A store limit binds: the run outpaces it and is throttled.
			assert.Positive(t, res.Throttled, name)
		}

		proc := "none"
		if c.ProcessorLimit > 0 {
			proc = fmt.Sprintf("%g/s", c.ProcessorLimit)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d\t%.0f\t%.0f\t%+.1f%%\t%s\t%s\t%d\t%d\t%d\n", c.Index, c.Shards, c.Workers, proc, c.Due,
			model.PerHour, res.PerHour, 100*(res.PerHour/model.PerHour-1), model.Binding, res.Binding, res.Throttled, res.Replays, res.Passes)
		t.Logf("%s: measured per collection: %.3f data calls, %.3f lock calls, %.3f WCU data tables, %.3f lock WCU, %.3f RCU, %.3f index WCU (busiest partition %.3f), %.4f index RCU, %.3f items read; items up to %d B, history rows %d B",
			name, res.DataCalls, res.LockCalls, res.BaseWCU, res.LockWCU, res.RCU, res.IndexWCU, res.PartitionIndexWCU, res.IndexRCU, res.Reads, res.MaxItemSize, res.MaxHistorySize)
	}
	require.NoError(t, tw.Flush())
	t.Logf("model vs simulation, invoices an hour:\n%s", table.String())
}

// expectedSkew is how much the busiest of k shards is expected to hold
// above the mean when due users hash over them at random (FNV-1a spreads
// them so): about sqrt(2 ln k) standard deviations of a binomial count,
// relative to the mean. The model works with the mean. It is 0.3% (K = 8)
// and 0.7% (K = 32) for the model's 4,000,000 due, 1.7% and 4.6% for
// 100,000, but 23% for 4,000 over 32 shards.
func expectedSkew(due, k int) float64 {
	if k <= 1 {
		return 0
	}
	mean := float64(due) / float64(k)
	return math.Sqrt(mean*(1-1/float64(k))) * math.Sqrt(2*math.Log(float64(k))) / mean
}

func TestExpectedSkew(t *testing.T) {
	assert.Zero(t, expectedSkew(1000, 1))
	assert.InDelta(t, 0.0073, expectedSkew(4_000_000, 32), 0.0005)
	assert.InDelta(t, 0.046, expectedSkew(100_000, 32), 0.001)
}

// raceRow reports whether a -race build runs the row: one a shape (each
// index with 4 workers a shard and with 200, the throttled rows), about
// half the CPU of every row under the race detector.
func raceRow(c Config) bool {
	switch {
	case c.Index == capacity.IndexLegacy:
		return c.Workers > 0 || c.ProcessorLimit > 0
	default:
		return c.Shards == 32 && (c.Workers > 0 || c.ProcessorLimit == 0)
	}
}

// small reports whether the simulation runs its small sizes: under -short,
// and under the race detector (see raceBuild).
func small() bool { return testing.Short() || raceBuild }
