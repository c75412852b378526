package simulation

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/calendar"
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

// User is one seeded user: the plan and first period the simulation
// started, and how the processor treats them. Every user but a Legacy one
// signs up through [billing.Collector.Subscribe] with [User.SubscribeRequest]
// (or [Options.SignUp]).
type User struct {
	ID string
	// RequestKey is the key of the user's sign-up request
	// (billing.SubscribeRequest.RequestKey), e.g. the host's order ID.
	RequestKey string
	// Tier is the receipt_tier_name, e.g. "Plus:v2".
	Tier   string
	Term   billing.Term
	Amount billing.Amount
	// BillingWeek is the Friday billing week (1–5; 5 is the last Friday
	// of a month with four), 0 when billed on a day of the month.
	BillingWeek int
	// AnchorDay is the day of month of the first billing date (0 for
	// Friday billing).
	AnchorDay int
	// FirstBillingDate is the billing date of the first period.
	FirstBillingDate time.Time
	// FirstSubscriptionID is the subscription ID of the first period:
	// billing.FirstPeriodID(ID, RequestKey), what Subscribe gives it
	// (a Legacy user's record has it too).
	FirstSubscriptionID string
	// PauseMonths is the pause the user starts with (the first period is
	// PAUSED), 0 when the first period is SCHEDULED.
	PauseMonths int
	// Legacy says the user's first period was written by another service
	// (the host's older billing system): [Run] writes [User.LegacyRecord]
	// with Repository.AddAll instead of signing the user up, because
	// Subscribe refuses it on purpose. It is a Backlog record, or billed on
	// the fifth Friday (BillingWeek 5) from a first month with only four,
	// which Subscribe would bill on the fourth (it takes the week from
	// the date). Never set with Options.NoLegacy.
	Legacy bool
	// Backlog says the user's Legacy first period is more than 30 days
	// old when the simulation starts (billed before an outage; Subscribe
	// refuses a date that old): the first scheduled run marks it STALE.
	Backlog  bool
	Behavior Behavior
}

// SubscribeRequest returns the request that starts u's subscription: its
// plan (tier, term, amount, Friday billing), first billing date and pause,
// under u.RequestKey. A Legacy user has none: Subscribe refuses it.
func (u *User) SubscribeRequest() billing.SubscribeRequest {
	return billing.SubscribeRequest{
		RequestKey: u.RequestKey, UserID: u.ID, Tier: u.Tier, Amount: u.Amount, Term: u.Term,
		FirstBillingDate: u.FirstBillingDate, AnchorDay: u.AnchorDay, FridayBilling: u.BillingWeek > 0,
		PauseMonths: u.PauseMonths,
	}
}

// LegacyRecord returns the first period of a Legacy user as another
// service wrote it (process NOT_IDENTIFIED; SCHEDULED, or PAUSED for a
// pause), created at created.
func (u *User) LegacyRecord(created time.Time) billing.Period {
	s := billing.Period{
		UserID: u.ID, BillingDate: u.FirstBillingDate, SubscriptionID: u.FirstSubscriptionID,
		Amount: u.Amount, Status: billing.StatusScheduled, BillingPeriod: billing.BillingPeriod(u.FirstBillingDate),
		Term: u.Term, AnchorDay: u.AnchorDay, BillingWeek: u.BillingWeek, ReceiptTierName: u.Tier,
		Process: billing.ProcessNotIdentified, CreatedDate: created, LastRunDate: created,
	}
	if u.PauseMonths > 0 {
		s.Status, s.PauseDurationMonths = billing.StatusPaused, u.PauseMonths
		if u.PauseMonths == 1 {
			s.UpdatedEvent = billing.UpdatedPausePendingResume
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

// The plans of the population: Plus:v2 is sold monthly and yearly, each
// plan at its own price.
var (
	planBasic   = plan{"Basic:v1", billing.TermMonthly, billing.MustParseAmount("4.99")}
	planPlus    = plan{"Plus:v2", billing.TermMonthly, billing.MustParseAmount("9.99")}
	planYearly  = plan{"Plus:v2", billing.TermYearly, billing.MustParseAmount("39.99")}
	planPremium = plan{"Premium:v1", billing.TermYearly, billing.MustParseAmount("99.99")}
)

// Prices returns the price list of the population's plans, for
// billing.Config.Prices: with it, a SubscribeRequest may leave Amount
// zero, and the tier on the request's term is priced ("Plus:v2" monthly,
// "Plus:v2/YEARLY").
func Prices() billing.PriceListMap {
	m := billing.PriceListMap{}
	for _, p := range []plan{planBasic, planPlus, planYearly, planPremium} {
		m[billing.PricePlan{Tier: p.tier, Term: p.term, Interval: 1}.String()] = p.amount
	}
	return m
}

// population draws the users of a simulation. Each user has its own random
// stream (seed, index), so the first n users are the same whatever the
// number asked for. userID names the i-th user (nil: "user-%04d" of i+1).
// Without legacy records, the users who would have one keep the rest of
// their draws: the backlog users their first billing date in the first
// month, the fifth-Friday users of a month with four the fourth Friday.
func population(seed int64, n int, start time.Time, userID func(i int) string, legacy bool) ([]User, error) {
	if userID == nil {
		userID = func(i int) string { return fmt.Sprintf("user-%04d", i+1) }
	}
	users := make([]User, n)
	ids := make(map[string]int, n)
	for i := range users {
		r := rand.New(rand.NewPCG(uint64(seed), uint64(i)))
		u := User{ID: userID(i), RequestKey: fmt.Sprintf("order-%d-%d", seed, i+1), Behavior: BehaviorRandom}
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
			u.FirstBillingDate = calendar.NthFriday(start.Year(), start.Month(), u.BillingWeek).
				Add(time.Duration(hour)*time.Hour + time.Duration(minute)*time.Minute)
			if w := calendar.FridayWeek(u.FirstBillingDate); w != u.BillingWeek { // no fifth Friday
				if legacy {
					u.Legacy = true
				} else {
					u.BillingWeek = w
				}
			}
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
			if legacy {
				u.FirstBillingDate = time.Date(d.Year(), d.Month(), d.Day(), hour, minute, 0, 0, time.UTC)
				u.AnchorDay = d.Day()
				u.Legacy, u.Backlog = true, true
			}
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
		u.FirstSubscriptionID = billing.FirstPeriodID(u.ID, u.RequestKey)
		users[i] = u
	}
	return users, nil
}

func daysIn(t time.Time) int {
	return time.Date(t.Year(), t.Month()+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// signUp starts the users' subscriptions: the Legacy users' records,
// written with AddAll as another service left them, then one SignUp per
// other user, in order; each must have written the user's first period.
func signUp(ctx context.Context, repo billing.Repository, users []User, created time.Time, signUp func(context.Context, User) error) error {
	const chunk = 500
	var legacy []billing.Period
	for i := range users {
		if users[i].Legacy {
			legacy = append(legacy, users[i].LegacyRecord(created))
		}
	}
	for i := 0; i < len(legacy); i += chunk {
		if _, err := repo.AddAll(ctx, legacy[i:min(i+chunk, len(legacy))]); err != nil {
			return fmt.Errorf("simulation: writing the legacy records: %w", err)
		}
	}
	for i := range users {
		u := &users[i]
		if u.Legacy {
			continue
		}
		if err := signUp(ctx, *u); err != nil {
			return fmt.Errorf("simulation: signing up %s: %w", u.ID, err)
		}
		rec, err := repo.Get(ctx, u.ID, u.FirstBillingDate)
		if err != nil && !errors.Is(err, billing.ErrNotFound) {
			return fmt.Errorf("simulation: reading the first period of %s: %w", u.ID, err)
		}
		if err != nil || rec.SubscriptionID != u.FirstSubscriptionID {
			return fmt.Errorf("simulation: signing up %s wrote no period %s billed %s: Options.SignUp must subscribe with the key and date of User.SubscribeRequest",
				u.ID, u.FirstSubscriptionID, u.FirstBillingDate.Format(time.RFC3339))
		}
	}
	return nil
}
