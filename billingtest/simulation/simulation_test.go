package simulation_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/billingtest/simulation"
	"github.com/dynabill/billing/internal/calendar"
	"github.com/dynabill/billing/memory"
)

// The invariants of a simulation are checked by the root package's
// simulation tests; these check the simulator itself.

func TestRunIsDeterministic(t *testing.T) {
	t.Parallel()
	run := func(seed int64) *simulation.Result {
		// One collection at a time: concurrent runs may order the writes
		// of one user differently.
		res, err := simulation.Run(t.Context(), simulation.Options{Users: 200, Months: 2, Seed: seed, Concurrency: 1})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	a, b, c := run(3), run(3), run(4)
	if !equalMonths(a.Months, b.Months) || a.Showcase != b.Showcase {
		t.Errorf("same seed, different results:\n%s\n%s", format(t, a), format(t, b))
	}
	if equalMonths(a.Months, c.Months) {
		t.Errorf("seeds 3 and 4 gave the same table:\n%s", format(t, a))
	}
	if len(a.Months) != 2 || a.Months[0].Period != "01/2024" || a.Months[1].Period != "02/2024" || a.Total.Revenue <= 0 {
		t.Errorf("months:\n%s", format(t, a))
	}
}

func equalMonths(a, b []simulation.Month) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func format(t *testing.T, r *simulation.Result) string {
	t.Helper()
	var b strings.Builder
	if err := r.Format(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestPopulationMix(t *testing.T) {
	t.Parallel()
	res, err := simulation.Run(t.Context(), simulation.Options{Users: 1000, Months: 1, Start: time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	var yearly, friday, paused, backlog, monthEnd int
	for _, u := range res.Users {
		switch {
		case u.Term == billing.TermYearly:
			yearly++
			if u.Amount != billing.MustParseAmount("39.99") && u.Amount != billing.MustParseAmount("99.99") {
				t.Errorf("%s: yearly at %s", u.ID, u.Amount)
			}
		case u.Amount != billing.MustParseAmount("4.99") && u.Amount != billing.MustParseAmount("9.99"):
			t.Errorf("%s: monthly at %s", u.ID, u.Amount)
		}
		if u.BillingWeek > 0 {
			friday++
			d := u.FirstBillingDate
			if d.Weekday() != time.Friday || calendar.NthFriday(d.Year(), d.Month(), u.BillingWeek).Day() != d.Day() {
				t.Errorf("%s: Friday week %d billed %v", u.ID, u.BillingWeek, u.FirstBillingDate)
			}
		}
		if u.PauseMonths > 0 {
			paused++
		}
		if u.Backlog {
			backlog++
			if age := res.Start.Sub(u.FirstBillingDate); age <= 30*24*time.Hour {
				t.Errorf("%s: backlog record only %v old", u.ID, age)
			}
		} else if u.BillingWeek == 0 && u.FirstBillingDate.Month() != time.March {
			t.Errorf("%s: first billed %v, not in the first month", u.ID, u.FirstBillingDate)
		}
		if u.AnchorDay >= 29 {
			monthEnd++
		}
	}
	within := func(name string, n, lo, hi int) {
		if n < lo || n > hi {
			t.Errorf("%d %s users of 1000, want %d to %d", n, name, lo, hi)
		}
	}
	within("yearly", yearly, 160, 240)
	within("Friday billing", friday, 120, 180)
	within("paused", paused, 30, 70)
	within("backlog", backlog, 3, 20)
	within("month-end anchor", monthEnd, 80, 200)
	if res.Total.Collected == 0 || res.Total.Paused == 0 || res.Total.Stale == 0 {
		t.Errorf("one month exercised too little:\n%s", format(t, res))
	}
}

func TestOptionsRejected(t *testing.T) {
	t.Parallel()
	for _, o := range []simulation.Options{
		{Users: -1},
		{Months: -1},
		{DeclineRate: 0.7, PendingRate: 0.5},
		{ReturnRate: 1.5},
		{Users: 3, Months: 1, UserID: func(int) string { return "same" }},
		{Users: 3, Months: 1, UserID: func(int) string { return "" }},
	} {
		if _, err := simulation.Run(t.Context(), o); err == nil {
			t.Errorf("Run(%+v) succeeded", o)
		}
	}
}

// TestUserID: Options.UserID names the users and changes nothing else of
// the population; without it the users are "user-0001"… as before.
func TestUserID(t *testing.T) {
	t.Parallel()
	run := func(id func(int) string) *simulation.Result {
		res, err := simulation.Run(t.Context(), simulation.Options{Users: 30, Months: 1, Seed: 9, UserID: id})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	def := run(nil)
	named := run(func(i int) string { return fmt.Sprintf("acct-%03d#sub-%04d#SKU", i/3, i) })
	for i := range def.Users {
		d, n := def.Users[i], named.Users[i]
		if want := fmt.Sprintf("user-%04d", i+1); d.ID != want {
			t.Errorf("user %d without Options.UserID: %q, want %q", i, d.ID, want)
		}
		if want := fmt.Sprintf("acct-%03d#sub-%04d#SKU", i/3, i); n.ID != want {
			t.Errorf("user %d: %q, want %q", i, n.ID, want)
		}
		if n.FirstSubscriptionID == d.FirstSubscriptionID {
			t.Errorf("user %d: the first subscription ID does not depend on the user ID", i)
		}
		d.ID, d.FirstSubscriptionID, n.ID, n.FirstSubscriptionID = "", "", "", ""
		if d != n {
			t.Errorf("user %d: the population depends on the user ID:\n\t%+v\n\t%+v", i, d, n)
		}
		recs, err := named.Repository.ListByUser(t.Context(), named.Users[i].ID)
		if err != nil || len(recs) == 0 || recs[0].SubscriptionID != named.Users[i].FirstSubscriptionID {
			t.Errorf("user %s: records %v, %v", named.Users[i].ID, recs, err)
		}
	}
}

// TestReadyCollector: a collector the caller built on NewClock, NewProvider
// and NewTally runs the same simulation as the one Run builds.
func TestReadyCollector(t *testing.T) {
	t.Parallel()
	opts := simulation.Options{Users: 100, Months: 2, Seed: 5}
	built := opts
	built.Concurrency = 1
	want, err := simulation.Run(t.Context(), built)
	if err != nil {
		t.Fatal(err)
	}

	clock := simulation.NewClock()
	store := billingtest.NewMemoryStore(t, memory.Options{PageSize: 250})
	prov, tally := simulation.NewProvider(clock), simulation.NewTally()
	c, err := billing.NewCollector(billing.Config{
		Repository: store.Repository(), History: store.History(), Provider: prov, Clock: clock, Events: tally,
		Locker:             memory.NewLocker(memory.LockerOptions{Clock: clock}),
		PagesPerInvocation: simulation.DefaultPagesPerInvocation, Concurrency: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	ready := opts
	ready.Collector, ready.Tally = c, tally
	ready.Repository, ready.History, ready.Clock, ready.Provider = store.Repository(), store.History(), clock, prov
	got, err := simulation.Run(t.Context(), ready)
	if err != nil {
		t.Fatal(err)
	}
	if !equalMonths(got.Months, want.Months) || got.Invocations != want.Invocations || got.Showcase != want.Showcase {
		t.Errorf("ready collector:\n%s\ncollector built by Run:\n%s", format(t, got), format(t, want))
	}
	if got.Total.Collected == 0 {
		t.Errorf("nothing collected:\n%s", format(t, got))
	}
	if _, err := simulation.Run(t.Context(), ready); err == nil {
		t.Error("a second Run with the same Tally succeeded")
	}
}

func TestReadyCollectorOptionsRejected(t *testing.T) {
	t.Parallel()
	clock := simulation.NewClock()
	store := billingtest.NewMemoryStore(t, memory.Options{})
	prov := simulation.NewProvider(clock)
	c, err := billing.NewCollector(billing.Config{
		Repository: store.Repository(), Provider: prov, Clock: clock, Locker: memory.NewLocker(memory.LockerOptions{}),
	})
	if err != nil {
		t.Fatal(err)
	}
	ok := simulation.Options{Users: 3, Months: 1, Collector: c, Repository: store.Repository(), History: store.History(), Clock: clock, Provider: prov}
	for name, change := range map[string]func(o *simulation.Options){
		"no Tally":      func(*simulation.Options) {},
		"no Repository": func(o *simulation.Options) { o.Tally, o.Repository, o.History = simulation.NewTally(), nil, nil },
		"no Clock":      func(o *simulation.Options) { o.Tally, o.Clock = simulation.NewTally(), nil },
		"no Provider":   func(o *simulation.Options) { o.Tally, o.Provider = simulation.NewTally(), nil },
		"Locker too": func(o *simulation.Options) {
			o.Tally, o.Locker = simulation.NewTally(), memory.NewLocker(memory.LockerOptions{})
		},
		"Concurrency too":    func(o *simulation.Options) { o.Tally, o.Concurrency = simulation.NewTally(), 2 },
		"PagesPerInvocation": func(o *simulation.Options) { o.Tally, o.PagesPerInvocation = simulation.NewTally(), 1 },
	} {
		o := ok
		change(&o)
		if _, err := simulation.Run(t.Context(), o); err == nil {
			t.Errorf("%s: Run succeeded", name)
		}
	}
}

// TestReadyCollectorOnAnotherClock: a collector that reads another clock
// than Options.Clock — built without Config.Clock, so on wall time, or on
// a second fake clock — is refused before anything runs: it would mark the
// simulated records stale or bill them at the wrong dates.
func TestReadyCollectorOnAnotherClock(t *testing.T) {
	t.Parallel()
	clock := simulation.NewClock()
	prov := simulation.NewProvider(clock)
	for name, own := range map[string]billing.Clock{"wall time": nil, "another fake clock": simulation.NewClock()} {
		store := billingtest.NewMemoryStore(t, memory.Options{})
		c, err := billing.NewCollector(billing.Config{
			Repository: store.Repository(), Provider: prov, Clock: own, Locker: memory.NewLocker(memory.LockerOptions{}),
		})
		if err != nil {
			t.Fatal(err)
		}
		o := simulation.Options{Users: 3, Months: 1, Collector: c, Repository: store.Repository(), History: store.History(),
			Clock: clock, Provider: prov, Tally: simulation.NewTally()}
		if _, err = simulation.Run(t.Context(), o); err == nil || !strings.Contains(err.Error(), "reads another clock") {
			t.Errorf("%s: Run = %v, want a refusal naming the clock", name, err)
		}
		if n := len(prov.Calls()); n != 0 {
			t.Errorf("%s: %d provider calls after the refusal", name, n)
		}
	}
}

// TestSignUp: every user but the Legacy ones starts with Subscribe (its
// first period's first history row is process SUBSCRIBE, under the user's
// request key), the Legacy ones with the record another service wrote;
// NoLegacy signs every user up and changes nothing else of the population
// but the legacy users' first dates (backlog) or Friday (fifth Friday).
func TestSignUp(t *testing.T) {
	t.Parallel()
	run := func(noLegacy bool) *simulation.Result {
		res, err := simulation.Run(t.Context(), simulation.Options{Users: 300, Months: 1, Seed: 2, NoLegacy: noLegacy})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	with, without := run(false), run(true)
	var backlog, fifth int
	for i := range with.Users {
		u, v := with.Users[i], without.Users[i]
		rows, err := with.History.ListBySubscription(t.Context(), u.FirstSubscriptionID)
		if err != nil || len(rows) == 0 {
			t.Fatalf("%s: history %v, %v", u.ID, rows, err)
		}
		want := billing.ProcessSubscribe
		if u.Legacy {
			want = billing.ProcessNotIdentified
		}
		if rows[0].Process != want || rows[0].BillingWeek != u.BillingWeek || u.FirstSubscriptionID != billing.FirstPeriodID(u.ID, u.RequestKey) {
			t.Errorf("%s (legacy %v): first period %s created by %s, week %d; want %s, week %d", u.ID, u.Legacy, rows[0].SubscriptionID, rows[0].Process, rows[0].BillingWeek, want, u.BillingWeek)
		}
		if v.Legacy || v.Backlog {
			t.Errorf("%s: a legacy user with NoLegacy", v.ID)
		}
		switch {
		case u.Backlog:
			backlog++
			if v.FirstBillingDate.Month() != time.January || v.AnchorDay != v.FirstBillingDate.Day() {
				t.Errorf("%s: without legacy, first billed %v (anchor %d)", v.ID, v.FirstBillingDate, v.AnchorDay)
			}
			u.FirstBillingDate, u.AnchorDay = v.FirstBillingDate, v.AnchorDay
		case u.Legacy:
			fifth++
			if u.BillingWeek != 5 || v.BillingWeek != 4 || calendar.FridayWeek(u.FirstBillingDate) != 4 {
				t.Errorf("%s: legacy week %d billed %v; without legacy week %d", u.ID, u.BillingWeek, u.FirstBillingDate, v.BillingWeek)
			}
			u.BillingWeek = v.BillingWeek
		}
		u.Legacy, u.Backlog = false, false
		if u != v {
			t.Errorf("user %d: NoLegacy changed more than the legacy records:\n\t%+v\n\t%+v", i, u, v)
		}
	}
	if backlog == 0 || fifth == 0 {
		t.Errorf("300 users, %d backlog and %d fifth-Friday legacy users: the test checks too little", backlog, fifth)
	}
}

// TestSignUpHook: Options.SignUp is called once per user but the backlog
// ones, in order, on the eve of the first day; one that does not write the
// user's first period under its key fails the run.
func TestSignUpHook(t *testing.T) {
	t.Parallel()
	clock := simulation.NewClock()
	store := billingtest.NewMemoryStore(t, memory.Options{})
	prov, tally := simulation.NewProvider(clock), simulation.NewTally()
	c, err := billing.NewCollector(billing.Config{
		Repository: store.Repository(), History: store.History(), Provider: prov, Clock: clock, Events: tally,
		Locker: memory.NewLocker(memory.LockerOptions{Clock: clock}),
		Prices: simulation.Prices(),
	})
	if err != nil {
		t.Fatal(err)
	}
	var called []string
	opts := simulation.Options{Users: 40, Months: 1, NoLegacy: true, Collector: c, Tally: tally,
		Repository: store.Repository(), History: store.History(), Clock: clock, Provider: prov,
		SignUp: func(ctx context.Context, u simulation.User) error {
			if want := simulation.DefaultStart.Add(-12 * time.Hour); !clock.Now().Equal(want) {
				t.Errorf("%s signs up at %v, want %v", u.ID, clock.Now(), want)
			}
			called = append(called, u.ID)
			req := u.SubscribeRequest()
			req.Amount = 0 // from the price list
			_, err := c.Subscribe(ctx, req)
			return err
		},
	}
	res, err := simulation.Run(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(called) != len(res.Users) || called[0] != res.Users[0].ID || res.Total.Collected == 0 {
		t.Errorf("SignUp called for %v; users %d:\n%s", called, len(res.Users), format(t, res))
	}

	wrongKey := simulation.Options{Users: 3, Months: 1, SignUp: func(ctx context.Context, u simulation.User) error { return nil }}
	if _, err := simulation.Run(t.Context(), wrongKey); err == nil || !strings.Contains(err.Error(), "wrote no period") {
		t.Errorf("a SignUp that writes nothing: %v", err)
	}
}
