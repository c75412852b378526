package faultsim

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/dynabill/billing/internal/av"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/layout"
)

// The invariants, as reported.
const (
	invMoney    = "every charge on exactly one period, no period charged twice"
	invOpen     = "every active subscription has exactly one open period"
	invDue      = "every due period billed (strict, after two calm days)"
	invLocks    = "no user locked past two lease durations"
	invReminder = "a reminder at most once per record and billing date"
	invHistory  = "history equals the primary table"
	invAppend   = "history is append-only: no row replaced or removed"
	invZero     = "no zero-amount processor call"
	invTrial    = "a trial user is never charged before the trial's end"
	invInvoices = "one paid invoice per paid period, numbers gapless, totals what was charged"
)

// afterStep checks the invariants after a step: the users it wrote (or
// every user), the locks and the reminders sent.
func (s *Sim) afterStep(ctx context.Context, e *event) {
	if s.stop {
		return
	}
	now := s.clock.Now()
	s.proc.advance(now)
	s.res.Checks[invReminder]++
	if dups := s.notifier.takeDups(); len(dups) > 0 {
		for _, d := range dups {
			s.fail(invReminder, withTrail([]string{d.msg}, s.trail(ctx, d.user)))
		}
	}
	if s.dun != nil {
		s.dun.flush(ctx)
	}
	s.res.Checks[invLocks]++
	s.fail(invLocks, s.locker.check(now))
	s.res.Checks[invZero]++
	var zero []string
	for _, r := range s.proc.takeZero() {
		zero = append(zero, fmt.Sprintf("user %s: period %s presented at zero (key %s, %s)", r.UserID, r.SubscriptionID, r.IdempotencyKey, r.Process))
	}
	s.fail(invZero, zero)
	users := s.takeDirty()
	if s.opts.FullChecks {
		users = s.users
	}
	s.checkUsers(ctx, users)
}

// checkAll checks every user (and reads every user's records again).
func (s *Sim) checkAll(ctx context.Context) {
	s.proc.advance(s.clock.Now())
	s.takeDirty()
	s.checkUsers(ctx, s.users)
}

// checkUsers checks the invariants of money, open periods and history
// of users from what the store, the history and the processor's ledger
// hold.
func (s *Sim) checkUsers(ctx context.Context, users []string) {
	if s.stop || len(users) == 0 {
		return
	}
	byUser := map[string][]Charge{}
	for _, c := range s.proc.ledger() {
		byUser[c.UserID] = append(byUser[c.UserID], c)
	}
	var money, open, hist, appendOnly []string
	seqs := map[string][]int64{} // each sequence's numbers (by prefix), from the users checked
	for _, u := range users {
		recs, err := s.raw.ListByUser(ctx, u)
		if err != nil {
			s.fail("the store answers", []string{fmt.Sprintf("ListByUser(%s): %v", u, err)})
			return
		}
		s.records[u] = recs
		s.res.Checks[invMoney]++
		m := checkMoney(u, recs, byUser[u])
		if end, ok := s.trialEnds[u]; ok {
			s.res.Checks[invTrial]++
			var early []string
			for _, c := range byUser[u] {
				if c.At.Before(end) {
					early = append(early, fmt.Sprintf("user %s: charge %s before the trial's end %s", u, descCharge(&c), end.Format(time.DateTime)))
				}
			}
			if len(early) > 0 {
				early = withTrail(early, s.trail(ctx, u))
			}
			s.fail(invTrial, early)
		}
		if s.opts.Store.Invoices != nil {
			s.res.Checks[invInvoices]++
			inv := s.checkInvoices(ctx, u, recs, byUser[u], seqs)
			if len(inv) > 0 {
				inv = withTrail(inv, s.trail(ctx, u))
			}
			s.fail(invInvoices, inv)
		}
		if s.plan != nil {
			s.checkPlanUser(ctx, u, recs)
			s.checkOneOffs(ctx, u, recs, byUser[u])
		}
		if s.dun != nil {
			s.checkDunningUser(ctx, u, recs)
		}
		var o, h, a []string
		if len(recs) > 0 {
			s.res.Checks[invOpen]++
			o = checkOpen(u, recs)
			s.res.Checks[invHistory]++
			s.res.Checks[invAppend]++
			h, a = s.checkHistory(ctx, u, recs)
		}
		if len(m)+len(o)+len(h)+len(a) > 0 {
			trail := s.trail(ctx, u)
			m, o, h, a = withTrail(m, trail), withTrail(o, trail), withTrail(h, trail), withTrail(a, trail)
		}
		money, open, hist, appendOnly = append(money, m...), append(open, o...), append(hist, h...), append(appendOnly, a...)
	}
	if s.opts.Store.Invoices != nil && len(users) == len(s.users) {
		// Every user read: each sequence (an account's, shared by its
		// subscriptions on the single table) is 1..N, each number once.
		var gaps []string
		for _, prefix := range slices.Sorted(maps.Keys(seqs)) {
			got := seqs[prefix]
			slices.Sort(got)
			for i, n := range got {
				if n != int64(i+1) {
					gaps = append(gaps, fmt.Sprintf("sequence %s: invoice numbers %v are not 1..%d", prefix, got, len(got)))
					break
				}
			}
		}
		s.fail(invInvoices, gaps)
	}
	if s.plan != nil {
		s.checkCoupons(ctx, len(users) == len(s.users))
	}
	s.fail(invMoney, money)
	s.fail(invOpen, open)
	s.fail(invAppend, appendOnly)
	s.fail(invHistory, hist)
}

func desc(r *billing.Period) string {
	d := fmt.Sprintf("%s (%s, billed %s, %s", r.SubscriptionID, r.Status, r.BillingDate.Format(time.DateTime), r.Amount)
	if due, _, _ := r.Due(); due != r.Amount || r.Balance != 0 {
		d += fmt.Sprintf(", due %s (%d lines, %d discounts, balance %s)", due, len(r.Adjustments), len(r.Discounts), r.Balance)
	}
	if r.TransactionID != "" {
		d += ", txn " + r.TransactionID
	}
	if r.NoRetry {
		d += ", declined as final"
	}
	if r.LastAttempt.Number > 0 {
		d += fmt.Sprintf(", attempts %d, last key %s (%s)", r.Attempt, r.LastAttempt.Key, r.LastAttempt.Process)
		if r.InFlight() {
			d += " in flight since " + r.LastAttempt.Started.Format(time.DateTime)
		}
	}
	return d + ")"
}

func descCharge(c *Charge) string {
	return fmt.Sprintf("key %s (%s %s at %s)", c.Key, c.Result.Outcome, c.Amount, c.At.Format(time.DateTime))
}

// checkMoney: every charge the processor kept is on exactly one record
// of its subscription ID, with its transaction and amount (or on the
// record in flight with its key), no subscription ID is charged twice,
// and every COMPLETED record has its charge.
func checkMoney(u string, recs []billing.Period, ledger []Charge) []string {
	var bad []string
	bySub := map[string][]*billing.Period{}
	for i := range recs {
		bySub[recs[i].SubscriptionID] = append(bySub[recs[i].SubscriptionID], &recs[i])
	}
	kept := map[string][]*Charge{}
	byTxn := map[string]*Charge{}
	for i := range ledger {
		c := &ledger[i]
		if !c.Kept() {
			continue
		}
		byTxn[c.Result.TransactionID] = c
		if c.Recovered && !c.Told {
			// A decline confirmed on session is held to its period once
			// its settled event reached the host (a delivery may apply
			// and fail: then its record has it already).
			continue
		}
		kept[c.SubscriptionID] = append(kept[c.SubscriptionID], c)
		// The records of its subscription ID that carry it: recorded
		// with its transaction and amount, or in flight with its key.
		var on []*billing.Period
		for _, r := range bySub[c.SubscriptionID] {
			// What a record charges is its Due (its plan less its
			// discounts, with its proration lines, less the balance it
			// applied): the record keeps them, so it says what it took.
			due, _, _ := r.Due()
			recorded := r.TransactionID == c.Result.TransactionID && due == c.Amount &&
				(r.Status == billing.StatusCompleted || r.Status == billing.StatusACHSent || r.Status == billing.StatusStale || r.Status == billing.StatusRefunded)
			if recorded || r.InFlight() && r.LastAttempt.Key == c.Key {
				on = append(on, r)
			}
		}
		switch {
		case len(on) == 1:
		case len(on) > 1:
			bad = append(bad, fmt.Sprintf("user %s: charge %s is on %d records: %s, %s", u, descCharge(c), len(on), desc(on[0]), desc(on[1])))
		case len(bySub[c.SubscriptionID]) == 0:
			bad = append(bad, fmt.Sprintf("user %s: charge %s is on no record: subscription %s has none", u, descCharge(c), c.SubscriptionID))
		default:
			var rs []string
			for _, r := range bySub[c.SubscriptionID] {
				rs = append(rs, desc(r))
			}
			bad = append(bad, fmt.Sprintf("user %s: charge %s is not on its period: record %s", u, descCharge(c), strings.Join(rs, ", ")))
		}
	}
	for sub, cs := range kept {
		if len(cs) > 1 {
			var keys []string
			for _, c := range cs {
				keys = append(keys, descCharge(c))
			}
			bad = append(bad, fmt.Sprintf("user %s: period %s charged %d times: %s", u, sub, len(cs), strings.Join(keys, ", ")))
		}
	}
	for i := range recs {
		r := &recs[i]
		if r.Status == billing.StatusCompleted && r.TransactionID != "" && byTxn[r.TransactionID] == nil {
			bad = append(bad, fmt.Sprintf("user %s: record %s is COMPLETED, but the processor kept no charge %s", u, desc(r), r.TransactionID))
		}
	}
	slices.Sort(bad)
	return bad
}

// checkOpen: at most one open period (SCHEDULED or PAUSED) per user, and
// one unless the subscription was cancelled: no record of the user was
// created after its latest cancellation (a reactivation, an upgrade or a
// next period opened since would have to be open). A plan change's
// one-off charge is no period: SCHEDULED until it is collected, it is
// not counted, nor is its creation.
func checkOpen(u string, recs []billing.Period) []string {
	var open []string
	var cancelled, created time.Time
	latest := &recs[0]
	for i := range recs {
		r := &recs[i]
		if r.IsOneOff() {
			continue
		}
		switch r.Status {
		case billing.StatusScheduled, billing.StatusPaused:
			open = append(open, desc(r))
		case billing.StatusCancelled:
			if r.LastRunDate.After(cancelled) {
				cancelled = r.LastRunDate
			}
		}
		if r.CreatedDate.After(created) {
			created, latest = r.CreatedDate, r
		}
	}
	switch {
	case len(open) > 1:
		return []string{fmt.Sprintf("user %s has %d open periods: %s", u, len(open), strings.Join(open, ", "))}
	case len(open) == 0 && cancelled.IsZero():
		return []string{fmt.Sprintf("user %s has no open period and was never cancelled; its newest record is %s", u, desc(latest))}
	case len(open) == 0 && cancelled.Before(created):
		return []string{fmt.Sprintf("user %s has no open period, and its newest record %s was created after its last cancellation (%s)",
			u, desc(latest), cancelled.Format(time.DateTime))}
	}
	return nil
}

// checkHistory checks that history mirrors the primary table: every
// record of u has a history row of its subscription ID, and the newest
// one (latest last_run_date) equals the record in every attribute the
// primary table stores, but for a reminder's claim and an attempt's
// bookkeeping that is written on the record alone: the attempt of a
// record in flight, and the count of an attempt settled as never made
// ([billing.Repository.SetAttempt] appends no history row; the row that
// records the next outcome carries them). It is what
// billingtest.RequireHistoryMatchesPrimary checks, with that allowance:
// the helper counts the attempt attributes, so it fails on every record
// in flight. The second result is what checkAppendOnly finds in the rows
// read.
func (s *Sim) checkHistory(ctx context.Context, u string, recs []billing.Period) (mirror, appendOnly []string) {
	rows, err := s.hist.ListByUser(ctx, u)
	if err != nil {
		return []string{fmt.Sprintf("History.ListByUser(%s): %v", u, err)}, nil
	}
	appendOnly = s.checkAppendOnly(u, rows)
	newest := map[string]*billing.Period{}
	for i := range rows {
		r := &rows[i]
		if cur, ok := newest[r.SubscriptionID]; !ok || r.LastRunDate.After(cur.LastRunDate) {
			newest[r.SubscriptionID] = r
		}
	}
	var bad []string
	for i := range recs {
		rec := &recs[i]
		row, ok := newest[rec.SubscriptionID]
		if !ok {
			bad = append(bad, fmt.Sprintf("user %s: record %s has no history row", u, desc(rec)))
			continue
		}
		want := *rec
		if rec.Attempt >= row.Attempt && (rec.InFlight() || rec.Attempt == rec.LastAttempt.Number) {
			want.Attempt, want.LastAttempt = row.Attempt, row.LastAttempt
		}
		if d := diffItems(row, &want); d != "" {
			bad = append(bad, fmt.Sprintf("user %s: record %s: the newest history row (last_run_date %s) differs: %s",
				u, desc(rec), layout.LastRunDateKey(row), d))
		}
	}
	return bad, appendOnly
}

// checkAppendOnly compares the history rows of u with every row of u seen
// by an earlier check (a shadow kept by last_run_date and subscription
// ID): each must still be there, byte for byte; then it adds the new
// rows to the shadow.
func (s *Sim) checkAppendOnly(u string, rows []billing.Period) []string {
	seen := s.shadow[u]
	if seen == nil {
		seen = map[string]billing.Period{}
		s.shadow[u] = seen
	}
	cur := make(map[string]*billing.Period, len(rows))
	for i := range rows {
		cur[layout.LastRunDateKey(&rows[i])+" "+rows[i].SubscriptionID] = &rows[i]
	}
	var bad []string
	for _, k := range slices.Sorted(maps.Keys(seen)) {
		old := seen[k]
		row, ok := cur[k]
		if !ok {
			var at []string
			for _, r := range rows {
				if layout.LastRunDateKey(&r) == layout.LastRunDateKey(&old) {
					at = append(at, desc(&r))
				}
			}
			what := "gone"
			if len(at) > 0 {
				what = "replaced by " + strings.Join(at, ", ")
			}
			bad = append(bad, fmt.Sprintf("user %s: the history row of %s at last_run_date %s is %s", u, desc(&old), layout.LastRunDateKey(&old), what))
			continue
		}
		if !sameItem(&old, row) {
			d := diffItems(row, &old)
			if d == "" {
				d = "reminder attributes"
			}
			bad = append(bad, fmt.Sprintf("user %s: the history row of %s at last_run_date %s was rewritten: %s", u, desc(&old), layout.LastRunDateKey(&old), d))
		}
	}
	for k, r := range cur {
		if _, ok := seen[k]; !ok {
			seen[k] = *r
		}
	}
	return bad
}

// sameItem reports whether a and b encode to the same item: at once when
// they are equal field by field (the item is a function of the fields),
// else by encoding both. The check runs for every history row after every
// step; encoding both rows each time was most of the simulation's time.
func sameItem(a, b *billing.Period) bool {
	if reflect.DeepEqual(a, b) {
		return true
	}
	x, errA := layout.EncodeItem(a)
	y, errB := layout.EncodeItem(b)
	return errA == nil && errB == nil && reflect.DeepEqual(x, y)
}

// diffItems describes the attributes the primary table would store
// differently for got and want, a reminder's claim aside; "" when none.
func diffItems(got, want *billing.Period) string {
	g, err := layout.EncodeItem(got)
	if err != nil {
		return "history row does not encode: " + err.Error()
	}
	w, err := layout.EncodeItem(want)
	if err != nil {
		return "record does not encode: " + err.Error()
	}
	for _, n := range layout.ReminderAttributes() {
		delete(g, n)
		delete(w, n)
	}
	var diffs []string
	for n, wv := range w {
		if gv, ok := g[n]; !ok || !reflect.DeepEqual(gv, wv) {
			diffs = append(diffs, fmt.Sprintf("%s: row %s, record %s", n, show(gv), show(wv)))
		}
	}
	for n, gv := range g {
		if _, ok := w[n]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: row %s, record (absent)", n, show(gv)))
		}
	}
	slices.Sort(diffs)
	return strings.Join(diffs, "; ")
}

func show(v av.AttributeValue) string {
	switch v := v.(type) {
	case nil:
		return "(absent)"
	case *av.AttributeValueMemberS:
		return fmt.Sprintf("%q", v.Value)
	case *av.AttributeValueMemberN:
		return v.Value
	case *av.AttributeValueMemberBOOL:
		return fmt.Sprint(v.Value)
	}
	return fmt.Sprintf("%T", v)
}

// strictCheck runs after the runs of the second of two calm days (no
// fault on either): every period due is billed, every attempt in flight
// before them resolved, every retryable ERROR record retried today,
// every ERROR record past the stale threshold STALE, every past-due
// PAUSED record advanced and every ACH debit past its deadline resolved.
func (s *Sim) strictCheck(ctx context.Context, day time.Time) {
	sched, retry, pause := day.Add(scheduledAt), day.Add(retryAt), day.Add(pauseAt)
	calm1 := day.AddDate(0, 0, -1)
	const stale = 30 * 24 * time.Hour
	var bad, trails []string
	for _, u := range s.users {
		s.res.Checks[invDue]++
		p := strictUser(u, s.records[u], sched, retry, pause, calm1, stale, s.dun != nil) // read after the last step that wrote u
		if len(p) > 0 && len(trails) < 60 {
			trails = append(trails, s.trail(ctx, u)...)
		}
		bad = append(bad, p...)
	}
	if len(bad) > 0 {
		bad = append(bad, trails...)
	}
	s.fail(invDue, bad)
}

// trail describes the history rows of u, oldest first: what happened to
// the user, for a failure report.
func (s *Sim) trail(ctx context.Context, u string) []string {
	rows, err := s.hist.ListByUser(ctx, u)
	if err != nil {
		return []string{"(history unreadable: " + err.Error() + ")"}
	}
	out := []string{fmt.Sprintf("history of %s (%d rows):", u, len(rows))}
	first := 0
	if len(rows) > 14 {
		first = len(rows) - 14
		out = append(out, fmt.Sprintf("  ... %d earlier rows", first))
	}
	for i := first; i < len(rows); i++ {
		r := &rows[i]
		line := fmt.Sprintf("  %s  %s %s", r.LastRunDate.Format("2006-01-02 15:04:05.000000"), r.Process, desc(r))
		if r.UpdatedEvent != "" {
			line += " event " + string(r.UpdatedEvent)
		}
		out = append(out, line)
	}
	return out
}

// withTrail appends trail to problems, if any.
func withTrail(problems, trail []string) []string {
	if len(problems) == 0 {
		return nil
	}
	return append(problems, trail...)
}

// strictUser returns what the strict checks find wrong with the records
// of u.
func strictUser(u string, recs []billing.Period, sched, retry, pause, calm1 time.Time, stale time.Duration, dunning bool) []string {
	var bad []string
	for i := range recs {
		r := &recs[i]
		if r.InFlight() && r.LastAttempt.Started.Before(calm1) {
			bad = append(bad, fmt.Sprintf("user %s: attempt in flight since %s not resolved after two calm days: %s", u, r.LastAttempt.Started.Format(time.DateTime), desc(r)))
			continue
		}
		if dunning && r.Status == billing.StatusScheduled {
			// Held while an earlier period is in dunning: not due.
			if held, _ := dunningStrict(u, recs, r, retry); held {
				continue
			}
		}
		switch r.Status {
		case billing.StatusScheduled:
			if r.DueAt(sched) && r.CreatedDate.Before(sched) {
				bad = append(bad, fmt.Sprintf("user %s: due before the scheduled run of %s, not collected: %s", u, sched.Format(time.DateTime), desc(r)))
			}
		case billing.StatusError:
			switch {
			case retry.Sub(r.BillingDate) > stale:
				bad = append(bad, fmt.Sprintf("user %s: ERROR record past the stale threshold at the retry run of %s, not STALE: %s", u, retry.Format(time.DateTime), desc(r)))
			case dunning && r.Dunning.Started():
				// The schedule decides (dunchecks.go).
				_, p := dunningStrict(u, recs, r, retry)
				bad = append(bad, p...)
			case !r.NoRetry && !r.InFlight() && (billing.DefaultRetryPolicy{}).ShouldRetry(r, retry):
				bad = append(bad, fmt.Sprintf("user %s: retryable ERROR record not retried by the retry run of %s (last run %s): %s", u, retry.Format(time.DateTime), r.LastRunDate.Format(time.DateTime), desc(r)))
			}
		case billing.StatusPaused:
			if r.DueAt(pause) {
				bad = append(bad, fmt.Sprintf("user %s: PAUSED record past due at the pause run of %s, not advanced: %s", u, pause.Format(time.DateTime), desc(r)))
			}
		case billing.StatusACHSent:
			// The retry run finds ACH debits by billing date: one made
			// before its billing date (a manual repayment of a record
			// moved later) is found from the billing date on.
			if from := latestOf(r.LastRunDate, r.BillingDate); retry.Sub(from) > billing.DefaultACHSettlementDeadline {
				bad = append(bad, fmt.Sprintf("user %s: ACH debit past its settlement deadline at the retry run of %s: %s", u, retry.Format(time.DateTime), desc(r)))
			}
		}
	}
	return bad
}

func latestOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// checkInvoices checks u's invoices against u's periods and charges, and
// adds their numbers to seqs (checkUsers checks each sequence is 1..N
// once it has read every user): a period paid
// through an attempt that names an invoice has exactly one paid invoice,
// and no period has two; a paid invoice's total is what a charge with its
// transaction took.
func (s *Sim) checkInvoices(ctx context.Context, u string, recs []billing.Period, charges []Charge, seqs map[string][]int64) []string {
	var invs []billing.Invoice
	for after := ""; ; {
		page, next, err := s.opts.Store.Invoices.ByUser(ctx, u, after, 100)
		if err != nil {
			return []string{fmt.Sprintf("user %s: invoices: %v", u, err)}
		}
		invs = append(invs, page...)
		if next == "" {
			break
		}
		after = next
	}
	var problems []string
	oneOff := map[string]bool{}
	for i := range recs {
		oneOff[recs[i].SubscriptionID] = recs[i].IsOneOff()
	}
	paid := map[string][]string{} // period ID -> paid invoice numbers
	for i := range invs {
		inv := &invs[i]
		if inv.Number != "" {
			seqs[inv.Prefix] = append(seqs[inv.Prefix], inv.Seq)
		}
		if inv.Status != billing.InvoicePaid {
			continue
		}
		for _, p := range inv.PeriodIDs {
			paid[p] = append(paid[p], inv.Number)
			if !oneOff[p] {
				continue
			}
			// A plan change's one-off charge bills its proration lines
			// alone: no plan, no discount of a plan.
			for _, l := range inv.Lines {
				if l.Kind != billing.LineProration && l.Kind != billing.LineUnusedTime && l.Kind != billing.LineTax {
					problems = append(problems, fmt.Sprintf("user %s: invoice %s of the one-off charge %s has a %s line %q of %d",
						u, inv.Number, p, l.Kind, l.Description, l.Amount))
				}
			}
		}
		// What was charged is the total less the customer's balance
		// applied (the credit lines).
		want := inv.Total
		for _, l := range inv.Lines {
			if l.Kind == billing.LineCredit {
				want -= l.Amount
			}
		}
		if inv.TransactionID == "covered:"+strings.Join(inv.PeriodIDs, ",") {
			// Paid without a charge: the period's credits or the
			// customer's balance covered it all.
			if want != 0 {
				problems = append(problems, fmt.Sprintf("user %s: invoice %s paid as covered, yet %d of it was due", u, inv.Number, want))
			}
			continue
		}
		took := false
		for _, c := range charges {
			if c.Result.TransactionID == inv.TransactionID && int64(c.Amount) == want {
				took = true
				break
			}
		}
		if !took {
			problems = append(problems, fmt.Sprintf("user %s: invoice %s paid by %s for %d (total %d): no charge of that amount with that transaction",
				u, inv.Number, inv.TransactionID, want, inv.Total))
		}
	}
	for i := range recs {
		r := &recs[i]
		n := len(paid[r.SubscriptionID])
		switch {
		case n > 1:
			problems = append(problems, fmt.Sprintf("user %s: period %s has %d paid invoices %v", u, desc(r), n, paid[r.SubscriptionID]))
		case n == 0 && (r.Status == billing.StatusCompleted || r.Status == billing.StatusRefunded) && r.LastAttempt.Invoice != "" && r.TransactionID != "":
			problems = append(problems, fmt.Sprintf("user %s: period %s paid, its invoice %s not", u, desc(r), r.LastAttempt.InvoiceNumber))
		}
	}
	return problems
}
