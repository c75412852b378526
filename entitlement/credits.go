package entitlement

import (
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/dynabill/billing"
)

// MaxCreditAmount bounds the n of one grant, top-up or consume, so that
// balances stay far from int64 overflow.
const MaxCreditAmount int64 = 1_000_000_000_000

// MaxRequestID bounds the request ID of a grant, top-up or consume, which
// becomes part of a sort key.
const MaxRequestID = 256

// maxGrantPeriod bounds a monthly grant period, which becomes part of a
// sort key.
const maxGrantPeriod = 256

// Credits is a user's credit balance: the item PK=USER#<id>,
// SK=CREDITS#BALANCE.
type Credits struct {
	// UserID is the account ID.
	UserID string
	// Balance is the number of credits available now: 0 when there is no
	// record, and 0 when the record is past ExpiresAt (DynamoDB deletes
	// expired items up to a few days late; until then they read as empty).
	Balance int64
	// Expired reports that the record is past ExpiresAt.
	Expired bool
	// ExpiresAt is when the whole balance expires; zero for never. Stored
	// as Unix seconds in the table's TTL attribute (expiresAt).
	ExpiresAt time.Time
	// LastTopUp is the time of the last [Accounts.TopUp].
	LastTopUp time.Time
	// LastReset is the time of the last applied [Accounts.MonthlyGrant].
	LastReset time.Time
	// LastGrantPeriod and LastGrantEventID identify the last applied
	// monthly grant (attributes added by this library; optional on read).
	LastGrantPeriod  string
	LastGrantEventID string
	// CreatedAt and UpdatedAt are the record's timestamps.
	CreatedAt, UpdatedAt time.Time
	// Repeated reports, in the result of [Accounts.Grant], [Accounts.TopUp]
	// or [Accounts.Consume], that the request ID had already been applied;
	// nothing changed, and the other fields are the current state. Never
	// stored.
	Repeated bool
}

// InsufficientCreditsError reports a consume the balance cannot cover.
type InsufficientCreditsError struct {
	UserID string
	// Balance is the balance seen when the condition failed (0 for no
	// record or an expired one).
	Balance int64
	// Requested is the amount asked for.
	Requested int64
}

// Error implements error.
func (e *InsufficientCreditsError) Error() string {
	return fmt.Sprintf("%v: user %s has %d, needs %d", ErrInsufficientCredits, e.UserID, e.Balance, e.Requested)
}

// Unwrap returns [ErrInsufficientCredits].
func (e *InsufficientCreditsError) Unwrap() error { return ErrInsufficientCredits }

// CreditQuotas maps a tier to its monthly credit grant.
type CreditQuotas map[Tier]int64

// DefaultCreditQuotas returns the monthly quotas per tier: FREE 0,
// INITIATE 2, JOURNEYMAN 5, SAGE 15, GUILDMASTER 15 (founder passes grant
// the quota of their tier: FOUNDING_MEMBER that of SAGE, GUILD_BUILDER that
// of GUILDMASTER).
func DefaultCreditQuotas() CreditQuotas {
	return CreditQuotas{TierFree: 0, TierInitiate: 2, TierJourneyman: 5, TierSage: 15, TierGuildmaster: 15}
}

// WithDefaults returns a copy of q in which every tier missing from q has
// its default quota. A key that is not a tier or a quota outside
// 0..MaxCreditAmount is an error.
func (q CreditQuotas) WithDefaults() (CreditQuotas, error) {
	out := DefaultCreditQuotas()
	for t, n := range q {
		if !t.Valid() {
			return nil, &billing.FieldError{Field: "quota tier", Value: string(t), Err: ErrInvalidTier}
		}
		if n < 0 || n > MaxCreditAmount {
			return nil, &billing.FieldError{Field: "quota of " + string(t), Value: fmt.Sprint(n), Err: ErrInvalidCredits}
		}
		out[t] = n
	}
	return out, nil
}

// Quota returns the monthly grant of tier t (0 for an unknown tier).
func (q CreditQuotas) Quota(t Tier) int64 { return q[t] }

// MonthlyGrantResult reports what [Accounts.MonthlyGrant] did.
type MonthlyGrantResult struct {
	// Applied is true when this call granted the quota; false when the
	// period was already granted or the quota is 0 (nothing written).
	Applied bool
	// Tier is the parsed tier, Period the period as given.
	Tier   Tier
	Period string
	// Amount is the number of credits added by this call.
	Amount int64
}

// CheckCreditAmount returns an error wrapping [ErrInvalidCredits] unless
// 1 <= n <= MaxCreditAmount. Implementations of [Accounts] check every
// grant and consume with it.
func CheckCreditAmount(n int64) error {
	if n <= 0 || n > MaxCreditAmount {
		return fmt.Errorf("%w: %d (want 1..%d)", ErrInvalidCredits, n, MaxCreditAmount)
	}
	return nil
}

// CheckGrantPeriod returns an error wrapping [ErrInvalidCredits] for an
// empty period or one longer than 256 bytes. Implementations of [Accounts]
// check a monthly grant's period with it.
func CheckGrantPeriod(period string) error {
	if period == "" || len(period) > maxGrantPeriod {
		return fmt.Errorf("%w: grant period %q (1 to %d bytes)", ErrInvalidCredits, period, maxGrantPeriod)
	}
	return nil
}

// CheckRequestID returns a [*billing.FieldError] naming "request ID" and
// wrapping [ErrInvalidCredits] for an empty request ID, one longer than
// [MaxRequestID] bytes or one that is not valid UTF-8 (DynamoDB stores
// strings as UTF-8). Implementations of [Accounts] check the request ID of
// every grant, top-up and consume with it.
func CheckRequestID(requestID string) error {
	if requestID == "" || len(requestID) > MaxRequestID || !utf8.ValidString(requestID) {
		return &billing.FieldError{Field: "request ID", Value: requestID,
			Err: fmt.Errorf("%w: 1 to %d bytes of UTF-8 required", ErrInvalidCredits, MaxRequestID)}
	}
	return nil
}
