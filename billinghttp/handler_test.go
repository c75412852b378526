package billinghttp_test

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billinghttp"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// now is the tests' clock: after alice's ERROR record, before the
// SCHEDULED records of 2024-03-25.
var now = time.Date(2024, 3, 20, 12, 0, 0, 0, time.UTC)

// errTokenService is what the tests' Authorizer returns for the "broken"
// token; its text must never reach a response.
var errTokenService = errors.New("token service: dial tcp secret-token-host:9999: connection refused")

func day(s string) time.Time {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		panic(err)
	}
	return t
}

// rec builds a record of user billed on the given day in status st.
func rec(user, id, billed string, st billing.Status) billing.Period {
	bd := day(billed)
	s := billing.Period{
		UserID: user, SubscriptionID: id, BillingDate: bd, Amount: billing.MustParseAmount("4.99"),
		Status: st, BillingPeriod: billing.BillingPeriod(bd), Term: billing.TermMonthly, AnchorDay: bd.Day(),
		ReceiptTierName: "Plus:v2", Process: billing.ProcessInitial,
		LastRunDate: bd.AddDate(0, 0, -30), CreatedDate: bd.AddDate(0, 0, -30),
	}
	switch st {
	case billing.StatusError:
		s.InitialRunDate, s.LastRunDate, s.Attempt = bd.Add(time.Hour), bd.Add(time.Hour), 1
		s.PaymentError, s.TransactionID = "insufficient funds", "txn-0"
	case billing.StatusCompleted, billing.StatusCancelled:
		s.InitialRunDate, s.LastRunDate, s.CompletionDate, s.Attempt = bd.Add(time.Hour), bd.Add(time.Hour), bd.Add(time.Hour), 1
	case billing.StatusPaused:
		s.PauseDurationMonths = 2
	}
	return s
}

// fixture is every test's data:
//
//	alice  a-old COMPLETED 02-15, a-err ERROR 03-15, a-next SCHEDULED 04-15
//	bob    b-sched SCHEDULED 03-25 (the other user)
//	carol  c-paused PAUSED 03-25
//	dave   d-new SCHEDULED 03-25, never attempted
//	erin   e-gone CANCELLED 01-10
func fixture() []billing.Period {
	return []billing.Period{
		rec("alice", "a-old", "2024-02-15", billing.StatusCompleted),
		rec("alice", "a-err", "2024-03-15", billing.StatusError),
		rec("alice", "a-next", "2024-04-15", billing.StatusScheduled),
		rec("bob", "b-sched", "2024-03-25", billing.StatusScheduled),
		rec("carol", "c-paused", "2024-03-25", billing.StatusPaused),
		rec("dave", "d-new", "2024-03-25", billing.StatusScheduled),
		rec("erin", "e-gone", "2024-01-10", billing.StatusCancelled),
	}
}

// env is a handler on the in-memory store with a real collector; every
// storage call of the handler and the collector goes through faults.
// newEnv's options edit the collector's configuration (a price list, …).
type env struct {
	t        *testing.T
	store    *memory.Store
	clock    *billingtest.Clock
	locker   *billingtest.Locker
	provider *billingtest.Provider
	faults   *faults
	logs     *syncBuffer
	c        *billing.Collector
	h        http.Handler
}

func newEnv(t *testing.T, opts ...func(*billing.Config)) *env {
	t.Helper()
	e := &env{
		t: t, store: newStore(t), clock: billingtest.NewClock(now),
		faults: newFaults(), logs: &syncBuffer{},
	}
	e.locker = billingtest.NewLocker(e.clock, time.Minute)
	e.provider = billingtest.NewProvider(billingtest.ProviderOptions{Clock: e.clock})
	for _, s := range fixture() {
		require.NoError(t, e.store.Repository().Add(t.Context(), &s), "seeding %s", s.SubscriptionID)
	}
	repo := &faultRepo{inner: e.store.Repository(), f: e.faults}
	hist := &faultHistory{inner: e.store.History(), f: e.faults}
	ids := 0
	cfg := billing.Config{
		Repository: repo, History: hist, Locker: e.locker, Provider: e.provider, Clock: e.clock,
		NewID: func() string { ids++; return "new-" + string(rune('0'+ids)) },
	}
	for _, o := range opts {
		o(&cfg)
	}
	c, err := billing.NewCollector(cfg)
	require.NoError(t, err)
	e.c = c
	logger := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e.h, err = billinghttp.New(billinghttp.Config{
		Repository: repo, History: hist, Collector: c, Authorize: tokenAuth, Logger: logger,
		Challenge: `Bearer realm="billing"`,
	})
	require.NoError(t, err)
	return e
}

// do sends a request with the token (none when "") and body.
func (e *env) do(method, path, token, body string) *httptest.ResponseRecorder {
	e.t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	return w
}

// stored reads a record from the store, around the counting wrapper.
func (e *env) stored(id string) billing.Period {
	e.t.Helper()
	s, err := e.store.Repository().GetByID(e.t.Context(), id)
	require.NoError(e.t, err, "reading %s", id)
	return s
}

// response holds every top-level field an answer may have; decoding it
// strictly checks that answers carry nothing else.
type response struct {
	Subscriptions []billinghttp.SubscriptionJSON `json:"subscriptions"`
	Subscription  *billinghttp.SubscriptionJSON  `json:"subscription"`
	History       []billinghttp.SubscriptionJSON `json:"history"`
	Report        *billinghttp.ReportJSON        `json:"report"`
	Before        *billinghttp.SubscriptionJSON  `json:"before"`
	After         *billinghttp.SubscriptionJSON  `json:"after"`
	Created       []billinghttp.SubscriptionJSON `json:"created"`
	Error         *billinghttp.ErrorDetail       `json:"error"`
}

func decode(t *testing.T, w *httptest.ResponseRecorder) response {
	t.Helper()
	if ct := w.Header().Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Fatalf("Content-Type = %q; body %s", ct, w.Body)
	}
	var resp response
	dec := json.NewDecoder(strings.NewReader(w.Body.String()))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&resp), "decoding %s", w.Body)
	return resp
}

func ids(subs []billinghttp.SubscriptionJSON) []string {
	out := []string{}
	for _, s := range subs {
		out = append(out, s.SubscriptionID)
	}
	return out
}

// TestRoutes calls every route successfully and checks the answer and
// what was stored.
func TestRoutes(t *testing.T) {
	cases := []struct {
		name                string
		setup               func(e *env)
		method, path, token string
		body                string
		status              int
		check               func(t *testing.T, e *env, r response)
	}{
		{
			name: "list", method: "GET", path: "/alice/subscriptions", token: "alice", status: 200,
			check: func(t *testing.T, _ *env, r response) {
				assert.Equal(t, "a-old,a-err,a-next", strings.Join(ids(r.Subscriptions), ","), "ids")
			},
		},
		{
			name: "list of a user without records", method: "GET", path: "/nobody/subscriptions", token: "nobody", status: 200,
			check: func(t *testing.T, _ *env, r response) {
				if r.Subscriptions == nil || len(r.Subscriptions) != 0 {
					t.Errorf("subscriptions = %v, want []", r.Subscriptions)
				}
			},
		},
		{
			name: "get", method: "GET", path: "/alice/subscriptions/a-err", token: "alice", status: 200,
			check: func(t *testing.T, _ *env, r response) {
				s := r.Subscription
				assert.Equal(t, "alice", s.UserID, "user_id")
				assert.Equal(t, "2024-03-15T00:00:00Z", s.BillingDate, "billing_date")
				assert.Equal(t, "4.99", s.BillingAmount, "billing_amount")
				assert.Equal(t, "ERROR", s.BillingStatus, "billing_status")
				assert.Equal(t, "03/2024", s.BillingPeriod, "billing_period")
				assert.Equal(t, "insufficient funds", s.PaymentError, "payment_error")
				assert.Equal(t, "2024-03-15T01:00:00Z", s.LastRunDate, "last_run_date")
				assert.Equal(t, "MONTHLY", s.Term, "term")
				assert.Equal(t, "Plus:v2", s.ReceiptTierName, "receipt_tier_name")
			},
		},
		{
			name: "get by an operator", method: "GET", path: "/alice/subscriptions/a-next", token: "operator", status: 200,
			check: func(t *testing.T, _ *env, r response) { assert.Equal(t, "a-next", r.Subscription.SubscriptionID, "id") },
		},
		{
			name: "history", method: "GET", path: "/alice/subscriptions/a-next/history", token: "alice", status: 200,
			setup: func(e *env) {
				if w := e.do("POST", "/alice/subscriptions/a-next/pause", "alice", `{"months": 1}`); w.Code != 200 {
					e.t.Fatalf("pause: %d %s", w.Code, w.Body)
				}
			},
			check: func(t *testing.T, _ *env, r response) {
				require.Len(t, r.History, 2, "history = %+v, want 2 rows", r.History)
				assert.Equal(t, "SCHEDULED", r.History[0].BillingStatus, "row 0 status")
				assert.Equal(t, "PAUSED", r.History[1].BillingStatus, "row 1 status")
			},
		},
		{
			name: "pay", method: "POST", path: "/alice/subscriptions/a-err/pay", token: "alice", status: 200,
			check: func(t *testing.T, e *env, r response) {
				assert.Equal(t, 1, r.Report.Attempted, "attempted")
				assert.Equal(t, 1, r.Report.Collected, "collected")
				assert.Equal(t, "MANUAL_REPAYMENT", r.Report.Kind, "kind")
				assert.Equal(t, "COMPLETED", r.Subscription.BillingStatus, "status")
				assert.Equal(t, "MANUAL_REPAYMENT", r.Subscription.Process, "process")
				assert.Equal(t, billing.StatusCompleted, e.stored("a-err").Status, "stored status")
				assert.Equal(t, 1, len(e.provider.ChargesFor("a-err")), "charges")
			},
		},
		{
			name: "pay declined", method: "POST", path: "/alice/subscriptions/a-err/pay", token: "alice", body: "{}", status: 200,
			setup: func(e *env) { e.provider.SetUser("alice", billingtest.Declined("card expired", true)) },
			check: func(t *testing.T, _ *env, r response) {
				assert.Equal(t, 1, r.Report.Declined, "declined")
				assert.Equal(t, "ERROR", r.Subscription.BillingStatus, "status")
				assert.Equal(t, "card expired", r.Subscription.PaymentError, "payment_error")
			},
		},
		{
			name: "waive", method: "POST", path: "/dave/subscriptions/d-new/waive", token: "operator", status: 200,
			check: func(t *testing.T, e *env, r response) {
				assert.Equal(t, "SCHEDULED", r.Before.BillingStatus, "before")
				assert.Equal(t, "WAIVED", r.After.BillingStatus, "after")
				require.Len(t, r.Created, 1, "created = %+v, want the next period", r.Created)
				assert.Equal(t, "2024-04-25T00:00:00Z", r.Created[0].BillingDate, "next billing_date")
				assert.Equal(t, "SCHEDULED", r.Created[0].BillingStatus, "next status")
				assert.Equal(t, billing.StatusWaived, e.stored("d-new").Status, "stored")
			},
		},
		{
			name: "cancel", method: "POST", path: "/alice/subscriptions/a-next/cancel", token: "alice", body: "{}", status: 200,
			check: func(t *testing.T, e *env, r response) {
				assert.Equal(t, "CANCELLED", r.After.BillingStatus, "after")
				if r.Created == nil || len(r.Created) != 0 {
					t.Errorf("created = %v, want []", r.Created)
				}
				assert.Equal(t, billing.StatusCancelled, e.stored("a-next").Status, "stored")
			},
		},
		{
			name: "pause", method: "POST", path: "/dave/subscriptions/d-new/pause", token: "dave", body: `{"months": 2}`, status: 200,
			check: func(t *testing.T, e *env, r response) {
				assert.Equal(t, "PAUSED", r.After.BillingStatus, "after")
				assert.Equal(t, 2, r.After.PauseDurationMonths, "months")
				assert.Equal(t, 2, e.stored("d-new").PauseDurationMonths, "stored")
			},
		},
		{
			name: "resume", method: "POST", path: "/carol/subscriptions/c-paused/resume", token: "carol", status: 200,
			check: func(t *testing.T, _ *env, r response) {
				assert.Equal(t, "SCHEDULED", r.After.BillingStatus, "after")
				assert.Equal(t, "pause-resume", r.After.UpdatedEvent, "updated_event")
			},
		},
		{
			name: "billing date", method: "POST", path: "/dave/subscriptions/d-new/billing-date", token: "operator",
			body: `{"billing_date": "2024-04-02"}`, status: 200,
			check: func(t *testing.T, e *env, r response) {
				assert.Equal(t, "2024-03-25T00:00:00Z", r.Before.BillingDate, "before")
				assert.Equal(t, "2024-04-02T00:00:00Z", r.After.BillingDate, "after")
				assert.Equal(t, day("2024-04-02"), e.stored("d-new").BillingDate, "stored")
			},
		},
		{
			name: "billing date RFC 3339 in UTC", method: "POST", path: "/dave/subscriptions/d-new/billing-date", token: "operator",
			body: `{"billing_date": "2024-04-02T09:30:00+00:00"}`, status: 200,
			check: func(t *testing.T, _ *env, r response) {
				assert.Equal(t, "2024-04-02T09:30:00Z", r.After.BillingDate, "after")
			},
		},
		{
			name: "tier upgrade", method: "POST", path: "/dave/subscriptions/d-new/tier", token: "operator",
			body: `{"tier": "Max:v1", "amount": "9.99"}`, status: 200,
			check: func(t *testing.T, e *env, r response) {
				assert.Equal(t, "Max:v1", r.After.ReceiptTierName, "tier")
				assert.Equal(t, "9.99", r.After.BillingAmount, "amount")
				assert.Equal(t, billing.MustParseAmount("9.99"), e.stored("d-new").Amount, "stored")
			},
		},
		{
			name: "tier downgrade", method: "POST", path: "/dave/subscriptions/d-new/tier", token: "operator",
			body: `{"tier": "Lite:v1", "amount": "2.99", "downgrade": true}`, status: 200,
			check: func(t *testing.T, _ *env, r response) {
				assert.Equal(t, true, r.After.IsPendingDowngrade, "pending")
				assert.Equal(t, "Lite:v1", r.After.PendingTierName, "pending tier")
				assert.Equal(t, "2.99", r.After.PendingAmount, "pending amount")
				assert.Equal(t, "4.99", r.After.BillingAmount, "amount")
			},
		},
		{
			name: "reactivate", method: "POST", path: "/erin/reactivate", token: "operator",
			body: `{"billing_date": "2024-04-01"}`, status: 201,
			check: func(t *testing.T, e *env, r response) {
				if len(r.Created) != 1 || r.Before != nil || r.After != nil {
					t.Fatalf("answer = %+v, want one created record only", r)
				}
				c := r.Created[0]
				assert.Equal(t, "erin", c.UserID, "user")
				assert.Equal(t, "SCHEDULED", c.BillingStatus, "status")
				assert.Equal(t, "2024-04-01T00:00:00Z", c.BillingDate, "billing_date")
				assert.Equal(t, "REACTIVATION", c.Process, "process")
				assert.Equal(t, "erin", e.stored(c.SubscriptionID).UserID, "stored")
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if tc.setup != nil {
				tc.setup(e)
			}
			w := e.do(tc.method, tc.path, tc.token, tc.body)
			if w.Code != tc.status {
				t.Fatalf("%s %s: status %d, want %d; body %s", tc.method, tc.path, w.Code, tc.status, w.Body)
			}
			r := decode(t, w)
			if r.Error != nil {
				t.Fatalf("error in a success: %+v", r.Error)
			}
			tc.check(t, e, r)
		})
	}
}

// TestMountedUnderPrefix serves the API under /billing with
// http.StripPrefix, as the package documentation says.
func TestMountedUnderPrefix(t *testing.T) {
	e := newEnv(t)
	mux := http.NewServeMux()
	mux.Handle("/billing/", http.StripPrefix("/billing", e.h))
	e.h = mux
	w := e.do("GET", "/billing/alice/subscriptions/a-err", "alice", "")
	require.Equal(t, 200, w.Code, "status %d: %s", w.Code, w.Body)
	assert.Equal(t, "a-err", decode(t, w).Subscription.SubscriptionID, "id")
}

// TestNewRequiresAuthorizer checks that there is no open default.
func TestNewRequiresAuthorizer(t *testing.T) {
	store := newStore(t)
	c, err := billing.NewCollector(billing.Config{
		Repository: store.Repository(), Locker: billingtest.NewLocker(nil, 0), Provider: billingtest.NewProvider(billingtest.ProviderOptions{}),
	})
	require.NoError(t, err)
	full := billinghttp.Config{Repository: store.Repository(), History: store.History(), Collector: c, Authorize: tokenAuth}
	for _, tc := range []struct {
		name  string
		edit  func(*billinghttp.Config)
		field string
	}{
		{"no authorizer", func(c *billinghttp.Config) { c.Authorize = nil }, "Authorize"},
		{"no repository", func(c *billinghttp.Config) { c.Repository = nil }, "Repository"},
		{"no history", func(c *billinghttp.Config) { c.History = nil }, "History"},
		{"no collector", func(c *billinghttp.Config) { c.Collector = nil }, "Collector"},
		{"negative body limit", func(c *billinghttp.Config) { c.MaxBodyBytes = -1 }, "MaxBodyBytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := full
			tc.edit(&cfg)
			h, err := billinghttp.New(cfg)
			if err == nil || h != nil {
				t.Fatalf("New = %v, %v; want an error", h, err)
			}
			if !strings.Contains(err.Error(), "Config."+tc.field) {
				t.Errorf("error %q does not name Config.%s", err, tc.field)
			}
		})
	}
	if _, err := billinghttp.New(full); err != nil {
		t.Fatalf("complete config: %v", err)
	}
}
