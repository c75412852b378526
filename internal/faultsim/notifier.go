package faultsim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/notice"
)

// notifierModel runs the pre-billing notifier: its scheduler enqueues a
// message per SCHEDULED record in the day's window, its worker claims
// each reminder on the record (notice.ReminderClaimer) and sends it.
// The queue delivers at least once: failed messages come back, some
// messages twice. The channel records what it delivered, which the
// reminder invariant reads.
type notifierModel struct {
	s     *Sim
	repo  *repo
	sched *notice.Scheduler
	work_ *notice.Worker

	queue []queued
	// current is the message the worker handles (it handles one at a
	// time): its record's key names the reminder Send delivers.
	current notice.Message
	mu      sync.Mutex
	sent    map[string]int // record key (user, billing date) → reminders sent
	dups    []dup
	total   int
	calls   *counter
}

type queued struct {
	body  string
	tries int
}

func newNotifier(s *Sim) *notifierModel {
	n := &notifierModel{s: s, repo: newRepo(s, "notifier"), sent: map[string]int{}, calls: newCounter()}
	var err error
	n.sched, err = notice.NewScheduler(notice.SchedulerConfig{Repository: n.repo, Enqueuer: notice.EnqueuerFunc(n.enqueue),
		Clock: s.clock, PagesPerInvocation: 1})
	if err != nil {
		panic(err)
	}
	n.work_, err = notice.NewWorker(notice.WorkerConfig{Users: users{}, Notifier: n, Reminders: n.repo, Clock: s.clock})
	if err != nil {
		panic(err)
	}
	return n
}

func (n *notifierModel) enqueue(_ context.Context, bodies []string) error {
	for _, b := range bodies {
		n.queue = append(n.queue, queued{body: b})
	}
	return nil
}

// schedule runs the scheduler over today's window to its end, following
// its continuations; a failed invocation is tried again once.
func (n *notifierModel) schedule(ctx context.Context) {
	ev := notice.Event{}
	failures := 0
	for range 1000 {
		res, err := n.sched.Run(ctx, ev)
		if err != nil {
			n.s.res.Ops["notifier scheduler: "+classify(err)]++
			if failures++; failures > 1 {
				return
			}
			continue
		}
		if res.Continuation == nil {
			return
		}
		ev = *res.Continuation
	}
}

// work handles the queued messages: a message that fails comes back
// (up to five tries), one in twenty is delivered twice.
func (n *notifierModel) work(ctx context.Context) {
	q := n.queue
	n.queue = nil
	for i, m := range q {
		times := 1
		if draw(n.s.opts.Seed, "duplicate message", m.body, m.tries) < 0.05 {
			times = 2
			n.s.env.faults.add("queue: message delivered twice")
		}
		var err error
		for range times {
			var msg notice.Message
			msg, err = notice.ParseMessage([]byte(m.body))
			if err == nil {
				var out notice.Outcome
				n.current = msg
				out, err = n.work_.Handle(ctx, msg)
				n.s.res.Ops["reminder: "+string(out)]++
			}
			if err != nil {
				n.s.res.Ops["reminder: "+classify(err)]++
			}
		}
		if err != nil && m.tries < 5 {
			m.tries++
			n.queue = append(n.queue, m)
		}
		_ = i
	}
}

// Send implements [billing.Notifier]: it fails on a stormy day now and
// then, else records the reminder.
func (n *notifierModel) Send(ctx context.Context, email string, note billing.RenewalNotice) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m := n.current
	key := m.UserID + " " + m.BillingDate.UTC().Format(time.RFC3339)
	c := n.calls.next(key)
	if n.s.env.stormy() && draw(n.s.opts.Seed, "send", key, c) < 0.04 {
		n.s.env.faults.add("notifier: send failed")
		return errors.New("faultsim: notification channel unavailable")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.sent[key]++
	n.total++
	if n.sent[key] == 2 {
		n.dups = append(n.dups, dup{m.UserID, fmt.Sprintf("reminder of user %s for the record billed %s sent twice (second at %s, for %s)",
			m.UserID, m.BillingDate.UTC().Format(time.DateTime), n.s.clock.Now().Format("2006-01-02 15:04"), m.SubscriptionID)})
	}
	return nil
}

// dup is a reminder sent twice.
type dup struct{ user, msg string }

// takeDups returns the reminders sent twice since the last call.
func (n *notifierModel) takeDups() []dup {
	n.mu.Lock()
	defer n.mu.Unlock()
	d := slices.Clone(n.dups)
	n.dups = nil
	return d
}

// users is the user directory: every user is active.
type users struct{}

func (users) GetUser(_ context.Context, id string) (billing.User, error) {
	return billing.User{ID: id, Email: "user@example.com", Status: billing.UserStatusActive}, nil
}
