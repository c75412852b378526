package prenote_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/notice"
	"github.com/dynabill/billing/prenote"
	"github.com/dynabill/billing/prenote/prenotetest"
	"github.com/stretchr/testify/require"
)

// notifNow is the worker's clock: the notice is for a charge on 2024-03-14.
var notifNow = time.Date(2024, 3, 10, 12, 0, 0, 0, time.UTC)

// notifEnv is a notice.Worker wired to a fake for every port, with one
// ACTIVE new user "u1" whose prenote flag is on and whose bank link is
// usable, and the prenote step as its AfterSend. Its prenote providers are
// "primary" and "secondary" (submitted under the default account
// "subscription").
type notifEnv struct {
	clock     *billingtest.Clock
	users     *billingtest.UserDirectory
	notifier  *billingtest.RecordingNotifier
	accounts  *prenotetest.BankAccounts
	payments  *prenotetest.Payments
	flags     *prenotetest.FeatureFlags
	submitter *prenotetest.Submitter
	metrics   *prenotetest.MetricsRecorder
	policy    *prenote.DefaultPolicy
	step      prenote.StepConfig
}

var notifUser = billing.User{
	ID: "u1", Email: "ann@example.com", FirstName: "Ann", LastName: "Lee",
	Status: billing.UserStatusActive, DateJoined: notifNow.AddDate(0, 0, -10),
}

func newNotifEnv(t *testing.T) *notifEnv {
	t.Helper()
	e := &notifEnv{
		clock:     billingtest.NewClock(notifNow),
		users:     billingtest.NewUserDirectory(notifUser),
		notifier:  &billingtest.RecordingNotifier{},
		accounts:  &prenotetest.BankAccounts{},
		payments:  &prenotetest.Payments{},
		flags:     &prenotetest.FeatureFlags{},
		submitter: &prenotetest.Submitter{},
		metrics:   &prenotetest.MetricsRecorder{},
	}
	e.accounts.Set("u1", prenote.BankLink{PrimaryAccountID: "acc-1", Accounts: []prenote.BankAccount{
		{ID: "acc-2", Mask: "4321"}, {ID: "acc-1", Mask: "123456789"},
	}})
	e.flags.SetEnabled(prenote.EnabledFlag, true)
	policy, err := prenote.NewDefaultPolicy(prenote.PolicyConfig{
		Flags: e.flags, Accounts: e.accounts, Payments: e.payments, Clock: e.clock,
		Provider: "primary", AlternateProvider: "secondary",
	})
	require.NoError(t, err)
	e.policy = policy
	e.step = prenote.StepConfig{Policy: policy, Submitter: e.submitter, Metrics: e.metrics}
	return e
}

// worker returns a Worker that takes the notice's digits from the bank
// links and runs the step after each send.
func (e *notifEnv) worker(t *testing.T) *notice.Worker {
	t.Helper()
	step, err := prenote.NewStep(e.step)
	require.NoError(t, err)
	w, err := notice.NewWorker(notice.WorkerConfig{
		Users: e.users, Notifier: e.notifier,
		AccountMask: prenote.AccountMask(e.accounts), AfterSend: step.AfterSend,
	})
	require.NoError(t, err)
	return w
}

// metricTags returns the tags of every prenote count, and fails t if a
// count has another name or value.
func (e *notifEnv) metricTags(t *testing.T) [][]string {
	t.Helper()
	var out [][]string
	for _, c := range e.metrics.Counts() {
		if c.Name != prenote.MetricName || c.Value != 1 {
			t.Errorf("unexpected count %+v", c)
		}
		out = append(out, c.Tags)
	}
	return out
}

func notifMessage() notice.Message {
	return notice.Message{
		UserID: "u1", SubscriptionID: "s1", BillingDate: time.Date(2024, 3, 14, 15, 0, 0, 0, time.UTC),
		Amount: billing.Cents(499), Status: billing.StatusScheduled, TierName: "Plus:v2",
	}
}

func notifBody(t *testing.T, m notice.Message) string {
	t.Helper()
	b, err := json.Marshal(m)
	require.NoError(t, err)
	return string(b)
}
