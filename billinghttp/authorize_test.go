package billinghttp_test

import (
	"net/http"
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
	write, hasSub              bool
}{
	{"GET", "/{user}/subscriptions", "", billinghttp.ActionListSubscriptions, false, false},
	{"GET", "/{user}/subscriptions/{sub}", "", billinghttp.ActionGetSubscription, false, true},
	{"GET", "/{user}/subscriptions/{sub}/history", "", billinghttp.ActionHistory, false, true},
	{"POST", "/{user}/subscriptions/{sub}/pay", "", billinghttp.ActionPay, true, true},
	{"POST", "/{user}/subscriptions/{sub}/waive", "", billinghttp.ActionWaive, true, true},
	{"POST", "/{user}/subscriptions/{sub}/cancel", "{}", billinghttp.ActionCancel, true, true},
	{"POST", "/{user}/subscriptions/{sub}/pause", `{"months": 2}`, billinghttp.ActionPause, true, true},
	{"POST", "/{user}/subscriptions/{sub}/resume", "", billinghttp.ActionResume, true, true},
	{"POST", "/{user}/subscriptions/{sub}/billing-date", `{"billing_date": "2024-04-02"}`, billinghttp.ActionChangeBillingDate, true, true},
	{"POST", "/{user}/subscriptions/{sub}/tier", `{"tier": "Lite:v1", "amount": "2.99", "downgrade": true}`, billinghttp.ActionChangeTier, true, true},
	{"POST", "/{user}/reactivate", `{"billing_date": "2024-04-01"}`, billinghttp.ActionReactivate, true, false},
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
			want := billinghttp.Action{Name: rt.action, UserID: user, Write: rt.write}
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
// acts on herself with bob's subscription ID, the handler answers exactly
// as for an unknown ID and changes nothing.
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
			w := e.do(rt.method, fill(rt.path, "alice", "b-sched"), "alice", rt.body)
			unknown := e.do(rt.method, fill(rt.path, "alice", "no-such-id"), "alice", rt.body)
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
