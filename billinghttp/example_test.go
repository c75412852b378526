package billinghttp_test

import (
	"github.com/dynabill/billing/memory"
)

import (
	"context"
	"crypto/subtle"
	"encoding/json"
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
// lets a user act on their own records only, and makes three requests: an
// anonymous one, one for another user, and a manual repayment.
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
	failed := billing.Subscription{
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
		// The host's policy: here a token per user (verify real
		// credentials in production). It must check Action.UserID; the
		// handler checks that the subscription belongs to that user.
		Authorize: func(r *http.Request, a billinghttp.Action) error {
			token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok {
				return billinghttp.ErrUnauthenticated
			}
			if subtle.ConstantTimeCompare([]byte(token), []byte("token-of-"+a.UserID)) != 1 {
				return billinghttp.ErrForbidden
			}
			return nil
		},
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
