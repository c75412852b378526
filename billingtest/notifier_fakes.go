package billingtest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/notice"
)

// Fakes for the notifier's ports. Each records its calls, can be scripted to
// fail, and is safe for concurrent use. The zero value of each is ready to
// use (no users, nothing enqueued or sent). The legacy prenote step's fakes
// are in package prenote/prenotetest.

var (
	_ notice.Enqueuer       = (*RecordingEnqueuer)(nil)
	_ billing.Notifier      = (*RecordingNotifier)(nil)
	_ billing.UserDirectory = (*UserDirectory)(nil)
)

// errorScript holds scripted errors: per key, and for every key.
type errorScript struct {
	all error
	by  map[string]error
}

func (s *errorScript) set(key string, err error) {
	if s.by == nil {
		s.by = map[string]error{}
	}
	s.by[key] = err
}

func (s *errorScript) get(key string) error {
	if err := s.by[key]; err != nil {
		return err
	}
	return s.all
}

// RecordingEnqueuer is a [notice.Enqueuer] that keeps every batch it
// accepts, in order.
type RecordingEnqueuer struct {
	mu      sync.Mutex
	calls   int
	failNth map[int]error
	batches [][]string
}

// Enqueue implements [notice.Enqueuer]. It rejects an empty batch or one
// of more than [notice.MaxEnqueueBatch] bodies, as SQS does, and fails
// the calls scripted with FailNth; a failed batch is not kept.
func (q *RecordingEnqueuer) Enqueue(ctx context.Context, bodies []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.calls++
	if err := q.failNth[q.calls]; err != nil {
		return err
	}
	if len(bodies) == 0 || len(bodies) > notice.MaxEnqueueBatch {
		return fmt.Errorf("billingtest: Enqueue: batch of %d bodies (SQS takes 1 to %d)", len(bodies), notice.MaxEnqueueBatch)
	}
	q.batches = append(q.batches, slices.Clone(bodies))
	return nil
}

// FailNth makes the n-th call of Enqueue (counting from 1, over the
// enqueuer's life) return err.
func (q *RecordingEnqueuer) FailNth(n int, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.failNth == nil {
		q.failNth = map[int]error{}
	}
	q.failNth[n] = err
}

// Calls returns the number of Enqueue calls, failed ones included.
func (q *RecordingEnqueuer) Calls() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.calls
}

// Batches returns the accepted batches, in order.
func (q *RecordingEnqueuer) Batches() [][]string {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([][]string, len(q.batches))
	for i, b := range q.batches {
		out[i] = slices.Clone(b)
	}
	return out
}

// Bodies returns every accepted body, in order.
func (q *RecordingEnqueuer) Bodies() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []string
	for _, b := range q.batches {
		out = append(out, b...)
	}
	return out
}

// Messages parses every accepted body; a body that does not parse fails t.
func (q *RecordingEnqueuer) Messages(t testing.TB) []notice.Message {
	t.Helper()
	bodies := q.Bodies()
	out := make([]notice.Message, 0, len(bodies))
	for i, b := range bodies {
		m, err := notice.ParseMessage([]byte(b))
		if err != nil {
			t.Fatalf("billingtest: enqueued body %d does not parse: %v\n%s", i, err, b)
		}
		out = append(out, m)
	}
	return out
}

// Reset forgets the batches and the call count (not the scripted failures).
func (q *RecordingEnqueuer) Reset() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.calls, q.batches = 0, nil
}

// SentNotification is one notification a [RecordingNotifier] delivered.
type SentNotification struct {
	Email        string
	Notification billing.RenewalNotice
}

// RecordingNotifier is a [billing.Notifier] that keeps what it delivers.
type RecordingNotifier struct {
	mu   sync.Mutex
	errs errorScript
	sent []SentNotification
}

// Send implements [billing.Notifier]: it fails with the error scripted for
// the email (or for all), else records the notification.
func (n *RecordingNotifier) Send(ctx context.Context, email string, note billing.RenewalNotice) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.errs.get(email); err != nil {
		return err
	}
	n.sent = append(n.sent, SentNotification{Email: email, Notification: note})
	return nil
}

// FailFor makes Send to email fail with err (nil clears it).
func (n *RecordingNotifier) FailFor(email string, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.errs.set(email, err)
}

// FailAll makes every Send fail with err (nil clears it).
func (n *RecordingNotifier) FailAll(err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.errs.all = err
}

// Sent returns the delivered notifications, in order.
func (n *RecordingNotifier) Sent() []SentNotification {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.sent)
}

// UserDirectory is a [billing.UserDirectory] over a map of users.
type UserDirectory struct {
	mu    sync.Mutex
	users map[string]billing.User
	errs  errorScript
	calls []string
}

// NewUserDirectory returns a directory holding users.
func NewUserDirectory(users ...billing.User) *UserDirectory {
	d := &UserDirectory{}
	for _, u := range users {
		d.Put(u)
	}
	return d
}

// Put adds or replaces a user.
func (d *UserDirectory) Put(u billing.User) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.users == nil {
		d.users = map[string]billing.User{}
	}
	d.users[u.ID] = u
}

// FailFor makes GetUser of userID fail with err (nil clears it).
func (d *UserDirectory) FailFor(userID string, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.errs.set(userID, err)
}

// GetUser implements [billing.UserDirectory]. An unknown user is an error
// wrapping [billing.ErrNotFound].
func (d *UserDirectory) GetUser(ctx context.Context, userID string) (billing.User, error) {
	if err := ctx.Err(); err != nil {
		return billing.User{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, userID)
	if err := d.errs.get(userID); err != nil {
		return billing.User{}, err
	}
	u, ok := d.users[userID]
	if !ok {
		return billing.User{}, fmt.Errorf("billingtest: user %s: %w", userID, billing.ErrNotFound)
	}
	return u, nil
}

// Calls returns the user IDs looked up, in order.
func (d *UserDirectory) Calls() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.calls)
}
