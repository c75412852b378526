package billinghttp_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/dynabill/billing/billinghttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// allRoutes lists every route with a valid body; {user} and {sub} are
// replaced by the test.
var allRoutes = []struct {
	method, path, body, action string
	write, operator, hasSub    bool
}{
	{"GET", "/{user}/subscriptions", "", billinghttp.ActionListSubscriptions, false, false, false},
	{"GET", "/{user}/subscriptions/{sub}", "", billinghttp.ActionGetSubscription, false, false, true},
	{"GET", "/{user}/subscriptions/{sub}/history", "", billinghttp.ActionHistory, false, false, true},
	{"POST", "/{user}/subscriptions/{sub}/pay", "", billinghttp.ActionPay, true, false, true},
	{"POST", "/{user}/subscriptions/{sub}/waive", "", billinghttp.ActionWaive, true, true, true},
	{"POST", "/{user}/subscriptions/{sub}/cancel", "{}", billinghttp.ActionCancel, true, false, true},
	{"POST", "/{user}/subscriptions/{sub}/pause", `{"months": 2}`, billinghttp.ActionPause, true, false, true},
	{"POST", "/{user}/subscriptions/{sub}/resume", "", billinghttp.ActionResume, true, false, true},
	{"POST", "/{user}/subscriptions/{sub}/billing-date", `{"billing_date": "2024-04-02"}`, billinghttp.ActionChangeBillingDate, true, true, true},
	{"POST", "/{user}/subscriptions/{sub}/tier", `{"tier": "Lite:v1", "amount": "2.99", "downgrade": true}`, billinghttp.ActionChangeTier, true, true, true},
	{"POST", "/{user}/reactivate", `{"billing_date": "2024-04-01"}`, billinghttp.ActionReactivate, true, true, false},
}

// caller returns the token that may perform rt on alice's records: alice
// herself for an end user's action, an operator for an operator's.
func caller(operator bool) string {
	if operator {
		return "operator"
	}
	return "alice"
}

func fill(path, user, sub string) string {
	return strings.NewReplacer("{user}", user, "{sub}", sub).Replace(path)
}

// TestUnauthorizedNeverReachesStorage refuses every route with each kind
// of refusal and checks that no storage call, lock or charge was made.
func TestUnauthorizedNeverReachesStorage(t *testing.T) {
	for _, rt := range allRoutes {
		for _, refusal := range []struct {
			token  string
			status int
		}{{"", 401}, {"mallory", 403}, {"broken", 403}} {
			t.Run(rt.action+"/"+refusal.token, func(t *testing.T) {
				e := newEnv(t)
				w := e.do(rt.method, fill(rt.path, "alice", "a-err"), refusal.token, rt.body)
				if w.Code != refusal.status {
					t.Fatalf("status %d, want %d: %s", w.Code, refusal.status, w.Body)
				}
				if n := e.faults.total(); n != 0 {
					t.Errorf("%d storage calls for a refused request: %v", n, e.faults.calls)
				}
				if n := e.provider.CallCount(); n != 0 {
					t.Errorf("%d processor calls for a refused request", n)
				}
				if e.locker.Locked("alice") {
					t.Error("the user's lock is held")
				}
			})
		}
	}
}

// TestAuthorizerSeesAction checks the Action of every route and that the
// authorizer runs once, before any storage call, also when it allows.
func TestAuthorizerSeesAction(t *testing.T) {
	for _, rt := range allRoutes {
		t.Run(rt.action, func(t *testing.T) {
			e := newEnv(t)
			var seen []billinghttp.Action
			callsBefore := -1
			h, err := billinghttp.New(billinghttp.Config{
				Repository: &faultRepo{inner: e.store.Repository(), f: e.faults},
				History:    &faultHistory{inner: e.store.History(), f: e.faults},
				Collector:  mustCollector(t, e),
				Authorize: func(r *http.Request, a billinghttp.Action) error {
					seen = append(seen, a)
					callsBefore = e.faults.total()
					return nil
				},
			})
			require.NoError(t, err)
			e.h = h
			user, sub := "dave", "d-new"
			if rt.action == billinghttp.ActionReactivate {
				user = "erin"
			}
			e.do(rt.method, fill(rt.path, user, sub), "", rt.body)
			require.Len(t, seen, 1, "authorizer called %d times, want once", len(seen))
			want := billinghttp.Action{Name: rt.action, UserID: user, Write: rt.write, Operator: rt.operator}
			if rt.hasSub {
				want.SubscriptionID = sub
			}
			assert.Equal(t, want, seen[0], "action = %+v, want %+v", seen[0], want)
			assert.Equal(t, 0, callsBefore, "%d storage calls before the authorizer", callsBefore)
		})
	}
}

// TestOtherUsersSubscription checks both halves of the authorizer
// contract: the authorizer refuses alice acting on bob, and when alice
// (or an operator, for an operator's action) acts on alice with bob's
// subscription ID, the handler answers exactly as for an unknown ID and
// changes nothing.
func TestOtherUsersSubscription(t *testing.T) {
	for _, rt := range allRoutes {
		t.Run(rt.action+"/refused by the authorizer", func(t *testing.T) {
			e := newEnv(t)
			before := e.stored("b-sched")
			w := e.do(rt.method, fill(rt.path, "bob", "b-sched"), "alice", rt.body)
			require.Equal(t, 403, w.Code, "status %d, want 403: %s", w.Code, w.Body)
			if n := e.faults.total(); n != 0 {
				t.Errorf("%d storage calls", n)
			}
			if !reflect.DeepEqual(e.stored("b-sched"), before) {
				t.Error("bob's record changed")
			}
		})
		if !rt.hasSub {
			continue
		}
		t.Run(rt.action+"/not found under the caller", func(t *testing.T) {
			e := newEnv(t)
			before := e.stored("b-sched")
			bobHistory, err := e.store.History().ListBySubscription(t.Context(), "b-sched")
			require.NoError(t, err)
			w := e.do(rt.method, fill(rt.path, "alice", "b-sched"), caller(rt.operator), rt.body)
			unknown := e.do(rt.method, fill(rt.path, "alice", "no-such-id"), caller(rt.operator), rt.body)
			require.Equal(t, 404, w.Code, "status %d, want 404: %s", w.Code, w.Body)
			if w.Body.String() != unknown.Body.String() {
				t.Errorf("answer differs from an unknown ID's:\n%s\n%s", w.Body, unknown.Body)
			}
			if strings.Contains(w.Body.String(), "bob") || strings.Contains(w.Body.String(), "b-sched") {
				t.Errorf("answer reveals bob's record: %s", w.Body)
			}
			if !reflect.DeepEqual(e.stored("b-sched"), before) {
				t.Error("bob's record changed")
			}
			after, err := e.store.History().ListBySubscription(t.Context(), "b-sched")
			require.NoError(t, err)
			if len(after) != len(bobHistory) {
				t.Errorf("bob's history grew from %d to %d rows", len(bobHistory), len(after))
			}
			if n := e.provider.CallCount(); n != 0 {
				t.Errorf("%d processor calls", n)
			}
		})
	}
}

// TestRoleAuthorizer checks the two roles on every route: an end user
// performs the end user's actions on their own records only, an operator
// every action on anyone, and identify's errors pass through.
func TestRoleAuthorizer(t *testing.T) {
	errDown := errors.New("token service down")
	type who struct {
		userID   string
		operator bool
		err      error
	}
	auth := func(w who) billinghttp.Authorizer {
		return billinghttp.RoleAuthorizer(func(*http.Request) (string, bool, error) { return w.userID, w.operator, w.err })
	}
	r := httptest.NewRequest("GET", "/", nil)
	for _, rt := range allRoutes {
		a := billinghttp.Action{Name: rt.action, UserID: "alice", Write: rt.write, Operator: rt.operator}
		for _, tc := range []struct {
			name string
			who  who
			want error // nil: allowed
		}{
			{"the user", who{userID: "alice"}, map[bool]error{false: nil, true: billinghttp.ErrForbidden}[rt.operator]},
			{"another user", who{userID: "bob"}, billinghttp.ErrForbidden},
			{"a user whose ID extends the path's", who{userID: "alice2"}, billinghttp.ErrForbidden},
			{"an operator", who{operator: true}, nil},
			{"an operator who is also a user", who{userID: "bob", operator: true}, nil},
			{"nobody", who{}, billinghttp.ErrUnauthenticated},
			{"bad credentials", who{err: fmt.Errorf("expired: %w", billinghttp.ErrUnauthenticated)}, billinghttp.ErrUnauthenticated},
			{"identify fails", who{userID: "alice", operator: true, err: errDown}, errDown},
		} {
			t.Run(rt.action+"/"+tc.name, func(t *testing.T) {
				err := auth(tc.who)(r, a)
				if tc.want == nil {
					assert.NoError(t, err)
					return
				}
				assert.ErrorIs(t, err, tc.want)
			})
		}
	}
}

// TestOperatorActionsRefusedToEndUsers sends each operator's action as
// the record's own user: 403, and not one storage call or charge.
func TestOperatorActionsRefusedToEndUsers(t *testing.T) {
	for _, rt := range allRoutes {
		if !rt.operator {
			continue
		}
		t.Run(rt.action, func(t *testing.T) {
			e := newEnv(t)
			w := e.do(rt.method, fill(rt.path, "dave", "d-new"), "dave", rt.body)
			require.Equal(t, 403, w.Code, "status %d, want 403: %s", w.Code, w.Body)
			assert.Equal(t, 0, e.faults.total(), "storage calls")
			assert.Equal(t, 0, e.provider.CallCount(), "processor calls")
			w = e.do(rt.method, fill(rt.path, "dave", "d-new"), "operator", rt.body)
			if w.Code != 200 && w.Code != 201 && !(rt.action == billinghttp.ActionReactivate && w.Code == 409) {
				t.Errorf("as an operator: %d %s", w.Code, w.Body)
			}
		})
	}
}
