package faultsim

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
)

// Layout is the store layout a simulation drives.
type Layout int

// The layouts.
const (
	// LayoutLegacy: one subscription per user (the legacy tables).
	LayoutLegacy Layout = iota
	// LayoutSingleTable: engine users are subscriptions
	// "<account>#<subscription>#<SKU>", several per account.
	LayoutSingleTable
)

// Store is the store under test.
type Store struct {
	Repository billing.Repository
	History    billing.History
	Layout     Layout
	// AddAll says whether upgrades are written through
	// Repository.AddAll.
	AddAll bool
	// Invoices, when set, is the invoice store the hosts' collectors
	// issue invoices into (billing.Config.Invoices), and the invoices
	// are checked: one paid invoice per paid period, numbers gapless in
	// each account's sequence, totals what was charged.
	Invoices billing.Invoices
	// Coupons, when set, is the coupon store the hosts' collectors redeem
	// coupons in (billing.Config.Coupons), behind faults of its own: the
	// PlanChanges scenario needs it.
	Coupons billing.Coupons
}

// Options configures [Run].
type Options struct {
	// Seed drives everything; the same seed replays the same run.
	Seed int64
	// Days simulated. Defaults to 90.
	Days int
	// Users seeded. Defaults to 60.
	Users int
	// Hosts running collectors. Defaults to 3.
	Hosts int
	// Start is the first day. Defaults to 2024-01-01.
	Start time.Time
	// Store is the store under test, empty. Required.
	Store Store
	// Clock is the clock the store was built with, if it needs one; Run
	// drives it. Nil: a new one.
	Clock *billingtest.Clock
	// Interleave, when set, wraps the store's DynamoDB client: during an
	// upgrade step another host collects one of the batch's users right
	// before AddAll's first write call.
	Interleave *Interleaver
	// MaxConcurrency caps the hosts' Concurrency and ShardConcurrency.
	// Defaults to 4; 1 keeps every run sequential.
	MaxConcurrency int
	// FullChecks checks every user after every step; otherwise a step's
	// checks read the users it wrote (and those the processor charged)
	// and every user is checked at the end of each day.
	FullChecks bool
	// KeepGoing continues after a failure, reporting the first failure of
	// each kind only (an invariant and the shape of its first problem).
	KeepGoing bool
	// Replay returns the command that replays a seed.
	Replay func(seed int64) string
	// Without names scenarios the simulation leaves out (see the
	// Scenario constants): to tell which scenario a failure needs, or to
	// check that the invariants hold where no known bug is exercised.
	Without []Scenario
	// With names scenarios the simulation adds that are off by default
	// (PlanChanges), so that the seeds of a run without them replay as
	// they did before the scenario existed.
	With []Scenario
	// Logf, when set, receives progress lines.
	Logf func(format string, args ...any)
}

// Scenario names a part of the simulated world that Options.Without can
// leave out.
type Scenario string

// The scenarios.
const (
	// SecondSubscription: Repository.Add of a second subscription for a
	// legacy user with one open.
	SecondSubscription Scenario = "second-subscription"
	// Upgrades: AddAll upgrades.
	Upgrades Scenario = "upgrades"
	// RunningRequests: processor requests still running when the caller
	// gives up, and lookups that lag behind a charge.
	RunningRequests Scenario = "running-requests"
	// Misroutes: continuations handed to another run.
	Misroutes Scenario = "misroutes"
	// LaterContinuations: runs continued after the clock moved (on
	// stormy days they are otherwise continued 30 s to a day later).
	LaterContinuations Scenario = "later-continuations"
	// MixedShardConcurrency: hosts with different
	// Config.ShardConcurrency continuing each other's runs.
	MixedShardConcurrency Scenario = "mixed-shard-concurrency"
	// FinalRepayments: manual repayments of records declined as final.
	FinalRepayments Scenario = "final-repayments"
	// EarlyReactivations: reactivations billed before the user's latest
	// (cancelled) record.
	EarlyReactivations Scenario = "early-reactivations"
	// Outages: processor outages of days.
	Outages Scenario = "outages"
	// ComeBacks: cancellations at period end (the renewal cancelled
	// while the paid period runs) and come-backs by Reactivate or
	// Subscribe on the date the paid period ends, some first tried on a
	// date inside it (which must be refused).
	ComeBacks Scenario = "come-backs"
	// DeclineRecoveries: card declines the customer confirms on session
	// later, reported as settled events of the declined transaction.
	DeclineRecoveries Scenario = "decline-recoveries"
	// LateRecoveryNotices: card declines the customer confirms on session, told after 1-3 retry runs.
	LateRecoveryNotices Scenario = "late-recovery-notices"
	// Reprices: Repository.AddAll rewrites of re-read records with a
	// changed amount, keeping their last_run_date, or giving two records
	// of a user the same one.
	Reprices Scenario = "reprices"
	// AbandonedRuns: on a sharded store, a stretch of days (one more than
	// the shards, and two) whose runs a host with a page budget of its
	// own stops after their first invocation and never continues.
	AbandonedRuns Scenario = "abandoned-runs"
	// CancelNowComeBacks: cancellations now with a refund, and the user's come-back that day (cancelnow.go).
	CancelNowComeBacks Scenario = "cancel-now-come-backs"
	// TrialPauses: new users with a trial paused for one to three months
	// before the trial's period is completed (trialdates.go).
	TrialPauses Scenario = "trial-pauses"
	// PaidDateMoves: renewals asked to move to a date inside the period
	// paid before them, which must be refused (trialdates.go).
	PaidDateMoves Scenario = "paid-date-moves"
	// PlanChanges: plan changes now and at the next period (upgrades,
	// downgrades, a $0 plan, without proration, monthly<->yearly), billing
	// date moves (into the paid period, prorated, and later), previews and
	// coupons (percent and amount off, once, repeating, forever, some
	// bounded, some by promotion code), by user with request keys that
	// are sometimes repeated; and the proration invariants
	// (planchanges.go). Off unless Options.With names it; needs
	// Store.Coupons.
	PlanChanges Scenario = "plan-changes"
	// Dunning: the hosts' collectors run with Config.Dunning (the
	// default schedule, a final action drawn for the seed, notices
	// through a notifier that fails and loses answers); declines have
	// kinds; declined customers recover by a new card
	// (Collector.PaymentMethodUpdated, keyed, sometimes repeated), on
	// session, or never; and the dunning invariants (dunning.go,
	// dunchecks.go). Off unless Options.With names it.
	Dunning Scenario = "dunning"
)

func (o Options) without(sc Scenario) bool { return slices.Contains(o.Without, sc) }

// with reports whether sc, a scenario off by default, is on.
func (o Options) with(sc Scenario) bool {
	return slices.Contains(o.With, sc) && !o.without(sc)
}

func (o Options) withDefaults() Options {
	if o.Days <= 0 {
		o.Days = 90
	}
	if o.Users <= 0 {
		o.Users = 60
	}
	if o.Hosts <= 0 {
		o.Hosts = 3
	}
	if o.Start.IsZero() {
		o.Start = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	if o.MaxConcurrency <= 0 {
		o.MaxConcurrency = 4
	}
	if o.Clock == nil {
		o.Clock = billingtest.NewClock(o.Start)
	}
	if o.Replay == nil {
		o.Replay = func(seed int64) string { return fmt.Sprintf("(seed %d)", seed) }
	}
	return o
}

// Failure is a broken invariant.
type Failure struct {
	Seed      int64
	Invariant string
	// Step is where it was seen: day, time, host, operation.
	Step     string
	Problems []string
	Replay   string
}

func (f Failure) String() string {
	p := f.Problems
	if len(p) > 40 {
		p = append(slices.Clone(p[:40]), fmt.Sprintf("... and %d more", len(f.Problems)-40))
	}
	return fmt.Sprintf("seed %d: invariant %q broken after step %s:\n\t%s\nreplay: %s",
		f.Seed, f.Invariant, f.Step, strings.Join(p, "\n\t"), f.Replay)
}

// Result is what a run did.
type Result struct {
	Seed  int64
	Days  int
	Steps int
	// Hosts describes each host's collector configuration.
	Hosts    []string
	Failures []Failure
	// Runs sums the collectors' run reports.
	Runs billing.Report
	// Collections is the processor's kept charges; Completed the
	// COMPLETED records at the end.
	Collections int
	Completed   int
	// Faults counts the faults injected, by kind.
	Faults map[string]int
	// Checks counts the invariant checks made, by invariant.
	Checks map[string]int
	// Ops counts the operations by outcome.
	Ops map[string]int
	// Weather counts the days by kind.
	Weather map[string]int
}

// dayKind is a day's weather.
type dayKind int

const (
	stormy dayKind = iota
	calm
	calmCheck // the second calm day: the strict checks run after its runs
	outage
	// abandoned: no faults, but every run is stopped after its first
	// invocation and never continued (AbandonedRuns).
	abandoned
)

func (k dayKind) String() string {
	return [...]string{"stormy", "calm", "calm (checked)", "processor outage", "runs abandoned"}[k]
}

// host is one process running a collector.
type host struct {
	name string
	repo *repo
	col  *billing.Collector
	desc string
}

// Sim is one simulation.
type Sim struct {
	opts    Options
	env     *env
	clock   *billingtest.Clock
	locker  *Locker
	proc    *Processor
	hosts   []*host
	raw     billing.Repository
	hist    billing.History
	shards  int
	weather []dayKind
	ids     atomic.Int64

	mu    sync.Mutex
	dirty map[string]bool
	// stuck are the users whose lock a gone holder left held during the
	// step.
	stuck []string

	users   []string
	userSet map[string]bool
	// records are every user's records as read by the checks after the
	// last step that wrote them.
	records map[string][]billing.Period
	// trialEnds are the trial ends of the users signed up with a trial.
	trialEnds map[string]time.Time
	// trialDates is the state of the scenarios of trialdates.go.
	trialDates *trialDates
	accounts   []string

	events []*event
	seq    int
	step   string

	notifier *notifierModel
	settle   []*delivery

	// settingUp is set while the population signs up: no faults.
	settingUp bool
	// shadow is every history row seen, by user, then by last_run_date
	// and subscription ID (the append-only invariant).
	shadow map[string]map[string]billing.Period
	// abandoner runs every run of the abandoned days (AbandonedRuns);
	// reached are the shards its fresh runs reached, by run kind, then
	// shard, as the day index.
	abandoner *host
	reached   map[billing.RunKind]map[int]int

	cancelNow *cancelNowModel // CancelNowComeBacks
	plan      *planModel      // PlanChanges
	dun       *dunModel       // Dunning

	res    Result
	failed map[string]bool
	stop   bool
}

// event is a step of the simulation at a time.
type event struct {
	at   time.Time
	seq  int
	host string
	what string
	fn   func(ctx context.Context)
}

// Run runs one simulation and returns what it did and every invariant it
// found broken (the first only, unless KeepGoing).
func Run(ctx context.Context, opts Options) *Result {
	opts = opts.withDefaults()
	s := &Sim{opts: opts, clock: opts.Clock, raw: opts.Store.Repository, hist: opts.Store.History,
		userSet: map[string]bool{}, failed: map[string]bool{}, dirty: map[string]bool{}, records: map[string][]billing.Period{}, trialEnds: map[string]time.Time{},
		shadow: map[string]map[string]billing.Period{}, reached: map[billing.RunKind]map[int]int{}}
	s.res = Result{Seed: opts.Seed, Days: opts.Days, Faults: map[string]int{}, Checks: map[string]int{}, Ops: map[string]int{}, Weather: map[string]int{}}
	s.clock.Set(opts.Start)
	if sh, ok := s.raw.(billing.ShardedRepository); ok {
		s.shards = max(sh.DueShards(), 1)
	} else {
		s.shards = 1
	}
	s.planWeather()
	s.env = &env{seed: opts.Seed, clock: s.clock, faults: newFaultLog(),
		stormy: func() bool {
			k := s.dayKind(s.clock.Now())
			return !s.settingUp && (k == stormy || k == outage)
		},
		outage: func() bool { return !s.settingUp && s.dayKind(s.clock.Now()) == outage },
	}
	s.locker = newLocker(s.env, 4*time.Minute)
	s.locker.stuck = func(u string) {
		s.mu.Lock()
		s.stuck = append(s.stuck, u)
		s.mu.Unlock()
	}
	window := time.Duration(0)
	if draw(opts.Seed, "replay window") < 0.5 {
		window = 48 * time.Hour
	}
	s.proc = newProcessor(s.env, s.locker, 2*time.Hour, window)
	s.proc.touch = s.touch
	s.proc.lags = !opts.without(RunningRequests)
	if opts.with(Dunning) {
		s.dun = newDunModel(s)
		s.proc.dun = s.dun
	}
	for i := range opts.Hosts {
		h := s.newHost(i)
		s.hosts = append(s.hosts, h)
		s.res.Hosts = append(s.res.Hosts, h.desc)
	}
	if slices.Contains(s.weather, abandoned) {
		s.abandoner = s.newAbandoner()
		s.res.Hosts = append(s.res.Hosts, s.abandoner.desc)
	}
	s.notifier = newNotifier(s)
	if err := s.populate(ctx); err != nil {
		s.fail("setup", []string{err.Error()})
		return s.finish(ctx)
	}
	if s.opts.with(PlanChanges) {
		if err := s.setupPlanChanges(ctx); err != nil {
			s.fail("setup", []string{err.Error()})
			return s.finish(ctx)
		}
	}
	s.step = "seeded"
	s.checkAll(ctx)
	s.at(opts.Start, "-", "plan the day", func(ctx context.Context) { s.planDay(0) })
	end := opts.Start.AddDate(0, 0, opts.Days)
	for len(s.events) > 0 && !s.stop {
		e := s.events[0]
		s.events = s.events[1:]
		if !e.at.Before(end) {
			break
		}
		s.clock.Set(e.at)
		s.step = fmt.Sprintf("day %d (%s, %s) %s host %s: %s", s.dayIndex(e.at), e.at.Format("2006-01-02 15:04:05"), s.dayKind(e.at), "on", e.host, e.what)
		e.fn(ctx)
		s.res.Steps++
		s.afterStep(ctx, e)
		s.retryStuck()
		if ctx.Err() != nil {
			break
		}
	}
	return s.finish(ctx)
}

func (s *Sim) finish(ctx context.Context) *Result {
	if !s.stop {
		s.clock.Set(s.clock.Now().Add(time.Minute))
		s.step = "end of the simulation"
		s.checkAll(ctx)
	}
	s.res.Faults = s.env.faults.counts()
	for _, c := range s.proc.ledger() {
		if c.Kept() {
			s.res.Collections++
		}
	}
	for _, u := range s.users {
		recs, err := s.raw.ListByUser(ctx, u)
		if err != nil {
			continue
		}
		for _, r := range recs {
			if r.Status == billing.StatusCompleted {
				s.res.Completed++
			}
		}
	}
	for _, k := range s.weather {
		s.res.Weather[k.String()]++
	}
	return &s.res
}

// newHost builds host i: its store view and a collector with its own
// configuration drawn from the seed.
func (s *Sim) newHost(i int) *host {
	name := fmt.Sprintf("h%d", i)
	seed := s.opts.Seed
	pages := 1 + pick(seed, 3, "pages", i)
	conc := min(1+pick(seed, 4, "concurrency", i), s.opts.MaxConcurrency)
	shardConc, who := 1, i
	if s.opts.without(MixedShardConcurrency) {
		who = -1 // one shard concurrency for every host, drawn for the run
	}
	if s.shards > 1 && draw(seed, "shard concurrency", who) < 0.6 {
		shardConc = min(2+pick(seed, 3, "shard concurrency n", who), s.opts.MaxConcurrency)
	}
	rlr := []int{-1, 1, 2}[pick(seed, 3, "rate limit retries", i)]
	r := newRepo(s, name)
	var coupons billing.Coupons
	if s.opts.with(PlanChanges) && s.opts.Store.Coupons != nil {
		coupons = &faultyCoupons{inner: s.opts.Store.Coupons, sim: s, host: name, calls: newCounter()}
	}
	var dunning *billing.DunningPolicy
	var events billing.EventSink
	if s.dun != nil {
		dunning, events = s.dun.policy(), s.dun
	}
	col, err := billing.NewCollector(billing.Config{
		Dunning: dunning, Events: events,
		Coupons:    coupons,
		Repository: r, History: s.hist, Locker: s.locker.forHost(name), Provider: s.proc, Clock: s.clock, AllowFreeTiers: true,
		Invoices: s.opts.Store.Invoices, Concurrency: conc, ShardConcurrency: shardConc, PagesPerInvocation: pages,
		ProcessorBudget: billing.ProcessorBudget{Backoff: time.Nanosecond, MaxBackoff: time.Nanosecond, RateLimitRetries: rlr},
		StoreBudget:     billing.StoreBudget{Backoff: time.Nanosecond, MaxBackoff: time.Nanosecond},
		NewID:           func() string { return tmpIDPrefix + strconv.FormatInt(s.ids.Add(1), 10) },
	})
	if err != nil {
		panic(err)
	}
	return &host{name: name, repo: r, col: col,
		desc: fmt.Sprintf("%s: %d pages an invocation, concurrency %d, shard concurrency %d, rate-limit retries %d", name, pages, conc, shardConc, rlr)}
}

func (s *Sim) touch(user string) {
	s.mu.Lock()
	s.dirty[user] = true
	s.mu.Unlock()
}

func (s *Sim) takeDirty() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Sorted(maps.Keys(s.dirty))
	s.dirty = map[string]bool{}
	return out
}

// at schedules fn at t; events at one time run in the order scheduled.
func (s *Sim) at(t time.Time, host, what string, fn func(ctx context.Context)) {
	s.seq++
	e := &event{at: t, seq: s.seq, host: host, what: what, fn: fn}
	i, _ := slices.BinarySearchFunc(s.events, e, func(a, b *event) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.seq - b.seq
	})
	s.events = slices.Insert(s.events, i, e)
}

func (s *Sim) dayIndex(t time.Time) int {
	return int(t.Sub(s.opts.Start) / (24 * time.Hour))
}

func (s *Sim) dayKind(t time.Time) dayKind {
	d := s.dayIndex(t)
	if t.Before(s.opts.Start) || d >= len(s.weather) {
		return stormy
	}
	return s.weather[d]
}

// fail records a broken invariant; without KeepGoing the simulation
// stops.
func (s *Sim) fail(invariant string, problems []string) {
	if len(problems) == 0 {
		return
	}
	key := invariant + "|" + signature(problems[0])
	if s.opts.KeepGoing && s.failed[key] {
		return
	}
	s.failed[key] = true
	s.res.Failures = append(s.res.Failures, Failure{Seed: s.opts.Seed, Invariant: invariant, Step: s.step, Problems: problems, Replay: s.opts.Replay(s.opts.Seed)})
	if !s.opts.KeepGoing {
		s.stop = true
	}
}

func (s *Sim) logf(format string, args ...any) {
	if s.opts.Logf != nil {
		s.opts.Logf(format, args...)
	}
}

// pickHost draws a host for what at now.
func (s *Sim) pickHost(parts ...any) *host {
	return s.hosts[pick(s.opts.Seed, len(s.hosts), append([]any{"host"}, parts...)...)]
}

// addUser records a user the simulation created.
func (s *Sim) addUser(u string) {
	if !s.userSet[u] {
		s.userSet[u] = true
		s.users = append(s.users, u)
	}
}

// retryStuck schedules, for each user whose lock was left held during the
// step, a webhook collection a minute later (it finds the lock held) and
// another six minutes later (it takes the lock over), as a queue
// redelivers an event.
func (s *Sim) retryStuck() {
	s.mu.Lock()
	users := slices.Clone(s.stuck)
	s.stuck = nil
	s.mu.Unlock()
	slices.Sort(users)
	now := s.clock.Now()
	for _, u := range slices.Compact(users) {
		for _, after := range []time.Duration{time.Minute, 6 * time.Minute} {
			h := s.pickHost("stuck", u, now, after)
			s.at(now.Add(after), h.name, "webhook of "+u+", whose lock a gone holder left", func(ctx context.Context) {
				rep, err := h.col.CollectUser(ctx, u, billing.ProcessWebhook)
				s.addReport(rep)
				s.res.Ops["webhook of a user left locked: "+classify(err)]++
			})
		}
	}
}

// signature is the shape of a problem: its text without the names,
// numbers, times and keys that differ from one occurrence to the next.
func signature(problem string) string {
	s := sigWords.ReplaceAllString(problem, "#")
	if i := strings.Index(s, "history of"); i >= 0 {
		s = s[:i]
	}
	if len(s) > 100 {
		s = s[:100]
	}
	return s
}

// sigWords are the words with a digit: IDs, keys, times, amounts.
var sigWords = regexp.MustCompile(`[^ ]*[0-9][^ ]*`)
