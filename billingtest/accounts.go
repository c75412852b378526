package billingtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/entitlement"
)

// AccountsOptions configures an in-memory [Accounts], like the matching
// fields of [dynamostore.AccountsConfig].
type AccountsOptions struct {
	// Clock gives "now". Defaults to [billing.SystemClock].
	Clock billing.Clock
	// Quotas are the monthly grants per tier; missing tiers keep their
	// default. Defaults to [entitlement.DefaultCreditQuotas].
	Quotas entitlement.CreditQuotas
	// CreditExpiry, when positive, sets a balance's expiry to now +
	// CreditExpiry on every grant, top-up and monthly grant.
	CreditExpiry time.Duration
}

// Accounts is an in-memory [entitlement.Accounts] that behaves like
// [dynamostore.Accounts]: the same validation and errors, balances that
// read as zero once expired and restart from zero on the next grant,
// grants, top-ups and consumes applied once per request ID, monthly
// grants applied once per period, provider events applied in
// (Created, EventID) order, idempotent founder passes, timestamps kept
// to whole seconds as DynamoDB stores them. Results are copies. Safe for
// concurrent use.
//
// Unlike DynamoDB it keeps request IDs and monthly grant markers forever
// (DynamoDB's expire by TTL after RequestMarkerRetention and
// GrantMarkerRetention), returns exactly the state its own change left
// (DynamoDB's read just after may include concurrent changes), and never
// fails for capacity or network reasons.
type Accounts struct {
	clock  billing.Clock
	quotas entitlement.CreditQuotas
	expiry time.Duration

	mu       sync.Mutex
	credits  map[string]entitlement.Credits      // as stored: balance not zeroed by expiry
	grants   map[string]map[string]bool          // user → granted periods
	requests map[string]map[string]creditRequest // user → request ID → what it applied
	subs     map[string]map[string]entitlement.ProviderSubscription
	passes   map[string]map[entitlement.PassType]entitlement.FounderPass
	profiles map[string]entitlement.Tier
}

var _ entitlement.Accounts = (*Accounts)(nil)

// NewAccounts returns an empty in-memory Accounts. Invalid quotas or a
// negative expiry are errors, as for [dynamostore.NewAccounts].
func NewAccounts(opts AccountsOptions) (*Accounts, error) {
	q, err := opts.Quotas.WithDefaults()
	if err != nil {
		return nil, fmt.Errorf("billingtest: AccountsOptions.Quotas: %w", err)
	}
	if opts.CreditExpiry < 0 {
		return nil, fmt.Errorf("billingtest: AccountsOptions.CreditExpiry: negative %v", opts.CreditExpiry)
	}
	if opts.Clock == nil {
		opts.Clock = billing.SystemClock{}
	}
	return &Accounts{
		clock: opts.Clock, quotas: q, expiry: opts.CreditExpiry,
		credits: map[string]entitlement.Credits{}, grants: map[string]map[string]bool{}, requests: map[string]map[string]creditRequest{},
		subs: map[string]map[string]entitlement.ProviderSubscription{}, passes: map[string]map[entitlement.PassType]entitlement.FounderPass{},
		profiles: map[string]entitlement.Tier{},
	}, nil
}

// now is the clock's time in UTC, whole seconds (the stored precision).
func (a *Accounts) now() time.Time { return a.clock.Now().UTC().Truncate(time.Second) }

func expired(c entitlement.Credits, now time.Time) bool {
	return !c.ExpiresAt.IsZero() && !now.Before(c.ExpiresAt)
}

// view is a stored balance as read at now.
func view(c entitlement.Credits, now time.Time) entitlement.Credits {
	if expired(c, now) {
		c.Balance, c.Expired = 0, true
	}
	return c
}

func check(op, userID string) error {
	if err := entitlement.CheckAccountID(userID); err != nil {
		return fmt.Errorf("billing: %s: %w", op, err)
	}
	return nil
}

// Balance implements [entitlement.Accounts.Balance].
func (a *Accounts) Balance(_ context.Context, userID string) (entitlement.Credits, error) {
	if err := check("balance", userID); err != nil {
		return entitlement.Credits{}, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	c, ok := a.credits[userID]
	if !ok {
		return entitlement.Credits{UserID: userID}, nil
	}
	return view(c, a.clock.Now()), nil
}

// creditRequest is what a request ID was applied as.
type creditRequest struct {
	op string
	n  int64
}

// Grant implements [entitlement.Accounts.Grant].
func (a *Accounts) Grant(_ context.Context, userID string, n int64, requestID string) (entitlement.Credits, error) {
	return a.change("grant", "GRANT", userID, n, requestID, func(c *entitlement.Credits, now time.Time) bool {
		a.add(c, n, nil, now)
		return true
	})
}

// TopUp implements [entitlement.Accounts.TopUp].
func (a *Accounts) TopUp(_ context.Context, userID string, n int64, requestID string) (entitlement.Credits, error) {
	return a.change("top up", "TOP_UP", userID, n, requestID, func(c *entitlement.Credits, now time.Time) bool {
		a.add(c, n, func(c *entitlement.Credits) { c.LastTopUp = now }, now)
		return true
	})
}

// Consume implements [entitlement.Accounts.Consume].
func (a *Accounts) Consume(_ context.Context, userID string, n int64, requestID string) (entitlement.Credits, error) {
	return a.change("consume", "CONSUME", userID, n, requestID, func(c *entitlement.Credits, now time.Time) bool {
		if view(*c, a.clock.Now()).Balance < n {
			return false
		}
		c.Balance -= n
		c.UpdatedAt = now
		return true
	})
}

// change applies apply to the user's stored balance once per request ID,
// as dynamostore does: a known request ID with the same op and n changes
// nothing and reports Repeated, with another op or n it is
// [entitlement.ErrRequestIDReused]; apply returning false refuses a
// consume (nothing stored, the request ID not recorded).
func (a *Accounts) change(op, code, userID string, n int64, requestID string, apply func(*entitlement.Credits, time.Time) bool) (entitlement.Credits, error) {
	if err := check(op, userID); err != nil {
		return entitlement.Credits{}, err
	}
	if err := entitlement.CheckCreditAmount(n); err != nil {
		return entitlement.Credits{}, fmt.Errorf("billing: %s: %w", op, err)
	}
	if err := entitlement.CheckRequestID(requestID); err != nil {
		return entitlement.Credits{}, fmt.Errorf("billing: %s: %w", op, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	stored, ok := a.credits[userID]
	if !ok {
		stored = entitlement.Credits{UserID: userID}
	}
	if prev, seen := a.requests[userID][requestID]; seen {
		if prev != (creditRequest{code, n}) {
			return entitlement.Credits{}, fmt.Errorf("billing: %s (user %s request %q): %w: applied as %s of %d, now %s of %d",
				op, userID, requestID, entitlement.ErrRequestIDReused, prev.op, prev.n, code, n)
		}
		c := view(stored, a.clock.Now())
		c.Repeated = true
		return c, nil
	}
	c := stored
	if !apply(&c, now) {
		cur := view(stored, a.clock.Now())
		return entitlement.Credits{}, &entitlement.InsufficientCreditsError{UserID: userID, Balance: cur.Balance, Requested: n}
	}
	if a.requests[userID] == nil {
		a.requests[userID] = map[string]creditRequest{}
	}
	a.requests[userID][requestID] = creditRequest{code, n}
	a.credits[userID] = c
	return view(c, a.clock.Now()), nil
}

// add adds n to c, restarting an expired balance from zero and creating
// the record (CreatedAt) if needed; a.mu is held.
func (a *Accounts) add(c *entitlement.Credits, n int64, stamp func(*entitlement.Credits), now time.Time) {
	if c.CreatedAt.IsZero() {
		c.CreatedAt = now
	}
	if expired(*c, a.clock.Now()) {
		c.Balance, c.ExpiresAt = 0, time.Time{}
	}
	c.Balance += n
	c.UpdatedAt = now
	if stamp != nil {
		stamp(c)
	}
	if a.expiry > 0 {
		c.ExpiresAt = a.clock.Now().Add(a.expiry).Truncate(time.Second).UTC()
	}
}

// MonthlyGrant implements [entitlement.Accounts.MonthlyGrant].
func (a *Accounts) MonthlyGrant(_ context.Context, userID string, tier entitlement.Tier, period, eventID string) (entitlement.MonthlyGrantResult, error) {
	if err := check("monthly grant", userID); err != nil {
		return entitlement.MonthlyGrantResult{}, err
	}
	t, err := entitlement.ParseTier(string(tier))
	if err != nil {
		return entitlement.MonthlyGrantResult{}, fmt.Errorf("billing: monthly grant: %w", err)
	}
	if err := entitlement.CheckGrantPeriod(period); err != nil {
		return entitlement.MonthlyGrantResult{}, fmt.Errorf("billing: monthly grant: %w", err)
	}
	res := entitlement.MonthlyGrantResult{Tier: t, Period: period}
	quota := a.quotas.Quota(t)
	if quota == 0 {
		return res, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.grants[userID][period] {
		return res, nil
	}
	if a.grants[userID] == nil {
		a.grants[userID] = map[string]bool{}
	}
	a.grants[userID][period] = true
	c, ok := a.credits[userID]
	if !ok {
		c = entitlement.Credits{UserID: userID}
	}
	now := a.now()
	a.add(&c, quota, func(c *entitlement.Credits) {
		c.LastReset, c.LastGrantPeriod = now, period
		if eventID != "" {
			c.LastGrantEventID = eventID
		}
	}, now)
	a.credits[userID] = c
	res.Applied, res.Amount = true, quota
	return res, nil
}

// ApplyProviderEvent implements [entitlement.Accounts.ApplyProviderEvent].
func (a *Accounts) ApplyProviderEvent(_ context.Context, ev entitlement.ProviderEvent) (bool, error) {
	n, err := ev.Normalize()
	if err != nil {
		return false, fmt.Errorf("billing: apply provider event %q: %w", ev.EventID, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	cur, exists := a.subs[n.UserID][n.SubscriptionID]
	if exists && !n.NewerThan(cur) {
		return false, nil
	}
	s := entitlement.ProviderSubscription{
		UserID: n.UserID, SubscriptionID: n.SubscriptionID, CustomerID: n.Customer, Tier: n.Tier, Status: n.Status,
		CurrentPeriodStart: n.CurrentPeriodStart.Truncate(time.Second), CurrentPeriodEnd: n.CurrentPeriodEnd.Truncate(time.Second),
		CancelAtPeriodEnd: n.CancelAtPeriodEnd, AuthProvider: cur.AuthProvider,
		LastEventID: n.EventID, LastEventAt: n.Created, CreatedAt: now, UpdatedAt: now,
	}
	if exists {
		s.CreatedAt = cur.CreatedAt
	}
	if a.subs[n.UserID] == nil {
		a.subs[n.UserID] = map[string]entitlement.ProviderSubscription{}
	}
	a.subs[n.UserID][n.SubscriptionID] = s
	return true, nil
}

// GetProviderSubscription implements [entitlement.Accounts.GetProviderSubscription].
func (a *Accounts) GetProviderSubscription(_ context.Context, userID, subscriptionID string) (entitlement.ProviderSubscription, error) {
	if err := check("get provider subscription", userID); err != nil {
		return entitlement.ProviderSubscription{}, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.subs[userID][subscriptionID]
	if !ok || subscriptionID == "" {
		return entitlement.ProviderSubscription{}, fmt.Errorf("%w: subscription %q of user %s", billing.ErrNotFound, subscriptionID, userID)
	}
	return s, nil
}

// ListProviderSubscriptions implements [entitlement.Accounts.ListProviderSubscriptions].
func (a *Accounts) ListProviderSubscriptions(_ context.Context, userID string) ([]entitlement.ProviderSubscription, error) {
	if err := check("list provider subscriptions", userID); err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.listSubs(userID), nil
}

func (a *Accounts) listSubs(userID string) []entitlement.ProviderSubscription {
	out := make([]entitlement.ProviderSubscription, 0, len(a.subs[userID]))
	for _, s := range a.subs[userID] {
		out = append(out, s)
	}
	slices.SortFunc(out, func(x, y entitlement.ProviderSubscription) int {
		return strings.Compare(x.SubscriptionID, y.SubscriptionID)
	})
	return out
}

// GrantFounderPass implements [entitlement.Accounts.GrantFounderPass].
func (a *Accounts) GrantFounderPass(_ context.Context, userID string, pass entitlement.PassType, paymentIntentID string, purchasedAt time.Time) (bool, error) {
	if err := check("grant founder pass", userID); err != nil {
		return false, err
	}
	p, err := entitlement.ParsePassType(string(pass))
	if err != nil {
		return false, fmt.Errorf("billing: grant founder pass: %w", err)
	}
	if paymentIntentID == "" || len(paymentIntentID) > entitlement.MaxProviderID {
		return false, &billing.FieldError{Field: "paymentIntentID", Value: paymentIntentID,
			Err: fmt.Errorf("%w: 1 to %d bytes required", entitlement.ErrInvalidProviderEvent, entitlement.MaxProviderID)}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	if purchasedAt.IsZero() {
		purchasedAt = now
	}
	if _, ok := a.passes[userID][p]; ok {
		return false, nil
	}
	if a.passes[userID] == nil {
		a.passes[userID] = map[entitlement.PassType]entitlement.FounderPass{}
	}
	a.passes[userID][p] = entitlement.FounderPass{
		UserID: userID, PassType: p, PaymentIntentID: paymentIntentID, PurchasedAt: purchasedAt.UTC().Truncate(time.Second),
		LifetimeAccess: true, GrantedTier: p.Tier(), CreatedAt: now, UpdatedAt: now,
	}
	return true, nil
}

// FounderPasses implements [entitlement.Accounts.FounderPasses].
func (a *Accounts) FounderPasses(_ context.Context, userID string) ([]entitlement.FounderPass, error) {
	if err := check("founder passes", userID); err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.listPasses(userID), nil
}

func (a *Accounts) listPasses(userID string) []entitlement.FounderPass {
	out := make([]entitlement.FounderPass, 0, len(a.passes[userID]))
	for _, p := range a.passes[userID] {
		out = append(out, p)
	}
	slices.SortFunc(out, func(x, y entitlement.FounderPass) int { return strings.Compare(string(x.PassType), string(y.PassType)) })
	return out
}

// RevokeFounderPass marks a pass as no longer granting access
// (lifetimeAccess false), as a host may do after a refund; for tests of
// access resolution. It reports whether the user held the pass.
func (a *Accounts) RevokeFounderPass(userID string, pass entitlement.PassType) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.passes[userID][pass]
	if ok {
		p.LifetimeAccess = false
		a.passes[userID][pass] = p
	}
	return ok
}

// SetProfileTier implements [entitlement.Accounts.SetProfileTier].
func (a *Accounts) SetProfileTier(_ context.Context, userID string, tier entitlement.Tier) error {
	if err := check("set profile tier", userID); err != nil {
		return err
	}
	t, err := entitlement.ParseTier(string(tier))
	if err != nil {
		return fmt.Errorf("billing: set profile tier: %w", err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.profiles[userID] = t
	return nil
}

// ResolveAccess implements [entitlement.Accounts.ResolveAccess].
func (a *Accounts) ResolveAccess(_ context.Context, userID string) (entitlement.Access, error) {
	if err := check("resolve access", userID); err != nil {
		return entitlement.Access{}, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return entitlement.ResolveAccess(a.clock.Now(), a.listPasses(userID), a.listSubs(userID), a.profiles[userID]), nil
}
