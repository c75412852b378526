package billingtest_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
	if q.Calls() != 4 || !slices.Equal(q.Bodies(), []string{"a", "b"}) || len(q.Batches()) != 1 {
		t.Fatalf("calls %d bodies %v", q.Calls(), q.Bodies())
	}
	m := billing.NotificationMessage{UserID: "u1", BillingDate: time.Date(2024, 3, 14, 0, 0, 0, 0, time.UTC), Amount: 499}
	b, err := m.MarshalJSON()
	require.NoError(t, err)
	q.Reset()
	require.NoError(t, q.Enqueue(ctx, []string{string(b)}))
	if got := q.Messages(t); len(got) != 1 || got[0] != m {
		t.Fatalf("messages %+v", got)
	}
}

func TestNotifierFakesScriptAndRecord(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("boom")

	n := &billingtest.RecordingNotifier{}
	n.FailFor("x@example.com", boom)
	if err := n.Send(ctx, "x@example.com", billing.ThreeDayNotification{}); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	require.NoError(t, n.Send(ctx, "y@example.com", billing.ThreeDayNotification{UserID: "y"}))
	n.FailAll(boom)
	if err := n.Send(ctx, "y@example.com", billing.ThreeDayNotification{}); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if s := n.Sent(); len(s) != 1 || s[0].Email != "y@example.com" || s[0].Notification.UserID != "y" {
		t.Fatalf("sent %+v", s)
	}

	users := billingtest.NewUserDirectory(billing.User{ID: "u1", Status: "ACTIVE"})
	if u, err := users.GetUser(ctx, "u1"); err != nil || u.Status != "ACTIVE" {
		t.Fatal(u, err)
	}
	if _, err := users.GetUser(ctx, "u2"); !errors.Is(err, billing.ErrNotFound) {
		t.Fatal(err)
	}
	users.FailFor("u1", boom)
	if _, err := users.GetUser(ctx, "u1"); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if !slices.Equal(users.Calls(), []string{"u1", "u2", "u1"}) {
		t.Fatal(users.Calls())
	}

	accounts := &billingtest.BankAccounts{}
	if l, err := accounts.BankLink(ctx, "u1"); err != nil || l.Usable() {
		t.Fatal(l, err)
	}
	accounts.Set("u1", billing.BankLink{PrimaryAccountID: "a", Accounts: []billing.BankAccount{{ID: "a", Mask: "1234"}}})
	l, err := accounts.BankLink(ctx, "u1")
	if a, ok := l.Primary(); err != nil || !ok || a.Mask != "1234" {
		t.Fatal(l, err)
	}
	l.Accounts[0].Mask = "changed" // a copy
	if l, _ := accounts.BankLink(ctx, "u1"); l.Accounts[0].Mask != "1234" {
		t.Fatal("link shared with the caller")
	}
	accounts.FailFor("u1", boom)
	if _, err := accounts.BankLink(ctx, "u1"); !errors.Is(err, boom) {
		t.Fatal(err)
	}

	payments := &billingtest.UserPayments{}
	payments.Set("u1", billing.UserPayment{ID: "p1"})
	if ps, err := payments.Payments(ctx, "u1"); err != nil || len(ps) != 1 {
		t.Fatal(ps, err)
	}
	payments.FailFor("u1", boom)
	if _, err := payments.Payments(ctx, "u1"); !errors.Is(err, boom) || len(payments.Calls()) != 2 {
		t.Fatal(err)
	}

	flags := &billingtest.FeatureFlags{}
	if on, err := flags.Enabled(ctx, "f", "u1"); on || err != nil {
		t.Fatal("unset flag on")
	}
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
		if on != tc.on || v != tc.v {
			t.Fatalf("%s: %v %q", tc.user, on, v)
		}
	}
	flags.Fail("f", boom)
	if _, err := flags.Enabled(ctx, "f", "u1"); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if _, err := flags.Value(ctx, "v", "u1"); err != nil {
		t.Fatal("failure of f leaked to v")
	}

	sub := &billingtest.PrenoteSubmitter{}
	sub.Respond(500, nil)
	sub.Respond(0, boom)
	for i, want := range []struct {
		code int
		err  error
	}{{500, nil}, {0, boom}, {201, nil}} {
		code, err := sub.Submit(ctx, "primary", billing.PrenoteRequest{UserID: fmt.Sprint(i)})
		if code != want.code || !errors.Is(err, want.err) {
			t.Fatalf("call %d: %d %v", i, code, err)
		}
	}
	if s := sub.Submissions(); len(s) != 3 || s[2].Request.UserID != "2" || s[0].Provider != "primary" {
		t.Fatalf("submissions %+v", s)
	}

	m := &billingtest.MetricsRecorder{}
	m.Count(ctx, "a", 1, []string{"x:1", "y:2"})
	m.Count(ctx, "a", 2, []string{"x:1"})
	m.Count(ctx, "b", 5, nil)
	if m.Total("a") != 3 || m.Total("a", "x:1") != 3 || m.Total("a", "y:2") != 1 || m.Total("b", "x:1") != 0 || len(m.Counts()) != 3 {
		t.Fatalf("counts %+v", m.Counts())
	}
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
	if len(q.Bodies()) != 20 || len(n.Sent()) != 20 || m.Total("c") != 20 || len(s.Submissions()) != 20 {
		t.Fatal("lost calls")
	}
}
