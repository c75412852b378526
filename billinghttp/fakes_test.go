package billinghttp_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billinghttp"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/memory"
)

// newStore returns an empty in-memory store. Every test of the package
// (ExampleNew excepted, which shows the call) makes its store here.
func newStore(t testing.TB) *memory.Store { return billingtest.NewMemoryStore(t, memory.Options{}) }

// faults counts the storage calls the handler and the collector make, and
// fails the ones told to.
type faults struct {
	mu    sync.Mutex
	calls map[string]int
	fail  map[string]error
}

func newFaults() *faults { return &faults{calls: map[string]int{}, fail: map[string]error{}} }

func (f *faults) hit(op string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[op]++
	return f.fail[op]
}

// failOn makes every later call of op ("Repository.GetByID", …) fail.
func (f *faults) failOn(op string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[op] = err
}

// total returns the number of storage calls so far.
func (f *faults) total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		n += c
	}
	return n
}

// faultRepo is a billing.Repository that counts and fails calls. It does
// not embed the inner repository, so no method can pass uncounted.
type faultRepo struct {
	inner billing.Repository
	f     *faults
}

var _ billing.Repository = (*faultRepo)(nil)

func (r *faultRepo) Add(ctx context.Context, s *billing.Period) error {
	if err := r.f.hit("Repository.Add"); err != nil {
		return err
	}
	return r.inner.Add(ctx, s)
}

func (r *faultRepo) Get(ctx context.Context, userID string, billingDate time.Time) (billing.Period, error) {
	if err := r.f.hit("Repository.Get"); err != nil {
		return billing.Period{}, err
	}
	return r.inner.Get(ctx, userID, billingDate)
}

func (r *faultRepo) GetByID(ctx context.Context, id string) (billing.Period, error) {
	if err := r.f.hit("Repository.GetByID"); err != nil {
		return billing.Period{}, err
	}
	return r.inner.GetByID(ctx, id)
}

func (r *faultRepo) ListByUser(ctx context.Context, userID string) ([]billing.Period, error) {
	if err := r.f.hit("Repository.ListByUser"); err != nil {
		return nil, err
	}
	return r.inner.ListByUser(ctx, userID)
}

func (r *faultRepo) Recent(ctx context.Context, userID string, limit int) ([]billing.Period, error) {
	if err := r.f.hit("Repository.Recent"); err != nil {
		return nil, err
	}
	return r.inner.Recent(ctx, userID, limit)
}

func (r *faultRepo) QueryStatus(ctx context.Context, q billing.StatusQuery) (billing.Page, error) {
	if err := r.f.hit("Repository.QueryStatus"); err != nil {
		return billing.Page{}, err
	}
	return r.inner.QueryStatus(ctx, q)
}

func (r *faultRepo) Update(ctx context.Context, prev, next *billing.Period, create ...*billing.Period) error {
	if err := r.f.hit("Repository.Update"); err != nil {
		return err
	}
	return r.inner.Update(ctx, prev, next, create...)
}

func (r *faultRepo) SetAttempt(ctx context.Context, prev, next *billing.Period) error {
	if err := r.f.hit("Repository.SetAttempt"); err != nil {
		return err
	}
	return r.inner.SetAttempt(ctx, prev, next)
}

func (r *faultRepo) AdminUpdate(ctx context.Context, prev, next *billing.Period) error {
	if err := r.f.hit("Repository.AdminUpdate"); err != nil {
		return err
	}
	return r.inner.AdminUpdate(ctx, prev, next)
}

func (r *faultRepo) AddAll(ctx context.Context, subs []billing.Period) ([]billing.Period, error) {
	if err := r.f.hit("Repository.AddAll"); err != nil {
		return nil, err
	}
	return r.inner.AddAll(ctx, subs)
}

// faultHistory is a billing.History that counts and fails calls.
type faultHistory struct {
	inner billing.History
	f     *faults
}

var _ billing.History = (*faultHistory)(nil)

func (h *faultHistory) Add(ctx context.Context, s *billing.Period) error {
	if err := h.f.hit("History.Add"); err != nil {
		return err
	}
	return h.inner.Add(ctx, s)
}

func (h *faultHistory) AddAll(ctx context.Context, subs []billing.Period) error {
	if err := h.f.hit("History.AddAll"); err != nil {
		return err
	}
	return h.inner.AddAll(ctx, subs)
}

func (h *faultHistory) ListBySubscription(ctx context.Context, id string) ([]billing.Period, error) {
	if err := h.f.hit("History.ListBySubscription"); err != nil {
		return nil, err
	}
	return h.inner.ListBySubscription(ctx, id)
}

func (h *faultHistory) ListByUser(ctx context.Context, userID string) ([]billing.Period, error) {
	if err := h.f.hit("History.ListByUser"); err != nil {
		return nil, err
	}
	return h.inner.ListByUser(ctx, userID)
}

// tokenAuth is the tests' Authorizer, the two roles of
// billinghttp.RoleAuthorizer: "Authorization: Bearer X" where X is an end
// user acting on themselves, or "operator" (every action on anyone), or
// "broken" (the token service fails). No header is unauthenticated.
var tokenAuth = billinghttp.RoleAuthorizer(func(r *http.Request) (string, bool, error) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	switch {
	case !ok || token == "":
		return "", false, billinghttp.ErrUnauthenticated
	case token == "broken":
		return "", false, errTokenService
	case token == "operator":
		return "", true, nil
	}
	return token, false, nil
})

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
