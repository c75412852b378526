package dynamostore

import "github.com/dynabill/billing/internal/layout"

// SingleTableConfig names the single table, its indexes and its TTL
// attribute, and the prefix of account partitions. The zero value is the
// provider-billed tiers layout (USER#<id> partitions, TTL on expiresAt);
// the recurring payments layout sets AccountPrefix "ACC#" and
// TTLAttribute "TTL".
type SingleTableConfig struct {
	// Table is the table name. Defaults to "billing"; a host with an
	// existing table sets its name here.
	Table string
	// AccountPrefix starts every account's partition key: PK is
	// AccountPrefix + account ID. Defaults to "USER#".
	AccountPrefix string
	// ReminderIndex is the sparse GSI keyed by NextReminderDate (hash) and
	// LastReminderDate (range). Defaults to "GSI-1".
	ReminderIndex string
	// PaymentIndex is the sparse GSI keyed by NextPaymentDate (hash) and
	// LastPaymentDate (range). Defaults to "GSI-2".
	PaymentIndex string
	// ReminderProjection lists the non-key attributes the reminder index
	// projects (INCLUDE). Defaults to the attributes the reminder job
	// reads: SKU, Email and NextPaymentDate.
	ReminderProjection []string
	// PaymentProjection lists the non-key attributes the payment index
	// projects (INCLUDE). Defaults to the attributes a payment run reads:
	// Email, PaymentDay, PaymentAmount, SKU and PaymentDetails.
	PaymentProjection []string
	// TTLAttribute is the table's time-to-live attribute (a Number of Unix
	// seconds): DynamoDB deletes an item some time after the instant it
	// holds. One attribute serves every entity: credit balances write their
	// expiry to it, and so do the monthly grant markers and receipts.
	// Defaults to "expiresAt".
	TTLAttribute string
}

// WithDefaults returns c with every empty field set to its default (the
// projections are copied).
func (c SingleTableConfig) WithDefaults() SingleTableConfig {
	return SingleTableConfig(c.codec())
}

// codec returns c with defaults, as the item codecs and key builders take
// it.
func (c SingleTableConfig) codec() layout.SingleTableConfig {
	return layout.SingleTableConfig(c).WithDefaults()
}
