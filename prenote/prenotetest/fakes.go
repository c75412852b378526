// Package prenotetest has fakes of package prenote's ports for hosts'
// _test.go files. Each records its calls, can be scripted to fail, and is
// safe for concurrent use. The zero value of each is ready to use (no links,
// no payments, all flags off, every submission answered 201).
package prenotetest

import (
	"context"
	"net/http"
	"slices"
	"sync"

	"github.com/dynabill/billing/prenote"
)

var (
	_ prenote.BankAccounts = (*BankAccounts)(nil)
	_ prenote.Payments     = (*Payments)(nil)
	_ prenote.FeatureFlags = (*FeatureFlags)(nil)
	_ prenote.Submitter    = (*Submitter)(nil)
	_ prenote.Metrics      = (*MetricsRecorder)(nil)
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

// BankAccounts is a [prenote.BankAccounts] over a map of links.
type BankAccounts struct {
	mu    sync.Mutex
	links map[string]prenote.BankLink
	errs  errorScript
	calls []string
}

// Set gives userID a link.
func (b *BankAccounts) Set(userID string, link prenote.BankLink) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.links == nil {
		b.links = map[string]prenote.BankLink{}
	}
	link.Accounts = slices.Clone(link.Accounts)
	b.links[userID] = link
}

// FailFor makes BankLink of userID fail with err (nil clears it).
func (b *BankAccounts) FailFor(userID string, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.errs.set(userID, err)
}

// BankLink implements [prenote.BankAccounts]: the link set for the user,
// or the zero link.
func (b *BankAccounts) BankLink(ctx context.Context, userID string) (prenote.BankLink, error) {
	if err := ctx.Err(); err != nil {
		return prenote.BankLink{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, userID)
	if err := b.errs.get(userID); err != nil {
		return prenote.BankLink{}, err
	}
	link := b.links[userID]
	link.Accounts = slices.Clone(link.Accounts)
	return link, nil
}

// Calls returns the user IDs looked up, in order.
func (b *BankAccounts) Calls() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.calls)
}

// Payments is a [prenote.Payments] over a map of payments.
type Payments struct {
	mu       sync.Mutex
	payments map[string][]prenote.Payment
	errs     errorScript
	calls    []string
}

// Set replaces userID's payments.
func (p *Payments) Set(userID string, payments ...prenote.Payment) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.payments == nil {
		p.payments = map[string][]prenote.Payment{}
	}
	p.payments[userID] = slices.Clone(payments)
}

// FailFor makes Payments of userID fail with err (nil clears it).
func (p *Payments) FailFor(userID string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.errs.set(userID, err)
}

// Payments implements [prenote.Payments].
func (p *Payments) Payments(ctx context.Context, userID string) ([]prenote.Payment, error) {
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
func (p *Payments) Calls() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.calls)
}

// FlagCall is one evaluation a [FeatureFlags] answered.
type FlagCall struct {
	Flag, UserID string
}

// FeatureFlags is a [prenote.FeatureFlags] with values per flag, optionally
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

// Enabled implements [prenote.FeatureFlags].
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

// Value implements [prenote.FeatureFlags].
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

// Submission is one call a [Submitter] answered.
type Submission struct {
	Provider string
	Request  prenote.Request
}

// response is one scripted answer.
type response struct {
	code int
	err  error
}

// Submitter is a [prenote.Submitter] that answers 201 Created
// unless scripted otherwise, and records every submission.
type Submitter struct {
	mu          sync.Mutex
	script      []response
	submissions []Submission
}

// Respond queues an answer: the next Submit without an earlier queued
// answer returns code and err. Answers are used once each, in order.
func (s *Submitter) Respond(code int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, response{code, err})
}

// Submit implements [prenote.Submitter].
func (s *Submitter) Submit(ctx context.Context, provider string, req prenote.Request) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.submissions = append(s.submissions, Submission{Provider: provider, Request: req})
	if len(s.script) == 0 {
		return http.StatusCreated, nil
	}
	r := s.script[0]
	s.script = s.script[1:]
	return r.code, r.err
}

// Submissions returns the submissions, in order.
func (s *Submitter) Submissions() []Submission {
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

// MetricsRecorder is a [prenote.Metrics] that keeps every count.
type MetricsRecorder struct {
	mu     sync.Mutex
	counts []MetricCount
}

// Count implements [prenote.Metrics].
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
