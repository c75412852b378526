package main

import (
	"slices"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/dynamotest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// layoutCLI creates the tables of layout from a unique --tables prefix
// and returns a runner of billingctl on them with the app's clock at now.
func layoutCLI(t *testing.T, layout string, now time.Time) func(stdin string, args ...string) result {
	t.Helper()
	endpoint, client := dynamotest.Endpoint(t), dynamotest.Client(t)
	prefix := dynamotest.TableName(t, "sub")
	tables := []string{prefix + "-activity", prefix + "-activity-history", prefix + "-locks"}
	if layout == "single" {
		tables = []string{prefix, prefix + "-locks"}
	}
	dropTables(t, client, tables...)
	global := []string{"--endpoint", endpoint, "--layout", layout, "--tables", prefix}
	cli := func(stdin string, args ...string) result {
		t.Helper()
		return runClocked(t, now, stdin, append(slices.Clone(global), args...)...)
	}
	cli("", "tables", "create").want(t, exitOK, "created")
	return cli
}

// listed returns a user's records as billingctl lists them.
func listed(t *testing.T, cli func(string, ...string) result, user string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	r := cli("", "--json", "subs", "list", user)
	r.want(t, exitOK)
	r.decode(t, &recs)
	return recs
}

// TestSubscribe: billingctl subscribe is Collector.Subscribe on both
// layouts: it shows the period, asks, writes it once per key, says so when
// the key was used, and refuses a second open subscription.
func TestSubscribe(t *testing.T) {
	t.Parallel()
	now := time.Date(2024, 3, 15, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct{ layout, user string }{
		{"legacy", "u1"},
		{"single", "acct-1#sub-1#PLUS"},
	} {
		t.Run(tc.layout, func(t *testing.T) {
			t.Parallel()
			cli := layoutCLI(t, tc.layout, now)
			args := []string{"subscribe", tc.user, "--tier", "Plus:v2", "--amount", "4.99", "--first-date", "2024-03-20"}
			key := "billingctl:Plus:v2:2024-03-20"
			id := billing.FirstPeriodID(tc.user, key)

			// Declined: shown, nothing written.
			r := cli("n\n", args...)
			r.want(t, exitFail, "Apply? [y/N]", "billingctl: aborted: nothing was changed")
			for _, s := range []string{"New period:", "subscription_id " + id, "billing_date 2024-03-20T00:00:00Z",
				"billing_status SCHEDULED", "process SUBSCRIBE", "updated_event user-subscribed",
				"Change: subscribe " + tc.user + ": a new SCHEDULED period billed 2024-03-20T00:00:00Z, Plus:v2 at 4.99, term MONTHLY (request key " + key + ")"} {
				assert.Contains(t, squeeze(r.stdout), s, "the preview lacks %q:\n%s", s, r)
			}
			require.Empty(t, listed(t, cli, tc.user), "a declined subscribe wrote")

			// Confirmed.
			r = cli("y\n", args...)
			r.want(t, exitOK, "Created:", "subscription_id "+id, "billing_status SCHEDULED", "Applied: subscribe "+tc.user)
			recs := listed(t, cli, tc.user)
			require.Len(t, recs, 1, "after subscribe: %v", recs)
			assert.Equal(t, id, recs[0]["subscription_id"])
			assert.Equal(t, "2024-03-20T00:00:00Z", recs[0]["billing_date"])
			assert.Equal(t, "4.99", recs[0]["billing_amount"])

			// The same command again (a retry): nothing written, said so.
			r = cli("", append(args, "--yes")...)
			r.want(t, exitOK, "Already subscribed by this key ("+key+"): nothing was written", "subscription_id "+id)
			assert.NotContains(t, r.stdout, "New period:", "a repeated subscribe previewed a new period:\n%s", r)
			assert.Len(t, listed(t, cli, tc.user), 1, "a repeated subscribe wrote")

			var got struct {
				Repeated       bool           `json:"repeated"`
				SubscriptionID string         `json:"subscription_id"`
				RequestKey     string         `json:"request_key"`
				Subscription   map[string]any `json:"subscription"`
			}
			r = cli("", append(args, "--yes", "--json")...)
			r.want(t, exitOK)
			r.decode(t, &got)
			assert.True(t, got.Repeated, "JSON: %s", r)
			assert.Equal(t, id, got.SubscriptionID, "JSON: %s", r)
			assert.Equal(t, key, got.RequestKey, "JSON: %s", r)

			// Another key: the user has an open period; refused unshown.
			r = cli("y\n", append(args, "--key", "order-2")...)
			r.want(t, exitFail, "billingctl: open subscription: ", "is SCHEDULED")
			assert.Empty(t, r.stdout, "refused after showing:\n%s", r)
			assert.Len(t, listed(t, cli, tc.user), 1, "a second open subscription was written")
		})
	}
}

// TestSubscribeOptions: the optional flags reach the request, and each
// field the library refuses names its flag before anything is shown.
func TestSubscribeOptions(t *testing.T) {
	t.Parallel()
	now := time.Date(2024, 3, 15, 10, 0, 0, 0, time.UTC)
	cli := layoutCLI(t, "legacy", now)

	var got struct {
		Repeated     bool           `json:"repeated"`
		Subscription map[string]any `json:"subscription"`
	}
	r := cli("", "--json", "--yes", "subscribe", "p1", "--tier", "Plus:v2", "--amount", "9.99", "--key", "order-7",
		"--first-date", "2024-03-22T09:30:00Z", "--term", "monthly", "--interval", "3", "--anchor-day", "31", "--friday", "--pause-months", "2")
	r.want(t, exitOK)
	r.decode(t, &got)
	s := got.Subscription
	assert.False(t, got.Repeated, "JSON: %s", r)
	assert.Equal(t, billing.FirstPeriodID("p1", "order-7"), s["subscription_id"], "JSON: %s", r)
	assert.Equal(t, "2024-03-22T09:30:00Z", s["billing_date"], "JSON: %s", r)
	assert.Equal(t, "PAUSED", s["billing_status"], "JSON: %s", r)
	assert.EqualValues(t, 2, s["pause_duration_months"], "JSON: %s", r)
	assert.EqualValues(t, 3, s["billing_interval"], "JSON: %s", r)
	assert.EqualValues(t, 31, s["billing_anchor_day"], "JSON: %s", r)
	assert.EqualValues(t, 4, s["billing_week"], "JSON: %s", r) // 2024-03-22 is the fourth Friday

	// Without --first-date: billed now, by the app's clock, under today's key.
	r = cli("", "--yes", "subscribe", "p2", "--tier", "Lite:v1", "--amount", "1.99")
	r.want(t, exitOK, "billing_date 2024-03-15T10:00:00Z", "request key billingctl:Lite:v1:2024-03-15")

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no amount", []string{"--tier", "Plus:v2", "--amount", "0"}, `--amount "0.00": billing: invalid amount: must be more than zero`},
		{"unknown term", []string{"--tier", "Plus:v2", "--amount", "4.99", "--term", "daily"}, `--term "DAILY"`},
		{"interval too long", []string{"--tier", "Plus:v2", "--amount", "4.99", "--interval", "121"}, `--interval "121"`},
		{"anchor day 32", []string{"--tier", "Plus:v2", "--amount", "4.99", "--anchor-day", "32"}, `--anchor-day "32"`},
		{"anchor day on a weekly term", []string{"--tier", "Plus:v2", "--amount", "4.99", "--term", "WEEKLY", "--anchor-day", "3"}, `--anchor-day "3"`},
		{"pause too long", []string{"--tier", "Plus:v2", "--amount", "4.99", "--pause-months", "121"}, `--pause-months "121"`},
		{"Friday billing yearly", []string{"--tier", "Plus:v2", "--amount", "4.99", "--term", "YEARLY", "--friday", "--first-date", "2024-03-22"}, `--friday "true"`},
		{"Friday billing on a Thursday", []string{"--tier", "Plus:v2", "--amount", "4.99", "--friday", "--first-date", "2024-03-21"}, `--first-date "2024-03-21T00:00:00Z": billing: invalid request: Friday billing starts on a Friday`},
		{"first date too old", []string{"--tier", "Plus:v2", "--amount", "4.99", "--first-date", "2023-01-01"}, `--first-date "2023-01-01T00:00:00Z": billing: invalid date`},
		{"malformed first date", []string{"--tier", "Plus:v2", "--amount", "4.99", "--first-date", "20240320"}, `--first-date "20240320": want YYYY-MM-DD`},
		{"malformed amount", []string{"--tier", "Plus:v2", "--amount", "4,99"}, "--amount: billing: invalid amount"},
		{"no tier", []string{"--amount", "4.99"}, "--tier is required"},
		{"no amount flag", []string{"--tier", "Plus:v2"}, "--amount is required"},
		{"no user", nil, "want one USER_ID argument, got 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"subscribe", "q1"}, tc.args...)
			if tc.args == nil {
				args = []string{"subscribe", "--tier", "Plus:v2", "--amount", "4.99"}
			}
			r := cli("y\n", args...)
			r.want(t, exitUsage, "billingctl: "+tc.want, "Run 'billingctl help subscribe' for usage.")
			assert.Empty(t, r.stdout, "shown before refusing:\n%s", r)
		})
	}
	assert.Empty(t, listed(t, cli, "q1"), "a refused subscribe wrote")
}

// TestReactivate: billingctl reactivate opens a new period for a user
// whose subscription ended, with the latest record's plan, and refuses a
// user with an open period before showing anything.
func TestReactivate(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "legacy")
	e.now = adminNow
	e.seed(rec("u1", "old1", "2024-03-01T15:00:00Z", billing.StatusCancelled, "7.99"))

	r := e.run("n\n", "reactivate", "u1", "--date", "2024-03-20")
	r.want(t, exitFail, "aborted")
	assert.Contains(t, squeeze(r.stdout), "Latest record:", "no preview:\n%s", r)
	assert.Contains(t, squeeze(r.stdout), "Change: reactivate u1: a new SCHEDULED period billed 2024-03-20T15:00:00Z, Plus:v2 at 7.99, term MONTHLY", "no preview:\n%s", r)

	r = e.run("", "reactivate", "u1", "--date", "2024-03-20", "--yes")
	r.want(t, exitOK, "Created:", "billing_date 2024-03-20T15:00:00Z", "billing_status SCHEDULED", "process REACTIVATION",
		"updated_event user-reactivated", "billing_amount 7.99", "Applied: reactivate u1")
	recs, err := e.repo.ListByUser(t.Context(), "u1")
	require.NoError(t, err)
	require.Len(t, recs, 2, "after reactivate: %+v", recs)
	assert.Equal(t, billing.StatusScheduled, recs[1].Status)

	r = e.run("y\n", "reactivate", "u1", "--date", "2024-03-25")
	r.want(t, exitFail, "billingctl: conflict: ", "has an open record")
	assert.Empty(t, r.stdout, "shown before refusing:\n%s", r)

	r = e.run("y\n", "reactivate", "nobody", "--date", "2024-03-25")
	r.want(t, exitFail, "user nobody has no records to reactivate")
	assert.Empty(t, r.stdout, "shown before refusing:\n%s", r)
}

// TestReactivateOnTheCancelledRenewalDate: billingctl reactivate on the
// day the paid period ends — the date of the renewal cancelled at period
// end — reopens that renewal: no gap, no second record, shown as
// reopened. A date inside the paid period is refused before anything is
// shown, naming the first date not paid for. Before, the date failed
// with "already exists" on every try.
func TestReactivateOnTheCancelledRenewalDate(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "legacy")
	e.now = adminNow
	paid := rec("u1", "paid1", "2024-02-10T15:00:00Z", billing.StatusCompleted, "7.99")
	paid.InitialRunDate, paid.CompletionDate, paid.Attempt = paid.BillingDate.Add(time.Hour), paid.BillingDate.Add(time.Hour), 1
	e.seed(paid, rec("u1", "renew1", "2024-03-10T15:00:00Z", billing.StatusCancelled, "7.99"))

	r := e.run("y\n", "reactivate", "u1", "--date", "2024-03-05")
	r.want(t, exitUsage, "the first date not paid for is 2024-03-10T15:00:00Z")
	assert.Empty(t, r.stdout, "shown before refusing:\n%s", r)

	r = e.run("", "reactivate", "u1", "--date", "2024-03-10", "--yes")
	r.want(t, exitOK, "the cancelled period renew1 billed 2024-03-10T15:00:00Z goes on", "Reopened:",
		"billing_date 2024-03-10T15:00:00Z", "billing_status SCHEDULED", "process REACTIVATION")
	recs, err := e.repo.ListByUser(t.Context(), "u1")
	require.NoError(t, err)
	require.Len(t, recs, 2, "reopened in place: %+v", recs)
	assert.Equal(t, "renew1", recs[1].SubscriptionID)
	assert.Equal(t, billing.StatusScheduled, recs[1].Status)
}

// TestSubscribeTrial: billingctl subscribe --trial-days writes a trial
// period at zero that carries its end and first charge, and subs list
// shows them in its TRIAL column.
func TestSubscribeTrial(t *testing.T) {
	t.Parallel()
	now := time.Date(2024, 3, 15, 10, 0, 0, 0, time.UTC)
	cli := layoutCLI(t, "legacy", now)
	cli("", "--yes", "subscribe", "u1", "--tier", "Plus:v2", "--amount", "4.99", "--trial-days", "14").
		want(t, exitOK, "a trial until 2024-03-29T10:00:00Z, then 4.99")
	recs := listed(t, cli, "u1")
	require.Len(t, recs, 1)
	assert.Equal(t, "0.00", recs[0]["billing_amount"])
	assert.Equal(t, "4.99", recs[0]["billing_trial_amount"])
	assert.Equal(t, "2024-03-29T10:00:00.000000000Z", recs[0]["billing_trial_end"])
	cli("", "subs", "list", "u1").want(t, exitOK, "TRIAL", "until 2024-03-29T10:00:00Z, then 4.99")
}
