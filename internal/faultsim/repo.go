package faultsim

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/notice"
)

// tmpIDPrefix starts the subscription IDs the collectors make (their
// Config.NewID); the store wrapper replaces them by IDs derived from the
// record they follow, so that IDs do not depend on the order in which
// concurrent collections asked for them.
const tmpIDPrefix = "tmp-"

// nextID is the subscription ID of the record created after prev at
// billingDate.
func nextID(prev string, billingDate time.Time) string {
	h := fnv.New64a()
	h.Write([]byte(prev + "|" + billingDate.UTC().Format(time.RFC3339)))
	return fmt.Sprintf("s%012x", h.Sum64()&0xffffffffffff)
}

// Errors of the store faults.
var (
	errStoreBefore = errors.New("faultsim: store: connection reset, nothing written")
	errStoreAfter  = errors.New("faultsim: store: timeout after the write applied")
)

// repo is a host's view of the store: the real Repository behind faults
// drawn from (seed, host, operation, identity, call index of that
// identity) on stormy days. A read fails or is throttled before it reads;
// a write fails or is throttled before it applies ([billing.ErrThrottled]:
// nothing written), or applies and then fails. It also implements
// [notice.ReminderClaimer] and [billing.ShardedRepository] when the real
// store does.
type repo struct {
	inner billing.Repository
	sim   *Sim
	host  string
	calls *counter
	// queries, when set, logs the status queries (the abandoner's).
	queries *queryLog
}

var (
	_ billing.ShardedRepository = (*repo)(nil)
	_ notice.ReminderClaimer    = (*repo)(nil)
)

func newRepo(s *Sim, host string) *repo {
	return &repo{inner: s.opts.Store.Repository, sim: s, host: host, calls: newCounter()}
}

// faultKind is what a drawn store fault does.
type faultKind int

const (
	noFault faultKind = iota
	throttled
	failBefore
	failAfter
)

func (r *repo) fault(op, id string, write bool) faultKind {
	e := r.sim.env
	if !e.stormy() {
		return noFault
	}
	n := r.calls.next(op + "|" + id)
	u := draw(e.seed, "store", r.host, op, id, n)
	switch {
	case u < 0.008:
		e.faults.add("store: throttled")
		return throttled
	case u < 0.016:
		e.faults.add("store: failed before applying")
		return failBefore
	case write && u < 0.028:
		e.faults.add("store: applied, then failed")
		return failAfter
	}
	return noFault
}

func faultErr(k faultKind, op, id string) error {
	switch k {
	case throttled:
		return fmt.Errorf("faultsim: store: %s %s: %w", op, id, billing.ErrThrottled)
	case failBefore:
		return fmt.Errorf("%s %s: %w", op, id, errStoreBefore)
	case failAfter:
		return fmt.Errorf("%s %s: %w", op, id, errStoreAfter)
	}
	return nil
}

// write runs a write under a drawn fault.
func (r *repo) write(op, id string, apply func() error) error {
	if !strings.HasPrefix(id, "batch|") {
		r.sim.touch(id)
	}
	k := r.fault(op, id, true)
	if k == throttled || k == failBefore {
		return faultErr(k, op, id)
	}
	err := apply()
	if err == nil && k == failAfter {
		return faultErr(k, op, id)
	}
	return err
}

func (r *repo) read(op, id string) error {
	return faultErr(r.fault(op, id, false), op, id)
}

func (r *repo) Add(ctx context.Context, s *billing.Period) error {
	if strings.HasPrefix(s.SubscriptionID, tmpIDPrefix) {
		s.SubscriptionID = nextID(s.UserID+"|reactivated", s.BillingDate)
	}
	return r.write("add", s.UserID, func() error { return r.inner.Add(ctx, s) })
}

func (r *repo) Get(ctx context.Context, userID string, billingDate time.Time) (billing.Period, error) {
	if err := r.read("get", userID); err != nil {
		return billing.Period{}, err
	}
	return r.inner.Get(ctx, userID, billingDate)
}

func (r *repo) GetByID(ctx context.Context, subscriptionID string) (billing.Period, error) {
	if err := r.read("get by id", subscriptionID); err != nil {
		return billing.Period{}, err
	}
	return r.inner.GetByID(ctx, subscriptionID)
}

func (r *repo) ListByUser(ctx context.Context, userID string) ([]billing.Period, error) {
	if err := r.read("list", userID); err != nil {
		return nil, err
	}
	return r.inner.ListByUser(ctx, userID)
}

func (r *repo) Recent(ctx context.Context, userID string, limit int) ([]billing.Period, error) {
	if err := r.read("recent", userID); err != nil {
		return nil, err
	}
	return r.inner.Recent(ctx, userID, limit)
}

func (r *repo) QueryStatus(ctx context.Context, q billing.StatusQuery) (billing.Page, error) {
	if r.queries != nil {
		r.queries.add(q, r.DueShards())
	}
	if err := r.read("query", fmt.Sprintf("%s%v", q.Status, q.Shards)); err != nil {
		return billing.Page{}, err
	}
	return r.inner.QueryStatus(ctx, q)
}

func (r *repo) Update(ctx context.Context, prev, next *billing.Period, create ...*billing.Period) error {
	for _, c := range create {
		if strings.HasPrefix(c.SubscriptionID, tmpIDPrefix) {
			c.SubscriptionID = nextID(prev.SubscriptionID, c.BillingDate)
		}
	}
	return r.write("update", prev.UserID, func() error { return r.inner.Update(ctx, prev, next, create...) })
}

func (r *repo) AdminUpdate(ctx context.Context, prev, next *billing.Period) error {
	return r.write("admin update", prev.UserID, func() error { return r.inner.AdminUpdate(ctx, prev, next) })
}

func (r *repo) SetAttempt(ctx context.Context, prev, next *billing.Period) error {
	return r.write("set attempt", prev.UserID, func() error { return r.inner.SetAttempt(ctx, prev, next) })
}

func (r *repo) AddAll(ctx context.Context, subs []billing.Period) ([]billing.Period, error) {
	var out []billing.Period
	id := "batch"
	for i := range subs {
		r.sim.touch(subs[i].UserID)
		id += "|" + subs[i].UserID
	}
	err := r.write("add all", id, func() error {
		var err error
		out, err = r.inner.AddAll(ctx, subs)
		return err
	})
	return out, err
}

func (r *repo) DueShards() int {
	if s, ok := r.inner.(billing.ShardedRepository); ok {
		return s.DueShards()
	}
	return 1
}

func (r *repo) claimer() notice.ReminderClaimer {
	c, _ := r.inner.(notice.ReminderClaimer)
	return c
}

func (r *repo) ClaimReminder(ctx context.Context, rem notice.Reminder, at time.Time) (notice.ReminderClaim, error) {
	var c notice.ReminderClaim
	err := r.write("claim reminder", rem.UserID, func() error {
		var err error
		c, err = r.claimer().ClaimReminder(ctx, rem, at)
		return err
	})
	return c, err
}

func (r *repo) ReleaseReminder(ctx context.Context, c notice.ReminderClaim) error {
	return r.write("release reminder", c.UserID, func() error { return r.claimer().ReleaseReminder(ctx, c) })
}
