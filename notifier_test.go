package billing_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/memory"
	"github.com/dynabill/billing/notice"
)

// TestReminderClaimValidation: stores refuse a reminder without a user ID
// or billing date before writing anything.
func TestReminderClaimValidation(t *testing.T) {
	repo := billingtest.NewMemoryStore(t, memory.Options{}).Repository()
	at := time.Date(2024, 3, 10, 12, 0, 0, 0, time.UTC)
	for _, r := range []notice.Reminder{
		{BillingDate: at},
		{UserID: "u1"},
		{UserID: "u1", BillingDate: at, Status: "NOPE"},
	} {
		_, err := repo.ClaimReminder(t.Context(), r, at)
		var fe *billing.FieldError
		require.ErrorAs(t, err, &fe, "reminder %+v", r)
		assert.False(t, billing.IsConflict(err))
	}
	_, err := repo.ClaimReminder(t.Context(), notice.Reminder{UserID: "u1", BillingDate: at}, time.Time{})
	require.ErrorIs(t, err, billing.ErrInvalidDate)
}
