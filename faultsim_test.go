package billing_test

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/dynamotest"
	"github.com/dynabill/billing/internal/faultsim"
	"github.com/dynabill/billing/memory"
	"github.com/stretchr/testify/require"
)

// The fault simulation (package internal/faultsim) drives the real
// collector, notifier, admin operations, upgrades and settlements over
// simulated months on several hosts, with faults drawn from a seed, and
// checks the money, period, lock, reminder and history invariants after
// every step. Without flags it runs the first seed of each in-memory store
// for 60 days (the store on the local server only in CI's long step), and
// with BILLING_LONG_TESTS=1 every default seed and day of every store,
// stopping each at its first broken invariant:
//
//	CI=true go test -race -run TestFaultSimulation -count=1 .          # the README command's share
//	CI=true BILLING_LONG_TESTS=1 go test -race -run TestFaultSimulation -count=1 -timeout 30m .
//	go test -run 'TestFaultSimulation/(legacy-due|legacy-status|single-table|single-table-due)$' -count=1 -timeout 60m . -args -faultsim.seeds=50
//	go test -run 'TestFaultSimulation/legacy-due$' -count=1 . -args -faultsim.seed=12345
//
// A failure prints the seed, the step and the command that replays it.
// -faultsim.keepgoing reports every kind of failure of a seed instead of
// the first; -faultsim.without leaves scenarios out, to tell which one a
// failure needs.
var (
	faultsimSeed      = flag.Int64("faultsim.seed", 0, "run this seed only (0: the default seeds)")
	faultsimSeeds     = flag.Int("faultsim.seeds", 0, "run seeds 1..N instead of the default seeds")
	faultsimDays      = flag.Int("faultsim.days", 0, "simulated days (0: each store's default)")
	faultsimKeepGoing = flag.Bool("faultsim.keepgoing", false, "continue after a broken invariant, reporting the first failure of each kind")
	faultsimWithout   = flag.String("faultsim.without", "", "comma-separated scenarios to leave out (faultsim.Scenario: second-subscription, upgrades, running-requests, misroutes, later-continuations, mixed-shard-concurrency, final-repayments, early-reactivations, outages, come-backs, decline-recoveries, late-recovery-notices, reprices, abandoned-runs, cancel-now-come-backs, trial-pauses, paid-date-moves, plan-changes, dunning)")
)

// faultsimShortDays are the days the in-memory stores run in the README's
// test command, under -race: 60 of an in-memory store's 120 days take 6 s
// of CPU instead of 19 s. dynamodb-legacy runs only in CI's long step: its
// 60 days take 207 s of CPU (12 of them took 25 s, most of the README
// command's server time in this package).
const faultsimShortDays = 60

// faultsimStore is one store the simulation runs on.
type faultsimStore struct {
	name  string
	days  int     // default simulated days
	users int     // users seeded
	seeds []int64 // default seeds
	// dynamo stores run on the local DynamoDB server (CI=true in the
	// replay command).
	dynamo bool
	// explicit stores run only when seeds are given (-faultsim.seed,
	// -faultsim.seeds).
	explicit bool
	// shortDays, when set, are the days of the README's test command
	// instead of faultsimShortDays.
	shortDays int
	build     func(t *testing.T, opts *faultsim.Options)
}

var faultsimStores = []faultsimStore{
	{name: "legacy-due", days: 120, users: 60, seeds: []int64{1, 2}, build: func(t *testing.T, o *faultsim.Options) {
		st := billingtest.NewMemoryStore(t, memory.Options{StatusIndexMode: dynamostore.StatusIndexDue, DueShards: 8, PageSize: 6})
		o.Store = faultsim.Store{Repository: st.Repository(), History: st.History(), Layout: faultsim.LayoutLegacy, AddAll: true}
	}},
	{name: "legacy-status", days: 120, users: 60, seeds: []int64{1, 2}, build: func(t *testing.T, o *faultsim.Options) {
		st := billingtest.NewMemoryStore(t, memory.Options{PageSize: 8})
		o.Store = faultsim.Store{Repository: st.Repository(), History: st.History(), Layout: faultsim.LayoutLegacy, AddAll: true}
	}},
	{name: "single-table", days: 120, users: 60, seeds: []int64{1, 2}, build: func(t *testing.T, o *faultsim.Options) {
		st := billingtest.NewMemorySingleTable(t, memory.SingleTableOptions{Clock: o.Clock, PageSize: 6})
		o.Store = faultsim.Store{Repository: st.Repository(), History: st.History(), Layout: faultsim.LayoutSingleTable, AddAll: true}
	}},
	{name: "single-table-due", days: 120, users: 60, seeds: []int64{1, 2}, build: func(t *testing.T, o *faultsim.Options) {
		st := billingtest.NewMemorySingleTable(t, memory.SingleTableOptions{Clock: o.Clock, PageSize: 6, Table: dynamostore.SingleTableConfig{DueShards: 32}})
		o.Store = faultsim.Store{Repository: st.Repository(), History: st.History(), Layout: faultsim.LayoutSingleTable, AddAll: true}
	}},
	// plan-changes: the legacy layout with the PlanChanges scenario
	// (plan changes, term changes, date moves, previews and coupons by
	// user, and the proration invariants). The hosts' AddAll batches are
	// left out: they rewrite records outside the engine, dropping the
	// proration lines and balance a record carries.
	// Its 60 days take 38 s of CPU under -race: the README's command runs
	// 30 of them, CI's long step 8 seeds of 120.
	{name: "plan-changes", days: 120, users: 60, seeds: []int64{1, 2}, shortDays: 30, build: func(t *testing.T, o *faultsim.Options) {
		st := billingtest.NewMemoryStore(t, memory.Options{StatusIndexMode: dynamostore.StatusIndexDue, DueShards: 8, PageSize: 6})
		o.Store = faultsim.Store{Repository: st.Repository(), History: st.History(), Layout: faultsim.LayoutLegacy, Coupons: memory.NewCoupons()}
		o.With = append(o.With, faultsim.PlanChanges)
	}},
	// plan-changes-single-table: the PlanChanges scenario on the single
	// table (accounts with several subscriptions, invoices in one
	// sequence per account). Its 30 days take 2 s without -race.
	{name: "plan-changes-single-table", days: 120, users: 60, seeds: []int64{1, 2}, shortDays: 30, build: func(t *testing.T, o *faultsim.Options) {
		st := billingtest.NewMemorySingleTable(t, memory.SingleTableOptions{Clock: o.Clock, PageSize: 6})
		o.Store = faultsim.Store{Repository: st.Repository(), History: st.History(), Layout: faultsim.LayoutSingleTable, Coupons: memory.NewCoupons()}
		o.With = append(o.With, faultsim.PlanChanges)
	}},
	// dunning: the legacy layout with the Dunning scenario (the default
	// schedule, a final action drawn per seed, notices that fail and
	// lose answers, declines of every kind recovered by a new card, on
	// session or never, and the dunning invariants). No AddAll batches,
	// as in plan-changes: they rewrite records outside the engine.
	{name: "dunning", days: 120, users: 60, seeds: []int64{1, 2}, shortDays: 30, build: buildDunning},
	{name: "dynamodb-legacy", days: 60, users: 20, seeds: []int64{1}, dynamo: true, build: func(t *testing.T, o *faultsim.Options) {
		client := dynamotest.Client(t)
		tables := dynamostore.TableConfig{
			Subscriptions: dynamotest.TableName(t, "billing-activity"),
			History:       dynamotest.TableName(t, "billing-activity-history"),
			Invoices:      dynamotest.TableName(t, "billing-invoices"),
		}
		dynamotest.CreateTable(t, client, dynamostore.SubscriptionsTableDefinition(tables))
		dynamotest.CreateTable(t, client, dynamostore.HistoryTableDefinition(tables))
		dynamotest.CreateTable(t, client, dynamostore.InvoicesTableDefinition(tables))
		w := dynamotest.Wrap(client)
		t.Cleanup(func() { w.AssertNoViolations(t) })
		o.Interleave = faultsim.NewInterleaver(w)
		cfg := dynamostore.Config{Client: o.Interleave, Tables: tables, PageSize: 5, BatchBackoff: time.Millisecond, BatchMaxBackoff: 5 * time.Millisecond}
		repo, err := dynamostore.NewRepository(cfg)
		require.NoError(t, err)
		hist, err := dynamostore.NewHistory(cfg)
		require.NoError(t, err)
		invoices, err := dynamostore.NewInvoices(dynamostore.Config{Client: w, Tables: tables})
		require.NoError(t, err)
		o.Store = faultsim.Store{Repository: repo, History: hist, Layout: faultsim.LayoutLegacy, AddAll: true, Invoices: invoices}
		// One collection at a time: moto orders a hash-only index by
		// write order, so concurrent writes would change the pages.
		o.MaxConcurrency = 1
	}},
}

// buildDunning is the store and scenario of the dunning cases.
func buildDunning(t *testing.T, o *faultsim.Options) {
	st := billingtest.NewMemoryStore(t, memory.Options{StatusIndexMode: dynamostore.StatusIndexDue, DueShards: 8, PageSize: 6})
	o.Store = faultsim.Store{Repository: st.Repository(), History: st.History(), Layout: faultsim.LayoutLegacy}
	o.With = append(o.With, faultsim.Dunning)
}

func TestFaultSimulation(t *testing.T) {
	for _, st := range faultsimStores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			if st.explicit && *faultsimSeed == 0 && *faultsimSeeds == 0 {
				t.Skip("run with -faultsim.seed or -faultsim.seeds")
			}
			seeds := st.seeds
			switch {
			case *faultsimSeed != 0:
				seeds = []int64{*faultsimSeed}
			case *faultsimSeeds > 0:
				seeds = nil
				for i := range *faultsimSeeds {
					seeds = append(seeds, int64(i+1))
				}
			}
			days := st.days
			if *faultsimDays > 0 {
				days = *faultsimDays
			}
			if *faultsimSeed == 0 && *faultsimSeeds == 0 && !dynamotest.LongTests() {
				// The README's test command: the first seed and days of each
				// store; CI's long step (BILLING_LONG_TESTS=1) runs every
				// default seed and day.
				if st.dynamo {
					dynamotest.Long(t)
				}
				seeds = seeds[:1]
				if *faultsimDays == 0 {
					days = min(days, cmp.Or(st.shortDays, faultsimShortDays))
				}
			}
			for _, seed := range seeds {
				t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
					runFaultSimulation(t, st, seed, days)
				})
			}
		})
	}
}

func runFaultSimulation(t *testing.T, st faultsimStore, seed int64, days int) {
	opts := faultsim.Options{Seed: seed, Days: days, Users: st.users, Clock: billingtest.NewClock(time.Time{}), KeepGoing: *faultsimKeepGoing}
	if *faultsimWithout != "" {
		for _, sc := range strings.Split(*faultsimWithout, ",") {
			opts.Without = append(opts.Without, faultsim.Scenario(sc))
		}
	}
	opts.Replay = func(seed int64) string {
		cmd := fmt.Sprintf("go test -run 'TestFaultSimulation/%s$' -count=1 . -args -faultsim.seed=%d", st.name, seed)
		if days != st.days {
			cmd += fmt.Sprintf(" -faultsim.days=%d", days)
		}
		if *faultsimWithout != "" {
			cmd += " -faultsim.without=" + *faultsimWithout
		}
		if st.dynamo {
			cmd = "CI=true " + cmd
		}
		return cmd
	}
	st.build(t, &opts)
	if opts.Store.Invoices == nil {
		// The collectors issue invoices (checked by the simulation) into
		// the in-memory store beside an in-memory layout.
		opts.Store.Invoices = memory.NewInvoices(opts.Clock)
		if opts.Store.Layout == faultsim.LayoutSingleTable {
			opts.Store.Invoices = memory.NewSingleTableInvoices(opts.Clock)
		}
	}
	began := time.Now()
	res := faultsim.Run(context.Background(), opts)
	t.Logf("%s seed %d: %d days (%s), %d steps in %v", st.name, seed, res.Days, formatCounts(res.Weather), res.Steps, time.Since(began).Round(time.Millisecond))
	t.Logf("hosts: %s", strings.Join(res.Hosts, "; "))
	t.Logf("runs: %d pages, %d attempted, %d collected, %d pending, %d declined, %d unknown, %d rate limited, %d stale, %d advanced, %d skipped (locked), %d conflicts; processor kept %d charges, %d COMPLETED records",
		res.Runs.Pages, res.Runs.Attempted, res.Runs.Collected, res.Runs.Pending, res.Runs.Declined, res.Runs.Unknown,
		res.Runs.RateLimited, res.Runs.Stale, res.Runs.Advanced, res.Runs.SkippedLocked, res.Runs.Conflicts, res.Collections, res.Completed)
	t.Logf("faults injected: %s", formatCounts(res.Faults))
	t.Logf("invariant checks: %s", formatCounts(res.Checks))
	t.Logf("operations: %s", formatCounts(res.Ops))
	for _, f := range res.Failures {
		t.Error(f.String())
	}
}

// formatCounts lists counts by name, sorted.
func formatCounts(m map[string]int) string {
	names := make([]string, 0, len(m))
	total := 0
	for n, c := range m {
		names = append(names, fmt.Sprintf("%s %d", n, c))
		total += c
	}
	sort.Strings(names)
	return fmt.Sprintf("%d: %s", total, strings.Join(names, "; "))
}
