package faultsim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/layout"
)

// classify names an operation's outcome for the report.
func classify(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, errStoreBefore), errors.Is(err, errStoreAfter), errors.Is(err, billing.ErrThrottled):
		return "store fault"
	case errors.Is(err, billing.ErrAttemptInFlight):
		return "attempt in flight"
	case errors.Is(err, billing.ErrAlreadyLocked):
		return "locked"
	case errors.Is(err, billing.ErrLeaseLost):
		return "lease lost"
	case errors.Is(err, billing.ErrRateLimited):
		return "rate limited"
	case errors.Is(err, billing.ErrNotCollectible):
		return "not collectible"
	case errors.Is(err, billing.ErrDateMove):
		return "date move refused"
	case errors.Is(err, billing.ErrOpenSubscription):
		return "open subscription"
	case errors.Is(err, billing.ErrSettlementEarly):
		return "settlement early"
	case errors.Is(err, billing.ErrTransactionMismatch):
		return "transaction mismatch"
	case errors.Is(err, billing.ErrAlreadyExists):
		return "already exists"
	case errors.Is(err, billing.ErrConflict):
		return "conflict"
	case errors.Is(err, billing.ErrNotFound):
		return "not found"
	case errors.Is(err, billing.ErrIllegalTransition):
		return "illegal transition"
	case errors.Is(err, errTimeout):
		return "processor timeout"
	case strings.Contains(err.Error(), "lock table"), strings.Contains(err.Error(), "after the lock write applied"):
		return "lock fault"
	}
	msg := err.Error()
	if len(msg) > 80 {
		msg = msg[:80]
	}
	return "other: " + msg
}

// retriable reports whether an operation that failed with err may succeed
// when tried again later.
func retriable(err error) bool {
	switch classify(err) {
	case "store fault", "attempt in flight", "locked", "lease lost", "rate limited", "conflict", "processor timeout", "lock fault":
		return true
	}
	return false
}

// opKinds are the operations of hosts and other writers, with their
// weights.
var opKinds = []struct {
	name   string
	weight int
}{
	{"waive", 6}, {"cancel", 2}, {"pause", 6}, {"resume", 5}, {"change date", 7}, {"change tier", 7},
	{"reactivate", 5}, {"manual repayment", 5}, {"webhook", 12}, {"collect by id", 5},
	{"upgrade", 6}, {"new subscription", 6}, {"cancel at period end", 4}, {"reprice", 4},
}

// scheduleOp schedules operation i of day d at t.
func (s *Sim) scheduleOp(t time.Time, d, i int) {
	total := 0
	for _, k := range opKinds {
		total += k.weight
	}
	n := pick(s.opts.Seed, total, "op kind", d, i)
	kind := opKinds[0].name
	for _, k := range opKinds {
		if n < k.weight {
			kind = k.name
			break
		}
		n -= k.weight
	}
	if kind == "upgrade" && (!s.opts.Store.AddAll || s.opts.without(Upgrades)) ||
		kind == "reprice" && (!s.opts.Store.AddAll || s.opts.without(Reprices)) ||
		kind == "cancel at period end" && s.opts.without(ComeBacks) {
		kind = "webhook"
	}
	h := s.pickHost("op", d, i)
	s.at(t, h.name, kind, func(ctx context.Context) {
		s.res.Ops[kind+": "+s.doOp(ctx, h, kind, d, i)]++
	})
}

// find returns the first user, from a drawn offset, whose records have
// a record ok accepts, with that record; ok is given the user's records
// ascending by billing date, as the checks after the last step that wrote
// them read them (what the store holds now: every write marks its user
// to be read again after the step).
func (s *Sim) find(ctx context.Context, tries int, ok func(recs []billing.Period) (billing.Period, bool), parts ...any) (string, billing.Period, bool) {
	if len(s.users) == 0 {
		return "", billing.Period{}, false
	}
	off := pick(s.opts.Seed, len(s.users), append([]any{"find"}, parts...)...)
	for j := 0; j < min(tries, len(s.users)); j++ {
		u := s.users[(off+j)%len(s.users)]
		recs := s.records[u]
		if len(recs) == 0 || s.reservedUser(u) {
			continue
		}
		if r, good := ok(recs); good {
			return u, r, true
		}
	}
	return "", billing.Period{}, false
}

// withStatus accepts the latest record in one of the statuses.
func withStatus(pred func(r *billing.Period) bool, st ...billing.Status) func([]billing.Period) (billing.Period, bool) {
	return func(recs []billing.Period) (billing.Period, bool) {
		for i := len(recs) - 1; i >= 0; i-- {
			for _, x := range st {
				if recs[i].Status == x && (pred == nil || pred(&recs[i])) {
					return recs[i], true
				}
			}
		}
		return billing.Period{}, false
	}
}

// doOp runs one operation and names its outcome.
func (s *Sim) doOp(ctx context.Context, h *host, kind string, d, i int) string {
	seed, now := s.opts.Seed, s.clock.Now()
	const tries = 25
	notInFlight := func(r *billing.Period) bool { return !r.InFlight() }
	due := func(r *billing.Period) bool { return r.DueAt(now) }
	var err error
	switch kind {
	case "waive":
		_, r, ok := s.find(ctx, tries, withStatus(nil, billing.StatusError, billing.StatusScheduled), kind, d, i)
		if !ok {
			return "no target"
		}
		_, err = h.col.Periods().WaiveByID(ctx, r.SubscriptionID)
	case "cancel":
		_, r, ok := s.find(ctx, tries, withStatus(nil, billing.StatusScheduled, billing.StatusPaused, billing.StatusError), kind, d, i)
		if !ok {
			return "no target"
		}
		_, err = h.col.Periods().Cancel(ctx, r.SubscriptionID)
	case "pause":
		_, r, ok := s.find(ctx, tries, withStatus(nil, billing.StatusScheduled, billing.StatusPaused), kind, d, i)
		if !ok {
			return "no target"
		}
		_, err = h.col.Periods().Pause(ctx, r.SubscriptionID, 1+pick(seed, 3, "months", d, i))
	case "resume":
		_, r, ok := s.find(ctx, tries, withStatus(nil, billing.StatusPaused), kind, d, i)
		if !ok {
			return "no target"
		}
		_, err = h.col.Periods().Resume(ctx, r.SubscriptionID)
	case "change date":
		u, r, ok := s.find(ctx, tries, withStatus(nil, billing.StatusScheduled, billing.StatusError, billing.StatusPaused), kind, d, i)
		if !ok {
			return "no target"
		}
		shift := time.Duration(pick(seed, 21, "shift", d, i)-10) * 24 * time.Hour
		if shift == 0 {
			shift = 36 * time.Hour
		}
		if _, err = h.col.Periods().Move(ctx, r.SubscriptionID, r.BillingDate.Add(shift)); err == nil {
			s.trialMoved(u, &r, r.BillingDate.Add(shift))
		}
	case "change tier":
		_, r, ok := s.find(ctx, tries, withStatus(nil, billing.StatusScheduled), kind, d, i)
		if !ok {
			return "no target"
		}
		if draw(seed, "downgrade", d, i) < 0.4 {
			_, err = h.col.Periods().ChangeTier(ctx, r.SubscriptionID, "Basic:v1", billing.MustParseAmount("4.99"), true)
		} else {
			_, err = h.col.Periods().ChangeTier(ctx, r.SubscriptionID, "Premium:v1", billing.MustParseAmount("14.99"), false)
		}
	case "reactivate":
		u, _, ok := s.find(ctx, tries, func(recs []billing.Period) (billing.Period, bool) {
			for _, r := range recs {
				if !r.Status.IsTerminal() {
					return billing.Period{}, false
				}
			}
			return recs[len(recs)-1], true
		}, kind, d, i)
		if !ok {
			return "no target"
		}
		date := now.AddDate(0, 0, pick(seed, 10, "reactivate in", d, i)).Truncate(time.Hour)
		if s.opts.without(EarlyReactivations) {
			date = latestBilled(s.records[u]).AddDate(0, 0, 1+pick(seed, 10, "reactivate in", d, i))
		}
		var rec billing.Period
		if rec, err = h.col.Reactivate(ctx, u, date); err == nil {
			s.trialReactivated(u, &rec)
		}
	case "manual repayment":
		var pred func(*billing.Period) bool
		if s.opts.without(FinalRepayments) {
			pred = func(r *billing.Period) bool { return !r.NoRetry }
		}
		_, r, ok := s.find(ctx, tries, withStatus(pred, billing.StatusError), kind, d, i)
		if !ok {
			return "no target"
		}
		_, err = h.col.Periods().Repay(ctx, r.SubscriptionID)
	case "webhook":
		u, _, ok := s.find(ctx, tries, withStatus(due, billing.StatusScheduled, billing.StatusError), kind, d, i)
		if !ok {
			return "no target"
		}
		_, err = h.col.CollectUser(ctx, u, billing.ProcessWebhook)
	case "collect by id":
		_, r, ok := s.find(ctx, tries, withStatus(due, billing.StatusScheduled), kind, d, i)
		if !ok {
			return "no target"
		}
		_, err = h.col.Periods().Collect(ctx, r.SubscriptionID)
	case "upgrade":
		return s.upgrade(ctx, h, d, i, notInFlight)
	case "new subscription":
		return s.newSubscription(ctx, h, d, i)
	case "cancel at period end":
		return s.cancelAtPeriodEnd(ctx, h, d, i)
	case "reprice":
		return s.reprice(ctx, h, d, i)
	default:
		panic("faultsim: unknown op " + kind)
	}
	return classify(err)
}

// webhookInFlight collects a user whose record is in flight, soon after
// the day's runs: its request may still be running at the processor.
func (s *Sim) webhookInFlight(ctx context.Context, d, i int) {
	u, _, ok := s.find(ctx, len(s.users), withStatus(func(r *billing.Period) bool { return r.InFlight() },
		billing.StatusScheduled, billing.StatusError), "inflight", d, i)
	if !ok {
		s.res.Ops["webhook of a user in flight: no target"]++
		return
	}
	h := s.pickHost("inflight webhook", d, i)
	_, err := h.col.CollectUser(ctx, u, billing.ProcessWebhook)
	s.res.Ops["webhook of a user in flight: "+classify(err)]++
}

// upgrade moves one to three users' SCHEDULED records to a higher tier
// with Repository.AddAll, as the legacy upgrade processing did: the
// record is written again CANCELLED (the collision rule moves it an hour
// on) beside a new SCHEDULED record of the new tier on its billing date.
// With an Interleaver, another host collects the first user right before
// AddAll's first write.
func (s *Sim) upgrade(ctx context.Context, h *host, d, i int, notInFlight func(*billing.Period) bool) string {
	seed, now := s.opts.Seed, s.clock.Now()
	pred := notInFlight
	if s.opts.Interleave != nil {
		// A due record, so that the collection in between charges it.
		pred = func(r *billing.Period) bool { return !r.InFlight() && r.DueAt(now) }
	}
	var batch []billing.Period
	var users []string
	for j := range 1 + pick(seed, 3, "upgrade users", d, i) {
		u, r, ok := s.find(ctx, 25, withStatus(pred, billing.StatusScheduled), "upgrade", d, i, j)
		if !ok && s.opts.Interleave != nil && j == 0 {
			u, r, ok = s.find(ctx, 25, withStatus(notInFlight, billing.StatusScheduled), "upgrade any", d, i, j)
		}
		if !ok || contains(users, u) {
			continue
		}
		users = append(users, u)
		// The batch bills the new tier on the record's date: a trial it
		// replaces is the host's own to end.
		delete(s.trialEnds, u)
		old := r
		old.Status, old.CompletionDate, old.LastRunDate = billing.StatusCancelled, now, now
		up := billing.Period{UserID: u, BillingDate: r.BillingDate, SubscriptionID: nextID(r.SubscriptionID+"|upgrade", now),
			Amount: billing.MustParseAmount("19.99"), Status: billing.StatusScheduled, BillingPeriod: r.BillingPeriod,
			Process: billing.ProcessNotIdentified, Term: r.Term, AnchorDay: r.EffectiveAnchorDay(), BillingWeek: r.BillingWeek,
			Interval: r.Interval, ReceiptTierName: "Premium:v2", CreatedDate: now, LastRunDate: now.Add(time.Microsecond)}
		batch = append(batch, old, up)
	}
	if len(batch) == 0 {
		return "no target"
	}
	if il := s.opts.Interleave; il != nil {
		other := s.hosts[(indexOf(s.hosts, h)+1)%len(s.hosts)]
		il.arm(func(ctx context.Context) {
			s.env.faults.add("another writer: a collection between AddAll's read and its write")
			_, err := other.col.CollectUser(ctx, users[0], billing.ProcessWebhook)
			s.res.Ops["collection inside AddAll: "+classify(err)]++
		})
		defer il.disarm()
	}
	_, err := h.repo.AddAll(ctx, batch)
	return classify(err)
}

// newSubscription signs a new user up through Collector.Subscribe (a
// new subscription of an account, on the single table), sometimes twice
// with the same request key, as a redelivered request: the repeat must
// answer the first period. Or (legacy, sometimes) it adds a second
// subscription with Repository.Add for a user who has one open, which
// the store must refuse.
func (s *Sim) newSubscription(ctx context.Context, h *host, d, i int) string {
	seed, now := s.opts.Seed, s.clock.Now()
	var u string
	switch {
	case s.opts.Store.Layout == LayoutSingleTable:
		acct := s.accounts[pick(seed, len(s.accounts), "account", d, i)]
		u = layout.SubscriptionRef{AccountID: acct, SubscriptionID: fmt.Sprintf("sub-n%03dx%d", d, i), SKU: skus[pick(seed, len(skus), "sku", d, i)]}.UserID()
	case !s.opts.without(SecondSubscription) && draw(seed, "second subscription", d, i) < 0.25:
		var ok bool
		u, _, ok = s.find(ctx, 25, withStatus(nil, billing.StatusScheduled, billing.StatusPaused), "second", d, i)
		if !ok {
			return "no target"
		}
	default:
		u = fmt.Sprintf("n%03dx%d", d, i)
	}
	rec := s.firstRecord(u, now, now.AddDate(0, 0, 20), "new", d, i)
	if rec.BillingDate.Before(now) {
		rec.BillingDate = now.Add(time.Hour).Truncate(time.Hour)
		rec.AnchorDay, rec.BillingWeek = rec.BillingDate.Day(), 0
		rec.BillingPeriod = billing.BillingPeriod(rec.BillingDate)
	}
	if s.userSet[u] {
		rec.SubscriptionID = nextID(u+"|new", now)
		return "user with an open subscription: " + classify(h.repo.Add(ctx, &rec))
	}
	s.addUser(u)
	req := subscribeRequest(&rec, fmt.Sprintf("signup-%d-%d", d, i))
	first, err := h.col.Subscribe(ctx, req)
	if err != nil || draw(seed, "subscribe again", d, i) >= 0.2 {
		return "new user: " + classify(err)
	}
	again, err := s.pickHost("subscribe again", d, i).col.Subscribe(ctx, req)
	s.res.Checks[invRequestKey]++
	if err == nil && (!again.Repeated || again.Subscription.SubscriptionID != first.Subscription.SubscriptionID) {
		s.fail(invRequestKey, []string{fmt.Sprintf("user %s: Subscribe repeated with request key %s answered %s (repeated %v), the first call %s",
			u, req.RequestKey, desc(&again.Subscription), again.Repeated, desc(&first.Subscription))})
	}
	return "new user, subscribed twice: " + classify(err)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func indexOf(hosts []*host, h *host) int {
	for i, x := range hosts {
		if x == h {
			return i
		}
	}
	return 0
}

// latestBilled is the latest billing date of recs (ascending).
func latestBilled(recs []billing.Period) time.Time {
	var t time.Time
	for i := range recs {
		if recs[i].BillingDate.After(t) {
			t = recs[i].BillingDate
		}
	}
	return t
}
