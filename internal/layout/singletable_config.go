package layout

import (
	"fmt"
	"github.com/dynabill/billing/internal/storeconf"
	"slices"
	"strings"
)

// Default names of the single-table layout: the table, account partitions
// USER#<id>, a sparse reminder index GSI-1 and payment index GSI-2, and
// the TTL attribute expiresAt that credit balances, grant markers and
// receipts expire by. Every one can be set in [SingleTableConfig].
// They are storeconf's, where the public config types live.
const (
	DefaultSingleTable        = storeconf.DefaultSingleTable
	DefaultAccountPrefix      = storeconf.DefaultAccountPrefix
	DefaultReminderIndex      = storeconf.DefaultReminderIndex
	DefaultPaymentIndex       = storeconf.DefaultPaymentIndex
	DefaultSingleTTLAttribute = storeconf.DefaultSingleTTLAttribute
	// DefaultSingleDueIndex is the single table's sharded due index, named
	// as the legacy table's is.
	DefaultSingleDueIndex = storeconf.DefaultSingleDueIndex
	maxAccountPrefix      = 64
	// MaxDueShards bounds the due shards of either layout
	// (dynamostore.MaxDueShards and memory.MaxDueShards are this value).
	MaxDueShards = storeconf.MaxDueShards
)

// Key and index attributes of the single-table layout.
const (
	// AttrPK is the generic partition key: the account prefix and the
	// account (user) ID, e.g. "USER#abc123" or "ACC#123".
	AttrPK = "PK"
	// AttrSK is the generic sort key naming the entity within the account:
	// "CREDITS#BALANCE", "SUBSCRIPTION#<id>", "FOUNDER#<pass>",
	// "PROFILE#<id>", and for the recurring payments layout "SUB#…", "REC#…".
	AttrSK = "SK"
	// AttrNextReminderDate and AttrLastReminderDate key the reminder index.
	AttrNextReminderDate = "NextReminderDate"
	AttrLastReminderDate = "LastReminderDate"
	// AttrNextPaymentDate and AttrLastPaymentDate key the payment index.
	AttrNextPaymentDate = "NextPaymentDate"
	AttrLastPaymentDate = "LastPaymentDate"
)

// Sort keys and sort-key prefixes of the account entities.
// SKCreditRequestPrefix + request ID is the marker of an applied grant,
// top-up or consume.
const (
	SKCredits             = "CREDITS#BALANCE"
	SKCreditGrantPrefix   = "CREDITS#GRANT#"
	SKCreditRequestPrefix = "CREDITS#REQUEST#"
	SKSubscriptionPrefix  = "SUBSCRIPTION#"
	SKFounderPrefix       = "FOUNDER#"
	SKProfilePrefix       = "PROFILE#"
)

// DefaultReminderProjection and DefaultPaymentProjection return the non-key
// attributes the reminder and payment indexes project: what a reminder or
// a collection run reads without fetching the item. The table's PK and SK and the index's own keys are always projected, so
// they are not listed.
func DefaultReminderProjection() []string { return storeconf.DefaultReminderProjection() }

// DefaultPaymentProjection: see [DefaultReminderProjection].
func DefaultPaymentProjection() []string { return storeconf.DefaultPaymentProjection() }

// SingleTableConfig is the stores' table configuration with the
// single-table codecs and key builders as methods. The public
// storeconf.SingleTableConfig (dynamostore.SingleTableConfig and
// memory.SingleTableConfig are aliases of it), which documents the fields
// and their defaults, converts to it field for field.
type SingleTableConfig struct {
	Table, AccountPrefix, ReminderIndex, PaymentIndex string
	ReminderProjection, PaymentProjection             []string
	TTLAttribute                                      string
	DueShards                                         int
	DueIndex                                          string
}

// WithDefaults returns c with every empty field set to its default. The
// projection slices are copied.
func (c SingleTableConfig) WithDefaults() SingleTableConfig {
	return SingleTableConfig(storeconf.SingleTableConfig(c).WithDefaults())
}

// decodeDefaults fills only what the item decoders read (WithDefaults
// also copies the projections).
func (c SingleTableConfig) decodeDefaults() SingleTableConfig {
	if c.AccountPrefix == "" {
		c.AccountPrefix = DefaultAccountPrefix
	}
	if c.TTLAttribute == "" {
		c.TTLAttribute = DefaultSingleTTLAttribute
	}
	return c
}

// Validate checks a config after defaults.
func (c SingleTableConfig) Validate() error {
	if len(c.AccountPrefix) > maxAccountPrefix {
		return fmt.Errorf("billing: SingleTableConfig.AccountPrefix: longer than %d bytes", maxAccountPrefix)
	}
	if c.ReminderIndex == c.PaymentIndex {
		return fmt.Errorf("billing: SingleTableConfig: ReminderIndex and PaymentIndex are both %q", c.PaymentIndex)
	}
	if c.DueShards < 0 || c.DueShards > MaxDueShards {
		return fmt.Errorf("billing: SingleTableConfig.DueShards: %d outside 0..%d", c.DueShards, MaxDueShards)
	}
	if c.DueShards > 0 && (c.DueIndex == c.ReminderIndex || c.DueIndex == c.PaymentIndex) {
		return fmt.Errorf("billing: SingleTableConfig.DueIndex: %q names another index", c.DueIndex)
	}
	keys := []string{AttrPK, AttrSK, AttrNextReminderDate, AttrLastReminderDate, AttrNextPaymentDate, AttrLastPaymentDate, AttrDue}
	if slices.Contains(keys, c.TTLAttribute) {
		return fmt.Errorf("billing: SingleTableConfig.TTLAttribute: %q is a key attribute", c.TTLAttribute)
	}
	for _, p := range []struct {
		field string
		attrs []string
		keys  []string
	}{
		{"ReminderProjection", c.ReminderProjection, []string{AttrPK, AttrSK, AttrNextReminderDate, AttrLastReminderDate}},
		{"PaymentProjection", c.PaymentProjection, []string{AttrPK, AttrSK, AttrNextPaymentDate, AttrLastPaymentDate}},
	} {
		for _, a := range p.attrs {
			if a == "" || slices.Contains(p.keys, a) {
				return fmt.Errorf("billing: SingleTableConfig.%s: %q is empty or a key of the table or the index (keys are always projected)", p.field, a)
			}
		}
	}
	return nil
}

// CheckEngine checks, after defaults, what the subscription engine's items
// need beyond [SingleTableConfig.Validate]: no account partition key can
// be a period ID pointer's partition key ([PeriodIDPrefix]), so a pointer
// is never read as an account's item. That holds when neither prefix
// starts the other. name is the config as the caller's errors name it,
// e.g. "billing: SingleTableConfig".
func (c SingleTableConfig) CheckEngine(name string) error {
	if strings.HasPrefix(PeriodIDPrefix, c.AccountPrefix) || strings.HasPrefix(c.AccountPrefix, PeriodIDPrefix) {
		return fmt.Errorf("%s.AccountPrefix %q clashes with %q", name, c.AccountPrefix, PeriodIDPrefix)
	}
	return nil
}

// accountPK is the partition key of an account.
func (c SingleTableConfig) AccountPK(accountID string) string { return c.AccountPrefix + accountID }
