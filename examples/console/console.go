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
	"github.com/dynabill/billing/render"
)

// options are the command's flags.
type options struct {
	// Endpoint is a DynamoDB endpoint (DynamoDB Local, moto); "" keeps the
	// records in memory.
	Endpoint string
	// TablePrefix names the tables created on Endpoint as billingctl's
	// --tables PREFIX names them: PREFIX-activity, PREFIX-activity-history,
	// PREFIX-locks and PREFIX-invoices.
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
	invoices  billing.Invoices
	coupons   billing.Coupons
	docs      *render.Renderer
	runs      *billingui.RunLog
	clock     simulation.Clock
	result    *simulation.Result
	csrfKey   []byte
	// notices are the dunning notices the collector sent.
	notices *noticeLog
}

// build simulates o.Months months of o.Users users, as the quickstart does,
// and returns the store they left with a collector over it for the
// console's actions.
func build(ctx context.Context, o options) (*demo, error) {
	clock := simulation.NewClock()
	var (
		repo     billing.Repository
		hist     billing.History
		locker   billing.Locker
		invoices billing.Invoices
		coupons  billing.Coupons
	)
	if o.Endpoint == "" {
		store, err := memory.New(memory.Options{PageSize: 250})
		if err != nil {
			return nil, err
		}
		repo, hist = store.Repository(), store.History()
		locker = memory.NewLocker(memory.LockerOptions{Clock: clock})
		invoices = memory.NewInvoices(clock)
		coupons = memory.NewCoupons()
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
			Invoices:      o.TablePrefix + "-invoices",
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
		inv, err := dynamostore.NewInvoices(cfg)
		if err != nil {
			return nil, err
		}
		// The coupons live in the invoices table, beside the invoices.
		cp, err := dynamostore.NewCoupons(cfg)
		if err != nil {
			return nil, err
		}
		repo, hist, locker, invoices, coupons = r, h, l, inv, cp
	}
	// The collector the simulation runs, and the console's after it: each
	// charge is invoiced before the processor is called (billing.Config.Invoices),
	// so the customer pages list paid, open and void invoices. The coupon
	// store lets the host apply coupons (billing.Collector.ApplyCoupon): the
	// customer page shows them on the next charge.
	// With dunning (see dunning.go) a declined period is retried on a
	// schedule, its customer told, and the subscription cancelled when
	// the schedule ends unpaid.
	provider, tally, notices := simulation.NewProvider(clock), simulation.NewTally(), &noticeLog{}
	collector, err := billing.NewCollector(billing.Config{
		Repository: repo, History: hist, Locker: locker,
		Provider: provider, Clock: clock, Prices: simulation.Prices(),
		Invoices: invoices, Invoicing: billing.Invoicing{Currency: "USD"}, Coupons: coupons,
		Events: tally, PagesPerInvocation: simulation.DefaultPagesPerInvocation,
		Dunning: dunningPolicy(notices),
	})
	if err != nil {
		return nil, err
	}
	docs, err := render.New(render.Config{Seller: demoSeller})
	if err != nil {
		return nil, err
	}
	runs := billingui.NewRunLog(0)
	res, err := simulation.Run(ctx, simulation.Options{
		Users: o.Users, Months: o.Months, Seed: o.Seed, DeclineRate: o.DeclineRate, NoLegacy: true,
		Repository: repo, History: hist, Clock: clock, Provider: provider, Collector: collector, Tally: tally,
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
	if err := sampleWaives(ctx, collector, repo); err != nil {
		return nil, err
	}
	return &demo{collector: collector, repo: repo, hist: hist, invoices: invoices, coupons: coupons, docs: docs, runs: runs,
		clock: clock, result: res, notices: notices}, nil
}

// sampleWaives waives one declined period in five, as an operator
// forgives a few customers, once the months are simulated: their invoices,
// numbered before the declined charge, are voided, so the sample customer
// pages show void invoices beside paid and open ones (the simulation
// itself waives and cancels nothing). The other declines stay owed.
func sampleWaives(ctx context.Context, c *billing.Collector, repo billing.Repository) error {
	var declined []billing.Period
	q := billing.StatusQuery{Status: billing.StatusError, Limit: 250}
	for {
		p, err := repo.QueryStatus(ctx, q)
		if err != nil {
			return err
		}
		for _, s := range p.Items {
			if !s.InFlight() {
				declined = append(declined, s)
			}
		}
		if p.Next == "" {
			break
		}
		q.Cursor = p.Next
	}
	for i, s := range declined {
		if i%5 != 4 {
			continue
		}
		_, err := c.Periods().Waive(ctx, billing.PeriodRequest{PeriodID: s.SubscriptionID, UserRequest: billing.UserRequest{
			UserID: s.UserID, RequestKey: "sample-waive-" + s.SubscriptionID,
			Operator: "sample data", Reason: "goodwill: a sample operator's waive",
		}})
		if err != nil {
			return fmt.Errorf("sample waive of %s: %w", s.SubscriptionID, err)
		}
	}
	return nil
}

// demoSeller heads the invoices' documents: a host names itself.
var demoSeller = render.Seller{
	Name:    "Dynabill Demo Ltd",
	Address: []string{"1 Example Street", "Dublin D02 X285", "Ireland"},
	TaxID:   "VAT IE0000000DM",
	Footer:  "A sample document of the dynabill console example.",
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
		// The invoices and their documents (a *render.Renderer): the
		// customer page lists them with links to their PDFs.
		Invoices: d.invoices, Documents: d.docs,
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
