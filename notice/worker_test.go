package notice_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
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

// notifEnv is a Worker wired to a fake for every port, with one ACTIVE new
// user "u1" whose prenote flag is on and whose bank link is usable, and the
// legacy prenote step plugged in as its AfterSend. Its prenote providers are
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
	cfg       notice.WorkerConfig
	step      prenote.StepConfig // the AfterSend step; no step when its Policy is nil
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
	e.cfg = notice.WorkerConfig{
		Users: e.users, Notifier: e.notifier, AccountMask: prenote.AccountMask(e.accounts),
	}
	e.step = prenote.StepConfig{Policy: policy, Submitter: e.submitter, Metrics: e.metrics}
	return e
}

func (e *notifEnv) worker(t *testing.T) *notice.Worker {
	t.Helper()
	cfg := e.cfg
	if e.step.Policy != nil {
		step, err := prenote.NewStep(e.step)
		require.NoError(t, err)
		cfg.AfterSend = step.AfterSend
	}
	w, err := notice.NewWorker(cfg)
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

// TestWorkerBranches covers every branch of the worker flow in document
// 003, in its order: parse, decode, pending cancellation, user lookup,
// active check, test-environment filter, build (bank account), send,
// prenote.
func TestWorkerBranches(t *testing.T) {
	boom := errors.New("boom")
	sent := func(account, tier string) []billingtest.SentNotification {
		return []billingtest.SentNotification{{Email: "ann@example.com", Notification: billing.RenewalNotice{
			EventType: "three_day_notification", UserID: "u1", BillingDate: "03/14/2024",
			Amount: billing.Cents(499), MembershipTier: tier, Account: account,
		}}}
	}
	submittedPrimary := [][]string{{"submitted:true", "provider:primary"}}
	for _, tc := range []struct {
		name    string
		body    string                         // raw body; empty: the message below
		msg     func(*notice.Message)          // changes the default message
		setup   func(*notifEnv)                // scripts the fakes
		failed  bool                           // reported as a batch item failure
		lookups int                            // user lookups
		sent    []billingtest.SentNotification // what the Notifier got
		metrics [][]string                     // prenote metric tags
		submits int                            // prenote submissions
	}{
		// A body that cannot be parsed or decoded is dropped: no
		// redelivery could change it.
		{name: "parse error: not JSON: dropped", body: "hello"},
		{name: "parse error: wrong JSON types: dropped", body: `{"user_id": 5}`},
		{name: "decode error: bad amount: dropped",
			body: `{"event_type":"three_day_notification","user_id":"u1","billing_date":"2024-03-14T15:00:00Z","billing_amount":"4.999"}`},
		{name: "decode error: a continuation on the worker queue: dropped",
			body: `{"date":"20240314","status":"SCHEDULED","start_key":"tok"}`},
		{name: "pending cancellation: skipped before the user lookup",
			msg: func(m *notice.Message) { m.UpdatedEvent = billing.UpdatedPendingCancellation }},
		{name: "user lookup error: failure", failed: true, lookups: 1,
			setup: func(e *notifEnv) { e.users.FailFor("u1", boom) }},
		{name: "unknown user: failure", failed: true, lookups: 1,
			msg: func(m *notice.Message) { m.UserID = "ghost" }},
		{name: "user not active: skipped", lookups: 1,
			setup: func(e *notifEnv) { e.users.Put(billing.User{ID: "u1", Email: "ann@example.com", Status: "SUSPENDED"}) }},
		{name: "test environment: email not allowed: skipped", lookups: 1,
			setup: func(e *notifEnv) {
				e.cfg.AllowedEmailSuffixes = []string{"test.example.com", "qa.example.org"}
			}},
		{name: "test environment: allowed suffix, any case: sent", lookups: 1,
			setup: func(e *notifEnv) {
				e.cfg.AllowedEmailSuffixes = []string{"test.example.com", "EXAMPLE.com"}
			},
			sent: sent("6789", "Plus"), metrics: submittedPrimary, submits: 1},
		{name: "bank account lookup error: failure", failed: true, lookups: 1,
			setup: func(e *notifEnv) { e.accounts.FailFor("u1", boom) }},
		{name: "send error: failure, no prenote", failed: true, lookups: 1,
			setup: func(e *notifEnv) { e.notifier.FailFor("ann@example.com", boom) }},
		{name: "sent: date MM/DD/YYYY, amount, tier, last four; then the prenote", lookups: 1,
			sent: sent("6789", "Plus"), metrics: submittedPrimary, submits: 1},
		{name: "no tier: LITE", lookups: 1, msg: func(m *notice.Message) { m.TierName = "" },
			sent: sent("6789", "LITE"), metrics: submittedPrimary, submits: 1},
		{name: "no primary account: sent without digits, prenote no_good_plaid_item", lookups: 1,
			setup: func(e *notifEnv) {
				e.accounts.Set("u1", prenote.BankLink{Accounts: []prenote.BankAccount{{ID: "acc-2", Mask: "4321"}}})
			},
			sent: sent("", "Plus"), metrics: [][]string{{"submitted:false", "submitted_reason:no_good_plaid_item"}}},
		{name: "prenote error: logged and metered, not a failure", lookups: 1,
			setup: func(e *notifEnv) { e.flags.Fail(prenote.EnabledFlag, boom) },
			sent:  sent("6789", "Plus"), metrics: [][]string{{"submitted:false", "submitted_reason:error"}}},
		{name: "prenote refused: not a failure", lookups: 1,
			setup: func(e *notifEnv) { e.submitter.Respond(500, nil) },
			sent:  sent("6789", "Plus"), submits: 1,
			metrics: [][]string{{"submitted:false", "submitted_reason:bad_response_code", "provider:primary"}}},
		{name: "no prenote policy: no prenote step", lookups: 1,
			setup: func(e *notifEnv) { e.step.Policy = nil },
			sent:  sent("6789", "Plus")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newNotifEnv(t)
			if tc.setup != nil {
				tc.setup(e)
			}
			body := tc.body
			if body == "" {
				m := notifMessage()
				if tc.msg != nil {
					tc.msg(&m)
				}
				body = notifBody(t, m)
			}
			failed := e.worker(t).HandleBatch(context.Background(), []notice.QueueMessage{{ID: "m1", Body: body}})
			if got := len(failed) == 1 && failed[0] == "m1"; got != tc.failed || (!tc.failed && len(failed) != 0) {
				t.Errorf("failed IDs %v, want failed=%v", failed, tc.failed)
			}
			if n := len(e.users.Calls()); n != tc.lookups {
				t.Errorf("user lookups: %d, want %d", n, tc.lookups)
			}
			if got := e.notifier.Sent(); !slices.Equal(got, tc.sent) {
				t.Errorf("sent\n got %+v\nwant %+v", got, tc.sent)
			}
			if got := e.metricTags(t); fmt.Sprint(got) != fmt.Sprint(tc.metrics) {
				t.Errorf("metrics: got %v, want %v", got, tc.metrics)
			}
			if n := len(e.submitter.Submissions()); n != tc.submits {
				t.Errorf("prenote submissions: %d, want %d", n, tc.submits)
			}
		})
	}
}

func TestWorkerHandleOutcomes(t *testing.T) {
	ctx := context.Background()
	e := newNotifEnv(t)
	e.users.Put(billing.User{ID: "u2", Email: "bo@example.com", Status: "INACTIVE"})
	e.users.Put(billing.User{ID: "u3", Email: "cy@elsewhere.org", Status: billing.UserStatusActive})
	e.cfg.AllowedEmailSuffixes = []string{"@example.com"}
	w := e.worker(t)
	for _, tc := range []struct {
		mut  func(*notice.Message)
		want notice.Outcome
	}{
		{func(*notice.Message) {}, notice.Sent},
		{func(m *notice.Message) { m.UpdatedEvent = billing.UpdatedPendingCancellation }, notice.SkippedPendingCancellation},
		{func(m *notice.Message) { m.UserID = "u2" }, notice.SkippedInactiveUser},
		{func(m *notice.Message) { m.UserID = "u3" }, notice.SkippedTestEnvironment},
	} {
		m := notifMessage()
		tc.mut(&m)
		if got, err := w.Handle(ctx, m); err != nil || got != tc.want {
			t.Errorf("%s: got %q, %v; want %q", m.UserID, got, err, tc.want)
		}
	}
	m := notifMessage()
	m.UserID = "nobody"
	_, err := w.Handle(ctx, m)
	assert.ErrorIs(t, err, billing.ErrNotFound, "unknown user")
}

func TestWorkerBatchReportsOnlyFailures(t *testing.T) {
	e := newNotifEnv(t)
	e.users.Put(billing.User{ID: "u2", Email: "bo@example.com", Status: billing.UserStatusActive})
	e.users.FailFor("u3", errors.New("user service down"))
	e.notifier.FailFor("bo@example.com", errors.New("iterable down"))
	msg := func(user string) string {
		m := notifMessage()
		m.UserID = user
		return notifBody(t, m)
	}
	batch := []notice.QueueMessage{
		{ID: "a", Body: msg("u1")}, // sent
		{ID: "b", Body: "garbage"}, // parse error: dropped
		{ID: "c", Body: msg("u2")}, // send error
		{ID: "d", Body: msg("u3")}, // user service error
		{ID: "e", Body: msg("u1")}, // sent again
	}
	failed := e.worker(t).HandleBatch(context.Background(), batch)
	require.Equal(t, []string{"c", "d"}, failed, "failed IDs")
	require.Len(t, e.notifier.Sent(), 2, "sent %d", len(e.notifier.Sent()))

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if failed := e.worker(t).HandleBatch(ctx, batch[:2]); !slices.Equal(failed, []string{"a", "b"}) {
		t.Fatalf("cancelled: failed %v", failed)
	}
}

// TestWorkerBatchDropsInvalidMessages: a body that no delivery can ever
// handle is acknowledged (left out of the failed IDs, so that SQS does not
// redeliver it for ever), logged once at error level with its message ID
// and a short reason, never the body; transient failures beside it still
// go back to the queue.
func TestWorkerBatchDropsInvalidMessages(t *testing.T) {
	e := newNotifEnv(t)
	var logs bytes.Buffer
	e.cfg.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e.users.FailFor("u3", errors.New("user service down"))
	e.notifier.FailFor("bo@example.com", errors.New("channel down"))
	e.users.Put(billing.User{ID: "u2", Email: "bo@example.com", Status: billing.UserStatusActive})
	msg := func(user string) string {
		m := notifMessage()
		m.UserID = user
		return notifBody(t, m)
	}
	// secret stands for what a body may carry that must not be logged.
	secret := strings.Repeat("S3CRET", 200)
	record := func(fields string) string {
		return `{"event_type":"three_day_notification","billing_date":"2024-03-14T15:00:00Z",` + fields + `}`
	}
	invalid := []struct{ id, body, field string }{
		{id: "not-json", body: "hello " + secret},
		{id: "truncated", body: `{"user_id":"` + secret},
		{id: "wrong-type", body: `{"user_id": 5, "note": "` + secret + `"}`},
		{id: "no-user", field: "user_id", body: record(`"billing_amount":"4.99","note":"` + secret + `"`)},
		{id: "bad-amount", field: "billing_amount", body: record(`"user_id":"u1","billing_amount":"` + secret + `"`)},
		{id: "bad-status", field: "billing_status", body: record(`"user_id":"u1","billing_amount":"4.99","billing_status":"` + secret + `"`)},
		{id: "continuation", field: "event_type", body: `{"date":"20240314","status":"SCHEDULED","start_key":"` + secret + `"}`},
	}
	batch := []notice.QueueMessage{{ID: "sent", Body: msg("u1")}}
	for _, m := range invalid {
		batch = append(batch, notice.QueueMessage{ID: m.id, Body: m.body})
	}
	batch = append(batch, notice.QueueMessage{ID: "user-service-down", Body: msg("u3")},
		notice.QueueMessage{ID: "channel-down", Body: msg("u2")})

	w := e.worker(t)
	failed := w.HandleBatch(context.Background(), batch)
	require.Equal(t, []string{"user-service-down", "channel-down"}, failed, "only transient failures are redelivered")
	require.Len(t, e.notifier.Sent(), 1, "sent")

	assert.NotContains(t, logs.String(), secret, "a message body was logged")
	dropped := map[string]map[string]any{}
	for line := range strings.Lines(logs.String()) {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), "log line %q", line)
		if rec["msg"] != "billing: notifier worker: invalid message dropped" {
			continue
		}
		id, _ := rec["message_id"].(string)
		require.NotContains(t, dropped, id, "message %s logged twice", id)
		dropped[id] = rec
	}
	require.Len(t, dropped, len(invalid), "dropped messages logged: %v", dropped)
	for _, m := range invalid {
		rec := dropped[m.id]
		if !assert.NotNil(t, rec, "%s: not logged as dropped", m.id) {
			continue
		}
		assert.Equal(t, "ERROR", rec["level"], "%s: %v", m.id, rec)
		reason, _ := rec["reason"].(string)
		assert.Contains(t, reason, "invalid notification message", "%s: %v", m.id, rec)
		assert.LessOrEqual(t, len(reason), 210, "%s: reason not short: %q", m.id, reason)
		assert.InDelta(t, len(m.body), rec["body_bytes"], 0, "%s: %v", m.id, rec)
		if m.field != "" {
			assert.Equal(t, m.field, rec["field"], "%s: %v", m.id, rec)
		} else {
			assert.NotContains(t, rec, "field", "%s: %v", m.id, rec)
		}
	}
}

func TestNewWorkerConfig(t *testing.T) {
	e := newNotifEnv(t)
	for _, tc := range []struct {
		mut  func(*notice.WorkerConfig)
		want string
	}{
		{func(c *notice.WorkerConfig) { c.Users = nil }, "Users"},
		{func(c *notice.WorkerConfig) { c.Notifier = nil }, "Notifier"},
		{func(c *notice.WorkerConfig) { c.AllowedEmailSuffixes = []string{""} }, "AllowedEmailSuffixes"},
	} {
		cfg := e.cfg
		tc.mut(&cfg)
		if _, err := notice.NewWorker(cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want an error naming %s, got %v", tc.want, err)
		}
	}
}

// TestWorkerAccountMask checks the notice's digits come from AccountMask
// alone: a worker without one (a host that does not debit bank accounts)
// sends every notice without digits and still runs AfterSend; one with it
// sends at most the last four characters it returns, and its error fails
// the message before anything is sent.
func TestWorkerAccountMask(t *testing.T) {
	ctx := context.Background()
	want := func(account string) []billingtest.SentNotification {
		return []billingtest.SentNotification{{Email: "ann@example.com", Notification: billing.RenewalNotice{
			EventType: "three_day_notification", UserID: "u1", BillingDate: "03/14/2024",
			Amount: billing.Cents(499), MembershipTier: "Plus", Account: account,
		}}}
	}
	boom := errors.New("boom")
	for _, tc := range []struct {
		name   string
		mask   func(context.Context, string) (string, error)
		failed bool
		sent   []billingtest.SentNotification
	}{
		{name: "nil: no digits", sent: want("")},
		{name: "none: no digits", mask: func(context.Context, string) (string, error) { return "", nil }, sent: want("")},
		{name: "four", mask: func(context.Context, string) (string, error) { return "6789", nil }, sent: want("6789")},
		{name: "longer: last four only", mask: func(context.Context, string) (string, error) { return "123456789", nil }, sent: want("6789")},
		{name: "error: failure, nothing sent", mask: func(context.Context, string) (string, error) { return "", boom }, failed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			users := billingtest.NewUserDirectory(notifUser)
			notifier := &billingtest.RecordingNotifier{}
			var after []string
			w, err := notice.NewWorker(notice.WorkerConfig{Users: users, Notifier: notifier, AccountMask: tc.mask,
				AfterSend: func(_ context.Context, u billing.User) { after = append(after, u.ID) }})
			require.NoError(t, err)
			out, err := w.Handle(ctx, notifMessage())
			if tc.failed {
				require.ErrorIs(t, err, boom)
				assert.Empty(t, notifier.Sent(), "sent despite the error")
				assert.Empty(t, after, "AfterSend ran without a send")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, notice.Sent, out)
			assert.Equal(t, tc.sent, notifier.Sent())
			assert.Equal(t, []string{"u1"}, after, "AfterSend")
		})
	}
}
