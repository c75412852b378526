package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/preview"
)

// The user-level admin commands: subscribe and reactivate open a user's
// period rather than change a record.

var subscribeCmd = &command{
	name: "subscribe",
	synopsis: "USER_ID --tier NAME:VERSION --amount AMOUNT [--key KEY] [--first-date YYYY-MM-DD|RFC3339]\n" +
		"    [--term MONTHLY|YEARLY|WEEKLY] [--interval N] [--anchor-day D] [--friday] [--pause-months N]\n" +
		"    [--trial-days N [--repeat-trial]]",
	doc: `start a subscription: the user's first period (SCHEDULED, or PAUSED)
The library's front door, Collector.Subscribe: it checks every field, derives
the rest (IDs, billing period, anchor day, process SUBSCRIBE) and writes the
first period with its history row under the user's billing lock. A user (on
the single table, an account#subscription#SKU) with an open period is refused.

It is idempotent on USER_ID and --key: the same command run again (a retry
after a lost answer) writes nothing and prints "already subscribed by this
key" with the period the first run created. Without --key the key is
"billingctl:TIER:DAY", DAY being --first-date's day or today (UTC, the app's
clock): a retried command repeats it on the same day. Give --key (an order or
ticket ID) to subscribe a user again with the same tier on the same day after
a cancellation.

Checks first, and refuses before showing anything: a value the library
refuses names its flag (exit 2), an open period of the user is exit 1. Then
shows the period, asks "Apply? [y/N]" on stderr (unless --yes), subscribes and
shows the period written. Nothing is charged: the first scheduled run after
the first billing date charges it.`,
	run: runSubscribe,
}

var reactivateCmd = &command{
	name:     "reactivate",
	synopsis: "USER_ID --date YYYY-MM-DD|RFC3339",
	doc: `open a new period for a user whose subscription ended (REACTIVATION)
Collector.Reactivate: a SCHEDULED period billed on --date, with the tier,
amount, term and Friday week of the user's latest record. A date without a
time keeps the latest record's time of day; a time with an offset is its
wall-clock date and time taken as UTC (an offset never moves the day). The
user must have no open period (SCHEDULED, ERROR, ACHSENT or PAUSED), and the
date must not be before the end of the user's last paid period (its next
billing date) and within the collector's window of billing dates. On that
end date, where a user who cancelled at period end has a cancelled renewal
never charged, the renewal goes on (SCHEDULED again, no gap, no second
charge) and is shown as reopened.

Checks first, and refuses before showing anything. Then shows the user's
latest record, asks "Apply? [y/N]" on stderr (unless --yes), reactivates
under the user's billing lock and shows the period written.`,
	run: runReactivate,
}

// subscribeFlags are the flags of Subscribe's fields, by the field names
// of its errors.
var subscribeFlags = map[string]string{
	"RequestKey": "--key", "UserID": "USER_ID", "tier": "--tier", "amount": "--amount", "Term": "--term",
	"Interval": "--interval", "AnchorDay": "--anchor-day", "FridayBilling": "--friday",
	"FirstBillingDate": "--first-date", "PauseMonths": "--pause-months",
	"TrialDays": "--trial-days", "TrialEnd": "--trial-days",
}

func runSubscribe(a *app, c *command, args []string) error {
	fs := a.newFlags(c)
	tier := fs.String("tier", "", "the tier, `NAME:VERSION` as in receipt_tier_name, e.g. Plus:v2 (required)")
	amountFlag := fs.String("amount", "", "the `amount` per period, e.g. 4.99 (required)")
	key := fs.String("key", "", "the request `key`: the same user and key never subscribe twice (default billingctl:TIER:DAY)")
	firstDate := fs.String("first-date", "", "the first billing `date`: YYYY-MM-DD (00:00 UTC) or RFC3339, its wall-clock date and time taken as UTC (default now)")
	term := fs.String("term", "", "the billing `term`: MONTHLY, YEARLY or WEEKLY (default MONTHLY)")
	interval := fs.Int("interval", 0, "`N` terms a period, 1 to 120 (3 monthly is quarterly; default 1)")
	anchorDay := fs.Int("anchor-day", 0, "the `day` of the month later periods are billed on, 1 to 31 (default the first date's)")
	friday := fs.Bool("friday", false, "bill on the same Friday of every month as the first date, which must be a Friday (monthly)")
	pauseMonths := fs.Int("pause-months", 0, "start paused: the first charge is `N` months after the first date, 0 to 120")
	trialDays := fs.Int("trial-days", 0, "start with a trial of `N` days at zero; the first charge is on its end, 1 to 730")
	repeatTrial := fs.Bool("repeat-trial", false, "allow a trial for a user who had one")
	pos, err := a.parse(c, fs, args)
	if err != nil {
		return err
	}
	user, err := a.oneArg(c, pos, "USER_ID")
	if err != nil {
		return err
	}
	amount, err := tierAndAmount(c, fs, *amountFlag)
	if err != nil {
		return err
	}
	req := billing.SubscribeRequest{RequestKey: *key, UserID: user, Tier: *tier, Amount: amount,
		Term: billing.Term(strings.ToUpper(*term)), Interval: *interval, AnchorDay: *anchorDay,
		FridayBilling: *friday, PauseMonths: *pauseMonths, TrialDays: *trialDays, AllowRepeatTrial: *repeatTrial}
	day := a.clock().UTC()
	if *firstDate != "" {
		nd, err := dateFlag(c, "first-date", *firstDate)
		if err != nil {
			return err
		}
		req.FirstBillingDate, day = nd.t, nd.t
	}
	if req.RequestKey == "" {
		req.RequestKey = "billingctl:" + req.Tier + ":" + day.Format(time.DateOnly)
	}

	col, recs, closeCol, err := a.userForChange(user)
	if err != nil {
		return err
	}
	defer closeCol()
	plan, err := preview.CheckSubscribe(a.ctx, col, req, recs)
	if err != nil {
		return refused(c, err, subscribeFlags)
	}
	if plan.Repeated {
		return a.subscribed(req, plan)
	}
	p := &plan.Subscription
	what := fmt.Sprintf("subscribe %s: a new %s period billed %s, %s at %s, term %s (request key %s)",
		user, p.Status, fmtTime(p.BillingDate), p.ReceiptTierName, p.Amount, p.Term, req.RequestKey)
	if p.IsTrial() {
		what += fmt.Sprintf("; a trial until %s, then %s", fmtTime(p.TrialEnd), p.TrialAmount)
	}
	if err := a.preview("New period", p, what); err != nil {
		return err
	}
	out, err := col.Subscribe(a.ctx, req)
	if err != nil {
		return refused(c, err, subscribeFlags)
	}
	if out.Repeated {
		return a.subscribed(req, out)
	}
	if a.g.json {
		return a.writeSubscribed(req, out)
	}
	fmt.Fprintf(a.stdout, "\nCreated:\n")
	if err := writeRecord(a.stdout, recordItem(&out.Subscription)); err != nil {
		return err
	}
	_, err = fmt.Fprintf(a.stdout, "\nApplied: %s\n", what)
	return err
}

// subscribed reports a repeated subscription: nothing was written.
func (a *app) subscribed(req billing.SubscribeRequest, out billing.Subscribed) error {
	if a.g.json {
		return a.writeSubscribed(req, out)
	}
	fmt.Fprintf(a.stdout, "Already subscribed by this key (%s): nothing was written. The period the first call created, as it is now:\n",
		req.RequestKey)
	return writeRecord(a.stdout, recordItem(&out.Subscription))
}

func (a *app) writeSubscribed(req billing.SubscribeRequest, out billing.Subscribed) error {
	return writeJSON(a.stdout, map[string]any{
		"operation": "subscribe", "user_id": req.UserID, "request_key": req.RequestKey,
		"subscription_id": out.Subscription.SubscriptionID, "repeated": out.Repeated,
		"subscription": plainItem(recordItem(&out.Subscription)),
	})
}

func runReactivate(a *app, c *command, args []string) error {
	user, nd, err := a.dateArg(c, args, "USER_ID",
		"the new period's billing `date`: YYYY-MM-DD (the latest record's time of day) or RFC3339, its wall-clock date and time taken as UTC (required)")
	if err != nil {
		return err
	}
	col, recs, closeCol, err := a.userForChange(user)
	if err != nil {
		return err
	}
	defer closeCol()
	date := nd.t
	var last billing.Period
	if len(recs) > 0 {
		last = recs[len(recs)-1]
		date = nd.on(&last)
	}
	if err := preview.CheckReactivate(col, user, recs, date); err != nil {
		return refused(c, err, adminFlags)
	}
	what := fmt.Sprintf("reactivate %s: a new %s period billed %s, %s at %s, term %s (the latest record's)",
		user, billing.StatusScheduled, fmtTime(date), dash(last.ReceiptTierName), last.Amount, last.Term)
	// On the date of the cancelled renewal (the end of the paid period),
	// Reactivate reopens that record rather than adding one beside it.
	reopened := false
	for i := range recs {
		if r := &recs[i]; r.BillingDate.Truncate(time.Second).Equal(date.Truncate(time.Second)) && r.Status == billing.StatusCancelled && !r.Attempted() {
			reopened = true
			what = fmt.Sprintf("reactivate %s: the cancelled period %s billed %s goes on, %s again, %s at %s, term %s (the latest record's)",
				user, r.SubscriptionID, fmtTime(date), billing.StatusScheduled, dash(last.ReceiptTierName), last.Amount, last.Term)
		}
	}
	if err := a.preview("Latest record", &last, what); err != nil {
		return err
	}
	created, err := col.Reactivate(a.ctx, user, date)
	if err != nil {
		return err
	}
	if a.g.json {
		return writeJSON(a.stdout, map[string]any{
			"operation": c.name, "user_id": user, "created": plainItem(recordItem(&created)), "reopened": reopened,
		})
	}
	if reopened {
		fmt.Fprintf(a.stdout, "\nReopened:\n")
	} else {
		fmt.Fprintf(a.stdout, "\nCreated:\n")
	}
	if err := writeRecord(a.stdout, recordItem(&created)); err != nil {
		return err
	}
	_, err = fmt.Fprintf(a.stdout, "\nApplied: %s\n", what)
	return err
}

// userForChange opens the stores and an admin collector on them, and reads
// the records of user; closeCol releases the collector's locker.
func (a *app) userForChange(user string) (col *billing.Collector, recs []billing.Period, closeCol func(), err error) {
	repo, hist, err := a.stores()
	if err != nil {
		return nil, nil, nil, err
	}
	col, closeCol, err = a.adminCollector(repo, hist)
	if err != nil {
		return nil, nil, nil, err
	}
	if recs, err = repo.ListByUser(a.ctx, user); err != nil {
		closeCol()
		return nil, nil, nil, err
	}
	return col, recs, closeCol, nil
}
