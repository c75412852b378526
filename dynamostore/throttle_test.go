package dynamostore

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestThrottlingIsErrThrottled: a call DynamoDB refuses for capacity
// (after the SDK's retries) reaches the caller as billing.ErrThrottled, the
// SDK's error still inside; other errors do not match it.
func TestThrottlingIsErrThrottled(t *testing.T) {
	f := newDynamoFixture(t, StatusIndexLegacy, 10)
	rec := testRecord("throttled-user", 0, billing.StatusScheduled)
	require.NoError(t, f.repo.Add(t.Context(), &rec))

	f.w.Throttle("GetItem", 1)
	_, err := f.repo.Get(t.Context(), rec.UserID, rec.BillingDate)
	require.ErrorIs(t, err, billing.ErrThrottled)
	var pte *types.ProvisionedThroughputExceededException
	assert.ErrorAs(t, err, &pte, "the SDK's error is kept")

	f.w.Throttle("TransactWriteItems", 1)
	next := rec.Clone()
	next.Status, next.LastRunDate = billing.StatusCompleted, rec.LastRunDate.Add(1)
	err = f.repo.Update(t.Context(), &rec, &next)
	require.ErrorIs(t, err, billing.ErrThrottled)
	assert.NotErrorIs(t, err, billing.ErrConflict)

	got, err := f.repo.Get(t.Context(), rec.UserID, rec.BillingDate)
	require.NoError(t, err)
	assert.Equal(t, billing.StatusScheduled, got.Status, "the throttled update wrote nothing")
	f.w.FailNth("GetItem", 1, errors.New("connection reset"))
	_, err = f.repo.Get(t.Context(), rec.UserID, rec.BillingDate)
	require.Error(t, err)
	assert.NotErrorIs(t, err, billing.ErrThrottled)
}
