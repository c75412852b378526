// Command quickstart wires recurring billing the way a service does and
// runs it for 1,000 users over three simulated months, in memory, with no
// AWS account or server:
//
//	go run ./examples/quickstart
//
// This file is the part to copy: the store, the locker, the payment
// provider, the pre-billing notifier and the collector, then the sign-ups
// (Collector.Subscribe, one request per user) and the runs. It imports
// only the library's public packages. driver.go steps a fake clock day by
// day through the collector's scheduled, retry and pause runs, the daily
// reminders and the ACH settlements, and prints a table per month and one
// user's history. Users are on monthly and yearly plans (some on Friday
// billing, some starting paused); a scripted processor declines some
// collections, submits others as ACH debits that settle or come back the
// next day, and times out now and then.
//
// With -endpoint (or $DYNAMODB_ENDPOINT) the records and locks live in
// DynamoDB Local or moto, in tables created for the run and deleted at
// exit, on Ctrl-C (SIGINT) and on SIGTERM, unless -keep. Their names
// follow billingctl's --tables PREFIX (PREFIX-activity,
// PREFIX-activity-history, PREFIX-locks), and the run prints the
// billingctl line that reads them. The default is
// then 75 users, about a minute on moto (see -users):
//
//	docker run -p 8000:8000 amazon/dynamodb-local   # or: moto_server -p 8000
//	go run ./examples/quickstart -endpoint http://localhost:8000
package main

import (
	"context"
	"flag"
	"log"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest/simulation"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/memory"
	"github.com/dynabill/billing/notice"
)

func main() {
	endpoint := flag.String("endpoint", os.Getenv("DYNAMODB_ENDPOINT"), "run on DynamoDB at this `URL` (DynamoDB Local, moto) instead of in memory (default $DYNAMODB_ENDPOINT)")
	keep := flag.Bool("keep", false, "with -endpoint: keep the tables (by default they are deleted at exit, on Ctrl-C and on SIGTERM)")
	options := simulationFlags() // -users, -months, -seed, the processor's rates: driver.go
	flag.Parse()
	// Ctrl-C or SIGTERM cancels ctx: the run stops and its deferred
	// clean-ups (the tables) run all the same. A second signal kills.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop)
	if _, err := run(ctx, *endpoint, *keep, options(*endpoint != "")); err != nil {
		log.Fatal(err)
	}
}

// repository is what the collector and the reminders need of a store;
// memory's and dynamostore's repositories are both.
type repository interface {
	billing.Repository
	notice.ReminderClaimer
}

func run(ctx context.Context, endpoint string, keep bool, sim simulation.Options) (*simulation.Result, error) {
	// A service leaves every Clock below unset (the system clock); the
	// simulation moves this one through the months in seconds.
	clock := simulation.NewClock()

	// The store keeps the billing records and their history; the locker
	// keeps two collections of one user from running at once.
	var (
		repo   repository
		hist   billing.History
		locker billing.Locker
	)
	if endpoint == "" {
		store, err := memory.New(memory.Options{PageSize: 250})
		if err != nil {
			return nil, err
		}
		repo, hist = store.Repository(), store.History()
		locker = memory.NewLocker(memory.LockerOptions{Clock: clock})
	} else {
		client, tables, cleanup, err := createTables(ctx, endpoint, keep) // driver.go
		if err != nil {
			return nil, err
		}
		defer cleanup()
		cfg := dynamostore.Config{Client: client, Tables: tables}
		if repo, err = dynamostore.NewRepository(cfg); err != nil {
			return nil, err
		}
		if hist, err = dynamostore.NewHistory(cfg); err != nil {
			return nil, err
		}
		dl, err := dynamostore.NewLocker(client, dynamostore.WithLockTable(tables.Locks))
		if err != nil {
			return nil, err
		}
		defer closeLocker(dl) // releases what it still holds; before the tables go
		locker = dl
	}

	// The payment provider: a service writes an adapter for its processor
	// (see billing.PaymentProvider). This one is scripted.
	processor := simulation.NewProvider(clock)

	// The pre-billing notifier: each day the scheduler queues one message
	// per record billed in four days, and the worker sends its reminder.
	queue := &memoryQueue{} // a service's SQS queue: driver.go
	scheduler, err := notice.NewScheduler(notice.SchedulerConfig{Repository: repo, Enqueuer: queue, Clock: clock})
	if err != nil {
		return nil, err
	}
	reminders := &countingNotifier{}
	worker, err := notice.NewWorker(notice.WorkerConfig{
		Users:       demoUsers{},     // the service's user directory: driver.go
		AccountMask: demoAccountMask, // and the account each user is charged from
		Notifier:    reminders,
		Reminders:   repo, // one reminder per record and billing date, however often it runs
		Clock:       clock,
	})
	if err != nil {
		return nil, err
	}

	// The collector starts subscriptions, charges what is due, retries and
	// pauses, and applies the processor's settlements. Its events feed the
	// simulation's table; a service sends them to its own queue or
	// analytics.
	tally := simulation.NewTally()
	collector, err := billing.NewCollector(billing.Config{
		Repository: repo,
		History:    hist,
		Locker:     locker,
		Provider:   processor,
		Clock:      clock,
		Events:     tally,
		// The service's price list (a billing.PriceList): plan → what one
		// period costs ("Plus:v2" monthly, "Plus:v2/YEARLY" yearly), so
		// that a sign-up names the tier and term and not the amount.
		Prices: simulation.Prices(),
		// Small, so that runs continue through Report.Next as a service's
		// queued invocations do; the default is 10 pages.
		PagesPerInvocation: 2,
	})
	if err != nil {
		return nil, err
	}

	// Sign-ups: a service calls Subscribe from its sign-up handler, one
	// request per user and order. It is idempotent on the user and
	// RequestKey (a redelivered message creates nothing twice) and refuses
	// a user who has an open subscription (*billing.OpenSubscriptionError)
	// or a bad field (*billing.FieldError). The simulation's users sign up
	// on the eve of its first day.
	sim.SignUp = func(ctx context.Context, u simulation.User) error {
		_, err := collector.Subscribe(ctx, billing.SubscribeRequest{
			RequestKey: u.RequestKey, // the host's order ID
			UserID:     u.ID,
			Tier:       u.Tier, // priced by Config.Prices; or set Amount
			Term:       u.Term, // monthly or yearly
			// The first charge: the first scheduled run after this date.
			FirstBillingDate: u.FirstBillingDate,
			// Billed on the same Friday of every month (the first to the
			// fifth) as FirstBillingDate, instead of its day of the month.
			FridayBilling: u.BillingWeek > 0,
			// Starts paused: the first months are skipped, not charged.
			PauseMonths: u.PauseMonths,
		})
		return err
	}

	// The run: months of days, each with its reminders and its runs.
	sim.Collector, sim.Tally = collector, tally
	sim.Repository, sim.History, sim.Clock, sim.Provider = repo, hist, clock, processor
	daily := notifier{scheduler: scheduler, worker: worker, queue: queue}
	return simulateMonths(ctx, sim, daily, reminders, endpoint)
}

// countingNotifier is the example's billing.Notifier. A service's sends
// the reminder by email or push (n has the date, amount, tier and the
// account's last digits); this one counts what it would have sent.
type countingNotifier struct{ sent atomic.Int64 }

func (c *countingNotifier) Send(ctx context.Context, email string, n billing.RenewalNotice) error {
	c.sent.Add(1)
	return nil
}
