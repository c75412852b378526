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
	"github.com/dynabill/billing/notice"
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
	m := notice.Message{UserID: "u1", BillingDate: time.Date(2024, 3, 14, 0, 0, 0, 0, time.UTC), Amount: 499}
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
	require.ErrorIs(t, n.Send(ctx, "x@example.com", billing.RenewalNotice{}), boom)
	require.NoError(t, n.Send(ctx, "y@example.com", billing.RenewalNotice{UserID: "y"}))
	n.FailAll(boom)
	require.ErrorIs(t, n.Send(ctx, "y@example.com", billing.RenewalNotice{}), boom)
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
}

func TestNotifierFakesConcurrent(t *testing.T) {
	ctx := context.Background()
	q := &billingtest.RecordingEnqueuer{}
	n := &billingtest.RecordingNotifier{}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			_ = q.Enqueue(ctx, []string{fmt.Sprint(i)})
			_ = n.Send(ctx, fmt.Sprint(i), billing.RenewalNotice{})
		})
	}
	wg.Wait()
	require.Len(t, q.Bodies(), 20, "lost calls")
	require.Len(t, n.Sent(), 20, "lost calls")
}
