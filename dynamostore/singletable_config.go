package dynamostore

import "github.com/dynabill/billing/internal/layout"

// SingleTableConfig names the single table, its indexes and its TTL
// attribute, and the prefix of account partitions. The zero value is the
// provider-billed tiers layout (USER#<id> partitions, TTL on expiresAt);
// the recurring payments layout sets AccountPrefix "ACC#" and TTLAttribute
// "TTL". Every field defaults when empty: Table to "billing", AccountPrefix
// to "USER#", ReminderIndex to "GSI-1", PaymentIndex to "GSI-2",
// TTLAttribute to "expiresAt", and the index projections to the attributes
// the reminder and payment jobs read.
//
// The type is the layout's own (an alias), so that the stores, the
// in-memory twin and the table definitions read one set of names.
type SingleTableConfig = layout.SingleTableConfig
