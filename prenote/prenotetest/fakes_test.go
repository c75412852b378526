package prenotetest_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/dynabill/billing/prenote"
	"github.com/dynabill/billing/prenote/prenotetest"
	"github.com/stretchr/testify/require"
)

func TestFakesScriptAndRecord(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("boom")

	accounts := &prenotetest.BankAccounts{}
	l, err := accounts.BankLink(ctx, "u1")
	require.NoError(t, err)
	require.False(t, l.Usable(), "%+v", l)
	accounts.Set("u1", prenote.BankLink{PrimaryAccountID: "a", Accounts: []prenote.BankAccount{{ID: "a", Mask: "1234"}}})
	l, err = accounts.BankLink(ctx, "u1")
	require.NoError(t, err)
	a, ok := l.Primary()
	require.True(t, ok, "%+v", l)
	require.Equal(t, "1234", a.Mask, "%+v", l)
	l.Accounts[0].Mask = "changed" // a copy
	l2, _ := accounts.BankLink(ctx, "u1")
	require.Equal(t, "1234", l2.Accounts[0].Mask, "link shared with the caller")
	accounts.FailFor("u1", boom)
	_, err = accounts.BankLink(ctx, "u1")
	require.ErrorIs(t, err, boom)

	payments := &prenotetest.Payments{}
	payments.Set("u1", prenote.Payment{ID: "p1"})
	ps, err := payments.Payments(ctx, "u1")
	require.NoError(t, err)
	require.Len(t, ps, 1)
	payments.FailFor("u1", boom)
	_, err = payments.Payments(ctx, "u1")
	require.ErrorIs(t, err, boom)
	require.Len(t, payments.Calls(), 2)

	flags := &prenotetest.FeatureFlags{}
	on, err := flags.Enabled(ctx, "f", "u1")
	require.NoError(t, err, "unset flag on")
	require.False(t, on, "unset flag on")
	flags.SetEnabled("f", true)
	flags.SetEnabledFor("f", "u2", false)
	flags.SetValue("v", "secondary")
	flags.SetValueFor("v", "u2", "primary")
	for _, tc := range []struct {
		user string
		on   bool
		v    string
	}{{"u1", true, "secondary"}, {"u2", false, "primary"}} {
		on, _ := flags.Enabled(ctx, "f", tc.user)
		v, _ := flags.Value(ctx, "v", tc.user)
		require.Equal(t, tc.on, on, "%s: %v %q", tc.user, on, v)
		require.Equal(t, tc.v, v, "%s: %v %q", tc.user, on, v)
	}
	flags.Fail("f", boom)
	_, err = flags.Enabled(ctx, "f", "u1")
	require.ErrorIs(t, err, boom)
	_, err = flags.Value(ctx, "v", "u1")
	require.NoError(t, err, "failure of f leaked to v")

	sub := &prenotetest.Submitter{}
	sub.Respond(500, nil)
	sub.Respond(0, boom)
	for i, want := range []struct {
		code int
		err  error
	}{{500, nil}, {0, boom}, {201, nil}} {
		code, err := sub.Submit(ctx, "primary", prenote.Request{UserID: fmt.Sprint(i)})
		require.Equal(t, want.code, code, "call %d: %d %v", i, code, err)
		require.ErrorIs(t, err, want.err, "call %d: %d %v", i, code, err)
	}
	subs := sub.Submissions()
	require.Len(t, subs, 3, "submissions %+v", subs)
	require.Equal(t, "2", subs[2].Request.UserID, "submissions %+v", subs)
	require.Equal(t, "primary", subs[0].Provider, "submissions %+v", subs)

	m := &prenotetest.MetricsRecorder{}
	m.Count(ctx, "a", 1, []string{"x:1", "y:2"})
	m.Count(ctx, "a", 2, []string{"x:1"})
	m.Count(ctx, "b", 5, nil)
	require.EqualValues(t, 3, m.Total("a"), "counts %+v", m.Counts())
	require.EqualValues(t, 3, m.Total("a", "x:1"), "counts %+v", m.Counts())
	require.EqualValues(t, 1, m.Total("a", "y:2"), "counts %+v", m.Counts())
	require.Zero(t, m.Total("b", "x:1"), "counts %+v", m.Counts())
	require.Len(t, m.Counts(), 3, "counts %+v", m.Counts())
}

func TestFakesConcurrent(t *testing.T) {
	ctx := context.Background()
	m := &prenotetest.MetricsRecorder{}
	s := &prenotetest.Submitter{}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			m.Count(ctx, "c", 1, nil)
			_, _ = s.Submit(ctx, "primary", prenote.Request{})
		})
	}
	wg.Wait()
	require.EqualValues(t, 20, m.Total("c"), "lost calls")
	require.Len(t, s.Submissions(), 20, "lost calls")
}
