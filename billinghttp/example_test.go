package billinghttp_test

import (
	"github.com/dynabill/billing/memory"
)

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billinghttp"
	"github.com/dynabill/billing/billingtest"
)

// ExampleNew mounts the admin API under /billing with an authorizer that
// lets an end user act on their own records only, and makes three
// requests: an anonymous one, one for another user, and a manual
// repayment.
func ExampleNew() {
	clock := billingtest.NewClock(time.Date(2024, 3, 20, 12, 0, 0, 0, time.UTC))
	store, err := memory.New(memory.Options{})
	if err != nil {
		panic(err)
	}
	collector, err := billing.NewCollector(billing.Config{
		Repository: store.Repository(),
		History:    store.History(),
		Locker:     billingtest.NewLocker(clock, time.Minute),
		Provider:   billingtest.NewProvider(billingtest.ProviderOptions{Clock: clock}),
		Clock:      clock,
		NewID:      func() string { return "sub-2" },
	})
	if err != nil {
		panic(err)
	}
	due := time.Date(2024, 3, 15, 0, 0, 0, 0, time.UTC)
	failed := billing.Period{
		UserID: "user-1", SubscriptionID: "sub-1", BillingDate: due, BillingPeriod: billing.BillingPeriod(due),
		Amount: billing.MustParseAmount("4.99"), Status: billing.StatusError, Term: billing.TermMonthly,
		PaymentError: "insufficient funds", InitialRunDate: due, LastRunDate: due, Attempt: 1,
	}
	if err := store.Repository().Add(context.Background(), &failed); err != nil {
		panic(err)
	}

	api, err := billinghttp.New(billinghttp.Config{
		Repository: store.Repository(),
		History:    store.History(),
		Collector:  collector,
		// The host's authentication: here "token-of-<user ID>" (verify
		// real credentials in production). RoleAuthorizer lets an end
		// user perform the end user's actions on their own records; the
		// handler checks that the subscription belongs to that user.
		Authorize: billinghttp.RoleAuthorizer(func(r *http.Request) (string, bool, error) {
			token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			userID, ok := strings.CutPrefix(token, "token-of-")
			if !ok || userID == "" {
				return "", false, billinghttp.ErrUnauthenticated
			}
			return userID, false, nil
		}),
	})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/billing/", http.StripPrefix("/billing", api))

	call := func(method, path, token string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, nil)
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		return w
	}

	w := call("GET", "/billing/user-1/subscriptions/sub-1", "")
	fmt.Print(w.Code, " ", w.Body)
	w = call("GET", "/billing/user-1/subscriptions/sub-1", "token-of-user-2")
	fmt.Print(w.Code, " ", w.Body)

	w = call("POST", "/billing/user-1/subscriptions/sub-1/pay", "token-of-user-1")
	var paid billinghttp.PayJSON
	if err := json.Unmarshal(w.Body.Bytes(), &paid); err != nil {
		panic(err)
	}
	fmt.Println(w.Code, "collected:", paid.Report.Collected, "status:", paid.Subscription.BillingStatus,
		"amount:", paid.Subscription.BillingAmount)
	// Output:
	// 401 {"error":{"code":"unauthenticated","message":"authentication required"}}
	// 403 {"error":{"code":"forbidden","message":"forbidden"}}
	// 200 collected: 1 status: COMPLETED amount: 4.99
}

// ExampleRoleAuthorizer builds the two roles from the host's
// authentication: an operator token, compared in constant time, and a
// token per end user (the host's own sessions in production). An end
// user may pay their own subscription but not waive it, nor touch
// another user's; the operator may do both.
func ExampleRoleAuthorizer() {
	const operatorToken = "op-8f14e45fceea167a" // a secret from the environment in production
	sessions := map[string]string{"session-1": "user-1", "session-2": "user-2"}
	authorize := billinghttp.RoleAuthorizer(func(r *http.Request) (string, bool, error) {
		token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if subtle.ConstantTimeCompare([]byte(token), []byte(operatorToken)) == 1 {
			return "", true, nil
		}
		userID, ok := sessions[token]
		if !ok {
			return "", false, billinghttp.ErrUnauthenticated
		}
		return userID, false, nil
	})
	as := func(token string, a billinghttp.Action) string {
		r := httptest.NewRequest("POST", "/", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		switch err := authorize(r, a); {
		case err == nil:
			return "allowed"
		case errors.Is(err, billinghttp.ErrUnauthenticated):
			return "401"
		default:
			return "403"
		}
	}
	pay := billinghttp.Action{Name: billinghttp.ActionPay, UserID: "user-1", SubscriptionID: "sub-1", Write: true}
	waive := billinghttp.Action{Name: billinghttp.ActionWaive, UserID: "user-1", SubscriptionID: "sub-1", Write: true, Operator: true}
	fmt.Println("user-1 pays:", as("session-1", pay))
	fmt.Println("user-1 waives:", as("session-1", waive))
	fmt.Println("user-2 pays user-1's:", as("session-2", pay))
	fmt.Println("operator waives:", as(operatorToken, waive))
	fmt.Println("unknown token:", as("guess", pay))
	// Output:
	// user-1 pays: allowed
	// user-1 waives: 403
	// user-2 pays user-1's: 403
	// operator waives: allowed
	// unknown token: 401
}
