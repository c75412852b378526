package billinghttp_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billinghttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// seedOwed adds the records an end user may not cancel beside the
// fixture's ERROR one: frank's ACHSENT debit and gina's SCHEDULED period
// whose attempt has no known outcome yet.
func seedOwed(t *testing.T, e *env) {
	t.Helper()
	ach := rec("frank", "f-ach", "2024-03-15", billing.StatusACHSent)
	ach.InitialRunDate, ach.LastRunDate, ach.Attempt = ach.BillingDate.Add(time.Hour), ach.BillingDate.Add(time.Hour), 1
	ach.TransactionID = "txn-ach"
	busy := rec("gina", "g-busy", "2024-03-15", billing.StatusScheduled)
	repo := e.store.Repository()
	for _, s := range []billing.Period{ach, busy} {
		require.NoError(t, repo.Add(t.Context(), &s), "seeding %s", s.SubscriptionID)
	}
	marked := busy.Clone()
	marked.LastAttempt = billing.Attempt{Number: 1, Key: "g-busy#1", Amount: busy.Amount, Tier: busy.ReceiptTierName,
		Process: busy.Process, Started: now.Add(-time.Minute)}
	require.NoError(t, repo.SetAttempt(t.Context(), &busy, &marked), "marking g-busy in flight")
	stored := e.stored("g-busy")
	require.True(t, stored.InFlight(), "g-busy is not in flight")
}

// TestCancelOwedPeriod: an end user cancels their own SCHEDULED or PAUSED
// period, but not one they owe (ERROR) or whose payment is pending
// (ACHSENT, or an attempt of unknown outcome): CANCELLED is final, so that
// would forgive the debt. The refusal is a 403 that says why, and changes
// neither the record nor its history; an operator may cancel an ERROR
// period.
func TestCancelOwedPeriod(t *testing.T) {
	for _, tc := range []struct {
		name, user, sub, token string
		status                 int
		code, message          string
		want                   billing.Status // the record's status after
	}{
		{name: "end user, SCHEDULED", user: "alice", sub: "a-next", token: "alice", status: 200, want: billing.StatusCancelled},
		{name: "end user, PAUSED", user: "carol", sub: "c-paused", token: "carol", status: 200, want: billing.StatusCancelled},
		{name: "end user, ERROR", user: "alice", sub: "a-err", token: "alice", status: 403, code: "forbidden",
			message: "this period is owed: its charge was declined and is being retried", want: billing.StatusError},
		{name: "end user, ACHSENT", user: "frank", sub: "f-ach", token: "frank", status: 403, code: "forbidden",
			message: "this period's payment is pending", want: billing.StatusACHSent},
		{name: "end user, SCHEDULED with an attempt in flight", user: "gina", sub: "g-busy", token: "gina", status: 403, code: "forbidden",
			message: "this period's payment is pending", want: billing.StatusScheduled},
		{name: "operator, ERROR", user: "alice", sub: "a-err", token: "operator", status: 200, want: billing.StatusCancelled},
		// The collector itself never cancels an unsettled debit.
		{name: "operator, ACHSENT", user: "frank", sub: "f-ach", token: "operator", status: 409, code: "not_collectible",
			want: billing.StatusACHSent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			seedOwed(t, e)
			before := e.stored(tc.sub)
			histBefore, err := e.store.History().ListBySubscription(t.Context(), tc.sub)
			require.NoError(t, err)

			w := e.do("POST", "/"+tc.user+"/subscriptions/"+tc.sub+"/cancel", tc.token, "")
			require.Equal(t, tc.status, w.Code, "status %d, want %d: %s", w.Code, tc.status, w.Body)
			r := decode(t, w)
			after := e.stored(tc.sub)
			assert.Equal(t, tc.want, after.Status, "stored status")
			histAfter, err := e.store.History().ListBySubscription(t.Context(), tc.sub)
			require.NoError(t, err)
			assert.Equal(t, 0, e.provider.CallCount(), "processor calls")
			assert.False(t, e.locker.Locked(tc.user), "the user's lock is held")

			if tc.status == 200 {
				require.NotNil(t, r.After, "answer %s", w.Body)
				assert.Equal(t, string(before.Status), r.Before.BillingStatus, "before")
				assert.Equal(t, "CANCELLED", r.After.BillingStatus, "after")
				assert.False(t, after.CompletionDate.IsZero(), "completion date of the cancelled record")
				require.Len(t, histAfter, len(histBefore)+1, "history rows: %+v", histAfter)
				assert.Equal(t, billing.StatusCancelled, histAfter[len(histAfter)-1].Status, "the new history row")
				return
			}
			require.NotNil(t, r.Error, "answer %s", w.Body)
			assert.Equal(t, tc.code, r.Error.Code, "error %+v", r.Error)
			assert.Contains(t, r.Error.Message, tc.message, "error %+v", r.Error)
			assert.Equal(t, before, after, "the refused record changed")
			assert.Equal(t, histBefore, histAfter, "the refused record's history changed")
			if tc.status == 403 {
				assert.Contains(t, r.Error.Message, "ask support", "error %+v", r.Error)
				// Refused on the ownership check's read: one storage call.
				assert.Equal(t, 1, e.faults.total(), "storage calls: %v", e.faults.calls)
			}
		})
	}
}

// TestCancelOwedAsksTheAuthorizerAgain: a cancel of an owed period asks
// the Authorizer a second time, for ActionCancelOwed as an operator's
// action, after the ownership check's read and before any write; a cancel
// of a SCHEDULED period asks once.
func TestCancelOwedAsksTheAuthorizerAgain(t *testing.T) {
	for _, tc := range []struct {
		name, sub, token string
		status           int
		want             []billinghttp.Action
		reads            int // storage calls when the last question was asked
	}{{
		name: "end user, SCHEDULED", sub: "a-next", token: "alice", status: 200,
		want: []billinghttp.Action{{Name: billinghttp.ActionCancel, UserID: "alice", SubscriptionID: "a-next", Write: true}},
	}, {
		name: "end user, ERROR", sub: "a-err", token: "alice", status: 403, reads: 1,
		want: []billinghttp.Action{
			{Name: billinghttp.ActionCancel, UserID: "alice", SubscriptionID: "a-err", Write: true},
			{Name: billinghttp.ActionCancelOwed, UserID: "alice", SubscriptionID: "a-err", Write: true, Operator: true},
		},
	}, {
		name: "operator, ERROR", sub: "a-err", token: "operator", status: 200, reads: 1,
		want: []billinghttp.Action{
			{Name: billinghttp.ActionCancel, UserID: "alice", SubscriptionID: "a-err", Write: true},
			{Name: billinghttp.ActionCancelOwed, UserID: "alice", SubscriptionID: "a-err", Write: true, Operator: true},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			var seen []billinghttp.Action
			callsAtLast := -1
			h, err := billinghttp.New(billinghttp.Config{
				Repository: &faultRepo{inner: e.store.Repository(), f: e.faults},
				History:    &faultHistory{inner: e.store.History(), f: e.faults},
				Collector:  mustCollector(t, e),
				Authorize: func(r *http.Request, a billinghttp.Action) error {
					seen = append(seen, a)
					callsAtLast = e.faults.total()
					return tokenAuth(r, a)
				},
			})
			require.NoError(t, err)
			e.h = h
			w := e.do("POST", "/alice/subscriptions/"+tc.sub+"/cancel", tc.token, "{}")
			require.Equal(t, tc.status, w.Code, "status %d, want %d: %s", w.Code, tc.status, w.Body)
			assert.Equal(t, tc.want, seen, "the Authorizer's questions")
			assert.Equal(t, tc.reads, callsAtLast, "storage calls before the last question: %v", e.faults.calls)
		})
	}
}

// TestRoleAuthorizerCancelOwed: RoleAuthorizer keeps the cancel of an
// owed period to operators, as it does a waive.
func TestRoleAuthorizerCancelOwed(t *testing.T) {
	a := billinghttp.Action{Name: billinghttp.ActionCancelOwed, UserID: "alice", SubscriptionID: "a-err", Write: true, Operator: true}
	r := httptest.NewRequest("POST", "/alice/subscriptions/a-err/cancel", nil)
	for _, tc := range []struct {
		name     string
		userID   string
		operator bool
		want     error
	}{
		{"the user", "alice", false, billinghttp.ErrForbidden},
		{"another user", "bob", false, billinghttp.ErrForbidden},
		{"nobody", "", false, billinghttp.ErrUnauthenticated},
		{"an operator", "", true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := billinghttp.RoleAuthorizer(func(*http.Request) (string, bool, error) { return tc.userID, tc.operator, nil })(r, a)
			if tc.want == nil {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, tc.want)
		})
	}
}
