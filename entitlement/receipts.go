package entitlement

import (
	"time"

	"github.com/dynabill/billing"
)

// Receipt is a processed payment of a [RecurringSubscription], stored at
// PK=<AccountPrefix><AccountID>, SK=REC#<ProcessedDate>#SKU#<SKU> with
// ProcessedDate in UTC, fixed-width RFC3339 with nanoseconds
// ("2006-01-02T15:04:05.000000000Z"), so that sort-key order is time
// order. The table's TTL attribute holds ExpiresAt in Unix seconds.
type Receipt struct {
	AccountID       string
	SubscriptionID  string // no '#'
	SKU             string // no '#'
	ProcessedDate   time.Time
	ProcessedAmount billing.Amount
	// TransactionID is the payment processor's reference.
	TransactionID string
	// ExpiresAt is set by the store: ProcessedDate + the receipt
	// retention, whole seconds.
	ExpiresAt time.Time
}
