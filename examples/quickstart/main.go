// Command quickstart runs recurring billing for 1,000 users over three
// simulated months on the in-memory default, no AWS account or server
// needed:
//
//	go run ./examples/quickstart
//
// Users are on monthly and yearly plans (some on Friday billing, some
// paused, some with a record left over from an outage); a scripted
// processor declines some collections, submits others as ACH debits that
// settle or come back the next day, and times out now and then. A fake
// clock steps day by day through the collector's scheduled, retry and
// pause runs and the settlements. The program prints a table per month
// and one user's full history, as the history table records it.
//
// The same simulation runs on DynamoDB Local or moto; the tables (with
// the lock table) are created under unique names and deleted afterwards:
//
//	docker run -p 8000:8000 amazon/dynamodb-local   # or: moto_server -p 8000
//	go run ./examples/quickstart -endpoint http://localhost:8000 -users 50
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/simulate"
)

func main() {
	var (
		users    = flag.Int("users", simulate.DefaultUsers, "number of users")
		months   = flag.Int("months", simulate.DefaultMonths, "calendar months to simulate")
		seed     = flag.Int64("seed", 1, "seed of the population and of the processor's answers")
		decline  = flag.Float64("decline-rate", simulate.DefaultDeclineRate, "share of attempts declined")
		pending  = flag.Float64("pending-rate", simulate.DefaultPendingRate, "share of attempts submitted as ACH debits")
		returns  = flag.Float64("return-rate", simulate.DefaultReturnRate, "share of ACH debits returned")
		endpoint = flag.String("endpoint", os.Getenv("DYNAMODB_ENDPOINT"), "run on DynamoDB at this `URL` (DynamoDB Local, moto) instead of in memory (default $DYNAMODB_ENDPOINT)")
		keep     = flag.Bool("keep-tables", false, "with -endpoint: keep the tables afterwards")
	)
	flag.Parse()
	opts := simulate.Options{
		Users: *users, Months: *months, Seed: *seed,
		DeclineRate: zeroAsNegative(*decline), PendingRate: zeroAsNegative(*pending), ReturnRate: zeroAsNegative(*returns),
	}
	if err := run(context.Background(), opts, *endpoint, *keep); err != nil {
		log.Fatal(err)
	}
}

// zeroAsNegative maps a flag's 0 to the option's "none" (a negative rate).
func zeroAsNegative(r float64) float64 {
	if r == 0 {
		return -1
	}
	return r
}

func run(ctx context.Context, opts simulate.Options, endpoint string, keep bool) error {
	where := "in memory"
	if endpoint != "" {
		cleanup, err := useDynamoDB(ctx, &opts, endpoint, keep)
		if err != nil {
			return err
		}
		defer cleanup()
		where = "on DynamoDB at " + endpoint
		if opts.Users > 100 {
			fmt.Fprintf(os.Stderr, "%d users on DynamoDB: minutes on DynamoDB Local, much longer on moto (try -users 50)\n", opts.Users)
		}
	}
	// Progress, a line per simulated week, on stderr so the table on
	// stdout stays clean.
	began := time.Now()
	week := 0
	opts.AfterStep = func(_ context.Context, s simulate.Step) error {
		if s.Kind == simulate.StepPause && s.Day.Weekday() == time.Saturday {
			week++
			fmt.Fprintf(os.Stderr, "simulated week %d, to %s (%.1fs)\n", week, s.Day.Format("Mon Jan 2 2006"), time.Since(began).Seconds())
		}
		return nil
	}
	res, err := simulate.Run(ctx, opts)
	if err != nil {
		return err
	}
	if err := res.Format(os.Stdout); err != nil {
		return err
	}
	fmt.Printf("(%s, %.1fs)\n", where, time.Since(began).Seconds())
	if res.Showcase == "" {
		return nil
	}
	rows, err := res.History.ListByUser(ctx, res.Showcase)
	if err != nil {
		return err
	}
	for _, u := range res.Users {
		if u.ID == res.Showcase {
			fmt.Printf("\nHistory of %s (%s %s at %s", u.ID, u.Tier, u.Term, u.Amount)
			if u.BillingWeek > 0 {
				fmt.Printf(", Friday billing week %d", u.BillingWeek)
			} else {
				fmt.Printf(", billed on day %d", u.AnchorDay)
			}
			fmt.Printf("), one row per write:\n\n")
		}
	}
	return simulate.FormatHistory(os.Stdout, rows)
}

// useDynamoDB points opts at new tables on the server at endpoint and
// returns what removes them.
func useDynamoDB(ctx context.Context, opts *simulate.Options, endpoint string, keep bool) (func(), error) {
	client := dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("dummy", "dummy", ""),
	})
	tag := make([]byte, 4)
	_, _ = rand.Read(tag)
	prefix := "quickstart-" + hex.EncodeToString(tag) + "-"
	tables := dynamostore.TableConfig{
		Subscriptions: prefix + dynamostore.DefaultSubscriptionsTable,
		History:       prefix + dynamostore.DefaultHistoryTable,
		Locks:         prefix + dynamostore.DefaultLockTable,
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := dynamostore.CreateTables(cctx, client, tables); err != nil {
		return nil, fmt.Errorf("creating the tables on %s: %w", endpoint, err)
	}
	remove := func() {
		if keep {
			fmt.Fprintf(os.Stderr, "tables kept: %s, %s, %s\n", tables.Subscriptions, tables.History, tables.Locks)
			return
		}
		for _, name := range []string{tables.Subscriptions, tables.History, tables.Locks} {
			_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
		}
	}
	cfg := dynamostore.Config{Client: client, Tables: tables}
	repo, err := dynamostore.NewRepository(cfg)
	if err == nil {
		opts.Repository = repo
		opts.History, err = dynamostore.NewHistory(cfg)
	}
	var locker *dynamostore.Locker
	if err == nil {
		locker, err = dynamostore.NewLocker(client, dynamostore.WithLockTable(tables.Locks))
		opts.Locker = locker
	}
	if err != nil {
		remove()
		return nil, err
	}
	return func() {
		err := locker.Close(context.Background())
		remove()
		if err != nil && !errors.Is(err, context.Canceled) {
			fmt.Fprintf(os.Stderr, "closing the locker: %v\n", err)
		}
	}, nil
}
