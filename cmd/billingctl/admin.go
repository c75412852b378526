package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/internal/preview"
)

const adminDoc = `

Checks the change first, by the collector's own rules, and refuses it before
showing anything when the record's status does not allow it (a conflict, exit
1) or the library refuses an input (the flag is named, exit 2). Then shows the
record, asks "Apply? [y/N]" on stderr (unless --yes), applies the change
through the collector's admin API (under the user's billing lock, conditional
on the record read, with a history row; nothing is charged) and shows the
record after it, changed attributes marked "*". An unknown ID, a record changed
meanwhile or a held billing lock exit 1, as does a declined confirmation.`

var waiveCmd = &command{
	name:     "waive",
	synopsis: "SUBSCRIPTION_ID",
	doc: `forgive a SCHEDULED or ERROR record (WAIVED)
A record that was never attempted also opens the next period, as an attempt
would.` + adminDoc,
	run: runWaive,
}

var cancelCmd = &command{
	name:     "cancel",
	synopsis: "SUBSCRIPTION_ID",
	doc: `cancel a SCHEDULED, ERROR or PAUSED record (CANCELLED)
The subscription ends: no next period is opened.` + adminDoc,
	run: runCancel,
}

var pauseCmd = &command{
	name:     "pause",
	synopsis: "SUBSCRIPTION_ID --months N",
	doc: `pause a SCHEDULED record, or change a pause, for N months
The record becomes PAUSED for N months (1 to 120), on monthly and yearly
plans alike; the pause run skips them a month at a time and then resumes
the subscription N months after the paused billing date.` + adminDoc,
	run: runPause,
}

var resumeCmd = &command{
	name:     "resume",
	synopsis: "SUBSCRIPTION_ID",
	doc: `end the pause of a PAUSED record
The record becomes SCHEDULED again (pause-resume) on its billing date.` + adminDoc,
	run: runResume,
}

var changeDateCmd = &command{
	name:     "change-date",
	synopsis: "SUBSCRIPTION_ID --date YYYY-MM-DD|RFC3339",
	doc: `move a SCHEDULED, ERROR or PAUSED record to another billing date
The new date's day becomes the subscription's anchor day. A date without a
time keeps the record's time of day; a time with an offset is its wall-clock
date and time taken as UTC (2025-04-16T09:30:00+14:00 is the 16th at 09:30),
as the collector reads it: an offset never moves the day. The old item is
deleted and the new one written in one transaction; a date another record of
the user has is a conflict.` + adminDoc,
	run: runChangeDate,
}

var changeTierCmd = &command{
	name:     "change-tier",
	synopsis: "SUBSCRIPTION_ID --tier NAME:VERSION --amount AMOUNT [--downgrade]",
	doc: `change a SCHEDULED record's tier and amount
An upgrade applies to this period at once. With --downgrade the change is
marked pending and applies from the next period.` + adminDoc,
	run: runChangeTier,
}

// oneID checks that an admin command got one SUBSCRIPTION_ID.
func (a *app) oneID(c *command, pos []string) (string, error) {
	return a.oneArg(c, pos, "SUBSCRIPTION_ID")
}

// oneArg checks that a command got one non-empty argument, named name.
func (a *app) oneArg(c *command, pos []string, name string) (string, error) {
	if len(pos) != 1 {
		return "", usagef(c.name, "want one %s argument, got %d", name, len(pos))
	}
	if strings.TrimSpace(pos[0]) == "" {
		return "", usagef(c.name, "empty %s", name)
	}
	return pos[0], nil
}

// requireFlags returns a usage error naming the first flag of names that
// args did not set, or set to an empty value.
func requireFlags(c *command, fs *flag.FlagSet, names ...string) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, n := range names {
		if !set[n] || strings.TrimSpace(fs.Lookup(n).Value.String()) == "" {
			return usagef(c.name, "--%s is required", n)
		}
	}
	return nil
}

// refused turns the error of a check made before showing a change into
// what billingctl reports: a field the library refuses is a usage error
// naming its flag (flags maps the library's field names to flags);
// anything else (a status the change does not allow: a conflict) is
// returned as it is.
func refused(c *command, err error, flags map[string]string) error {
	var fe *billing.FieldError
	if errors.As(err, &fe) {
		if name, ok := flags[fe.Field]; ok {
			return usagef(c.name, "%s %q: %v", name, fe.Value, fe.Err)
		}
	}
	return err
}

// adminFlags are the flags of the record changes' inputs, by the field
// names of the library's errors.
var adminFlags = map[string]string{"tier": "--tier", "amount": "--amount", "billing_date": "--date"}

// adminChange is an admin change of one record, for admin.
type adminChange struct {
	// check is the change as preview.CheckChange takes it,
	// for the record b.
	check func(b *billing.Period) preview.Change
	// describe says what the change does to the record b.
	describe func(b *billing.Period) string
	// apply makes the change with the collector.
	apply func(ctx context.Context, col *billing.Collector, b *billing.Period) (billing.Change, error)
}

// idOnlyAdmin makes an admin command that takes one SUBSCRIPTION_ID and no
// flags of its own: describe says what will change, op makes the change.
func idOnlyAdmin(kind preview.Op, describe func(b *billing.Period) string,
	op func(p *billing.Periods, ctx context.Context, id string) (billing.Change, error)) func(a *app, c *command, args []string) error {
	return func(a *app, c *command, args []string) error {
		pos, err := a.parse(c, a.newFlags(c), args)
		if err != nil {
			return err
		}
		id, err := a.oneID(c, pos)
		if err != nil {
			return err
		}
		return a.admin(c, id, adminChange{
			check:    func(*billing.Period) preview.Change { return preview.Change{Op: kind} },
			describe: describe,
			apply: func(ctx context.Context, col *billing.Collector, _ *billing.Period) (billing.Change, error) {
				return op(col.Periods(), ctx, id)
			},
		})
	}
}

var (
	runWaive = idOnlyAdmin(preview.Waive, func(b *billing.Period) string {
		return fmt.Sprintf("billing_status %s -> %s (a record never attempted also opens the next period)", b.Status, billing.StatusWaived)
	}, (*billing.Periods).WaiveByID)

	runCancel = idOnlyAdmin(preview.Cancel, func(b *billing.Period) string {
		return fmt.Sprintf("billing_status %s -> %s (the subscription ends)", b.Status, billing.StatusCancelled)
	}, (*billing.Periods).Cancel)

	runResume = idOnlyAdmin(preview.Resume, func(b *billing.Period) string {
		return fmt.Sprintf("billing_status %s -> %s (pause-resume) on its billing date %s", b.Status, billing.StatusScheduled, fmtTime(b.BillingDate))
	}, (*billing.Periods).Resume)
)

func runPause(a *app, c *command, args []string) error {
	fs := a.newFlags(c)
	months := fs.Int("months", 0, "pause for this many `months`, 1 to 120, on every term (required)")
	pos, err := a.parse(c, fs, args)
	if err != nil {
		return err
	}
	id, err := a.oneID(c, pos)
	if err != nil {
		return err
	}
	if err := requireFlags(c, fs, "months"); err != nil {
		return err
	}
	if *months < 1 || *months > 120 {
		return usagef(c.name, "--months %d: want 1 to 120", *months)
	}
	return a.admin(c, id, adminChange{
		check: func(*billing.Period) preview.Change {
			return preview.Change{Op: preview.Pause, Months: *months}
		},
		describe: func(b *billing.Period) string {
			return fmt.Sprintf("billing_status %s -> %s for %d billing period(s)", b.Status, billing.StatusPaused, *months)
		},
		apply: func(ctx context.Context, col *billing.Collector, _ *billing.Period) (billing.Change, error) {
			return col.Periods().Pause(ctx, id, *months)
		},
	})
}

// newBillingDate is a parsed billing date flag (--date, --first-date): a
// day (the record's time of day is kept) or a date and time, in UTC.
type newBillingDate struct {
	t       time.Time
	dayOnly bool
}

// parseNewBillingDate reads a billing date the way the collector does, for
// every billingctl command that takes one: YYYY-MM-DD is a day, and an
// RFC 3339 time is its wall-clock date and time as written, in UTC. An
// offset never moves the day: 2025-04-16T09:30:00+14:00 is the 16th at
// 09:30 UTC, not the 15th at 19:30 that converting it would give.
func parseNewBillingDate(s string) (newBillingDate, bool) {
	if d, err := time.Parse(time.DateOnly, s); err == nil {
		return newBillingDate{t: d, dayOnly: true}, true
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		y, m, d := t.Date()
		h, mi, sec := t.Clock()
		return newBillingDate{t: time.Date(y, m, d, h, mi, sec, t.Nanosecond(), time.UTC)}, true
	}
	return newBillingDate{}, false
}

// dateFlag parses a --date flag of YYYY-MM-DD or RFC3339 in the years
// 1970 to 9999.
func dateFlag(c *command, name, value string) (newBillingDate, error) {
	nd, ok := parseNewBillingDate(value)
	if !ok {
		return nd, usagef(c.name, "--%s %q: want YYYY-MM-DD or an RFC3339 time, a real date", name, value)
	}
	if y := nd.t.Year(); y < 1970 || y > 9999 {
		return nd, usagef(c.name, "--%s %q: year out of range", name, value)
	}
	return nd, nil
}

// on returns the new billing date for the record b.
func (d newBillingDate) on(b *billing.Period) time.Time {
	if !d.dayOnly {
		return d.t.Truncate(time.Second)
	}
	bd := b.BillingDate.UTC()
	return time.Date(d.t.Year(), d.t.Month(), d.t.Day(), bd.Hour(), bd.Minute(), bd.Second(), 0, time.UTC)
}

// dateArg parses the command line of a command that takes one argument,
// named argName, and a required --date flag described by usage: it
// returns the argument and the date.
func (a *app) dateArg(c *command, args []string, argName, usage string) (string, newBillingDate, error) {
	fs := a.newFlags(c)
	dateText := fs.String("date", "", usage)
	pos, err := a.parse(c, fs, args)
	if err != nil {
		return "", newBillingDate{}, err
	}
	arg, err := a.oneArg(c, pos, argName)
	if err != nil {
		return "", newBillingDate{}, err
	}
	if err := requireFlags(c, fs, "date"); err != nil {
		return "", newBillingDate{}, err
	}
	nd, err := dateFlag(c, "date", *dateText)
	if err != nil {
		return "", newBillingDate{}, err
	}
	return arg, nd, nil
}

func runChangeDate(a *app, c *command, args []string) error {
	id, nd, err := a.dateArg(c, args, "SUBSCRIPTION_ID",
		"the new billing `date`: YYYY-MM-DD (keeps the time of day) or RFC3339, its wall-clock date and time taken as UTC (required)")
	if err != nil {
		return err
	}
	return a.admin(c, id, adminChange{
		check: func(b *billing.Period) preview.Change {
			return preview.Change{Op: preview.ChangeDate, Date: nd.on(b)}
		},
		describe: func(b *billing.Period) string {
			to := nd.on(b)
			return fmt.Sprintf("billing_date %s -> %s (anchor day %d)", fmtTime(b.BillingDate), fmtTime(to), to.Day())
		},
		apply: func(ctx context.Context, col *billing.Collector, b *billing.Period) (billing.Change, error) {
			return col.Periods().Move(ctx, id, nd.on(b))
		},
	})
}

func runChangeTier(a *app, c *command, args []string) error {
	fs := a.newFlags(c)
	tier := fs.String("tier", "", "the new tier, `NAME:VERSION` as in receipt_tier_name, e.g. Plus:v2 (required)")
	amountFlag := fs.String("amount", "", "the new `amount` per period, e.g. 9.99 (required)")
	downgrade := fs.Bool("downgrade", false, "apply from the next period (pending downgrade) instead of now")
	pos, err := a.parse(c, fs, args)
	if err != nil {
		return err
	}
	id, err := a.oneID(c, pos)
	if err != nil {
		return err
	}
	amount, err := tierAndAmount(c, fs, *amountFlag)
	if err != nil {
		return err
	}
	return a.admin(c, id, adminChange{
		check: func(*billing.Period) preview.Change {
			return preview.Change{Op: preview.ChangeTier, Tier: *tier, Amount: amount}
		},
		describe: func(b *billing.Period) string {
			if *downgrade {
				return fmt.Sprintf("pending downgrade to %s at %s from the next period (now %s at %s)",
					*tier, amount, dash(b.ReceiptTierName), b.Amount)
			}
			return fmt.Sprintf("tier %s -> %s, amount %s -> %s from this period", dash(b.ReceiptTierName), *tier, b.Amount, amount)
		},
		apply: func(ctx context.Context, col *billing.Collector, _ *billing.Period) (billing.Change, error) {
			return col.Periods().ChangeTier(ctx, id, *tier, amount, *downgrade)
		},
	})
}

// human is where human output goes: stdout, or stderr beside the prompt
// when stdout is JSON.
func (a *app) human() io.Writer {
	if a.g.json {
		return a.stderr
	}
	return a.stdout
}

// admin checks the change against the record (its status, and the inputs)
// and refuses it before showing anything; then shows the record, asks for
// confirmation, applies the change and shows the result.
func (a *app) admin(c *command, id string, ch adminChange) error {
	repo, hist, err := a.stores()
	if err != nil {
		return err
	}
	before, err := getByID(a.ctx, repo, id)
	if err != nil {
		return err
	}
	col, closeCol, err := a.adminCollector(repo, hist)
	if err != nil {
		return err
	}
	defer closeCol()
	check := ch.check(&before)
	if check.Op == preview.ChangeDate {
		// The move is checked against the user's other periods too.
		if check.UserRecords, err = repo.ListByUser(a.ctx, before.UserID); err != nil {
			return err
		}
	}
	if err := preview.CheckChange(a.ctx, col, check, &before); err != nil {
		return refused(c, err, adminFlags)
	}
	plan := fmt.Sprintf("%s %s: %s", c.name, id, ch.describe(&before))
	if err := a.preview("Before", &before, plan); err != nil {
		return err
	}
	if !a.g.yes {
		// The answer may have taken a while: apply only to what was shown.
		cur, err := getByID(a.ctx, repo, id)
		if err != nil {
			return err
		}
		if changed(&before, &cur) {
			return fmt.Errorf("%w: %s %s: the record changed while waiting for confirmation (now %s, last_run_date %s); "+
				"nothing was changed, run the command again", billing.ErrConflict, c.name, id, cur.Status, layout.LastRunDateKey(&cur))
		}
	}

	res, err := ch.apply(a.ctx, col, &before)
	if err != nil {
		return err
	}
	if changed(&before, &res.Before) {
		fmt.Fprintf(a.stderr, "billingctl: warning: the record changed between showing it and applying %s; "+
			"the change was applied to the newer record shown below as before\n", c.name)
	}
	if a.g.json {
		created := make([]map[string]any, 0, len(res.Created))
		for i := range res.Created {
			created = append(created, plainItem(recordItem(&res.Created[i])))
		}
		return writeJSON(a.stdout, map[string]any{
			"operation": c.name, "subscription_id": id,
			"before": plainItem(recordItem(&res.Before)), "after": plainItem(recordItem(&res.After)), "created": created,
		})
	}
	fmt.Fprintf(a.stdout, "\nAfter (* changed):\n")
	if err := writeChanged(a.stdout, recordItem(&res.Before), recordItem(&res.After)); err != nil {
		return err
	}
	for i := range res.Created {
		fmt.Fprintf(a.stdout, "\nCreated (the next period):\n")
		if err := writeRecord(a.stdout, recordItem(&res.Created[i])); err != nil {
			return err
		}
	}
	_, err = fmt.Fprintf(a.stdout, "\nApplied: %s\n", plan)
	return err
}

// changed reports whether cur is not the version of the record shown.
func changed(shown, cur *billing.Period) bool {
	return shown.Status != cur.Status || layout.LastRunDateKey(shown) != layout.LastRunDateKey(cur) ||
		layout.BillingDateKey(shown) != layout.BillingDateKey(cur)
}

// confirm asks on stderr and reads the answer from stdin: "y" or "yes"
// (any case) confirms; anything else, or no answer, declines.
func (a *app) confirm(prompt string) (bool, error) {
	fmt.Fprint(a.stderr, prompt)
	if a.stdin == nil {
		fmt.Fprintln(a.stderr)
		return false, nil
	}
	line, err := bufio.NewReader(a.stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("reading the answer: %w", err)
	}
	if !isTerminal(a.stdin) {
		// A terminal echoes the answer; show a piped one the same way.
		fmt.Fprintln(a.stderr, strings.TrimSpace(line))
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true, nil
	}
	return false, nil
}

// refuseProvider is the payment provider of admin changes: they never
// charge, so any call is a bug.
type refuseProvider struct{}

func (refuseProvider) Collect(context.Context, billing.PaymentRequest) (billing.PaymentResult, error) {
	return billing.PaymentResult{}, errors.New("billingctl: admin changes do not charge")
}

// adminCollector returns a collector on the tables with the DynamoDB
// billing lock and the app's clock (the changes' dates and the window of
// billing dates they accept), and what closes its locker.
func (a *app) adminCollector(repo billing.Repository, hist billing.History) (*billing.Collector, func(), error) {
	client, err := a.dynamo()
	if err != nil {
		return nil, nil, err
	}
	locker, err := dynamostore.NewLocker(client, dynamostore.WithLockTable(a.tables().Locks), dynamostore.WithLockOwner(lockOwner()))
	if err != nil {
		return nil, nil, err
	}
	closeLocker := func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), 10*time.Second)
		defer cancel()
		if err := locker.Close(ctx); err != nil {
			fmt.Fprintf(a.stderr, "billingctl: warning: closing the billing locker: %v\n", err)
		}
	}
	col, err := billing.NewCollector(billing.Config{Repository: repo, History: hist, Locker: locker, Provider: refuseProvider{},
		Clock: billing.ClockFunc(func() time.Time { return a.clock().UTC() })})
	if err != nil {
		closeLocker()
		return nil, nil, err
	}
	return col, closeLocker, nil
}

// lockOwner names this process in the lock items it writes, for people
// inspecting the lock table; the random part keeps it unique.
func lockOwner() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("billingctl@%s:%d:%s", cmpOr(host, "unknown"), os.Getpid(), hex.EncodeToString(b))
}

// preview shows rec under heading and the change it is about to make
// (unless --json with --yes), then asks "Apply? [y/N]" unless --yes: an
// answer other than yes is [errAborted].
func (a *app) preview(heading string, rec *billing.Period, change string) error {
	if !a.g.json || !a.g.yes {
		human := a.human()
		fmt.Fprintf(human, "%s:\n", heading)
		if err := writeRecord(human, recordItem(rec)); err != nil {
			return err
		}
		fmt.Fprintf(human, "\nChange: %s\n", change)
	}
	if a.g.yes {
		return nil
	}
	ok, err := a.confirm("Apply? [y/N] ")
	if err != nil {
		return err
	}
	if !ok {
		return errAborted
	}
	return nil
}

// tierAndAmount requires --tier and --amount and parses the amount, the
// inputs of change-tier and subscribe.
func tierAndAmount(c *command, fs *flag.FlagSet, amountText string) (billing.Amount, error) {
	if err := requireFlags(c, fs, "tier", "amount"); err != nil {
		return 0, err
	}
	amount, err := billing.ParseAmount(amountText)
	if err != nil {
		return 0, usagef(c.name, "--amount: %v", err)
	}
	return amount, nil
}
