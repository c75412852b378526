// Command httpserver serves the billing admin API (package billinghttp) on
// the in-memory store, with one demo user, no AWS account needed:
//
//	go run ./examples/httpserver [-addr 127.0.0.1:8080]
//
// The API is mounted under /billing. Its authorizer is a toy: the bearer
// token is the user ID, so anyone who knows a user ID may act as that
// user. A real host verifies credentials (a signed session, an OAuth
// token, mTLS) and decides per Action which callers may act on which
// users. Try:
//
//	curl -H 'Authorization: Bearer demo-user' localhost:8080/billing/demo-user/subscriptions
//	curl -H 'Authorization: Bearer demo-user' localhost:8080/billing/demo-user/subscriptions/sub-overdue/history
//	curl -X POST -H 'Authorization: Bearer demo-user' localhost:8080/billing/demo-user/subscriptions/sub-overdue/pay
//	curl -X POST -H 'Authorization: Bearer demo-user' -d '{"months": 2}' localhost:8080/billing/demo-user/subscriptions/sub-next/pause
//	curl localhost:8080/billing/demo-user/subscriptions                                # 401
//	curl -H 'Authorization: Bearer someone-else' localhost:8080/billing/demo-user/subscriptions   # 403
//
// The payment processor is a stand-in defined here that accepts every
// charge; records and locks live in memory (package memory) until the
// program stops.
package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
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

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to listen on")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *addr); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, addr string) error {
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	store, err := memory.New(memory.Options{})
	if err != nil {
		return err
	}
	collector, err := billing.NewCollector(billing.Config{
		Repository: store.Repository(),
		History:    store.History(),
		Locker:     memory.NewLocker(memory.LockerOptions{LeaseDuration: time.Minute}),
		Provider:   acceptAll{},
		Logger:     logger,
	})
	if err != nil {
		return err
	}
	if err := seed(ctx, store.Repository(), time.Now().UTC()); err != nil {
		return err
	}
	api, err := billinghttp.New(billinghttp.Config{
		Repository: store.Repository(),
		History:    store.History(),
		Collector:  collector,
		Authorize:  toyAuthorizer,
		Logger:     logger,
		Challenge:  `Bearer realm="billing"`,
	})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/billing/", http.StripPrefix("/billing", api))

	srv := &http.Server{
		Addr:              addr,
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
	fmt.Printf("billing admin API on http://%s/billing/ (user %q, token %q); Ctrl-C stops\n", addr, demoUser, demoUser)
	fmt.Printf("  curl -H 'Authorization: Bearer %s' http://%s/billing/%s/subscriptions\n", demoUser, addr, demoUser)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
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

// toyAuthorizer lets the bearer token act on the user of the same ID, for
// reads and writes. It is a demonstration only: a token that is a user ID
// is no secret. A real authorizer verifies the caller's credentials and
// checks that the caller may act on a.UserID (and, for writes, may change
// records); the handler then refuses subscriptions of other users.
func toyAuthorizer(r *http.Request, a billinghttp.Action) error {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		return billinghttp.ErrUnauthenticated
	}
	if subtle.ConstantTimeCompare([]byte(token), []byte(a.UserID)) != 1 {
		return billinghttp.ErrForbidden
	}
	return nil
}

// seed gives the demo user last month's completed period, an overdue
// period whose collection failed (pay it), and next month's period
// (pause, cancel or move it).
func seed(ctx context.Context, repo billing.Repository, now time.Time) error {
	today := now.Truncate(24 * time.Hour)
	overdue := today.AddDate(0, 0, -5)
	record := func(id string, billed time.Time, st billing.Status) billing.Subscription {
		return billing.Subscription{
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
	for _, s := range []billing.Subscription{done, failed, next} {
		if err := repo.Add(ctx, &s); err != nil {
			return fmt.Errorf("seeding %s: %w", s.SubscriptionID, err)
		}
	}
	return nil
}
