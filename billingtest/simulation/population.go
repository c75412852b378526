package simulation

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"

	"github.com/dynabill/billing"
)

// Behavior is how the scripted processor treats a user's collections.
type Behavior string

// The behaviours. Most users are BehaviorRandom; the others are rare and
// exercise one path each.
const (
	// BehaviorRandom: each attempt is declined (retryably), submitted as an
	// ACH debit or collected at once, drawn from the seed, the user, the
	// billing date and the attempt number with DeclineRate and
	// PendingRate.
	BehaviorRandom Behavior = "random"
	// BehaviorAccountClosed: every attempt is declined as not worth
	// retrying ("R02: account closed"), so the retry run leaves the record
	// alone.
	BehaviorAccountClosed Behavior = "account-closed"
	// BehaviorInsolvent: every attempt is declined retryably ("R01:
	// insufficient funds"), so the record is retried daily until the retry
	// window closes.
	BehaviorInsolvent Behavior = "insolvent"
	// BehaviorTimeoutBeforeCharge: the first attempt of the user's first
	// record times out before the processor acts (outcome unknown, nothing
	// charged); the next try with the same key is answered afresh.
	BehaviorTimeoutBeforeCharge Behavior = "timeout-before-charge"
	// BehaviorTimeoutAfterCharge: the first attempt of the user's first
	// record times out after the processor acted (outcome unknown to the
	// collector, money moved); the next try with the same key replays the
	// answer.
	BehaviorTimeoutAfterCharge Behavior = "timeout-after-charge"
)

// User is one seeded user: the plan and first record the simulation
// created, and how the processor treats them.
type User struct {
	ID string
	// Tier is the receipt_tier_name, e.g. "Plus:v2".
	Tier   string
	Term   billing.Term
	Amount billing.Amount
	// BillingWeek is the Friday billing week (1–5), 0 when billed on a
	// day of the month.
	BillingWeek int
	// AnchorDay is the day of month of the first billing date (0 for
	// Friday billing).
	AnchorDay int
	// FirstBillingDate and FirstSubscriptionID are those of the seeded
	// record.
	FirstBillingDate    time.Time
	FirstSubscriptionID string
	// PauseMonths is the pause of the seeded record (PAUSED), 0 when it is
	// SCHEDULED.
	PauseMonths int
	// Backlog says the seeded record was already more than
	// OldSubscriptionDays old when the simulation started, as after an
	// outage: the first scheduled run marks it STALE.
	Backlog  bool
	Behavior Behavior
}

// Record returns the seeded record of u.
func (u *User) Record(created time.Time) billing.Subscription {
	s := billing.Subscription{
		UserID: u.ID, BillingDate: u.FirstBillingDate, SubscriptionID: u.FirstSubscriptionID,
		Amount: u.Amount, Status: billing.StatusScheduled, BillingPeriod: billing.BillingPeriod(u.FirstBillingDate),
		Term: u.Term, AnchorDay: u.AnchorDay, BillingWeek: u.BillingWeek, ReceiptTierName: u.Tier,
		Process: billing.ProcessNotIdentified, CreatedDate: created, LastRunDate: created,
	}
	if u.PauseMonths > 0 {
		s.Status, s.PauseDurationMonths = billing.StatusPaused, u.PauseMonths
		if u.PauseMonths == 1 {
			s.UpdatedEvent = billing.EventPausePendingResume
		}
	}
	return s
}

// plan is a tier, term and price.
type plan struct {
	tier   string
	term   billing.Term
	amount billing.Amount
}

var (
	planBasic   = plan{"Basic:v1", billing.TermMonthly, billing.MustParseAmount("4.99")}
	planPlus    = plan{"Plus:v2", billing.TermMonthly, billing.MustParseAmount("9.99")}
	planYearly  = plan{"Plus:v2", billing.TermYearly, billing.MustParseAmount("39.99")}
	planPremium = plan{"Premium:v1", billing.TermYearly, billing.MustParseAmount("99.99")}
)

// population draws the users of a simulation. Each user has its own random
// stream (seed, index), so the first n users are the same whatever the
// number asked for. userID names the i-th user (nil: "user-%04d" of i+1).
func population(seed int64, n int, start time.Time, userID func(i int) string) ([]User, error) {
	if userID == nil {
		userID = func(i int) string { return fmt.Sprintf("user-%04d", i+1) }
	}
	users := make([]User, n)
	ids := make(map[string]int, n)
	ns := uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "dynabill/simulate/%d", seed))
	for i := range users {
		r := rand.New(rand.NewPCG(uint64(seed), uint64(i)))
		u := User{ID: userID(i), Behavior: BehaviorRandom}
		if u.ID == "" {
			return nil, fmt.Errorf("simulation: Options.UserID(%d) is empty", i)
		}
		if j, dup := ids[u.ID]; dup {
			return nil, fmt.Errorf("simulation: Options.UserID gives %q to users %d and %d", u.ID, j, i)
		}
		ids[u.ID] = i
		hour, minute := r.IntN(24), r.IntN(60)
		var p plan
		switch x := r.Float64(); {
		case x < 0.20: // yearly
			p = planYearly
			if r.IntN(3) == 0 {
				p = planPremium
			}
		case x < 0.35: // monthly, Friday billing
			p = planBasic
			u.BillingWeek = 1 + r.IntN(5)
		default: // monthly on a day of the month
			p = planBasic
			if r.IntN(5) < 2 {
				p = planPlus
			}
		}
		u.Tier, u.Term, u.Amount = p.tier, p.term, p.amount
		if u.BillingWeek > 0 {
			u.FirstBillingDate = billing.NthFriday(start.Year(), start.Month(), u.BillingWeek).
				Add(time.Duration(hour)*time.Hour + time.Duration(minute)*time.Minute)
		} else {
			day := 1 + r.IntN(daysIn(start))
			if r.IntN(10) == 0 { // extra weight on the month-end anchors
				day = daysIn(start) - r.IntN(3)
			}
			u.FirstBillingDate = time.Date(start.Year(), start.Month(), day, hour, minute, 0, 0, time.UTC)
			u.AnchorDay = day
		}
		switch x := r.Float64(); {
		case x < 0.05:
			u.PauseMonths = 1 + r.IntN(2)
		case x < 0.06 && u.BillingWeek == 0:
			// Billed 31 to 45 days before the start: older than the
			// stale threshold at the first run.
			d := start.AddDate(0, 0, -31-r.IntN(15))
			u.FirstBillingDate = time.Date(d.Year(), d.Month(), d.Day(), hour, minute, 0, 0, time.UTC)
			u.AnchorDay = d.Day()
			u.Backlog = true
		}
		switch x := r.Float64(); {
		case x < 0.02:
			u.Behavior = BehaviorAccountClosed
		case x < 0.03:
			u.Behavior = BehaviorInsolvent
		case x < 0.04:
			u.Behavior = BehaviorTimeoutBeforeCharge
		case x < 0.05:
			u.Behavior = BehaviorTimeoutAfterCharge
		}
		u.FirstSubscriptionID = uuid.NewSHA1(ns, fmt.Appendf(nil, "%s/%s", u.ID, u.FirstBillingDate.Format(time.RFC3339))).String()
		users[i] = u
	}
	return users, nil
}

func daysIn(t time.Time) int {
	return time.Date(t.Year(), t.Month()+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// seed writes the users' first records (and their history rows) in
// batches.
func seed(ctx context.Context, repo billing.Repository, users []User, created time.Time) error {
	const chunk = 500
	for i := 0; i < len(users); i += chunk {
		recs := make([]billing.Subscription, 0, chunk)
		for j := i; j < min(i+chunk, len(users)); j++ {
			recs = append(recs, users[j].Record(created))
		}
		if _, err := repo.AddAll(ctx, recs); err != nil {
			return fmt.Errorf("simulation: seeding users %d to %d: %w", i+1, i+len(recs), err)
		}
	}
	return nil
}
