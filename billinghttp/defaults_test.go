package billinghttp_test

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billinghttp"
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDefaultConfigLogs: a handler built with only the required fields
// (no Logger, MaxBodyBytes, Challenge or CrossOrigin) serves every path
// that logs: a skipped undecodable record (which panicked on the nil
// Config.Logger), a storage failure, a refusal, a body over the default
// limit and a cross-origin POST.
func TestDefaultConfigLogs(t *testing.T) {
	e := newEnv(t)
	bad := rec("alice", "a-bad", "2023-11-01", billing.StatusCompleted)
	item, err := layout.EncodeItem(&bad)
	require.NoError(t, err)
	item[layout.AttrBillingAmount] = layout.StringAV("4,99")
	require.NoError(t, e.store.PutRawItem(memory.SubscriptionsTable, item))
	h, err := billinghttp.New(billinghttp.Config{
		Repository: &faultRepo{inner: e.store.Repository(), f: e.faults},
		History:    &faultHistory{inner: e.store.History(), f: e.faults},
		Collector:  e.c, Authorize: tokenAuth,
	})
	require.NoError(t, err)
	e.h = h

	w := e.do("GET", "/alice/subscriptions", "alice", "")
	require.Equal(t, 200, w.Code, w.Body.String())
	assert.Equal(t, []string{"a-old", "a-err", "a-next"}, ids(decode(t, w).Subscriptions), "the good records, and not the bad one")

	w = e.do("POST", "/alice/subscriptions/a-next/pause", "alice", `{"months": 2, "x": "`+strings.Repeat("y", billinghttp.DefaultMaxBodyBytes)+`"}`)
	assert.Equal(t, 413, w.Code, w.Body.String())

	w = e.do("GET", "/alice/subscriptions", "", "")
	assert.Equal(t, 401, w.Code, w.Body.String())
	assert.Empty(t, w.Header().Get("WWW-Authenticate"), "challenge by default")

	req := httptest.NewRequest("POST", "/alice/subscriptions/a-next/cancel", nil)
	req.Header.Set("Authorization", "Bearer alice")
	req.Header.Set("Sec-Fetch-Site", "cross-site") // a cross-origin browser POST
	cw := httptest.NewRecorder()
	e.h.ServeHTTP(cw, req)
	assert.Equal(t, 403, cw.Code, cw.Body.String())
	assert.Equal(t, billing.StatusScheduled, e.stored("a-next").Status, "the cross-origin cancel changed the record")

	e.faults.failOn("Repository.ListByUser", errors.New("storage down"))
	w = e.do("GET", "/alice/subscriptions", "alice", "")
	assert.Equal(t, 500, w.Code, w.Body.String())
}
