package main

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/dynabill/billing"
)

var subsListCmd = &command{
	name:     "subs list",
	synopsis: "USER",
	doc: `a user's records, oldest billing date first
One line per record (billing period); --json prints the stored attributes of
each. A user without records prints none and exits 0.`,
	run: runSubsList,
}

var subsGetCmd = &command{
	name:     "subs get",
	synopsis: "SUBSCRIPTION_ID",
	doc: `one record, every attribute
Finds the record through the subscription ID index and reads it from the
table with a consistent read. An unknown ID exits 1.`,
	run: runSubsGet,
}

var historyCmd = &command{
	name:     "history",
	synopsis: "SUBSCRIPTION_ID | --user USER",
	doc: `the audit rows of a record, oldest first (or --user USER)
One row per write of the record (history table, keyed by user_id and
last_run_date); with --user, every row of the user. An unknown ID exits 1.`,
	run: runHistory,
}

func runSubsList(a *app, c *command, args []string) error {
	pos, err := a.parse(c, a.newFlags(c), args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef(c.name, "want one USER argument, got %d", len(pos))
	}
	repo, _, err := a.stores()
	if err != nil {
		return err
	}
	subs, err := repo.ListByUser(a.ctx, pos[0])
	if err != nil {
		return err
	}
	if a.g.json {
		items := make([]map[string]any, 0, len(subs))
		for i := range subs {
			items = append(items, plainItem(recordItem(&subs[i])))
		}
		return writeJSON(a.stdout, items)
	}
	if len(subs) == 0 {
		_, err := fmt.Fprintf(a.stdout, "no records for user %s\n", pos[0])
		return err
	}
	tw := newTable(a.stdout)
	// The TRIAL column is shown for users who had a trial.
	trial := slices.ContainsFunc(subs, func(s billing.Period) bool { return trialCell(&s) != "-" })
	head := "SUBSCRIPTION_ID\tBILLING_DATE\tSTATUS\tAMOUNT\tTIER\tTERM\tPROCESS\tEVENT\tLAST_RUN"
	if trial {
		head += "\tTRIAL"
	}
	fmt.Fprintln(tw, head)
	for i := range subs {
		s := &subs[i]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", s.SubscriptionID, fmtTime(s.BillingDate), s.Status,
			amountCell(s), dash(s.ReceiptTierName), dash(string(s.Term)), dash(string(s.Process)), dash(string(s.UpdatedEvent)),
			dash(fmtTime(s.LastRunDate)))
		if trial {
			fmt.Fprintf(tw, "\t%s", trialCell(s))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

func runSubsGet(a *app, c *command, args []string) error {
	pos, err := a.parse(c, a.newFlags(c), args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef(c.name, "want one SUBSCRIPTION_ID argument, got %d", len(pos))
	}
	repo, _, err := a.stores()
	if err != nil {
		return err
	}
	sub, err := getByID(a.ctx, repo, pos[0])
	if err != nil {
		return err
	}
	item := recordItem(&sub)
	if a.g.json {
		return writeJSON(a.stdout, plainItem(item))
	}
	return writeRecord(a.stdout, item)
}

func runHistory(a *app, c *command, args []string) error {
	fs := a.newFlags(c)
	user := fs.String("user", "", "list every history row of this `user` instead of one subscription's")
	pos, err := a.parse(c, fs, args)
	if err != nil {
		return err
	}
	switch {
	case *user != "" && len(pos) > 0:
		return usagef(c.name, "give a SUBSCRIPTION_ID or --user, not both")
	case *user == "" && len(pos) != 1:
		return usagef(c.name, "want one SUBSCRIPTION_ID argument (or --user USER), got %d", len(pos))
	}
	repo, hist, err := a.stores()
	if err != nil {
		return err
	}
	var rows []billing.Period
	if *user != "" {
		rows, err = hist.ListByUser(a.ctx, *user)
	} else {
		rows, err = hist.ListBySubscription(a.ctx, pos[0])
		if err == nil && len(rows) == 0 {
			// No rows: an unknown ID, or a record written without history.
			if _, err := getByID(a.ctx, repo, pos[0]); err != nil {
				return err
			}
		}
	}
	if err != nil {
		return err
	}
	if a.g.json {
		items := make([]map[string]any, 0, len(rows))
		for i := range rows {
			items = append(items, plainItem(historyItem(&rows[i])))
		}
		return writeJSON(a.stdout, items)
	}
	if len(rows) == 0 {
		_, err := fmt.Fprintln(a.stdout, "no history rows")
		return err
	}
	tw := newTable(a.stdout)
	fmt.Fprintln(tw, "WRITTEN\tCHANGE\tSUBSCRIPTION_ID\tBILLING_DATE\tSTATUS\tPROCESS\tEVENT\tATTEMPT\tAMOUNT\tTIER\tTRANSACTION\tERROR")
	for i := range rows {
		s := &rows[i]
		attempt := "-"
		if s.Attempt > 0 {
			attempt = strconv.Itoa(s.Attempt)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.LastRunDate.UTC().Format("2006-01-02T15:04:05.000Z"),
			dash(string(s.Change)), s.SubscriptionID, fmtTime(s.BillingDate), s.Status, dash(string(s.Process)), dash(string(s.UpdatedEvent)),
			attempt, amountCell(s), dash(s.ReceiptTierName), dash(s.TransactionID), dash(s.PaymentError))
	}
	return tw.Flush()
}

// trialCell shows a trial period's end and first charge ("until
// 2025-02-17T09:00:00Z, then 9.99"), the first paid period after a trial
// as "first charge", and "-" otherwise.
func trialCell(s *billing.Period) string {
	switch {
	case s.IsTrial():
		return fmt.Sprintf("until %s, then %s", fmtTime(s.TrialEnd), s.TrialAmount)
	case s.IsAfterTrial():
		return "first charge"
	}
	return "-"
}

// amountCell shows what a record charges: a period's amount, or a plan
// change's one-off charge's difference, marked ("5.00 one-off").
func amountCell(s *billing.Period) string {
	if s.IsOneOff() {
		due, _, _ := s.Due()
		return due.String() + " one-off"
	}
	return s.Amount.String()
}

// dash shows an empty cell as "-".
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
