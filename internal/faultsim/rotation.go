package faultsim

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/dynabill/billing"
)

// invRotation is the invariant of runs that are never continued.
const invRotation = "every shard reached within K days when runs are never continued"

// abandonedStretch is the length of the stretch of abandoned days on a
// store of n shards: a window of n days, and three more.
func abandonedStretch(n int) int { return n + 3 }

// planAbandoned turns a stretch of days of w into abandoned days, on a
// sharded store (AbandonedRuns): long enough for every shard to be the
// first of a fresh run, placed after the first days and before the last
// ones. The day after it is never the second calm day (its strict checks
// would find what the abandoned runs left unread).
func (s *Sim) planAbandoned(w []dayKind) {
	n, days := s.shards, len(w)
	l := abandonedStretch(n)
	if n <= 1 || s.opts.without(AbandonedRuns) || days < l+24 {
		return
	}
	first := 10 + pick(s.opts.Seed, days-l-24, "abandoned start")
	for d := first; d < first+l; d++ {
		w[d] = abandoned
	}
	if e := first + l; e < days && w[e] == calmCheck {
		w[e] = stormy
	}
}

// newAbandoner builds the host that runs every run of the abandoned
// days: it works shards one after the other (ShardConcurrency 1) with a
// page budget drawn among values that share a factor with the shard
// counts of the stores (the library's default, 10, among them), and its
// store view reports the status queries its runs make.
func (s *Sim) newAbandoner() *host {
	pages := []int{2, 4, 6, 10}[pick(s.opts.Seed, 4, "abandoner pages")]
	r := newRepo(s, "hx")
	r.queries = &queryLog{}
	var dunning *billing.DunningPolicy
	var events billing.EventSink
	if s.dun != nil {
		dunning, events = s.dun.policy(), s.dun
	}
	col, err := billing.NewCollector(billing.Config{
		Dunning: dunning, Events: events,
		Repository: r, History: s.hist, Locker: s.locker.forHost("hx"), Provider: s.proc, Clock: s.clock, AllowFreeTiers: true,
		Invoices:    s.opts.Store.Invoices,
		Concurrency: min(2, s.opts.MaxConcurrency), ShardConcurrency: 1, PagesPerInvocation: pages,
		StoreBudget: billing.StoreBudget{Backoff: time.Nanosecond, MaxBackoff: time.Nanosecond},
		NewID:       func() string { return tmpIDPrefix + strconv.FormatInt(s.ids.Add(1), 10) },
	})
	if err != nil {
		panic(err)
	}
	return &host{name: "hx", repo: r, col: col,
		desc: fmt.Sprintf("hx (runs of the abandoned days, never continued): %d pages an invocation, shard concurrency 1", pages)}
}

// queryLog records the shards at which status queries start reading: the
// first shard of a query from the top of its shards.
type queryLog struct {
	mu     sync.Mutex
	shards []int
}

func (l *queryLog) add(q billing.StatusQuery, k int) {
	if q.Cursor != "" {
		return
	}
	sh, err := q.ShardsIn(k)
	if err != nil || len(sh) == 0 {
		return
	}
	l.mu.Lock()
	l.shards = append(l.shards, sh[0])
	l.mu.Unlock()
}

func (l *queryLog) take() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.shards
	l.shards = nil
	return out
}

// abandonRun records what the first invocation of a fresh run of the
// abandoned days reached (every shard, when it finished; otherwise the
// shards its queries started reading) and leaves the rest unread.
func (s *Sim) abandonRun(h *host, ch *chain, rep *billing.Report, err error) {
	var shards []int
	if h.repo.queries != nil {
		shards = h.repo.queries.take()
	}
	if ch.invocations > 1 || h != s.abandoner {
		s.res.Ops["run: continuation abandoned on an abandoned day"]++
		return
	}
	if rep != nil && rep.Next == "" && err == nil {
		shards = nil
		for i := range s.shards {
			shards = append(shards, i)
		}
	}
	m := s.reached[ch.kind]
	if m == nil {
		m = map[int]int{}
		s.reached[ch.kind] = m
	}
	d := s.dayIndex(s.clock.Now())
	for _, sh := range shards {
		m[sh] = d
	}
	s.res.Ops["run: abandoned, never continued"]++
}

// checkRotation checks, after the runs of an abandoned day, that every
// shard was reached by a fresh run of each kind within the last K days,
// K the number of shards, once K abandoned days have passed.
func (s *Sim) checkRotation(ctx context.Context, day time.Time) {
	d := s.dayIndex(day)
	k := s.shards
	if d-k+1 < 0 || slices.ContainsFunc(s.weather[d-k+1:d+1], func(w dayKind) bool { return w != abandoned }) {
		return
	}
	var bad []string
	for _, kind := range []billing.RunKind{billing.RunScheduled, billing.RunRetry, billing.RunPause} {
		s.res.Checks[invRotation]++
		var missed []int
		for sh := range k {
			if at, ok := s.reached[kind][sh]; !ok || at <= d-k {
				missed = append(missed, sh)
			}
		}
		if len(missed) > 0 {
			bad = append(bad, fmt.Sprintf("%s runs of the last %d days (%s to %s), each stopped after its first invocation by %s, started reading none of shards %v of %d",
				kind, k, s.opts.Start.AddDate(0, 0, d-k+1).Format(time.DateOnly), day.Format(time.DateOnly), s.abandoner.desc, missed, k))
		}
	}
	s.fail(invRotation, bad)
}
