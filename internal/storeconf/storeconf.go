// Package storeconf holds the configuration types and defaults that both
// stores share: the DynamoDB store (dynamostore) and its in-memory twin
// (memory). It imports no AWS package, so the in-memory store, the
// embedded default, links none. dynamostore and memory re-export every
// name here as a type alias or constant, which is how hosts use them.
package storeconf

import (
	"fmt"
	"slices"
	"time"
)

// StatusIndexMode selects how status pages are read.
type StatusIndexMode int

const (
	// StatusIndexLegacy reads the legacy billing_status-index, whose only
	// key is billing_status: a page reads every record of the status and
	// billing_date is a filter, so items read per item returned grows with
	// the number of records that are not due.
	StatusIndexLegacy StatusIndexMode = iota
	// StatusIndexSorted reads an index keyed by billing_status and
	// billing_date: the date range is a key condition and only due records
	// are read.
	StatusIndexSorted
	// StatusIndexDue reads the sharded due index (see the table
	// configuration's DueShards, which it needs), one shard at a time.
	// Only the statuses runs read are indexed: a query of another status
	// is an [billing.ErrInvalidQuery]. Switch to it once every existing
	// item has its due key, then drop the billing_status index.
	StatusIndexDue
)

// String names the mode.
func (m StatusIndexMode) String() string {
	switch m {
	case StatusIndexLegacy:
		return "legacy"
	case StatusIndexSorted:
		return "sorted"
	case StatusIndexDue:
		return "due"
	}
	return fmt.Sprintf("StatusIndexMode(%d)", int(m))
}

// Default names of the legacy tables, as in the existing deployment.
const (
	DefaultSubscriptionsTable = "billing-activity"
	DefaultHistoryTable       = "billing-activity-history"
)

// MaxDueShards bounds the due shards of either layout.
const MaxDueShards = 1024

// DefaultLeaseDuration is the lease of a per-user billing lock unless
// configured, as the legacy service ran it.
const DefaultLeaseDuration = 60 * time.Second

// Default names of the single-table layout: the table, account partitions
// USER#<id>, a sparse reminder index GSI-1 and payment index GSI-2, the
// TTL attribute expiresAt that credit balances, grant markers and
// receipts expire by, and the sharded due index.
const (
	DefaultSingleTable        = "billing"
	DefaultAccountPrefix      = "USER#"
	DefaultReminderIndex      = "GSI-1"
	DefaultPaymentIndex       = "GSI-2"
	DefaultSingleTTLAttribute = "expiresAt"
	DefaultSingleDueIndex     = "billing_due-billing_date-index"
)

// DefaultReminderProjection and DefaultPaymentProjection return the non-key
// attributes the reminder and payment indexes project: what a reminder or
// a collection run reads without fetching the item. The table's PK and SK
// and the index's own keys are always projected, so they are not listed.
func DefaultReminderProjection() []string {
	return []string{"SKU", "Email", "NextPaymentDate"}
}

// DefaultPaymentProjection: see [DefaultReminderProjection].
func DefaultPaymentProjection() []string {
	return []string{"Email", "PaymentDay", "PaymentAmount", "SKU", "PaymentDetails"}
}

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
	// (dynamostore.SingleTableDueIndexDefinition), give every writer
	// DueShards with SingleTableStoreConfig.DueIndexPending (the walk is
	// still read), run SingleTableRepository.BackfillDue until a pass
	// updates nothing, then drop DueIndexPending. Defaults to 0: no due
	// index, status queries walk PaymentIndex day by day. NextPaymentDate
	// and OpenPeriods on the subscription items are kept the same either
	// way.
	DueShards int
	// DueIndex is the sharded due GSI (see DueShards). Defaults to
	// "billing_due-billing_date-index".
	DueIndex string
}

// WithDefaults returns c with every empty field set to its default (the
// projections are copied).
func (c SingleTableConfig) WithDefaults() SingleTableConfig {
	def := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	def(&c.Table, DefaultSingleTable)
	def(&c.AccountPrefix, DefaultAccountPrefix)
	def(&c.ReminderIndex, DefaultReminderIndex)
	def(&c.PaymentIndex, DefaultPaymentIndex)
	def(&c.TTLAttribute, DefaultSingleTTLAttribute)
	def(&c.DueIndex, DefaultSingleDueIndex)
	if c.ReminderProjection == nil {
		c.ReminderProjection = DefaultReminderProjection()
	} else {
		c.ReminderProjection = slices.Clone(c.ReminderProjection)
	}
	if c.PaymentProjection == nil {
		c.PaymentProjection = DefaultPaymentProjection()
	} else {
		c.PaymentProjection = slices.Clone(c.PaymentProjection)
	}
	return c
}
