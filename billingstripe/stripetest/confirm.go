package stripetest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// confirmable are the statuses in which Stripe lets an intent be
// confirmed again: a failed or unfinished payment. A succeeded intent is
// never confirmed again, so it succeeds at most once.
var confirmable = map[string]bool{
	"requires_payment_method": true, "requires_confirmation": true, "requires_action": true,
}

// intentAction splits "/v1/payment_intents/{id}/{action}".
func intentAction(path string) (id, action string, ok bool) {
	rest, found := strings.CutPrefix(path, "/v1/payment_intents/")
	if !found {
		return "", "", false
	}
	id, action, ok = strings.Cut(rest, "/")
	return id, action, ok && id != "" && !strings.Contains(action, "/")
}

// unexpectedState is Stripe's 400 for an intent in a status the request
// does not allow, carrying the intent.
func (s *Server) unexpectedState(in *intent, msg string) (int, map[string]any) {
	e := apiError("invalid_request_error", "payment_intent_unexpected_state", msg)
	e["payment_intent"] = s.render(in, false)
	return http.StatusBadRequest, e
}

// confirm serves POST /v1/payment_intents/{id}/confirm, off-session with
// a saved payment method: the intent, which needs a payment method, is
// confirmed again with the next scripted outcome of its customer. An
// intent that succeeded, is processing or was canceled is refused (400
// payment_intent_unexpected_state), as Stripe does.
func (s *Server) confirm(w http.ResponseWriter, r *http.Request, id string) {
	var in *intent
	s.post(w, r, func() { s.confirms++ }, func(f url.Values) (int, map[string]any) {
		var ok bool
		if in, ok = s.byID[id]; !ok {
			return http.StatusNotFound, apiError("invalid_request_error", "resource_missing", "No such payment_intent: '"+id+"'")
		}
		pm := f.Get("payment_method")
		if pm == "" {
			pm = in.Method
		}
		switch {
		case !confirmable[in.Status]:
			return s.unexpectedState(in, fmt.Sprintf("This PaymentIntent's status is %s, but it must be one of requires_payment_method, requires_confirmation or requires_action to be confirmed.", in.Status))
		case f.Get("off_session") != "true":
			return http.StatusBadRequest, apiError("invalid_request_error", "parameter_invalid", "stripetest models only off_session=true confirmations")
		}
		if _, ok := s.methods[pm]; !ok {
			e := apiError("invalid_request_error", "resource_missing", "No such PaymentMethod: '"+pm+"'")
			e["param"] = "payment_method"
			return http.StatusBadRequest, e
		}
		return 0, nil
	}, func(f url.Values) (int, []byte) {
		if pm := f.Get("payment_method"); pm != "" {
			in.Method = pm
		}
		s.seq++
		in.Charge = fmt.Sprintf("ch_%06d", s.seq)
		return s.confirmOffSession(in, expandSet(f)["payment_method"])
	})
}

// cancel serves POST /v1/payment_intents/{id}/cancel: an intent that
// needs a payment method or a confirmation is canceled, and can never
// succeed afterwards; a succeeded, processing or canceled intent is
// refused (400 payment_intent_unexpected_state).
func (s *Server) cancel(w http.ResponseWriter, r *http.Request, id string) {
	var in *intent
	s.post(w, r, func() { s.cancels++ }, func(url.Values) (int, map[string]any) {
		var ok bool
		if in, ok = s.byID[id]; !ok {
			return http.StatusNotFound, apiError("invalid_request_error", "resource_missing", "No such payment_intent: '"+id+"'")
		}
		if !confirmable[in.Status] {
			return s.unexpectedState(in, fmt.Sprintf("You cannot cancel this PaymentIntent because it has a status of %s.", in.Status))
		}
		return 0, nil
	}, func(f url.Values) (int, []byte) {
		in.Status = "canceled"
		in.CancelReason = f.Get("cancellation_reason")
		body, _ := json.Marshal(s.render(in, expandSet(f)["payment_method"]))
		return http.StatusOK, body
	})
}

// ConfirmRequests is how many confirm requests (of an existing intent,
// through the API) reached the fake, refused ones included.
func (s *Server) ConfirmRequests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.confirms
}

// CancelRequests is how many cancel requests reached the fake, refused
// ones included.
func (s *Server) CancelRequests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cancels
}
