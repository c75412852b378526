package billingui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/dynabill/billing"
)

// scanned is what a bounded walk over status-index pages found.
type scanned struct {
	Items   []billing.Period
	Invalid []string
	Next    string // the index's cursor where the walk stopped; "" when done
	Read    int
}

// scan reads at most Config.MaxPages pages of q, keeping the records keep
// accepts (all when nil).
func (h *Handler) scan(ctx context.Context, q billing.StatusQuery, keep func(*billing.Period) bool) (scanned, error) {
	var out scanned
	q.Limit = h.cfg.PageSize
	for range h.cfg.MaxPages {
		p, err := h.cfg.Repository.QueryStatus(ctx, q)
		if err != nil {
			return out, err
		}
		out.Read += p.Scanned
		for i := range p.Items {
			if keep == nil || keep(&p.Items[i]) {
				out.Items = append(out.Items, p.Items[i])
			}
		}
		for _, e := range p.Invalid {
			out.Invalid = append(out.Invalid, e.Error())
		}
		out.Next = p.Next
		if p.Next == "" {
			break
		}
		q.Cursor = p.Next
	}
	return out, nil
}

// noReason shows a decline recorded with no reason.
const noReason = "(no reason recorded)"

// reasonCount is a decline reason and its records.
type reasonCount struct {
	Reason string
	Count  int
}

func byReason(recs []billing.Period) []reasonCount {
	m := map[string]int{}
	for _, s := range recs {
		reason := s.PaymentError
		if reason == "" {
			reason = noReason
		}
		m[reason]++
	}
	out := make([]reasonCount, 0, len(m))
	for k, v := range m {
		out = append(out, reasonCount{k, v})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Reason < out[j].Reason
	})
	return out
}

type todayData struct {
	Runs      []runSummary
	HasRunLog bool
	// Exact says the figures come from the store's day totals
	// (billing.TotalsRepository): whole at any scale. Otherwise they are
	// sums over the records one view reads, marked partial when the read
	// stopped at its bound.
	Exact bool
	// Today is today's totals, when Exact.
	Today billing.DayTotal
	// Declines are today's declines by reason: from the totals, or from
	// the ERROR records read (DeclinesRead of them; DeclinesMore when the
	// read stopped at its bound).
	Declines     []reasonCount
	DeclinesMore bool
	DeclinesRead int
	Chart        chart
}

func (h *Handler) today(w http.ResponseWriter, r *http.Request) {
	if !h.authorize(w, r, overview()) {
		return
	}
	ctx := r.Context()
	now := h.now()
	d := todayData{Runs: h.cfg.Runs.latest(), HasRunLog: h.cfg.Runs != nil}
	days, reasons, err := h.totals(ctx, now)
	switch {
	case err == nil:
		d.Exact, d.Today = true, days[len(days)-1]
		for _, rc := range reasons {
			reason := rc.Reason
			if reason == "" {
				reason = noReason
			}
			d.Declines = append(d.Declines, reasonCount{Reason: reason, Count: int(rc.Count)})
		}
		amounts := make([]billing.Amount, len(days))
		for i := range days {
			amounts[i] = days[i].Collected.Amount
		}
		d.Chart = newChart(days[0].Day, amounts, false)
	case errors.Is(err, billing.ErrNoTotals):
		if err := h.todayFromRecords(ctx, now, &d); err != nil {
			h.internal(w, r, "reading revenue", err)
			return
		}
	default:
		h.internal(w, r, "reading the day totals", err)
		return
	}
	h.render(w, r, http.StatusOK, "today", page{Title: "Today", Nav: "today", Data: d})
}

// totals reads the day totals of the last 30 days, today last, and the
// reasons of today's declines, when the repository keeps them;
// billing.ErrNoTotals when it does not.
func (h *Handler) totals(ctx context.Context, now time.Time) ([]billing.DayTotal, []billing.ReasonCount, error) {
	tr, ok := h.cfg.Repository.(billing.TotalsRepository)
	if !ok {
		return nil, nil, billing.ErrNoTotals
	}
	day := now.UTC().Truncate(24 * time.Hour)
	days, err := tr.Totals(ctx, day.AddDate(0, 0, -29), day.AddDate(0, 0, 1))
	if err != nil {
		return nil, nil, err
	}
	if len(days) != 30 {
		return nil, nil, fmt.Errorf("billingui: %d days of totals for 30", len(days))
	}
	var reasons []billing.ReasonCount
	if days[29].Declined.Count > 0 {
		reasons, err = tr.DeclineReasons(ctx, day)
	}
	return days, reasons, err
}

// todayFromRecords fills d from the records a view reads, for a
// repository that keeps no day totals: the figures are partial when the
// reads stop at their bounds, and the page says so.
func (h *Handler) todayFromRecords(ctx context.Context, now time.Time, d *todayData) error {
	day := now.UTC().Truncate(24 * time.Hour)
	// Declines written today: ERROR records whose latest write is today.
	// Their billing dates are within the stale threshold, so a window of 60
	// days back holds them.
	errs, err := h.scan(ctx, billing.StatusQuery{Status: billing.StatusError, Since: day.AddDate(0, 0, -60)},
		func(s *billing.Period) bool { return !s.LastRunDate.Before(day) })
	if err != nil {
		return err
	}
	d.Declines, d.DeclinesMore, d.DeclinesRead = byReason(errs.Items), errs.Next != "", errs.Read
	d.Chart, err = h.revenue(ctx, now)
	return err
}

// revenue sums the amounts of the periods completed on each of the last 30
// days (by completion date), from COMPLETED records billed in the last 60,
// for a repository that keeps no day totals. The chart is Partial when the
// read stopped at its bound, with Read the records read.
func (h *Handler) revenue(ctx context.Context, now time.Time) (chart, error) {
	first := now.UTC().Truncate(24*time.Hour).AddDate(0, 0, -29)
	q := billing.StatusQuery{Status: billing.StatusCompleted, Since: first.AddDate(0, 0, -31), Before: paidBefore(now)}
	q.Limit = h.cfg.PageSize
	days := make([]billing.Amount, 30)
	partial, read := false, 0
	// The chart reads more pages than a list: a month of a large fleet
	// still ends, at 8 times MaxPages pages, with the chart marked partial.
	for i := 0; ; i++ {
		if i == 8*h.cfg.MaxPages {
			partial = true
			break
		}
		p, err := h.cfg.Repository.QueryStatus(ctx, q)
		if err != nil {
			return chart{}, err
		}
		read += p.Scanned
		for _, s := range p.Items {
			at := s.CompletionDate
			if at.IsZero() {
				at = s.LastRunDate
			}
			d := int(at.UTC().Sub(first) / (24 * time.Hour))
			if at.Before(first) || d >= 30 {
				continue
			}
			days[d] += s.Amount
		}
		if p.Next == "" {
			break
		}
		q.Cursor = p.Next
	}
	c := newChart(first, days, partial)
	c.Read = read
	return c, nil
}

type attentionData struct {
	Section  string
	InFlight scanned
	// InFlightErrorsMore says the first view's read of ERROR records for
	// attempts in flight stopped at its bound.
	InFlightErrorsMore bool
	Overdue            scanned
	Stale              scanned
	Errors             scanned
	Reasons            []reasonCount
	Invalid            []string
	// Dunning lists the owed periods whose dunning ends within three
	// days (see dunningSection); not On when the collector has no
	// dunning policy.
	Dunning dunningSection
}

// sections of the Attention page, each continued on its own.
const (
	secInFlight = "inflight"
	secOverdue  = "ach"
	secErrors   = "errors"
	secStale    = "stale"
	secDunning  = "dunning"
)

// staleWindow is how far back (by billing date) Attention lists periods
// given up on (STALE).
const staleWindow = 180 * 24 * time.Hour

func (h *Handler) attention(w http.ResponseWriter, r *http.Request) {
	if !h.authorize(w, r, overview()) {
		return
	}
	ctx := r.Context()
	now := h.now()
	section, cursor := r.URL.Query().Get("section"), r.URL.Query().Get("cursor")
	var d attentionData
	d.Section = section
	want := func(s string) bool { return section == "" || section == s }
	cur := func(s string) string {
		if section == s {
			return cursor
		}
		return ""
	}
	timeout := h.cfg.RequestTimeout
	stuck := func(s *billing.Period) bool {
		return s.InFlight() && now.Sub(s.LastAttempt.LastPresented()) > timeout
	}
	var invalid []string
	var err error
	if want(secInFlight) {
		// Attempts are made on due SCHEDULED and on ERROR records; a stuck
		// one stays in its status.
		d.InFlight, err = h.scan(ctx, billing.StatusQuery{Status: billing.StatusScheduled, Before: now.Add(time.Second), Cursor: cur(secInFlight)}, stuck)
		if err == nil && cur(secInFlight) == "" {
			// ERROR records on the first view; a continuation reads on in
			// the SCHEDULED ones.
			var more scanned
			more, err = h.scan(ctx, billing.StatusQuery{Status: billing.StatusError}, stuck)
			d.InFlight.Items = append(d.InFlight.Items, more.Items...)
			d.InFlight.Invalid = append(d.InFlight.Invalid, more.Invalid...)
			d.InFlight.Read += more.Read
			// The section's link reads on in the SCHEDULED records; the
			// ERROR ones left are in the declined list's.
			d.InFlightErrorsMore = more.Next != ""
		}
		invalid = append(invalid, d.InFlight.Invalid...)
	}
	if err == nil && want(secOverdue) {
		deadline := h.cfg.ACHSettlementDeadline
		d.Overdue, err = h.scan(ctx, billing.StatusQuery{Status: billing.StatusACHSent, Cursor: cur(secOverdue)},
			func(s *billing.Period) bool {
				sent := s.LastRunDate
				if !s.InitialRunDate.IsZero() && s.InitialRunDate.After(sent) {
					sent = s.InitialRunDate
				}
				return now.Sub(sent) > deadline
			})
		invalid = append(invalid, d.Overdue.Invalid...)
	}
	if err == nil && want(secErrors) {
		d.Errors, err = h.scan(ctx, billing.StatusQuery{Status: billing.StatusError, Cursor: cur(secErrors)}, nil)
		d.Reasons = byReason(d.Errors.Items)
		sort.SliceStable(d.Errors.Items, func(i, j int) bool {
			return d.Errors.Items[i].PaymentError < d.Errors.Items[j].PaymentError
		})
		invalid = append(invalid, d.Errors.Invalid...)
	}
	if err == nil && h.dunning && want(secDunning) {
		if section == "" {
			// The first view: the declined list's ERROR records, read once.
			d.Dunning = dunningSection{On: true, Rows: h.endingSoon(d.Errors.Items, now), Read: d.Errors.Read, Next: d.Errors.Next}
		} else {
			var inv []string
			d.Dunning, inv, err = h.dunningScan(ctx, cursor, now)
			invalid = append(invalid, inv...)
		}
	}
	if err == nil && want(secStale) {
		// Given up on: an ACH debit with no settlement by its deadline
		// (its late settlement still completes it), or a period too old
		// to collect. Nothing in the engine changes them any more: an
		// operator reads why, and settles with the customer elsewhere.
		d.Stale, err = h.scan(ctx, billing.StatusQuery{Status: billing.StatusStale, Since: now.Add(-staleWindow), Cursor: cur(secStale)}, nil)
		invalid = append(invalid, d.Stale.Invalid...)
	}
	if err != nil {
		if errors.Is(err, billing.ErrInvalidCursor) || errors.Is(err, billing.ErrInvalidQuery) {
			h.fail(w, r, http.StatusBadRequest, "that link's cursor is not valid any more: start from the top")
			return
		}
		h.internal(w, r, "reading the status index", err)
		return
	}
	d.Invalid = dedupe(invalid)
	h.render(w, r, http.StatusOK, "attention", page{Title: "Attention", Nav: "attention", Data: d})
}

func dedupe(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

type searchData struct {
	Query   string
	Matches []billing.Period
	Users   []string
	Looked  bool
	Partial bool
}

func (h *Handler) search(w http.ResponseWriter, r *http.Request) {
	if !h.authorize(w, r, overview()) {
		return
	}
	ctx := r.Context()
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	d := searchData{Query: q}
	if q == "" || len(q) > 1024 {
		h.render(w, r, http.StatusOK, "search", page{Title: "Search", Nav: "search", Data: d})
		return
	}
	d.Looked = true
	// A user ID: the user's latest period.
	if recs, err := h.cfg.Repository.Recent(ctx, q, 1); err == nil && len(recs) > 0 {
		d.Users = append(d.Users, q)
	} else if err != nil {
		h.log.WarnContext(ctx, "billingui: search by user", "error", err)
	}
	// A period ID.
	if s, err := h.cfg.Repository.GetByID(ctx, q); err == nil {
		d.Matches = append(d.Matches, s)
	} else if !errors.Is(err, billing.ErrNotFound) {
		h.log.WarnContext(ctx, "billingui: search by period", "error", err)
	}
	// A transaction ID: no index holds them, so the records of the last 60
	// days in the statuses that carry one are read, a bounded number of
	// pages each.
	if len(d.Users) == 0 && len(d.Matches) == 0 {
		since := h.now().AddDate(0, 0, -60)
		for _, st := range []billing.Status{billing.StatusError, billing.StatusACHSent, billing.StatusCompleted, billing.StatusStale} {
			found, err := h.scan(ctx, billing.StatusQuery{Status: st, Since: since, Before: paidBefore(h.now())},
				func(s *billing.Period) bool { return s.TransactionID == q })
			if err != nil {
				h.internal(w, r, "searching", err)
				return
			}
			d.Matches = append(d.Matches, found.Items...)
			d.Partial = d.Partial || found.Next != ""
		}
	}
	// A user ID goes to the customer; periods and transactions are listed,
	// each linked to its customer.
	if len(d.Users) == 1 && len(d.Matches) == 0 {
		redirect(w, "customer?user="+queryEscape(q))
		return
	}
	h.render(w, r, http.StatusOK, "search", page{Title: "Search", Nav: "search", Data: d})
}

// redirect answers 303 to a URL relative to the console's own pages, which
// the browser resolves against the request's (prefixed) URL.
func redirect(w http.ResponseWriter, rel string) {
	w.Header().Set("Location", rel)
	w.WriteHeader(http.StatusSeeOther)
}

// paidBefore bounds the queries for paid and settled records: on the single
// table a status query walks the subscriptions' next payment dates, and a
// monthly subscription paid in the last 30 days has its next one within
// the month ahead. (A yearly one's is a year ahead: the chart and the
// transaction search miss those on the single table.)
func paidBefore(now time.Time) time.Time { return now.AddDate(0, 0, 32) }
