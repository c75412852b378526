// Package billinghttp serves the billing admin API over HTTP: list a user's
// subscriptions, get one, read its history, collect it manually, and make
// the admin changes of [billing.Collector], as JSON. A host imports it to
// mount the API its end users and its operators call, next to its own
// routes (examples/httpserver does, on the in-memory store of package
// memory).
//
// # Routes
//
// [Handler] is an [http.Handler] built on [http.ServeMux] patterns. Each
// route has an action name, which the [Authorizer] receives:
//
//	GET  /{user_id}/subscriptions                                 subscriptions.list        {"subscriptions": [S…]}
//	GET  /{user_id}/subscriptions/{subscription_id}               subscription.get          {"subscription": S}
//	GET  /{user_id}/subscriptions/{subscription_id}/history       subscription.history      {"history": [S…]}
//	POST /{user_id}/subscriptions/{subscription_id}/pay           subscription.pay          {"report": R, "subscription": S}
//	POST /{user_id}/subscriptions/{subscription_id}/waive         subscription.waive        C
//	POST /{user_id}/subscriptions/{subscription_id}/cancel        subscription.cancel       C
//	POST /{user_id}/subscriptions/{subscription_id}/pause         subscription.pause        C   body {"months": 2}
//	POST /{user_id}/subscriptions/{subscription_id}/resume        subscription.resume       C
//	POST /{user_id}/subscriptions/{subscription_id}/billing-date  subscription.billing_date C   body {"billing_date": "2024-03-15"}
//	POST /{user_id}/subscriptions/{subscription_id}/tier          subscription.tier         C   body {"tier": "Lite:v1", "amount": "2.99", "downgrade": true}
//	POST /{user_id}/reactivate                                    user.reactivate           201 {"created": [S]}   body {"billing_date": "2024-03-15"}
//
// S is a [SubscriptionJSON], R a [ReportJSON], C a [ChangeJSON]
// ({"before": S, "after": S, "created": [S…]}). Dates in bodies are
// calendar days, "YYYY-MM-DD" (midnight UTC), or RFC 3339 timestamps in
// UTC ("…Z" or "…+00:00"); a timestamp with another offset is refused
// (400, field billing_date) rather than converted, since converting
// would move the day. The collector further refuses dates out of its
// range (400, field billing_date; see [billing.Periods.Move]
// and [billing.Collector.Reactivate]). Amounts are strings. A tier
// change's amount is optional when the collector has a price list
// ([billing.Config.Prices]): the tier's price is charged, and an amount
// given must equal it; without a price list it is required, more than
// zero and at most [billing.Config.MaxCharge]. POST routes without
// parameters take an empty body or {}.
//
// Bodies are read strictly, so that a gateway or log reading a body sees
// what the handler acts on: every body is one flat JSON object of at most
// Config.MaxBodyBytes (64 KiB by default) whose keys are the documented
// names exactly (case-sensitive: "Amount" is an unknown field, not
// "amount") and each at most once (a repeated key is refused, never "the
// last one wins"); a value is a string, number, boolean or null, never an
// object or array; nothing may follow the object; the body is valid
// UTF-8 (encoding/json would otherwise replace bad bytes).
//
// Paths are matched as sent: a path with "..", "." or empty ("//")
// segments, or a trailing slash, is no route (404), never redirected, and
// so is a user or subscription ID of more than 1024 bytes (the longest
// user ID billing.Collector.Subscribe accepts), not valid UTF-8 or with
// control characters; such requests reach neither the Authorizer
// nor storage. IDs are otherwise opaque: an encoded slash ("%2F") is part
// of the ID, and method overrides (X-HTTP-Method-Override, _method) are
// ignored.
//
// To serve the API under a prefix, strip it:
//
//	mux.Handle("/billing/", http.StripPrefix("/billing", h))
//
// # Authorization
//
// There is no open default: [New] fails without Config.Authorize. Every
// request is routed, then authorized, and only then is its body read or
// storage touched.
//
// The API has two roles, which the [Authorizer] must keep apart:
//
//   - an end user may read their own subscriptions (list, get, history)
//     and pay, cancel, pause and resume them: the actions whose
//     Action.Operator is false, on the user of the path only;
//   - an operator may also do what sets a price or a date or forgives a
//     debt: change the tier and amount, move the billing date, reactivate,
//     waive, and cancel a period that is owed or whose payment is pending
//     (Action.Operator true), on any user.
//
// Cancelling is final (CANCELLED is never collected again), so cancelling
// a period the user owes forgives it as a waive would. An end user may
// cancel a SCHEDULED or PAUSED period, but not an ERROR one (its charge was
// declined and is being retried), an ACHSENT one (its bank debit has not
// settled) or one whose payment attempt has no known outcome yet. The
// decision is made twice, and the second time under the user's billing
// lock: when the ownership check's read finds the period owed, the handler
// asks the Authorizer again, for [ActionCancelOwed] with Action.Operator
// true, before it calls the collector; when the read finds it not owed,
// the handler cancels with [billing.Periods.CancelUnowed], which re-reads
// the record under the lock and refuses it ([billing.ErrOwed]) if a
// decline or an attempt landed in between; the Authorizer is then asked
// for ActionCancelOwed, and only if it allows that is the period cancelled
// ([billing.Periods.Cancel]). A refusal is a 403 (code "forbidden")
// whose message says the period is owed or its payment pending, to pay it
// or ask support, whichever read found it owed: the caller lacks the right
// to forgive a debt, which retrying does not change, so it is a 403 and
// not a 409 (409 says "retry or reload"). The record is not changed. An
// operator may cancel an ERROR period.
//
// An end user allowed an operator's action could set their own price,
// move their own billing date or waive what they owe. [RoleAuthorizer]
// is this policy, built from the host's authentication (who sent the
// request); a host with other roles (support staff limited to reads, say)
// writes its own Authorizer from Action.UserID, Action.Write and
// Action.Operator.
//
// The [Authorizer] decides whether the caller may perform [Action] on
// Action.UserID; the handler then guarantees that the
// subscription of the path belongs to that user, answering 404 "subscription
// not found" for another user's subscription exactly as for an unknown ID.
// POST requests from cross-origin browser pages are refused (403) by
// [http.CrossOriginProtection], so a cookie-based Authorizer is not open to
// cross-site request forgery.
//
// # Errors
//
// Errors are JSON, {"error": {"code": "not_found", "message": "…", "field":
// "…"}} ([ErrorJSON]), with these statuses and codes:
//
//	400 invalid_request   malformed JSON, a body that is not an object, trailing data,
//	                      a repeated key, an object or array as a value, a missing or
//	                      malformed field (field names it), library input errors: a date
//	                      the collector refuses (billing.ErrInvalidDate, field
//	                      billing_date), an unknown tier (billing.ErrUnknownTier, field
//	                      tier), a refused amount (billing.ErrInvalidAmount, field amount)
//	400 unknown_field     a field the body does not have, or a known one mis-cased
//	401 unauthenticated   the Authorizer returned ErrUnauthenticated (WWW-Authenticate: Config.Challenge)
//	403 forbidden         the Authorizer returned ErrForbidden or any other error (an end
//	                      user's operator action, another user's records, an end user's
//	                      cancel of a period owed or whose payment is pending, found so
//	                      by the handler's read or by the collector under the user's
//	                      lock, billing.ErrOwed); a cross-origin browser POST
//	404 not_found         an unknown route, subscription ID, another user's subscription (billing.ErrNotFound);
//	                      a path with "..", "." or "//" segments or a trailing slash; an ID
//	                      over 1024 bytes, not UTF-8 or with control characters
//	405 method_not_allowed  a route path with another method (Allow lists the methods)
//	409 locked            billing.ErrAlreadyLocked: the user's billing lock is held; retry later
//	409 not_collectible   billing.ErrNotCollectible: the record's status does not allow the action
//	409 illegal_transition  billing.ErrIllegalTransition
//	409 already_exists    billing.ErrAlreadyExists, e.g. a new billing date that another record has
//	409 conflict          billing.ErrConflict: the record changed meanwhile
//	413 body_too_large    the body is over Config.MaxBodyBytes
//	422 date_out_of_order billing.ErrDateMove: a new billing date on or past the user's next
//	                      open period, or on or before the previous one (field billing_date)
//	500 internal          anything else, including stored items that do not decode
//	502 payment_outcome_unknown  billing.ErrAttemptInFlight: a payment attempt has no known
//	                      outcome (the processor did not answer a repayment, or an
//	                      action met an attempt in flight); the record carries the
//	                      attempt and a retry presents the same idempotency key
//
// Messages are fixed per kind of error and never carry an error's text: storage
// errors, keys and the Authorizer's reasons go to Config.Logger only.
//
// # Wiring
//
//	collector, err := billing.NewCollector(billing.Config{Repository: repo, History: hist, Locker: locker, Provider: processor})
//	if err != nil {
//		return err
//	}
//	api, err := billinghttp.New(billinghttp.Config{
//		Repository: repo,
//		History:    hist,
//		Collector:  collector,
//		Logger:     logger,
//		Authorize: billinghttp.RoleAuthorizer(func(r *http.Request) (string, bool, error) {
//			caller, err := auth.Verify(r.Header.Get("Authorization")) // the host's own
//			if err != nil {
//				return "", false, billinghttp.ErrUnauthenticated
//			}
//			return caller.UserID, caller.IsOperator(), nil
//		}),
//	})
//	if err != nil {
//		return err
//	}
//	mux := http.NewServeMux()
//	mux.Handle("/billing/", http.StripPrefix("/billing", api))
//	return http.ListenAndServe(addr, mux)
//
// See ExampleNew and examples/httpserver for runnable versions.
package billinghttp
