package billinghttp

import (
	"context"
	"errors"
	"net/http"

	"github.com/dynabill/billing"
)

// owned loads the subscription of the path and checks that it belongs to
// the path's user. An unknown ID and another user's subscription are the
// same 404, so the answer never tells that the ID exists.
func (h *Handler) owned(ctx context.Context, a Action) (billing.Period, error) {
	s, err := h.cfg.Repository.GetByID(ctx, a.SubscriptionID)
	if errors.Is(err, billing.ErrNotFound) {
		return billing.Period{}, errSubscriptionNotFound
	}
	if err != nil {
		return billing.Period{}, err
	}
	if s.UserID != a.UserID {
		return billing.Period{}, errSubscriptionNotFound
	}
	return s, nil
}

// list serves GET /{user_id}/subscriptions: every record of the user,
// ascending by billing date; an empty list for a user without any.
func (h *Handler) list(ctx context.Context, _ *http.Request, a Action) (int, any, error) {
	subs, err := h.cfg.Repository.ListByUser(ctx, a.UserID)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, struct {
		Subscriptions []SubscriptionJSON `json:"subscriptions"`
	}{newSubscriptionsJSON(subs)}, nil
}

// get serves GET /{user_id}/subscriptions/{subscription_id}.
func (h *Handler) get(ctx context.Context, _ *http.Request, a Action) (int, any, error) {
	s, err := h.owned(ctx, a)
	if err != nil {
		return 0, nil, err
	}
	out := NewSubscriptionJSON(s)
	return http.StatusOK, struct {
		Subscription *SubscriptionJSON `json:"subscription"`
	}{&out}, nil
}

// history serves GET …/history: every history row of the subscription,
// ascending by last_run_date.
func (h *Handler) history(ctx context.Context, _ *http.Request, a Action) (int, any, error) {
	if _, err := h.owned(ctx, a); err != nil {
		return 0, nil, err
	}
	rows, err := h.cfg.History.ListBySubscription(ctx, a.SubscriptionID)
	if err != nil {
		return 0, nil, err
	}
	mine := make([]billing.Period, 0, len(rows))
	for _, r := range rows {
		if r.UserID == a.UserID { // defence in depth: the ID is the user's
			mine = append(mine, r)
		}
	}
	return http.StatusOK, struct {
		History []SubscriptionJSON `json:"history"`
	}{newSubscriptionsJSON(mine)}, nil
}

// pay serves POST …/pay: a manual repayment of an ERROR or due SCHEDULED
// record. A declined payment is a 200 whose report says declined; a
// processor that does not answer is a 502 (the attempt stays open and a
// retry presents the same idempotency key, so it cannot charge twice).
func (h *Handler) pay(ctx context.Context, r *http.Request, a Action) (int, any, error) {
	if err := decodeEmpty(r); err != nil {
		return 0, nil, err
	}
	if _, err := h.owned(ctx, a); err != nil {
		return 0, nil, err
	}
	rep, err := h.cfg.Collector.Periods().Repay(ctx, a.SubscriptionID)
	if err != nil {
		return 0, nil, err // an unknown outcome is billing.ErrAttemptInFlight: 502
	}
	out := PayJSON{Report: NewReportJSON(rep)}
	after, err := h.cfg.Repository.GetByID(ctx, a.SubscriptionID)
	if err != nil {
		// The attempt is recorded; only reading it back failed.
		h.log.WarnContext(ctx, "billinghttp: reading the record after a repayment",
			"user_id", a.UserID, "subscription_id", a.SubscriptionID, "error", err)
	} else {
		s := NewSubscriptionJSON(after)
		out.Subscription = &s
	}
	return http.StatusOK, out, nil
}

// simpleChange serves the admin changes without parameters: waive and
// resume (cancel is [Handler.cancel]).
func (h *Handler) simpleChange(change func(ctx context.Context, subscriptionID string) (billing.Change, error)) func(context.Context, *http.Request, Action) (int, any, error) {
	return func(ctx context.Context, r *http.Request, a Action) (int, any, error) {
		if err := decodeEmpty(r); err != nil {
			return 0, nil, err
		}
		return h.change(ctx, a, func() (billing.Change, error) { return change(ctx, a.SubscriptionID) })
	}
}

// change checks ownership, applies the change and answers it.
func (h *Handler) change(ctx context.Context, a Action, apply func() (billing.Change, error)) (int, any, error) {
	if _, err := h.owned(ctx, a); err != nil {
		return 0, nil, err
	}
	ch, err := apply()
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, NewChangeJSON(ch), nil
}

// cancel serves POST …/cancel. CANCELLED is final: the subscription ends
// and its record is never collected again. Cancelling a period that is
// owed, or whose payment is not settled, would so forgive it, a waive by
// another name; for such a record (see owedReason) the caller must also be
// allowed ActionCancelOwed, an operator's action.
//
// The ownership check's read is only a first look: a decline may land
// between it and the collector's lock. So a caller not (yet) allowed
// ActionCancelOwed gets billing.Periods.CancelUnowed, which decides again
// on the record read under the user's lock and refuses an owed one; the
// Authorizer is then asked for ActionCancelOwed, and only if it allows
// that is the period cancelled with billing.Periods.Cancel. Either way
// the Authorizer is asked at most twice and before anything is changed.
func (h *Handler) cancel(ctx context.Context, r *http.Request, a Action) (int, any, error) {
	if err := decodeEmpty(r); err != nil {
		return 0, nil, err
	}
	s, err := h.owned(ctx, a)
	if err != nil {
		return 0, nil, err
	}
	cancel := h.cfg.Collector.Periods().CancelUnowed
	if why := owedReason(s.Status, s.InFlight()); why != "" {
		if err := h.mayCancelOwed(r, a, why); err != nil {
			return 0, nil, err
		}
		cancel = h.cfg.Collector.Periods().Cancel
	}
	ch, err := cancel(ctx, a.SubscriptionID)
	if owed := (*billing.OwedError)(nil); errors.As(err, &owed) {
		// The period became owed after our read: the collector refused
		// under the lock, nothing was changed.
		if err := h.mayCancelOwed(r, a, owedReason(owed.Status, owed.InFlight)); err != nil {
			return 0, nil, err
		}
		ch, err = h.cfg.Collector.Periods().Cancel(ctx, a.SubscriptionID)
	}
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, NewChangeJSON(ch), nil
}

// mayCancelOwed asks the Authorizer whether the caller may cancel an owed
// period (ActionCancelOwed) and answers a refusal: 401 as any, otherwise
// 403 with why.
func (h *Handler) mayCancelOwed(r *http.Request, a Action, why string) error {
	owed := a
	owed.Name, owed.Operator = ActionCancelOwed, true
	err := h.cfg.Authorize(r, owed)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrUnauthenticated):
		return refusal(err)
	}
	return &apiError{status: http.StatusForbidden, code: CodeForbidden, message: why, cause: err}
}

// owedReason says why cancelling a record in status st (with an attempt
// in flight or not) would forgive money the user owes, or "" when it would
// not: it is ERROR (its charge was declined and is being retried), ACHSENT
// (a bank debit not yet settled) or carries an attempt whose outcome is
// unknown (resolved as declined, it turns ERROR before the cancel
// applies). billing.Periods.CancelUnowed refuses the same records.
func owedReason(st billing.Status, inFlight bool) string {
	switch {
	case st == billing.StatusError:
		return "this period is owed: its charge was declined and is being retried, and cancelling would forgive it; " +
			"pay it, or ask support to cancel it"
	case st == billing.StatusACHSent, inFlight:
		return "this period's payment is pending, and cancelling would forgive it if the payment fails; " +
			"wait until it settles, or ask support to cancel it"
	}
	return ""
}

// pause serves POST …/pause {"months": 2}.
func (h *Handler) pause(ctx context.Context, r *http.Request, a Action) (int, any, error) {
	var req PauseRequest
	if err := decodeBody(r, &req, true); err != nil {
		return 0, nil, err
	}
	if req.Months == nil {
		return 0, nil, badRequest("months", "months is required")
	}
	if m := *req.Months; m < 1 || m > 120 {
		return 0, nil, badRequest("months", "months must be between 1 and 120")
	}
	return h.change(ctx, a, func() (billing.Change, error) {
		return h.cfg.Collector.Periods().Pause(ctx, a.SubscriptionID, *req.Months)
	})
}

// billingDate serves POST …/billing-date {"billing_date": "2024-03-15"}.
func (h *Handler) billingDate(ctx context.Context, r *http.Request, a Action) (int, any, error) {
	var req BillingDateRequest
	if err := decodeBody(r, &req, true); err != nil {
		return 0, nil, err
	}
	date, err := parseDate("billing_date", req.BillingDate)
	if err != nil {
		return 0, nil, err
	}
	return h.change(ctx, a, func() (billing.Change, error) {
		ch, err := h.cfg.Collector.Periods().Move(ctx, a.SubscriptionID, date)
		if errors.Is(err, billing.ErrAlreadyExists) {
			// The store's conditional move found the new key taken.
			return ch, &apiError{status: http.StatusConflict, code: CodeAlreadyExists, field: "billing_date",
				message: "the user has another record on this billing date", cause: err}
		}
		return ch, err
	})
}

// tier serves POST …/tier {"tier": "Lite:v1", "amount": "2.99", "downgrade": true}.
// An amount left out is billing.ListPrice: with a price list
// (billing.Config.Prices) the collector takes the list's price, and an
// amount given must be that price; without one the collector refuses
// ListPrice (the amount is required) and bounds an amount given. The
// rules are the collector's alone.
func (h *Handler) tier(ctx context.Context, r *http.Request, a Action) (int, any, error) {
	var req TierRequest
	if err := decodeBody(r, &req, true); err != nil {
		return 0, nil, err
	}
	if req.Tier == "" {
		return 0, nil, badRequest("tier", `tier is required, e.g. "Plus:v2"`)
	}
	amount := billing.ListPrice // omitted: the price list's price, if there is one
	if req.Amount != nil {
		var err error
		if amount, err = billing.ParseAmount(*req.Amount); err != nil {
			return 0, nil, &apiError{status: http.StatusBadRequest, code: CodeInvalidRequest, field: "amount",
				message: `amount must be a non-negative decimal string with at most two fraction digits, e.g. "4.99"`, cause: err}
		}
	}
	return h.change(ctx, a, func() (billing.Change, error) {
		return h.cfg.Collector.Periods().ChangeTier(ctx, a.SubscriptionID, req.Tier, amount, req.Downgrade)
	})
}

// reactivate serves POST /{user_id}/reactivate {"billing_date": "2024-03-15"}:
// a new SCHEDULED record for a user whose records are all terminal.
func (h *Handler) reactivate(ctx context.Context, r *http.Request, a Action) (int, any, error) {
	var req ReactivateRequest
	if err := decodeBody(r, &req, true); err != nil {
		return 0, nil, err
	}
	date, err := parseDate("billing_date", req.BillingDate)
	if err != nil {
		return 0, nil, err
	}
	created, err := h.cfg.Collector.Reactivate(ctx, a.UserID, date)
	if errors.Is(err, billing.ErrNotFound) {
		return 0, nil, &apiError{status: http.StatusNotFound, code: CodeNotFound, message: "the user has no subscriptions to reactivate", cause: err}
	}
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, ChangeJSON{Created: []SubscriptionJSON{NewSubscriptionJSON(created)}}, nil
}
