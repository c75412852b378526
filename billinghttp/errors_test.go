package billinghttp_test

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billinghttp"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// secret marks text that storage, the authorizer or the processor put in
// their errors: it may be logged, never sent.
const secret = "secret-"

// TestErrorStatuses drives every error status through the handler and
// checks the JSON error, its code and field, that nothing internal is
// sent, and that a refused write changed nothing.
func TestErrorStatuses(t *testing.T) {
	storageErr := errors.New("dynamodb: AccessDeniedException: table secret-billing-prod, role arn:aws:iam::123:role/secret-role")
	cases := []struct {
		name                string
		setup               func(e *env)
		method, path, token string
		body                string
		header              map[string]string
		status              int
		code, field         string
		// unchanged names a record the request must leave as it was.
		unchanged string
		// logged must appear in the log (the real error of a 5xx).
		logged string
	}{
		// 400: bad input.
		{name: "malformed JSON", method: "POST", path: "/dave/subscriptions/d-new/pause", token: "dave", body: `{"months": `, status: 400, code: "invalid_request", unchanged: "d-new"},
		{name: "JSON syntax error", method: "POST", path: "/dave/subscriptions/d-new/pause", token: "dave", body: `{"months" 2}`, status: 400, code: "invalid_request", unchanged: "d-new"},
		{name: "body not an object", method: "POST", path: "/dave/subscriptions/d-new/pause", token: "dave", body: `[2]`, status: 400, code: "invalid_request", unchanged: "d-new"},
		{name: "trailing object", method: "POST", path: "/dave/subscriptions/d-new/pause", token: "dave", body: `{"months": 2} {"months": 3}`, status: 400, code: "invalid_request", unchanged: "d-new"},
		{name: "trailing garbage", method: "POST", path: "/dave/subscriptions/d-new/pause", token: "dave", body: `{"months": 2} x`, status: 400, code: "invalid_request", unchanged: "d-new"},
		{name: "unknown field", method: "POST", path: "/dave/subscriptions/d-new/pause", token: "dave", body: `{"months": 2, "weeks": 1}`, status: 400, code: "unknown_field", field: "weeks", unchanged: "d-new"},
		{name: "unknown field of a body-less action", method: "POST", path: "/dave/subscriptions/d-new/cancel", token: "dave", body: `{"force": true}`, status: 400, code: "unknown_field", field: "force", unchanged: "d-new"},
		{name: "trailing data after an empty object", method: "POST", path: "/alice/subscriptions/a-err/pay", token: "alice", body: `{}{}`, status: 400, code: "invalid_request", unchanged: "a-err"},
		{name: "empty body where one is required", method: "POST", path: "/dave/subscriptions/d-new/pause", token: "dave", status: 400, code: "invalid_request", unchanged: "d-new"},
		{name: "months missing", method: "POST", path: "/dave/subscriptions/d-new/pause", token: "dave", body: `{}`, status: 400, code: "invalid_request", field: "months", unchanged: "d-new"},
		{name: "months zero", method: "POST", path: "/dave/subscriptions/d-new/pause", token: "dave", body: `{"months": 0}`, status: 400, code: "invalid_request", field: "months", unchanged: "d-new"},
		{name: "months too many", method: "POST", path: "/dave/subscriptions/d-new/pause", token: "dave", body: `{"months": 121}`, status: 400, code: "invalid_request", field: "months", unchanged: "d-new"},
		{name: "months a string", method: "POST", path: "/dave/subscriptions/d-new/pause", token: "dave", body: `{"months": "2"}`, status: 400, code: "invalid_request", field: "months", unchanged: "d-new"},
		{name: "months a fraction", method: "POST", path: "/dave/subscriptions/d-new/pause", token: "dave", body: `{"months": 2.5}`, status: 400, code: "invalid_request", field: "months", unchanged: "d-new"},
		{name: "bad date", method: "POST", path: "/dave/subscriptions/d-new/billing-date", token: "operator", body: `{"billing_date": "2024-13-01"}`, status: 400, code: "invalid_request", field: "billing_date", unchanged: "d-new"},
		{name: "date in another format", method: "POST", path: "/dave/subscriptions/d-new/billing-date", token: "operator", body: `{"billing_date": "15/03/2024"}`, status: 400, code: "invalid_request", field: "billing_date", unchanged: "d-new"},
		{name: "date missing", method: "POST", path: "/dave/subscriptions/d-new/billing-date", token: "operator", body: `{}`, status: 400, code: "invalid_request", field: "billing_date", unchanged: "d-new"},
		{name: "date a number", method: "POST", path: "/dave/subscriptions/d-new/billing-date", token: "operator", body: `{"billing_date": 20240315}`, status: 400, code: "invalid_request", field: "billing_date", unchanged: "d-new"},
		{name: "reactivation date bad", method: "POST", path: "/erin/reactivate", token: "operator", body: `{"billing_date": "tomorrow"}`, status: 400, code: "invalid_request", field: "billing_date", unchanged: "e-gone"},
		{name: "tier missing", method: "POST", path: "/dave/subscriptions/d-new/tier", token: "operator", body: `{"amount": "2.99"}`, status: 400, code: "invalid_request", field: "tier", unchanged: "d-new"},
		{name: "amount missing", method: "POST", path: "/dave/subscriptions/d-new/tier", token: "operator", body: `{"tier": "Lite:v1"}`, status: 400, code: "invalid_request", field: "amount", unchanged: "d-new"},
		{name: "amount a number", method: "POST", path: "/dave/subscriptions/d-new/tier", token: "operator", body: `{"tier": "Lite:v1", "amount": 2.99}`, status: 400, code: "invalid_request", field: "amount", unchanged: "d-new"},
		{name: "amount with three decimals", method: "POST", path: "/dave/subscriptions/d-new/tier", token: "operator", body: `{"tier": "Lite:v1", "amount": "2.999"}`, status: 400, code: "invalid_request", field: "amount", unchanged: "d-new"},
		{name: "amount negative", method: "POST", path: "/dave/subscriptions/d-new/tier", token: "operator", body: `{"tier": "Lite:v1", "amount": "-1.00"}`, status: 400, code: "invalid_request", field: "amount", unchanged: "d-new"},

		// 413: body too large.
		{name: "body too large", method: "POST", path: "/dave/subscriptions/d-new/pause", token: "dave",
			body: `{"months": 2, "pad": "` + strings.Repeat("x", billinghttp.DefaultMaxBodyBytes) + `"}`, status: 413, code: "body_too_large", unchanged: "d-new"},

		// 401 and 403: refused by the authorizer or the cross-origin check.
		{name: "no credentials", method: "GET", path: "/alice/subscriptions/a-err", status: 401, code: "unauthenticated"},
		{name: "no credentials for a write", method: "POST", path: "/alice/subscriptions/a-err/pay", status: 401, code: "unauthenticated", unchanged: "a-err"},
		{name: "another user's records", method: "GET", path: "/alice/subscriptions", token: "bob", status: 403, code: "forbidden"},
		{name: "authorizer failure", method: "POST", path: "/alice/subscriptions/a-next/cancel", token: "broken", status: 403, code: "forbidden", unchanged: "a-next", logged: "secret-token-host"},
		{name: "cross-origin browser write", method: "POST", path: "/alice/subscriptions/a-next/cancel", token: "alice",
			header: map[string]string{"Sec-Fetch-Site": "cross-site"}, status: 403, code: "forbidden", unchanged: "a-next"},

		// 404: unknown.
		{name: "unknown subscription", method: "GET", path: "/alice/subscriptions/nope", token: "alice", status: 404, code: "not_found"},
		{name: "another user's subscription", method: "GET", path: "/alice/subscriptions/b-sched", token: "alice", status: 404, code: "not_found"},
		{name: "unknown subscription's history", method: "GET", path: "/alice/subscriptions/nope/history", token: "alice", status: 404, code: "not_found"},
		{name: "unknown subscription's payment", method: "POST", path: "/alice/subscriptions/nope/pay", token: "alice", status: 404, code: "not_found"},
		{name: "unknown route", method: "GET", path: "/alice/invoices", token: "alice", status: 404, code: "not_found"},
		{name: "unknown action", method: "POST", path: "/alice/subscriptions/a-err/refund", token: "alice", status: 404, code: "not_found", unchanged: "a-err"},
		{name: "reactivation without records", method: "POST", path: "/nobody/reactivate", token: "operator", body: `{"billing_date": "2024-04-01"}`, status: 404, code: "not_found"},

		// 405: the path exists with another method.
		{name: "GET of a POST route", method: "GET", path: "/alice/subscriptions/a-err/pay", token: "alice", status: 405, code: "method_not_allowed", unchanged: "a-err"},
		{name: "POST of a GET route", method: "POST", path: "/alice/subscriptions", token: "alice", status: 405, code: "method_not_allowed"},

		// 409: conflicts with the record's state or another writer.
		{name: "cancel a cancelled record", method: "POST", path: "/erin/subscriptions/e-gone/cancel", token: "erin", status: 409, code: "not_collectible", unchanged: "e-gone"},
		{name: "pay a completed record", method: "POST", path: "/alice/subscriptions/a-old/pay", token: "alice", status: 409, code: "not_collectible", unchanged: "a-old"},
		{name: "pay a record not yet due", method: "POST", path: "/alice/subscriptions/a-next/pay", token: "alice", status: 409, code: "not_collectible", unchanged: "a-next"},
		{name: "pause an ERROR record", method: "POST", path: "/alice/subscriptions/a-err/pause", token: "alice", body: `{"months": 1}`, status: 409, code: "not_collectible", unchanged: "a-err"},
		{name: "resume a SCHEDULED record", method: "POST", path: "/dave/subscriptions/d-new/resume", token: "dave", status: 409, code: "not_collectible", unchanged: "d-new"},
		{name: "reactivate a user with open records", method: "POST", path: "/alice/reactivate", token: "operator", body: `{"billing_date": "2024-05-01"}`, status: 409, code: "not_collectible"},
		{name: "user's lock held", method: "POST", path: "/alice/subscriptions/a-err/pay", token: "alice", status: 409, code: "locked", unchanged: "a-err",
			setup: func(e *env) {
				if _, err := e.locker.Lock(e.t.Context(), "alice"); err != nil {
					e.t.Fatal(err)
				}
			}},
		{name: "billing date of the previous period", method: "POST", path: "/alice/subscriptions/a-next/billing-date", token: "operator", body: `{"billing_date": "2024-03-15"}`, status: 422, code: "date_out_of_order", field: "billing_date", unchanged: "a-next"},
		{name: "billing date past the next period", method: "POST", path: "/alice/subscriptions/a-err/billing-date", token: "operator", body: `{"billing_date": "2024-05-01"}`, status: 422, code: "date_out_of_order", field: "billing_date", unchanged: "a-err"},
		{name: "billing date of the next period", method: "POST", path: "/alice/subscriptions/a-err/billing-date", token: "operator", body: `{"billing_date": "2024-04-15"}`, status: 422, code: "date_out_of_order", field: "billing_date", unchanged: "a-err"},
		{name: "reactivation date taken", method: "POST", path: "/erin/reactivate", token: "operator", body: `{"billing_date": "2024-03-10"}`, status: 400, code: "invalid_request", field: "billing_date", unchanged: "e-late",
			setup: func(e *env) {
				// A date the collector accepts (within its stale threshold)
				// that erin's cancelled record already has: attempted, it
				// cannot be reopened (a *FieldError naming it, never
				// ErrAlreadyExists).
				late := rec("erin", "e-late", "2024-03-10", billing.StatusCancelled)
				require.NoError(e.t, e.store.Repository().Add(e.t.Context(), &late))
			}},
		{name: "concurrent write", method: "POST", path: "/dave/subscriptions/d-new/cancel", token: "dave", status: 409, code: "conflict", unchanged: "d-new",
			setup: func(e *env) {
				e.faults.failOn("Repository.Update", &billing.ConflictError{Op: "update", Key: "secret-key", Reason: "secret-reason", Err: billing.ErrConflict})
			}},
		{name: "illegal transition", method: "POST", path: "/dave/subscriptions/d-new/cancel", token: "dave", status: 409, code: "illegal_transition", unchanged: "d-new",
			setup: func(e *env) {
				e.faults.failOn("Repository.Update", &billing.TransitionError{From: billing.StatusScheduled, To: billing.StatusCancelled})
			}},

		// 500: storage failures and corrupt items; nothing internal is sent.
		{name: "failing lookup", method: "GET", path: "/alice/subscriptions/a-err", token: "alice", status: 500, code: "internal", logged: "secret-billing-prod",
			setup: func(e *env) { e.faults.failOn("Repository.GetByID", storageErr) }},
		{name: "failing list", method: "GET", path: "/alice/subscriptions", token: "alice", status: 500, code: "internal", logged: "secret-billing-prod",
			setup: func(e *env) { e.faults.failOn("Repository.ListByUser", storageErr) }},
		{name: "failing history", method: "GET", path: "/alice/subscriptions/a-err/history", token: "alice", status: 500, code: "internal", logged: "secret-billing-prod",
			setup: func(e *env) { e.faults.failOn("History.ListBySubscription", storageErr) }},
		{name: "failing write", method: "POST", path: "/dave/subscriptions/d-new/cancel", token: "dave", status: 500, code: "internal", unchanged: "d-new", logged: "secret-billing-prod",
			setup: func(e *env) { e.faults.failOn("Repository.Update", storageErr) }},
		{name: "corrupt stored item", method: "GET", path: "/zoe/subscriptions/z-bad", token: "zoe", status: 500, code: "internal", logged: "billing_amount",
			setup: func(e *env) {
				s := rec("zoe", "z-bad", "2024-03-01", billing.StatusScheduled)
				item, err := layout.EncodeItem(&s)
				require.NoError(e.t, err)
				item[layout.AttrBillingAmount] = layout.StringAV("secret-4.999")
				require.NoError(e.t, e.store.PutRawItem(memory.SubscriptionsTable, item))
			}},

		// 502: the processor did not answer a repayment.
		// The record keeps its status but carries the attempt in flight.
		{name: "payment outcome unknown", method: "POST", path: "/alice/subscriptions/a-err/pay", token: "alice", status: 502, code: "payment_outcome_unknown", logged: "secret-gateway",
			setup: func(e *env) {
				e.provider.SetUser("alice", billingtest.UnknownBeforeCharge(errors.New("processor: timeout at secret-gateway")))
			}},
		{name: "waive while an attempt is in flight", method: "POST", path: "/alice/subscriptions/a-err/waive", token: "operator", status: 502, code: "payment_outcome_unknown", unchanged: "a-err", logged: "secret-gateway",
			setup: func(e *env) {
				e.provider.SetUser("alice", billingtest.UnknownBeforeCharge(errors.New("processor: timeout at secret-gateway")))
				r := httptest.NewRequest("POST", "/alice/subscriptions/a-err/pay", nil)
				r.Header.Set("Authorization", "Bearer alice")
				w := httptest.NewRecorder()
				e.h.ServeHTTP(w, r)
				require.Equal(e.t, 502, w.Code, "repayment: %d %s, want 502", w.Code, w.Body)
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if tc.setup != nil {
				tc.setup(e)
			}
			var before billing.Period
			if tc.unchanged != "" {
				before = e.stored(tc.unchanged)
			}
			r := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			if tc.token != "" {
				r.Header.Set("Authorization", "Bearer "+tc.token)
			}
			for k, v := range tc.header {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			e.h.ServeHTTP(w, r)

			if w.Code != tc.status {
				t.Fatalf("status %d, want %d; body %s", w.Code, tc.status, w.Body)
			}
			if strings.Contains(w.Body.String(), secret) {
				t.Errorf("body leaks internal text: %s", w.Body)
			}
			resp := decode(t, w)
			if resp.Error == nil || !reflect.DeepEqual(resp, response{Error: resp.Error}) {
				t.Fatalf("body = %s, want an error only", w.Body)
			}
			assert.Equal(t, tc.code, resp.Error.Code, "code")
			assert.Equal(t, tc.field, resp.Error.Field, "field")
			if resp.Error.Message == "" {
				t.Error("empty message")
			}
			if tc.unchanged != "" {
				after := e.stored(tc.unchanged)
				// A replay of an attempt in flight records when it was sent
				// (so that a lookup's "not found" is not believed while it
				// may still run): that time is all it may change.
				before.LastAttempt.Presented, after.LastAttempt.Presented = time.Time{}, time.Time{}
				if !reflect.DeepEqual(after, before) {
					t.Errorf("%s changed:\n before %+v\n after  %+v", tc.unchanged, before, after)
				}
			}
			if tc.logged != "" && !strings.Contains(e.logs.String(), tc.logged) {
				t.Errorf("log does not contain %q:\n%s", tc.logged, e.logs)
			}
			switch tc.status {
			case 401:
				assert.Equal(t, `Bearer realm="billing"`, w.Header().Get("WWW-Authenticate"), "WWW-Authenticate")
			case 405:
				if w.Header().Get("Allow") == "" {
					t.Error("405 without Allow")
				}
			}
		})
	}
}

// TestBodyLimit checks Config.MaxBodyBytes: a body just under passes, one
// over is a 413.
func TestBodyLimit(t *testing.T) {
	e := newEnv(t)
	h, err := billinghttp.New(billinghttp.Config{
		Repository: e.store.Repository(), History: e.store.History(), Collector: mustCollector(t, e), Authorize: tokenAuth,
		MaxBodyBytes: 16,
	})
	require.NoError(t, err)
	e.h = h
	if w := e.do("POST", "/dave/subscriptions/d-new/pause", "dave", `{"months": 2}`); w.Code != 200 {
		t.Fatalf("13-byte body: %d %s", w.Code, w.Body)
	}
	w := e.do("POST", "/carol/subscriptions/c-paused/pause", "carol", `{"months":      2}`)
	assert.Equal(t, 413, w.Code, "17-byte body")
}

func mustCollector(t *testing.T, e *env) *billing.Collector {
	t.Helper()
	c, err := billing.NewCollector(billing.Config{Repository: e.store.Repository(), Locker: e.locker, Provider: e.provider, Clock: e.clock})
	require.NoError(t, err)
	return c
}

// TestListSkipsAnUndecodableRecord: one item of the user that does not
// decode (an amount another program wrote as "4,99") is left out of the
// listing and logged with its key; the user's other records are listed.
// Before, the whole listing answered 500.
func TestListSkipsAnUndecodableRecord(t *testing.T) {
	e := newEnv(t)
	bad := rec("alice", "a-bad", "2023-11-01", billing.StatusCompleted)
	item, err := layout.EncodeItem(&bad)
	require.NoError(t, err)
	item[layout.AttrBillingAmount] = layout.StringAV("4,99")
	require.NoError(t, e.store.PutRawItem(memory.SubscriptionsTable, item))
	want, err := e.store.Repository().ListByUser(t.Context(), "alice")
	require.NoError(t, err)
	require.NotEmpty(t, want)

	w := e.do("GET", "/alice/subscriptions", "alice", "")
	require.Equal(t, 200, w.Code, w.Body.String())
	var body struct {
		Subscriptions []billinghttp.SubscriptionJSON `json:"subscriptions"`
	}
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body))
	var got []string
	for _, s := range body.Subscriptions {
		got = append(got, s.SubscriptionID)
	}
	var ids []string
	for _, s := range want {
		ids = append(ids, s.SubscriptionID)
	}
	assert.Equal(t, ids, got, "the good records, and not the bad one")
	assert.NotContains(t, got, "a-bad")
	assert.Contains(t, e.logs.String(), "skipped an undecodable record")
	assert.Contains(t, e.logs.String(), "2023-11-01", "the log names the item's key")
}
