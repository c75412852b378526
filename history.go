package billing

import (
	"context"
)

// History is the append-only audit log (billing-activity-history): one row
// per write of a record, keyed by user_id and last_run_date.
//
// Implementations: dynamostore.History and the History of package memory. Both pass billingtest.TestHistory.
type History interface {
	// Add appends a row. LastRunDate must be set. An existing row with the
	// same user_id and last_run_date is never overwritten: the error is a
	// [*ConflictError] wrapping [ErrAlreadyExists].
	Add(ctx context.Context, s *Period) error

	// AddAll appends many rows. Rows sharing user_id and last_run_date
	// within the call are an error before anything is written. A row is
	// never replaced: one whose key holds the very same row is written
	// already (an identical retry of the batch writes nothing), one whose
	// key holds another row is not written, and is named in the
	// [*BatchError] with a [*ConflictError] wrapping [ErrAlreadyExists].
	// Either every other row is written or the error is a [*BatchError]
	// naming those that are not.
	AddAll(ctx context.Context, subs []Period) error

	// ListBySubscription returns every row of a subscription ID ascending by
	// last_run_date, reading every page.
	ListBySubscription(ctx context.Context, subscriptionID string) ([]Period, error)

	// ListByUser returns every row of a user ascending by last_run_date.
	// A row that cannot be decoded is skipped, not an error: the store
	// logs it and reports it through the function [WithInvalidItems] put
	// in ctx.
	ListByUser(ctx context.Context, userID string) ([]Period, error)
}
