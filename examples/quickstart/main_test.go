package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest/simulation"
)

// TestQuickstart runs main.go's wiring for a simulated month, in memory,
// as main does: every subscription starts with main.go's Subscribe (its
// first period is created by process SUBSCRIBE, under the user's request
// key, with the plan asked for), periods are collected, and the table and
// a history are printed.
func TestQuickstart(t *testing.T) {
	var out, progress bytes.Buffer
	stdout, stderr = &out, &progress
	t.Cleanup(func() { stdout, stderr = os.Stdout, os.Stderr })

	res, err := run(t.Context(), "", false, population(simulation.Options{Users: 60, Months: 1, Seed: 3}, false))
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if len(res.Users) != 60 || res.Total.Collected == 0 || res.Total.Revenue <= 0 {
		t.Errorf("%d users, %d periods collected, revenue %s:\n%s", len(res.Users), res.Total.Collected, res.Total.Revenue, out.String())
	}
	ctx := t.Context()
	for _, u := range res.Users {
		recs, err := res.Repository.ListByUser(ctx, u.ID)
		if err != nil || len(recs) == 0 {
			t.Fatalf("%s: records %v, %v", u.ID, recs, err)
		}
		first := recs[0]
		rows, err := res.History.ListBySubscription(ctx, first.SubscriptionID)
		if err != nil || len(rows) == 0 {
			t.Fatalf("%s: history of %s: %v, %v", u.ID, first.SubscriptionID, rows, err)
		}
		created := rows[0]
		switch {
		case u.Legacy:
			t.Errorf("%s: a record another service wrote, in the quickstart", u.ID)
		case first.SubscriptionID != billing.FirstPeriodID(u.ID, u.RequestKey):
			t.Errorf("%s: first period %s, not that of its sign-up request %q", u.ID, first.SubscriptionID, u.RequestKey)
		case created.Process != billing.ProcessSubscribe:
			t.Errorf("%s: first period created by process %s, want %s", u.ID, created.Process, billing.ProcessSubscribe)
		case created.ReceiptTierName != u.Tier || created.Amount != u.Amount || created.Term != u.Term ||
			created.BillingWeek != u.BillingWeek || created.PauseDurationMonths != u.PauseMonths ||
			!created.BillingDate.Equal(u.FirstBillingDate):
			t.Errorf("%s: first period %s %s %s week %d pause %d billed %v; asked %s %s %s week %d pause %d billed %v", u.ID,
				created.ReceiptTierName, created.Term, created.Amount, created.BillingWeek, created.PauseDurationMonths, created.BillingDate,
				u.Tier, u.Term, u.Amount, u.BillingWeek, u.PauseMonths, u.FirstBillingDate)
		}
	}
	for _, want := range []string{"60 through Subscribe", "collected", "History of " + res.Showcase} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output without %q:\n%s", want, out.String())
		}
	}
	if !strings.Contains(progress.String(), "simulated week 4") {
		t.Errorf("progress:\n%s", progress.String())
	}
}
