package main

// The simulation driver: it runs what main.go wires over simulated months
// and prints what happened, and it stands in for the host's services (a
// queue, a user directory, the account each user is charged from). A
// service needs none of it.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest/simulation"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/notice"
)

// dynamoUsers is the number of users on DynamoDB by default: three months
// of them take about a minute on moto, which serves one request at a time
// and slows as its tables grow (twice as many take three times as long).
const dynamoUsers = 75

// stdout and stderr are where the driver prints the table and its
// progress; the test gathers them.
var stdout, stderr io.Writer = os.Stdout, os.Stderr

// simulationFlags defines the flags of the simulated population and
// processor; the function it returns reads them after flag.Parse, for a
// run on DynamoDB or in memory.
func simulationFlags() func(onDynamoDB bool) simulation.Options {
	var (
		users = flag.Int("users", 0, fmt.Sprintf("number of users (default %d in memory, %d with -endpoint)",
			simulation.DefaultUsers, dynamoUsers))
		months  = flag.Int("months", simulation.DefaultMonths, "calendar months to simulate")
		seed    = flag.Int64("seed", 1, "seed of the population and of the processor's answers")
		decline = flag.Float64("decline-rate", simulation.DefaultDeclineRate, "share of attempts declined")
		pending = flag.Float64("pending-rate", simulation.DefaultPendingRate, "share of attempts submitted as ACH debits")
		returns = flag.Float64("return-rate", simulation.DefaultReturnRate, "share of ACH debits returned")
	)
	return func(onDynamoDB bool) simulation.Options {
		return population(simulation.Options{
			Users: *users, Months: *months, Seed: *seed,
			DeclineRate: zeroAsNegative(*decline), PendingRate: zeroAsNegative(*pending), ReturnRate: zeroAsNegative(*returns),
		}, onDynamoDB)
	}
}

// population completes o: fewer users by default on DynamoDB, and every
// user signing up through main.go's Subscribe (no record another service
// wrote).
func population(o simulation.Options, onDynamoDB bool) simulation.Options {
	if onDynamoDB && o.Users == 0 {
		o.Users = dynamoUsers
	}
	o.NoLegacy = true
	return o
}

// zeroAsNegative maps a flag's 0 to the option's "none" (a negative rate).
func zeroAsNegative(r float64) float64 {
	if r == 0 {
		return -1
	}
	return r
}

// simulateMonths runs sim (main.go's collector and the rest) with the
// notifier's daily run at noon before the collector's, a progress line per
// simulated week on stderr, then prints the per-month table and the
// history of one user on stdout.
func simulateMonths(ctx context.Context, sim simulation.Options, daily notifier, reminders *countingNotifier, endpoint string) (*simulation.Result, error) {
	where := "in memory"
	if endpoint != "" {
		where = "on DynamoDB at " + endpoint
		if sim.Users > 2*dynamoUsers {
			fmt.Fprintf(stderr, "%d users on DynamoDB: minutes on DynamoDB Local, longer on moto (the default, %d, takes about a minute)\n",
				sim.Users, dynamoUsers)
		}
	}
	sim.BeforeStep = func(ctx context.Context, s simulation.Step) error {
		if s.Kind != simulation.StepScheduled {
			return nil
		}
		return daily.run(ctx)
	}
	// Progress on stderr, so the table on stdout stays clean.
	began := time.Now()
	week := 0
	sim.AfterStep = func(_ context.Context, s simulation.Step) error {
		if s.Kind == simulation.StepPause && s.Day.Weekday() == time.Saturday {
			week++
			fmt.Fprintf(stderr, "simulated week %d, to %s (%.1fs)\n", week, s.Day.Format("Mon Jan 2 2006"), time.Since(began).Seconds())
		}
		return nil
	}
	res, err := simulation.Run(ctx, sim)
	if err != nil {
		return res, err
	}
	if err := res.Format(stdout); err != nil {
		return res, err
	}
	fmt.Fprintf(stdout, "(%s, %.1fs; %d reminders sent)\n", where, time.Since(began).Seconds(), reminders.sent.Load())
	if res.Showcase == "" {
		return res, nil
	}
	rows, err := res.History.ListByUser(ctx, res.Showcase)
	if err != nil {
		return res, err
	}
	for _, u := range res.Users {
		if u.ID == res.Showcase {
			fmt.Fprintf(stdout, "\nHistory of %s (%s %s at %s", u.ID, u.Tier, u.Term, u.Amount)
			if u.BillingWeek > 0 {
				fmt.Fprintf(stdout, ", Friday billing week %d", u.BillingWeek)
			} else {
				fmt.Fprintf(stdout, ", billed on day %d", u.AnchorDay)
			}
			fmt.Fprintf(stdout, "), one row per write:\n\n")
		}
	}
	return res, simulation.FormatHistory(stdout, rows)
}

// notifier is the pre-billing notifier as main.go wires it.
type notifier struct {
	scheduler *notice.Scheduler
	worker    *notice.Worker
	queue     *memoryQueue
}

// run is one day of reminders, as a service's daily trigger and queues
// make it: the scheduler reads its window, following its continuations,
// then the worker handles every message queued.
func (n notifier) run(ctx context.Context) error {
	var ev notice.Event // the daily trigger's: today's window
	for {
		res, err := n.scheduler.Run(ctx, ev)
		if err != nil {
			return fmt.Errorf("reminders: %w", err)
		}
		if res.Continuation == nil {
			break
		}
		ev = *res.Continuation
	}
	msgs := n.queue.take()
	if failed := n.worker.HandleBatch(ctx, msgs); len(failed) > 0 {
		return fmt.Errorf("reminders: %d of %d messages failed: %s", len(failed), len(msgs), strings.Join(failed, ", "))
	}
	return nil
}

// memoryQueue is a notice.Enqueuer standing in for the worker's SQS
// queue.
type memoryQueue struct {
	mu   sync.Mutex
	msgs []notice.QueueMessage
}

func (q *memoryQueue) Enqueue(_ context.Context, bodies []string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, b := range bodies {
		q.msgs = append(q.msgs, notice.QueueMessage{ID: fmt.Sprintf("msg-%d", len(q.msgs)+1), Body: b})
	}
	return nil
}

// take empties the queue.
func (q *memoryQueue) take() []notice.QueueMessage {
	q.mu.Lock()
	defer q.mu.Unlock()
	msgs := q.msgs
	q.msgs = nil
	return msgs
}

// demoUsers is a billing.UserDirectory standing in for the host's user
// service: every user is active, with an address made from the ID.
type demoUsers struct{}

func (demoUsers) GetUser(_ context.Context, userID string) (billing.User, error) {
	return billing.User{ID: userID, Email: userID + "@example.com", Status: billing.UserStatusActive}, nil
}

// demoAccountMask is the WorkerConfig.AccountMask standing in for the
// host's payment methods: every user is charged from an account ending in
// 6789.
func demoAccountMask(context.Context, string) (string, error) { return "6789", nil }

// createTables creates the tables (lock table included) under a unique
// prefix on the DynamoDB at endpoint, and returns a client for it, their
// names and what deletes them (unless keep). When the creation fails, or
// is interrupted, it deletes what it created.
func createTables(ctx context.Context, endpoint string, keep bool) (*dynamodb.Client, dynamostore.TableConfig, func(), error) {
	client := dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("dummy", "dummy", ""),
	})
	tag := make([]byte, 4)
	_, _ = rand.Read(tag)
	prefix := "quickstart-" + hex.EncodeToString(tag)
	tables := prefixedTables(prefix)
	names := []string{tables.Subscriptions, tables.History, tables.Locks}
	// Deleting runs after an interrupt too, so it does not take the run's
	// context; a table that was never created is not an error.
	deleteTables := func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var deleted []string
		for _, name := range names {
			_, err := client.DeleteTable(dctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
			var missing *types.ResourceNotFoundException
			switch {
			case err == nil:
				deleted = append(deleted, name)
			case !errors.As(err, &missing):
				fmt.Fprintf(stderr, "deleting table %s: %v\n", name, err)
			}
		}
		if len(deleted) > 0 {
			fmt.Fprintf(stderr, "tables deleted: %s\n", strings.Join(deleted, ", "))
		}
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := dynamostore.CreateTables(cctx, client, tables); err != nil {
		deleteTables()
		return nil, tables, nil, fmt.Errorf("creating the tables on %s: %w", endpoint, err)
	}
	deleted := "deleted at exit (-keep keeps them)"
	if keep {
		deleted = "kept at exit (-keep)"
	}
	fmt.Fprintf(stderr, "tables %s created, %s; read them with\n  %s\n", strings.Join(names, ", "), deleted, billingctlLine(endpoint, prefix))
	if keep {
		return client, tables, func() {
			fmt.Fprintf(stderr, "tables kept: %s; read them with\n  %s\n", strings.Join(names, ", "), billingctlLine(endpoint, prefix))
		}, nil
	}
	return client, tables, deleteTables, nil
}

// prefixedTables names the legacy layout's tables from prefix as
// billingctl's --tables PREFIX does: PREFIX-activity,
// PREFIX-activity-history and PREFIX-locks.
func prefixedTables(prefix string) dynamostore.TableConfig {
	return dynamostore.TableConfig{
		Subscriptions: prefix + "-activity",
		History:       prefix + "-activity-history",
		Locks:         prefix + "-locks",
	}
}

// billingctlLine is the billingctl command that reads the tables of
// prefix on endpoint (a user's records; "History of" in the output names one).
func billingctlLine(endpoint, prefix string) string {
	return fmt.Sprintf("billingctl --endpoint %s --tables %s subs list USER_ID", endpoint, prefix)
}

// closeLocker closes the DynamoDB locker, reporting a failure on stderr.
func closeLocker(l *dynamostore.Locker) {
	if err := l.Close(context.Background()); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(stderr, "closing the locker: %v\n", err)
	}
}
