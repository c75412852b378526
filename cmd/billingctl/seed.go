package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dynabill/billing"
)

var seedCmd = &command{
	name:     "seed",
	synopsis: "[--users N] [--now DATE]",
	doc: `fill the tables with sample subscriptions
Writes a few records per user through the library (so they are valid for the
chosen --layout): some due now, some due later, a declined one waiting for its
retry, a paused one, a paid period followed by the next. The paid period gets
its invoice, paid, and the declined one its invoice, open (the INVOICE column;
in the invoices table, or the account's partition of the single table). Names
and dates are fixed for a given --now, so a rerun writes nothing new
("exists"). Meant for local servers: without --endpoint it refuses unless
--yes is given.`,
	run: runSeed,
}

// seedRecord is one record seed writes.
type seedRecord struct {
	User   string `json:"user"`
	ID     string `json:"subscription_id"`
	Date   string `json:"billing_date"`
	Status string `json:"status"`
	// Invoice is the number of the period's invoice, when seed gave it one.
	Invoice string `json:"invoice,omitempty"`
	Action  string `json:"action"`
}

func runSeed(a *app, c *command, args []string) error {
	fs := a.newFlags(c)
	users := fs.Int("users", 12, "how many sample `users`")
	nowFlag := fs.String("now", "", "the `date` (YYYY-MM-DD) the sample is built around (default today, UTC)")
	if err := a.parseNoArgs(c, fs, args); err != nil {
		return err
	}
	if *users < 1 || *users > 1000 {
		return usagef(c.name, "--users %d: want 1 to 1000", *users)
	}
	now := a.clock().UTC().Truncate(24 * time.Hour).Add(12 * time.Hour)
	if *nowFlag != "" {
		d, err := time.Parse(time.DateOnly, *nowFlag)
		if err != nil {
			return usagef(c.name, "--now %q: want a date such as 2025-01-31", *nowFlag)
		}
		now = d.Add(12 * time.Hour)
	}
	if a.g.endpoint == "" && !a.g.yes {
		return errors.New("seed writes sample data; it is meant for a local server (--endpoint or DYNAMODB_ENDPOINT): " +
			"to write it to AWS anyway, pass --yes")
	}
	repo, _, err := a.stores()
	if err != nil {
		return err
	}
	invoices, err := a.invoices()
	if err != nil {
		return err
	}
	var out []seedRecord
	for i := range *users {
		for _, s := range seedUser(a.seedUserID(i), i, now) {
			action := "created"
			if err := repo.Add(a.ctx, &s); errors.Is(err, billing.ErrAlreadyExists) {
				action = "exists"
			} else if err != nil {
				return fmt.Errorf("seed %s: %w", s.SubscriptionID, err)
			}
			rec := seedRecord{User: s.UserID, ID: s.SubscriptionID, Date: fmtTime(s.BillingDate), Status: string(s.Status), Action: action}
			if rec.Invoice, err = seedInvoice(a, invoices, &s); err != nil {
				return fmt.Errorf("seed the invoice of %s: %w", s.SubscriptionID, err)
			}
			out = append(out, rec)
		}
	}
	if a.g.json {
		return writeJSON(a.stdout, out)
	}
	tw := newTable(a.stdout)
	fmt.Fprintln(tw, "USER\tSUBSCRIPTION_ID\tBILLING_DATE\tSTATUS\tINVOICE\tACTION")
	for _, r := range out {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.User, r.ID, r.Date, r.Status, dash(r.Invoice), r.Action)
	}
	return tw.Flush()
}

// seedUserID is the i-th sample user: a plain ID on the legacy tables, an
// account's subscription (account#subscription#SKU) on the single table.
func (a *app) seedUserID(i int) string {
	if a.single() {
		return fmt.Sprintf("seed-acct-%02d#seed-plan-%02d#PLUS", i, i)
	}
	return fmt.Sprintf("seed-user-%02d", i)
}

// seedUser returns the records of the i-th sample user around now. The
// kind of user cycles through six: due now, due in ten days, declined
// yesterday (retry due), paused, paid last month with the next period
// open, yearly due now.
func seedUser(user string, i int, now time.Time) []billing.Period {
	day := now.Truncate(24 * time.Hour)
	rec := func(suffix string, date time.Time, st billing.Status) billing.Period {
		return billing.Period{
			UserID: user, SubscriptionID: fmt.Sprintf("seed-%02d-%s", i, suffix), BillingDate: date,
			BillingPeriod: billing.BillingPeriod(date), Amount: billing.MustParseAmount("9.99"), Status: st,
			Term: billing.TermMonthly, AnchorDay: date.Day(), ReceiptTierName: "Plus:v2", Process: billing.ProcessInitial,
			CreatedDate: date.AddDate(0, -1, 0), LastRunDate: date.AddDate(0, -1, 0),
		}
	}
	switch i % 6 {
	case 0:
		return []billing.Period{rec("due", day.Add(-time.Hour), billing.StatusScheduled)}
	case 1:
		return []billing.Period{rec("later", day.AddDate(0, 0, 10), billing.StatusScheduled)}
	case 2:
		s := rec("declined", day.AddDate(0, 0, -1), billing.StatusError)
		s.Attempt, s.PaymentError, s.LastRunDate, s.InitialRunDate = 1, "insufficient funds", day.Add(-12*time.Hour), day.Add(-12*time.Hour)
		return []billing.Period{s}
	case 3:
		s := rec("paused", day.AddDate(0, 0, -3), billing.StatusPaused)
		s.PauseDurationMonths = 2
		return []billing.Period{s}
	case 4:
		paid := rec("paid", day.AddDate(0, -1, 0), billing.StatusCompleted)
		paid.Attempt, paid.InitialRunDate, paid.CompletionDate = 1, paid.BillingDate.Add(time.Hour), paid.BillingDate.Add(time.Hour)
		paid.LastRunDate, paid.TransactionID = paid.CompletionDate, fmt.Sprintf("txn-seed-%02d", i)
		next := rec("next", day.AddDate(0, 0, 5), billing.StatusScheduled)
		next.LastRunDate = paid.LastRunDate.Add(time.Second)
		return []billing.Period{paid, next}
	default:
		s := rec("yearly", day.Add(-2*time.Hour), billing.StatusScheduled)
		s.Term, s.Amount = billing.TermYearly, billing.MustParseAmount("99.00")
		return []billing.Period{s}
	}
}

// seedInvoice gives a charged sample period its invoice, as the engine
// issues one: decided (a draft) and numbered (finalized) before the
// processor is called, then paid when the charge succeeded; a declined
// charge leaves it open. It returns the invoice's number, "" for a period
// not charged. A rerun finds the invoice as it is (each step repeats).
func seedInvoice(a *app, store billing.Invoices, p *billing.Period) (string, error) {
	if p.Status != billing.StatusCompleted && p.Status != billing.StatusError {
		return "", nil
	}
	account, _, _ := strings.Cut(p.UserID, "#") // the single table's account#subscription#SKU
	charged := p.InitialRunDate
	cents := p.Amount.MinorUnits()
	draft := billing.Invoice{UserID: account, Key: p.SubscriptionID, Currency: "USD",
		Lines: []billing.InvoiceLine{{Description: p.ReceiptTierName + ", monthly", PeriodStart: p.BillingDate,
			PeriodEnd: p.BillingDate.AddDate(0, 1, 0), Quantity: 1, UnitAmount: cents, Amount: cents, Kind: billing.LinePlan}},
		Subtotal: cents, Total: cents, AmountDue: cents, Created: charged.Add(-2 * time.Second), DueAt: p.BillingDate,
		PeriodIDs: []string{p.SubscriptionID}}
	inv, err := store.CreateDraft(a.ctx, &draft)
	if err != nil {
		return "", err
	}
	if inv, err = store.Finalize(a.ctx, inv.ID, charged.Add(-time.Second)); err != nil {
		return "", err
	}
	if p.Status == billing.StatusCompleted {
		if inv, err = store.MarkPaid(a.ctx, inv.ID, p.TransactionID, p.CompletionDate); err != nil {
			return "", err
		}
	}
	return inv.Number, nil
}
