package billingui

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/dynabill/billing"
)

// This file is what the console shows of dunning (billing.Config.Dunning):
// an owed period's schedule on the customer page, and on Attention the
// owed periods whose final action is near.

// dunningSoon is how near (or past, not yet applied) a period's final
// action is for Attention to list it.
const dunningSoon = 3 * 24 * time.Hour

// hasDunning reports whether c was built with a dunning policy.
func hasDunning(c *billing.Collector) bool {
	_, ok := c.Dunning()
	return ok
}

// dunningView is what the customer page shows of a period's dunning.
type dunningView struct {
	// Active is set while the schedule goes on (the period owed, its
	// final action not applied), with State the schedule's state.
	Active bool
	State  billing.DunningState
	// RetryDue and FinalDue report that the next retry's or the final
	// action's day has come: the next retry run makes it.
	RetryDue, FinalDue bool
	// FinalNoticeSent reports that the final notice was sent.
	FinalNoticeSent bool
	// Kind is the latest decline's kind and Why its words for the
	// customer (billing.DeclineReasonText).
	Kind billing.DeclineKind
	Why  string
	// Notices are the notices sent, oldest first.
	Notices []billing.DunningNotice
	// Ended is when the dunning ended, End how: recovered (Recovered set)
	// or the final action applied. Zero while it goes on.
	Ended     time.Time
	End       billing.DunningEnd
	Recovered bool
	// Pending reports a dunning that goes on while a payment of the
	// period is pending (an ACH debit): the schedule waits for its
	// settlement.
	Pending bool
}

// dunningOf returns what the customer page shows of p's dunning at now,
// nil when there is nothing to show: p was never declined under dunning,
// or its dunning goes on under a collector that has no policy to tell
// its schedule.
func (h *Handler) dunningOf(p *billing.Period, now time.Time) *dunningView {
	d := &p.Dunning
	if !d.Started() {
		return nil
	}
	v := &dunningView{Kind: d.Kind, Why: billing.DeclineReasonText(d.Kind), Notices: slices.Clone(d.Notices),
		Ended: d.Ended, End: d.End, Recovered: d.End == billing.DunningRecovered}
	for _, n := range d.Notices {
		v.FinalNoticeSent = v.FinalNoticeSent || n.Kind == billing.PaymentFinalNoticeEvent
	}
	if !d.Active() {
		return v
	}
	if !h.dunning {
		return nil
	}
	st := h.cfg.Collector.DunningOf(p)
	if !st.Active {
		// In dunning, not ERROR: a payment pending.
		v.Pending = p.Status != billing.StatusError
		if !v.Pending {
			return nil
		}
		return v
	}
	v.Active, v.State = true, st
	v.RetryDue = !st.NextRetry.IsZero() && !now.Before(st.NextRetry)
	v.FinalDue = !now.Before(st.FinalAction)
	return v
}

// finalActionText says what a final action (a billing.FinalAction, or
// the billing.DunningEnd of one applied) does, for the pages.
func finalActionText(a any) string {
	switch billing.FinalAction(fmt.Sprint(a)) {
	case billing.FinalCancel:
		return "cancel the subscription"
	case billing.FinalPause:
		return "pause the subscription"
	case billing.FinalLeavePastDue:
		return "stop retrying, leave it past due"
	}
	return fmt.Sprint(a)
}

// dunningRow is an owed period on Attention whose final action is near.
type dunningRow struct {
	billing.Period
	Due   billing.Amount
	State billing.DunningState
	// Overdue reports that the final action's day has passed: the next
	// retry run applies it.
	Overdue bool
}

// dunningSection is Attention's list of the owed periods whose dunning
// ends within dunningSoon (or is past its end, not yet applied), from the
// ERROR records read: Read of them, Next the cursor where the read
// stopped ("" when every ERROR record was read).
type dunningSection struct {
	On   bool
	Rows []dunningRow
	Read int
	Next string
}

// endingSoon returns the rows of the records among recs (ERROR records)
// whose dunning goes on and whose final action comes before now plus
// dunningSoon, soonest first.
func (h *Handler) endingSoon(recs []billing.Period, now time.Time) []dunningRow {
	var out []dunningRow
	for i := range recs {
		if row, ok := h.endsSoon(&recs[i], now); ok {
			out = append(out, row)
		}
	}
	slices.SortStableFunc(out, func(a, b dunningRow) int {
		if c := a.State.FinalAction.Compare(b.State.FinalAction); c != 0 {
			return c
		}
		return cmp.Compare(a.UserID, b.UserID)
	})
	return out
}

// endsSoon returns p's row when its dunning goes on and its final action
// comes before now plus dunningSoon.
func (h *Handler) endsSoon(p *billing.Period, now time.Time) (dunningRow, bool) {
	st := h.cfg.Collector.DunningOf(p)
	if !st.Active || st.FinalAction.After(now.Add(dunningSoon)) {
		return dunningRow{}, false
	}
	due, _, _ := p.Due()
	return dunningRow{Period: *p, Due: due, State: st, Overdue: !now.Before(st.FinalAction)}, true
}

// dunningScan reads the ERROR records from cursor, a bounded number of
// pages, for the section on its own.
func (h *Handler) dunningScan(ctx context.Context, cursor string, now time.Time) (dunningSection, []string, error) {
	found, err := h.scan(ctx, billing.StatusQuery{Status: billing.StatusError, Cursor: cursor}, func(p *billing.Period) bool {
		_, ok := h.endsSoon(p, now)
		return ok
	})
	if err != nil {
		return dunningSection{}, nil, err
	}
	return dunningSection{On: true, Rows: h.endingSoon(found.Items, now), Read: found.Read, Next: found.Next}, found.Invalid, nil
}
