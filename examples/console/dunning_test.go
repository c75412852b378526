package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
)

// TestDemoDunningIsBounded: the command's own demo (its default flags),
// in which a customer declined for insufficient funds was retried every
// day (21 attempts by the last simulated day), now retries a declined
// period on the dunning schedule: no period has more than 8 attempts (the
// first and 7 retries), a schedule that ended cancelled the subscription,
// the customers were told, and the console shows the schedule.
func TestDemoDunningIsBounded(t *testing.T) {
	ctx := context.Background()
	d, err := build(ctx, options{Users: 200, Months: 2, Seed: 1})
	require.NoError(t, err)
	var owed []billing.Period
	for _, st := range []billing.Status{billing.StatusError, billing.StatusStale} {
		p, err := d.repo.QueryStatus(ctx, billing.StatusQuery{Status: st, Limit: 1000})
		require.NoError(t, err)
		require.Empty(t, p.Next)
		owed = append(owed, p.Items...)
	}
	var ended *billing.Period
	for i, s := range owed {
		assert.LessOrEqual(t, s.Attempt, 1+len(billing.DefaultRetryDays), "%s of %s", s.SubscriptionID, s.UserID)
		if s.Dunning.End == billing.DunningEnd(billing.FinalCancel) && s.Status == billing.StatusError {
			ended = &owed[i]
		}
	}
	require.NotNil(t, ended, "a schedule ended unpaid")
	recs, err := d.repo.ListByUser(ctx, ended.UserID)
	require.NoError(t, err)
	assert.Equal(t, billing.StatusCancelled, recs[len(recs)-1].Status, "the final action cancelled the next period")
	var told bool
	for _, s := range d.notices.Sent() {
		told = told || s.Email == ended.UserID+"@example.com" && s.Notice.EventType == billing.PaymentFailedNoticeEvent
	}
	assert.True(t, told, "the customer was told of the decline")

	console, err := d.console("operator")
	require.NoError(t, err)
	srv := httptest.NewServer(mount(console))
	defer srv.Close()
	res, err := http.Get(srv.URL + "/billing/customer?user=" + url.QueryEscape(ended.UserID))
	require.NoError(t, err)
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	assert.Contains(t, string(b), `<tr class="dunning" id="d-`+ended.SubscriptionID+`"`)
	assert.Contains(t, string(b), `<span class="dunning-ended">dunning ended: cancel</span>`)
}
