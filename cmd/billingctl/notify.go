package main

import (
	"context"
	"fmt"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/notice"
)

var notifyPreviewCmd = &command{
	name:     "notify preview",
	synopsis: "[--date YYYYMMDD | --run-date YYYYMMDD] [--status STATUS]",
	doc: `who the pre-billing notifier would message for a date
Runs the notifier's scheduler against the table, with its paging and
continuations, but collects the worker messages instead of sending them, and
lists them. Nothing is written or sent.

--date is the scheduler event's date: the billing date whose records are
notified (the window [date, date+1 day)). --run-date is the day of a daily
run instead, which notifies the records billed ` + fmt.Sprint(billing.NoticeLeadDays) + ` days later. The default
is today's run. Records whose updated_event is PENDING_CANCELLATION are
listed as skipped, as the worker skips them; the worker also skips users who
are not ACTIVE in the user service, which billingctl cannot see.`,
	run: runNotifyPreview,
}

// notifyRow is one message the scheduler would enqueue.
type notifyRow struct {
	UserID         string         `json:"user_id"`
	SubscriptionID string         `json:"subscription_id"`
	BillingDate    string         `json:"billing_date"`
	Amount         billing.Amount `json:"billing_amount"`
	Status         string         `json:"billing_status"`
	TierName       string         `json:"receipt_tier_name"`
	UpdatedEvent   string         `json:"updated_event"`
	Notify         bool           `json:"notify"`
	Skip           string         `json:"skip,omitempty"`
}

func runNotifyPreview(a *app, c *command, args []string) error {
	fs := a.newFlags(c)
	dateFlag := fs.String("date", "", "the billing `date` to notify about, YYYYMMDD (the scheduler event's date)")
	runDate := fs.String("run-date", "", "the `day` of a daily run, YYYYMMDD, instead of --date (default today, UTC)")
	statusFlag := fs.String("status", string(billing.StatusScheduled), "the billing_status the scheduler queries")
	pageSize := fs.Int("page-size", 0, "items read per page (DynamoDB's Limit; default the library's 100)")
	if err := a.parseNoArgs(c, fs, args); err != nil {
		return err
	}
	if *pageSize < 0 {
		return usagef(c.name, "--page-size %d: must not be negative", *pageSize)
	}
	status, err := billing.ParseStatus(*statusFlag)
	if err != nil || !status.Storable() {
		return usagef(c.name, "--status %q: not a stored billing_status", *statusFlag)
	}
	var start, end time.Time
	switch {
	case *dateFlag != "" && *runDate != "":
		return usagef(c.name, "give --date or --run-date, not both")
	case *dateFlag != "":
		if start, end, err = notice.Window(time.Time{}, *dateFlag); err != nil {
			return usagef(c.name, "--date %q: want YYYYMMDD, a real date", *dateFlag)
		}
	default:
		now := a.clock().UTC()
		if *runDate != "" {
			day, _, err := notice.Window(time.Time{}, *runDate)
			if err != nil {
				return usagef(c.name, "--run-date %q: want YYYYMMDD, a real date", *runDate)
			}
			now = day
		}
		if start, end, err = notice.Window(now, ""); err != nil {
			return err
		}
	}

	repo, _, err := a.stores()
	if err != nil {
		return err
	}
	var bodies []string
	sched, err := notice.NewScheduler(notice.SchedulerConfig{
		Repository: repo,
		Enqueuer: notice.EnqueuerFunc(func(_ context.Context, batch []string) error {
			bodies = append(bodies, batch...)
			return nil
		}),
		PageSize: *pageSize,
		Clock:    billing.ClockFunc(a.clock),
	})
	if err != nil {
		return err
	}
	bar := a.newProgress("notify preview")
	defer bar.finish()
	ev := notice.Event{Date: start.Format("20060102"), Status: status}
	var pages, read, skippedInvalid, invocations int
	for {
		res, err := sched.Run(a.ctx, ev)
		invocations++
		pages += res.Pages
		read += res.Scanned
		skippedInvalid += res.Skipped
		if err != nil {
			return err
		}
		bar.update(pages, read, len(bodies))
		if res.Continuation == nil {
			break
		}
		ev = *res.Continuation
	}
	bar.finish()

	rows := make([]notifyRow, 0, len(bodies))
	toMessage, pending := 0, 0
	for _, body := range bodies {
		m, err := notice.ParseMessage([]byte(body))
		if err != nil {
			return fmt.Errorf("the scheduler enqueued a message the worker cannot parse: %w", err)
		}
		r := notifyRow{UserID: m.UserID, SubscriptionID: m.SubscriptionID, BillingDate: fmtTime(m.BillingDate),
			Amount: m.Amount, Status: string(m.Status), TierName: m.TierName, UpdatedEvent: string(m.UpdatedEvent), Notify: true}
		if m.UpdatedEvent == billing.UpdatedPendingCancellation {
			r.Notify, r.Skip = false, "pending cancellation"
			pending++
		} else {
			toMessage++
		}
		rows = append(rows, r)
	}
	if a.g.json {
		return writeJSON(a.stdout, map[string]any{
			"window_start": fmtTime(start), "window_end": fmtTime(end), "status": status,
			"messages": rows, "to_message": toMessage, "skipped_pending_cancellation": pending,
			"skipped_invalid": skippedInvalid, "pages": pages, "invocations": invocations, "items_read": read,
			"items_read_per_item_returned": ratioJSON(read, len(rows)+skippedInvalid),
		})
	}
	w := a.stdout
	fmt.Fprintf(w, "%s records billed in [%s, %s):\n\n", status, fmtTime(start), fmtTime(end))
	if len(rows) > 0 {
		tw := newTable(w)
		fmt.Fprintln(tw, "USER\tSUBSCRIPTION_ID\tBILLING_DATE\tAMOUNT\tTIER\tNOTIFY")
		for _, r := range rows {
			notify := "yes"
			if !r.Notify {
				notify = "no: " + r.Skip
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.UserID, r.SubscriptionID, r.BillingDate, r.Amount,
				dash(r.TierName), notify)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "%d to message, %d skipped (pending cancellation), %d undecodable (skipped by the scheduler).\n",
		toMessage, pending, skippedInvalid)
	fmt.Fprintf(w, "%s in %s, %s read (%s per item returned).\n", plural(pages, "page"),
		plural(invocations, "scheduler invocation"), plural(read, "item"), ratio(read, len(rows)+skippedInvalid))
	fmt.Fprintln(w, "The worker also skips users who are not ACTIVE in the user service and, where configured, emails outside the allowed suffixes.")
	return nil
}
