package billinghttp_test

import (
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billinghttp"
	"github.com/dynabill/billing/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The callers of the hostile-input table: the bearer tokens of
// tokenAuth.
const (
	asNone     = ""         // no credentials
	asUser     = "alice"    // the end user of the path (unless the row names another, e.g. "frank")
	asOther    = "mallory"  // an end user who is not the path's
	asOperator = "operator" // every action on anyone
)

// hostileUsers are the users whose records a refused request must leave
// as they were: the fixture's and frank.
var hostileUsers = []string{"alice", "bob", "carol", "dave", "erin", "frank"}

// newHostileEnv is newEnv with frank, a user whose subscription ended
// after a paid period within the collector's stale threshold:
//
//	frank  f-paid COMPLETED 03-05, f-gone CANCELLED 04-05
func newHostileEnv(t *testing.T, opts ...func(*billing.Config)) *env {
	t.Helper()
	e := newEnv(t, opts...)
	for _, s := range []billing.Period{
		rec("frank", "f-paid", "2024-03-05", billing.StatusCompleted),
		rec("frank", "f-gone", "2024-04-05", billing.StatusCancelled),
	} {
		require.NoError(t, e.store.Repository().Add(t.Context(), &s), "seeding %s", s.SubscriptionID)
	}
	return e
}

// snapshot is everything a request could change: every record and
// history row of every user, and the number of items in each table (which
// catches an item written for a user not listed).
type snapshot struct {
	records, history map[string][]billing.Period
	items, rows      int
}

func (e *env) snapshot() snapshot {
	e.t.Helper()
	s := snapshot{records: map[string][]billing.Period{}, history: map[string][]billing.Period{},
		items: e.store.Items(memory.SubscriptionsTable), rows: e.store.Items(memory.HistoryTable)}
	for _, u := range hostileUsers {
		recs, err := e.store.Repository().ListByUser(e.t.Context(), u)
		require.NoError(e.t, err)
		hist, err := e.store.History().ListByUser(e.t.Context(), u)
		require.NoError(e.t, err)
		s.records[u], s.history[u] = recs, hist
	}
	return s
}

// TestHostileInput sends requests an attacker (or a confused client) would
// send and checks the answer; every refused request must leave every
// record and history row as it was and make no processor call. The
// accepted controls show that the same routes still work.
func TestHostileInput(t *testing.T) {
	const (
		next   = "/alice/subscriptions/a-next"   // alice's SCHEDULED period, 04-15
		errRec = "/alice/subscriptions/a-err"    // alice's ERROR period, 03-15
		bobs   = "/alice/subscriptions/b-sched"  // bob's record under alice's path
		pad    = billinghttp.DefaultMaxBodyBytes // a body this long and more is too large
	)
	// deep nests open…close as deep as fits in the body limit.
	deep := func(open, close string) string {
		n := (pad - 100) / (len(open) + len(close))
		return strings.Repeat(open, n) + strings.Repeat(close, n)
	}
	type row struct {
		name         string
		method, path string
		header       map[string]string
		body         string
		as           string
		prices       bool // the collector has the price list of prices_test.go
		status       int
		code, field  string
		// check, for accepted requests, looks at what was done.
		check func(t *testing.T, e *env)
	}
	var rows []row
	add := func(group string, rs ...row) {
		for _, r := range rs {
			r.name = group + "/" + r.name
			rows = append(rows, r)
		}
	}
	const (
		bad      = "invalid_request"
		unknown  = "unknown_field"
		notFound = "not_found"
		denied   = "forbidden"
	)

	add("another user",
		row{name: "another user's list", method: "GET", path: "/alice/subscriptions", as: asOther, status: 403, code: denied},
		row{name: "another user's record", method: "GET", path: next, as: asOther, status: 403, code: denied},
		row{name: "another user's cancel", method: "POST", path: next + "/cancel", as: asOther, status: 403, code: denied},
		row{name: "another user's pay", method: "POST", path: errRec + "/pay", as: asOther, status: 403, code: denied},
		row{name: "own path, another user's subscription", method: "GET", path: bobs, as: asUser, status: 404, code: notFound},
		row{name: "own path, another user's history", method: "GET", path: bobs + "/history", as: asUser, status: 404, code: notFound},
		row{name: "own path, cancel another user's", method: "POST", path: bobs + "/cancel", as: asUser, status: 404, code: notFound},
		row{name: "own path, pause another user's", method: "POST", path: bobs + "/pause", body: `{"months": 1}`, as: asUser, status: 404, code: notFound},
		row{name: "operator, subscription under the wrong user", method: "POST", path: bobs + "/waive", as: asOperator, status: 404, code: notFound},
		row{name: "no credentials", method: "POST", path: next + "/cancel", as: asNone, status: 401, code: "unauthenticated"},
		row{name: "operator's name mis-cased", method: "POST", path: next + "/waive", as: "Operator", status: 403, code: denied},
		row{name: "operator's name with a space", method: "POST", path: next + "/waive", as: "operator ", status: 403, code: denied},
	)

	long := strings.Repeat("a", 1025) // one byte over the longest user ID Subscribe accepts
	add("path",
		row{name: "dot-dot into another user", method: "GET", path: "/mallory/../alice/subscriptions", as: asOther, status: 404, code: notFound},
		row{name: "dot-dot out of the user", method: "GET", path: "/alice/subscriptions/../../bob/subscriptions", as: asUser, status: 404, code: notFound},
		row{name: "dot-dot between subscriptions", method: "POST", path: bobs + "/../a-next/cancel", as: asUser, status: 404, code: notFound},
		row{name: "dot segment", method: "POST", path: "/alice/./subscriptions/a-next/cancel", as: asUser, status: 404, code: notFound},
		row{name: "encoded slashes stay in the ID", method: "POST", path: next + "%2F..%2F..%2F..%2Fbob%2Fsubscriptions%2Fb-sched/cancel", as: asUser, status: 404, code: notFound},
		row{name: "encoded slash joining segments", method: "GET", path: "/alice%2Fsubscriptions", as: asUser, status: 404, code: notFound},
		row{name: "encoded dot-dot is an ID", method: "POST", path: "/alice/subscriptions/%2e%2e/cancel", as: asUser, status: 404, code: notFound},
		row{name: "leading double slash", method: "POST", path: "//alice/subscriptions/a-next/cancel", as: asUser, status: 404, code: notFound},
		row{name: "inner double slash", method: "POST", path: "/alice//subscriptions/a-next/cancel", as: asUser, status: 404, code: notFound},
		row{name: "empty subscription segment", method: "GET", path: "/alice/subscriptions//history", as: asUser, status: 404, code: notFound},
		row{name: "trailing slash on an action", method: "POST", path: next + "/cancel/", as: asUser, status: 404, code: notFound},
		row{name: "trailing slash on the list", method: "GET", path: "/alice/subscriptions/", as: asUser, status: 404, code: notFound},
		row{name: "very long user ID", method: "GET", path: "/" + long + "/subscriptions", as: asOperator, status: 404, code: notFound},
		row{name: "very long subscription ID", method: "POST", path: "/alice/subscriptions/" + long + "/cancel", as: asUser, status: 404, code: notFound},
		row{name: "NUL in the user ID", method: "GET", path: "/alice%00/subscriptions", as: asOperator, status: 404, code: notFound},
		row{name: "newline in the subscription ID", method: "POST", path: next + "%0A/cancel", as: asUser, status: 404, code: notFound},
		row{name: "invalid UTF-8 user ID", method: "GET", path: "/%FF/subscriptions", as: asOperator, status: 404, code: notFound},
		row{name: "look-alike user (å)", method: "POST", path: "/%C3%A5lice/subscriptions/a-next/cancel", as: asUser, status: 403, code: denied},
		row{name: "look-alike user (fullwidth a)", method: "POST", path: "/%EF%BD%81lice/subscriptions/a-next/cancel", as: asUser, status: 403, code: denied},
		row{name: "right-to-left mark in the ID", method: "POST", path: next + "%E2%80%8F/cancel", as: asUser, status: 404, code: notFound},
		row{name: "unknown action", method: "POST", path: next + "/refund", as: asOperator, status: 404, code: notFound},
	)

	add("method",
		row{name: "override header on a GET of cancel", method: "GET", path: next + "/cancel", header: map[string]string{"X-HTTP-Method-Override": "POST"}, as: asUser, status: 405, code: "method_not_allowed"},
		row{name: "_method query on a GET of cancel", method: "GET", path: next + "/cancel?_method=POST", as: asUser, status: 405, code: "method_not_allowed"},
		row{name: "override header on a GET of waive", method: "GET", path: next + "/waive", header: map[string]string{"X-HTTP-Method-Override": "POST", "X-Method-Override": "POST"}, as: asOperator, status: 405, code: "method_not_allowed"},
		row{name: "_method=DELETE on a POST of a record", method: "POST", path: next + "?_method=DELETE", as: asUser, status: 405, code: "method_not_allowed"},
		row{name: "DELETE", method: "DELETE", path: next, as: asOperator, status: 405, code: "method_not_allowed"},
		row{name: "PUT", method: "PUT", path: next + "/tier", body: `{"tier": "Lite:v1", "amount": "2.99"}`, as: asOperator, status: 405, code: "method_not_allowed"},
		row{name: "PATCH", method: "PATCH", path: next, body: `{"billing_amount": "0.01"}`, as: asOperator, status: 405, code: "method_not_allowed"},
	)

	add("body",
		row{name: "over the limit", method: "POST", path: next + "/pause", body: `{"months": 2}` + strings.Repeat(" ", pad), as: asUser, status: 413, code: "body_too_large"},
		row{name: "over the limit on a route without parameters", method: "POST", path: next + "/cancel", body: strings.Repeat(" ", pad+1), as: asUser, status: 413, code: "body_too_large"},
		row{name: "over the limit in a value", method: "POST", path: next + "/tier", body: `{"tier": "` + strings.Repeat("x", pad) + `", "amount": "2.99"}`, as: asOperator, status: 413, code: "body_too_large"},
		row{name: "deeply nested value", method: "POST", path: next + "/pause", body: `{"months": ` + deep("[", "]") + `}`, as: asUser, status: 400, code: bad, field: "months"},
		row{name: "deeply nested objects", method: "POST", path: next + "/pause", body: deep(`{"months":`, "}"), as: asUser, status: 400, code: bad, field: "months"},
		row{name: "deeply nested body", method: "POST", path: next + "/pause", body: deep("[", "]"), as: asUser, status: 400, code: bad},
		row{name: "nested under an unknown key", method: "POST", path: next + "/cancel", body: `{"x": ` + deep("[", "]") + `}`, as: asUser, status: 400, code: unknown, field: "x"},
		row{name: "object where a string belongs", method: "POST", path: next + "/tier", body: `{"tier": {"name": "Lite:v1"}, "amount": "2.99"}`, as: asOperator, status: 400, code: bad, field: "tier"},
		row{name: "array where a string belongs", method: "POST", path: next + "/tier", body: `{"tier": "Lite:v1", "amount": ["2.99"]}`, as: asOperator, status: 400, code: bad, field: "amount"},
		row{name: "duplicate amount, gateway sees the first", method: "POST", path: next + "/tier", body: `{"tier": "Lite:v1", "amount": "2.99", "amount": "0.01"}`, as: asOperator, status: 400, code: bad, field: "amount"},
		row{name: "duplicate months", method: "POST", path: next + "/pause", body: `{"months": 1, "months": 120}`, as: asUser, status: 400, code: bad, field: "months"},
		row{name: "duplicate through an escape", method: "POST", path: next + "/pause", body: `{"months": 1, "\u006donths": 120}`, as: asUser, status: 400, code: bad, field: "months"},
		row{name: "duplicate date", method: "POST", path: next + "/billing-date", body: `{"billing_date": "2024-04-20", "billing_date": "2099-01-01"}`, as: asOperator, status: 400, code: bad, field: "billing_date"},
		row{name: "mis-cased keys beside the exact one", method: "POST", path: next + "/tier", body: `{"TIER": "X", "Amount": "1.00", "amount": "2.00"}`, as: asOperator, status: 400, code: unknown, field: "TIER"},
		row{name: "mis-cased key alone", method: "POST", path: next + "/pause", body: `{"Months": 2}`, as: asUser, status: 400, code: unknown, field: "Months"},
		row{name: "mis-cased date key", method: "POST", path: next + "/billing-date", body: `{"billing_Date": "2024-04-20"}`, as: asOperator, status: 400, code: unknown, field: "billing_Date"},
		row{name: "a stored attribute's name", method: "POST", path: next + "/cancel", body: `{"billing_amount": "0.00"}`, as: asUser, status: 400, code: unknown, field: "billing_amount"},
		row{name: "trailing object", method: "POST", path: next + "/pause", body: `{"months": 1}{"months": 120}`, as: asUser, status: 400, code: bad},
		row{name: "trailing array", method: "POST", path: next + "/pause", body: `{"months": 1} []`, as: asUser, status: 400, code: bad},
		row{name: "trailing garbage", method: "POST", path: next + "/pause", body: `{"months": 1}garbage`, as: asUser, status: 400, code: bad},
		row{name: "trailing data after an empty object", method: "POST", path: next + "/cancel", body: `{} {"x": 1}`, as: asUser, status: 400, code: bad},
		row{name: "array body", method: "POST", path: next + "/pause", body: `[{"months": 1}]`, as: asUser, status: 400, code: bad},
		row{name: "string body", method: "POST", path: next + "/pause", body: `"months"`, as: asUser, status: 400, code: bad},
		row{name: "number body", method: "POST", path: next + "/pause", body: `2`, as: asUser, status: 400, code: bad},
		row{name: "null body", method: "POST", path: next + "/cancel", body: `null`, as: asUser, status: 400, code: bad},
		row{name: "true body", method: "POST", path: next + "/cancel", body: `true`, as: asUser, status: 400, code: bad},
		row{name: "byte order mark", method: "POST", path: next + "/pause", body: "\xef\xbb\xbf{\"months\": 1}", as: asUser, status: 400, code: bad},
		row{name: "invalid UTF-8 in a tier", method: "POST", path: next + "/tier", body: "{\"tier\": \"Lite\xff:v1\", \"amount\": \"2.99\"}", as: asOperator, status: 400, code: bad},
		row{name: "control character in a tier", method: "POST", path: next + "/tier", body: `{"tier": "Lite\u0000:v1", "amount": "2.99"}`, as: asOperator, status: 400, code: bad, field: "tier"},
		row{name: "tier name too long", method: "POST", path: next + "/tier", body: `{"tier": "` + strings.Repeat("T", 300) + `", "amount": "2.99"}`, as: asOperator, status: 400, code: bad, field: "tier"},
		row{name: "months out of int range", method: "POST", path: next + "/pause", body: `{"months": 1e400}`, as: asUser, status: 400, code: bad, field: "months"},
		row{name: "months negative", method: "POST", path: next + "/pause", body: `{"months": -1}`, as: asUser, status: 400, code: bad, field: "months"},
	)

	date := func(name, path, day string, status int, code string) row {
		return row{name: name, method: "POST", path: path, body: `{"billing_date": "` + day + `"}`, as: asOperator, status: status, code: code, field: "billing_date"}
	}
	move, react := next+"/billing-date", "/frank/reactivate"
	add("date",
		date("year 0 (move)", move, "0000-01-01", 400, bad),
		date("year 0 (reactivate)", react, "0000-01-01", 400, bad),
		date("year 0 as a timestamp", move, "0000-01-01T00:00:00Z", 400, bad),
		date("year 10000", move, "10000-01-01", 400, bad),
		date("year 10000 (reactivate)", react, "10000-01-01", 400, bad),
		date("before 1970", move, "1969-12-31", 400, bad),
		date("before 1970 (reactivate)", react, "1969-12-31", 400, bad),
		date("the zero time", move, "0001-01-01T00:00:00Z", 400, bad),
		date("older than the stale threshold", move, "2024-02-01", 400, bad),
		date("+14:00 would move the day", move, "2024-04-16T09:30:00+14:00", 400, bad),
		date("+14:00 would move the day (reactivate)", react, "2024-04-16T09:30:00+14:00", 400, bad),
		date("-12:00", move, "2024-04-16T23:00:00-12:00", 400, bad),
		date("-00:00 (offset unknown)", move, "2024-04-16T00:00:00-00:00", 400, bad),
		date("before the user's last period", move, "2024-03-10", 422, "date_out_of_order"),
		date("on the user's last period", move, "2024-03-15", 422, "date_out_of_order"),
		date("before the user's last paid period (reactivate)", react, "2024-03-01", 400, bad),
		date("on the user's last paid period (reactivate)", react, "2024-03-05", 400, bad),
		date("more than three years ahead", move, "2027-04-15", 400, bad),
		date("far future", move, "9999-12-31", 400, bad),
		date("far future (reactivate)", react, "2999-01-01", 400, bad),
		date("not a date", move, "2024-02-30", 400, bad),
		date("a local time without an offset", move, "2024-04-20T09:30:00", 400, bad),
		row{name: "a number", method: "POST", path: move, body: `{"billing_date": 1713225600}`, as: asOperator, status: 400, code: bad, field: "billing_date"},
	)

	tier := func(name, body string, prices bool, status int, field string) row {
		code := bad
		if status == 200 {
			code = ""
		}
		return row{name: name, method: "POST", path: next + "/tier", body: body, as: asOperator, prices: prices, status: status, code: code, field: field}
	}
	add("price",
		tier("zero", `{"tier": "Lite:v1", "amount": "0.00"}`, false, 400, "amount"),
		tier("negative", `{"tier": "Lite:v1", "amount": "-1.00"}`, false, 400, "amount"),
		tier("the largest int64 of cents", `{"tier": "Lite:v1", "amount": "92233720368547758.07"}`, false, 400, "amount"),
		tier("past int64", `{"tier": "Lite:v1", "amount": "92233720368547758.08"}`, false, 400, "amount"),
		tier("above MaxCharge", `{"tier": "Lite:v1", "amount": "10000.01"}`, false, 400, "amount"),
		tier("exponent", `{"tier": "Lite:v1", "amount": "1e3"}`, false, 400, "amount"),
		tier("three decimals", `{"tier": "Lite:v1", "amount": "2.999"}`, false, 400, "amount"),
		tier("padded", `{"tier": "Lite:v1", "amount": " 2.99"}`, false, 400, "amount"),
		tier("other digits", `{"tier": "Lite:v1", "amount": "٢.٩٩"}`, false, 400, "amount"),
		tier("a JSON number", `{"tier": "Lite:v1", "amount": 2.99}`, false, 400, "amount"),
		tier("missing without a price list", `{"tier": "Lite:v1"}`, false, 400, "amount"),
		tier("list: another amount", `{"tier": "Lite:v1", "amount": "3.00"}`, true, 400, "amount"),
		tier("list: zero", `{"tier": "Lite:v1", "amount": "0.00"}`, true, 400, "amount"),
		tier("list: negative", `{"tier": "Lite:v1", "amount": "-2.99"}`, true, 400, "amount"),
		tier("list: unknown tier", `{"tier": "Gold:v9"}`, true, 400, "tier"),
		tier("list: unknown tier with an amount", `{"tier": "Gold:v9", "amount": "1.00"}`, true, 400, "tier"),
		tier("list: mis-cased tier", `{"tier": "lite:v1"}`, true, 400, "tier"),
		tier("list: tier with a space", `{"tier": "Lite:v1 "}`, true, 400, "tier"),
	)

	operatorOnly := func(name, path, body string) row {
		return row{name: name, method: "POST", path: path, body: body, as: asUser, status: 403, code: denied}
	}
	add("end user, operator's action",
		operatorOnly("waive", next+"/waive", ""),
		operatorOnly("waive the ERROR debt", errRec+"/waive", "{}"),
		operatorOnly("tier", next+"/tier", `{"tier": "Lite:v1", "amount": "0.01"}`),
		operatorOnly("tier at the list's price", next+"/tier", `{"tier": "Lite:v1"}`),
		operatorOnly("billing date", next+"/billing-date", `{"billing_date": "2024-04-20"}`),
		row{name: "reactivate", method: "POST", path: react, body: `{"billing_date": "2024-04-10"}`, as: "frank", status: 403, code: denied},
		row{name: "reactivate with a malformed body", method: "POST", path: react, body: `{"billing_date": `, as: "frank", status: 403, code: denied},
	)

	ok := func(name, method, path, body, as string, status int, check func(t *testing.T, e *env)) row {
		return row{name: name, method: method, path: path, body: body, as: as, status: status, check: check}
	}
	add("accepted",
		ok("list", "GET", "/alice/subscriptions", "", asUser, 200, nil),
		ok("list with an encoded letter", "GET", "/%61lice/subscriptions", "", asUser, 200, nil),
		ok("HEAD of the list", "HEAD", "/alice/subscriptions", "", asUser, 200, nil),
		ok("get", "GET", next, "", asUser, 200, nil),
		ok("history", "GET", next+"/history", "", asUser, 200, nil),
		ok("pay", "POST", errRec+"/pay", "", asUser, 200, func(t *testing.T, e *env) {
			assert.Equal(t, billing.StatusCompleted, e.stored("a-err").Status, "status")
		}),
		ok("cancel with {}", "POST", next+"/cancel", "{}", asUser, 200, nil),
		ok("cancel with a blank body", "POST", next+"/cancel", " \r\n", asUser, 200, nil),
		ok("pause", "POST", next+"/pause", `{"months": 2}`, asUser, 200, nil),
		ok("pause with an escaped key", "POST", next+"/pause", `{"\u006donths": 2}`, asUser, 200, nil),
		ok("pause with a body at the limit", "POST", next+"/pause", `{"months": 2}`+strings.Repeat(" ", pad-len(`{"months": 2}`)), asUser, 200, nil),
		ok("resume", "POST", "/carol/subscriptions/c-paused/resume", "", "carol", 200, nil),
		row{name: "override header ignored on a read", method: "GET", path: "/alice/subscriptions", header: map[string]string{"X-HTTP-Method-Override": "DELETE"}, as: asUser, status: 200},
		ok("operator waives", "POST", next+"/waive", "", asOperator, 200, nil),
		ok("operator changes the tier", "POST", next+"/tier", `{"tier": "Lite:v1", "amount": "2.99"}`, asOperator, 200, func(t *testing.T, e *env) {
			assert.Equal(t, billing.MustParseAmount("2.99"), e.stored("a-next").Amount, "amount")
		}),
		ok("operator charges the largest amount", "POST", next+"/tier", `{"tier": "Max:v1", "amount": "10000.00"}`, asOperator, 200, nil),
		ok("operator moves the date", "POST", move, `{"billing_date": "2024-04-20"}`, asOperator, 200, func(t *testing.T, e *env) {
			assert.Equal(t, day("2024-04-20"), e.stored("a-next").BillingDate, "billing date")
		}),
		ok("operator moves the date, Z", "POST", move, `{"billing_date": "2024-04-20T00:00:00Z"}`, asOperator, 200, nil),
		ok("operator moves the date, +00:00", "POST", move, `{"billing_date": "2024-04-20T00:00:00+00:00"}`, asOperator, 200, nil),
		ok("operator reactivates", "POST", react, `{"billing_date": "2024-04-10"}`, asOperator, 201, nil),
		ok("operator reads another user's", "GET", "/bob/subscriptions/b-sched", "", asOperator, 200, nil),
	)
	add("accepted",
		row{name: "list: amount left out", method: "POST", path: next + "/tier", body: `{"tier": "Lite:v1"}`, as: asOperator, prices: true, status: 200,
			check: func(t *testing.T, e *env) {
				assert.Equal(t, billing.MustParseAmount("2.99"), e.stored("a-next").Amount, "amount")
			}},
		row{name: "list: the list's amount", method: "POST", path: next + "/tier", body: `{"tier": "Max:v1", "amount": "9.99", "downgrade": false}`, as: asOperator, prices: true, status: 200},
	)

	for _, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			var opts []func(*billing.Config)
			if tc.prices {
				opts = append(opts, withPrices)
			}
			e := newHostileEnv(t, opts...)
			before := e.snapshot()
			r := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			if tc.as != asNone {
				r.Header.Set("Authorization", "Bearer "+tc.as)
			}
			if tc.body != "" {
				r.Header.Set("Content-Type", "application/json")
			}
			for k, v := range tc.header {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			e.h.ServeHTTP(w, r)

			if w.Code != tc.status {
				t.Fatalf("status %d, want %d; body %.300s", w.Code, tc.status, w.Body)
			}
			if tc.method == "HEAD" {
				return
			}
			resp := decode(t, w)
			if tc.status < 400 {
				require.Nil(t, resp.Error, "error in an accepted answer")
				if tc.check != nil {
					tc.check(t, e)
				}
				return
			}
			require.NotNil(t, resp.Error, "refusal without an error: %s", w.Body)
			assert.Equal(t, tc.code, resp.Error.Code, "code")
			assert.Equal(t, tc.field, resp.Error.Field, "field")
			if len(w.Body.String()) > 400 {
				t.Errorf("refusal of %d bytes echoes the request: %.200s…", w.Body.Len(), w.Body)
			}
			after := e.snapshot()
			if !reflect.DeepEqual(after, before) {
				t.Errorf("a refused request changed the store:\n before %+v\n after  %+v", before, after)
			}
			assert.Equal(t, 0, e.provider.CallCount(), "processor calls")
			for _, u := range hostileUsers {
				assert.False(t, e.locker.Locked(u), "%s's lock is held", u)
			}
		})
	}
}
