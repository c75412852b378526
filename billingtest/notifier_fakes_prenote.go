package billingtest

import (
	"context"
	"net/http"
	"slices"
	"sync"

	"github.com/dynabill/billing"
)

// Fakes for the prenote's ports (see notifier_fakes.go for the others).

// UserPayments is a [billing.UserPayments] over a map of payments.
type UserPayments struct {
	mu       sync.Mutex
	payments map[string][]billing.UserPayment
	errs     errorScript
	calls    []string
}

// Set replaces userID's payments.
func (p *UserPayments) Set(userID string, payments ...billing.UserPayment) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.payments == nil {
		p.payments = map[string][]billing.UserPayment{}
	}
	p.payments[userID] = slices.Clone(payments)
}

// FailFor makes Payments of userID fail with err (nil clears it).
func (p *UserPayments) FailFor(userID string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.errs.set(userID, err)
}

// Payments implements [billing.UserPayments].
func (p *UserPayments) Payments(ctx context.Context, userID string) ([]billing.UserPayment, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, userID)
	if err := p.errs.get(userID); err != nil {
		return nil, err
	}
	return slices.Clone(p.payments[userID]), nil
}

// Calls returns the user IDs looked up, in order.
func (p *UserPayments) Calls() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.calls)
}

// FlagCall is one evaluation a [FeatureFlags] answered.
type FlagCall struct {
	Flag, UserID string
}

// FeatureFlags is a [billing.FeatureFlags] with values per flag, optionally
// per user. Unset boolean flags are off and unset string flags are "".
type FeatureFlags struct {
	mu      sync.Mutex
	enabled map[FlagCall]bool // UserID "" holds the flag's value for everyone
	values  map[FlagCall]string
	errs    errorScript
	calls   []FlagCall
}

// SetEnabled turns a boolean flag on or off for everyone.
func (f *FeatureFlags) SetEnabled(flag string, on bool) { f.SetEnabledFor(flag, "", on) }

// SetEnabledFor turns a boolean flag on or off for one user; "" is everyone.
func (f *FeatureFlags) SetEnabledFor(flag, userID string, on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.enabled == nil {
		f.enabled = map[FlagCall]bool{}
	}
	f.enabled[FlagCall{flag, userID}] = on
}

// SetValue sets a string flag for everyone.
func (f *FeatureFlags) SetValue(flag, value string) { f.SetValueFor(flag, "", value) }

// SetValueFor sets a string flag for one user; "" is everyone.
func (f *FeatureFlags) SetValueFor(flag, userID, value string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.values == nil {
		f.values = map[FlagCall]string{}
	}
	f.values[FlagCall{flag, userID}] = value
}

// Fail makes every evaluation of flag fail with err (nil clears it).
func (f *FeatureFlags) Fail(flag string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs.set(flag, err)
}

// Enabled implements [billing.FeatureFlags].
func (f *FeatureFlags) Enabled(ctx context.Context, flag, userID string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, FlagCall{flag, userID})
	if err := f.errs.get(flag); err != nil {
		return false, err
	}
	if on, ok := f.enabled[FlagCall{flag, userID}]; ok {
		return on, nil
	}
	return f.enabled[FlagCall{flag, ""}], nil
}

// Value implements [billing.FeatureFlags].
func (f *FeatureFlags) Value(ctx context.Context, flag, userID string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, FlagCall{flag, userID})
	if err := f.errs.get(flag); err != nil {
		return "", err
	}
	if v, ok := f.values[FlagCall{flag, userID}]; ok {
		return v, nil
	}
	return f.values[FlagCall{flag, ""}], nil
}

// Calls returns the evaluations, in order.
func (f *FeatureFlags) Calls() []FlagCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// PrenoteSubmission is one call a [PrenoteSubmitter] answered.
type PrenoteSubmission struct {
	Provider string
	Request  billing.PrenoteRequest
}

// prenoteResponse is one scripted answer.
type prenoteResponse struct {
	code int
	err  error
}

// PrenoteSubmitter is a [billing.PrenoteSubmitter] that answers 201 Created
// unless scripted otherwise, and records every submission.
type PrenoteSubmitter struct {
	mu          sync.Mutex
	script      []prenoteResponse
	submissions []PrenoteSubmission
}

// Respond queues an answer: the next Submit without an earlier queued
// answer returns code and err. Answers are used once each, in order.
func (s *PrenoteSubmitter) Respond(code int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, prenoteResponse{code, err})
}

// Submit implements [billing.PrenoteSubmitter].
func (s *PrenoteSubmitter) Submit(ctx context.Context, provider string, req billing.PrenoteRequest) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.submissions = append(s.submissions, PrenoteSubmission{Provider: provider, Request: req})
	if len(s.script) == 0 {
		return http.StatusCreated, nil
	}
	r := s.script[0]
	s.script = s.script[1:]
	return r.code, r.err
}

// Submissions returns the submissions, in order.
func (s *PrenoteSubmitter) Submissions() []PrenoteSubmission {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.submissions)
}

// MetricCount is one Count call a [MetricsRecorder] received.
type MetricCount struct {
	Name  string
	Value int64
	Tags  []string
}

// MetricsRecorder is a [billing.Metrics] that keeps every count.
type MetricsRecorder struct {
	mu     sync.Mutex
	counts []MetricCount
}

// Count implements [billing.Metrics].
func (m *MetricsRecorder) Count(_ context.Context, name string, value int64, tags []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.counts = append(m.counts, MetricCount{Name: name, Value: value, Tags: slices.Clone(tags)})
}

// Counts returns every count, in order.
func (m *MetricsRecorder) Counts() []MetricCount {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]MetricCount, len(m.counts))
	for i, c := range m.counts {
		out[i] = MetricCount{Name: c.Name, Value: c.Value, Tags: slices.Clone(c.Tags)}
	}
	return out
}

// Total sums the values counted under name with every one of tags.
func (m *MetricsRecorder) Total(name string, tags ...string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var sum int64
	for _, c := range m.counts {
		if c.Name != name {
			continue
		}
		all := true
		for _, t := range tags {
			if !slices.Contains(c.Tags, t) {
				all = false
				break
			}
		}
		if all {
			sum += c.Value
		}
	}
	return sum
}
