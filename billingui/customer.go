package billingui

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billinghttp"
)

// op is an action of the customer page.
type op struct {
	Name   string // the form's value
	Label  string
	Action string // the billinghttp action the Authorizer is asked
	// Operator is the billinghttp.Action's Operator: what an end user may
	// not do to their own records.
	Operator bool
	// Does says what it does, on the confirmation page.
	Does string
	// keyed: the action is made by a call that takes the user and a
	// request key (see Handler.perform); one: that call acts on the
	// period alone (retry, waive), not on every period of the user.
	keyed, one bool
	// on reports whether the action applies to a period in this state.
	on func(s *billing.Period, now time.Time) bool
}

var ops = []op{
	{Name: "retry", Label: "Retry now", Action: billinghttp.ActionPay, keyed: true, one: true,
		Does: "charges the period now, with the collector's idempotency key, whatever the retry policy says",
		on: func(s *billing.Period, now time.Time) bool {
			return s.Status == billing.StatusError || (s.Status == billing.StatusScheduled && !s.BillingDate.After(now))
		}},
	{Name: "waive", Label: "Waive", Action: billinghttp.ActionWaive, Operator: true, keyed: true, one: true,
		Does: "forgives the period without payment (WAIVED); the subscription goes on",
		on: func(s *billing.Period, _ time.Time) bool {
			return s.Status == billing.StatusError || s.Status == billing.StatusScheduled
		}},
	{Name: "cancel", Label: "Cancel", Action: billinghttp.ActionCancel, keyed: true,
		Does: "cancels the subscription: every open period of the user becomes CANCELLED and no next period is opened; an owed period is forgiven only by a role that may, and refuses the cancel otherwise",
		on:   func(s *billing.Period, _ time.Time) bool { return movable(s.Status) }},
	{Name: "pause", Label: "Pause", Action: billinghttp.ActionPause, keyed: true,
		Does: "pauses every open period of the user for the months given: their billing dates are skipped, not charged; an owed period refuses the pause",
		on: func(s *billing.Period, _ time.Time) bool {
			return s.Status == billing.StatusScheduled || s.Status == billing.StatusPaused
		}},
	{Name: "resume", Label: "Resume", Action: billinghttp.ActionResume, keyed: true,
		Does: "ends the pause of every paused period of the user: each is SCHEDULED again on its billing date",
		on:   func(s *billing.Period, _ time.Time) bool { return s.Status == billing.StatusPaused }},
	{Name: "move", Label: "Move date", Action: billinghttp.ActionChangeBillingDate, Operator: true, keyed: true,
		Does: "moves the period to another billing date; its day becomes the subscription's billing day",
		on:   func(s *billing.Period, _ time.Time) bool { return movable(s.Status) }},
}

func movable(st billing.Status) bool {
	return st == billing.StatusScheduled || st == billing.StatusError || st == billing.StatusPaused
}

func findOp(name string) (op, bool) {
	for _, o := range ops {
		if o.Name == name {
			return o, true
		}
	}
	return op{}, false
}

func (o op) action(userID, periodID string) billinghttp.Action {
	return billinghttp.Action{Name: o.Action, UserID: userID, SubscriptionID: periodID, Write: true, Operator: o.Operator}
}

// validID is billinghttp's rule for IDs: 1 to 1024 bytes of UTF-8 without
// control characters.
func validID(s string) bool {
	if s == "" || len(s) > 1024 || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

type periodRow struct {
	billing.Period
	InFlight bool
	// OneOff is set on a plan change's one-off charge, and Charge is
	// what the row charges: the period's plan, or the one-off's lines.
	OneOff bool
	Charge billing.Amount
	Ops    []opButton
	// Dunning is what the row shows of the period's dunning, nil when
	// nothing (see dunningOf).
	Dunning *dunningView
}

// opButton is an action's button on a period's row, with the request key
// its confirmation page puts in its form. The key is in the confirmation
// page's address so that the page, opened again (the back button after
// the action), asks for the same request: sent again, it is answered as
// done instead of refused by what the first made of the records.
type opButton struct {
	op
	Key string
}

type timelineRow struct {
	billing.Period
	Prev billing.Status
	// DunningEnded is how the period's dunning ended when this row is the
	// change that ended it ("" otherwise).
	DunningEnded billing.DunningEnd
}

type customerData struct {
	UserID   string
	View     billing.Subscription
	Periods  []periodRow
	Timeline []timelineRow
	Page     int
	HasNext  bool
	// Owed is what the user owes (see owed); Resumes the date a paused
	// user is charged again (see resumeDate), zero when not paused.
	Owed    billing.Amount
	Resumes time.Time
	// Balance is the customer's credit balance (the latest open period's),
	// and Next the next charge's parts, nil when it is the plan alone
	// (see nextChargeOf).
	Balance billing.Amount
	Next    *nextCharge
	// Invoices is the page of the user's invoices, nil when the console
	// has no invoice store or the viewer may not read them.
	Invoices *invoiceSection
	// Banner is what the action before this page did, from the signed
	// flash of its redirect (see flash.go); HasBanner is false without one.
	Banner    banner
	HasBanner bool
}

func (h *Handler) customer(w http.ResponseWriter, r *http.Request) {
	h.showCustomer(w, r, r.URL.Query().Get("user"), http.StatusOK, "")
}

// showCustomer renders a user's page, with msg as a refusal when status is
// not 200.
func (h *Handler) showCustomer(w http.ResponseWriter, r *http.Request, userID string, status int, msg string) {
	if !validID(userID) {
		h.fail(w, r, http.StatusBadRequest, "a user ID is 1 to 1024 bytes of UTF-8 without control characters")
		return
	}
	pageNo, err := intParam(r.URL.Query(), "page", 0, maxPageNumber, 0)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, "the history's "+err.Error())
		return
	}
	invoicesAfter, err := invoiceCursor(r)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	if !h.authorize(w, r, billinghttp.Action{Name: billinghttp.ActionGetSubscription, UserID: userID}) ||
		!h.authorize(w, r, billinghttp.Action{Name: billinghttp.ActionHistory, UserID: userID}) {
		return
	}
	ctx := r.Context()
	now := h.now()
	view, err := h.cfg.Collector.Subscription(ctx, userID)
	if errors.Is(err, billing.ErrNotFound) {
		h.fail(w, r, http.StatusNotFound, "no records for user "+plainID(userID))
		return
	}
	if err != nil {
		h.internal(w, r, "reading the subscription", err)
		return
	}
	recent, err := h.cfg.Repository.Recent(ctx, userID, DefaultRecentPeriod)
	if err != nil {
		h.internal(w, r, "reading the periods", err)
		return
	}
	d := customerData{UserID: userID, View: view, Owed: owed(&view), Resumes: resumeDate(&view)}
	d.Next, d.Balance = nextChargeOf(&view, h.currency)
	for _, s := range recent {
		row := periodRow{Period: s, InFlight: s.InFlight(), OneOff: s.IsOneOff(), Charge: s.Amount, Dunning: h.dunningOf(&s, now)}
		if row.OneOff {
			row.Charge, _, _ = s.Due()
		}
		for _, o := range ops {
			// Nothing may change a period whose attempt is in flight
			// before its outcome is known: no action is offered.
			if !row.InFlight && o.on(&s, now) && h.allowed(r, o.action(userID, s.SubscriptionID)) {
				row.Ops = append(row.Ops, opButton{op: o, Key: newRequestKey()})
			}
		}
		d.Periods = append(d.Periods, row)
	}
	d.Invoices, err = h.invoiceSection(r, userID, invoicesAfter)
	if errors.Is(err, errInvoiceCursor) {
		h.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	if err != nil {
		h.internal(w, r, "reading the invoices", err)
		return
	}
	rows, err := h.cfg.History.ListByUser(ctx, userID)
	if err != nil {
		h.internal(w, r, "reading the history", err)
		return
	}
	// The timeline, newest first, a page at a time; each row says the status
	// its period had before it, and whether it ended the period's dunning.
	last := map[string]billing.Status{}
	ended := map[string]bool{}
	tl := make([]timelineRow, len(rows))
	for i, s := range rows {
		tl[i] = timelineRow{Period: s, Prev: last[s.SubscriptionID]}
		done := !s.Dunning.Ended.IsZero()
		if done && !ended[s.SubscriptionID] {
			tl[i].DunningEnded = s.Dunning.End
		}
		last[s.SubscriptionID] = s.Status
		ended[s.SubscriptionID] = done
	}
	slices.Reverse(tl)
	d.Page = pageNo
	if pages := (len(tl) + DefaultHistoryPage - 1) / DefaultHistoryPage; d.Page > 0 && d.Page >= pages {
		h.fail(w, r, http.StatusNotFound, fmt.Sprintf("the history of this user has %d page(s): page %d is past its end", pages, d.Page))
		return
	}
	from := min(d.Page*DefaultHistoryPage, len(tl))
	to := min(from+DefaultHistoryPage, len(tl))
	d.Timeline, d.HasNext = tl[from:to], to < len(tl)
	if status == http.StatusOK {
		d.Banner, d.HasBanner = h.bannerOf(r, userID)
	}
	h.render(w, r, status, "customer", page{Title: "Customer " + plainID(userID), Nav: "customer", Error: msg, Data: d})
}

// outcomes a retry reports on the page after it.
var outcomes = []string{string(billing.RetryCollected), string(billing.RetryDeclined), string(billing.RetryPending),
	string(billing.RetryRateLimited), string(billing.RetryStale), string(billing.RetryNotCharged)}

type confirmData struct {
	Op      op
	UserID  string
	Period  billing.Period
	CSRF    string
	Key     string
	Date    string
	Default int
	// Keyed reports that the action is made by the request key Key (a
	// call that takes the user), and Acts the periods it acts on now.
	Keyed bool
	Acts  []billing.Period
	// One reports that the call acts on the period alone (retry, waive).
	One bool
	// MaxReason bounds the reason typed.
	MaxReason int
}

// confirm shows what an action will do and asks for it with a POST form
// carrying the request key of the page's address (see opButton), or a
// fresh one.
func (h *Handler) confirm(w http.ResponseWriter, r *http.Request) {
	t, ok := h.target(w, r, r.URL.Query())
	if !ok {
		return
	}
	s, err := h.period(r, t.userID, t.periodID)
	if err != nil {
		h.fail(w, r, http.StatusNotFound, err.Error())
		return
	}
	d := confirmData{
		Op: t.op, UserID: t.userID, Period: s, CSRF: h.csrfToken(w, r), Key: requestKeyOf(r.URL.Query()),
		Date: s.BillingDate.UTC().Format("2006-01-02"), Default: 1, MaxReason: maxReason,
	}
	if t.op.keyed {
		recs, err := h.cfg.Repository.ListByUser(r.Context(), t.userID)
		if err != nil {
			h.internal(w, r, "reading the periods", err)
			return
		}
		d.Keyed = t.op.Name != "move" || keyedMove(&s, recs)
		d.One = t.op.one
		if d.Keyed {
			d.Acts = actsOn(t.op.Name, &s, recs)
		}
	}
	h.render(w, r, http.StatusOK, "confirm", page{Title: t.op.Label, Nav: "customer", Data: d})
}

// target is what a confirmation page or an action names: the action, the
// user and the period.
type target struct {
	op               op
	userID, periodID string
}

// target reads the op, user and period fields of v (a confirmation page's
// query, an action's form) and asks the Authorizer for the action; when ok
// is false it has answered the request.
func (h *Handler) target(w http.ResponseWriter, r *http.Request, v url.Values) (t target, ok bool) {
	t.userID, t.periodID = v.Get("user"), v.Get("period")
	t.op, ok = findOp(v.Get("op"))
	if !ok || !validID(t.userID) || !validID(t.periodID) {
		h.fail(w, r, http.StatusBadRequest, "unknown action, user or period")
		return target{}, false
	}
	if !h.authorize(w, r, t.op.action(t.userID, t.periodID)) {
		return target{}, false
	}
	return t, true
}

// newRequestKey returns a fresh request key for a confirmation form: 128
// random bits, so that a key names the one form it was rendered into.
func newRequestKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand panics rather)
	return "console-" + base64.RawURLEncoding.EncodeToString(b)
}

// requestKeyOf returns the request key of a confirmation page's address,
// or a fresh one when it has none (or one that is no valid key).
func requestKeyOf(q url.Values) string {
	if k := q.Get("key"); len(k) <= maxKey && validID(k) {
		return k
	}
	return newRequestKey()
}

// maxKey bounds a request key, as the collector does.
const maxKey = 256

// keyedMove reports whether a move of s is made by
// [billing.Collector.MoveBillingDate], which moves the user's latest open
// period among recs (the user's records) once it has resolved every
// attempt in flight, which may open another: only when s is that period
// and no attempt is in flight is it sure to move s. Another period (an
// owed one before it) is moved by the period call, without a key.
func keyedMove(s *billing.Period, recs []billing.Period) bool {
	var latest string
	for _, r := range recs {
		if r.InFlight() {
			return false
		}
		if !r.Status.IsTerminal() {
			latest = r.SubscriptionID
		}
	}
	return latest == s.SubscriptionID && !s.InFlight()
}

// actsOn returns the periods among the user's records recs that the call
// of op (a keyed one) changes as they stand: every open period for cancel
// and pause, every paused one for resume, s for move.
func actsOn(name string, s *billing.Period, recs []billing.Period) []billing.Period {
	if name == "move" || name == "retry" || name == "waive" {
		return []billing.Period{*s}
	}
	var out []billing.Period
	for _, r := range recs {
		if (name == "resume" && r.Status == billing.StatusPaused) || (name != "resume" && !r.Status.IsTerminal()) {
			out = append(out, r)
		}
	}
	return out
}

var errNoSuchPeriod = errors.New("no such period of this user")

// period reads a period and checks that it belongs to userID: a period of
// another user is not found, exactly like an unknown ID.
func (h *Handler) period(r *http.Request, userID, periodID string) (billing.Period, error) {
	s, err := h.cfg.Repository.GetByID(r.Context(), periodID)
	if err != nil || s.UserID != userID {
		if err != nil && !errors.Is(err, billing.ErrNotFound) {
			h.log.ErrorContext(r.Context(), "billingui: reading a period", "error", err)
		}
		return billing.Period{}, errNoSuchPeriod
	}
	return s, nil
}

// maxForm bounds an action's form body.
const maxForm = 16 << 10

// action performs a confirmed action: CSRF token, the Authorizer, the
// period's owner, then the collector.
func (h *Handler) action(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		h.fail(w, r, http.StatusBadRequest, "the form could not be read")
		return
	}
	if !h.checkCSRF(r) {
		h.fail(w, r, http.StatusForbidden, "the form's token is missing or wrong: reload the page and try again")
		return
	}
	t, ok := h.target(w, r, r.PostForm)
	if !ok {
		return
	}
	s, err := h.period(r, t.userID, t.periodID)
	if err != nil {
		h.showCustomer(w, r, t.userID, http.StatusNotFound, err.Error())
		return
	}
	res, err := h.perform(r, t.op, &s)
	if err != nil {
		status, msg := classify(err)
		// The engine's own text (a chain of wrapped errors) is for the
		// log; the page says what it means.
		level := slog.LevelInfo
		if status == http.StatusInternalServerError {
			level = slog.LevelError
		}
		h.log.Log(r.Context(), level, "billingui: action refused", "op", t.op.Name, "user_id", t.userID, "subscription_id", t.periodID, "status", status, "error", err)
		h.showCustomer(w, r, t.userID, status, t.op.Label+" refused: "+msg)
		return
	}
	f := flash{Op: t.op.Name, Outcome: res.outcome, Changed: res.changed, Repeated: res.repeated,
		User: t.userID, Expires: h.now().Add(flashTTL)}
	redirect(w, "customer?user="+queryEscape(t.userID)+"&flash="+h.sealFlash(f))
}

// errForgive refuses a cancel that would forgive a debt to a role that may
// not forgive one.
var errForgive = errors.New("your role may not cancel a period that is owed or whose payment is pending")

// errNoKey refuses a form of an action made by request key without one (a
// page rendered before the console sent keys).
var errNoKey = &formError{"the form carries no request key: open the confirmation page again"}

// result is what an action did, for the page after it.
type result struct {
	// outcome is a retry's (one of outcomes).
	outcome string
	// changed is the number of periods a keyed action changed, and
	// repeated reports that its request key had been answered before:
	// the form was sent again and nothing more was changed.
	changed  int
	repeated bool
}

// perform calls the collector for o on s. Cancel, pause, resume and a move
// of the latest open period go through the calls that take the user, with
// the form's request key: a form sent again answers what the first did.
// Retry and waive have no such call and use the period's.
func (h *Handler) perform(r *http.Request, o op, s *billing.Period) (result, error) {
	ctx := r.Context()
	c := h.cfg.Collector
	id := s.SubscriptionID
	ur := billing.UserRequest{UserID: s.UserID, RequestKey: r.PostFormValue("key"),
		Operator: h.operator(r), Reason: strings.TrimSpace(r.PostFormValue("reason"))}
	if o.keyed && ur.RequestKey == "" {
		return result{}, errNoKey
	}
	if err := checkReason(ur.Reason); err != nil {
		return result{}, err
	}
	if o.keyed && !o.one && o.Name != "move" {
		if err := h.authorizeEach(r, o, s); err != nil {
			return result{}, err
		}
	}
	var (
		uc  billing.UserChange
		err error
	)
	switch o.Name {
	case "retry":
		res, err := c.Periods().Retry(ctx, billing.PeriodRequest{UserRequest: ur, PeriodID: id})
		if err != nil {
			return result{}, err
		}
		return result{outcome: string(res.Outcome), repeated: res.Repeated}, nil
	case "waive":
		uc, err = c.Periods().Waive(ctx, billing.PeriodRequest{UserRequest: ur, PeriodID: id})
	case "cancel":
		// Whether the role may forgive is the request's parameter, the
		// same each time the form is sent.
		a := billinghttp.Action{Name: billinghttp.ActionCancelOwed, UserID: s.UserID, SubscriptionID: id, Write: true, Operator: true}
		forgive := h.allowed(r, a)
		uc, err = c.Cancel(ctx, billing.CancelRequest{UserRequest: ur, ForgiveOwed: forgive})
		if err != nil && !forgive && h.owes(r, s.UserID, err) {
			return result{}, errForgive
		}
	case "pause":
		months, perr := strconv.Atoi(r.PostFormValue("months"))
		if perr != nil {
			return result{}, &formError{"months must be a whole number"}
		}
		uc, err = c.Pause(ctx, billing.PauseRequest{UserRequest: ur, Months: months})
	case "resume":
		uc, err = c.Resume(ctx, billing.ResumeRequest{UserRequest: ur})
	case "move":
		day, perr := time.Parse("2006-01-02", r.PostFormValue("date"))
		if perr != nil {
			return result{}, &formError{"the date must be YYYY-MM-DD"}
		}
		// The period keeps its time of day.
		b := s.BillingDate.UTC()
		date := time.Date(day.Year(), day.Month(), day.Day(), b.Hour(), b.Minute(), b.Second(), 0, time.UTC)
		recs, rerr := h.cfg.Repository.ListByUser(ctx, s.UserID)
		if rerr != nil {
			return result{}, rerr
		}
		if !keyedMove(s, recs) {
			_, err = c.Periods().Move(ctx, id, date)
			return result{}, err
		}
		uc, err = c.MoveBillingDate(ctx, billing.MoveBillingDateRequest{UserRequest: ur, Date: date})
	}
	if err != nil {
		return result{}, err
	}
	return result{changed: len(uc.Changes), repeated: uc.Repeated}, nil
}

// errPeriodForbidden refuses a keyed action whose call would change a
// period of the user the Authorizer does not allow the action on.
var errPeriodForbidden = errors.New("your role may not do this to every period it changes")

// authorizeEach puts o to the Authorizer for each period of s's user that
// o's call changes as they stand (it acts on the user's periods, not on s
// alone; s itself was asked already).
func (h *Handler) authorizeEach(r *http.Request, o op, s *billing.Period) error {
	recs, err := h.cfg.Repository.ListByUser(r.Context(), s.UserID)
	if err != nil {
		return fmt.Errorf("list the periods of user %s: %w", s.UserID, err)
	}
	for _, p := range actsOn(o.Name, s, recs) {
		if p.SubscriptionID != s.SubscriptionID && !h.allowed(r, o.action(s.UserID, p.SubscriptionID)) {
			return fmt.Errorf("%w (%s of period %s)", errPeriodForbidden, o.Action, p.SubscriptionID)
		}
	}
	return nil
}

// owes reports whether err, a cancel's refusal, is for a period the user
// owes: the cancel would forgive it.
func (h *Handler) owes(r *http.Request, userID string, err error) bool {
	if errors.Is(err, billing.ErrOwed) {
		return true
	}
	if !errors.Is(err, billing.ErrNotCollectible) {
		return false
	}
	recs, rerr := h.cfg.Repository.ListByUser(r.Context(), userID)
	if rerr != nil {
		return false
	}
	for _, s := range recs {
		if s.Status == billing.StatusError {
			return true
		}
	}
	return false
}

type formError struct{ msg string }

func (e *formError) Error() string { return e.msg }

// classify maps an action's error to its status and a sentence an
// operator understands (see refusal); the engine's own text, a chain of
// wrapped errors, goes to the host's log, not to the page.
func classify(err error) (int, string) {
	var fe *formError
	if errors.As(err, &fe) || errors.Is(err, errForgive) || errors.Is(err, errPeriodForbidden) {
		status := http.StatusUnprocessableEntity
		if !errors.As(err, &fe) {
			status = http.StatusForbidden
		}
		return status, err.Error()
	}
	for _, m := range refusals {
		if m.match(err) {
			return m.status, m.say(err)
		}
	}
	var fieldErr *billing.FieldError
	if errors.As(err, &fieldErr) {
		return http.StatusUnprocessableEntity, "the engine refused the value of " + fieldErr.Field + ": check it and try again"
	}
	return http.StatusInternalServerError, "the action failed; the error is in the host's log"
}
