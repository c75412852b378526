package notice_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/memory"
	"github.com/dynabill/billing/notice"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// notifStubRepo answers QueryStatus from a script; every other Repository
// method panics (the embedded interface is nil).
type notifStubRepo struct {
	billing.Repository

	mu      sync.Mutex
	pages   []billing.Page
	err     error
	queries []billing.StatusQuery
}

func (r *notifStubRepo) QueryStatus(_ context.Context, q billing.StatusQuery) (billing.Page, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queries = append(r.queries, q)
	if r.err != nil {
		return billing.Page{}, r.err
	}
	if len(r.pages) == 0 {
		return billing.Page{}, nil
	}
	p := r.pages[0]
	r.pages = r.pages[1:]
	return p, nil
}

func notifSub(user string, bd time.Time) billing.Period {
	return billing.Period{
		UserID: user, SubscriptionID: "sub-" + user, BillingDate: bd, Status: billing.StatusScheduled,
		Amount: billing.Cents(499), Term: billing.TermMonthly, BillingPeriod: billing.BillingPeriod(bd),
		CreatedDate: bd.AddDate(0, -1, 0), LastRunDate: bd.AddDate(0, -1, 0),
	}
}

func newNotifScheduler(t *testing.T, repo billing.Repository, q notice.Enqueuer, mut ...func(*notice.SchedulerConfig)) *notice.Scheduler {
	t.Helper()
	cfg := notice.SchedulerConfig{Repository: repo, Enqueuer: q, Clock: billingtest.NewClock(notifNow)}
	for _, m := range mut {
		m(&cfg)
	}
	s, err := notice.NewScheduler(cfg)
	require.NoError(t, err)
	return s
}

// The scheduler hands a page to the Enqueuer in consecutive batches of at
// most MaxEnqueueBatch (SQS SendMessageBatch's limit), in page order.
func TestSchedulerEnqueuesInBatchesOf10(t *testing.T) {
	ctx := context.Background()
	store := billingtest.NewMemoryStore(t, memory.Options{PageSize: 100})
	start := time.Date(2024, 3, 14, 0, 0, 0, 0, time.UTC)
	var subs []billing.Period
	for i := range 25 {
		subs = append(subs, notifSub(fmt.Sprintf("u%02d", i), start.Add(time.Duration(i)*time.Minute)))
	}
	_, err := store.Repository().AddAll(ctx, subs)
	require.NoError(t, err)
	q := &billingtest.RecordingEnqueuer{}
	res, err := newNotifScheduler(t, store.Repository(), q).Run(ctx, notice.Event{})
	require.NoError(t, err)
	require.Equal(t, 25, res.Enqueued)
	var sizes []int
	for _, b := range q.Batches() {
		sizes = append(sizes, len(b))
	}
	require.Equal(t, []int{10, 10, 5}, sizes)
	require.Len(t, q.Bodies(), 25)
}

func TestNewSchedulerConfig(t *testing.T) {
	repo := billingtest.NewMemoryStore(t, memory.Options{}).Repository()
	q := &billingtest.RecordingEnqueuer{}
	for _, tc := range []struct {
		cfg  notice.SchedulerConfig
		want string
	}{
		{notice.SchedulerConfig{Enqueuer: q}, "Repository"},
		{notice.SchedulerConfig{Repository: repo}, "Enqueuer"},
		{notice.SchedulerConfig{Repository: repo, Enqueuer: q, PagesPerInvocation: -1}, "PagesPerInvocation"},
		{notice.SchedulerConfig{Repository: repo, Enqueuer: q, PageSize: -1}, "PageSize"},
	} {
		_, err := notice.NewScheduler(tc.cfg)
		assert.ErrorContains(t, err, tc.want, "want an error naming %s", tc.want)
	}
}

func TestParseEvent(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want notice.Event
		err  error
	}{
		{``, notice.Event{}, nil},
		{`null`, notice.Event{}, nil},
		{`{}`, notice.Event{}, nil},
		{`{"status": "SCHEDULED"}`, notice.Event{Status: billing.StatusScheduled}, nil},
		{`{"date": "", "status": "SCHEDULED", "start_key": null}`, notice.Event{Status: billing.StatusScheduled}, nil},
		{`{"date":"20240314","status":"ERROR","start_key":"AQtok","extra":1}`,
			notice.Event{Date: "20240314", Status: billing.StatusError, StartKey: "AQtok"}, nil},
		{`{"date": null, "status": null}`, notice.Event{}, nil},
		{`{"start_key": {"user_id": {"S": "u1"}, "billing_date": {"S": "2024-03-14T00:00:00Z"}}}`, notice.Event{}, notice.ErrInvalidEvent},
		{`{"start_key": 7}`, notice.Event{}, notice.ErrInvalidEvent},
		{`{"date": "2024-03-14"}`, notice.Event{}, billing.ErrInvalidDate},
		{`{"date": "20240230"}`, notice.Event{}, billing.ErrInvalidDate},
		{`{"date": 20240314}`, notice.Event{}, notice.ErrInvalidEvent},
		{`{"status": "NOPE"}`, notice.Event{}, billing.ErrInvalidStatus},
		{`{"status": "INACTIVE"}`, notice.Event{}, notice.ErrInvalidEvent},
		{`[]`, notice.Event{}, notice.ErrInvalidEvent},
		{`"SCHEDULED"`, notice.Event{}, notice.ErrInvalidEvent},
		{`{"status": "SCHEDULED"`, notice.Event{}, notice.ErrInvalidEvent},
	} {
		got, err := notice.ParseEvent([]byte(tc.in))
		if tc.err != nil {
			assert.ErrorIs(t, err, tc.err, "%s: want %v (and ErrInvalidEvent), got %v", tc.in, tc.err, err)
			assert.ErrorIs(t, err, notice.ErrInvalidEvent, "%s: want %v (and ErrInvalidEvent), got %v", tc.in, tc.err, err)
			continue
		}
		assert.NoError(t, err, "%s", tc.in)
		assert.Equal(t, tc.want, got, "%s", tc.in)
	}
}

func TestEventJSONFieldNames(t *testing.T) {
	ev := notice.Event{Date: "20240314", Status: billing.StatusScheduled, StartKey: "tok"}
	b, err := json.Marshal(ev)
	require.NoError(t, err)
	require.Equal(t, `{"date":"20240314","status":"SCHEDULED","start_key":"tok"}`, string(b))
	back, err := notice.ParseEvent(b)
	require.NoError(t, err, "round trip")
	require.Equal(t, ev, back, "round trip")
}

func TestSchedulerWindowStatusAndDate(t *testing.T) {
	ctx := context.Background()
	store := billingtest.NewMemoryStore(t, memory.Options{PageSize: 2})
	day := func(d int) time.Time { return time.Date(2024, 3, d, 9, 30, 0, 0, time.UTC) }
	var subs []billing.Period
	for i, d := range []int{13, 14, 14, 14, 15, 20} {
		subs = append(subs, notifSub(fmt.Sprintf("u%d-%d", d, i), day(d)))
	}
	errSub := notifSub("u-error", day(14))
	errSub.Status = billing.StatusError
	subs = append(subs, errSub)
	_, err := store.Repository().AddAll(ctx, subs)
	require.NoError(t, err)
	for _, tc := range []struct {
		event string
		want  []string
	}{
		{`{"status": "SCHEDULED"}`, []string{"u14-1", "u14-2", "u14-3"}}, // today (03-10) + 4
		{`{}`, []string{"u14-1", "u14-2", "u14-3"}},                      // status defaults to SCHEDULED
		{`{"date": "20240320"}`, []string{"u20-5"}},
		{`{"date": "20240314", "status": "ERROR"}`, []string{"u-error"}},
		{`{"date": "20240401"}`, nil},
	} {
		q := &billingtest.RecordingEnqueuer{}
		sched := newNotifScheduler(t, store.Repository(), q, func(c *notice.SchedulerConfig) { c.PagesPerInvocation = 10 })
		ev, err := notice.ParseEvent([]byte(tc.event))
		require.NoError(t, err)
		res, err := sched.Run(ctx, ev)
		require.NoError(t, err)
		var got []string
		for _, m := range q.Messages(t) {
			got = append(got, m.UserID)
		}
		assert.Equal(t, fmt.Sprint(tc.want), fmt.Sprint(got), "%s: enqueued (%+v)", tc.event, res)
		assert.Equal(t, len(tc.want), res.Enqueued, "%s: enqueued %v (%+v), want %v", tc.event, got, res, tc.want)
		assert.Nil(t, res.Continuation, "%s: enqueued %v (%+v), want %v", tc.event, got, res, tc.want)
	}
}

func TestSchedulerDefaultPagesPerInvocation(t *testing.T) {
	ctx := context.Background()
	store := billingtest.NewMemoryStore(t, memory.Options{PageSize: 1})
	start := time.Date(2024, 3, 14, 0, 0, 0, 0, time.UTC)
	var subs []billing.Period
	for i := range 5 {
		subs = append(subs, notifSub(fmt.Sprintf("u%d", i), start.Add(time.Duration(i)*time.Hour)))
	}
	_, err := store.Repository().AddAll(ctx, subs)
	require.NoError(t, err)
	q := &billingtest.RecordingEnqueuer{}
	res, err := newNotifScheduler(t, store.Repository(), q).Run(ctx, notice.Event{})
	require.NoError(t, err)
	require.Equal(t, notice.DefaultPagesPerInvocation, res.Pages, "got %+v, want 3 pages, 3 enqueued and a continuation", res)
	require.Equal(t, 3, res.Enqueued, "got %+v, want 3 pages, 3 enqueued and a continuation", res)
	require.NotNil(t, res.Continuation, "got %+v, want 3 pages, 3 enqueued and a continuation", res)
	c := res.Continuation
	require.Equal(t, "20240314", c.Date, "continuation %+v", c)
	require.Equal(t, billing.StatusScheduled, c.Status, "continuation %+v", c)
	require.NotEmpty(t, c.StartKey, "continuation %+v", c)
	// PageSize overrides the repository's page size.
	q2 := &billingtest.RecordingEnqueuer{}
	res, err = newNotifScheduler(t, store.Repository(), q2, func(c *notice.SchedulerConfig) { c.PageSize = 100 }).Run(ctx, notice.Event{})
	require.NoError(t, err, "PageSize 100: %+v", res)
	require.Equal(t, 1, res.Pages, "PageSize 100: %+v", res)
	require.Equal(t, 5, res.Enqueued, "PageSize 100: %+v", res)
	require.Nil(t, res.Continuation, "PageSize 100: %+v", res)
}

func TestSchedulerSkipsRecordsItCannotUse(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2024, 3, 14, 0, 0, 0, 0, time.UTC)

	// An undecodable item in the window (Page.Invalid) is logged and skipped.
	store := billingtest.NewMemoryStore(t, memory.Options{PageSize: 2})
	_, err := store.Repository().AddAll(ctx, []billing.Period{
		notifSub("u1", start.Add(time.Hour)), notifSub("u2", start.Add(2*time.Hour)),
	})
	require.NoError(t, err)
	item, err := layout.EncodeItem(notifPtr(notifSub("u-bad", start.Add(3*time.Hour))))
	require.NoError(t, err)
	item[layout.AttrBillingAmount] = layout.StringAV("four dollars")
	require.NoError(t, store.PutRawItem(memory.SubscriptionsTable, item))
	q := &billingtest.RecordingEnqueuer{}
	res, err := newNotifScheduler(t, store.Repository(), q).Run(ctx, notice.Event{})
	require.NoError(t, err)
	require.Equal(t, 2, res.Enqueued, "undecodable item: %+v", res)
	require.Equal(t, 1, res.Skipped, "undecodable item: %+v", res)
	require.Nil(t, res.Continuation, "undecodable item: %+v", res)

	// Records that cannot become a message are logged and skipped.
	noUser := notifSub("", start)
	negative := notifSub("u-neg", start)
	negative.Amount = -1
	good := notifSub("u-good", start)
	repo := &notifStubRepo{pages: []billing.Page{{Items: []billing.Period{noUser, good, negative}, Scanned: 3, Count: 3}}}
	q = &billingtest.RecordingEnqueuer{}
	res, err = newNotifScheduler(t, repo, q).Run(ctx, notice.Event{})
	require.NoError(t, err)
	require.Equal(t, 1, res.Enqueued, "unusable records: %+v", res)
	require.Equal(t, 2, res.Skipped, "unusable records: %+v", res)
	require.Equal(t, 3, res.Scanned, "unusable records: %+v", res)
	require.Len(t, q.Bodies(), 1, "unusable records: %+v", res)
}

func TestSchedulerErrors(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2024, 3, 14, 0, 0, 0, 0, time.UTC)
	var items []billing.Period
	for i := range 25 {
		items = append(items, notifSub(fmt.Sprintf("u%02d", i), start))
	}

	t.Run("enqueue error ends the run", func(t *testing.T) {
		repo := &notifStubRepo{pages: []billing.Page{{Items: items, Next: "more"}}}
		q := &billingtest.RecordingEnqueuer{}
		boom := errors.New("sqs down")
		q.FailNth(2, boom)
		res, err := newNotifScheduler(t, repo, q).Run(ctx, notice.Event{})
		require.ErrorIs(t, err, boom, "got %+v", res)
		require.Equal(t, 10, res.Enqueued, "got %+v", res)
		require.Nil(t, res.Continuation, "got %+v", res)
		require.Len(t, repo.queries, 1, "got %+v", res)
	})
	t.Run("query error", func(t *testing.T) {
		boom := errors.New("throttled")
		repo := &notifStubRepo{err: boom}
		q := &billingtest.RecordingEnqueuer{}
		_, err := newNotifScheduler(t, repo, q).Run(ctx, notice.Event{})
		require.ErrorIs(t, err, boom)
		require.Zero(t, q.Calls(), "got %v", err)
	})
	t.Run("query carries window, status, cursor and page size", func(t *testing.T) {
		repo := &notifStubRepo{}
		_, err := newNotifScheduler(t, repo, &billingtest.RecordingEnqueuer{}, func(c *notice.SchedulerConfig) { c.PageSize = 7 }).
			Run(ctx, notice.Event{Status: billing.StatusPaused, StartKey: "tok"})
		require.NoError(t, err)
		want := billing.StatusQuery{Status: billing.StatusPaused, Since: start, Before: start.AddDate(0, 0, 1), Cursor: "tok", Limit: 7}
		assert.Equal(t, []billing.StatusQuery{want}, repo.queries)
	})
	t.Run("malformed start key is an error, not a restart", func(t *testing.T) {
		store := billingtest.NewMemoryStore(t, memory.Options{})
		_, err := store.Repository().AddAll(ctx, items[:3])
		require.NoError(t, err)
		q := &billingtest.RecordingEnqueuer{}
		_, err = newNotifScheduler(t, store.Repository(), q).Run(ctx, notice.Event{StartKey: "not-a-token"})
		require.ErrorIs(t, err, billing.ErrInvalidCursor, "got %v, %d enqueues", err, q.Calls())
		require.Zero(t, q.Calls(), "got %v, %d enqueues", err, q.Calls())
	})
	t.Run("invalid event", func(t *testing.T) {
		repo := &notifStubRepo{}
		s := newNotifScheduler(t, repo, &billingtest.RecordingEnqueuer{})
		_, err := s.Run(ctx, notice.Event{Status: billing.StatusInactive})
		assert.ErrorIs(t, err, notice.ErrInvalidEvent, "INACTIVE")
		_, err = s.Run(ctx, notice.Event{Date: "yesterday"})
		assert.ErrorIs(t, err, billing.ErrInvalidDate, "bad date")
		assert.Empty(t, repo.queries, "queried %d times", len(repo.queries))
	})
	t.Run("cancelled context", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		repo := &notifStubRepo{}
		_, err := newNotifScheduler(t, repo, &billingtest.RecordingEnqueuer{}).Run(cctx, notice.Event{})
		require.ErrorIs(t, err, context.Canceled, "got")
	})
}

func TestSchedulerRunBatch(t *testing.T) {
	ctx := context.Background()
	repo := &notifStubRepo{}
	s := newNotifScheduler(t, repo, &billingtest.RecordingEnqueuer{})
	_, err := s.RunBatch(ctx, []string{`{"status":"SCHEDULED"}`, `{"status":"SCHEDULED"}`})
	require.ErrorIs(t, err, notice.ErrTooManyRecords, "two records")
	require.Empty(t, repo.queries, "a batch of two ran")
	res, err := s.RunBatch(ctx, nil)
	require.NoError(t, err, "no records: %+v", res)
	require.Equal(t, notice.Result{}, res, "no records")
	_, err = s.RunBatch(ctx, []string{`{"start_key": {"user_id": {"S": "u"}}}`})
	require.ErrorIs(t, err, notice.ErrInvalidEvent, "legacy key")
	_, err = s.RunBatch(ctx, []string{`{"date":"20240314","status":"SCHEDULED","start_key":""}`})
	require.NoError(t, err)
	require.Len(t, repo.queries, 1, "queries: %d", len(repo.queries))
}

func notifPtr[T any](v T) *T { return &v }
