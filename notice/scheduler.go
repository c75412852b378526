package notice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/dynabill/billing"
)

// Enqueuer sends message bodies to the worker queue (the legacy
// pre-subscription-notifier-worker SQS queue).
type Enqueuer interface {
	// Enqueue sends one batch of 1 to [MaxEnqueueBatch] message bodies, as
	// one SQS SendMessageBatch does. It returns nil only when every body was
	// accepted; an adapter turns SendMessageBatch's per-entry failures into
	// an error.
	Enqueue(ctx context.Context, bodies []string) error
}

// EnqueuerFunc adapts a function to [Enqueuer].
type EnqueuerFunc func(ctx context.Context, bodies []string) error

// Enqueue calls f.
func (f EnqueuerFunc) Enqueue(ctx context.Context, bodies []string) error { return f(ctx, bodies) }

// SchedulerConfig configures [NewScheduler].
type SchedulerConfig struct {
	// Repository is queried for the records due in the notification window.
	// Required.
	Repository billing.Repository
	// Enqueuer receives the worker messages. Required.
	Enqueuer Enqueuer
	// Clock gives "today" for the default window. Defaults to [billing.SystemClock].
	Clock billing.Clock
	// PagesPerInvocation is how many status pages one [Scheduler.Run] reads
	// before handing back a continuation. Defaults to
	// [DefaultPagesPerInvocation] (3).
	PagesPerInvocation int
	// PageSize is the number of items a status page reads (DynamoDB's
	// Limit). Defaults to 0: the repository's own page size.
	PageSize int
	// Logger receives a summary per run and a warning per skipped record.
	// Defaults to discarding logs.
	Logger *slog.Logger
	// MeterProvider makes the enqueued-messages metric (see
	// dynabill.notifier.enqueued). Defaults to otel.GetMeterProvider(), a
	// no-op unless the host installs a global provider.
	MeterProvider metric.MeterProvider
	// TracerProvider makes a span per run (see dynabill.notifier.schedule).
	// Defaults to otel.GetTracerProvider(), a no-op unless the host
	// installs a global provider.
	TracerProvider trace.TracerProvider
}

// Scheduler is the first half of the pre-billing notifier (the legacy
// notifier-scheduler Lambda): it pages through the records due in the
// notification window and enqueues one [Message] per record for
// the [Worker]. Safe for concurrent use.
//
// # Paging and continuation
//
// A daily trigger (the legacy CloudWatch rule at 12:00 UTC, whose detail is
// {"status": "SCHEDULED"}) starts a run with an event without a start key.
// The scheduler reads PagesPerInvocation pages of the window; each page is
// enqueued, in batches of at most 10, before the next one is read. If the
// last page read still has a next page, the run returns a continuation
// event, which the host sends to its scheduler queue; the same scheduler
// consumes that queue (batch size 1, see [Scheduler.RunBatch]) and goes on
// from the saved position. The loop ends when a page has no next page.
//
// Delivery is at least once: when a page cannot be read or enqueued, Run
// returns the error and the host lets the invocation be retried from its
// start key, which may enqueue the pages of that invocation again. A
// [Worker] with Reminders set sends each of those reminders once all the
// same (see [ReminderClaimer]).
type Scheduler struct {
	cfg SchedulerConfig
	tel *telemetry
}

// NewScheduler returns a Scheduler, or an error naming the missing or bad
// config field.
func NewScheduler(cfg SchedulerConfig) (*Scheduler, error) {
	switch {
	case cfg.Repository == nil:
		return nil, errors.New("billing: SchedulerConfig.Repository is required")
	case cfg.Enqueuer == nil:
		return nil, errors.New("billing: SchedulerConfig.Enqueuer is required")
	case cfg.PagesPerInvocation < 0:
		return nil, fmt.Errorf("billing: SchedulerConfig.PagesPerInvocation: negative %d", cfg.PagesPerInvocation)
	case cfg.PageSize < 0:
		return nil, fmt.Errorf("billing: SchedulerConfig.PageSize: negative %d", cfg.PageSize)
	}
	if cfg.Clock == nil {
		cfg.Clock = billing.SystemClock{}
	}
	if cfg.PagesPerInvocation == 0 {
		cfg.PagesPerInvocation = DefaultPagesPerInvocation
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Scheduler{cfg: cfg, tel: newTelemetry(cfg.MeterProvider, cfg.TracerProvider)}, nil
}

// Result reports one [Scheduler.Run].
type Result struct {
	// Enqueued is the number of messages the Enqueuer accepted.
	Enqueued int
	// Skipped is the number of records that could not be read or turned
	// into a message; each was logged.
	Skipped int
	// Pages is the number of status pages read.
	Pages int
	// Scanned is the number of items those pages read (what they cost).
	Scanned int
	// Continuation is the event that continues the run, to be sent to the
	// scheduler queue; nil when the window is done.
	Continuation *Event
}

// Run reads up to PagesPerInvocation pages of the event's window and
// enqueues a message per record, then returns the continuation if more
// pages remain.
//
// The window is [date, date+1 day) for the event's date, or
// [Window] of the clock's now when the event has none; the
// status defaults to SCHEDULED. A continuation carries the window's date
// explicitly (see [Event]), so a run that crosses midnight UTC
// keeps reading the window it started.
//
// Records that cannot be decoded (Page.Invalid) or turned into a message
// are logged, counted in Skipped and left out: one bad record never stops
// the run. A query or enqueue error ends the run and is returned with the
// result so far; a malformed start key is an [billing.ErrInvalidCursor] error, never
// a restart from the top.
func (s *Scheduler) Run(ctx context.Context, ev Event) (Result, error) {
	ctx, span := s.tel.startSchedule(ctx, ev)
	res, err := s.run(ctx, ev)
	s.tel.endSchedule(ctx, span, res, err)
	return res, err
}

func (s *Scheduler) run(ctx context.Context, ev Event) (Result, error) {
	var res Result
	status := ev.Status
	if status == "" {
		status = billing.StatusScheduled
	}
	if !status.Storable() {
		return res, fmt.Errorf("%w: status %q", ErrInvalidEvent, status)
	}
	start, end, err := Window(s.cfg.Clock.Now(), ev.Date)
	if err != nil {
		return res, fmt.Errorf("billing: notifier: window: %w", err)
	}
	log := s.cfg.Logger.With("status", status, "date", start.Format(eventDateLayout))
	cursor := ev.StartKey
	for range s.cfg.PagesPerInvocation {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		page, err := s.cfg.Repository.QueryStatus(ctx, billing.StatusQuery{
			Status: status, Since: start, Before: end, Cursor: cursor, Limit: s.cfg.PageSize,
		})
		if err != nil {
			return res, fmt.Errorf("billing: notifier: page %d: %w", res.Pages+1, err)
		}
		res.Pages++
		res.Scanned += page.Scanned
		for _, bad := range page.Invalid {
			log.WarnContext(ctx, "billing: notifier: skipping undecodable record", "error", bad)
			res.Skipped++
		}
		bodies := make([]string, 0, len(page.Items))
		for i := range page.Items {
			body, err := messageBody(&page.Items[i])
			if err != nil {
				log.WarnContext(ctx, "billing: notifier: skipping record", "key", page.Items[i].Key(), "error", err)
				res.Skipped++
				continue
			}
			bodies = append(bodies, body)
		}
		for batch := range slices.Chunk(bodies, MaxEnqueueBatch) {
			if err := s.cfg.Enqueuer.Enqueue(ctx, batch); err != nil {
				return res, fmt.Errorf("billing: notifier: enqueue page %d: %w", res.Pages, err)
			}
			res.Enqueued += len(batch)
		}
		if page.Next == "" {
			log.InfoContext(ctx, "billing: notifier: window done",
				"pages", res.Pages, "enqueued", res.Enqueued, "skipped", res.Skipped, "scanned", res.Scanned)
			return res, nil
		}
		cursor = page.Next
	}
	res.Continuation = &Event{Date: start.Format(eventDateLayout), Status: status, StartKey: cursor}
	log.InfoContext(ctx, "billing: notifier: continuing in the next invocation",
		"pages", res.Pages, "enqueued", res.Enqueued, "skipped", res.Skipped, "scanned", res.Scanned)
	return res, nil
}

// RunBatch runs the scheduler for a batch of scheduler-queue message bodies
// (the legacy HandleSQS). The queue's batch size is 1: more than one body is
// an [ErrTooManyRecords] error and none is run; no body does nothing. The
// body is parsed with [ParseEvent].
func (s *Scheduler) RunBatch(ctx context.Context, bodies []string) (Result, error) {
	switch len(bodies) {
	case 0:
		return Result{}, nil
	case 1:
	default:
		return Result{}, fmt.Errorf("%w: got %d records", ErrTooManyRecords, len(bodies))
	}
	ev, err := ParseEvent([]byte(bodies[0]))
	if err != nil {
		return Result{}, err
	}
	return s.Run(ctx, ev)
}

// messageBody turns a record into the worker message body.
func messageBody(sub *billing.Period) (string, error) {
	m, err := NewMessage(sub)
	if err != nil {
		return "", err
	}
	b, err := m.MarshalJSON()
	if err != nil {
		return "", err
	}
	return string(b), nil
}
