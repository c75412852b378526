package billinghttp

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
)

// Authorizer errors. An [Authorizer] returns one of them (possibly wrapped)
// to refuse a request; any other non-nil error refuses it as
// [ErrForbidden] does.
var (
	// ErrUnauthenticated refuses a request whose caller is not known (no
	// or bad credentials): 401 Unauthorized.
	ErrUnauthenticated = errors.New("billinghttp: unauthenticated")

	// ErrForbidden refuses a request whose caller is known but may not
	// perform the action: 403 Forbidden.
	ErrForbidden = errors.New("billinghttp: forbidden")
)

// Authorizer decides whether the request r may perform the action a. It
// returns nil to allow it, or an error to refuse it: [ErrUnauthenticated]
// (401), [ErrForbidden] (403), or any other error (403; its text is logged,
// never sent). There is no default: [New] fails without one.
//
// # Contract
//
// The handler calls the Authorizer once per request, after routing and
// before it reads the body or touches storage, so a refused request costs
// no storage call and reveals nothing. One request asks it twice: a cancel
// of a period the user owes or whose payment is pending (ERROR, ACHSENT, or
// an attempt of unknown outcome), found so by the ownership check's read
// or, when the period changed after that read, by the collector under the
// user's lock, asks again for [ActionCancelOwed] (Operator true) before
// anything is changed, because cancelling it forgives the debt as a waive
// would. The
// Authorizer must decide from r (credentials in headers, the host's
// session) and a alone:
//
//   - it must check that the caller may act on a.UserID: that is the only
//     owner check it has to make. A user acting on themselves, an operator
//     acting on anyone, a support role limited to reads (a.Write false) are
//     all policies the host expresses here;
//   - it must check that the caller may perform an operator's action
//     (a.Operator): one that sets a price or a billing date or forgives a
//     debt. An end user acting on their own records must not be allowed
//     those, or they could set their own price, move their own billing
//     date or waive their own debt. [RoleAuthorizer] is this policy;
//   - a.SubscriptionID is not yet known to belong to a.UserID when the
//     Authorizer runs. The handler guarantees it afterwards: a subscription
//     of another user is answered 404 "subscription not found", exactly like
//     an unknown ID, and is neither shown nor changed.
//
// So "may caller X act on user U" is the host's decision and "does
// subscription S belong to U" is the handler's, and together they keep one
// user's records away from another. The Authorizer must not read r.Body.
type Authorizer func(r *http.Request, a Action) error

// Action is what a request wants to do, as the [Authorizer] sees it.
type Action struct {
	// Name identifies the operation: one of the Action… constants, e.g.
	// "subscription.pay".
	Name string
	// UserID is the {user_id} of the path: the user whose records the
	// request reads or changes. Never empty: 1 to 1024 bytes of UTF-8
	// without control characters, as is SubscriptionID when set (a path
	// with another ID is no route and reaches no Authorizer).
	UserID string
	// SubscriptionID is the {subscription_id} of the path, "" for the
	// routes without one (list, reactivate). Not yet checked to belong to
	// UserID (see [Authorizer]).
	SubscriptionID string
	// Write is true for the operations that change records or move money
	// (every POST), false for reads.
	Write bool
	// Operator is true when the action is an operator's: it sets a price
	// or a date or forgives a debt (ActionChangeTier,
	// ActionChangeBillingDate, ActionReactivate, ActionWaive,
	// ActionCancelOwed). The others (list, get, history, pay, cancel,
	// pause, resume) are what an end user may do to their own records.
	Operator bool
}

// The action names, one per route (see the package documentation), and
// ActionCancelOwed. The operator's actions, with Action.Operator set, are
// ActionWaive, ActionChangeBillingDate, ActionChangeTier, ActionReactivate
// and ActionCancelOwed.
const (
	ActionListSubscriptions = "subscriptions.list"        // GET /{user_id}/subscriptions
	ActionGetSubscription   = "subscription.get"          // GET /{user_id}/subscriptions/{subscription_id}
	ActionHistory           = "subscription.history"      // GET …/{subscription_id}/history
	ActionPay               = "subscription.pay"          // POST …/{subscription_id}/pay
	ActionWaive             = "subscription.waive"        // POST …/{subscription_id}/waive
	ActionCancel            = "subscription.cancel"       // POST …/{subscription_id}/cancel
	ActionPause             = "subscription.pause"        // POST …/{subscription_id}/pause
	ActionResume            = "subscription.resume"       // POST …/{subscription_id}/resume
	ActionChangeBillingDate = "subscription.billing_date" // POST …/{subscription_id}/billing-date
	ActionChangeTier        = "subscription.tier"         // POST …/{subscription_id}/tier
	ActionReactivate        = "user.reactivate"           // POST /{user_id}/reactivate

	// ActionCancelOwed is no route of its own: it is the second question
	// of a cancel (POST …/cancel, authorized as ActionCancel first) whose
	// record turns out to be owed (ERROR) or its payment pending (ACHSENT,
	// or an attempt of unknown outcome), on the handler's read or on the
	// collector's under the user's lock. CANCELLED is final, so such a
	// cancel forgives the debt: an operator's action, like ActionWaive.
	ActionCancelOwed = "subscription.cancel_owed"
)

// RoleAuthorizer returns the [Authorizer] of the API's two roles, from
// identify, the host's authentication, which tells who sent r:
//
//   - an end user (userID their ID, operator false) may perform the end
//     user's actions (Action.Operator false: list, get, history, pay,
//     cancel, pause, resume) on their own records (Action.UserID equal to
//     userID), and nothing else: not ActionCancelOwed, so they cannot
//     cancel a period they owe or whose payment is pending;
//   - an operator (operator true) may perform every action on every user.
//
// identify returns [ErrUnauthenticated] (or an error wrapping it) when r
// carries no valid credentials, and any other error when it cannot tell
// (the request is then refused as [ErrForbidden] refuses it; the error is
// logged, never sent). An empty userID without operator is
// unauthenticated. identify must not read r.Body.
func RoleAuthorizer(identify func(r *http.Request) (userID string, operator bool, err error)) Authorizer {
	return func(r *http.Request, a Action) error {
		userID, operator, err := identify(r)
		switch {
		case err != nil:
			return err
		case operator:
			return nil
		case userID == "":
			return ErrUnauthenticated
		case a.Operator:
			return fmt.Errorf("%w: %s is an operator's action", ErrForbidden, a.Name)
		case subtle.ConstantTimeCompare([]byte(userID), []byte(a.UserID)) != 1:
			return fmt.Errorf("%w: the records of another user", ErrForbidden)
		}
		return nil
	}
}
