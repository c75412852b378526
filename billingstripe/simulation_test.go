package billingstripe_test

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingstripe/stripetest"
	"github.com/dynabill/billing/internal/seedhash"
	"github.com/stretchr/testify/require"
)

// draw is a number in [0, 1) drawn from the seed and what is decided, so
// a seed replays the same faults and outcomes.
func draw(seed uint64, what ...any) float64 {
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], seed)
	_, _ = h.Write(b[:])
	_, _ = fmt.Fprint(h, what...)
	return seedhash.Unit(h.Sum64())
}

// simSeeds are the seeds TestSimulation runs; SIM_SEED=n replays one.
func simSeeds(t *testing.T) []uint64 {
	if s := os.Getenv("SIM_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
		return []uint64{n}
	}
	return []uint64{1, 2, 3, 4}
}

// TestSimulation runs four months of daily scheduled and retry runs for
// ten card users through the Provider and the fake Stripe, with faults
// drawn from a seed: Stripe rate-limits, saves 500s, drops answers after
// charging and keeps requests running after the client gave up (each
// completes within minutes, well inside the provider's RequestTimeout);
// the store fails calls before or after applying them; customers decline
// now and then, retryably or not. After every day no subscription record
// is charged twice and every charge is on its record (or the record is in
// flight with the charge's key); after two calm days at the end nothing is
// in flight and every charge is recorded.
func TestSimulation(t *testing.T) {
	for _, seed := range simSeeds(t) {
		t.Run(fmt.Sprint("seed-", seed), func(t *testing.T) {
			t.Parallel()
			simulate(t, seed)
		})
	}
}

func simulate(t *testing.T, seed uint64) {
	const users, days = 10, 120
	var fr *faultyRepo
	e := newCollEnv(t, collOptions{
		client: stripetest.ClientOptions{Timeout: 500 * time.Millisecond},
		budget: billing.ProcessorBudget{RateLimitRetries: -1, Backoff: time.Millisecond, MaxBackoff: time.Millisecond},
		repo: func(r billing.Repository) billing.Repository {
			fr = &faultyRepo{Repository: r}
			return fr
		},
	})
	var mu sync.Mutex
	calm := false
	presented := map[string]int{}
	e.srv.SetFaultFunc(func(key string) stripetest.Fault {
		mu.Lock()
		defer mu.Unlock()
		if calm {
			return stripetest.Fault{}
		}
		presented[key]++
		switch x := draw(seed, "stripe", key, presented[key]); {
		case x < 0.05:
			return stripetest.RateLimited(0)
		case x < 0.09:
			return stripetest.ServerError()
		case x < 0.15:
			return stripetest.DropResponse()
		case x < 0.18:
			return stripetest.Running()
		}
		return stripetest.Fault{}
	})
	fr.mu.Lock()
	fr.fail = func(call int) (bool, bool) {
		mu.Lock()
		defer mu.Unlock()
		if calm {
			return false, false
		}
		return draw(seed, "store", call) < 0.03, draw(seed, "store-after", call) < 0.5
	}
	fr.mu.Unlock()

	outcomes := []stripetest.Outcome{
		stripetest.Decline("insufficient_funds"), stripetest.Decline("generic_decline"),
		stripetest.Decline("stolen_card"), stripetest.AuthenticationRequired(),
	}
	for i := range users {
		u := fmt.Sprintf("u%02d", i)
		e.addCard(u)
		var script []stripetest.Outcome
		for n := range 40 {
			x := draw(seed, "outcome", u, n)
			switch {
			case x < 0.08:
				script = append(script, outcomes[0])
			case x < 0.11:
				script = append(script, outcomes[1])
			case x < 0.12:
				script = append(script, outcomes[2])
			case x < 0.13:
				script = append(script, outcomes[3])
			default:
				script = append(script, stripetest.Succeed())
			}
		}
		script = append(script, stripetest.Succeed())
		e.srv.Script("cus_"+u, script...)
		date := billed.AddDate(0, 0, i%7-7) // billing dates over a week
		s := billing.Period{UserID: u, SubscriptionID: "sub-" + u, BillingDate: date, Amount: billing.Cents(int64(499 + 100*i)),
			Status: billing.StatusScheduled, BillingPeriod: billing.BillingPeriod(date), Term: billing.TermMonthly, AnchorDay: date.Day(),
			ReceiptTierName: "Plus:v2", CreatedDate: date.AddDate(0, -1, 0), LastRunDate: date.AddDate(0, -1, 0)}
		require.NoError(t, e.repo.Add(t.Context(), &s))
	}

	// run runs kind at the clock's time, continuing its cursor, and lets
	// Stripe finish what it was still running a few minutes later.
	run := func(kind billing.RunKind) {
		req := billing.RunRequest{Kind: kind}
		for range 20 {
			rep, err := e.c.Run(t.Context(), req)
			if os.Getenv("SIM_DEBUG") != "" {
				t.Logf("%s %s: %+v err=%v", e.clock.Now().Format(time.DateTime), kind, rep, err)
			}
			e.clock.Advance(time.Duration(1+int(3*draw(seed, "pause", e.clock.Now()))) * time.Minute)
			e.srv.CompleteRunning()
			if err != nil || rep.Next == "" {
				return
			}
			req.Cursor = rep.Next
		}
	}
	first := billed.AddDate(0, 0, -7)
	for d := range days {
		day := time.Date(first.Year(), first.Month(), first.Day()+d, 12, 0, 0, 0, time.UTC)
		e.clock.Set(day)
		run(billing.RunScheduled)
		if draw(seed, "rerun", d) < 0.3 {
			run(billing.RunScheduled) // a second invocation the same day
		}
		e.clock.Set(day.Add(30 * time.Minute))
		run(billing.RunRetry)
		requireOneChargePerPeriod(t, e.srv, e.repo)
		if t.Failed() && os.Getenv("SIM_DEBUG") != "" {
			for _, in := range e.srv.Intents() {
				t.Logf("intent %s %s %s %s", in.ID, in.Status, in.Metadata["dynabill_idempotency_key"], in.Created.Format(time.DateTime))
			}
			for i := range users {
				rows, _ := e.hist.ListByUser(t.Context(), fmt.Sprintf("u%02d", i))
				for _, r := range rows {
					t.Logf("hist %s %s %s attempt=%d last=%+v txn=%s", r.SubscriptionID, r.Status, r.LastRunDate.Format(time.DateTime), r.Attempt, r.LastAttempt, r.TransactionID)
				}
			}
		}
		if t.Failed() {
			t.Fatalf("seed %d: invariant broken on day %d (%s)", seed, d, day.Format(time.DateOnly))
		}
	}

	// Two calm days: every attempt in flight is resolved (past the replay
	// window, by lookup) and every charge recorded.
	mu.Lock()
	calm = true
	mu.Unlock()
	end := first.AddDate(0, 0, days)
	for d := range 3 {
		e.clock.Set(end.AddDate(0, 0, d).Add(12 * time.Hour))
		run(billing.RunScheduled)
		run(billing.RunRetry)
	}
	charged := map[string]bool{}
	for _, in := range e.srv.Charged() {
		charged[in.ID] = true
	}
	periods := 0
	for i := range users {
		recs, err := e.repo.ListByUser(t.Context(), fmt.Sprintf("u%02d", i))
		require.NoError(t, err)
		for _, r := range recs {
			require.False(t, r.InFlight(), "seed %d: %s still in flight after the calm days", seed, r.SubscriptionID)
			if r.Status == billing.StatusCompleted {
				periods++
				require.True(t, charged[r.TransactionID], "seed %d: COMPLETED %s has its charge %s", seed, r.SubscriptionID, r.TransactionID)
			}
		}
	}
	require.Len(t, charged, periods, "seed %d: every charge is a COMPLETED period", seed)
	require.Greater(t, periods, 3*users, "seed %d: most periods were collected", seed)
	requireOneChargePerPeriod(t, e.srv, e.repo)
}
