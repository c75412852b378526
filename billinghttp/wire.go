package billinghttp

import (
	"time"

	"github.com/dynabill/billing"
)

// SubscriptionJSON is the wire form of a [billing.Period]: the JSON
// the handler answers with. It is a stable contract of its own, decoupled
// from the library struct: field names are the billing-activity attribute
// names (snake_case) — except payment_error, the processor's message for
// the latest failed attempt, stored as usio_error (a processor's name the
// API does not repeat) —, amounts are strings in canonical form ("4.99"),
// billing_date is RFC 3339 in whole seconds UTC and the other timestamps
// RFC 3339 with fractional seconds, UTC. Fields marked omitempty are absent
// when unset. The data_ and unknown attributes of stored items are never
// sent.
type SubscriptionJSON struct {
	UserID              string `json:"user_id"`
	SubscriptionID      string `json:"subscription_id"`
	BillingDate         string `json:"billing_date"`
	BillingPeriod       string `json:"billing_period"`
	BillingAmount       string `json:"billing_amount"`
	BillingStatus       string `json:"billing_status"`
	Term                string `json:"term"`
	ReceiptTierName     string `json:"receipt_tier_name"`
	PauseDurationMonths int    `json:"pause_duration_months"`
	IsPendingDowngrade  bool   `json:"is_pending_downgrade"`
	Attempt             int    `json:"billing_attempt"`

	TransactionID      string `json:"transaction_id,omitempty"`
	PaymentError       string `json:"payment_error,omitempty"`
	InitialRunDate     string `json:"initial_run_date,omitempty"`
	CompletionDate     string `json:"completion_date,omitempty"`
	LastRunDate        string `json:"last_run_date,omitempty"`
	CreatedDate        string `json:"created_date,omitempty"`
	Process            string `json:"process,omitempty"`
	UpdatedEvent       string `json:"updated_event,omitempty"`
	ReceiptAccountMask string `json:"receipt_account_mask,omitempty"`
	ReceiptPaymentType string `json:"receipt_payment_type,omitempty"`
	BillingWeek        int    `json:"billing_week,omitempty"`
	AnchorDay          int    `json:"billing_anchor_day,omitempty"`
	Interval           int    `json:"billing_interval,omitempty"`
	NoRetry            bool   `json:"billing_no_retry,omitempty"`
	PendingTierName    string `json:"billing_pending_tier,omitempty"`
	PendingAmount      string `json:"billing_pending_amount,omitempty"`
}

// NewSubscriptionJSON converts a record to its wire form. A missing term
// reads as MONTHLY, as stored records do.
func NewSubscriptionJSON(s billing.Period) SubscriptionJSON {
	term := s.Term
	if term == "" {
		term = billing.TermMonthly
	}
	out := SubscriptionJSON{
		UserID:              s.UserID,
		SubscriptionID:      s.SubscriptionID,
		BillingDate:         formatDate(s.BillingDate),
		BillingPeriod:       s.BillingPeriod,
		BillingAmount:       s.Amount.String(),
		BillingStatus:       string(s.Status),
		Term:                string(term),
		ReceiptTierName:     s.ReceiptTierName,
		PauseDurationMonths: s.PauseDurationMonths,
		IsPendingDowngrade:  s.IsPendingDowngrade,
		Attempt:             s.Attempt,
		TransactionID:       s.TransactionID,
		PaymentError:        s.PaymentError,
		InitialRunDate:      formatTime(s.InitialRunDate),
		CompletionDate:      formatTime(s.CompletionDate),
		LastRunDate:         formatTime(s.LastRunDate),
		CreatedDate:         formatTime(s.CreatedDate),
		Process:             string(s.Process),
		UpdatedEvent:        string(s.UpdatedEvent),
		ReceiptAccountMask:  s.ReceiptAccountMask,
		ReceiptPaymentType:  s.ReceiptPaymentType,
		BillingWeek:         s.BillingWeek,
		AnchorDay:           s.AnchorDay,
		Interval:            s.Interval,
		NoRetry:             s.NoRetry,
		PendingTierName:     s.PendingTierName,
	}
	if s.PendingTierName != "" {
		out.PendingAmount = s.PendingAmount.String()
	}
	return out
}

func newSubscriptionsJSON(subs []billing.Period) []SubscriptionJSON {
	out := make([]SubscriptionJSON, 0, len(subs)) // [] rather than null when empty
	for _, s := range subs {
		out = append(out, NewSubscriptionJSON(s))
	}
	return out
}

// ChangeJSON is the answer of an admin change: the record before and after
// and the records the change created (a waive opens the next period). A
// reactivation has no before and after, only the record it created.
type ChangeJSON struct {
	Before  *SubscriptionJSON  `json:"before,omitempty"`
	After   *SubscriptionJSON  `json:"after,omitempty"`
	Created []SubscriptionJSON `json:"created"`
}

// NewChangeJSON converts an admin change to its wire form.
func NewChangeJSON(c billing.Change) ChangeJSON {
	before, after := NewSubscriptionJSON(c.Before), NewSubscriptionJSON(c.After)
	return ChangeJSON{Before: &before, After: &after, Created: newSubscriptionsJSON(c.Created)}
}

// ReportJSON is the wire form of the [billing.Report] of a manual
// repayment: what the collector did. The reasons of failed items are not
// sent (they are internal error texts); a failed repayment is an error
// response instead.
type ReportJSON struct {
	Kind          string `json:"kind"`
	Started       string `json:"started"`
	Finished      string `json:"finished"`
	Attempted     int    `json:"attempted"`
	Collected     int    `json:"collected"`
	Pending       int    `json:"pending"`
	Declined      int    `json:"declined"`
	Unknown       int    `json:"unknown"`
	RateLimited   int    `json:"rate_limited"`
	Stale         int    `json:"stale"`
	NotEligible   int    `json:"not_eligible"`
	SkippedLocked int    `json:"skipped_locked"`
	Conflicts     int    `json:"conflicts"`
}

// NewReportJSON converts a collector report to its wire form.
func NewReportJSON(r *billing.Report) ReportJSON {
	if r == nil {
		return ReportJSON{}
	}
	return ReportJSON{
		Kind: r.Kind, Started: formatTime(r.Started), Finished: formatTime(r.Finished),
		Attempted: r.Attempted, Collected: r.Collected, Pending: r.Pending, Declined: r.Declined,
		Unknown: r.Unknown, RateLimited: r.RateLimited, Stale: r.Stale, NotEligible: r.NotEligible,
		SkippedLocked: r.SkippedLocked, Conflicts: r.Conflicts,
	}
}

// PayJSON is the answer of POST …/pay: the collector's report and the
// record after the attempt. Subscription is absent in the rare case the
// record could not be read back after the attempt (the report stands; the
// failure is logged).
type PayJSON struct {
	Report       ReportJSON        `json:"report"`
	Subscription *SubscriptionJSON `json:"subscription,omitempty"`
}

// Request bodies. Each is one flat JSON object whose keys are the field
// names below, exactly (case-sensitive), each at most once; unknown or
// repeated keys, objects or arrays as values, trailing data and bodies
// over Config.MaxBodyBytes are refused.
type (
	// PauseRequest is the body of POST …/pause: the number of months to
	// pause, 1 to 120, on every term.
	PauseRequest struct {
		Months *int `json:"months"`
	}

	// BillingDateRequest is the body of POST …/billing-date: the new
	// billing date, a calendar day "2024-03-15" (midnight UTC), or an
	// RFC 3339 timestamp in UTC ("2024-03-15T09:00:00Z"); another offset
	// is refused.
	BillingDateRequest struct {
		BillingDate string `json:"billing_date"`
	}

	// TierRequest is the body of POST …/tier: the tier "Name:Version", the
	// amount as a string ("2.99", never a JSON number) and whether it is a
	// downgrade (applied from the next period) rather than an upgrade
	// (applied at once). When the collector has a price list
	// ([billing.Config.Prices]) the amount may be left out, and the
	// tier's price is charged; an amount given must then be that price.
	// Without a price list the amount is required, more than zero (unless
	// [billing.Config.AllowFreeTiers]) and at most
	// [billing.Config.MaxCharge].
	TierRequest struct {
		Tier      string  `json:"tier"`
		Amount    *string `json:"amount"`
		Downgrade bool    `json:"downgrade"`
	}

	// ReactivateRequest is the body of POST /{user_id}/reactivate: the
	// billing date of the new record, as in [BillingDateRequest].
	ReactivateRequest struct {
		BillingDate string `json:"billing_date"`
	}
)

// ErrorJSON is the body of every error response:
//
//	{"error": {"code": "not_found", "message": "subscription not found"}}
type ErrorJSON struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail says what went wrong. Code is stable and meant for programs
// (see the package documentation for the list); Message is for people and
// may change. Field names the request field at fault, for bad input.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

func formatDate(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}
