package entitlement

import (
	"context"
	"time"

	"github.com/dynabill/billing"
)

// RecurringSubscription is a recurring payments subscription: the
// account agrees to pay PaymentAmount on day
// PaymentDay of every month for SKU.
//
// It is stored at PK=<AccountPrefix><AccountID>,
// SK=SUB#<SubscriptionID>#SKU#<SKU>. The four dates are calendar days: the
// store keeps only the UTC date (midnight UTC) and writes it as
// "2006-01-02", because the daily jobs query the indexes by equality on one
// day. A zero NextPaymentDate or NextReminderDate means "not due": the
// attribute is removed, and the item leaves that sparse index. The Last…
// dates are always written, because they are the indexes' sort keys and
// an item without them would never appear in an index; a zero Last… date
// ("never") is written as "0001-01-01" (the zero time's date), which sorts
// before every real date.
type RecurringSubscription struct {
	AccountID      string
	SubscriptionID string // no '#'
	SKU            string // no '#'
	Email          string
	// PaymentDay is the day of the month payments are taken, 1 to
	// MaxPaymentDay.
	PaymentDay    int
	PaymentAmount billing.Amount
	// PaymentDetails is an opaque token of the payment method (never card
	// data).
	PaymentDetails   string
	NextPaymentDate  time.Time
	NextReminderDate time.Time
	LastPaymentDate  time.Time
	LastReminderDate time.Time
	// CreatedAt and UpdatedAt are set by the store (whole seconds).
	CreatedAt time.Time
	UpdatedAt time.Time
	// Version is set by the store: 1 on creation, incremented by every
	// update. Updates are conditional on the version the caller read.
	Version int
}

// Payments stores recurring payments: subscriptions and receipts in the
// account partitions of the single
// table, and the two sparse indexes the daily reminder and payment jobs
// read. [dynamostore.Payments] implements it; billingtest.Payments is the
// in-memory twin. Every method is safe for concurrent use.
type Payments interface {
	// CreateSubscription stores a new subscription with Version 1, or
	// returns a [*billing.ConflictError] wrapping [billing.ErrAlreadyExists].
	CreateSubscription(ctx context.Context, s RecurringSubscription) (RecurringSubscription, error)
	// GetSubscription returns one subscription or an error wrapping
	// [billing.ErrNotFound].
	GetSubscription(ctx context.Context, accountID, subscriptionID, sku string) (RecurringSubscription, error)
	// UpdateSubscription writes next's fields over prev if the stored
	// version is still prev.Version (else a [*billing.ConflictError] wrapping
	// [billing.ErrConflict]); next must have prev's key. CreatedAt is kept.
	UpdateSubscription(ctx context.Context, prev, next RecurringSubscription) (RecurringSubscription, error)
	// MarkReminded records that prev's reminder was sent today (the
	// clock's UTC date) and sets the next reminder date (zero: none).
	MarkReminded(ctx context.Context, prev RecurringSubscription, nextReminder time.Time) (RecurringSubscription, error)
	// SubscriptionsByAccount returns the account's subscriptions ordered
	// by sort key (never receipts).
	SubscriptionsByAccount(ctx context.Context, accountID string) ([]RecurringSubscription, error)
	// DuePaymentsByDate and DueRemindersByDate return one page of the
	// subscriptions whose NextPaymentDate (NextReminderDate) is day's UTC
	// date, and an opaque cursor for the next page ("" at the end; a page
	// may be empty while the cursor is not). A bad cursor is an error
	// wrapping [billing.ErrInvalidCursor].
	DuePaymentsByDate(ctx context.Context, day time.Time, cursor string) ([]RecurringSubscription, string, error)
	DueRemindersByDate(ctx context.Context, day time.Time, cursor string) ([]RecurringSubscription, string, error)

	// CreateReceipt stores a receipt. It is idempotent on the receipt's
	// key: a replay with the same SubscriptionID, ProcessedAmount and
	// TransactionID succeeds without change; other content is a
	// [*billing.ConflictError] wrapping [billing.ErrAlreadyExists]. ExpiresAt is set by
	// the store to ProcessedDate + the receipt retention.
	CreateReceipt(ctx context.Context, r Receipt) (Receipt, error)
	// ReceiptsByAccount returns the account's receipts processed at or
	// after since, newest first (never subscriptions).
	ReceiptsByAccount(ctx context.Context, accountID string, since time.Time) ([]Receipt, error)
	// RecordPayment atomically stores the receipt (as CreateReceipt) and
	// updates the subscription: NextPaymentDate and NextReminderDate
	// become the given dates (zero: none), LastPaymentDate the receipt's
	// processed date, Version prev.Version+1. If the stored version is not
	// prev.Version nothing is written, not even the receipt.
	RecordPayment(ctx context.Context, prev RecurringSubscription, r Receipt, nextPayment, nextReminder time.Time) (RecurringSubscription, Receipt, error)
}

// PaymentDate normalizes t to its UTC calendar day (midnight UTC), as the
// store keeps every date of a [RecurringSubscription]; zero stays zero.
func PaymentDate(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}
