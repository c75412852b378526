package notice_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/notice"
)

// scriptedClaimer is a notice.ReminderClaimer whose answers are scripted
// and whose calls are recorded.
type scriptedClaimer struct {
	mu         sync.Mutex
	claimErr   error
	releaseErr error
	claims     []notice.Reminder
	claimedAt  []time.Time
	releases   []notice.ReminderClaim
	releaseCtx []error // ctx.Err() of each release
}

func (c *scriptedClaimer) ClaimReminder(_ context.Context, r notice.Reminder, at time.Time) (notice.ReminderClaim, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.claims = append(c.claims, r)
	c.claimedAt = append(c.claimedAt, at)
	if c.claimErr != nil {
		return notice.ReminderClaim{}, c.claimErr
	}
	return notice.ReminderClaim{Reminder: r, At: at, Token: "tok"}, nil
}

func (c *scriptedClaimer) ReleaseReminder(ctx context.Context, claim notice.ReminderClaim) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.releases = append(c.releases, claim)
	c.releaseCtx = append(c.releaseCtx, ctx.Err())
	return c.releaseErr
}

// TestWorkerReminderClaimBranches covers the worker's claim step: the
// claim carries the message's record and the clock's time and comes after
// the lookups; a duplicate or a changed record is skipped without a send
// or prenote; another claim error fails the message; a failed send
// releases the claim, with a live context even when the message's is done,
// and a failed release is joined to the send's error.
func TestWorkerReminderClaimBranches(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name       string
		claimErr   error
		releaseErr error
		sendErr    error
		cancel     bool // the send cancels the message's context, then fails
		want       notice.Outcome
		wantErr    []error
		sent       int
		released   bool
	}{
		{name: "claimed: sent, prenote", want: notice.Sent, sent: 1},
		{name: "already claimed: duplicate", claimErr: billing.ErrReminderClaimed, want: notice.SkippedDuplicate},
		{name: "record changed: skipped", want: notice.SkippedRecordChanged,
			claimErr: &billing.ConflictError{Op: "claim reminder", Key: "k", Reason: "gone", Err: billing.ErrConflict}},
		{name: "claim error: failure", claimErr: boom, wantErr: []error{boom}},
		{name: "send error: released", sendErr: boom, wantErr: []error{boom}, released: true},
		{name: "send error, release error: both", sendErr: boom, releaseErr: billing.ErrConflict,
			wantErr: []error{boom, billing.ErrConflict}, released: true},
		{name: "send times out: released with a live context", sendErr: context.Canceled, cancel: true,
			wantErr: []error{context.Canceled}, released: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newNotifEnv(t)
			claimer := &scriptedClaimer{claimErr: tc.claimErr, releaseErr: tc.releaseErr}
			e.cfg.Reminders, e.cfg.Clock = claimer, e.clock
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			notifier := billing.Notifier(e.notifier)
			if tc.sendErr != nil {
				notifier = notifierFunc(func(context.Context, string, billing.RenewalNotice) error {
					if tc.cancel {
						cancel()
					}
					return tc.sendErr
				})
			}
			e.cfg.Notifier = notifier
			m := notifMessage()
			out, err := e.worker(t).Handle(ctx, m)
			if tc.wantErr == nil {
				require.NoError(t, err)
				assert.Equal(t, tc.want, out)
			} else {
				for _, want := range tc.wantErr {
					assert.ErrorIs(t, err, want)
				}
			}
			require.Equal(t, []notice.Reminder{m.Reminder()}, claimer.claims)
			assert.Equal(t, []time.Time{notifNow}, claimer.claimedAt)
			assert.Len(t, e.users.Calls(), 1, "the claim comes after the user lookup")
			assert.Len(t, e.notifier.Sent(), tc.sent)
			assert.Len(t, e.submitter.Submissions(), tc.sent, "a prenote only after a send")
			if tc.released {
				require.Len(t, claimer.releases, 1)
				assert.Equal(t, "tok", claimer.releases[0].Token)
				assert.NoError(t, claimer.releaseCtx[0], "the release runs on a live context")
			} else {
				assert.Empty(t, claimer.releases)
			}
		})
	}
}

type notifierFunc func(ctx context.Context, email string, n billing.RenewalNotice) error

func (f notifierFunc) Send(ctx context.Context, email string, n billing.RenewalNotice) error {
	return f(ctx, email, n)
}

// TestWorkerReminderSkipsBeforeClaim: a message the worker skips before
// sending (pending cancellation, inactive user) never claims, so the
// record stays free for a later message.
func TestWorkerReminderSkipsBeforeClaim(t *testing.T) {
	e := newNotifEnv(t)
	claimer := &scriptedClaimer{}
	e.cfg.Reminders = claimer
	m := notifMessage()
	m.UpdatedEvent = billing.UpdatedPendingCancellation
	out, err := e.worker(t).Handle(t.Context(), m)
	require.NoError(t, err)
	assert.Equal(t, notice.SkippedPendingCancellation, out)
	e.users.Put(billing.User{ID: "u1", Email: "ann@example.com", Status: "SUSPENDED"})
	out, err = e.worker(t).Handle(t.Context(), notifMessage())
	require.NoError(t, err)
	assert.Equal(t, notice.SkippedInactiveUser, out)
	assert.Empty(t, claimer.claims)
}
