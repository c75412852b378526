package faultsim

import (
	"context"
	"fmt"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/calendar"
	"github.com/dynabill/billing/internal/layout"
)

// populate signs the users up through Collector.Subscribe, the day
// before the start (a user whose first billing date is older than the
// stale threshold allows signed up the day before that date: the
// backlog of a host that did not run for weeks), without faults.
func (s *Sim) populate(ctx context.Context) error {
	start := s.opts.Start
	created := start.Add(-24 * time.Hour)
	s.settingUp = true
	defer func() { s.settingUp = false; s.clock.Set(start) }()
	for i := range s.opts.Users {
		u := fmt.Sprintf("u%04d", i+1)
		if s.opts.Store.Layout == LayoutSingleTable {
			acct := fmt.Sprintf("acct-%03d", i/3)
			if i%3 == 0 {
				s.accounts = append(s.accounts, acct)
			}
			u = layout.SubscriptionRef{AccountID: acct, SubscriptionID: fmt.Sprintf("sub-%04d", i+1), SKU: skus[i%3]}.UserID()
		}
		rec := s.firstRecord(u, created, start, "seed", i)
		s.freeOrTrial(&rec, created, i)
		now := created
		if rec.BillingDate.Before(created.AddDate(0, 0, -25)) {
			now = rec.BillingDate.Add(-time.Hour)
		}
		s.clock.Set(now)
		h := s.pickHost("signup", i)
		if _, err := h.col.Subscribe(ctx, subscribeRequest(&rec, "signup-"+u)); err != nil {
			return fmt.Errorf("seeding %s: %w", u, err)
		}
		s.addUser(u)
	}
	return nil
}

// subscribeRequest is the request that signs rec's user up for a
// subscription whose first period is rec.
func subscribeRequest(rec *billing.Period, key string) billing.SubscribeRequest {
	req := billing.SubscribeRequest{RequestKey: key, UserID: rec.UserID, Tier: rec.ReceiptTierName, Amount: rec.Amount,
		Term: rec.Term, FirstBillingDate: rec.BillingDate}
	if rec.BillingWeek > 0 {
		req.FridayBilling = true
	}
	if rec.Status == billing.StatusPaused {
		req.PauseMonths = rec.PauseDurationMonths
	}
	if rec.IsTrial() {
		req.TrialEnd = rec.TrialEnd
	}
	return req
}

// trialDays is the length of the trials users sign up with: from a
// Friday, it ends on a Friday (Friday billing needs that).
const trialDays = 14

// freeOrTrial makes some signups a free tier (zero amount) and some, not
// paused and not in the backlog, a trial of trialDays before their plan.
func (s *Sim) freeOrTrial(rec *billing.Period, created time.Time, i int) {
	seed := s.opts.Seed
	switch x := draw(seed, "free or trial", i); {
	case x < 0.06:
		rec.ReceiptTierName, rec.Amount = "Free:v1", 0
	case x < 0.16 && rec.Status == billing.StatusScheduled && !rec.BillingDate.Before(created.AddDate(0, 0, -25)):
		rec.TrialEnd, rec.TrialAmount = rec.BillingDate.AddDate(0, 0, trialDays), rec.Amount
		s.trialEnds[rec.UserID] = rec.TrialEnd
	}
}

// skus are the SKUs of single-table accounts.
var skus = []string{"STREAM", "MUSIC", "NEWS", "GAMES", "BOOKS", "CLOUD"}

// firstRecord draws the first record of a new subscription of user u,
// billed around from.
func (s *Sim) firstRecord(u string, created, from time.Time, parts ...any) billing.Period {
	seed := s.opts.Seed
	p := func(n int, what string) int { return pick(seed, n, append([]any{what}, parts...)...) }
	hour, minute := p(24, "hour"), p(60, "minute")
	rec := billing.Period{UserID: u, Status: billing.StatusScheduled, Process: billing.ProcessNotIdentified,
		Term: billing.TermMonthly, ReceiptTierName: "Plus:v2", Amount: billing.MustParseAmount("9.99"),
		CreatedDate: created, LastRunDate: created}
	switch x := draw(seed, append([]any{"plan"}, parts...)...); {
	case x < 0.12:
		rec.Term, rec.Amount = billing.TermYearly, billing.MustParseAmount("99.99")
	case x < 0.25:
		rec.BillingWeek = 1 + p(4, "week")
		rec.ReceiptTierName, rec.Amount = "Basic:v1", billing.MustParseAmount("4.99")
	}
	offset := p(50, "offset") - 20 // days from from: -20 .. 29
	if draw(seed, append([]any{"backlog"}, parts...)...) < 0.04 {
		offset = -31 - p(10, "backlog days")
	}
	d := from.AddDate(0, 0, offset)
	if rec.BillingWeek > 0 {
		// The first Friday on or after d (not a fifth one), so that the
		// date stays near d: the n-th Friday of d's month could be four
		// weeks before it, beyond what a single table's walk catches up
		// on (layout.DefaultCatchUpDays) for a backlog user.
		f := time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, time.UTC)
		for f.Weekday() != time.Friday || calendar.FridayWeek(f) == 5 {
			f = f.AddDate(0, 0, 1)
		}
		rec.BillingWeek = calendar.FridayWeek(f)
		rec.BillingDate = f.Add(time.Duration(hour)*time.Hour + time.Duration(minute)*time.Minute)
	} else {
		rec.BillingDate = time.Date(d.Year(), d.Month(), d.Day(), hour, minute, 0, 0, time.UTC)
		rec.AnchorDay = d.Day()
	}
	rec.BillingPeriod = billing.BillingPeriod(rec.BillingDate)
	rec.SubscriptionID = nextID(u+"|first", rec.BillingDate)
	if draw(seed, append([]any{"paused"}, parts...)...) < 0.08 {
		rec.Status, rec.PauseDurationMonths = billing.StatusPaused, 1+p(2, "pause months")
		if rec.PauseDurationMonths == 1 {
			rec.UpdatedEvent = billing.UpdatedPausePendingResume
		}
	}
	return rec
}
