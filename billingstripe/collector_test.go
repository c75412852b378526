package billingstripe_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingstripe"
	"github.com/dynabill/billing/billingstripe/stripetest"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v85"
)

// billed is the billing date of the first period in the collector tests.
var billed = time.Date(2026, 1, 31, 9, 0, 0, 0, time.UTC)

// collEnv is a billing.Collector over the in-memory store charging through
// the Provider and the fake Stripe.
type collEnv struct {
	*fakeEnv
	repo billing.Repository
	hist billing.History
	c    *billing.Collector
}

type collOptions struct {
	client stripetest.ClientOptions
	budget billing.ProcessorBudget
	repo   func(billing.Repository) billing.Repository
	// dunning is the collector's Config.Dunning; confirmURL the
	// provider's Config.ConfirmURL.
	dunning    *billing.DunningPolicy
	confirmURL func(*stripe.PaymentIntent) string
}

func newCollEnv(t *testing.T, o collOptions) *collEnv {
	t.Helper()
	fe := newFakeEnv(t, o.client)
	fe.clock.Set(billed.Add(3 * time.Hour))
	st := billingtest.NewMemoryStore(t, memory.Options{PageSize: 3})
	if o.confirmURL != nil {
		p, err := billingstripe.New(billingstripe.Config{Client: fe.srv.Client(o.client), Customers: fe.cust, Clock: fe.clock.Now,
			Logger: debugLogger(), ConfirmURL: o.confirmURL})
		require.NoError(t, err)
		fe.p = p
	}
	e := &collEnv{fakeEnv: fe, repo: st.Repository(), hist: st.History()}
	repo := e.repo
	if o.repo != nil {
		repo = o.repo(repo)
	}
	ids := 0
	c, err := billing.NewCollector(billing.Config{
		Repository: repo, History: e.hist, Locker: billingtest.NewLocker(fe.clock, time.Minute),
		Provider: fe.p, Clock: fe.clock, ProcessorBudget: o.budget, Concurrency: 1, Logger: debugLogger(),
		NewID: func() string { ids++; return fmt.Sprintf("gen-%d", ids) }, Dunning: o.dunning,
	})
	require.NoError(t, err)
	e.c = c
	return e
}

// subscribe stores the user's SCHEDULED record billed on billed.
func (e *collEnv) subscribe(t *testing.T, user string) billing.Period {
	t.Helper()
	s := billing.Period{UserID: user, SubscriptionID: "sub-" + user, BillingDate: billed, Amount: billing.MustParseAmount("4.99"),
		Status: billing.StatusScheduled, BillingPeriod: billing.BillingPeriod(billed), Term: billing.TermMonthly, AnchorDay: 31,
		ReceiptTierName: "Plus:v2", CreatedDate: billed.AddDate(0, -1, 0), LastRunDate: billed.AddDate(0, -1, 0)}
	require.NoError(t, e.repo.Add(t.Context(), &s))
	return s
}

func (e *collEnv) get(t *testing.T, id string) billing.Period {
	t.Helper()
	s, err := e.repo.GetByID(t.Context(), id)
	require.NoError(t, err)
	return s
}

// run runs kind to its end and sums the reports.
func (e *collEnv) run(t *testing.T, kind billing.RunKind) *billing.Report {
	t.Helper()
	total := &billing.Report{}
	req := billing.RunRequest{Kind: kind}
	for {
		rep, err := e.c.Run(t.Context(), req)
		require.NoError(t, err)
		total.Attempted += rep.Attempted
		total.Collected += rep.Collected
		total.Pending += rep.Pending
		total.Unknown += rep.Unknown
		total.RateLimited += rep.RateLimited
		total.Failed = append(total.Failed, rep.Failed...)
		if rep.Next == "" {
			return total
		}
		req.Cursor = rep.Next
	}
}

// requireOneChargePerPeriod checks the money invariants against the fake:
// no subscription record charged twice, and every charge recorded on its
// record with its transaction and amount (or the record still in flight
// with the charge's key).
func requireOneChargePerPeriod(t *testing.T, srv *stripetest.Server, repo billing.Repository) {
	t.Helper()
	seen := map[string]string{}
	for _, in := range srv.Charged() {
		sub := in.Metadata[billingstripe.MetadataSubscriptionID]
		require.NotEmpty(t, sub, "intent %s carries its subscription", in.ID)
		if prev, ok := seen[sub]; ok {
			for _, x := range srv.Intents() {
				if x.Metadata[billingstripe.MetadataSubscriptionID] == sub {
					t.Logf("%s %s %s created %s", x.ID, x.Status, x.Metadata[billingstripe.MetadataIdempotencyKey], x.Created)
				}
			}
			t.Fatalf("subscription %s charged twice: %s and %s", sub, prev, in.ID)
		}
		seen[sub] = in.ID
		rec, err := repo.GetByID(t.Context(), sub)
		require.NoError(t, err)
		if rec.InFlight() && (rec.LastAttempt.Key == in.Metadata[billingstripe.MetadataIdempotencyKey] || rec.TransactionID == in.ID) {
			// The charge is known by its key, or is the period's earlier
			// intent the attempt confirmed again: a later run records it.
			continue
		}
		assert.Equal(t, in.ID, rec.TransactionID, "record %s holds its charge", sub)
		assert.Equal(t, in.Amount, rec.Amount.MinorUnits(), "record %s holds the charged amount", sub)
		assert.Contains(t, []billing.Status{billing.StatusCompleted, billing.StatusACHSent}, rec.Status, "record %s", sub)
	}
}

func TestCollectorChargesOncePerPeriod(t *testing.T) {
	e := newCollEnv(t, collOptions{})
	e.addCard("u1")
	e.addBank("u2")
	e.subscribe(t, "u1")
	e.subscribe(t, "u2")
	rep := e.run(t, billing.RunScheduled)
	assert.Equal(t, 1, rep.Collected)
	assert.Equal(t, 1, rep.Pending)
	e.clock.Advance(time.Hour)
	rep = e.run(t, billing.RunScheduled)
	assert.Equal(t, 0, rep.Attempted, "a second run the same day charges nothing")

	card := e.get(t, "sub-u1")
	assert.Equal(t, billing.StatusCompleted, card.Status)
	assert.Equal(t, "4242", card.ReceiptAccountMask)
	assert.Equal(t, "CARD", card.ReceiptPaymentType)
	ach := e.get(t, "sub-u2")
	assert.Equal(t, billing.StatusACHSent, ach.Status)
	assert.Equal(t, "6789", ach.ReceiptAccountMask)
	assert.Equal(t, "ACH", ach.ReceiptPaymentType)
	charged := e.srv.Charged()
	require.Len(t, charged, 2)
	assert.Equal(t, charged[0].ID, card.TransactionID)
	assert.Equal(t, charged[1].ID, ach.TransactionID)
	requireOneChargePerPeriod(t, e.srv, e.repo)

	// A month later the next period of the card user is charged once more.
	e.clock.Set(time.Date(2026, 2, 28, 12, 0, 0, 0, time.UTC))
	rep = e.run(t, billing.RunScheduled)
	assert.Equal(t, 1, rep.Collected)
	assert.Equal(t, 1, rep.Pending)
	recs, err := e.repo.ListByUser(t.Context(), "u1")
	require.NoError(t, err)
	require.Len(t, recs, 3)
	assert.Equal(t, billing.StatusCompleted, recs[1].Status)
	charged = e.srv.Charged()
	require.Len(t, charged, 4, "both users' second periods")
	assert.Equal(t, "u1", charged[2].Metadata[billingstripe.MetadataUserID])
	assert.Equal(t, "2026-02-28", charged[2].Metadata[billingstripe.MetadataBillingDate])
	assert.Equal(t, charged[2].ID, recs[1].TransactionID)
	requireOneChargePerPeriod(t, e.srv, e.repo)
}

func TestCollectorDroppedResponseResolvedByReplay(t *testing.T) {
	e := newCollEnv(t, collOptions{})
	e.addCard("u1")
	s := e.subscribe(t, "u1")
	key := billing.IdempotencyKey(s.SubscriptionID, 1)
	e.srv.InjectFault(key, stripetest.DropResponse())
	rep := e.run(t, billing.RunScheduled)
	assert.Equal(t, 1, rep.Unknown)
	cur := e.get(t, s.SubscriptionID)
	require.True(t, cur.InFlight())
	require.Len(t, e.srv.Charged(), 1, "Stripe charged")

	e.clock.Advance(10 * time.Minute)
	rep = e.run(t, billing.RunScheduled)
	assert.Equal(t, 1, rep.Collected)
	cur = e.get(t, s.SubscriptionID)
	assert.Equal(t, billing.StatusCompleted, cur.Status)
	assert.Equal(t, e.srv.Charged()[0].ID, cur.TransactionID)
	assert.Equal(t, 2, e.srv.CreateRequests(), "the replay presented the same key")
	require.Len(t, e.srv.Charged(), 1)
	requireOneChargePerPeriod(t, e.srv, e.repo)
}

func TestCollectorPastReplayWindowResolvesByLookup(t *testing.T) {
	e := newCollEnv(t, collOptions{})
	e.addCard("u1")
	s := e.subscribe(t, "u1")
	e.srv.InjectFault(billing.IdempotencyKey(s.SubscriptionID, 1), stripetest.DropResponse())
	e.run(t, billing.RunScheduled)
	inflight := e.get(t, s.SubscriptionID)
	require.True(t, inflight.InFlight())

	e.clock.Advance(25 * time.Hour) // Stripe forgot the key: a replay would charge again
	e.run(t, billing.RunScheduled)
	cur := e.get(t, s.SubscriptionID)
	assert.Equal(t, billing.StatusCompleted, cur.Status)
	assert.Equal(t, e.srv.Charged()[0].ID, cur.TransactionID)
	assert.Equal(t, 1, e.srv.CreateRequests(), "past the window only the lookup was asked")
	assert.Len(t, e.srv.Charged(), 1)
	requireOneChargePerPeriod(t, e.srv, e.repo)
}

func TestCollectorRunningRequestIsNotBelievedNotFound(t *testing.T) {
	e := newCollEnv(t, collOptions{client: stripetest.ClientOptions{Timeout: 300 * time.Millisecond}})
	e.addCard("u1")
	s := e.subscribe(t, "u1")
	e.srv.InjectFault(billing.IdempotencyKey(s.SubscriptionID, 1), stripetest.Running())
	rep := e.run(t, billing.RunScheduled)
	assert.Equal(t, 1, rep.Unknown, "the client gave up")

	// Within the request timeout: the replay is answered 409 key in use and
	// the lookup finds nothing, which is not believed.
	for range 2 {
		e.clock.Advance(4 * time.Minute)
		rep = e.run(t, billing.RunScheduled)
		assert.Equal(t, 1, rep.Unknown)
		cur := e.get(t, s.SubscriptionID)
		require.True(t, cur.InFlight(), "a key in use stays in flight")
		assert.Equal(t, 1, cur.LastAttempt.Number)
		assert.Equal(t, billing.StatusScheduled, cur.Status)
	}
	assert.Empty(t, e.srv.Intents())

	// Stripe finishes the first request; the next run's replay records it.
	require.Equal(t, 1, e.srv.CompleteRunning())
	e.clock.Advance(time.Minute)
	rep = e.run(t, billing.RunScheduled)
	assert.Equal(t, 1, rep.Collected)
	cur := e.get(t, s.SubscriptionID)
	assert.Equal(t, billing.StatusCompleted, cur.Status)
	require.Len(t, e.srv.Charged(), 1)
	assert.Equal(t, e.srv.Charged()[0].ID, cur.TransactionID)
	requireOneChargePerPeriod(t, e.srv, e.repo)
}

func TestCollectorNotFoundSettledAfterRequestTimeout(t *testing.T) {
	e := newCollEnv(t, collOptions{})
	e.addCard("u1")
	s := e.subscribe(t, "u1")
	e.srv.InjectFault(billing.IdempotencyKey(s.SubscriptionID, 1), stripetest.ServerError())
	rep := e.run(t, billing.RunScheduled)
	assert.Equal(t, 1, rep.Unknown)

	e.clock.Advance(time.Minute) // the saved 500 replays; the lookup finds nothing, too early to believe
	e.run(t, billing.RunScheduled)
	inflight := e.get(t, s.SubscriptionID)
	require.True(t, inflight.InFlight())

	// Every replay within the replay window is answered with the saved 500
	// and presents the key anew, so the lookup's "not found" is believed
	// only once replays stop, past the window, and the request timeout has
	// passed since the last one.
	e.clock.Advance(e.p.RequestTimeout() + time.Minute)
	e.run(t, billing.RunScheduled)
	inflight = e.get(t, s.SubscriptionID)
	require.True(t, inflight.InFlight(), "the replay just presented the key again")
	e.clock.Advance(e.p.ReplayWindow())
	e.run(t, billing.RunScheduled)
	cur := e.get(t, s.SubscriptionID)
	assert.False(t, cur.InFlight(), "attempt 1 settled as never made")
	assert.Equal(t, 1, cur.Attempt)
	assert.Empty(t, e.srv.Intents())
	e.clock.Advance(time.Minute)
	e.run(t, billing.RunScheduled)
	cur = e.get(t, s.SubscriptionID)
	assert.Equal(t, billing.StatusCompleted, cur.Status, "attempt 2 charged")
	require.Len(t, e.srv.Charged(), 1)
	assert.Equal(t, "dynabill:sub-u1:2", e.srv.Charged()[0].Metadata[billingstripe.MetadataIdempotencyKey])
	requireOneChargePerPeriod(t, e.srv, e.repo)
}

// TestCollectorRateLimitLeavesTheAttemptInFlight: a 429 for which the
// lookup finds no intent is an unknown outcome, not a refusal: the attempt
// stays in flight, fenced by its key, and the next run's replay charges
// once.
func TestCollectorRateLimitLeavesTheAttemptInFlight(t *testing.T) {
	e := newCollEnv(t, collOptions{budget: billing.ProcessorBudget{RateLimitRetries: -1}})
	e.addCard("u1")
	s := e.subscribe(t, "u1")
	key := billing.IdempotencyKey(s.SubscriptionID, 1)
	e.srv.InjectFault(key, stripetest.RateLimited(time.Second))
	rep := e.run(t, billing.RunScheduled)
	assert.Equal(t, 1, rep.Attempted)
	assert.Equal(t, 1, rep.Unknown)
	assert.Equal(t, 1, rep.RateLimited, "not a refusal, but the collector slows down for it")
	cur := e.get(t, s.SubscriptionID)
	require.True(t, cur.InFlight(), "the attempt is not withdrawn")
	assert.Equal(t, key, cur.LastAttempt.Key)
	assert.Equal(t, 0, cur.Attempt)
	assert.Equal(t, billing.StatusScheduled, cur.Status)
	assert.Empty(t, e.srv.Intents())
	assert.Equal(t, 1, e.srv.CreateRequests())

	// The next run, past the request timeout and within the replay
	// window, replays the key; Stripe saved no answer to the 429, so the
	// replay is executed.
	e.clock.Advance(e.p.RequestTimeout() + time.Minute)
	rep = e.run(t, billing.RunScheduled)
	assert.Equal(t, 1, rep.Collected)
	cur = e.get(t, s.SubscriptionID)
	assert.Equal(t, billing.StatusCompleted, cur.Status)
	assert.False(t, cur.InFlight())
	require.Len(t, e.srv.Intents(), 1)
	require.Len(t, e.srv.Charged(), 1)
	assert.Equal(t, e.srv.Charged()[0].ID, cur.TransactionID)
	assert.Equal(t, int64(499), e.srv.Charged()[0].Amount)
	assert.Equal(t, key, e.srv.Charged()[0].Metadata[billingstripe.MetadataIdempotencyKey], "the key of the attempt left in flight")
	assert.Equal(t, 2, e.srv.CreateRequests())

	e.clock.Advance(time.Hour)
	rep = e.run(t, billing.RunScheduled)
	assert.Equal(t, 0, rep.Attempted, "an hour later nothing more is charged")
	assert.Len(t, e.srv.Intents(), 1)
	requireOneChargePerPeriod(t, e.srv, e.repo)
}

// TestCollectorRateLimitWhileAnEarlierTryRuns: stripe-go retried a
// timed-out try with the same key while that try still ran at Stripe, and
// the retry was answered 429. The lookup cannot see the running try, so
// the attempt stays in flight; the running try's intent, once it
// completes, is the attempt's only charge, however late the next run comes
// (past Stripe's day, a withdrawn attempt started again would charge a
// second time).
func TestCollectorRateLimitWhileAnEarlierTryRuns(t *testing.T) {
	tests := []struct {
		name string
		// then runs the collector after the first run, completing the
		// running try at some point; it returns the create requests it
		// expects in all.
		then func(t *testing.T, e *collEnv) int
	}{
		{"the next runs come while the try runs and after it completed", func(t *testing.T, e *collEnv) int {
			e.clock.Advance(4 * time.Minute)
			rep := e.run(t, billing.RunScheduled)
			assert.Equal(t, 1, rep.Unknown, "the replay is answered key in use, the lookup finds nothing: not believed")
			inflight := e.get(t, "sub-u1")
			require.True(t, inflight.InFlight())
			assert.Empty(t, e.srv.Intents())
			require.Equal(t, 1, e.srv.CompleteRunning())
			e.clock.Advance(time.Hour)
			rep = e.run(t, billing.RunScheduled)
			assert.Equal(t, 1, rep.Collected, "the replay is answered with the running try's outcome")
			return 4
		}},
		{"the try completes and the next run comes a day later", func(t *testing.T, e *collEnv) int {
			require.Equal(t, 1, e.srv.CompleteRunning())
			e.clock.Advance(25 * time.Hour) // Stripe forgot the key: only the lookup is asked
			rep := e.run(t, billing.RunScheduled)
			assert.Equal(t, 1, rep.Collected)
			return 2
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newCollEnv(t, collOptions{
				client: stripetest.ClientOptions{MaxNetworkRetries: 1, Timeout: 300 * time.Millisecond},
				budget: billing.ProcessorBudget{RateLimitRetries: -1},
			})
			e.addCard("u1")
			s := e.subscribe(t, "u1")
			key := billing.IdempotencyKey(s.SubscriptionID, 1)
			e.srv.InjectFault(key, stripetest.Running())
			e.srv.InjectFault(key, stripetest.RateLimited(time.Second))
			rep := e.run(t, billing.RunScheduled)
			assert.Equal(t, 1, rep.Unknown)
			assert.Equal(t, 1, rep.RateLimited, "no refusal, but the collector slows down for it")
			cur := e.get(t, s.SubscriptionID)
			require.True(t, cur.InFlight(), "the running try may charge: the attempt stays in flight")
			assert.Equal(t, key, cur.LastAttempt.Key)
			assert.Equal(t, billing.StatusScheduled, cur.Status)
			assert.Equal(t, 2, e.srv.CreateRequests(), "the running try and stripe-go's rate-limited retry")
			assert.Empty(t, e.srv.Intents(), "the running try has made no intent yet")

			creates := tt.then(t, e)

			cur = e.get(t, s.SubscriptionID)
			assert.Equal(t, billing.StatusCompleted, cur.Status)
			intents := e.srv.Intents()
			require.Len(t, intents, 1, "one PaymentIntent for the period, never a second")
			assert.Equal(t, key, intents[0].Metadata[billingstripe.MetadataIdempotencyKey])
			assert.Equal(t, "succeeded", intents[0].Status)
			assert.Equal(t, intents[0].ID, cur.TransactionID, "the running try's charge is recorded")
			assert.Equal(t, int64(499), intents[0].Amount)
			assert.Equal(t, creates, e.srv.CreateRequests())
			requireOneChargePerPeriod(t, e.srv, e.repo)
		})
	}
}

func TestCollectorDeclines(t *testing.T) {
	tests := []struct {
		name      string
		outcome   stripetest.Outcome
		noRetry   bool
		reasonHas string
	}{
		{"insufficient funds is retried", stripetest.Decline("insufficient_funds"), false, "insufficient_funds"},
		{"a stolen card is not", stripetest.Decline("stolen_card"), true, "stolen_card"},
		{"authentication required is not", stripetest.AuthenticationRequired(), true, "authentication_required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newCollEnv(t, collOptions{})
			e.addCard("u1")
			s := e.subscribe(t, "u1")
			e.srv.Script("cus_u1", tt.outcome)
			e.run(t, billing.RunScheduled)
			cur := e.get(t, s.SubscriptionID)
			assert.Equal(t, billing.StatusError, cur.Status)
			assert.Equal(t, tt.noRetry, cur.NoRetry)
			assert.Contains(t, cur.PaymentError, tt.reasonHas)
			assert.Equal(t, e.srv.Intents()[0].ID, cur.TransactionID)
			assert.Empty(t, e.srv.Charged())
		})
	}
}

// TestCollectorRetriesADecline: a retryable decline is collected by the
// retry run, once: the next attempt confirms the same intent again, under
// its own key.
func TestCollectorRetriesADecline(t *testing.T) {
	e := newCollEnv(t, collOptions{})
	e.addCard("u1")
	s := e.subscribe(t, "u1")
	e.srv.Script("cus_u1", stripetest.Decline("insufficient_funds"), stripetest.Succeed())
	e.run(t, billing.RunScheduled)
	require.Equal(t, billing.StatusError, e.get(t, s.SubscriptionID).Status)
	for day := 1; day <= 3 && e.get(t, s.SubscriptionID).Status == billing.StatusError; day++ {
		e.clock.Set(billed.AddDate(0, 0, day).Add(3 * time.Hour))
		e.run(t, billing.RunRetry)
	}
	cur := e.get(t, s.SubscriptionID)
	assert.Equal(t, billing.StatusCompleted, cur.Status)
	require.Len(t, e.srv.Charged(), 1)
	require.Len(t, e.srv.Intents(), 1)
	assert.Equal(t, "dynabill:sub-u1:1", e.srv.Charged()[0].Metadata[billingstripe.MetadataIdempotencyKey], "the intent names the attempt that made it")
	assert.Equal(t, 1, e.srv.ConfirmRequests())
	assert.Equal(t, e.srv.Charged()[0].ID, cur.TransactionID)
	assert.Equal(t, "dynabill:sub-u1:2", cur.LastAttempt.Key)
	requireOneChargePerPeriod(t, e.srv, e.repo)
}
