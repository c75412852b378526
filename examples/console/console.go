package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billinghttp"
	"github.com/dynabill/billing/billingtest/simulation"
	"github.com/dynabill/billing/billingui"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/memory"
)

// options are the command's flags.
type options struct {
	// Endpoint is a DynamoDB endpoint (DynamoDB Local, moto); "" keeps the
	// records in memory.
	Endpoint string
	// TablePrefix names the tables created on Endpoint as billingctl's
	// --tables PREFIX names them: PREFIX-activity, PREFIX-activity-history
	// and PREFIX-locks.
	TablePrefix string
	Users       int
	Months      int
	Seed        int64
	// DeclineRate is the share of attempts declined; 0 is the
	// simulation's default.
	DeclineRate float64
}

// demo is a store filled by the quickstart's simulated months, with a
// collector on it and the runs' reports.
type demo struct {
	collector *billing.Collector
	repo      billing.Repository
	hist      billing.History
	runs      *billingui.RunLog
	clock     simulation.Clock
	result    *simulation.Result
	csrfKey   []byte
}

// build simulates o.Months months of o.Users users, as the quickstart does,
// and returns the store they left with a collector over it for the
// console's actions.
func build(ctx context.Context, o options) (*demo, error) {
	clock := simulation.NewClock()
	var (
		repo   billing.Repository
		hist   billing.History
		locker billing.Locker
	)
	if o.Endpoint == "" {
		store, err := memory.New(memory.Options{PageSize: 250})
		if err != nil {
			return nil, err
		}
		repo, hist = store.Repository(), store.History()
		locker = memory.NewLocker(memory.LockerOptions{Clock: clock})
	} else {
		client := dynamodb.New(dynamodb.Options{
			Region:       "us-east-1",
			BaseEndpoint: aws.String(o.Endpoint),
			Credentials:  credentials.NewStaticCredentialsProvider("dummy", "dummy", ""),
		})
		tables := dynamostore.TableConfig{
			Subscriptions: o.TablePrefix + "-activity",
			History:       o.TablePrefix + "-activity-history",
			Locks:         o.TablePrefix + "-locks",
		}
		if err := dynamostore.CreateTables(ctx, client, tables); err != nil {
			return nil, fmt.Errorf("creating the tables on %s: %w", o.Endpoint, err)
		}
		cfg := dynamostore.Config{Client: client, Tables: tables}
		r, err := dynamostore.NewRepository(cfg)
		if err != nil {
			return nil, err
		}
		h, err := dynamostore.NewHistory(cfg)
		if err != nil {
			return nil, err
		}
		l, err := dynamostore.NewLocker(client, dynamostore.WithLockTable(tables.Locks))
		if err != nil {
			return nil, err
		}
		repo, hist, locker = r, h, l
	}
	runs := billingui.NewRunLog(0)
	res, err := simulation.Run(ctx, simulation.Options{
		Users: o.Users, Months: o.Months, Seed: o.Seed, DeclineRate: o.DeclineRate, NoLegacy: true,
		Repository: repo, History: hist, Locker: locker, Clock: clock,
		// The host's part: it keeps each run's report for the Today page.
		AfterStep: func(_ context.Context, s simulation.Step) error {
			for _, r := range s.Reports {
				runs.Add(r)
			}
			return nil
		},
	})
	if err != nil {
		return nil, err
	}
	collector, err := billing.NewCollector(billing.Config{
		Repository: repo, History: hist, Locker: locker,
		Provider: res.Provider, Clock: clock, Prices: simulation.Prices(),
	})
	if err != nil {
		return nil, err
	}
	return &demo{collector: collector, repo: repo, hist: hist, runs: runs, clock: clock, result: res}, nil
}

// console returns the console with every request given role: "operator"
// (every action), "support" (reads only) or "user:ID" (an end user's own
// records). A host authenticates instead (its session, SSO) and returns
// the role from its identify function.
func (d *demo) console(role string) (http.Handler, error) {
	var authorize billinghttp.Authorizer
	switch {
	case role == "support":
		authorize = func(_ *http.Request, a billinghttp.Action) error {
			if a.Write {
				return fmt.Errorf("%w: support reads only", billinghttp.ErrForbidden)
			}
			return nil
		}
	case role == "operator" || len(role) > 5 && role[:5] == "user:":
		authorize = billinghttp.RoleAuthorizer(func(*http.Request) (string, bool, error) {
			if role == "operator" {
				return "", true, nil
			}
			return role[5:], false, nil
		})
	default:
		return nil, errors.New(`role is "operator", "support" or "user:ID"`)
	}
	return billingui.New(billingui.Config{
		Collector: d.collector, Repository: d.repo, History: d.hist,
		Authorizer: authorize, Runs: d.runs, CSRFKey: d.csrfKey,
		// The signed-in operator a host's session tells; here the role.
		Operator: func(*http.Request) string { return "demo " + role },
	})
}

// mount serves the console under /billing/, as a host mounts it next to
// its own routes.
func mount(console http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/billing/", http.StripPrefix("/billing", console))
	mux.Handle("GET /{$}", http.RedirectHandler("/billing/", http.StatusFound))
	return mux
}

// shutdownGrace is how long a stopped server lets requests finish.
const shutdownGrace = 5 * time.Second
