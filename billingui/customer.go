package billingui

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
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
	// on reports whether the action applies to a period in this state.
	on func(s *billing.Subscription, now time.Time) bool
}

var ops = []op{
	{Name: "retry", Label: "Retry now", Action: billinghttp.ActionPay,
		Does: "charges the period now, with the collector's idempotency key, whatever the retry policy says",
		on: func(s *billing.Subscription, now time.Time) bool {
			return s.Status == billing.StatusError || (s.Status == billing.StatusScheduled && !s.BillingDate.After(now))
		}},
	{Name: "waive", Label: "Waive", Action: billinghttp.ActionWaive, Operator: true,
		Does: "forgives the period without payment (WAIVED); the subscription goes on",
		on: func(s *billing.Subscription, _ time.Time) bool {
			return s.Status == billing.StatusError || s.Status == billing.StatusScheduled
		}},
	{Name: "cancel", Label: "Cancel", Action: billinghttp.ActionCancel,
		Does: "cancels the period (CANCELLED): the subscription ends, no next period is opened; an owed period is forgiven only by a role that may",
		on:   func(s *billing.Subscription, _ time.Time) bool { return movable(s.Status) }},
	{Name: "pause", Label: "Pause", Action: billinghttp.ActionPause,
		Does: "pauses the period for the months given: its billing date is skipped, not charged",
		on: func(s *billing.Subscription, _ time.Time) bool {
			return s.Status == billing.StatusScheduled || s.Status == billing.StatusPaused
		}},
	{Name: "resume", Label: "Resume", Action: billinghttp.ActionResume,
		Does: "ends the pause: the period is SCHEDULED again on its billing date",
		on:   func(s *billing.Subscription, _ time.Time) bool { return s.Status == billing.StatusPaused }},
	{Name: "move", Label: "Move date", Action: billinghttp.ActionChangeBillingDate, Operator: true,
		Does: "moves the period to another billing date; its day becomes the subscription's billing day",
		on:   func(s *billing.Subscription, _ time.Time) bool { return movable(s.Status) }},
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
	billing.Subscription
	InFlight bool
	Ops      []op
}

type timelineRow struct {
	billing.Subscription
	Prev billing.Status
}

type customerData struct {
	UserID   string
	View     billing.SubscriptionView
	Periods  []periodRow
	Timeline []timelineRow
	Page     int
	HasNext  bool
	Done     string
	Outcome  string
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
	if !h.authorize(w, r, billinghttp.Action{Name: billinghttp.ActionGetSubscription, UserID: userID}) ||
		!h.authorize(w, r, billinghttp.Action{Name: billinghttp.ActionHistory, UserID: userID}) {
		return
	}
	ctx := r.Context()
	now := h.now()
	view, err := h.cfg.Collector.Subscription(ctx, userID)
	if errors.Is(err, billing.ErrNotFound) {
		h.fail(w, r, http.StatusNotFound, "no records for user "+userID)
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
	d := customerData{UserID: userID, View: view}
	for _, s := range recent {
		row := periodRow{Subscription: s, InFlight: s.InFlight()}
		for _, o := range ops {
			if o.on(&s, now) && h.allowed(r, o.action(userID, s.SubscriptionID)) {
				row.Ops = append(row.Ops, o)
			}
		}
		d.Periods = append(d.Periods, row)
	}
	rows, err := h.cfg.History.ListByUser(ctx, userID)
	if err != nil {
		h.internal(w, r, "reading the history", err)
		return
	}
	// The timeline, newest first, a page at a time; each row says the status
	// its period had before it.
	last := map[string]billing.Status{}
	tl := make([]timelineRow, len(rows))
	for i, s := range rows {
		tl[i] = timelineRow{Subscription: s, Prev: last[s.SubscriptionID]}
		last[s.SubscriptionID] = s.Status
	}
	slices.Reverse(tl)
	d.Page, _ = strconv.Atoi(r.URL.Query().Get("page"))
	d.Page = max(d.Page, 0)
	from := min(d.Page*DefaultHistoryPage, len(tl))
	to := min(from+DefaultHistoryPage, len(tl))
	d.Timeline, d.HasNext = tl[from:to], to < len(tl)
	if status == http.StatusOK {
		if o, ok := findOp(r.URL.Query().Get("done")); ok {
			d.Done = o.Label
			if oc := r.URL.Query().Get("outcome"); slices.Contains(outcomes, oc) {
				d.Outcome = oc
			}
		}
	}
	h.render(w, r, status, "customer", page{Title: "Customer " + userID, Nav: "customer", Error: msg, Data: d})
}

// outcomes a retry reports on the page after it.
var outcomes = []string{"collected", "declined", "pending", "unknown", "rate-limited", "not charged"}

type confirmData struct {
	Op      op
	UserID  string
	Period  billing.Subscription
	CSRF    string
	Date    string
	Default int
}

// confirm shows what an action will do and asks for it with a POST form.
func (h *Handler) confirm(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	userID, periodID := q.Get("user"), q.Get("period")
	o, ok := findOp(q.Get("op"))
	if !ok || !validID(userID) || !validID(periodID) {
		h.fail(w, r, http.StatusBadRequest, "unknown action, user or period")
		return
	}
	if !h.authorize(w, r, o.action(userID, periodID)) {
		return
	}
	s, err := h.period(r, userID, periodID)
	if err != nil {
		h.fail(w, r, http.StatusNotFound, err.Error())
		return
	}
	h.render(w, r, http.StatusOK, "confirm", page{Title: o.Label, Nav: "customer", Data: confirmData{
		Op: o, UserID: userID, Period: s, CSRF: h.csrfToken(w, r),
		Date: s.BillingDate.UTC().Format("2006-01-02"), Default: 1,
	}})
}

var errNoSuchPeriod = errors.New("no such period of this user")

// period reads a period and checks that it belongs to userID: a period of
// another user is not found, exactly like an unknown ID.
func (h *Handler) period(r *http.Request, userID, periodID string) (billing.Subscription, error) {
	s, err := h.cfg.Repository.GetByID(r.Context(), periodID)
	if err != nil || s.UserID != userID {
		if err != nil && !errors.Is(err, billing.ErrNotFound) {
			h.log.ErrorContext(r.Context(), "billingui: reading a period", "error", err)
		}
		return billing.Subscription{}, errNoSuchPeriod
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
	userID, periodID := r.PostFormValue("user"), r.PostFormValue("period")
	o, ok := findOp(r.PostFormValue("op"))
	if !ok || !validID(userID) || !validID(periodID) {
		h.fail(w, r, http.StatusBadRequest, "unknown action, user or period")
		return
	}
	if !h.authorize(w, r, o.action(userID, periodID)) {
		return
	}
	s, err := h.period(r, userID, periodID)
	if err != nil {
		h.showCustomer(w, r, userID, http.StatusNotFound, err.Error())
		return
	}
	outcome, err := h.perform(r, o, &s)
	if err != nil {
		status, msg := classify(err)
		if status == http.StatusInternalServerError {
			h.log.ErrorContext(r.Context(), "billingui: action", "op", o.Name, "subscription_id", periodID, "error", err)
		}
		h.showCustomer(w, r, userID, status, o.Label+" refused: "+msg)
		return
	}
	loc := "customer?user=" + queryEscape(userID) + "&done=" + o.Name
	if outcome != "" {
		loc += "&outcome=" + queryEscape(outcome)
	}
	redirect(w, loc)
}

// errForgive refuses a cancel that would forgive a debt to a role that may
// not forgive one.
var errForgive = errors.New("your role may not cancel a period that is owed or whose payment is pending")

// perform calls the collector for o on s.
func (h *Handler) perform(r *http.Request, o op, s *billing.Subscription) (outcome string, err error) {
	ctx := r.Context()
	c := h.cfg.Collector
	id := s.SubscriptionID
	switch o.Name {
	case "retry":
		rep, err := c.ManualRepayment(ctx, id)
		if err != nil {
			return "", err
		}
		switch {
		case rep.Collected > 0:
			return "collected", nil
		case rep.Declined > 0:
			return "declined", nil
		case rep.Pending > 0:
			return "pending", nil
		case rep.RateLimited > 0:
			return "rate-limited", nil
		case rep.Unknown > 0:
			return "unknown", nil
		}
		if len(rep.Failed) > 0 {
			return "", errors.New(rep.Failed[0].Reason)
		}
		return "not charged", nil
	case "waive":
		_, err = c.Waive(ctx, id)
	case "cancel":
		_, err = c.CancelUnowed(ctx, id)
		if errors.Is(err, billing.ErrOwed) {
			a := billinghttp.Action{Name: billinghttp.ActionCancelOwed, UserID: s.UserID, SubscriptionID: id, Write: true, Operator: true}
			if !h.allowed(r, a) {
				return "", errForgive
			}
			_, err = c.Cancel(ctx, id)
		}
	case "pause":
		months, perr := strconv.Atoi(r.PostFormValue("months"))
		if perr != nil {
			return "", &formError{"months must be a whole number"}
		}
		_, err = c.Pause(ctx, id, months)
	case "resume":
		_, err = c.Resume(ctx, id)
	case "move":
		day, perr := time.Parse("2006-01-02", r.PostFormValue("date"))
		if perr != nil {
			return "", &formError{"the date must be YYYY-MM-DD"}
		}
		// The period keeps its time of day.
		b := s.BillingDate.UTC()
		date := time.Date(day.Year(), day.Month(), day.Day(), b.Hour(), b.Minute(), b.Second(), 0, time.UTC)
		_, err = c.ChangeBillingDate(ctx, id, date)
	}
	return "", err
}

type formError struct{ msg string }

func (e *formError) Error() string { return e.msg }

// classify maps an action's error to its status and the text shown: the
// engine's own reason for every refusal it makes, nothing of an
// unexpected error (it is logged).
func classify(err error) (int, string) {
	var fe *formError
	switch {
	case errors.As(err, &fe), errors.Is(err, billing.ErrDateMove), errors.Is(err, billing.ErrInvalidDate),
		errors.Is(err, billing.ErrInvalidRequest), errors.Is(err, billing.ErrInvalidAmount):
		return http.StatusUnprocessableEntity, err.Error()
	case errors.Is(err, errForgive):
		return http.StatusForbidden, err.Error()
	case errors.Is(err, billing.ErrNotFound):
		return http.StatusNotFound, err.Error()
	case errors.Is(err, billing.ErrAlreadyLocked), errors.Is(err, billing.ErrConflict),
		errors.Is(err, billing.ErrAttemptInFlight), errors.Is(err, billing.ErrNotCollectible),
		errors.Is(err, billing.ErrIllegalTransition), errors.Is(err, billing.ErrAlreadyExists),
		errors.Is(err, billing.ErrOpenSubscription), errors.Is(err, billing.ErrNoChange),
		errors.Is(err, billing.ErrRateLimited), errors.Is(err, billing.ErrKeyInUse),
		errors.Is(err, billing.ErrOwed), errors.Is(err, billing.ErrUnknownTier):
		return http.StatusConflict, err.Error()
	}
	var fieldErr *billing.FieldError
	if errors.As(err, &fieldErr) {
		return http.StatusUnprocessableEntity, err.Error()
	}
	return http.StatusInternalServerError, "the action failed; the error is in the host's log"
}
