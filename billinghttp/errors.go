package billinghttp

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/dynabill/billing"
)

// The error codes of [ErrorDetail.Code].
const (
	CodeInvalidRequest    = "invalid_request"         // 400: malformed JSON, a missing or bad field
	CodeUnknownField      = "unknown_field"           // 400: a field the body type does not have
	CodeUnauthenticated   = "unauthenticated"         // 401: the Authorizer returned ErrUnauthenticated
	CodeForbidden         = "forbidden"               // 403: the Authorizer refused; a cross-origin browser write
	CodeNotFound          = "not_found"               // 404: unknown route, subscription, or another user's subscription
	CodeMethodNotAllowed  = "method_not_allowed"      // 405: the path exists with another method (see Allow)
	CodeConflict          = "conflict"                // 409: the record changed meanwhile (billing.ErrConflict)
	CodeAlreadyExists     = "already_exists"          // 409: the key a record would take is taken (billing.ErrAlreadyExists)
	CodeLocked            = "locked"                  // 409: the user's billing lock is held (billing.ErrAlreadyLocked)
	CodeNotCollectible    = "not_collectible"         // 409: the record's status does not allow the action (billing.ErrNotCollectible)
	CodeIllegalTransition = "illegal_transition"      // 409: the transition table forbids it (billing.ErrIllegalTransition)
	CodeTooLarge          = "body_too_large"          // 413: the body is over Config.MaxBodyBytes
	CodeDateOutOfOrder    = "date_out_of_order"       // 422: a new billing date onto or across another period (billing.ErrDateMove)
	CodeInternal          = "internal"                // 500: anything else; details are logged, never sent
	CodeOutcomeUnknown    = "payment_outcome_unknown" // 502: an attempt's outcome is unknown (billing.ErrAttemptInFlight)
)

// apiError is an error with its response: the errors the handler makes
// itself (bad input, refusals, not found) and the classification of the
// library's errors.
type apiError struct {
	status  int
	code    string
	message string
	field   string
	// cause is the error behind it, for the log only.
	cause error
}

func (e *apiError) Error() string {
	if e.cause != nil {
		return e.code + ": " + e.message + ": " + e.cause.Error()
	}
	return e.code + ": " + e.message
}

func (e *apiError) Unwrap() error { return e.cause }

func badRequest(field, message string) *apiError {
	return &apiError{status: http.StatusBadRequest, code: CodeInvalidRequest, field: field, message: message}
}

// errSubscriptionNotFound answers an unknown subscription ID and a
// subscription of another user alike.
var errSubscriptionNotFound = &apiError{status: http.StatusNotFound, code: CodeNotFound, message: "subscription not found"}

// classify maps an error to its response. Messages are fixed per kind:
// the library's error texts (keys, reasons, wrapped storage errors) are
// logged, never sent.
func classify(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var fe *billing.FieldError
	isFE := errors.As(err, &fe)
	switch {
	case errors.Is(err, ErrUnauthenticated):
		return &apiError{status: http.StatusUnauthorized, code: CodeUnauthenticated, message: "authentication required", cause: err}
	case errors.Is(err, ErrForbidden):
		return &apiError{status: http.StatusForbidden, code: CodeForbidden, message: "forbidden", cause: err}
	case errors.Is(err, billing.ErrInvalidItem), isFE && fe.Key != "":
		// A stored item that does not decode is the server's problem.
		return internal(err)
	case errors.Is(err, billing.ErrNotFound):
		return &apiError{status: http.StatusNotFound, code: CodeNotFound, message: "not found", cause: err}
	case errors.Is(err, billing.ErrAttemptInFlight):
		return &apiError{status: http.StatusBadGateway, code: CodeOutcomeUnknown,
			message: "a payment attempt of this subscription has no known outcome yet; nothing was changed, and retrying cannot charge twice", cause: err}
	case errors.Is(err, billing.ErrAlreadyLocked):
		return &apiError{status: http.StatusConflict, code: CodeLocked, message: "the user's billing is busy with another operation; retry later", cause: err}
	case errors.Is(err, billing.ErrNotCollectible):
		return &apiError{status: http.StatusConflict, code: CodeNotCollectible, message: "the subscription's status does not allow this action", cause: err}
	case errors.Is(err, billing.ErrIllegalTransition):
		return &apiError{status: http.StatusConflict, code: CodeIllegalTransition, message: "the status change is not allowed", cause: err}
	case errors.Is(err, billing.ErrAlreadyExists):
		return &apiError{status: http.StatusConflict, code: CodeAlreadyExists, message: "a record with this billing date already exists", cause: err}
	case errors.Is(err, billing.ErrConflict):
		return &apiError{status: http.StatusConflict, code: CodeConflict, message: "the subscription changed meanwhile; reload and retry", cause: err}
	case errors.Is(err, billing.ErrDateMove):
		// Before the input errors (it matches billing.ErrInvalidDate too):
		// retrying cannot help, the date must change.
		return &apiError{status: http.StatusUnprocessableEntity, code: CodeDateOutOfOrder, field: "billing_date",
			message: "the new billing date is on or across another billing period of the user", cause: err}
	case errors.Is(err, billing.ErrUnknownTier):
		// From the collector or the host's price list: the request's tier.
		return &apiError{status: http.StatusBadRequest, code: CodeInvalidRequest, field: "tier",
			message: "unknown tier: not in the price list, or not a tier name", cause: err}
	case errors.Is(err, billing.ErrInvalidAmount):
		// The request's one amount: left out without a price list, not
		// more than zero, over the largest charge, or not the price list's
		// price.
		return &apiError{status: http.StatusBadRequest, code: CodeInvalidRequest, field: "amount",
			message: "amount refused: it is required when there is no price list, and must be more than zero, at most the largest charge allowed, and the price list's price of the tier when there is a price list", cause: err}
	case isFE && errors.Is(err, billing.ErrInvalidDate):
		return &apiError{status: http.StatusBadRequest, code: CodeInvalidRequest, field: fe.Field,
			message: "invalid " + fe.Field + ": out of the accepted range (too old to be collected, too far ahead, or on or before a paid period)", cause: err}
	case isFE:
		return &apiError{status: http.StatusBadRequest, code: CodeInvalidRequest, field: fe.Field, message: "invalid " + fe.Field, cause: err}
	case errors.Is(err, billing.ErrInvalidQuery), errors.Is(err, billing.ErrInvalidDate),
		errors.Is(err, billing.ErrInvalidAmount), errors.Is(err, billing.ErrInvalidTerm),
		errors.Is(err, billing.ErrInvalidStatus):
		return &apiError{status: http.StatusBadRequest, code: CodeInvalidRequest, message: "invalid request", cause: err}
	}
	return internal(err)
}

func internal(err error) *apiError {
	return &apiError{status: http.StatusInternalServerError, code: CodeInternal, message: "internal error", cause: err}
}

// fail writes the response for err and logs it: 5xx at error level with
// the real error, refusals and other 4xx at debug level.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, a Action, err error) {
	ae := classify(err)
	level := slog.LevelDebug
	switch {
	case ae.status >= 500 && r.Context().Err() != nil:
		level = slog.LevelInfo // the client went away
	case ae.status >= 500:
		level = slog.LevelError
	case ae.status == http.StatusUnauthorized || ae.status == http.StatusForbidden:
		level = slog.LevelInfo
	}
	logged := ae.cause // the real error behind the answer
	if logged == nil {
		logged = errors.New(ae.message)
	}
	ctx := context.WithoutCancel(r.Context())
	h.log.Log(ctx, level, "billinghttp: request failed",
		"method", r.Method, "path", r.URL.Path, "action", a.Name, "user_id", a.UserID,
		"subscription_id", a.SubscriptionID, "status", ae.status, "code", ae.code, "error", logged)
	h.writeError(w, ae)
}

func (h *Handler) writeError(w http.ResponseWriter, ae *apiError) {
	if ae.status == http.StatusUnauthorized && h.cfg.Challenge != "" {
		w.Header().Set("WWW-Authenticate", h.cfg.Challenge)
	}
	writeJSON(w, ae.status, ErrorJSON{Error: ErrorDetail{Code: ae.code, Message: ae.message, Field: ae.field}})
}
