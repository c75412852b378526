// Command console serves the operator console (package billingui) over the
// quickstart's simulated months: it simulates the users' billing, as
// examples/quickstart does, with every charge invoiced, then serves the
// pages on the store they left; a customer's page lists their invoices
// with links to their PDFs (package render).
//
//	go run -C examples/console .                 # in memory; open http://127.0.0.1:8080/billing/
//	go run -C examples/console . -role support   # the read-only role: no action buttons
//	go run -C examples/console . -endpoint http://localhost:8000   # on DynamoDB Local or moto
//
// (It is a module of its own, so that the browser tests' chromedp stays out
// of the library's go.mod: hence -C.)
//
// The console is what a host mounts next to its routes:
//
//	console, err := billingui.New(billingui.Config{Collector: c, Repository: repo, History: hist, Authorizer: authorize})
//	mux.Handle("/billing/", http.StripPrefix("/billing", console))
//
// Dunning is on (dunning.go): a declined period is retried on the default
// schedule, its customer told (the notices are kept, not mailed), and the
// subscription cancelled when the schedule ends unpaid; a customer page
// shows an owed period's retries left, next retry and notices, and
// Attention the customers whose dunning ends within three days.
//
// Every request here gets the role of -role; a host authenticates its
// operators instead. The clock is the simulation's: "today" is the last
// simulated day.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	var o options
	addr := flag.String("addr", "127.0.0.1:8080", "serve on this `address`")
	role := flag.String("role", "operator", `the role of every request: "operator", "support" or "user:ID"`)
	flag.StringVar(&o.Endpoint, "endpoint", os.Getenv("DYNAMODB_ENDPOINT"), "keep the records on DynamoDB at this `URL` (DynamoDB Local, moto) instead of in memory (default $DYNAMODB_ENDPOINT)")
	flag.IntVar(&o.Users, "users", 200, "number of simulated users")
	flag.IntVar(&o.Months, "months", 2, "calendar months to simulate")
	flag.Int64Var(&o.Seed, "seed", 1, "seed of the population and of the processor's answers")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, *addr, *role); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, o options, addr, role string) error {
	// Listened on first: a taken address is refused at once, not after the
	// simulation.
	ln, err := listen(addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	if o.Endpoint != "" {
		tag := make([]byte, 4)
		_, _ = rand.Read(tag)
		o.TablePrefix = "console-" + hex.EncodeToString(tag)
	}
	fmt.Fprintf(os.Stderr, "simulating %d users over %d months...\n", o.Users, o.Months)
	d, err := build(ctx, o)
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, d.notices.summary())
	if o.Endpoint != "" {
		fmt.Fprintf(os.Stderr, "tables %[2]s-activity, %[2]s-activity-history, %[2]s-locks and %[2]s-invoices kept on %[1]s; read them with\n"+
			"  billingctl --endpoint %[1]s --tables %[2]s subs list USER_ID\n"+
			"  billingctl --endpoint %[1]s --tables %[2]s invoices list USER_ID\n", o.Endpoint, o.TablePrefix)
	}
	console, err := d.console(role)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mount(console)}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	fmt.Fprintf(os.Stderr, "console (%s) on http://%s/billing/ (today is %s); Ctrl-C stops it\n",
		role, ln.Addr(), d.clock.Now().Format("Mon Jan 2 2006"))
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// listen listens on addr, the -addr flag: a refusal (the address in use,
// say) says to pass another.
func listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("console: %w: pass -addr with a free address (e.g. -addr 127.0.0.1:8081, or -addr 127.0.0.1:0 for any free port)", err)
	}
	return ln, nil
}
