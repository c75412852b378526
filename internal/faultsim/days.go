package faultsim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dynabill/billing"
)

// Times of day (UTC) of the daily steps.
const (
	settleAt    = 8 * time.Hour
	notifyAt    = 9 * time.Hour
	opsAt       = 10 * time.Hour
	scheduledAt = 12 * time.Hour
	retryAt     = scheduledAt + 10*time.Minute
	pauseAt     = scheduledAt + 20*time.Minute
	strictAt    = scheduledAt + 30*time.Minute
	afternoonAt = 13 * time.Hour
)

// planDay schedules the steps of day d.
func (s *Sim) planDay(d int) {
	seed := s.opts.Seed
	day := s.opts.Start.AddDate(0, 0, d)
	kind := s.weather[d]
	quiet := kind == calm || kind == calmCheck || kind == abandoned
	s.at(day.Add(settleAt), s.pickHost("settle", d).name, "ACH settlements", s.settleStep)
	s.at(day.Add(notifyAt), "notifier", "notifier scheduler", s.notifier.schedule)
	s.at(day.Add(notifyAt+5*time.Minute), "notifier", "notifier worker", s.notifier.work)
	ops := max(2, len(s.users)/12)
	for i := range ops {
		t := day.Add(opsAt + between(seed, 0, 110*time.Minute, "op at", d, i))
		s.scheduleOp(t, d, i)
	}
	for _, r := range []struct {
		kind billing.RunKind
		at   time.Duration
	}{{billing.RunScheduled, scheduledAt}, {billing.RunRetry, retryAt}, {billing.RunPause, pauseAt}} {
		s.startRun(day.Add(r.at), r.kind, "daily", d)
	}
	if kind == calmCheck {
		s.at(day.Add(strictAt), "-", "strict checks after two calm days", func(ctx context.Context) { s.strictCheck(ctx, day) })
	}
	if kind == abandoned {
		s.at(day.Add(strictAt), "-", "check that the abandoned runs reach every shard", func(ctx context.Context) { s.checkRotation(ctx, day) })
	}
	if !quiet {
		// Soon after the runs: collections of users whose attempt is in
		// flight (a request may still be running at the processor), and
		// sometimes a second scheduled run by another host.
		for i, off := range []time.Duration{5 * time.Minute, 15 * time.Minute, 40 * time.Minute, 90 * time.Minute} {
			if draw(seed, "inflight webhook", d, i) < 0.7 {
				s.at(day.Add(scheduledAt+off), s.pickHost("inflight", d, i).name, "webhook of a user in flight", func(ctx context.Context) {
					s.webhookInFlight(ctx, d, i)
				})
			}
		}
		if draw(seed, "second run", d) < 0.3 {
			s.startRun(day.Add(scheduledAt+between(seed, 30*time.Minute, 6*time.Hour, "second run at", d)), billing.RunScheduled, "second", d)
		}
		if draw(seed, "notifier again", d) < 0.3 {
			s.at(day.Add(15*time.Hour), "notifier", "notifier scheduler (triggered again)", s.notifier.schedule)
			s.at(day.Add(15*time.Hour+5*time.Minute), "notifier", "notifier worker", s.notifier.work)
		}
	}
	s.planTrialDates(d)
	for i := range ops / 2 {
		t := day.Add(afternoonAt + between(seed, 0, 7*time.Hour, "afternoon op at", d, i))
		s.scheduleOp(t, d, 1000+i)
	}
	s.planCancelNow(d)
	s.planPlanChanges(d)
	s.planDunning(d)
	if d%7 == 6 {
		s.at(day.Add(24*time.Hour-time.Second), "-", "weekly check of every user", func(ctx context.Context) { s.checkAll(ctx) })
	}
	if d+1 < s.opts.Days {
		s.at(day.AddDate(0, 0, 1), "-", "plan the day", func(ctx context.Context) { s.planDay(d + 1) })
	}
}

// chain is one run, continued invocation after invocation.
type chain struct {
	kind        billing.RunKind
	shards      []int
	cursor      string
	started     time.Time
	what        string
	invocations int
}

// startRun starts the day's run of kind at t: over every shard by one
// host, or split in shard ranges over several hosts.
func (s *Sim) startRun(t time.Time, kind billing.RunKind, what string, d int) {
	seed := s.opts.Seed
	groups := [][]int{nil}
	if s.dayKind(t) == abandoned {
		// One fresh run over every shard by the abandoner, stopped after
		// its first invocation.
		ch := &chain{kind: kind, started: t, what: what}
		s.at(t, s.abandoner.name, fmt.Sprintf("%s %s run, never continued", what, kind), func(ctx context.Context) { s.invoke(ctx, s.abandoner, ch) })
		return
	}
	if s.shards > 1 && draw(seed, "split", kind, what, d) < 0.5 {
		n := 2 + pick(seed, min(3, s.shards-1), "groups", kind, what, d)
		groups = nil
		for g := range n {
			var sh []int
			for i := g * s.shards / n; i < (g+1)*s.shards/n; i++ {
				sh = append(sh, i)
			}
			groups = append(groups, sh)
		}
	}
	for g, sh := range groups {
		h := s.pickHost("run", kind, what, d, g)
		ch := &chain{kind: kind, shards: sh, started: t, what: what}
		s.at(t, h.name, fmt.Sprintf("%s %s run, shards %v", what, kind, sh), func(ctx context.Context) { s.invoke(ctx, h, ch) })
	}
}

// invoke runs invocations of ch on h until the run is done, or hands its
// continuation to a later step (or abandons it) on stormy days.
func (s *Sim) invoke(ctx context.Context, h *host, ch *chain) {
	seed := s.opts.Seed
	for {
		ch.invocations++
		if ch.invocations > 400 {
			s.fail("runs end", []string{fmt.Sprintf("%s run of %v over shards %v: %d invocations and still not done", ch.kind, ch.started, ch.shards, ch.invocations)})
			return
		}
		rep, err := h.col.Run(ctx, billing.RunRequest{Kind: ch.kind, Cursor: ch.cursor, Shards: ch.shards})
		s.addReport(rep)
		if errors.Is(err, billing.ErrInvalidCursor) {
			if ch.cursor != "" {
				s.fail("a run's continuation is accepted", []string{fmt.Sprintf(
					"%s run started %s over shards %v, invocation %d by %s at %s: its own continuation refused: %v",
					ch.kind, ch.started.Format(time.DateTime), ch.shards, ch.invocations, h.name, s.clock.Now().Format(time.DateTime), err)})
			} else {
				s.fail("a run starts", []string{fmt.Sprintf("%s run over shards %v by %s: %v", ch.kind, ch.shards, h.name, err)})
			}
			return
		}
		if err != nil {
			s.res.Ops["run: page failed"]++
		}
		if s.dayKind(s.clock.Now()) == abandoned {
			s.abandonRun(h, ch, rep, err)
			return
		}
		if rep == nil || (rep.Next == "" && err == nil) {
			return
		}
		ch.cursor = rep.Next
		k := s.dayKind(s.clock.Now())
		if k == calm || k == calmCheck {
			continue
		}
		n := ch.invocations
		if ch.cursor != "" && !s.opts.without(Misroutes) && draw(seed, "misroute", ch.kind, ch.started, ch.shards, n) < 0.08 {
			s.misroute(ctx, ch)
		}
		var delay time.Duration
		switch u := draw(seed, "continue", ch.kind, ch.started, ch.shards, n); {
		case u < 0.35 || s.opts.without(LaterContinuations):
			continue
		case u < 0.50:
			delay = 30 * time.Second
		case u < 0.65:
			delay = 3 * time.Minute
		case u < 0.83:
			delay = time.Hour
		case u < 0.92:
			delay = 24 * time.Hour
		default:
			s.res.Ops["run: abandoned"]++
			return
		}
		next := s.pickHost("continue", ch.kind, ch.started, ch.shards, n)
		s.at(s.clock.Now().Add(delay), next.name, fmt.Sprintf("%s %s run (started %s) over shards %v, continued after %v",
			ch.what, ch.kind, ch.started.Format(time.DateTime), ch.shards, delay), func(ctx context.Context) { s.invoke(ctx, next, ch) })
		return
	}
}

// misroute hands ch's cursor to another run, as a queue message sent to
// the wrong worker: over other shards, or of another kind. It must be
// refused.
func (s *Sim) misroute(ctx context.Context, ch *chain) {
	req := billing.RunRequest{Kind: ch.kind, Cursor: ch.cursor}
	switch {
	case s.shards > 1 && len(ch.shards) > 0:
		for i := 0; i < s.shards && len(req.Shards) < len(ch.shards); i++ {
			if !slices.Contains(ch.shards, i) {
				req.Shards = append(req.Shards, i)
			}
		}
	case s.shards > 1:
		req.Shards = []int{0}
	default:
		req.Kind = map[billing.RunKind]billing.RunKind{billing.RunScheduled: billing.RunPause, billing.RunRetry: billing.RunScheduled, billing.RunPause: billing.RunScheduled}[ch.kind]
	}
	s.env.faults.add("queue: continuation handed to another run")
	h := s.pickHost("misroute", ch.kind, ch.started, ch.invocations)
	var rep *billing.Report
	var err error
	for try := 0; try < 5; try++ {
		// A store fault before the cursor is read proves nothing.
		rep, err = h.col.Run(ctx, req)
		s.addReport(rep)
		if classify(err) != "store fault" || pagesOf(rep) > 0 {
			break
		}
	}
	s.res.Checks["another run's cursor is refused"]++
	if !errors.Is(err, billing.ErrInvalidCursor) {
		s.fail("another run's cursor is refused", []string{fmt.Sprintf(
			"the continuation of a %s run over shards %v (started %s) was given to a %s run over shards %v by %s: accepted (error %v, %d pages read)",
			ch.kind, ch.shards, ch.started.Format(time.DateTime), req.Kind, req.Shards, h.name, err, pagesOf(rep))})
	}
}

func pagesOf(r *billing.Report) int {
	if r == nil {
		return 0
	}
	return r.Pages
}

// addReport adds a run's report to the totals.
func (s *Sim) addReport(r *billing.Report) {
	if r == nil {
		return
	}
	t := &s.res.Runs
	t.Pages += r.Pages
	t.Scanned += r.Scanned
	t.Invalid += r.Invalid
	t.Attempted += r.Attempted
	t.Collected += r.Collected
	t.Pending += r.Pending
	t.Declined += r.Declined
	t.Unknown += r.Unknown
	t.RateLimited += r.RateLimited
	t.Advanced += r.Advanced
	t.Stale += r.Stale
	t.ACHOverdue += r.ACHOverdue
	t.SkippedLocked += r.SkippedLocked
	t.NotEligible += r.NotEligible
	t.Conflicts += r.Conflicts
	t.Unexpected += r.Unexpected
}

// delivery is a settlement event the processor sent, waiting to be
// applied.
type delivery struct {
	ev    billing.Settlement
	first time.Time
	tries int
}

// settleStep takes the processor's settlement events of the day and
// applies every one waiting through Collector.ApplySettlement (some
// twice); an event that fails for a reason that may pass is delivered
// again the next day.
func (s *Sim) settleStep(ctx context.Context) {
	now := s.clock.Now()
	d := s.dayIndex(now)
	for _, ev := range s.proc.settle(now) {
		s.settle = append(s.settle, &delivery{ev: ev, first: now})
	}
	var again []*delivery
	for i, dl := range s.settle {
		dl.tries++
		times := 1
		if draw(s.opts.Seed, "duplicate settlement", dl.ev.TransactionID, dl.tries) < 0.1 {
			times = 2
			s.env.faults.add("settlement: delivered twice")
		}
		var err error
		for j := range times {
			h := s.pickHost("settlement", d, i, j)
			_, _, err = h.col.ApplySettlement(ctx, dl.ev)
			s.res.Ops["settlement "+string(dl.ev.Kind)+": "+classify(err)]++
		}
		keep := err != nil && (retriable(err) || errors.Is(err, billing.ErrSettlementEarly))
		if keep && now.Sub(dl.first) < 40*24*time.Hour {
			again = append(again, dl)
		}
	}
	s.settle = again
	s.recoverDeclines(ctx)
}
