package billingtest

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/memory"
)

// subscribeCases check [billing.Collector.Subscribe] on the store: what it
// writes, that a retried request writes nothing, and that it refuses what
// it must, writing nothing.
func (s *repoSuite) subscribeCases() []repoCase {
	ids := s.ids
	now := time.Date(2024, 1, 31, 16, 0, 0, 0, time.UTC)
	collector := func(t *testing.T, e *repoEnv) (*billing.Collector, *Clock) {
		t.Helper()
		clock := NewClock(now)
		c, err := billing.NewCollector(billing.Config{Repository: e.repo, History: e.hist, Locker: NewLocker(clock, time.Minute),
			Provider: NewProvider(ProviderOptions{Clock: clock}), Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		return c, clock
	}
	request := func(user string) billing.SubscribeRequest {
		return billing.SubscribeRequest{RequestKey: "order-1", UserID: user, Tier: "Plus:v2", Amount: billing.MustParseAmount("4.99")}
	}
	return []repoCase{
		{"WritesTheFirstPeriod", func(t *testing.T) {
			e := s.env(t, memory.Options{})
			c, clock := collector(t, e)
			u := ids.user()
			req := request(u)
			req.FirstBillingDate, req.AnchorDay = time.Date(2024, 2, 29, 12, 0, 0, 0, time.UTC), 31
			got, err := c.Subscribe(e.ctx(), req)
			if err != nil || got.Repeated {
				t.Fatalf("Subscribe = %+v, %v", got, err)
			}
			s := got.Subscription
			want := billing.Period{UserID: u, SubscriptionID: billing.FirstPeriodID(u, "order-1"),
				BillingDate: req.FirstBillingDate, BillingPeriod: "02/2024", Amount: req.Amount, Status: billing.StatusScheduled,
				Term: billing.TermMonthly, AnchorDay: 31, ReceiptTierName: "Plus:v2", Process: billing.ProcessSubscribe,
				UpdatedEvent: billing.UpdatedUserSubscribed, CreatedDate: clock.Now(), LastRunDate: clock.Now()}
			if d := diffStored(&s, &want); d != "" {
				t.Fatalf("the first period differs: %s", d)
			}
			e.requireStored(want)
			e.requireHistoryCount(u, 1)
		}},
		{"FifthFridayFromAFourFridayMonth", func(t *testing.T) {
			e := s.env(t, memory.Options{})
			c, _ := collector(t, e)
			req := request(ids.user())
			// January 2024 has four Fridays: the 26th is its last.
			req.FridayBilling, req.FridayWeek = true, 5
			req.FirstBillingDate = time.Date(2024, 1, 26, 10, 0, 0, 0, time.UTC)
			got, err := c.Subscribe(e.ctx(), req)
			if err != nil {
				t.Fatal(err)
			}
			if got.Subscription.BillingWeek != 5 {
				t.Fatalf("billing week %d, want 5", got.Subscription.BillingWeek)
			}
			next, err := got.Subscription.Schedule().Next(got.Subscription.BillingDate)
			if err != nil || !next.Equal(time.Date(2024, 2, 23, 10, 0, 0, 0, time.UTC)) {
				t.Fatalf("next billing date %v, %v; want Feb 23, the last Friday", next, err)
			}
			e.requireStored(got.Subscription)
		}},
		{"RetriedRequestWritesNothing", func(t *testing.T) {
			e := s.env(t, memory.Options{})
			c, clock := collector(t, e)
			u := ids.user()
			first, err := c.Subscribe(e.ctx(), request(u))
			if err != nil {
				t.Fatal(err)
			}
			clock.Advance(time.Minute)
			var wg sync.WaitGroup
			errs := make(chan error, 9)
			for range 9 {
				wg.Go(func() {
					got, err := c.Subscribe(e.ctx(), request(u))
					switch {
					case errors.Is(err, billing.ErrAlreadyLocked):
					case err != nil:
						errs <- err
					case !got.Repeated || got.Subscription.SubscriptionID != first.Subscription.SubscriptionID:
						errs <- errors.New("a retry created another subscription: " + got.Subscription.SubscriptionID)
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			recs, err := e.repo.ListByUser(e.ctx(), u)
			if err != nil || len(recs) != 1 {
				t.Fatalf("ListByUser after retries = %d records, %v; want 1", len(recs), err)
			}
			e.requireHistoryCount(u, 1)
		}},
		{"RefusesASecondOpenSubscription", func(t *testing.T) {
			e := s.env(t, memory.Options{})
			c, _ := collector(t, e)
			u := ids.user()
			first, err := c.Subscribe(e.ctx(), request(u))
			if err != nil {
				t.Fatal(err)
			}
			other := request(u)
			other.RequestKey = "order-2"
			_, err = c.Subscribe(e.ctx(), other)
			var oe *billing.OpenSubscriptionError
			if !errors.As(err, &oe) || oe.Status != billing.StatusScheduled {
				t.Fatalf("second subscription: %v, want an *OpenSubscriptionError naming the SCHEDULED period", err)
			}
			e.requireHistoryCount(u, 1)
			// Once it has ended, the user may subscribe again.
			if _, err := c.Periods().Cancel(e.ctx(), first.Subscription.SubscriptionID); err != nil {
				t.Fatal(err)
			}
			other.FirstBillingDate = now.Add(time.Hour)
			again, err := c.Subscribe(e.ctx(), other)
			if err != nil || again.Repeated {
				t.Fatalf("subscribing after a cancel = %+v, %v", again, err)
			}
		}},
		{"RefusesEveryInvalidField", func(t *testing.T) {
			e := s.env(t, memory.Options{})
			c, _ := collector(t, e)
			u := ids.user()
			friday := time.Date(2024, 2, 9, 15, 0, 0, 0, time.UTC) // the second Friday
			for _, tc := range []struct {
				name  string
				edit  func(*billing.SubscribeRequest)
				field string
				err   error
			}{
				{"no request key", func(r *billing.SubscribeRequest) { r.RequestKey = "" }, "RequestKey", billing.ErrInvalidRequest},
				{"long request key", func(r *billing.SubscribeRequest) { r.RequestKey = strings.Repeat("k", 257) }, "RequestKey", billing.ErrInvalidRequest},
				{"request key not UTF-8", func(r *billing.SubscribeRequest) { r.RequestKey = "\xff" }, "RequestKey", billing.ErrInvalidRequest},
				{"no user", func(r *billing.SubscribeRequest) { r.UserID = "" }, "UserID", billing.ErrInvalidRequest},
				{"long user", func(r *billing.SubscribeRequest) { r.UserID = strings.Repeat("u", 1025) }, "UserID", billing.ErrInvalidRequest},
				{"no tier", func(r *billing.SubscribeRequest) { r.Tier = "" }, "tier", billing.ErrUnknownTier},
				{"no amount", func(r *billing.SubscribeRequest) { r.Amount = 0 }, "amount", billing.ErrInvalidAmount},
				{"negative amount", func(r *billing.SubscribeRequest) { r.Amount = -1 }, "amount", billing.ErrInvalidAmount},
				{"amount over the largest charge", func(r *billing.SubscribeRequest) { r.Amount = billing.DefaultMaxCharge + 1 }, "amount", billing.ErrInvalidAmount},
				{"unknown term", func(r *billing.SubscribeRequest) { r.Term = "DAILY" }, "Term", billing.ErrInvalidTerm},
				{"negative interval", func(r *billing.SubscribeRequest) { r.Interval = -1 }, "Interval", billing.ErrInvalidRequest},
				{"interval too long", func(r *billing.SubscribeRequest) { r.Interval = billing.MaxInterval + 1 }, "Interval", billing.ErrInvalidRequest},
				{"anchor day 32", func(r *billing.SubscribeRequest) { r.AnchorDay = 32 }, "AnchorDay", billing.ErrInvalidRequest},
				{"anchor day of a weekly term", func(r *billing.SubscribeRequest) { r.Term, r.AnchorDay = billing.TermWeekly, 5 }, "AnchorDay", billing.ErrInvalidRequest},
				{"pause of 121 months", func(r *billing.SubscribeRequest) { r.PauseMonths = 121 }, "PauseMonths", billing.ErrInvalidRequest},
				{"negative pause", func(r *billing.SubscribeRequest) { r.PauseMonths = -1 }, "PauseMonths", billing.ErrInvalidRequest},
				{"first date in 1990", func(r *billing.SubscribeRequest) { r.FirstBillingDate = time.Date(1990, 1, 1, 0, 0, 0, 0, time.UTC) }, "FirstBillingDate", billing.ErrInvalidDate},
				{"first date four years ahead", func(r *billing.SubscribeRequest) { r.FirstBillingDate = now.AddDate(4, 0, 0) }, "FirstBillingDate", billing.ErrInvalidDate},
				{"first date in year 0", func(r *billing.SubscribeRequest) { r.FirstBillingDate = time.Date(0, 3, 1, 0, 0, 0, 0, time.UTC) }, "FirstBillingDate", billing.ErrInvalidDate},
				{"Friday billing from a Thursday", func(r *billing.SubscribeRequest) {
					r.FridayBilling, r.FirstBillingDate = true, friday.AddDate(0, 0, -1)
				}, "FirstBillingDate", billing.ErrInvalidRequest},
				{"Friday billing on a yearly term", func(r *billing.SubscribeRequest) {
					r.FridayBilling, r.FirstBillingDate, r.Term = true, friday, billing.TermYearly
				}, "FridayBilling", billing.ErrInvalidRequest},
				{"Friday week 6", func(r *billing.SubscribeRequest) { r.FridayBilling, r.FirstBillingDate, r.FridayWeek = true, friday, 6 }, "FridayWeek", billing.ErrInvalidRequest},
				{"Friday week without Friday billing", func(r *billing.SubscribeRequest) { r.FridayWeek = 2 }, "FridayWeek", billing.ErrInvalidRequest},
				{"Friday week other than the first date's", func(r *billing.SubscribeRequest) {
					r.FridayBilling, r.FirstBillingDate, r.FridayWeek = true, friday, 3
				}, "FridayWeek", billing.ErrInvalidRequest},
			} {
				req := request(u)
				tc.edit(&req)
				_, err := c.Subscribe(e.ctx(), req)
				var fe *billing.FieldError
				if !errors.Is(err, tc.err) || !errors.As(err, &fe) || fe.Field != tc.field {
					t.Errorf("%s: %v, want a *FieldError on %s wrapping %v", tc.name, err, tc.field, tc.err)
				}
			}
			recs, err := e.repo.ListByUser(e.ctx(), u)
			if err != nil || len(recs) != 0 {
				t.Fatalf("after refused requests: %d records, %v; want none", len(recs), err)
			}
		}},
	}
}
