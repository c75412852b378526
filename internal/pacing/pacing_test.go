package pacing_test

import (
	"context"
	"testing"
	"time"

	"github.com/dynabill/billing/internal/dynamotest"
	"github.com/dynabill/billing/internal/pacing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// day is 4M charges at 100/s: 11h06m40s, printed 11h07m.
const day = 4_000_000 / 100 * time.Second

// requirePaced: the shared budget kept every second within the limit,
// paced at 99 % or more, finished within 1 % of the day the limit allows,
// beat the static split, and both charged every record.
func requirePaced(t *testing.T, c pacing.Comparison, total int) {
	t.Helper()
	sh, st := c.Shared, c.Static
	require.Equal(t, total, sh.Charges, "K=%d shared: every record charged", c.Processes)
	require.Equal(t, total, st.Charges, "K=%d static: every record charged", c.Processes)
	require.LessOrEqual(t, sh.Busiest, sh.Limit, "K=%d: a second over the limit", c.Processes)
	require.GreaterOrEqual(t, sh.Efficiency(), 99.0, "K=%d shared", c.Processes)
	require.LessOrEqual(t, sh.Span, day+day/100, "K=%d shared: the span", c.Processes)
	require.Greater(t, sh.Efficiency(), st.Efficiency(), "K=%d", c.Processes)
	require.Greater(t, st.Span, sh.Span, "K=%d", c.Processes)
}

// TestFleetPacing prints the pacing of the shared budget and the static
// split for 4M charges at 100/s at K = 8, 32 and 128 (docs/capacity.md,
// billingctl pacing).
func TestFleetPacing(t *testing.T) {
	ks := []int{8, 32, 128}
	if raceBuild {
		ks = ks[:1] // 10 s of CPU more under -race: CI's pacing step runs all three without it
	}
	for _, k := range ks {
		c, err := pacing.Compare(t.Context(), pacing.Config{Processes: k, Seed: 1})
		require.NoError(t, err)
		t.Log(c)
		requirePaced(t, c, pacing.DefaultCharges)
	}
}

// TestFleetPacingCalls prints the pacing of the call model for 4M charges
// at 100/s at K = 8, 32 and 128 (docs/capacity.md, billingctl pacing
// --calls): the shared budget (batches of 10, 40 workers a process) and
// the static split. It takes about 20 s, so it runs only with
// BILLING_LONG_TESTS set.
func TestFleetPacingCalls(t *testing.T) {
	if !dynamotest.LongTests() || raceBuild {
		t.Skipf("about 20 s: %s=1 runs it (not in -race builds)", dynamotest.LongEnv)
	}
	for _, k := range []int{8, 32, 128} {
		c, err := pacing.Compare(t.Context(), pacing.Config{Processes: k, Seed: 1, Calls: true})
		require.NoError(t, err)
		t.Log(c)
		requirePaced(t, c, pacing.DefaultCharges)
		assert.Less(t, c.Shared.MissedWindows, pacing.DefaultCharges/10_000, "K=%d: a saturated fleet takes nearly every window's tokens as it opens", k)
	}
}

// TestFleetCallsSentInsideTheirWindow: in a fleet that does not saturate
// the budget (5 workers a process), tokens are handed out late in their
// window too, and some attempts are still being recorded when it closes.
// Sent anyway, those calls make seconds of more than the limit; not sent
// (Collector.charge), no second exceeds it, dying processes and 429
// bursts included.
func TestFleetCallsSentInsideTheirWindow(t *testing.T) {
	const limit = 100
	cfg := pacing.Config{Processes: 8, Limit: limit, Charges: 400_000, Workers: 5, Batch: 10, Seed: 1, Calls: true}
	checked, err := pacing.Run(t.Context(), cfg)
	require.NoError(t, err)
	cfg.SendLate = true
	unchecked, err := pacing.Run(t.Context(), cfg)
	require.NoError(t, err)
	t.Logf("5 workers a process, K=8, 400k charges, %d deaths: shared %.1f %%, busiest second %d, missed windows %d; sent anyway: busiest second %d",
		checked.Deaths, checked.Efficiency(), checked.Busiest, checked.MissedWindows, unchecked.Busiest)
	require.Positive(t, checked.Deaths, "processes die holding tokens")
	require.Positive(t, checked.MissedWindows, "some attempts outlast their window")
	require.LessOrEqual(t, checked.Busiest, limit, "no second over the limit")
	require.Zero(t, unchecked.MissedWindows, "sent late, no call is held back")
	require.Greater(t, unchecked.Busiest, limit, "sent late, calls land in a second whose tokens others spent")
	require.Equal(t, 400_000, checked.Charges)
	require.Equal(t, 400_000, unchecked.Charges)
}

// TestRunIsDeterministic: a Config gives the same Result every time, and
// another seed another one; in both models.
func TestRunIsDeterministic(t *testing.T) {
	t.Parallel()
	for _, calls := range []bool{false, true} {
		cfg := pacing.Config{Processes: 8, Charges: 40_000, Seed: 3, Calls: calls}
		a, err := pacing.Run(t.Context(), cfg)
		require.NoError(t, err)
		b, err := pacing.Run(t.Context(), cfg)
		require.NoError(t, err)
		assert.Equal(t, a, b, "calls %v", calls)
		assert.Equal(t, 40_000, a.Charges, "calls %v", calls)
		assert.Equal(t, 100, a.Limit, "calls %v: Limit defaults to 100", calls)
		cfg.Seed = 4
		c, err := pacing.Run(t.Context(), cfg)
		require.NoError(t, err)
		assert.NotEqual(t, a, c, "calls %v: another seed", calls)
	}
}

// TestRunRefusesBadConfig: a Config the models cannot run is an ErrConfig
// naming the field, before anything runs.
func TestRunRefusesBadConfig(t *testing.T) {
	t.Parallel()
	cases := map[string]pacing.Config{
		"Processes": {},
		"Limit":     {Processes: 8, Limit: -1},
		"Charges":   {Processes: 8, Limit: 100, Charges: 99},
		"a day of":  {Processes: 8, Limit: 1, Charges: pacing.MaxDay + 1},
		"Workers":   {Processes: 8, Workers: -5, Calls: true},
		"Batch":     {Processes: 8, Batch: -1},
		"Skew":      {Processes: 8, Skew: -1},
	}
	for field, cfg := range cases {
		_, err := pacing.Run(t.Context(), cfg)
		require.ErrorIs(t, err, pacing.ErrConfig, field)
		assert.Contains(t, err.Error(), field)
	}
}

// TestRunStopsWithContext: a cancelled context stops either model with
// its error, with either budget (the static one never asks the shared
// budget, which would notice the context itself).
func TestRunStopsWithContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, calls := range []bool{false, true} {
		for _, static := range []bool{false, true} {
			r, err := pacing.Run(ctx, pacing.Config{Processes: 8, Calls: calls, Static: static})
			require.ErrorIs(t, err, context.Canceled, "calls %v static %v", calls, static)
			assert.Less(t, r.Charges, pacing.DefaultCharges, "calls %v static %v: stopped early", calls, static)
		}
	}
}

// TestComparisonString: the lines billingctl pacing and docs/capacity.md
// print.
func TestComparisonString(t *testing.T) {
	t.Parallel()
	sh := pacing.Result{Limit: 100, Charges: 4_000_000, Span: 40_080 * time.Second, Busiest: 100, MissedWindows: 1, RateLimited: 557, Deaths: 2}
	st := pacing.Result{Limit: 100, Charges: 4_000_000, Span: 96_000 * time.Second, Busiest: 104}
	c := pacing.Comparison{Processes: 8, Shared: sh, Static: st}
	assert.Equal(t, "pacing K=8 shared 99.8 % span 11h08m static 41.7 % span 26h40m", c.String())
	c.Calls = true
	assert.Equal(t, "pacing calls K=8 shared 99.8 % span 11h08m busiest second 100 (missed windows 1, 429s 557, deaths 2) static 41.7 % span 26h40m busiest second 104", c.String())
}

// TestBound: the bound of a fleet too small for its limit is what the
// call model measures within a point or two (1,000/s: 8 processes of 40
// workers; 32 processes of 40 workers, bound by the four 3x shards left
// at the end), and the workers it names pace the fleet at 95 % or more
// with the faults (six 1-second 429 bursts in this 200-second day cost
// about 3 %); the default workers are not bound.
func TestBound(t *testing.T) {
	t.Parallel()
	for _, k := range []int{8, 32} {
		cfg := pacing.Config{Processes: k, Limit: 1000, Charges: 200_000, Workers: 40, Seed: 1, Calls: true}
		b := pacing.BoundOf(cfg)
		require.True(t, b.Bounded(), "K=%d: %v", k, b)
		r, err := pacing.Run(t.Context(), cfg)
		require.NoError(t, err)
		t.Logf("%v; measured %.1f %%", b, r.Efficiency())
		assert.InDelta(t, r.Efficiency(), b.Efficiency, 3, "K=%d", k)
		cfg.Workers = b.Workers
		require.False(t, pacing.BoundOf(cfg).Bounded(), "K=%d", k)
		r, err = pacing.Run(t.Context(), cfg)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, r.Efficiency(), 95.0, "K=%d with %d workers", k, b.Workers)
	}
	for _, limit := range []int{25, 100, 1000, 2000} {
		cfg := pacing.Config{Processes: 8, Limit: limit, Charges: 1_000_000, Calls: true}
		assert.False(t, pacing.BoundOf(cfg).Bounded(), "limit %d: the default workers", limit)
	}
}
