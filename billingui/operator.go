package billingui

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/dynabill/billing"
)

// Who made an action and why: every action's form carries a reason typed
// on its confirmation page, and the signed-in operator comes from
// Config.Operator; both are recorded on the history rows of the change
// (data_operator, data_reason) and shown in the timeline.

// maxReason bounds the reason typed on a confirmation page, in bytes.
const maxReason = 500

// DefaultOperator is the default of [Config.Operator]: the user name of
// the request's basic authentication when it has one, else "console".
func DefaultOperator(r *http.Request) string {
	if u, _, ok := r.BasicAuth(); ok && u != "" {
		return u
	}
	return "console"
}

// operator returns the signed-in operator of r, as recorded on the rows
// of an action: Config.Operator's answer, made safe to record (control
// characters dropped, at most billing.MaxActorLen bytes).
func (h *Handler) operator(r *http.Request) string {
	name := strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, strings.ToValidUTF8(h.cfg.Operator(r), "\uFFFD"))
	for len(name) > billing.MaxActorLen {
		_, size := utf8.DecodeLastRuneInString(name)
		name = name[:len(name)-size]
	}
	if name == "" {
		return "console"
	}
	return name
}

// errNoReason refuses an action sent without a reason.
var errNoReason = &formError{"say why: the reason is recorded with the change, and is required"}

// checkReason checks the reason of an action's form (trimmed): required,
// at most maxReason bytes of text, line breaks allowed.
func checkReason(reason string) error {
	switch {
	case reason == "":
		return errNoReason
	case len(reason) > maxReason || !utf8.ValidString(reason) ||
		strings.ContainsFunc(reason, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\r' && r != '\t' }):
		return &formError{fmt.Sprintf("the reason must be text of at most %d bytes", maxReason)}
	}
	return nil
}

// refusal is a kind of refusal of the engine and what the page says of it.
type refusal struct {
	target error
	status int
	say    func(err error) string
}

func (m refusal) match(err error) bool { return errors.Is(err, m.target) }

func sentence(s string) func(error) string { return func(error) string { return s } }

// refusals are the engine's refusals an action may meet, most specific
// first, each with the status of its page and a sentence for an operator.
var refusals = []refusal{
	{billing.ErrRequestKeyReused, http.StatusConflict, func(err error) string {
		msg := "this form was already sent with other values"
		var rk *billing.RequestKeyError
		if errors.As(err, &rk) {
			if len(rk.Fields) == 1 && rk.Fields[0] == "Op" {
				msg = "this form's request was already used for a " + rk.Op
			} else {
				msg += " (differing: " + strings.Join(rk.Fields, ", ") + ")"
			}
		}
		return msg + ": nothing was changed. Open the action again from the customer page to make a new request"
	}},
	{billing.ErrAttemptInFlight, http.StatusConflict, sentence("a payment of this customer is in flight and its outcome is not known yet: nothing may change the period until it is resolved (the next run resolves it, or the processor's answer does); try again later")},
	{billing.ErrAlreadyLocked, http.StatusConflict, sentence("a run or another action is working on this customer right now: try again in a minute")},
	{billing.ErrKeyInUse, http.StatusConflict, sentence("the payment processor is still working on an earlier request for this payment: try again in a minute")},
	{billing.ErrRateLimited, http.StatusConflict, sentence("the payment processor is limiting requests: nothing was charged; try again shortly")},
	{billing.ErrOwed, http.StatusConflict, sentence("the customer owes a declined period, or has a payment pending: collect or waive it first")},
	{billing.ErrNoChange, http.StatusConflict, sentence("nothing to change: the subscription is like this already")},
	{billing.ErrOpenSubscription, http.StatusConflict, sentence("the customer has an open subscription already")},
	{billing.ErrUnknownTier, http.StatusConflict, sentence("that plan is not in the price list")},
	{billing.ErrNotCollectible, http.StatusConflict, sentence("the period does not take this action in its status (it may have been paid, waived, cancelled or moved since the page was shown): reload the customer page")},
	{billing.ErrIllegalTransition, http.StatusConflict, sentence("the period does not take this action in its status: reload the customer page")},
	{billing.ErrConflict, http.StatusConflict, sentence("the customer's records changed while the action was made: nothing was changed; reload the page and try again")},
	{billing.ErrAlreadyExists, http.StatusConflict, sentence("the customer's records changed while the action was made: nothing was changed; reload the page and try again")},
	{billing.ErrNotFound, http.StatusNotFound, sentence("no such period of this customer")},
	{billing.ErrDateMove, http.StatusUnprocessableEntity, func(err error) string {
		var dm *billing.DateMoveError
		if errors.As(err, &dm) {
			if dm.Later {
				return "the new date is on or past the customer's next period (billed " + dm.PeriodDate.UTC().Format("2006-01-02") + "): choose a date before it"
			}
			return "the new date is on or before the customer's earlier period (billed " + dm.PeriodDate.UTC().Format("2006-01-02") + "): choose a date after it"
		}
		return "the new date is out of order with the customer's other periods"
	}},
	{billing.ErrInvalidDate, http.StatusUnprocessableEntity, sentence(fmt.Sprintf("that date cannot be a billing date: it must not be in the past and at most %d days ahead, and must not meet another period of the customer", int(billing.MaxDateAhead/(24*time.Hour))))},
	{billing.ErrInvalidAmount, http.StatusUnprocessableEntity, sentence("the period's amount is not one the engine may charge: it is zero or above the collector's limit")},
	{billing.ErrInvalidRequest, http.StatusUnprocessableEntity, func(err error) string {
		var fe *billing.FieldError
		if errors.As(err, &fe) {
			return "the engine refused the form's " + fe.Field + ": check it and try again"
		}
		return "the engine refused the request as invalid"
	}},
}

// staleWhy says why a period was given up on (STALE).
func staleWhy(s billing.Period) string {
	if s.UpdatedEvent == billing.UpdatedACHOverdue {
		return "ACH debit with no settlement by the deadline; a late settlement still completes it"
	}
	return "older than the collector's stale threshold: no longer collected"
}
