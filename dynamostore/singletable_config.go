package dynamostore

import (
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/internal/storeconf"
)

// SingleTableConfig names the single table, its indexes and its TTL
// attribute, and the prefix of account partitions. The zero value is the
// provider-billed tiers layout (USER#<id> partitions, TTL on expiresAt);
// the recurring payments layout sets AccountPrefix "ACC#" and
// TTLAttribute "TTL".
//
// It is an alias of a type in an internal package that the in-memory store
// shares without linking the AWS SDK (memory.SingleTableConfig is the same
// type). Its fields, each empty by default:
//
//   - Table: the table name. Defaults to "billing".
//   - AccountPrefix: starts every account's partition key (PK is
//     AccountPrefix + account ID). Defaults to "USER#".
//   - ReminderIndex: the sparse GSI keyed by NextReminderDate (hash) and
//     LastReminderDate (range). Defaults to "GSI-1".
//   - PaymentIndex: the sparse GSI keyed by NextPaymentDate (hash) and
//     LastPaymentDate (range). Defaults to "GSI-2".
//   - ReminderProjection, PaymentProjection: the non-key attributes each
//     index projects (INCLUDE). Default to what the reminder job reads
//     (SKU, Email, NextPaymentDate) and what a payment run reads (Email,
//     PaymentDay, PaymentAmount, SKU, PaymentDetails).
//   - TTLAttribute: the time-to-live attribute (Unix seconds) that credit
//     balances, grant markers and receipts expire by. Defaults to
//     "expiresAt".
//   - DueShards: when above 0, keeps the sharded due index on the engine's
//     period items (billing_due, "<billing_status>#<shard>", on periods in
//     a status runs read) and reads it for status queries, one shard at a
//     time; at most [MaxDueShards]. To move an existing table: add DueIndex
//     ([SingleTableDueIndexDefinition]), give every writer DueShards with
//     [SingleTableStoreConfig.DueIndexPending], run
//     [SingleTableRepository.BackfillDue] until a pass updates nothing,
//     then drop DueIndexPending. Defaults to 0: no due index, status
//     queries walk PaymentIndex day by day.
//   - DueIndex: the sharded due GSI. Defaults to
//     "billing_due-billing_date-index".
//
// WithDefaults returns the config with every empty field set to its
// default (the projections are copied).
type SingleTableConfig = storeconf.SingleTableConfig

// codecOf returns c with defaults, as the item codecs and key builders
// take it.
func codecOf(c SingleTableConfig) layout.SingleTableConfig {
	return layout.SingleTableConfig(c).WithDefaults()
}
