package billingtest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var errProviderBoom = errors.New("boom")

// payReq is a request for attempt n of subscription sub of user.
func payReq(user, sub string, n int) billing.PaymentRequest {
	return billing.PaymentRequest{
		UserID:         user,
		SubscriptionID: sub,
		Amount:         billing.Cents(499),
		BillingDate:    time.Date(2024, 2, 1, 0, 0, 0, 0, time.UTC),
		Tier:           "Plus:v2",
		Process:        billing.ProcessInitial,
		Attempt:        n,
		IdempotencyKey: billing.IdempotencyKey(sub, n),
	}
}

// payAnswer is one Collect answer reduced to what the tests compare.
type payAnswer struct {
	outcome   billing.PaymentOutcome
	reason    string
	retryable bool
	err       error
}

func (g payAnswer) String() string {
	return fmt.Sprintf("{%v %q retryable=%v err=%v}", g.outcome, g.reason, g.retryable, g.err)
}

func collectOne(t *testing.T, p *billingtest.Provider, req billing.PaymentRequest) payAnswer {
	t.Helper()
	res, err := p.Collect(t.Context(), req)
	if err != nil {
		assert.Zero(t, res, "Collect(%s) returned a result with error %v", req.IdempotencyKey, err)
	}
	return payAnswer{res.Outcome, res.DeclineReason, res.Retryable, err}
}

func sameAnswer(a, b payAnswer) bool {
	return a.outcome == b.outcome && a.reason == b.reason && a.retryable == b.retryable && errors.Is(a.err, b.err) && (a.err == nil) == (b.err == nil)
}

var (
	wantOK      = payAnswer{outcome: billing.OutcomeSucceeded}
	wantPending = payAnswer{outcome: billing.OutcomePending}
	wantNSF     = payAnswer{outcome: billing.OutcomeDeclined, reason: "NSF", retryable: true}
	wantTimeout = payAnswer{err: billingtest.ErrTimeout}
)

func TestProviderScripts(t *testing.T) {
	type call struct {
		user, sub string
		attempt   int
		want      payAnswer
	}
	tests := []struct {
		name        string
		setup       func(p *billingtest.Provider)
		calls       []call
		wantCharges int
	}{
		{
			name:        "default succeeds",
			setup:       func(*billingtest.Provider) {},
			calls:       []call{{"u1", "s1", 1, wantOK}, {"u2", "s2", 1, wantOK}},
			wantCharges: 2,
		},
		{
			name: "user steps in order, last repeating",
			setup: func(p *billingtest.Provider) {
				p.SetUser("u1", billingtest.Declined("NSF", true), billingtest.Pending())
			},
			calls: []call{
				{"u1", "s1", 1, wantNSF},
				{"u1", "s1", 2, wantPending},
				{"u1", "s2", 1, wantPending},
				{"u2", "s3", 1, wantOK}, // another user: default
			},
			wantCharges: 3,
		},
		{
			name: "attempt overrides user and default",
			setup: func(p *billingtest.Provider) {
				p.SetDefault(billingtest.Always(billingtest.Pending()))
				p.SetUser("u1", billingtest.Declined("NSF", true))
				p.SetAttempt("s1", 2, billingtest.Succeeded())
			},
			calls: []call{
				{"u1", "s1", 1, wantNSF},
				{"u1", "s1", 2, wantOK},
				{"u1", "s1", 3, wantNSF},
				{"u2", "s2", 1, wantPending},
			},
			wantCharges: 2,
		},
		{
			name: "attempt script not consuming the user's",
			setup: func(p *billingtest.Provider) {
				p.SetUser("u1", billingtest.Declined("NSF", true), billingtest.Succeeded())
				p.SetAttempt("s1", 1, billingtest.Declined("R02", false))
			},
			calls: []call{
				{"u1", "s1", 1, payAnswer{outcome: billing.OutcomeDeclined, reason: "R02"}},
				{"u1", "s1", 2, wantNSF},
				{"u1", "s1", 3, wantOK},
			},
			wantCharges: 1,
		},
		{
			name: "removed scripts",
			setup: func(p *billingtest.Provider) {
				p.SetUser("u1", billingtest.Declined("NSF", true))
				p.SetAttempt("s1", 1, billingtest.Pending())
				p.SetUser("u1")
				p.SetAttempt("s1", 1)
			},
			calls:       []call{{"u1", "s1", 1, wantOK}},
			wantCharges: 1,
		},
		{
			name: "unknown before charge: the retry of the key is a new request",
			setup: func(p *billingtest.Provider) {
				p.SetAttempt("s1", 1, billingtest.UnknownBeforeCharge(nil), billingtest.Declined("NSF", true))
			},
			calls:       []call{{"u1", "s1", 1, wantTimeout}, {"u1", "s1", 1, wantNSF}, {"u1", "s1", 1, wantNSF}},
			wantCharges: 0,
		},
		{
			name: "unknown before charge with the given error",
			setup: func(p *billingtest.Provider) {
				p.SetUser("u1", billingtest.UnknownBeforeCharge(errProviderBoom))
			},
			calls:       []call{{"u1", "s1", 1, payAnswer{err: errProviderBoom}}, {"u1", "s1", 1, payAnswer{err: errProviderBoom}}},
			wantCharges: 0,
		},
		{
			name: "unknown after charge: the retry replays with nil error",
			setup: func(p *billingtest.Provider) {
				p.SetUser("u1", billingtest.UnknownAfterCharge(billingtest.Succeeded(), nil), billingtest.Declined("NSF", true))
			},
			calls:       []call{{"u1", "s1", 1, wantTimeout}, {"u1", "s1", 1, wantOK}, {"u1", "s1", 1, wantOK}, {"u1", "s1", 2, wantNSF}},
			wantCharges: 1,
		},
		{
			name: "unknown after a decline: stored, nothing charged",
			setup: func(p *billingtest.Provider) {
				p.SetUser("u1", billingtest.UnknownAfterCharge(billingtest.Declined("NSF", true), errProviderBoom), billingtest.Succeeded())
			},
			calls:       []call{{"u1", "s1", 1, payAnswer{err: errProviderBoom}}, {"u1", "s1", 1, wantNSF}, {"u1", "s1", 2, wantOK}},
			wantCharges: 1,
		},
		{
			name: "sequence default",
			setup: func(p *billingtest.Provider) {
				p.SetDefault(billingtest.Sequence(billingtest.Pending(), billingtest.Declined("NSF", true)))
			},
			calls:       []call{{"u1", "s1", 1, wantPending}, {"u2", "s2", 1, wantNSF}, {"u3", "s3", 1, wantNSF}, {"u1", "s1", 1, wantPending}},
			wantCharges: 1,
		},
		{
			name: "zero step succeeds",
			setup: func(p *billingtest.Provider) {
				p.SetUser("u1", billingtest.Step{})
			},
			calls:       []call{{"u1", "s1", 1, wantOK}},
			wantCharges: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &billingtest.Provider{}
			tt.setup(p)
			for i, c := range tt.calls {
				g := collectOne(t, p, payReq(c.user, c.sub, c.attempt))
				assert.True(t, sameAnswer(g, c.want), "call %d (%s attempt %d) = %v, want %v", i, c.sub, c.attempt, g, c.want)
			}
			assert.Len(t, p.Charges(), tt.wantCharges, "charges")
			assert.Equal(t, len(tt.calls), p.CallCount(), "CallCount")
			billingtest.RequireNoDoubleCharge(t, p)
		})
	}
}

func TestProviderAnswerFields(t *testing.T) {
	clock := billingtest.NewClock(time.Date(2024, 2, 1, 9, 0, 0, 0, time.UTC))
	p := billingtest.NewProvider(billingtest.ProviderOptions{Clock: clock})
	req := payReq("u1", "s1", 3)
	res, err := p.Collect(t.Context(), req)
	require.NoError(t, err)
	want := billing.PaymentResult{
		Outcome:       billing.OutcomeSucceeded,
		TransactionID: "txn-" + billing.IdempotencyKey("s1", 3),
		AccountMask:   "6789",
		PaymentType:   "ACH",
	}
	assert.Equal(t, want, res, "result = %+v, want %+v", res, want)
	charges := p.ChargesFor("s1")
	require.Len(t, charges, 1, "ChargesFor(s1) = %+v, want one charge", charges)
	wantCharge := billingtest.Charge{
		Key: req.IdempotencyKey, UserID: "u1", SubscriptionID: "s1", Attempt: 3, Amount: req.Amount,
		Outcome: billing.OutcomeSucceeded, TransactionID: want.TransactionID, At: clock.Now(),
	}
	assert.Equal(t, wantCharge, charges[0], "charge = %+v, want %+v", charges[0], wantCharge)
	assert.Empty(t, p.ChargesFor("other"), "ChargesFor(other)")

	// Options override mask and type; declines carry reason and retryable,
	// other outcomes never do.
	p = billingtest.NewProvider(billingtest.ProviderOptions{AccountMask: "1111", PaymentType: "CARD"})
	p.SetUser("u1", billingtest.Declined("R01", false), billingtest.Step{Outcome: billing.OutcomePending, DeclineReason: "ignored", Retryable: true})
	res, _ = p.Collect(t.Context(), payReq("u1", "s1", 1))
	assert.Equal(t, "1111", res.AccountMask, "declined result = %+v", res)
	assert.Equal(t, "CARD", res.PaymentType, "declined result = %+v", res)
	assert.Equal(t, "R01", res.DeclineReason, "declined result = %+v", res)
	assert.False(t, res.Retryable, "declined result = %+v", res)
	res, _ = p.Collect(t.Context(), payReq("u1", "s1", 2))
	assert.Equal(t, billing.OutcomePending, res.Outcome, "pending result = %+v", res)
	assert.Empty(t, res.DeclineReason, "pending result = %+v", res)
	assert.False(t, res.Retryable, "pending result = %+v", res)
}

func TestProviderReplay(t *testing.T) {
	p := &billingtest.Provider{}
	p.SetUser("u1", billingtest.UnknownAfterCharge(billingtest.Pending(), nil), billingtest.Succeeded())
	req := payReq("u1", "s1", 1)
	_, err := p.Collect(t.Context(), req)
	require.ErrorIs(t, err, billingtest.ErrTimeout, "first call")
	// The rerun presents the same key, with another process.
	req.Process = billing.ProcessRetry
	first, err := p.Collect(t.Context(), req)
	require.NoError(t, err, "replay")
	require.Equal(t, billing.OutcomePending, first.Outcome, "replay = %+v; want wantPending", first)
	again, err := p.Collect(t.Context(), req)
	require.NoError(t, err, "second replay")
	require.Equal(t, first, again, "second replay")
	cs := p.ChargesFor("s1")
	require.Len(t, cs, 1, "charges = %+v, want exactly one pending", cs)
	require.Equal(t, billing.OutcomePending, cs[0].Outcome, "charges = %+v, want exactly one pending", cs)
	calls := p.Calls()
	require.Len(t, calls, 3, "calls = %+v", calls)
	require.False(t, calls[0].Replayed, "calls = %+v", calls)
	require.Error(t, calls[0].Err, "calls = %+v", calls)
	require.True(t, calls[1].Replayed, "calls = %+v", calls)
	require.True(t, calls[2].Replayed, "calls = %+v", calls)
	require.NoError(t, calls[1].Err, "calls = %+v", calls)
	require.Equal(t, []string{req.IdempotencyKey}, p.KeysFor("s1"), "KeysFor(s1)")
	// The next attempt gets a new key and the next step.
	g := collectOne(t, p, payReq("u1", "s1", 2))
	require.True(t, sameAnswer(g, wantOK), "attempt 2 = %v", g)
	keys := p.KeysFor("s1")
	require.Len(t, keys, 2, "KeysFor(s1) = %q", keys)
	require.Equal(t, billing.IdempotencyKey("s1", 2), keys[1], "KeysFor(s1) = %q", keys)
}

func TestProviderRejectsBadRequests(t *testing.T) {
	base := payReq("u1", "s1", 1)
	tests := []struct {
		name    string
		mutate  func(*billing.PaymentRequest)
		wantErr error // nil: any error
	}{
		{"different amount", func(r *billing.PaymentRequest) { r.Amount++ }, billingtest.ErrKeyReused},
		{"different subscription", func(r *billing.PaymentRequest) { r.SubscriptionID = "s2" }, billingtest.ErrKeyReused},
		{"different user", func(r *billing.PaymentRequest) { r.UserID = "u2" }, billingtest.ErrKeyReused},
		{"empty key", func(r *billing.PaymentRequest) { r.IdempotencyKey = "" }, nil},
		{"negative amount", func(r *billing.PaymentRequest) { r.IdempotencyKey = "other"; r.Amount = -1 }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &billingtest.Provider{}
			_, err := p.Collect(t.Context(), base)
			require.NoError(t, err)
			req := base
			tt.mutate(&req)
			res, err := p.Collect(t.Context(), req)
			require.Error(t, err, "want %v", tt.wantErr)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
			}
			assert.Zero(t, res, "result with error")
			assert.Len(t, p.Charges(), 1, "charges")
			if calls := p.Calls(); assert.Len(t, calls, 2, "calls = %+v", calls) {
				assert.Error(t, calls[1].Err, "calls = %+v", calls)
				assert.False(t, calls[1].Replayed, "calls = %+v", calls)
			}
			// The original parameters still replay.
			_, err = p.Collect(t.Context(), base)
			assert.NoError(t, err, "replay after rejection")
		})
	}
}

func TestProviderDoneContextChargesNothing(t *testing.T) {
	p := &billingtest.Provider{}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := p.Collect(ctx, payReq("u1", "s1", 1))
	require.ErrorIs(t, err, context.Canceled)
	require.Empty(t, p.Charges(), "charges")
	require.Equal(t, 1, p.CallCount(), "calls")
}

func TestProviderConcurrentSameKeyChargesOnce(t *testing.T) {
	for _, step := range []billingtest.Step{billingtest.Succeeded(), billingtest.Pending(), billingtest.Declined("NSF", true)} {
		t.Run(fmt.Sprint(step.Outcome), func(t *testing.T) {
			p := billingtest.NewProvider(billingtest.ProviderOptions{Default: billingtest.Always(step)})
			const n = 20
			results := make([]billing.PaymentResult, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range n {
				wg.Go(func() {
					<-start
					results[i], errs[i] = p.Collect(t.Context(), payReq("u1", "s1", 1))
				})
			}
			close(start)
			wg.Wait()
			for i := range n {
				assert.NoError(t, errs[i], "answer %d", i)
				assert.Equal(t, results[0], results[i], "answer %d; answer 0 = %+v", i, results[0])
			}
			assert.Equal(t, step.Outcome, results[0].Outcome, "outcome %v, want %v", results[0].Outcome, step.Outcome)
			wantCharges := 1
			if step.Outcome == billing.OutcomeDeclined {
				wantCharges = 0
			}
			assert.Len(t, p.Charges(), wantCharges, "charges")
			replayed := 0
			for _, c := range p.Calls() {
				if c.Replayed {
					replayed++
				}
			}
			assert.Equal(t, n, p.CallCount(), "calls")
			assert.Equal(t, n-1, replayed, "replayed")
			billingtest.RequireNoDoubleCharge(t, p)
		})
	}
}

func TestProviderSettlements(t *testing.T) {
	p := billingtest.NewProvider(billingtest.ProviderOptions{Default: billingtest.Always(billingtest.Pending())})
	p.SetUser("u3", billingtest.Succeeded())
	for _, r := range []billing.PaymentRequest{payReq("u1", "s1", 1), payReq("u2", "s2", 1), payReq("u3", "s3", 1)} {
		_, err := p.Collect(t.Context(), r)
		require.NoError(t, err)
	}
	k1, k2, k3 := billing.IdempotencyKey("s1", 1), billing.IdempotencyKey("s2", 1), billing.IdempotencyKey("s3", 1)
	require.Equal(t, k1+" "+k2, chargeKeys(p.PendingSettlements()), "PendingSettlements")
	require.NoError(t, p.Settle(k1))
	require.NoError(t, p.Return(k2))
	require.Empty(t, chargeKeys(p.PendingSettlements()), "PendingSettlements after resolving")
	for _, key := range []string{k1, k2, k3, "nope"} {
		assert.Error(t, p.Settle(key), "Settle(%q) accepted", key)
		assert.Error(t, p.Return(key), "Return(%q) accepted", key)
	}
	s1 := p.ChargesFor("s1")[0]
	assert.True(t, s1.Settled, "s1 charge = %+v", s1)
	assert.False(t, s1.Returned, "s1 charge = %+v", s1)
	s2 := p.ChargesFor("s2")[0]
	assert.False(t, s2.Settled, "s2 charge = %+v", s2)
	assert.True(t, s2.Returned, "s2 charge = %+v", s2)
	// A replay still answers the first response.
	if res, err := p.Collect(t.Context(), payReq("u1", "s1", 1)); assert.NoError(t, err, "replay after settlement") {
		assert.Equal(t, billing.OutcomePending, res.Outcome, "replay after settlement = %+v", res)
	}
	// A returned debit is retried under the next attempt's key: not a
	// double charge.
	_, err := p.Collect(t.Context(), payReq("u2", "s2", 2))
	require.NoError(t, err)
	billingtest.RequireNoDoubleCharge(t, p)
}

func chargeKeys(cs []billingtest.Charge) string {
	keys := make([]string, len(cs))
	for i, c := range cs {
		keys[i] = c.Key
	}
	return strings.Join(keys, " ")
}

func TestRequireNoDoubleCharge(t *testing.T) {
	tests := []struct {
		name   string
		setup  func(t *testing.T, p *billingtest.Provider)
		wantIn []string // substrings of the failure; none: passes
	}{
		{
			name: "one charge per subscription",
			setup: func(t *testing.T, p *billingtest.Provider) {
				collectOne(t, p, payReq("u1", "s1", 1))
				collectOne(t, p, payReq("u1", "s1", 1))
				collectOne(t, p, payReq("u1", "s2", 1))
			},
		},
		{
			name: "declines before the charge",
			setup: func(t *testing.T, p *billingtest.Provider) {
				p.SetUser("u1", billingtest.Declined("NSF", true), billingtest.Declined("NSF", true), billingtest.Succeeded())
				for n := 1; n <= 3; n++ {
					collectOne(t, p, payReq("u1", "s1", n))
				}
			},
		},
		{
			name: "two attempts both succeeded",
			setup: func(t *testing.T, p *billingtest.Provider) {
				collectOne(t, p, payReq("u1", "s1", 1))
				collectOne(t, p, payReq("u1", "s1", 2))
				collectOne(t, p, payReq("u1", "s2", 1))
			},
			wantIn: []string{`"s1"`, billing.IdempotencyKey("s1", 1), billing.IdempotencyKey("s1", 2)},
		},
		{
			name: "pending then succeeded under another key",
			setup: func(t *testing.T, p *billingtest.Provider) {
				p.SetUser("u1", billingtest.Pending(), billingtest.Succeeded())
				collectOne(t, p, payReq("u1", "s1", 1))
				r := payReq("u1", "s1", 1)
				r.IdempotencyKey = "fresh-key-after-crash"
				collectOne(t, p, r)
			},
			wantIn: []string{`"s1"`, billing.IdempotencyKey("s1", 1), "fresh-key-after-crash"},
		},
		{
			name: "settled pending still counts",
			setup: func(t *testing.T, p *billingtest.Provider) {
				p.SetUser("u1", billingtest.Pending())
				collectOne(t, p, payReq("u1", "s1", 1))
				require.NoError(t, p.Settle(billing.IdempotencyKey("s1", 1)))
				collectOne(t, p, payReq("u1", "s1", 2))
			},
			wantIn: []string{`"s1"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &billingtest.Provider{}
			tt.setup(t, p)
			msg := (&fatalRecorder{TB: t}).run(func(tb testing.TB) { billingtest.RequireNoDoubleCharge(tb, p) })
			if len(tt.wantIn) == 0 {
				require.Equal(t, "", msg, "reported %q", msg)
				return
			}
			for _, s := range tt.wantIn {
				assert.Contains(t, msg, s, "failure does not mention %q", s)
			}
			assert.NotContains(t, msg, `"s2"`, "failure names s2, charged once")
		})
	}
}

func TestRandomProviderDeterministic(t *testing.T) {
	const subs = 2000
	run := func(seed int64, reverse bool) map[string]billing.PaymentOutcome {
		p := billingtest.NewRandomProvider(seed, 0.2, 0.3)
		var wg sync.WaitGroup
		for i := range subs {
			if reverse {
				i = subs - 1 - i
			}
			wg.Go(func() {
				_, err := p.Collect(t.Context(), payReq("u", fmt.Sprint("s", i), 1))
				assert.NoError(t, err)
			})
		}
		wg.Wait()
		out := map[string]billing.PaymentOutcome{}
		for _, c := range p.Calls() {
			out[c.Request.IdempotencyKey] = c.Result.Outcome
		}
		return out
	}
	a, b := run(7, false), run(7, true)
	require.Len(t, a, subs, "answers")
	counts := map[billing.PaymentOutcome]int{}
	for k, o := range a {
		require.Equal(t, o, b[k], "key %s: with the same seed", k)
		counts[o]++
	}
	// Rates within a generous band of 0.2 declined, 0.3 pending.
	for o, want := range map[billing.PaymentOutcome]float64{billing.OutcomeDeclined: 0.2, billing.OutcomePending: 0.3, billing.OutcomeSucceeded: 0.5} {
		assert.InDelta(t, want, float64(counts[o])/subs, 0.05, "%v rate, want about %.2f", o, want)
	}
	c := run(8, false)
	differ := 0
	for k, o := range a {
		if c[k] != o {
			differ++
		}
	}
	assert.NotZero(t, differ, "seeds 7 and 8 gave the same outcomes")
}

func TestProviderRandomScriptEdges(t *testing.T) {
	req := payReq("u", "s", 1)
	for _, tt := range []struct {
		decline, pending float64
		want             billing.PaymentOutcome
	}{{0, 0, billing.OutcomeSucceeded}, {1, 0, billing.OutcomeDeclined}, {0, 1, billing.OutcomePending}} {
		assert.Equal(t, tt.want, billingtest.RandomScript(1, tt.decline, tt.pending)(req).Outcome, "rates %v/%v", tt.decline, tt.pending)
	}
	nan := 0.0
	nan /= nan
	for _, rates := range [][2]float64{{-0.1, 0}, {0, 1.1}, {0.6, 0.6}, {nan, 0}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("RandomScript(%v, %v) did not panic", rates[0], rates[1])
				}
			}()
			billingtest.RandomScript(1, rates[0], rates[1])
		}()
	}
}
