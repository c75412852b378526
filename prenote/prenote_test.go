package prenote_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/notice"
	"github.com/dynabill/billing/prenote"
	"github.com/dynabill/billing/prenote/prenotetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStepBranches covers every gate and reason of the prenote flow,
// run through the worker after a notification: what the
// policy decided, what was submitted and what was metered. A prenote never
// fails the message.
func TestStepBranches(t *testing.T) {
	boom := errors.New("boom")
	day := 24 * time.Hour
	age := func(d time.Duration) func(*notifEnv) {
		return func(e *notifEnv) {
			u := notifUser
			u.DateJoined = notifNow.Add(-d)
			e.users.Put(u)
		}
	}
	old := age(100 * day)
	payment := func(provider, status string, ago time.Duration) prenote.Payment {
		p := prenote.Payment{ID: "p", Provider: provider, Status: status}
		if ago >= 0 {
			p.CompletionDate = notifNow.Add(-ago)
		}
		return p
	}
	pays := func(ps ...prenote.Payment) func(*notifEnv) {
		return func(e *notifEnv) { e.payments.Set("u1", ps...) }
	}
	all := func(fs ...func(*notifEnv)) func(*notifEnv) {
		return func(e *notifEnv) {
			for _, f := range fs {
				f(e)
			}
		}
	}
	primaryReq := prenote.Request{UserID: "u1", FirstName: "Ann", LastName: "Lee"}
	secondaryReq := prenote.Request{UserID: "u1", FirstName: "Ann", LastName: "Lee", Email: "ann@example.com", Account: "subscription"}
	primary := []prenotetest.Submission{{Provider: "primary", Request: primaryReq}}
	secondary := []prenotetest.Submission{{Provider: "secondary", Request: secondaryReq}}
	submitted := func(p string) []string { return []string{"submitted:true", "provider:" + p} }
	notSubmitted := func(reason string) []string { return []string{"submitted:false", "submitted_reason:" + reason} }
	decided := func(reason, provider string) prenote.Decision {
		d := prenote.Decision{Submit: true, Reason: reason, Provider: provider}
		if provider == "secondary" {
			d.Account = "subscription"
		}
		return d
	}
	refused := func(reason string) prenote.Decision { return prenote.Decision{Reason: reason} }

	for _, tc := range []struct {
		name        string
		setup       func(*notifEnv)
		decision    prenote.Decision // what the policy decides; zero with decideErr
		decideErr   bool
		tags        []string
		submissions []prenotetest.Submission
		payLookups  int // the payment check ran
	}{
		// Gate 1: the feature flag.
		{name: "flag off", setup: func(e *notifEnv) { e.flags.SetEnabled(prenote.EnabledFlag, false) },
			decision: refused("feature_flag_disabled"), tags: notSubmitted("feature_flag_disabled")},
		{name: "flag off for this user", setup: func(e *notifEnv) { e.flags.SetEnabledFor(prenote.EnabledFlag, "u1", false) },
			decision: refused("feature_flag_disabled"), tags: notSubmitted("feature_flag_disabled")},
		{name: "flag error", setup: func(e *notifEnv) { e.flags.Fail(prenote.EnabledFlag, boom) },
			decideErr: true, tags: notSubmitted("error")},
		// Gate 2: a usable bank link.
		{name: "no bank link", setup: func(e *notifEnv) { e.accounts.Set("u1", prenote.BankLink{}) },
			decision: refused("no_good_plaid_item"), tags: notSubmitted("no_good_plaid_item")},
		{name: "primary account but no accounts", setup: func(e *notifEnv) { e.accounts.Set("u1", prenote.BankLink{PrimaryAccountID: "acc-1"}) },
			decision: refused("no_good_plaid_item"), tags: notSubmitted("no_good_plaid_item")},
		{name: "accounts but no primary", setup: func(e *notifEnv) {
			e.accounts.Set("u1", prenote.BankLink{Accounts: []prenote.BankAccount{{ID: "acc-1", Mask: "1234"}}})
		}, decision: refused("no_good_plaid_item"), tags: notSubmitted("no_good_plaid_item")},
		{name: "bank link error", setup: func(e *notifEnv) {
			failing := &prenotetest.BankAccounts{}
			failing.FailFor("u1", boom)
			e.policy, _ = prenote.NewDefaultPolicy(prenote.PolicyConfig{
				Flags: e.flags, Accounts: failing, Payments: e.payments, Clock: e.clock,
				Provider: "primary", AlternateProvider: "secondary"})
			e.step.Policy = e.policy
		}, decideErr: true, tags: notSubmitted("error")},
		// Gate 3: new users skip the payment check.
		{name: "new user: primary by default", decision: decided("new_user", "primary"), tags: submitted("primary"), submissions: primary},
		{name: "new user: secondary by flag", setup: func(e *notifEnv) { e.flags.SetValue(prenote.ProviderFlag, "secondary") },
			decision: decided("new_user", "secondary"), tags: submitted("secondary"), submissions: secondary},
		{name: "new user: other provider value is primary", setup: func(e *notifEnv) { e.flags.SetValueFor(prenote.ProviderFlag, "u1", "stripe") },
			decision: decided("new_user", "primary"), tags: submitted("primary"), submissions: primary},
		{name: "29 days 23 hours is new", setup: age(30*day - time.Hour),
			decision: decided("new_user", "primary"), tags: submitted("primary"), submissions: primary},
		{name: "30 days needs a payment", setup: age(30 * day), payLookups: 1,
			decision: refused("no_good_payment"), tags: notSubmitted("no_good_payment")},
		{name: "unknown join date needs a payment", payLookups: 1, setup: func(e *notifEnv) {
			u := notifUser
			u.DateJoined = time.Time{}
			e.users.Put(u)
		},
			decision: refused("no_good_payment"), tags: notSubmitted("no_good_payment")},
		// Gate 4: a good payment: primary, COMPLETED, within 40 days.
		{name: "old user without payments", setup: old, payLookups: 1,
			decision: refused("no_good_payment"), tags: notSubmitted("no_good_payment")},
		{name: "payment through secondary", setup: all(old, pays(payment("secondary", "COMPLETED", day))), payLookups: 1,
			decision: refused("no_good_payment"), tags: notSubmitted("no_good_payment")},
		{name: "payment not completed", setup: all(old, pays(payment("primary", "PENDING", day))), payLookups: 1,
			decision: refused("no_good_payment"), tags: notSubmitted("no_good_payment")},
		{name: "payment completed 41 days ago", setup: all(old, pays(payment("primary", "COMPLETED", 41*day))), payLookups: 1,
			decision: refused("no_good_payment"), tags: notSubmitted("no_good_payment")},
		{name: "payment without completion date", setup: all(old, pays(payment("primary", "COMPLETED", -1))), payLookups: 1,
			decision: refused("no_good_payment"), tags: notSubmitted("no_good_payment")},
		{name: "payment completed exactly 40 days ago", setup: all(old, pays(payment("primary", "COMPLETED", 40*day))), payLookups: 1,
			decision: decided("good_payment", "primary"), tags: submitted("primary"), submissions: primary},
		{name: "one good payment among bad ones", payLookups: 1, setup: all(old, pays(
			payment("secondary", "COMPLETED", day), payment("primary", "RETURNED", day), payment("primary", "COMPLETED", 3*day))),
			decision: decided("good_payment", "primary"), tags: submitted("primary"), submissions: primary},
		{name: "good payment, secondary by flag", payLookups: 1, setup: all(old, pays(payment("primary", "COMPLETED", day)),
			func(e *notifEnv) { e.flags.SetValue(prenote.ProviderFlag, "secondary") }),
			decision: decided("good_payment", "secondary"), tags: submitted("secondary"), submissions: secondary},
		{name: "payments error", setup: all(old, func(e *notifEnv) { e.payments.FailFor("u1", boom) }), payLookups: 1,
			decideErr: true, tags: notSubmitted("error")},
		{name: "provider flag error", setup: func(e *notifEnv) { e.flags.Fail(prenote.ProviderFlag, boom) },
			decideErr: true, tags: notSubmitted("error")},
		// Submission.
		{name: "primary answers 200: bad_response_code", setup: func(e *notifEnv) { e.submitter.Respond(200, nil) },
			decision: decided("new_user", "primary"), submissions: primary,
			tags: []string{"submitted:false", "submitted_reason:bad_response_code", "provider:primary"}},
		{name: "secondary answers 500: bad_response_code", setup: func(e *notifEnv) {
			e.flags.SetValue(prenote.ProviderFlag, "secondary")
			e.submitter.Respond(500, nil)
		}, decision: decided("new_user", "secondary"), submissions: secondary,
			tags: []string{"submitted:false", "submitted_reason:bad_response_code", "provider:secondary"}},
		{name: "submission error", setup: func(e *notifEnv) { e.submitter.Respond(0, boom) },
			decision: decided("new_user", "primary"), submissions: primary,
			tags: []string{"submitted:false", "submitted_reason:error", "provider:primary"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newNotifEnv(t)
			if tc.setup != nil {
				tc.setup(e)
			}
			failed := e.worker(t).HandleBatch(context.Background(), []notice.QueueMessage{{ID: "m1", Body: notifBody(t, notifMessage())}})
			require.Empty(t, failed, "a prenote outcome failed the message: %v", failed)
			require.Len(t, e.notifier.Sent(), 1, "notification not sent")
			tags := e.metricTags(t)
			if assert.Len(t, tags, 1, "metric tags %v, want [%v]", tags, tc.tags) {
				assert.Equal(t, tc.tags, tags[0], "metric tags %v, want [%v]", tags, tc.tags)
			}
			assert.Equal(t, tc.submissions, e.submitter.Submissions(), "submissions")
			assert.Len(t, e.payments.Calls(), tc.payLookups, "payment lookups")
			// The policy alone decides the same way (the worker adds only
			// the submission).
			u, err := e.users.GetUser(context.Background(), "u1")
			require.NoError(t, err)
			d, err := e.policy.Decide(context.Background(), u)
			assert.Equal(t, tc.decideErr, err != nil, "Decide: %+v, %v; want %+v (error %v)", d, err, tc.decision, tc.decideErr)
			assert.Equal(t, tc.decision, d, "Decide: %+v, %v; want %+v (error %v)", d, err, tc.decision, tc.decideErr)
		})
	}
}

// TestPolicyGateOrder checks the gates run in their documented order and
// stop at the first that decides: a disabled flag never looks at the bank
// link, a bad link never looks at payments.
func TestPolicyGateOrder(t *testing.T) {
	ctx := context.Background()
	e := newNotifEnv(t)
	e.flags.SetEnabled(prenote.EnabledFlag, false)
	_, err := e.policy.Decide(ctx, notifUser)
	require.NoError(t, err)
	require.Empty(t, e.accounts.Calls(), "flag off looked further: accounts")
	require.Empty(t, e.payments.Calls(), "flag off looked further: payments")
	e.flags.SetEnabled(prenote.EnabledFlag, true)
	e.accounts.Set("u1", prenote.BankLink{})
	u := notifUser
	u.DateJoined = notifNow.AddDate(-1, 0, 0)
	d, err := e.policy.Decide(ctx, u)
	require.NoError(t, err, "%+v", d)
	require.Equal(t, prenote.ReasonNoUsableBankLink, d.Reason, "%+v", d)
	require.Empty(t, e.payments.Calls(), "bad link looked at payments")
	want := []prenotetest.FlagCall{{Flag: prenote.EnabledFlag, UserID: "u1"}, {Flag: prenote.EnabledFlag, UserID: "u1"}}
	require.Equal(t, want, e.flags.Calls(), "flag calls")
}

func TestNewDefaultPolicyConfig(t *testing.T) {
	flags, accounts, payments := &prenotetest.FeatureFlags{}, &prenotetest.BankAccounts{}, &prenotetest.Payments{}
	ok := prenote.PolicyConfig{Flags: flags, Accounts: accounts, Payments: payments}
	for _, tc := range []struct {
		mut  func(*prenote.PolicyConfig)
		want string
	}{
		{func(c *prenote.PolicyConfig) { c.Flags = nil }, "Flags"},
		{func(c *prenote.PolicyConfig) { c.Accounts = nil }, "Accounts"},
		{func(c *prenote.PolicyConfig) { c.Payments = nil }, "Payments"},
		{func(c *prenote.PolicyConfig) { c.NewUserDays = -1 }, "NewUserDays"},
		{func(c *prenote.PolicyConfig) { c.GoodPaymentDays = -1 }, "GoodPaymentDays"},
	} {
		cfg := ok
		tc.mut(&cfg)
		_, err := prenote.NewDefaultPolicy(cfg)
		assert.ErrorContains(t, err, tc.want, "want an error naming %s", tc.want)
	}

	// Custom flag names, providers and thresholds replace the defaults.
	clock := billingtest.NewClock(notifNow)
	cfg := prenote.PolicyConfig{Flags: flags, Accounts: accounts, Payments: payments, Clock: clock,
		EnabledFlag: "my.prenotes", ProviderFlag: "my.provider", NewUserDays: 7, GoodPaymentDays: 3,
		Provider: "ach", AlternateProvider: "ach2", AlternateAccount: "acct", GoodPaymentProvider: "cards"}
	p, err := prenote.NewDefaultPolicy(cfg)
	require.NoError(t, err)
	flags.SetEnabled("my.prenotes", true)
	flags.SetValue("my.provider", "ach2")
	accounts.Set("u1", prenote.BankLink{PrimaryAccountID: "a", Accounts: []prenote.BankAccount{{ID: "a"}}})
	payments.Set("u1", prenote.Payment{Provider: "cards", Status: "COMPLETED", CompletionDate: notifNow.AddDate(0, 0, -4)})
	u := billing.User{ID: "u1", DateJoined: notifNow.AddDate(0, 0, -8)}
	d, err := p.Decide(context.Background(), u)
	require.NoError(t, err, "8-day-old user, 4-day-old payment: %+v", d)
	require.Equal(t, prenote.ReasonNoGoodPayment, d.Reason, "8-day-old user, 4-day-old payment: %+v", d)
	u.DateJoined = notifNow.AddDate(0, 0, -6)
	d, err = p.Decide(context.Background(), u)
	require.NoError(t, err, "6-day-old user")
	require.Equal(t, prenote.Decision{Submit: true, Reason: "new_user", Provider: "ach2", Account: "acct"}, d, "6-day-old user")
	payments.Set("u1", prenote.Payment{Provider: "cards", Status: "COMPLETED", CompletionDate: notifNow.AddDate(0, 0, -2)})
	flags.SetValue("my.provider", "other")
	u.DateJoined = notifNow.AddDate(0, 0, -8)
	d, err = p.Decide(context.Background(), u)
	require.NoError(t, err, "GoodPaymentProvider")
	require.Equal(t, prenote.Decision{Submit: true, Reason: "good_payment", Provider: "ach"}, d, "GoodPaymentProvider")
}

// TestDefaultPolicyDefaults checks the provider names a policy uses
// when the host names none: "default", or "alternate" under the account
// "subscription" when the provider flag says so; a good payment went
// through "default".
func TestDefaultPolicyDefaults(t *testing.T) {
	flags, accounts, payments := &prenotetest.FeatureFlags{}, &prenotetest.BankAccounts{}, &prenotetest.Payments{}
	p, err := prenote.NewDefaultPolicy(prenote.PolicyConfig{Flags: flags, Accounts: accounts, Payments: payments,
		Clock: billingtest.NewClock(notifNow)})
	require.NoError(t, err)
	flags.SetEnabled(prenote.EnabledFlag, true)
	accounts.Set("u1", prenote.BankLink{PrimaryAccountID: "a", Accounts: []prenote.BankAccount{{ID: "a"}}})
	payments.Set("u1", prenote.Payment{Provider: prenote.ProviderDefault, Status: "COMPLETED", CompletionDate: notifNow.AddDate(0, 0, -1)})
	u := billing.User{ID: "u1", DateJoined: notifNow.AddDate(-1, 0, 0)}
	d, err := p.Decide(context.Background(), u)
	require.NoError(t, err, "default provider")
	require.Equal(t, prenote.Decision{Submit: true, Reason: "good_payment", Provider: "default"}, d, "default provider")
	flags.SetValue(prenote.ProviderFlag, prenote.ProviderAlternate)
	want := prenote.Decision{Submit: true, Reason: "good_payment", Provider: "alternate", Account: "subscription"}
	d, err = p.Decide(context.Background(), u)
	require.NoError(t, err, "alternate provider")
	require.Equal(t, want, d, "alternate provider")
}

func TestPolicyFunc(t *testing.T) {
	e := newNotifEnv(t)
	e.step.Policy = prenote.PolicyFunc(func(_ context.Context, u billing.User) (prenote.Decision, error) {
		return prenote.Decision{Submit: true, Reason: "always", Provider: "acme"}, nil
	})
	failed := e.worker(t).HandleBatch(context.Background(), []notice.QueueMessage{{ID: "m", Body: notifBody(t, notifMessage())}})
	require.Empty(t, failed)
	subs := e.submitter.Submissions()
	require.Len(t, subs, 1, "submissions %+v", subs)
	require.Equal(t, "acme", subs[0].Provider, "submissions %+v", subs)
	require.Empty(t, subs[0].Request.Email, "submissions %+v", subs)
	require.EqualValues(t, 1, e.metrics.Total(prenote.MetricName, "submitted:true", "provider:acme"), "metrics %+v", e.metrics.Counts())
	// A decision with an Account sends it with the user's email.
	e = newNotifEnv(t)
	e.step.Policy = prenote.PolicyFunc(func(_ context.Context, u billing.User) (prenote.Decision, error) {
		return prenote.Decision{Submit: true, Reason: "always", Provider: "acme", Account: "acct-9"}, nil
	})
	failed = e.worker(t).HandleBatch(context.Background(), []notice.QueueMessage{{ID: "m", Body: notifBody(t, notifMessage())}})
	require.Empty(t, failed)
	want := []prenotetest.Submission{{Provider: "acme", Request: prenote.Request{
		UserID: "u1", FirstName: "Ann", LastName: "Lee", Email: "ann@example.com", Account: "acct-9"}}}
	require.Equal(t, want, e.submitter.Submissions(), "submissions")
}
