package billingtest_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/stretchr/testify/require"
)

func TestNotifierFakeEnqueuer(t *testing.T) {
	ctx := context.Background()
	q := &billingtest.RecordingEnqueuer{}
	boom := errors.New("boom")
	q.FailNth(2, boom)
	require.NoError(t, q.Enqueue(ctx, []string{"a", "b"}))
	require.ErrorIs(t, q.Enqueue(ctx, []string{"c"}), boom, "second call")
	require.Error(t, q.Enqueue(ctx, nil), "empty batch accepted")
	require.Error(t, q.Enqueue(ctx, make([]string, 11)), "batch of 11 accepted")
	require.Equal(t, 4, q.Calls(), "calls %d bodies %v", q.Calls(), q.Bodies())
	require.Equal(t, []string{"a", "b"}, q.Bodies(), "calls %d bodies %v", q.Calls(), q.Bodies())
	require.Len(t, q.Batches(), 1, "calls %d bodies %v", q.Calls(), q.Bodies())
	m := billing.NotificationMessage{UserID: "u1", BillingDate: time.Date(2024, 3, 14, 0, 0, 0, 0, time.UTC), Amount: 499}
	b, err := m.MarshalJSON()
	require.NoError(t, err)
	q.Reset()
	require.NoError(t, q.Enqueue(ctx, []string{string(b)}))
	got := q.Messages(t)
	require.Len(t, got, 1, "messages %+v", got)
	require.Equal(t, m, got[0], "messages %+v", got)
}

func TestNotifierFakesScriptAndRecord(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("boom")

	n := &billingtest.RecordingNotifier{}
	n.FailFor("x@example.com", boom)
	require.ErrorIs(t, n.Send(ctx, "x@example.com", billing.ThreeDayNotification{}), boom)
	require.NoError(t, n.Send(ctx, "y@example.com", billing.ThreeDayNotification{UserID: "y"}))
	n.FailAll(boom)
	require.ErrorIs(t, n.Send(ctx, "y@example.com", billing.ThreeDayNotification{}), boom)
	s := n.Sent()
	require.Len(t, s, 1, "sent %+v", s)
	require.Equal(t, "y@example.com", s[0].Email, "sent %+v", s)
	require.Equal(t, "y", s[0].Notification.UserID, "sent %+v", s)

	users := billingtest.NewUserDirectory(billing.User{ID: "u1", Status: "ACTIVE"})
	u, err := users.GetUser(ctx, "u1")
	require.NoError(t, err)
	require.Equal(t, "ACTIVE", u.Status, "%+v", u)
	_, err = users.GetUser(ctx, "u2")
	require.ErrorIs(t, err, billing.ErrNotFound)
	users.FailFor("u1", boom)
	_, err = users.GetUser(ctx, "u1")
	require.ErrorIs(t, err, boom)
	require.Equal(t, []string{"u1", "u2", "u1"}, users.Calls())

	accounts := &billingtest.BankAccounts{}
	l, err := accounts.BankLink(ctx, "u1")
	require.NoError(t, err)
	require.False(t, l.Usable(), "%+v", l)
	accounts.Set("u1", billing.BankLink{PrimaryAccountID: "a", Accounts: []billing.BankAccount{{ID: "a", Mask: "1234"}}})
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

	payments := &billingtest.UserPayments{}
	payments.Set("u1", billing.UserPayment{ID: "p1"})
	ps, err := payments.Payments(ctx, "u1")
	require.NoError(t, err)
	require.Len(t, ps, 1)
	payments.FailFor("u1", boom)
	_, err = payments.Payments(ctx, "u1")
	require.ErrorIs(t, err, boom)
	require.Len(t, payments.Calls(), 2)

	flags := &billingtest.FeatureFlags{}
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

	sub := &billingtest.PrenoteSubmitter{}
	sub.Respond(500, nil)
	sub.Respond(0, boom)
	for i, want := range []struct {
		code int
		err  error
	}{{500, nil}, {0, boom}, {201, nil}} {
		code, err := sub.Submit(ctx, "primary", billing.PrenoteRequest{UserID: fmt.Sprint(i)})
		require.Equal(t, want.code, code, "call %d: %d %v", i, code, err)
		require.ErrorIs(t, err, want.err, "call %d: %d %v", i, code, err)
	}
	subs := sub.Submissions()
	require.Len(t, subs, 3, "submissions %+v", subs)
	require.Equal(t, "2", subs[2].Request.UserID, "submissions %+v", subs)
	require.Equal(t, "primary", subs[0].Provider, "submissions %+v", subs)

	m := &billingtest.MetricsRecorder{}
	m.Count(ctx, "a", 1, []string{"x:1", "y:2"})
	m.Count(ctx, "a", 2, []string{"x:1"})
	m.Count(ctx, "b", 5, nil)
	require.EqualValues(t, 3, m.Total("a"), "counts %+v", m.Counts())
	require.EqualValues(t, 3, m.Total("a", "x:1"), "counts %+v", m.Counts())
	require.EqualValues(t, 1, m.Total("a", "y:2"), "counts %+v", m.Counts())
	require.Zero(t, m.Total("b", "x:1"), "counts %+v", m.Counts())
	require.Len(t, m.Counts(), 3, "counts %+v", m.Counts())
}

func TestNotifierFakesConcurrent(t *testing.T) {
	ctx := context.Background()
	q := &billingtest.RecordingEnqueuer{}
	n := &billingtest.RecordingNotifier{}
	m := &billingtest.MetricsRecorder{}
	s := &billingtest.PrenoteSubmitter{}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			_ = q.Enqueue(ctx, []string{fmt.Sprint(i)})
			_ = n.Send(ctx, fmt.Sprint(i), billing.ThreeDayNotification{})
			m.Count(ctx, "c", 1, nil)
			_, _ = s.Submit(ctx, "primary", billing.PrenoteRequest{})
		})
	}
	wg.Wait()
	require.Len(t, q.Bodies(), 20, "lost calls")
	require.Len(t, n.Sent(), 20, "lost calls")
	require.EqualValues(t, 20, m.Total("c"), "lost calls")
	require.Len(t, s.Submissions(), 20, "lost calls")
}
