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
func rec(user, id, billed string, st billing.Status) billing.Subscription {
	bd := day(billed)
	s := billing.Subscription{
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
func fixture() []billing.Subscription {
	return []billing.Subscription{
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
type env struct {
	t        *testing.T
	store    *memory.Store
	clock    *billingtest.Clock
	locker   *billingtest.Locker
	provider *billingtest.Provider
	faults   *faults
	logs     *syncBuffer
	h        http.Handler
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{
		t: t, store: memory.New(memory.Options{}), clock: billingtest.NewClock(now),
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
	c, err := billing.NewCollector(billing.Config{
		Repository: repo, History: hist, Locker: e.locker, Provider: e.provider, Clock: e.clock,
		NewID: func() string { ids++; return "new-" + string(rune('0'+ids)) },
	})
	require.NoError(t, err)
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
func (e *env) stored(id string) billing.Subscription {
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

func equal[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
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
				equal(t, "ids", strings.Join(ids(r.Subscriptions), ","), "a-old,a-err,a-next")
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
				equal(t, "user_id", s.UserID, "alice")
				equal(t, "billing_date", s.BillingDate, "2024-03-15T00:00:00Z")
				equal(t, "billing_amount", s.BillingAmount, "4.99")
				equal(t, "billing_status", s.BillingStatus, "ERROR")
				equal(t, "billing_period", s.BillingPeriod, "03/2024")
				equal(t, "usio_error", s.PaymentError, "insufficient funds")
				equal(t, "last_run_date", s.LastRunDate, "2024-03-15T01:00:00Z")
				equal(t, "term", s.Term, "MONTHLY")
				equal(t, "receipt_tier_name", s.ReceiptTierName, "Plus:v2")
			},
		},
		{
			name: "get by an operator", method: "GET", path: "/alice/subscriptions/a-next", token: "operator", status: 200,
			check: func(t *testing.T, _ *env, r response) { equal(t, "id", r.Subscription.SubscriptionID, "a-next") },
		},
		{
			name: "history", method: "GET", path: "/alice/subscriptions/a-next/history", token: "alice", status: 200,
			setup: func(e *env) {
				if w := e.do("POST", "/alice/subscriptions/a-next/pause", "alice", `{"months": 1}`); w.Code != 200 {
					e.t.Fatalf("pause: %d %s", w.Code, w.Body)
				}
			},
			check: func(t *testing.T, _ *env, r response) {
				if len(r.History) != 2 {
					t.Fatalf("history = %+v, want 2 rows", r.History)
				}
				equal(t, "row 0 status", r.History[0].BillingStatus, "SCHEDULED")
				equal(t, "row 1 status", r.History[1].BillingStatus, "PAUSED")
			},
		},
		{
			name: "pay", method: "POST", path: "/alice/subscriptions/a-err/pay", token: "alice", status: 200,
			check: func(t *testing.T, e *env, r response) {
				equal(t, "attempted", r.Report.Attempted, 1)
				equal(t, "collected", r.Report.Collected, 1)
				equal(t, "kind", r.Report.Kind, "MANUAL_REPAYMENT")
				equal(t, "status", r.Subscription.BillingStatus, "COMPLETED")
				equal(t, "process", r.Subscription.Process, "MANUAL_REPAYMENT")
				equal(t, "stored status", e.stored("a-err").Status, billing.StatusCompleted)
				equal(t, "charges", len(e.provider.ChargesFor("a-err")), 1)
			},
		},
		{
			name: "pay declined", method: "POST", path: "/alice/subscriptions/a-err/pay", token: "alice", body: "{}", status: 200,
			setup: func(e *env) { e.provider.SetUser("alice", billingtest.Declined("card expired", true)) },
			check: func(t *testing.T, _ *env, r response) {
				equal(t, "declined", r.Report.Declined, 1)
				equal(t, "status", r.Subscription.BillingStatus, "ERROR")
				equal(t, "usio_error", r.Subscription.PaymentError, "card expired")
			},
		},
		{
			name: "waive", method: "POST", path: "/dave/subscriptions/d-new/waive", token: "dave", status: 200,
			check: func(t *testing.T, e *env, r response) {
				equal(t, "before", r.Before.BillingStatus, "SCHEDULED")
				equal(t, "after", r.After.BillingStatus, "WAIVED")
				if len(r.Created) != 1 {
					t.Fatalf("created = %+v, want the next period", r.Created)
				}
				equal(t, "next billing_date", r.Created[0].BillingDate, "2024-04-25T00:00:00Z")
				equal(t, "next status", r.Created[0].BillingStatus, "SCHEDULED")
				equal(t, "stored", e.stored("d-new").Status, billing.StatusWaived)
			},
		},
		{
			name: "cancel", method: "POST", path: "/alice/subscriptions/a-next/cancel", token: "alice", body: "{}", status: 200,
			check: func(t *testing.T, e *env, r response) {
				equal(t, "after", r.After.BillingStatus, "CANCELLED")
				if r.Created == nil || len(r.Created) != 0 {
					t.Errorf("created = %v, want []", r.Created)
				}
				equal(t, "stored", e.stored("a-next").Status, billing.StatusCancelled)
			},
		},
		{
			name: "pause", method: "POST", path: "/dave/subscriptions/d-new/pause", token: "dave", body: `{"months": 2}`, status: 200,
			check: func(t *testing.T, e *env, r response) {
				equal(t, "after", r.After.BillingStatus, "PAUSED")
				equal(t, "months", r.After.PauseDurationMonths, 2)
				equal(t, "stored", e.stored("d-new").PauseDurationMonths, 2)
			},
		},
		{
			name: "resume", method: "POST", path: "/carol/subscriptions/c-paused/resume", token: "carol", status: 200,
			check: func(t *testing.T, _ *env, r response) {
				equal(t, "after", r.After.BillingStatus, "SCHEDULED")
				equal(t, "updated_event", r.After.UpdatedEvent, "pause-resume")
			},
		},
		{
			name: "billing date", method: "POST", path: "/dave/subscriptions/d-new/billing-date", token: "dave",
			body: `{"billing_date": "2024-04-02"}`, status: 200,
			check: func(t *testing.T, e *env, r response) {
				equal(t, "before", r.Before.BillingDate, "2024-03-25T00:00:00Z")
				equal(t, "after", r.After.BillingDate, "2024-04-02T00:00:00Z")
				equal(t, "stored", e.stored("d-new").BillingDate, day("2024-04-02"))
			},
		},
		{
			name: "billing date RFC 3339", method: "POST", path: "/dave/subscriptions/d-new/billing-date", token: "dave",
			body: `{"billing_date": "2024-04-02T09:30:00+02:00"}`, status: 200,
			check: func(t *testing.T, _ *env, r response) {
				equal(t, "after", r.After.BillingDate, "2024-04-02T07:30:00Z")
			},
		},
		{
			name: "tier upgrade", method: "POST", path: "/dave/subscriptions/d-new/tier", token: "dave",
			body: `{"tier": "Max:v1", "amount": "9.99"}`, status: 200,
			check: func(t *testing.T, e *env, r response) {
				equal(t, "tier", r.After.ReceiptTierName, "Max:v1")
				equal(t, "amount", r.After.BillingAmount, "9.99")
				equal(t, "stored", e.stored("d-new").Amount, billing.MustParseAmount("9.99"))
			},
		},
		{
			name: "tier downgrade", method: "POST", path: "/dave/subscriptions/d-new/tier", token: "dave",
			body: `{"tier": "Lite:v1", "amount": "2.99", "downgrade": true}`, status: 200,
			check: func(t *testing.T, _ *env, r response) {
				equal(t, "pending", r.After.IsPendingDowngrade, true)
				equal(t, "pending tier", r.After.PendingTierName, "Lite:v1")
				equal(t, "pending amount", r.After.PendingAmount, "2.99")
				equal(t, "amount", r.After.BillingAmount, "4.99")
			},
		},
		{
			name: "reactivate", method: "POST", path: "/erin/reactivate", token: "erin",
			body: `{"billing_date": "2024-04-01"}`, status: 201,
			check: func(t *testing.T, e *env, r response) {
				if len(r.Created) != 1 || r.Before != nil || r.After != nil {
					t.Fatalf("answer = %+v, want one created record only", r)
				}
				c := r.Created[0]
				equal(t, "user", c.UserID, "erin")
				equal(t, "status", c.BillingStatus, "SCHEDULED")
				equal(t, "billing_date", c.BillingDate, "2024-04-01T00:00:00Z")
				equal(t, "process", c.Process, "REACTIVATION")
				equal(t, "stored", e.stored(c.SubscriptionID).UserID, "erin")
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
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	equal(t, "id", decode(t, w).Subscription.SubscriptionID, "a-err")
}

// TestNewRequiresAuthorizer checks that there is no open default.
func TestNewRequiresAuthorizer(t *testing.T) {
	store := memory.New(memory.Options{})
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
