package billinghttp_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billinghttp"
	"github.com/dynabill/billing/billingtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// afterRead is the handler's Repository: its first GetByID of id returns
// what it read and then runs meanwhile, as if another process changed the
// record between the handler's ownership check and the collector's lock.
type afterRead struct {
	billing.Repository
	id        string
	meanwhile func(ctx context.Context)
	fired     atomic.Bool
}

func (r *afterRead) GetByID(ctx context.Context, id string) (billing.Period, error) {
	s, err := r.Repository.GetByID(ctx, id)
	if id == r.id && r.fired.CompareAndSwap(false, true) {
		r.meanwhile(ctx)
	}
	return s, err
}

// TestCancelOwedDecidedUnderTheLock: the handler reads hank's period
// SCHEDULED, then, before the collector takes hank's lock, a collection
// declines it (ERROR) or starts an attempt that has no outcome yet. The
// end user's cancel is refused (403, code forbidden, asked as
// ActionCancelOwed) and changes nothing the decline left; an operator's
// cancel still goes through.
func TestCancelOwedDecidedUnderTheLock(t *testing.T) {
	for _, tc := range []struct {
		name, token string
		meanwhile   string // "decline" or "attempt"
		status      int
		message     string
	}{
		{name: "end user, a decline lands", token: "hank", meanwhile: "decline", status: 403,
			message: "this period is owed: its charge was declined and is being retried"},
		{name: "end user, an attempt starts", token: "hank", meanwhile: "attempt", status: 403,
			message: "this period's payment is pending"},
		{name: "operator, a decline lands", token: "operator", meanwhile: "decline", status: 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			due := rec("hank", "h-due", "2024-03-19", billing.StatusScheduled)
			require.NoError(t, e.store.Repository().Add(t.Context(), &due))
			e.provider.SetUser("hank", billingtest.Declined("insufficient funds", true))

			var (
				left     billing.Period   // the record as the other process left it
				leftHist []billing.Period // and its history
				calls    int              // processor calls by then
			)
			repo := &afterRead{Repository: e.store.Repository(), id: "h-due", meanwhile: func(ctx context.Context) {
				switch tc.meanwhile {
				case "decline":
					rep, err := e.c.Periods().Collect(ctx, "h-due")
					require.NoError(t, err)
					require.Equal(t, 1, rep.Declined, "report %+v", rep)
				case "attempt":
					cur := e.stored("h-due")
					marked := cur.Clone()
					marked.LastAttempt = billing.Attempt{Number: 1, Key: "h-due#1", Amount: cur.Amount, Tier: cur.ReceiptTierName,
						Process: billing.ProcessInitial, Started: now.Add(-time.Minute)}
					require.NoError(t, e.store.Repository().SetAttempt(ctx, &cur, &marked))
				}
				left = e.stored("h-due")
				var err error
				leftHist, err = e.store.History().ListBySubscription(ctx, "h-due")
				require.NoError(t, err)
				calls = e.provider.CallCount()
			}}
			var asked []string
			h, err := billinghttp.New(billinghttp.Config{
				Repository: repo, History: e.store.History(), Collector: e.c,
				Authorize: func(r *http.Request, a billinghttp.Action) error {
					asked = append(asked, a.Name)
					return tokenAuth(r, a)
				},
			})
			require.NoError(t, err)
			e.h = h

			w := e.do("POST", "/hank/subscriptions/h-due/cancel", tc.token, "")
			require.Equal(t, tc.status, w.Code, "status %d, want %d: %s", w.Code, tc.status, w.Body)
			require.True(t, repo.fired.Load(), "the record did not change between the read and the lock")
			r := decode(t, w)
			after := e.stored("h-due")
			hist, err := e.store.History().ListBySubscription(t.Context(), "h-due")
			require.NoError(t, err)
			assert.Equal(t, []string{billinghttp.ActionCancel, billinghttp.ActionCancelOwed}, asked, "the Authorizer's questions")
			assert.Equal(t, calls, e.provider.CallCount(), "processor calls after the other process")
			assert.False(t, e.locker.Locked("hank"), "hank's lock is held")

			if tc.status == 200 {
				require.NotNil(t, r.After, "answer %s", w.Body)
				assert.Equal(t, "ERROR", r.Before.BillingStatus, "before")
				assert.Equal(t, "CANCELLED", r.After.BillingStatus, "after")
				assert.Equal(t, billing.StatusCancelled, after.Status, "stored status")
				require.Len(t, hist, len(leftHist)+1, "history rows")
				assert.Equal(t, billing.StatusCancelled, hist[len(hist)-1].Status, "the new history row")
				return
			}
			require.NotNil(t, r.Error, "answer %s", w.Body)
			assert.Equal(t, "forbidden", r.Error.Code, "error %+v", r.Error)
			assert.Contains(t, r.Error.Message, tc.message, "error %+v", r.Error)
			assert.Contains(t, r.Error.Message, "ask support", "error %+v", r.Error)
			assert.NotEqual(t, billing.StatusCancelled, after.Status, "the owed period was cancelled")
			assert.Equal(t, left, after, "the refused cancel changed the record")
			assert.Equal(t, leftHist, hist, "the refused cancel changed the history")
		})
	}
}
