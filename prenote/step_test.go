package prenote_test

import (
	"context"
	"errors"
	"testing"

	"github.com/dynabill/billing/prenote"
	"github.com/dynabill/billing/prenote/prenotetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNewStepConfig checks the step's required fields and its defaults
// (what the prenote fields of WorkerConfig did before
// the step left package billing).
func TestNewStepConfig(t *testing.T) {
	e := newNotifEnv(t)
	for _, tc := range []struct {
		mut  func(*prenote.StepConfig)
		want string
	}{
		{func(c *prenote.StepConfig) { c.Policy = nil }, "Policy"},
		{func(c *prenote.StepConfig) { c.Submitter = nil }, "Submitter"},
	} {
		cfg := e.step
		tc.mut(&cfg)
		_, err := prenote.NewStep(cfg)
		assert.ErrorContains(t, err, tc.want, "want an error naming %s", tc.want)
	}
	// Metrics and the metric name have defaults.
	cfg := e.step
	cfg.Metrics = nil
	step, err := prenote.NewStep(cfg)
	require.NoError(t, err)
	step.AfterSend(context.Background(), notifUser)
	require.Len(t, e.submitter.Submissions(), 1, "submitted without Metrics")

	e.step.MetricName = "custom.prenotes"
	_, err = e.worker(t).Handle(context.Background(), notifMessage())
	require.NoError(t, err)
	require.EqualValues(t, 1, e.metrics.Total("custom.prenotes", "submitted:true"), "custom metric name not used: %+v", e.metrics.Counts())
}

// TestAccountMask checks the adapter gives the worker the primary
// account's last four characters, "" without a primary account, and the
// lookup's error.
func TestAccountMask(t *testing.T) {
	ctx := context.Background()
	accounts := &prenotetest.BankAccounts{}
	mask := prenote.AccountMask(accounts)
	accounts.Set("long", prenote.BankLink{PrimaryAccountID: "a", Accounts: []prenote.BankAccount{{ID: "b", Mask: "0000"}, {ID: "a", Mask: "123456789"}}})
	accounts.Set("short", prenote.BankLink{PrimaryAccountID: "a", Accounts: []prenote.BankAccount{{ID: "a", Mask: "89"}}})
	accounts.Set("no primary", prenote.BankLink{Accounts: []prenote.BankAccount{{ID: "a", Mask: "4321"}}})
	accounts.Set("primary gone", prenote.BankLink{PrimaryAccountID: "x", Accounts: []prenote.BankAccount{{ID: "a", Mask: "4321"}}})
	for user, want := range map[string]string{"long": "6789", "short": "89", "no primary": "", "primary gone": "", "no link": ""} {
		got, err := mask(ctx, user)
		require.NoError(t, err, user)
		assert.Equal(t, want, got, user)
	}
	boom := errors.New("boom")
	accounts.FailFor("long", boom)
	_, err := mask(ctx, "long")
	require.ErrorIs(t, err, boom)
}
