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
	// DueShards, when above 0, keeps the sharded due index on the
	// engine's period items and reads it for status queries: a period in
	// a status runs read (SCHEDULED, ERROR, PAUSED, ACHSENT) carries
	// billing_due, "<billing_status>#<shard>" with the shard of its engine
	// user (the subscription) among DueShards, and every other item none,
	// so DueIndex (billing_due, billing_date) holds exactly what runs read
	// and a status page reads one shard of it. At most [MaxDueShards].
	//
	// To move an existing table: add DueIndex
	// ([SingleTableDueIndexDefinition]), give every writer DueShards with
	// SingleTableStoreConfig.DueIndexPending (the walk is still read), run
	// [SingleTableRepository.BackfillDue] until a pass updates nothing,
	// then drop DueIndexPending. Defaults to 0: no due index, status
	// queries walk PaymentIndex day by day. NextPaymentDate and OpenPeriods
	// on the subscription items are kept the same either way.
	DueShards int
	// DueIndex is the sharded due GSI (see DueShards). Defaults to
	// "billing_due-billing_date-index".
	DueIndex string
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
