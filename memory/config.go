package memory

import "github.com/dynabill/billing/internal/storeconf"

// The configuration types and constants the options take. They are the
// same types and values as dynamostore's (both are aliases of one internal
// definition), so a host on the in-memory store sets every option without
// importing dynamostore, and one that also runs the DynamoDB store passes
// the same values to both.

// StatusIndexMode selects the status index [Options.StatusIndexMode]
// emulates; it is dynamostore.StatusIndexMode.
type StatusIndexMode = storeconf.StatusIndexMode

// The status index modes, as dynamostore names them.
const (
	// StatusIndexLegacy emulates the legacy billing_status-index: a page
	// reads every record of the status, billing_date is a filter.
	StatusIndexLegacy = storeconf.StatusIndexLegacy
	// StatusIndexSorted emulates an index keyed by billing_status and
	// billing_date: only due records are read.
	StatusIndexSorted = storeconf.StatusIndexSorted
	// StatusIndexDue emulates the sharded due index, one shard at a time;
	// it needs [Options.DueShards].
	StatusIndexDue = storeconf.StatusIndexDue
)

// MaxDueShards bounds [Options.DueShards] and SingleTableConfig.DueShards;
// it is dynamostore.MaxDueShards.
const MaxDueShards = storeconf.MaxDueShards

// DefaultLeaseDuration is the lease of [NewLocker] unless configured; it
// is dynamostore.DefaultLeaseDuration.
const DefaultLeaseDuration = storeconf.DefaultLeaseDuration

// SingleTableConfig names the single table's indexes, TTL attribute and
// account prefix, which [SingleTableOptions.Table] and
// [PaymentsOptions.Table] take; it is dynamostore.SingleTableConfig,
// whose documentation lists the fields and their defaults (the zero
// value: table "billing", partitions "USER#<id>", reminder index "GSI-1",
// payment index "GSI-2", TTL attribute "expiresAt", no due shards).
type SingleTableConfig = storeconf.SingleTableConfig
