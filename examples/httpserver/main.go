// Command httpserver serves the billing API (package billinghttp) on the
// in-memory store, with one demo user, no AWS account needed:
//
//	BILLING_OPERATOR_TOKEN=$(openssl rand -hex 16) go run ./examples/httpserver [-addr 127.0.0.1:8080]
//
// The API is mounted under /billing, with the two roles of
// billinghttp.RoleAuthorizer:
//
//   - an end user may list, get and read the history of their own
//     subscriptions, and pay, cancel, pause and resume them. Here the
//     bearer token is the user ID, a toy: anyone who knows a user ID may
//     act as that user. A real host verifies credentials (a signed
//     session, an OAuth token, mTLS);
//   - the operator, whose bearer token is $BILLING_OPERATOR_TOKEN
//     (compared in constant time; one is generated and printed when it is
//     unset), may also change tiers (prices), move billing dates,
//     reactivate and waive, for any user.
//
// Tiers are priced by the price list defined here, so a tier change needs
// no amount. Try:
//
//	curl -H 'Authorization: Bearer demo-user' localhost:8080/billing/demo-user/subscriptions
//	curl -H 'Authorization: Bearer demo-user' localhost:8080/billing/demo-user/subscriptions/sub-overdue/history
//	curl -X POST -H 'Authorization: Bearer demo-user' localhost:8080/billing/demo-user/subscriptions/sub-overdue/pay
//	curl -X POST -H 'Authorization: Bearer demo-user' -d '{"months": 2}' localhost:8080/billing/demo-user/subscriptions/sub-next/pause
//	curl -X POST -H "Authorization: Bearer $BILLING_OPERATOR_TOKEN" -d '{"tier": "Max:v1"}' localhost:8080/billing/demo-user/subscriptions/sub-next/tier
//	curl -X POST -H 'Authorization: Bearer demo-user' -d '{"tier": "Max:v1"}' localhost:8080/billing/demo-user/subscriptions/sub-next/tier   # 403: an operator's action
//	curl localhost:8080/billing/demo-user/subscriptions                                # 401
//	curl -H 'Authorization: Bearer someone-else' localhost:8080/billing/demo-user/subscriptions   # 403
//
// The payment processor is a stand-in defined here that accepts every
// charge; records and locks live in memory (package memory) until the
// program stops.
package main

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billinghttp"
	"github.com/dynabill/billing/memory"
)

const demoUser = "demo-user"

// operatorTokenEnv names the environment variable of the operator's
// token. It is not a flag, so that it does not show in the process list.
const operatorTokenEnv = "BILLING_OPERATOR_TOKEN"

// prices is the demo's price list: what one period of each tier costs.
var prices = billing.PriceListMap{
	"Lite:v1": billing.MustParseAmount("2.99"),
	"Plus:v2": billing.MustParseAmount("4.99"),
	"Max:v1":  billing.MustParseAmount("9.99"),
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to listen on")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *addr, os.Getenv(operatorTokenEnv)); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, addr, operatorToken string) error {
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	generated := operatorToken == ""
	if generated {
		b := make([]byte, 16)
		if _, err := rand.Read(b); err != nil {
			return err
		}
		operatorToken = hex.EncodeToString(b)
	}
	mux, err := newServer(ctx, time.Now().UTC(), operatorToken, logger)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("httpserver: %w: pass -addr with a free address (e.g. -addr 127.0.0.1:8081)", err)
	}
	defer ln.Close()
	addr = ln.Addr().String() // the port chosen for -addr host:0
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       time.Minute,
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	fmt.Printf("billing API on http://%s/billing/ (end user %q, token %q); Ctrl-C stops\n", addr, demoUser, demoUser)
	fmt.Printf("  curl -H 'Authorization: Bearer %s' http://%s/billing/%s/subscriptions\n", demoUser, addr, demoUser)
	if generated {
		fmt.Printf("operator token (generated; set %s to choose it): %s\n", operatorTokenEnv, operatorToken)
	}
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// newServer seeds an in-memory store with the demo user's records as of
// now and returns the API mounted under /billing/. operatorToken is the
// operator's bearer token; it must not be empty.
func newServer(ctx context.Context, now time.Time, operatorToken string, logger *slog.Logger) (http.Handler, error) {
	if operatorToken == "" {
		return nil, errors.New("httpserver: an operator token is required")
	}
	store, err := memory.New(memory.Options{})
	if err != nil {
		return nil, err
	}
	collector, err := billing.NewCollector(billing.Config{
		Repository: store.Repository(),
		History:    store.History(),
		Locker:     memory.NewLocker(memory.LockerOptions{LeaseDuration: time.Minute}),
		Provider:   acceptAll{},
		Prices:     prices,
		Logger:     logger,
	})
	if err != nil {
		return nil, err
	}
	if err := seed(ctx, store.Repository(), now); err != nil {
		return nil, err
	}
	api, err := billinghttp.New(billinghttp.Config{
		Repository: store.Repository(),
		History:    store.History(),
		Collector:  collector,
		Authorize:  billinghttp.RoleAuthorizer(toyIdentify(operatorToken)),
		Logger:     logger,
		Challenge:  `Bearer realm="billing"`,
	})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/billing/", http.StripPrefix("/billing", api))
	return mux, nil
}

// acceptAll stands in for the payment processor: it accepts every charge.
// Its transaction ID is made from the idempotency key, so a request
// presented again (the collector replays one whose answer it did not
// record) gets the same answer, as from a real processor that honours
// idempotency keys.
type acceptAll struct{}

func (acceptAll) Collect(ctx context.Context, req billing.PaymentRequest) (billing.PaymentResult, error) {
	if err := ctx.Err(); err != nil {
		return billing.PaymentResult{}, err
	}
	return billing.PaymentResult{
		Outcome:       billing.OutcomeSucceeded,
		TransactionID: "txn-" + req.IdempotencyKey,
		AccountMask:   "6789",
		PaymentType:   "ACH",
	}, nil
}

// toyIdentify tells who sent a request, for billinghttp.RoleAuthorizer:
// the operator when the bearer token is operatorToken (compared in
// constant time), else the end user whose ID is the token. It is a
// demonstration only: a token that is a user ID is no secret. A real host
// verifies the caller's credentials and reads the user ID from them.
func toyIdentify(operatorToken string) func(r *http.Request) (userID string, operator bool, err error) {
	return func(r *http.Request) (string, bool, error) {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || token == "" {
			return "", false, billinghttp.ErrUnauthenticated
		}
		if subtle.ConstantTimeCompare([]byte(token), []byte(operatorToken)) == 1 {
			return "", true, nil
		}
		return token, false, nil
	}
}

// seed gives the demo user last month's completed period, an overdue
// period whose collection failed (pay it), and next month's period
// (pause, cancel or move it).
func seed(ctx context.Context, repo billing.Repository, now time.Time) error {
	today := now.Truncate(24 * time.Hour)
	overdue := today.AddDate(0, 0, -5)
	record := func(id string, billed time.Time, st billing.Status) billing.Period {
		return billing.Period{
			UserID: demoUser, SubscriptionID: id, BillingDate: billed, BillingPeriod: billing.BillingPeriod(billed),
			Amount: billing.MustParseAmount("4.99"), Status: st, Term: billing.TermMonthly, AnchorDay: billed.Day(),
			ReceiptTierName: "Plus:v2", Process: billing.ProcessInitial,
			CreatedDate: billed.AddDate(0, -1, 0), LastRunDate: billed.AddDate(0, -1, 0),
		}
	}
	done := record("sub-done", overdue.AddDate(0, -1, 0), billing.StatusCompleted)
	done.InitialRunDate, done.CompletionDate, done.LastRunDate, done.Attempt = done.BillingDate, done.BillingDate, done.BillingDate, 1
	done.TransactionID, done.ReceiptAccountMask, done.ReceiptPaymentType = "txn-demo-1", "6789", "ACH"
	failed := record("sub-overdue", overdue, billing.StatusError)
	failed.InitialRunDate, failed.LastRunDate, failed.Attempt = overdue, overdue.Add(time.Hour), 1
	failed.PaymentError = "insufficient funds"
	next := record("sub-next", overdue.AddDate(0, 1, 0), billing.StatusScheduled)
	next.LastRunDate, next.CreatedDate = overdue.Add(time.Hour+time.Nanosecond), overdue.Add(time.Hour+time.Nanosecond)
	for _, s := range []billing.Period{done, failed, next} {
		if err := repo.Add(ctx, &s); err != nil {
			return fmt.Errorf("seeding %s: %w", s.SubscriptionID, err)
		}
	}
	return nil
}
