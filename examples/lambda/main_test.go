package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/memory"
	"github.com/dynabill/billing/notice"
)

// fakeSQS records what the adapters send and rejects scripted entries.
type fakeSQS struct {
	batches [][]string
	sent    []string
	reject  map[string]types.BatchResultErrorEntry // by body, once
}

func (f *fakeSQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	f.sent = append(f.sent, aws.ToString(in.MessageBody))
	return &sqs.SendMessageOutput{}, nil
}

func (f *fakeSQS) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	var out sqs.SendMessageBatchOutput
	var accepted []string
	for _, e := range in.Entries {
		body := aws.ToString(e.MessageBody)
		if r, ok := f.reject[body]; ok {
			delete(f.reject, body)
			r.Id = e.Id
			out.Failed = append(out.Failed, r)
			continue
		}
		accepted = append(accepted, body)
	}
	f.batches = append(f.batches, accepted)
	return &out, nil
}

func TestSQSEnqueuerRetriesServerFaults(t *testing.T) {
	f := &fakeSQS{reject: map[string]types.BatchResultErrorEntry{
		"b": {Code: aws.String("InternalError"), SenderFault: false},
	}}
	q := &sqsEnqueuer{client: f, queueURL: "q"}
	if err := q.Enqueue(context.Background(), []string{"a", "b", "c"}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(f.batches) != "[[a c] [b]]" {
		t.Fatalf("batches %v", f.batches)
	}
	f.reject = map[string]types.BatchResultErrorEntry{"x": {Code: aws.String("InvalidMessageContents"), SenderFault: true}}
	if err := q.Enqueue(context.Background(), []string{"x"}); err == nil {
		t.Fatal("sender fault not reported")
	}
}

func TestSchedulerHandlerTriggers(t *testing.T) {
	ctx := context.Background()
	store := billingtest.NewMemoryStore(t, memory.Options{PageSize: 1})
	now := time.Now().UTC()
	due := time.Date(now.Year(), now.Month(), now.Day()+billing.NoticeLeadDays, 10, 0, 0, 0, time.UTC)
	for _, u := range []string{"a", "b"} {
		if _, err := store.Repository().AddAll(ctx, []billing.Period{{
			UserID: u, SubscriptionID: "s-" + u, BillingDate: due, Status: billing.StatusScheduled,
			Amount: 499, LastRunDate: now,
		}}); err != nil {
			t.Fatal(err)
		}
	}
	f := &fakeSQS{}
	sched, err := notice.NewScheduler(notice.SchedulerConfig{
		Repository: store.Repository(), Enqueuer: &sqsEnqueuer{client: f, queueURL: "w"}, PagesPerInvocation: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	h := &schedulerHandler{sched: sched, continuations: &sqsSender{client: f, queueURL: "s"}, logger: slog.New(slog.NewTextHandler(io.Discard, nil))}

	cw, _ := json.Marshal(events.CloudWatchEvent{Source: "aws.events", Detail: json.RawMessage(`{"status":"SCHEDULED"}`)})
	if err := h.Handle(ctx, cw); err != nil {
		t.Fatal(err)
	}
	if len(f.sent) != 1 || len(f.batches) != 1 {
		t.Fatalf("after the trigger: continuations %v batches %v", f.sent, f.batches)
	}
	sqsEvent, _ := json.Marshal(events.SQSEvent{Records: []events.SQSMessage{{MessageId: "1", Body: f.sent[0]}}})
	if err := h.Handle(ctx, sqsEvent); err != nil {
		t.Fatal(err)
	}
	if len(f.batches) != 2 {
		t.Fatalf("after the continuation: batches %v", f.batches)
	}
	two, _ := json.Marshal(events.SQSEvent{Records: []events.SQSMessage{{Body: "{}"}, {Body: "{}"}}})
	if err := h.Handle(ctx, two); !errors.Is(err, notice.ErrTooManyRecords) {
		t.Fatalf("two records: %v", err)
	}
}

func TestWorkerHandlerReportsFailures(t *testing.T) {
	w, err := newWorker(slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := workerHandler(w)(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "bad", Body: "nope"},
		{MessageId: "stub", Body: `{"event_type":"three_day_notification","user_id":"u","billing_date":"2024-03-14T00:00:00Z","billing_amount":"1.00"}`},
		{MessageId: "cancelling", Body: `{"event_type":"three_day_notification","user_id":"u","billing_date":"2024-03-14T00:00:00Z","billing_amount":"1.00","updated_event":"PENDING_CANCELLATION"}`},
	}})
	if err != nil {
		t.Fatal(err)
	}
	// "bad" can never be parsed: logged and acknowledged, not redelivered.
	if fmt.Sprint(resp.BatchItemFailures) != "[{stub}]" {
		t.Fatalf("failures %v", resp.BatchItemFailures)
	}
}

// sentBodies is a continuationSender that records what it is given.
type sentBodies struct{ bodies []string }

func (s *sentBodies) Send(_ context.Context, body string) error {
	s.bodies = append(s.bodies, body)
	return nil
}

func TestCollectorHandlerContinuesThroughItsQueue(t *testing.T) {
	ctx := context.Background()
	clock := billingtest.NewClock(time.Date(2024, 2, 1, 12, 0, 0, 0, time.UTC))
	store := billingtest.NewMemoryStore(t, memory.Options{PageSize: 1})
	for i := range 3 {
		d := time.Date(2024, 1, 31, 0, 0, 0, 0, time.UTC)
		s := billing.Period{UserID: fmt.Sprintf("u%d", i), SubscriptionID: fmt.Sprintf("s%d", i), BillingDate: d,
			Amount: billing.MustParseAmount("4.99"), Status: billing.StatusScheduled, Term: billing.TermMonthly, LastRunDate: d.AddDate(0, -1, 0)}
		if err := store.Repository().Add(ctx, &s); err != nil {
			t.Fatal(err)
		}
	}
	pay := billingtest.NewProvider(billingtest.ProviderOptions{Clock: clock})
	c, err := billing.NewCollector(billing.Config{Repository: store.Repository(), Locker: billingtest.NewLocker(clock, time.Minute),
		Provider: pay, Clock: clock, PagesPerInvocation: 2})
	if err != nil {
		t.Fatal(err)
	}
	sent := &sentBodies{}
	h := &collectorHandler{collector: c, continuations: sent, logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	cw, _ := json.Marshal(events.CloudWatchEvent{Detail: json.RawMessage(`{"kind":"scheduled"}`)})
	if _, err := h.Handle(ctx, cw); err != nil {
		t.Fatal(err)
	}
	for len(sent.bodies) > 0 {
		body := sent.bodies[0]
		sent.bodies = sent.bodies[1:]
		ev, _ := json.Marshal(events.SQSEvent{Records: []events.SQSMessage{{Body: body}}})
		if _, err := h.Handle(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	if n := pay.CallCount(); n != 3 {
		t.Fatalf("provider called %d times, want 3 (every due record once, across invocations)", n)
	}
	bad, _ := json.Marshal(events.CloudWatchEvent{Detail: json.RawMessage(`{"kind":"scheduled","extra":1}`)})
	if _, err := h.Handle(ctx, bad); err == nil {
		t.Fatal("unknown field accepted")
	}
	two, _ := json.Marshal(events.SQSEvent{Records: []events.SQSMessage{{Body: `{"kind":"retry"}`}, {Body: `{"kind":"retry"}`}}})
	if _, err := h.Handle(ctx, two); err == nil {
		t.Fatal("two records accepted")
	}
	if _, err := h.Handle(ctx, []byte(`{"detail":{"kind":"weekly"}}`)); !errors.Is(err, billing.ErrInvalidQuery) {
		t.Fatalf("unknown kind: %v", err)
	}
}

func TestNewRepositoryLayouts(t *testing.T) {
	cfg := aws.Config{Region: "us-east-1"}
	for _, c := range []struct {
		layout string
		want   string
	}{{"", "*dynamostore.Repository"}, {"legacy", "*dynamostore.Repository"}, {"single", "*dynamostore.SingleTableRepository"}, {"other", ""}} {
		t.Run(c.layout, func(t *testing.T) {
			t.Setenv("BILLING_LAYOUT", c.layout)
			t.Setenv("ACCOUNT_PREFIX", "ACC#")
			repo, err := newRepository(cfg, slog.New(slog.DiscardHandler))
			if got := fmt.Sprintf("%T", repo); (err == nil) != (c.want != "") || (err == nil && got != c.want) {
				t.Fatalf("BILLING_LAYOUT=%q: %s, %v; want %s", c.layout, got, err, c.want)
			}
		})
	}
}

// shardedRepo makes a repository of shards ShardedRepository the way
// dynamostore is one: user "s<shard>-..." is in that shard, a status query
// with Shards returns only their records, and its cursor continues only a
// query with the same Shards (any other is billing.ErrInvalidCursor).
type shardedRepo struct {
	billing.Repository
	shards int
}

var _ billing.ShardedRepository = shardedRepo{}

func (r shardedRepo) DueShards() int { return r.shards }

func shardOf(userID string) int {
	var s int
	if _, err := fmt.Sscanf(userID, "s%d-", &s); err != nil {
		panic(err)
	}
	return s
}

func (r shardedRepo) QueryStatus(ctx context.Context, q billing.StatusQuery) (billing.Page, error) {
	scope := fmt.Sprint(q.Shards) + "/"
	cursor, ok := strings.CutPrefix(q.Cursor, scope)
	if !ok && q.Cursor != "" {
		return billing.Page{}, fmt.Errorf("%w: %q is not a cursor of shards %v", billing.ErrInvalidCursor, q.Cursor, q.Shards)
	}
	shards := q.Shards
	q.Cursor, q.Shards = cursor, nil
	p, err := r.Repository.QueryStatus(ctx, q)
	if err != nil {
		return p, err
	}
	if len(shards) > 0 {
		p.Items = slices.DeleteFunc(p.Items, func(s billing.Period) bool { return !slices.Contains(shards, shardOf(s.UserID)) })
	}
	if p.Next != "" {
		p.Next = scope + p.Next
	}
	return p, nil
}

// shardedCollector is a collector over a shardedRepo of 4 shards holding
// perShard[s] due records in shard s, one item a status page and one page
// an invocation, so that every record takes a continuation.
func shardedCollector(t *testing.T, perShard map[int]int) (*billing.Collector, *billingtest.Provider) {
	t.Helper()
	ctx := t.Context()
	clock := billingtest.NewClock(time.Date(2024, 2, 1, 12, 0, 0, 0, time.UTC))
	store := billingtest.NewMemoryStore(t, memory.Options{PageSize: 1})
	for shard, n := range perShard {
		for i := range n {
			d := time.Date(2024, 1, 31, 0, 0, 0, 0, time.UTC)
			s := billing.Period{UserID: fmt.Sprintf("s%d-u%d", shard, i), SubscriptionID: fmt.Sprintf("sub-%d-%d", shard, i), BillingDate: d,
				Amount: billing.MustParseAmount("4.99"), Status: billing.StatusScheduled, Term: billing.TermMonthly, LastRunDate: d.AddDate(0, -1, 0)}
			require.NoError(t, store.Repository().Add(ctx, &s))
		}
	}
	pay := billingtest.NewProvider(billingtest.ProviderOptions{Clock: clock})
	c, err := billing.NewCollector(billing.Config{Repository: shardedRepo{store.Repository(), 4}, Locker: billingtest.NewLocker(clock, time.Minute),
		Provider: pay, Clock: clock, PagesPerInvocation: 1})
	require.NoError(t, err)
	return c, pay
}

// chargedShards counts the provider's charges by the shard of their user.
func chargedShards(pay *billingtest.Provider) map[int]int {
	got := map[int]int{}
	for _, c := range pay.Calls() {
		got[shardOf(c.Request.UserID)]++
	}
	return got
}

// A run over some shards continues through the queue as a run over the
// same shards: the continuation carries them, or the collector would
// refuse its cursor (the cursor of a run over shard 2 continues only that).
func TestCollectorHandlerContinuationKeepsShards(t *testing.T) {
	ctx := t.Context()
	c, pay := shardedCollector(t, map[int]int{1: 2, 2: 3})
	sent := &sentBodies{}
	h := &collectorHandler{collector: c, continuations: sent, logger: slog.New(slog.DiscardHandler)}

	cw, err := json.Marshal(events.CloudWatchEvent{Detail: json.RawMessage(`{"kind":"scheduled","shards":[2]}`)})
	require.NoError(t, err)
	_, err = h.Handle(ctx, cw)
	require.NoError(t, err)
	invocations := 1
	for len(sent.bodies) > 0 {
		body := sent.bodies[0]
		sent.bodies = sent.bodies[1:]
		var req billing.RunRequest
		require.NoError(t, json.Unmarshal([]byte(body), &req))
		require.Equal(t, billing.RunScheduled, req.Kind, body)
		require.Equal(t, []int{2}, req.Shards, "continuation %s", body)
		require.NotEmpty(t, req.Cursor, body)
		ev, err := json.Marshal(events.SQSEvent{Records: []events.SQSMessage{{Body: body}}})
		require.NoError(t, err)
		_, err = h.Handle(ctx, ev)
		require.NoError(t, err, "continuation %s", body)
		invocations++
		require.Less(t, invocations, 100, "the run does not end")
	}
	assert.Greater(t, invocations, 2, "every record takes a continuation")
	assert.Equal(t, map[int]int{2: 3}, chargedShards(pay), "shard 2's records, each once, and no other shard's")
}

// A state machine invokes the function with the run request itself and
// loops on the answer's next; nothing goes to the queue.
func TestCollectorHandlerDirectInvocation(t *testing.T) {
	ctx := t.Context()
	c, pay := shardedCollector(t, map[int]int{1: 2, 2: 3})
	sent := &sentBodies{}
	h := &collectorHandler{collector: c, continuations: sent, logger: slog.New(slog.DiscardHandler)}
	// Through aws-lambda-go's handler, as the runtime calls it: the
	// signature is one it accepts and the answer is the JSON it sends back.
	invoke := lambda.NewHandler(h.Handle).Invoke

	payload := []byte(`{"kind":"scheduled","shards":[2]}`)
	collected, invocations := 0, 0
	for {
		out, err := invoke(ctx, payload)
		require.NoError(t, err, "payload %s", payload)
		invocations++
		require.Less(t, invocations, 100, "the run does not end")
		var got map[string]any
		require.NoError(t, json.Unmarshal(out, &got), "%s", out)
		for _, k := range []string{"kind", "shards", "next", "collected", "attempted", "failed"} {
			require.Contains(t, got, k, "answer %s", out)
		}
		var o runOutcome
		require.NoError(t, json.Unmarshal(out, &o))
		require.Equal(t, billing.RunScheduled, o.Kind)
		require.Equal(t, []int{2}, o.Shards)
		collected += o.Collected
		if o.Next == "" {
			break
		}
		// What the state machine's Task sends next.
		payload, err = json.Marshal(map[string]any{"kind": o.Kind, "shards": o.Shards, "cursor": o.Next})
		require.NoError(t, err)
	}
	assert.Greater(t, invocations, 2, "every record takes an invocation")
	assert.Equal(t, 3, collected)
	assert.Equal(t, map[int]int{2: 3}, chargedShards(pay))
	assert.Empty(t, sent.bodies, "a direct invocation enqueues nothing")

	// No shards: every shard, and the answer still has "shards" and "next".
	out, err := invoke(ctx, []byte(`{"kind":"scheduled"}`))
	require.NoError(t, err)
	assert.Contains(t, string(out), `"shards":[]`)
	assert.Contains(t, string(out), `"next":"`)

	// The SQS and CloudWatch triggers answer nothing.
	cw, err := json.Marshal(events.CloudWatchEvent{Source: "aws.events", DetailType: "Scheduled Event", Detail: json.RawMessage(`{"kind":"pause"}`)})
	require.NoError(t, err)
	out, err = invoke(ctx, cw)
	require.NoError(t, err)
	assert.Equal(t, "null", string(out))
	// A fresh run starts at a shard that moves with the day: over four
	// shards read as one chain it is two chains, the second one continued
	// through the queue.
	for _, body := range sent.bodies {
		var req billing.RunRequest
		require.NoError(t, json.Unmarshal([]byte(body), &req))
		assert.Equal(t, billing.RunPause, req.Kind)
		assert.NotEmpty(t, req.Cursor)
	}
	enqueued := len(sent.bodies)

	for _, bad := range []string{
		`{"kind":"scheduled","shard":2}`, // not a field of a run request
		`{"kind":"scheduled","shards":[4]}`,
		`{"kind":"weekly"}`,
		`[{"kind":"scheduled"}]`,
	} {
		_, err := h.Handle(ctx, json.RawMessage(bad))
		assert.Error(t, err, bad)
	}
	assert.Len(t, sent.bodies, enqueued, "a refused request enqueues nothing")
}

// A run that fails enqueues nothing: the trigger's own retry (SQS, Lambda,
// the state machine's Task) repeats the request. Enqueueing the cursor too
// would run the rest twice, and for an error that stays, such as a cursor
// that is refused, add one more message at each attempt.
func TestCollectorHandlerFailedRunEnqueuesNothing(t *testing.T) {
	ctx := t.Context()
	c, _ := shardedCollector(t, map[int]int{1: 2, 2: 3})
	sent := &sentBodies{}
	h := &collectorHandler{collector: c, continuations: sent, logger: slog.New(slog.DiscardHandler)}
	o, err := h.Handle(ctx, json.RawMessage(`{"kind":"scheduled","shards":[2]}`))
	require.NoError(t, err)
	require.NotEmpty(t, o.Next)

	// Shard 2's cursor in a request for shard 1.
	body, err := json.Marshal(billing.RunRequest{Kind: billing.RunScheduled, Shards: []int{1}, Cursor: o.Next})
	require.NoError(t, err)
	ev, err := json.Marshal(events.SQSEvent{Records: []events.SQSMessage{{Body: string(body)}}})
	require.NoError(t, err)
	_, err = h.Handle(ctx, ev)
	require.ErrorIs(t, err, billing.ErrInvalidCursor)
	_, err = h.Handle(ctx, body)
	require.ErrorIs(t, err, billing.ErrInvalidCursor)
	assert.Empty(t, sent.bodies)
}

func TestNewRepositoryShardsFromEnv(t *testing.T) {
	cfg := aws.Config{Region: "us-east-1"}
	for _, c := range []struct {
		layout, shards, mode, pending, index string
		want                                 int    // DueShards of the repository
		err                                  string // in the error; "" for none
	}{
		{shards: "", mode: "", want: 1},
		{shards: "32", mode: "", want: 32},
		{shards: "32", mode: "legacy", want: 32},
		{shards: "8", mode: "due", want: 8},
		{shards: "8", mode: "due", index: "due-v2", want: 8},
		{shards: "8", pending: "false", want: 8},
		{shards: "0", mode: "due", err: "STATUS_INDEX_MODE=due needs DUE_SHARDS"},
		{shards: "", mode: "due", err: "STATUS_INDEX_MODE=due needs DUE_SHARDS"},
		{shards: "-1", err: "DUE_SHARDS must be a non-negative integer"},
		{shards: "many", err: "DUE_SHARDS must be a non-negative integer"},
		{shards: "1025", err: "DUE_SHARDS must be at most 1024"},
		{shards: "8", mode: "shards", err: "STATUS_INDEX_MODE must be legacy, sorted or due"},
		{shards: "8", pending: "true", err: "DUE_INDEX_PENDING is for the single layout"},
		{shards: "", index: "due-v2", err: `DUE_INDEX "due-v2" needs DUE_SHARDS`},

		// The single table: the same DUE_SHARDS, its reads on the due
		// index unless DUE_INDEX_PENDING keeps them on the walk.
		{layout: "single", want: 1},
		{layout: "single", shards: "0", want: 1},
		{layout: "single", shards: "8", want: 8},
		{layout: "single", shards: "1024", want: 1024},
		{layout: "single", shards: "8", index: "due-v2", want: 8},
		{layout: "single", shards: "8", pending: "false", want: 8},
		{layout: "single", shards: "8", pending: "true", want: 1},
		{layout: "single", shards: "8", pending: "1", want: 1},
		{layout: "single", shards: "1025", err: "DUE_SHARDS must be at most 1024, got 1025"},
		{layout: "single", shards: "-1", err: `DUE_SHARDS must be a non-negative integer, got "-1"`},
		{layout: "single", shards: "8 ", err: `DUE_SHARDS must be a non-negative integer, got "8 "`},
		{layout: "single", shards: "8", pending: "soon", err: `DUE_INDEX_PENDING must be true or false, got "soon"`},
		{layout: "single", pending: "true", err: "DUE_INDEX_PENDING needs DUE_SHARDS"},
		{layout: "single", index: "due-v2", err: `DUE_INDEX "due-v2" needs DUE_SHARDS`},
		{layout: "single", shards: "8", mode: "due", err: "STATUS_INDEX_MODE is for the legacy layout"},
	} {
		t.Run(fmt.Sprintf("%s/%s/%s/%s/%s", c.layout, c.shards, c.mode, c.pending, c.index), func(t *testing.T) {
			t.Setenv("BILLING_LAYOUT", c.layout)
			t.Setenv("DUE_SHARDS", c.shards)
			t.Setenv("STATUS_INDEX_MODE", c.mode)
			t.Setenv("DUE_INDEX_PENDING", c.pending)
			t.Setenv("DUE_INDEX", c.index)
			repo, err := newRepository(cfg, slog.New(slog.DiscardHandler))
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				assert.Nil(t, repo)
				return
			}
			require.NoError(t, err)
			sharded, ok := repo.(billing.ShardedRepository)
			require.True(t, ok, "%T", repo)
			assert.Equal(t, c.want, sharded.DueShards())
		})
	}
}

// fakeDynamo is a DynamoDB endpoint (DYNAMODB_ENDPOINT) holding an empty
// table: it answers every Query with no items and records which index it
// was asked and the key values, so that a test sees what a run reads.
type fakeDynamo struct {
	mu      sync.Mutex
	queries []fakeQuery
}

type fakeQuery struct {
	Index  string
	Values []string // the string values of the key condition, sorted
}

func newFakeDynamo(t *testing.T) *fakeDynamo {
	t.Helper()
	f := &fakeDynamo{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
		if op != "Query" {
			http.Error(w, "fakeDynamo: only Query, got "+op, http.StatusBadRequest)
			return
		}
		var in struct {
			IndexName                 string
			ExpressionAttributeValues map[string]map[string]any
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		q := fakeQuery{Index: in.IndexName}
		for _, v := range in.ExpressionAttributeValues {
			if s, ok := v["S"].(string); ok {
				q.Values = append(q.Values, s)
			}
		}
		slices.Sort(q.Values)
		f.mu.Lock()
		f.queries = append(f.queries, q)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = io.WriteString(w, `{"Count":0,"ScannedCount":0,"Items":[]}`)
	}))
	t.Cleanup(srv.Close)
	t.Setenv("DYNAMODB_ENDPOINT", srv.URL)
	return f
}

// take returns the queries made since the last call.
func (f *fakeDynamo) take() []fakeQuery {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.queries
	f.queries = nil
	return q
}

// dueKeys returns the due keys ("<status>#<shard>") the queries of index
// read, each once, sorted; it fails the test on a query of another index.
func dueKeys(t *testing.T, queries []fakeQuery, index string) []string {
	t.Helper()
	var keys []string
	for _, q := range queries {
		require.Equal(t, index, q.Index, "every status query reads the due index: %+v", q)
		for _, v := range q.Values {
			if strings.Contains(v, "#") {
				keys = append(keys, v)
			}
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// singleTableCollector is the collector function of a single-table
// deployment as the environment configures it, on fakeDynamo's endpoint.
func singleTableCollector(t *testing.T, env map[string]string) (*collectorHandler, *fakeDynamo) {
	t.Helper()
	for _, k := range []string{"DUE_SHARDS", "DUE_INDEX_PENDING", "DUE_INDEX", "STATUS_INDEX_MODE", "SHARD_CONCURRENCY", "OLD_SUBSCRIPTION_DAYS"} {
		t.Setenv(k, env[k])
	}
	t.Setenv("BILLING_LAYOUT", "single")
	t.Setenv("ACCOUNT_PREFIX", "ACC#")
	f := newFakeDynamo(t)
	logger := slog.New(slog.DiscardHandler)
	awsCfg := aws.Config{Region: "us-east-1", Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test"}, nil
	})}
	repo, err := newRepository(awsCfg, logger)
	require.NoError(t, err)
	cfg, err := collectorConfig(repo, logger)
	require.NoError(t, err)
	clock := billingtest.NewClock(time.Now())
	cfg.Locker, cfg.Provider, cfg.Clock = billingtest.NewLocker(clock, time.Minute), billingtest.NewProvider(billingtest.ProviderOptions{Clock: clock}), clock
	c, err := billing.NewCollector(cfg)
	require.NoError(t, err)
	return &collectorHandler{collector: c, continuations: &sentBodies{}, logger: logger}, f
}

// A single-table deployment with DUE_SHARDS runs the direct invocation of
// a shard on that shard of the due index, and the whole run on every
// shard; with DUE_INDEX_PENDING it is one shard, read by the walk of the
// payment index.
func TestSingleTableCollectorShardsFromEnv(t *testing.T) {
	for _, c := range []struct {
		name  string
		env   map[string]string
		index string // the due index; "" for the walk
	}{
		{name: "due index", env: map[string]string{"DUE_SHARDS": "8"}, index: "billing_due-billing_date-index"},
		{name: "named due index", env: map[string]string{"DUE_SHARDS": "8", "DUE_INDEX": "due-v2"}, index: "due-v2"},
		{name: "shards at once", env: map[string]string{"DUE_SHARDS": "8", "SHARD_CONCURRENCY": "3"}, index: "billing_due-billing_date-index"},
		{name: "pending", env: map[string]string{"DUE_SHARDS": "8", "DUE_INDEX_PENDING": "true"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()
			h, f := singleTableCollector(t, c.env)
			invoke := lambda.NewHandler(h.Handle).Invoke
			// run invokes the function until the answer's next is "", as
			// the state machine's loop does.
			run := func(payload string) (runOutcome, error) {
				var o runOutcome
				for range 100 {
					out, err := invoke(ctx, []byte(payload))
					if err != nil {
						return o, err
					}
					require.NoError(t, json.Unmarshal(out, &o), "%s", out)
					if o.Next == "" {
						return o, nil
					}
					b, err := json.Marshal(map[string]any{"kind": o.Kind, "shards": o.Shards, "cursor": o.Next})
					require.NoError(t, err)
					payload = string(b)
				}
				require.Fail(t, "the run does not end", payload)
				return o, nil
			}

			if c.index == "" {
				_, err := run(`{"kind":"scheduled","shards":[3]}`)
				require.ErrorIs(t, err, billing.ErrInvalidQuery, "a pending table is one shard")
				o, err := run(`{"kind":"scheduled","shards":[0]}`)
				require.NoError(t, err)
				assert.Equal(t, []int{0}, o.Shards)
				queries := f.take()
				require.NotEmpty(t, queries)
				for _, q := range queries {
					assert.Equal(t, "GSI-2", q.Index, "the walk of the payment index, not the due index: %+v", q)
				}
				return
			}

			o, err := run(`{"kind":"scheduled","shards":[3]}`)
			require.NoError(t, err)
			assert.Equal(t, []int{3}, o.Shards)
			assert.Equal(t, []string{"SCHEDULED#3"}, dueKeys(t, f.take(), c.index), "shard 3 only")

			_, err = run(`{"kind":"scheduled","shards":[8]}`)
			require.ErrorIs(t, err, billing.ErrInvalidQuery, "shards are 0 to DUE_SHARDS-1")
			assert.Empty(t, f.take())

			_, err = run(`{"kind":"scheduled"}`)
			require.NoError(t, err)
			var all []string
			for s := range 8 {
				all = append(all, fmt.Sprintf("SCHEDULED#%d", s))
			}
			assert.Equal(t, all, dueKeys(t, f.take(), c.index), "every shard")
		})
	}
}

func TestCollectorConfigFromEnv(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	t.Setenv("OLD_SUBSCRIPTION_DAYS", "")
	t.Setenv("SHARD_CONCURRENCY", "")
	cfg, err := collectorConfig(nil, logger)
	require.NoError(t, err)
	assert.Zero(t, cfg.ShardConcurrency, "unset is the library default")

	t.Setenv("OLD_SUBSCRIPTION_DAYS", "45")
	t.Setenv("SHARD_CONCURRENCY", "4")
	cfg, err = collectorConfig(nil, logger)
	require.NoError(t, err)
	assert.Equal(t, 45, cfg.OldSubscriptionDays)
	assert.Equal(t, 4, cfg.ShardConcurrency)

	for _, v := range []string{"-1", "two", "1.5"} {
		t.Setenv("SHARD_CONCURRENCY", v)
		_, err = collectorConfig(nil, logger)
		require.ErrorContains(t, err, "SHARD_CONCURRENCY must be a non-negative integer", v)
	}
}
