// Package simulation runs recurring billing over simulated months: it signs
// users up on monthly and yearly plans ([billing.Collector.Subscribe], one
// request per user), then steps a fake clock day by day
// through the collector's scheduled, retry and pause runs and the ACH
// settlements of a scripted processor, and counts what happened per month.
//
// A host imports it to try its wiring (its store, locker and collector
// configuration) over months in seconds, as examples/quickstart does, or
// to check invariants of its own in the step hooks, as the library's
// simulation tests do. It uses the fakes of package billingtest (clock and
// processor), which is what "simulated" means here; the storage defaults
// to package memory and can be any billing.Repository, DynamoDB included.
//
// Run builds its own collector from [Options], or runs one the caller
// built (Options.Collector), as the quickstart does to show the wiring: the
// caller then builds it on [NewClock], [NewProvider] and [NewTally].
//
// # A simulated day
//
// Each day D (UTC) of [Options.Start, Options.Start+Months):
//
//   - 08:00 settlement: every ACH debit submitted before D is settled, or
//     returned (a deterministic ReturnRate share), through
//     Collector.ApplySettlement, as a processor's next-day settlement
//     file would be. An event for a record that does not know its
//     transaction yet (its attempt's outcome was unknown) is delivered
//     again the next day.
//   - 12:00 scheduled run, 12:10 retry run, 12:20 pause run: each runs
//     to completion, an invocation of Collector.Run at a time, following
//     Report.Next (with a small PagesPerInvocation, so continuation is
//     exercised), the RunRequest round-tripped through JSON as a queue
//     message would be.
//
// The clock stands still during a step, so every provider call of a run
// carries the run's time.
package simulation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/memory"
)

// Clock is the simulation's clock: billingtest.Clock satisfies it.
type Clock interface {
	billing.Clock
	Set(t time.Time)
}

// NewClock returns a fake clock for a collector that [Run] is to run: Run
// sets it to each step's time.
func NewClock() Clock {
	return billingtest.NewClock(DefaultStart)
}

// NewProvider returns the scripted processor for a collector that [Run] is
// to run, on clock (the collector's). Run gives it the simulation's
// answers.
func NewProvider(clock billing.Clock) *billingtest.Provider {
	return billingtest.NewProvider(billingtest.ProviderOptions{Clock: clock})
}

// Defaults of [Options].
const (
	DefaultUsers              = 1000
	DefaultMonths             = 3
	DefaultDeclineRate        = 0.08
	DefaultPendingRate        = 0.30
	DefaultReturnRate         = 0.10
	DefaultPagesPerInvocation = 2
)

// DefaultStart is the first simulated day when Options.Start is zero.
var DefaultStart = time.Date(2024, time.January, 1, 0, 0, 0, 0, time.UTC)

// Times of day (UTC) of a simulated day's steps.
const (
	SettleAt    = 8 * time.Hour
	ScheduledAt = 12 * time.Hour
	RetryAt     = ScheduledAt + 10*time.Minute
	PauseAt     = ScheduledAt + 20*time.Minute
)

// Options configures [Run]. Every field has a default.
type Options struct {
	// Users is the number of users seeded. Defaults to 1000.
	Users int
	// UserID, when set, gives the user ID of the i-th user seeded (i from
	// 0), e.g. a single-table [billing.SubscriptionRef.UserID]; the IDs
	// must be distinct. Defaults to "user-%04d" of i+1. The population
	// (plans, dates, behaviours) does not depend on the IDs; the
	// processor's answers and the first records' subscription IDs do.
	UserID func(i int) string
	// Months is the number of calendar months simulated. Defaults to 3.
	Months int
	// Start is the first simulated day (its date in UTC is used).
	// Defaults to DefaultStart (2024-01-01: a leap year, so anchors 29–31
	// meet February 29).
	Start time.Time
	// Seed makes the population and the processor's answers; the same
	// seed gives the same simulation.
	Seed int64
	// DeclineRate and PendingRate are the shares of attempts declined
	// (retryably) and submitted as ACH debits; the rest are collected at
	// once. Default to 0.08 and 0.30; set a rate to a negative number for
	// 0.
	DeclineRate, PendingRate float64
	// ReturnRate is the share of ACH debits returned instead of settled.
	// Defaults to 0.10; negative means 0.
	ReturnRate float64
	// NoLegacy signs every user up through SignUp. By default a few
	// users' first periods are records another service wrote, which Run
	// writes with Repository.AddAll because Subscribe refuses them on
	// purpose (see User.Legacy): about 1% billed more than 30 days before
	// the start (an outage's backlog, marked STALE by the first scheduled
	// run), and, when the first month has four Fridays, the users billed
	// on the fifth. With NoLegacy the former are billed in the first month
	// and the latter on the fourth Friday.
	NoLegacy bool

	// SignUp starts one user's subscription, as a host's sign-up handler
	// does: it must call the collector's Subscribe with the key and first
	// billing date of u.SubscribeRequest() (the rest of the request may
	// come from the host's price list, Config.Prices), and Run checks that
	// the first period was written. Run calls it for every user but the
	// Legacy ones, in order, on the eve of the first simulated day (the
	// clock at Start − 12h). Defaults to Subscribe with
	// u.SubscribeRequest().
	SignUp func(ctx context.Context, u User) error

	// Collector, when set, is the collector the simulation runs instead of
	// one Run builds. It must have been built on this Repository, Clock and
	// Provider, with Tally as its billing.Config.Events (or a sink that
	// passes every event on to Tally), and with a small PagesPerInvocation
	// if continuations are to be exercised. The options that only
	// configure the collector Run builds (Locker, PagesPerInvocation,
	// Concurrency, Events and Logger) must be left unset with it.
	Collector *billing.Collector
	// Tally counts the collector's events for the per-month table; one
	// Tally serves one simulation. Required with Collector; otherwise it
	// defaults to a new one.
	Tally *Tally

	// Repository and History store the records. Default to a fresh
	// in-memory store of package memory (pages of 250 records); required
	// with Collector. The repository must be empty.
	Repository billing.Repository
	History    billing.History
	// Locker defaults to memory.NewLocker on Clock.
	Locker billing.Locker
	// Clock defaults to NewClock(); required with Collector. Run sets it.
	Clock Clock
	// Provider defaults to NewProvider(Clock) (give one of your own the
	// same Clock: checks group its calls by time); required with
	// Collector. Run sets its default Script; per-user or per-attempt
	// scripts a caller sets take precedence.
	Provider *billingtest.Provider

	// PagesPerInvocation is the collector's; defaults to 2.
	PagesPerInvocation int
	// Concurrency is the collector's; 0 uses its default.
	Concurrency int
	// Events also receives the collector's events.
	Events billing.EventSink
	// Logger is the collector's logger; nil is quiet.
	Logger *slog.Logger

	// BeforeStep and AfterStep, when set, are called around every step
	// of every day with the clock at the step's time: a test checks its
	// invariants there. An error stops the simulation.
	BeforeStep func(ctx context.Context, s Step) error
	AfterStep  func(ctx context.Context, s Step) error
}

// StepKind names a step of a simulated day.
type StepKind string

// The steps, in their order in a day.
const (
	StepSettlement StepKind = "settlement"
	StepScheduled  StepKind = StepKind(billing.RunScheduled)
	StepRetry      StepKind = StepKind(billing.RunRetry)
	StepPause      StepKind = StepKind(billing.RunPause)
)

// Step is one step of a simulated day.
type Step struct {
	Kind StepKind
	// Day is the simulated day (midnight UTC); At the clock during the
	// step.
	Day, At time.Time
	// Reports are those of the run's Collector.Run invocations, in order
	// (set for AfterStep).
	Reports []*billing.Report
}

func (o Options) withDefaults() (Options, error) {
	switch {
	case o.Users < 0:
		return o, fmt.Errorf("simulation: Options.Users: negative %d", o.Users)
	case o.Months < 0:
		return o, fmt.Errorf("simulation: Options.Months: negative %d", o.Months)
	case o.DeclineRate > 1 || o.PendingRate > 1 || max(o.DeclineRate, 0)+max(o.PendingRate, 0) > 1:
		return o, fmt.Errorf("simulation: Options.DeclineRate %v and PendingRate %v must sum to at most 1", o.DeclineRate, o.PendingRate)
	case o.ReturnRate > 1:
		return o, fmt.Errorf("simulation: Options.ReturnRate: %v above 1", o.ReturnRate)
	case (o.Repository == nil) != (o.History == nil):
		return o, errors.New("simulation: Options.Repository and History go together")
	case o.Tally != nil && o.Tally.used():
		return o, errors.New("simulation: Options.Tally has counted another simulation")
	}
	if o.Collector != nil {
		if err := o.checkCollector(); err != nil {
			return o, err
		}
	}
	if o.Users == 0 {
		o.Users = DefaultUsers
	}
	if o.Months == 0 {
		o.Months = DefaultMonths
	}
	if o.Start.IsZero() {
		o.Start = DefaultStart
	}
	s := o.Start.UTC()
	o.Start = time.Date(s.Year(), s.Month(), s.Day(), 0, 0, 0, 0, time.UTC)
	rate := func(p *float64, def float64) {
		switch {
		case *p == 0:
			*p = def
		case *p < 0:
			*p = 0
		}
	}
	rate(&o.DeclineRate, DefaultDeclineRate)
	rate(&o.PendingRate, DefaultPendingRate)
	rate(&o.ReturnRate, DefaultReturnRate)
	if o.DeclineRate+o.PendingRate > 1 {
		return o, fmt.Errorf("simulation: Options.DeclineRate %v and PendingRate %v must sum to at most 1", o.DeclineRate, o.PendingRate)
	}
	if o.Repository == nil {
		// Pages of 250: the in-memory store scans its table per page.
		st, err := memory.New(memory.Options{PageSize: 250})
		if err != nil {
			return o, fmt.Errorf("simulation: %w", err)
		}
		o.Repository, o.History = st.Repository(), st.History()
	}
	if o.Clock == nil {
		o.Clock = NewClock()
	}
	if o.Provider == nil {
		o.Provider = NewProvider(o.Clock)
	}
	if o.Tally == nil {
		o.Tally = NewTally()
	}
	if o.Collector != nil {
		return o, nil
	}
	if o.Locker == nil {
		o.Locker = memory.NewLocker(memory.LockerOptions{Clock: o.Clock})
	}
	if o.PagesPerInvocation == 0 {
		o.PagesPerInvocation = DefaultPagesPerInvocation
	}
	return o, nil
}

// checkCollector checks the options that go with a Collector.
func (o *Options) checkCollector() error {
	var missing, unused []string
	note := func(list *[]string, name string, cond bool) {
		if cond {
			*list = append(*list, name)
		}
	}
	note(&missing, "Repository", o.Repository == nil)
	note(&missing, "Clock", o.Clock == nil)
	note(&missing, "Provider", o.Provider == nil)
	note(&missing, "Tally", o.Tally == nil)
	note(&unused, "Locker", o.Locker != nil)
	note(&unused, "PagesPerInvocation", o.PagesPerInvocation != 0)
	note(&unused, "Concurrency", o.Concurrency != 0)
	note(&unused, "Events", o.Events != nil)
	note(&unused, "Logger", o.Logger != nil)
	switch {
	case len(missing) > 0:
		return fmt.Errorf("simulation: Options.Collector needs the Repository, Clock, Provider and Tally it was built with; %s missing",
			strings.Join(missing, ", "))
	case len(unused) > 0:
		return fmt.Errorf("simulation: Options.Collector is built already, so %s would not be used", strings.Join(unused, ", "))
	case o.Collector.Clock() != billing.Clock(o.Clock):
		return fmt.Errorf("simulation: Options.Collector reads another clock (%T) than Options.Clock: build it with Config.Clock set to Options.Clock", o.Collector.Clock())
	}
	return nil
}

// sim is one simulation in progress.
type sim struct {
	opts   Options
	c      *billing.Collector
	script *script
	tally  *Tally
	res    *Result
}

// Run signs the users up and simulates opts.Months months day by day. It
// returns an error when a run cannot read its pages, a settlement cannot
// be applied, or a hook fails; items a run could not handle are listed
// in Result.Failures, not errors.
func Run(ctx context.Context, opts Options) (*Result, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	end := opts.Start.AddDate(0, opts.Months, 0)
	users, err := population(opts.Seed, opts.Users, opts.Start, opts.UserID, !opts.NoLegacy)
	if err != nil {
		return nil, err
	}
	s := &sim{
		opts:   opts,
		c:      opts.Collector,
		script: newScript(opts.Seed, opts.DeclineRate, opts.PendingRate, opts.ReturnRate, users),
		tally:  opts.Tally,
		res: &Result{Start: opts.Start, End: end, Users: users,
			Repository: opts.Repository, History: opts.History, Provider: opts.Provider, Clock: opts.Clock},
	}
	s.tally.start(opts.Events)
	opts.Provider.SetDefault(s.script.step)
	if s.c == nil {
		s.c, err = billing.NewCollector(billing.Config{
			Repository: opts.Repository, History: opts.History, Locker: opts.Locker, Provider: opts.Provider,
			Clock: opts.Clock, Logger: opts.Logger, Concurrency: opts.Concurrency,
			PagesPerInvocation: opts.PagesPerInvocation, Events: s.tally,
		})
		if err != nil {
			return nil, err
		}
	}
	// Users sign up the day before the first simulated day.
	if opts.SignUp == nil {
		opts.SignUp = func(ctx context.Context, u User) error {
			_, err := s.c.Subscribe(ctx, u.SubscribeRequest())
			return err
		}
	}
	opts.Clock.Set(opts.Start.Add(-12 * time.Hour))
	if err := signUp(ctx, opts.Repository, users, opts.Clock.Now(), opts.SignUp); err != nil {
		return nil, err
	}
	for day := opts.Start; day.Before(end); day = day.AddDate(0, 0, 1) {
		if err := s.day(ctx, day); err != nil {
			return s.res, fmt.Errorf("simulation: %s: %w", day.Format("2006-01-02"), err)
		}
	}
	s.res.PendingAtEnd = len(opts.Provider.PendingSettlements())
	if err := s.tally.result(s.res); err != nil {
		return s.res, err
	}
	s.res.Showcase = s.tally.showcase(users)
	return s.res, nil
}

// day simulates one day's steps.
func (s *sim) day(ctx context.Context, day time.Time) error {
	steps := []struct {
		kind StepKind
		at   time.Duration
	}{{StepSettlement, SettleAt}, {StepScheduled, ScheduledAt}, {StepRetry, RetryAt}, {StepPause, PauseAt}}
	for _, st := range steps {
		step := Step{Kind: st.kind, Day: day, At: day.Add(st.at)}
		s.opts.Clock.Set(step.At)
		if h := s.opts.BeforeStep; h != nil {
			if err := h(ctx, step); err != nil {
				return fmt.Errorf("before %s: %w", st.kind, err)
			}
		}
		var err error
		if st.kind == StepSettlement {
			err = s.settle(ctx, day)
		} else {
			step.Reports, err = s.run(ctx, step)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", st.kind, err)
		}
		if h := s.opts.AfterStep; h != nil {
			if err := h(ctx, step); err != nil {
				return fmt.Errorf("after %s: %w", st.kind, err)
			}
		}
	}
	return nil
}

// run runs one kind of run to completion and returns the reports of its
// invocations.
func (s *sim) run(ctx context.Context, step Step) ([]*billing.Report, error) {
	var reports []*billing.Report
	msg, err := json.Marshal(billing.RunRequest{Kind: billing.RunKind(step.Kind)})
	for err == nil {
		var req billing.RunRequest
		if err = json.Unmarshal(msg, &req); err != nil {
			break
		}
		var rep *billing.Report
		rep, err = s.c.Run(ctx, req)
		s.res.Invocations++
		reports = append(reports, rep)
		s.tally.count(step.At, func(m *Month) {
			m.Attempts += rep.Attempted
			m.Unknown += rep.Unknown
			m.Paused += rep.Advanced
			if step.Kind == StepRetry {
				m.Retried += rep.Attempted
			}
		})
		for _, f := range rep.Failed {
			s.res.Failures = append(s.res.Failures, Failure{Step: step, ItemFailure: f})
		}
		if err != nil || rep.Next == "" {
			break
		}
		msg, err = json.Marshal(billing.RunRequest{Kind: req.Kind, Cursor: rep.Next})
	}
	return reports, err
}

// settle resolves the ACH debits submitted before day: the processor's
// settlement file, applied through the collector and then marked on the
// processor.
func (s *sim) settle(ctx context.Context, day time.Time) error {
	for _, ch := range s.opts.Provider.PendingSettlements() {
		if !ch.At.Before(day) {
			continue
		}
		ev := billing.Settlement{SubscriptionID: ch.SubscriptionID, TransactionID: ch.TransactionID, Kind: billing.SettlementSettled}
		returned := s.script.returned(ch.Key)
		if returned {
			ev.Kind, ev.Reason = billing.SettlementReturned, ReasonInsufficientFunds
		}
		calls := s.opts.Provider.CallCount()
		_, changed, err := s.c.ApplySettlement(ctx, ev)
		if n := s.opts.Provider.CallCount() - calls; n > 0 {
			// The event resolved the attempt in flight it is about first
			// (a replay of its key): provider calls like any other.
			s.tally.count(s.opts.Clock.Now(), func(m *Month) { m.Attempts += n })
		}
		if errors.Is(err, billing.ErrSettlementEarly) {
			// The attempt's outcome is not recorded yet: deliver again
			// tomorrow, as a queue would. Any other mismatch fails the
			// simulation.
			s.res.Deferred++
			continue
		}
		if err != nil {
			return fmt.Errorf("%s of %s: %w", ev.Kind, ch.Key, err)
		}
		if returned {
			err = s.opts.Provider.Return(ch.Key)
		} else {
			err = s.opts.Provider.Settle(ch.Key)
		}
		if err != nil {
			return err
		}
		if changed && !returned {
			s.tally.count(s.opts.Clock.Now(), func(m *Month) { m.Settled++ })
		}
	}
	return nil
}
