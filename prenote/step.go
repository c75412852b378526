package prenote

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/dynabill/billing"
)

// Request is a prenote submission: the user's ID and names, and, when the
// decision names a provider account ([Decision.Account]), the user's email
// and that account.
type Request struct {
	UserID    string
	FirstName string
	LastName  string
	Email     string // only with Account
	Account   string // the decision's Account, if any
}

// Submitter submits prenotes through the host's payments service.
type Submitter interface {
	// Submit submits req through provider and returns the HTTP status the
	// payments service answered; anything but 201 Created is a failed
	// submission.
	Submit(ctx context.Context, provider string, req Request) (statusCode int, err error)
}

// Metrics counts events for the host's metrics system.
type Metrics interface {
	// Count adds value to the counter name with tags "key:value". It cannot
	// fail: an adapter drops what it cannot deliver.
	Count(ctx context.Context, name string, value int64, tags []string)
}

// discardMetrics is the default Metrics.
type discardMetrics struct{}

func (discardMetrics) Count(context.Context, string, int64, []string) {}

// StepConfig configures [NewStep].
type StepConfig struct {
	// Policy decides whether to submit a prenote for a user, usually a
	// [*DefaultPolicy]. Required.
	Policy Policy
	// Submitter submits the prenotes Policy decides on. Required.
	Submitter Submitter
	// Metrics receives the prenote metric. Defaults to discarding it.
	Metrics Metrics
	// MetricName names the prenote metric. Defaults to [MetricName]
	// ("subscriptions.notifier.prenotes").
	MetricName string
	// Logger receives a line per decision and submission, with the user's
	// user_id. Defaults to discarding logs.
	Logger *slog.Logger
}

// Step is the worker's prenote step: after the pre-billing notice was
// sent to a user, it decides, submits and meters. Plug its AfterSend
// method into the notifier worker's AfterSend
// ([github.com/dynabill/billing/notice.WorkerConfig]). Safe for concurrent
// use.
type Step struct {
	cfg StepConfig
}

// NewStep returns a Step, or an error naming the missing config field.
func NewStep(cfg StepConfig) (*Step, error) {
	switch {
	case cfg.Policy == nil:
		return nil, errors.New("prenote: StepConfig.Policy is required")
	case cfg.Submitter == nil:
		return nil, errors.New("prenote: StepConfig.Submitter is required")
	}
	if cfg.Metrics == nil {
		cfg.Metrics = discardMetrics{}
	}
	if cfg.MetricName == "" {
		cfg.MetricName = MetricName
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Step{cfg: cfg}, nil
}

// AfterSend runs the prenote step for a user who was just notified: the
// policy decides; a positive decision is submitted through its provider;
// the outcome is counted under MetricName, tagged submitted:true|false,
// submitted_reason:<reason> when not submitted (the decision's reason,
// "error" when the decision or the submission failed, "bad_response_code"
// when the provider answered other than 201) and provider:<provider> once
// one was picked. Nothing here fails: a prenote failure does not undo the
// notice that was delivered, so errors are logged and metered.
func (s *Step) AfterSend(ctx context.Context, user billing.User) {
	log := s.cfg.Logger.With("user_id", user.ID)
	meter := func(submitted bool, reason, provider string) {
		tags := []string{fmt.Sprintf("submitted:%t", submitted)}
		if !submitted {
			tags = append(tags, "submitted_reason:"+reason)
		}
		if provider != "" {
			tags = append(tags, "provider:"+provider)
		}
		s.cfg.Metrics.Count(ctx, s.cfg.MetricName, 1, tags)
	}
	d, err := s.cfg.Policy.Decide(ctx, user)
	if err != nil {
		log.ErrorContext(ctx, "billing: prenote: cannot decide", "error", err)
		meter(false, ReasonError, "")
		return
	}
	if !d.Submit {
		log.InfoContext(ctx, "billing: prenote: not submitted", "reason", d.Reason)
		meter(false, d.Reason, "")
		return
	}
	req := Request{UserID: user.ID, FirstName: user.FirstName, LastName: user.LastName}
	if d.Account != "" {
		req.Email = user.Email
		req.Account = d.Account
	}
	log = log.With("provider", d.Provider, "reason", d.Reason)
	code, err := s.cfg.Submitter.Submit(ctx, d.Provider, req)
	switch {
	case err != nil:
		log.ErrorContext(ctx, "billing: prenote: submission failed", "error", err)
		meter(false, ReasonError, d.Provider)
	case code != http.StatusCreated:
		log.ErrorContext(ctx, "billing: prenote: submission refused", "status_code", code)
		meter(false, ReasonBadResponseCode, d.Provider)
	default:
		log.InfoContext(ctx, "billing: prenote: submitted")
		meter(true, "", d.Provider)
	}
}
