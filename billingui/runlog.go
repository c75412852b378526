package billingui

import (
	"sync"
	"time"

	"github.com/dynabill/billing"
)

// RunLog keeps the reports of the latest runs for the Today page. The
// engine does not store its reports: a host adds each [billing.Report]
// its runs return (every invocation of a run continued through
// Report.Next) and the page sums the invocations of each run. A nil
// *RunLog holds nothing. It is safe for concurrent use.
type RunLog struct {
	mu      sync.Mutex
	max     int
	reports []runReport
}

// NewRunLog returns a RunLog keeping the latest max reports. max <= 0
// keeps 200.
func NewRunLog(max int) *RunLog {
	if max <= 0 {
		max = 200
	}
	return &RunLog{max: max}
}

// Add keeps a copy of r, forgetting the oldest report beyond the log's
// size. A nil r is ignored.
func (l *RunLog) Add(r *billing.Report) {
	if l == nil || r == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reports = append(l.reports, snapshot(r))
	if len(l.reports) > l.max {
		l.reports = append(l.reports[:0:0], l.reports[len(l.reports)-l.max:]...)
	}
}

// latest returns, for each run kind, the invocations of its latest run
// summed: reports of one kind with the same Started day belong to it.
func (l *RunLog) latest() []runSummary {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []runSummary
	for _, kind := range []billing.RunKind{billing.RunScheduled, billing.RunRetry, billing.RunPause} {
		var s *runSummary
		for i := len(l.reports) - 1; i >= 0; i-- {
			r := &l.reports[i]
			if r.Kind != string(kind) {
				continue
			}
			day := r.Started.UTC().Format("2006-01-02")
			if s == nil {
				s = &runSummary{Kind: r.Kind, Day: day, Finished: r.Finished}
			} else if s.Day != day {
				break
			}
			s.add(r)
		}
		if s != nil {
			out = append(out, *s)
		}
	}
	return out
}

// runSummary is one run's invocations summed.
type runSummary struct {
	Kind        string
	Day         string
	Finished    time.Time
	Invocations int
	Attempted   int
	Collected   int
	Pending     int
	Declined    int
	Unknown     int
	RateLimited int
	Stale       int
	ACHOverdue  int
	Advanced    int
	Locked      int
	Invalid     int
	Failed      []billing.ItemFailure
	Unfinished  bool
}

func (s *runSummary) add(r *runReport) {
	s.Invocations++
	s.Attempted += r.Attempted
	s.Collected += r.Collected
	s.Pending += r.Pending
	s.Declined += r.Declined
	s.Unknown += r.Unknown
	s.RateLimited += r.RateLimited
	s.Stale += r.Stale
	s.ACHOverdue += r.ACHOverdue
	s.Advanced += r.Advanced
	s.Locked += r.SkippedLocked
	s.Invalid += r.Invalid
	s.Failed = append(s.Failed, r.Failed...)
	if s.Invocations == 1 && r.Next != "" {
		s.Unfinished = true // the newest invocation left a continuation
	}
}

// runReport is what the log keeps of a [billing.Report] (which holds a
// mutex and is not copied).
type runReport struct {
	Kind                                                    string
	Started, Finished                                       time.Time
	Attempted, Collected, Pending, Declined, Unknown        int
	RateLimited, Stale, ACHOverdue, Advanced, SkippedLocked int
	Invalid                                                 int
	Failed                                                  []billing.ItemFailure
	Next                                                    string
}

func snapshot(r *billing.Report) runReport {
	return runReport{
		Kind: r.Kind, Started: r.Started, Finished: r.Finished,
		Attempted: r.Attempted, Collected: r.Collected, Pending: r.Pending, Declined: r.Declined, Unknown: r.Unknown,
		RateLimited: r.RateLimited, Stale: r.Stale, ACHOverdue: r.ACHOverdue, Advanced: r.Advanced, SkippedLocked: r.SkippedLocked,
		Invalid: r.Invalid, Failed: append([]billing.ItemFailure(nil), r.Failed...), Next: r.Next,
	}
}
