package billing

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dynabill/billing/internal/enum"
)

// Period is one billing period of one user, not the whole
// subscription: a user subscribed for a year has twelve of them, one per
// month, each with its own SubscriptionID (a new one every period). What
// a host calls the subscription is the user's chain of periods; the latest
// open one (SCHEDULED, ERROR, ACHSENT or PAUSED) is where it stands, and
// [Collector.Subscribe] returns the first.
//
// It is a record of the billing-activity table (and, with its data_
// fields, a row of billing-activity-history). Field comments give the stored attribute name;
// those names, the key schema and the encodings are the wire contract with
// existing tables (documented in package dynamostore).
type Period struct {
	// UserID is the owning user (user_id, partition key).
	UserID string
	// BillingDate is the due date of the period (billing_date, sort key),
	// stored in whole seconds UTC.
	BillingDate time.Time
	// SubscriptionID is the UUID of this record, that is of this period
	// (subscription_id, key of subscription_id-index): the next period has
	// another. It does not change when the period's billing date moves.
	SubscriptionID string
	// Amount is charged for the period (billing_amount, a string like "4.99").
	Amount Amount
	// Status is the lifecycle status (billing_status).
	Status Status
	// BillingPeriod is BillingDate as "MM/YYYY" (billing_period);
	// informational, see [BillingPeriod].
	BillingPeriod string
	// TransactionID is the processor's confirmation ID of the latest attempt
	// (transaction_id).
	TransactionID string
	// PaymentError is the processor's message for the latest failed attempt
	// (usio_error); cleared when the record completes.
	PaymentError string
	// InitialRunDate is the first collection attempt of the period (initial_run_date).
	InitialRunDate time.Time
	// CompletionDate is when the record reached a terminal status (completion_date).
	CompletionDate time.Time
	// LastRunDate is the latest update (last_run_date, sort key of the history
	// table), stored with a fixed nine-digit fraction. Every write advances it.
	LastRunDate time.Time
	// CreatedDate is when the record was first written (created_date).
	CreatedDate time.Time
	// Process is the stage that last updated the record (process).
	Process Process
	// UpdatedEvent tags a lifecycle update (updated_event).
	UpdatedEvent UpdatedEvent
	// Term is MONTHLY, YEARLY or WEEKLY (term); a missing term reads as
	// MONTHLY.
	Term Term
	// ReceiptAccountMask is the last four digits of the charged account
	// (receipt_account_mask).
	ReceiptAccountMask string
	// ReceiptTierName is the tier at collection time, "Name:Version"
	// (receipt_tier_name); see [Period.Tier].
	ReceiptTierName string
	// ReceiptPaymentType is the payment method type, e.g. "ACH" (receipt_payment_type).
	ReceiptPaymentType string
	// BillingWeek is which Friday of the month the user is billed on, 1–5,
	// for Friday billing; 0 means not on Friday billing and the attribute
	// billing_week is absent.
	BillingWeek int
	// PauseDurationMonths is how many months the subscription stays paused
	// (pause_duration_months).
	PauseDurationMonths int
	// IsPendingDowngrade is true while a requested downgrade is not applied
	// (is_pending_downgrade, omitted when false).
	IsPendingDowngrade bool

	// AnchorDay is the day of month the subscription was first billed on,
	// 1–31, carried from period to period so that a Jan 31 subscription bills
	// on Mar 31 after Feb 28 (billing_anchor_day, added by this library and
	// optional: 0 means unknown, and the day of BillingDate is used).
	AnchorDay int
	// Interval is how many terms one billing period spans: 3 with a monthly
	// term bills quarterly, 2 with a weekly term every other week
	// (billing_interval, added by this library and optional: 0 means 1, as
	// every record written without it is billed every term).
	Interval int
	// Attempt counts the collection attempts of this period whose outcome was
	// recorded (billing_attempt, added by this library, optional). Together
	// with SubscriptionID it derives the payment idempotency key.
	Attempt int

	// NoRetry is set when the provider declined the latest attempt as not
	// worth retrying; retry runs leave the record alone (billing_no_retry,
	// added by this library, omitted when false).
	NoRetry bool
	// LastAttempt is the latest collection attempt made durable before the
	// processor was called (billing_attempt_number, billing_attempt_key,
	// billing_attempt_amount, billing_attempt_tier, billing_attempt_process,
	// billing_attempt_started, billing_attempt_presented, billing_attempt_invoice and
	// billing_attempt_invoice_number, added by this library, optional: the
	// zero Attempt when none was recorded). While its Number is above
	// Attempt the record is in flight: see [Period.InFlight].
	LastAttempt Attempt

	// PendingTierName and PendingAmount are the tier and amount a pending
	// downgrade (IsPendingDowngrade) moves the next period to
	// (billing_pending_tier and billing_pending_amount, added by this
	// library, written only while PendingTierName is set).
	PendingTierName string
	PendingAmount   Amount

	// TrialEnd, when set, makes the record a trial: a period of zero that
	// the engine completes by itself, after which the first paid period
	// opens on TrialEnd, the day the anchor follows (billing_trial_end,
	// added by this library and optional: absent on every other record).
	// TrialAmount is what that first paid period costs
	// (billing_trial_amount, written with billing_trial_end). A host batch
	// that reprices records ([Repository.AddAll]) reprices a trial by its
	// TrialAmount: the trial's Amount is zero and never charged, whatever
	// the batch writes there (the engine cannot tell a reprice from a
	// mistaken write, and completes the trial without a charge).
	TrialEnd    time.Time
	TrialAmount Amount
	// AfterTrial marks the first paid period after a trial: the record the
	// engine opens on the trial's end when it completes the trial period
	// (billing_after_trial, BOOL, added by this library and optional:
	// absent on every other record). While that record is SCHEDULED and
	// not attempted the trial is still running: the notifier sends
	// [TrialEndingNoticeEvent] for it, [Collector.EndTrial] and
	// [Collector.ExtendTrial] move it, and a downgrade sets its charge.
	// Every write that carries the record forward (pause, resume, plan
	// change, date move, a host's batch of records as read) keeps it;
	// once the period is attempted or closed it no longer means a trial,
	// and it stays on the record as a fact. A later period never has it.
	// Records opened before this attribute existed carry only updated_event
	// [UpdatedTrialConverted]: [Period.IsAfterTrial] reads
	// both.
	AfterTrial bool
	// AccessEnd is when a cancellation now ([CancelNow]) ended the user's
	// paid access (billing_access_end, added by this library and optional:
	// absent on every other record), set on the periods it cancelled. The
	// user's paid periods opened at or before that instant count as paid
	// only up to it: [Subscription.PaidThrough] ends there, and a new
	// first period ([Collector.Subscribe], [Collector.Reactivate]) may
	// start from it, charged from its own date. The host was told to
	// refund the rest ([UserChange.Refund]); a later cancellation now
	// finds nothing left to refund. A come-back that reopens such a record
	// keeps it, so the refunded time stays unpaid; periods opened after it
	// are not affected.
	AccessEnd time.Time

	// Adjustments are the lines this period's charge carries besides its
	// plan: the proration of a plan change made during the period before
	// ([ProrateNextCharge]), credits and charges (billing_adjustments, a
	// JSON list, added by this library and optional: absent when none).
	// The engine replaces the slice, never changes it in place.
	Adjustments []Adjustment
	// Balance is the customer's credit balance this period carries: it
	// pays what it can of the period's charge, and what is left goes to
	// the next period ([Period.Due]) (billing_balance, an amount like
	// billing_amount, added by this library and optional: absent when
	// zero). On a user's latest open period it is the customer's balance.
	Balance Amount
	// Tax is the tax of the period's charge ([Config.Tax]), fixed just
	// before the period's first attempt and kept for every later one: a
	// retry and a replay charge the same (billing_tax, an amount like
	// billing_amount, billing_tax_inclusive, BOOL, omitted when false, and
	// billing_tax_description, added by this library and optional: all
	// absent when the tax is the zero Tax, not fixed). It is added to the
	// charge after the discounts, before the balance ([Period.Due]); the
	// next period does not carry it.
	Tax Tax
	// Discounts are the coupons applied to the subscription that come off
	// this period's charge, in the order applied (billing_discounts, a
	// JSON list, added by this library and optional: absent when none).
	// The next period carries those with charges left. The engine
	// replaces the slice, never changes it in place.
	Discounts []Discount

	// ChargeOf, when set, makes the record a one-off charge rather than a
	// period: the difference of a plan change made during the paid period
	// it names (that period's SubscriptionID), charged at once
	// ([ProrateNow]) (billing_charge_of, added by this library and
	// optional: absent on every other record). Its Amount is zero and its
	// Adjustments are the change's lines, so [Period.Due] is what it
	// charges. It is collected, retried and owed as a period is, but it
	// is no period of the schedule: no period follows it, and what a
	// subscription's plan, next charge and paid time are never come from
	// it. See [Period.IsOneOff].
	ChargeOf string

	// Dunning is the period's dunning once its charge was declined with
	// [Config.Dunning] set: the retry schedule's progress, the notices
	// sent, how it ended (billing_dunning; see [Dunning]). The zero
	// Dunning, absent from the item, on every other record. The engine
	// replaces its Notices, never changes them in place.
	Dunning Dunning

	// Change names the change a history row records: the event the engine
	// wrote it for (billing_change, added by this library and written to
	// history rows only). The engine sets it on the version it writes; it
	// is empty on a record read from the billing table, and on history rows
	// written before the library recorded it or by another program, whose
	// change the stream decoder derives from the row (package dynamostore).
	Change EventType

	// Request is the request a history row records: what the host asked
	// for under a request key (billing_request, added by this library and
	// written to history rows only, like Change). [Collector.Subscribe] and
	// the calls that take a user ([Collector.Cancel] and its
	// siblings) set it on the rows they write, so that a repeat of the key
	// can be told from another request; it is empty on a record read from
	// the billing table and on rows written before the library recorded it.
	// The text is the library's own (see [Collector.Subscription]'s doc);
	// hosts read it only to show it.
	Request string

	// Operator and Reason record who made a change and why, when an
	// operator made it: the signed-in operator a host passes in a request
	// ([UserRequest.Operator]) and the reason typed for it
	// (data_operator and data_reason, added by this library, written to
	// history rows only, like Request, and optional on read). They are
	// empty on a record read from the billing table, on rows of the
	// engine's own runs, and on rows written before the library recorded
	// them.
	Operator string
	Reason   string

	// Stored is what the store that read this record keeps about the item
	// it came from and the domain does not model: attributes other
	// services wrote and key text exactly as read. The engine copies it with
	// the record and never looks inside; a store reads it back when the
	// record is written again, so that bytes it does not own stay as they
	// were. Nil for a record that was not read from a store. Stores treat
	// the value as immutable, so copies of a record may share it.
	Stored any
}

// Attempt is one collection attempt as the collector records it on the
// record before it calls the processor: what it asked for, so that a later
// try can present exactly the same request.
type Attempt struct {
	// Number is the attempt's number within the period, from 1.
	Number int
	// Key is the idempotency key the processor was given.
	Key string
	// Amount is the amount asked for. A replay asks for this amount again,
	// whatever the record's amount has become since.
	Amount Amount
	// Tier is the receipt_tier_name sent with the request.
	Tier string
	// Process is the process that made the attempt.
	Process Process
	// Started is when the attempt was recorded, just before the first call.
	Started time.Time
	// Presented is when the request was last presented to the processor
	// again (a replay), recorded just before that call; zero before any
	// replay. A request for the key may be running until the later of
	// Started and Presented plus the processor's [RequestTimeout].
	Presented time.Time
	// Invoice and InvoiceNumber name the invoice the attempt pays, when
	// the collector issues invoices ([Config.Invoices]): decided before
	// the attempt is recorded, so a replay names the same one. Empty (and
	// left out of JSON) without invoices.
	Invoice, InvoiceNumber string `json:",omitempty"`
}

// LastPresented is when the attempt's request was last sent to the
// processor: the later of Started and Presented.
func (a Attempt) LastPresented() time.Time {
	if a.Presented.After(a.Started) {
		return a.Presented
	}
	return a.Started
}

// Request returns the payment request of the attempt on s: the request a
// replay presents. An attempt not yet recorded as answered on a record
// whose earlier attempts left a payment names it as
// [PaymentRequest.PriorPayment].
func (a Attempt) Request(s *Period) PaymentRequest {
	req := PaymentRequest{
		UserID: s.UserID, SubscriptionID: s.SubscriptionID, Amount: a.Amount, BillingDate: s.BillingDate,
		Tier: a.Tier, Process: a.Process, Attempt: a.Number, IdempotencyKey: a.Key, Started: a.Started,
		InvoiceID: a.Invoice, InvoiceNumber: a.InvoiceNumber,
	}
	if s.Attempt > 0 && a.Number > s.Attempt {
		req.PriorPayment = s.TransactionID
	}
	return req
}

// InFlight reports whether the record carries an attempt whose outcome is
// not recorded yet: the processor was (or may have been) called with
// LastAttempt's key, and nobody knows what it answered. Nothing may close
// or change an in-flight record until that outcome is resolved, by a replay
// of the same request or by asking the processor (see [PaymentLookup]).
func (s *Period) InFlight() bool { return s.LastAttempt.Number > s.Attempt }

// IsOneOff reports whether the record is a one-off charge, not a period
// of the schedule (see [Period.ChargeOf]).
func (s *Period) IsOneOff() bool { return s.ChargeOf != "" }

// IsTrial reports whether the record is a trial period (see
// [Period.TrialEnd]).
func (s *Period) IsTrial() bool { return !s.TrialEnd.IsZero() }

// IsAfterTrial reports whether s is the first paid period after a trial
// ([Period.AfterTrial]), or a record opened as one before that
// attribute existed: updated_event [UpdatedTrialConverted], which
// any later write of updated_event (a pause, a resume) replaces. It says
// nothing of the record's state: the trial is running only while the
// record is SCHEDULED and not attempted.
func (s *Period) IsAfterTrial() bool {
	return s.AfterTrial || s.UpdatedEvent == UpdatedTrialConverted
}

// IsFirstAfterTrial reports whether the period is the first paid one
// after a trial and not attempted yet: the trial is still running. It is
// the engine's own test, for the notifier's trial-ending notice.
func (s *Period) IsFirstAfterTrial() bool { return firstAfterTrial(s) }

// Key describes the item's primary key for error messages and logs.
func (s *Period) Key() string {
	return fmt.Sprintf("user_id=%s billing_date=%s", s.UserID, s.BillingDate.UTC().Format(time.RFC3339))
}

// Tier returns the tier name of ReceiptTierName: "Plus" for "Plus:v2".
func (s *Period) Tier() string {
	name, _ := splitTier(s.ReceiptTierName)
	return name
}

// TierVersion returns the tier version of ReceiptTierName: "v2" for
// "Plus:v2", "" when there is none.
func (s *Period) TierVersion() string {
	_, v := splitTier(s.ReceiptTierName)
	return v
}

// EffectiveAnchorDay returns AnchorDay, or the day of BillingDate when the
// record does not carry one (legacy items).
func (s *Period) EffectiveAnchorDay() int {
	if s.AnchorDay > 0 {
		return s.AnchorDay
	}
	return s.BillingDate.UTC().Day()
}

// Schedule returns the record's billing schedule: its term, anchor day and
// Friday billing week, as used by [Schedule.Next].
func (s *Period) Schedule() Schedule {
	return Schedule{Term: s.Term, AnchorDay: s.EffectiveAnchorDay(), BillingWeek: s.BillingWeek, Interval: s.Interval}
}

// Clone returns a copy of s, with its own Adjustments and Discounts (its
// Tax is a value, copied with it). The
// engine never changes a record's Adjustments or Discounts in place (it
// sets a new slice), so an assignment copies a record as well, as long
// as the copy does the same.
func (s *Period) Clone() Period {
	v := *s
	v.Adjustments = slices.Clone(s.Adjustments)
	v.Discounts = slices.Clone(s.Discounts)
	v.Dunning = s.Dunning.clone()
	return v
}

// splitTier splits a receipt_tier_name "Name:Version" at its first colon:
// "Plus:v2" gives ("Plus", "v2"), "Plus" gives ("Plus", "").
func splitTier(s string) (name, version string) {
	name, version, _ = strings.Cut(s, ":")
	return name, version
}

// joinTier builds a receipt_tier_name: joinTier("Plus", "v2") is "Plus:v2";
// an empty version gives just the name.
func joinTier(name, version string) string {
	if version == "" {
		return name
	}
	return name + ":" + version
}

// Term is the billing term of a subscription: how far apart its billing
// periods are. It is stored in the term attribute.
type Term string

// The terms. An empty stored term decodes as [TermMonthly].
const (
	TermMonthly Term = "MONTHLY"
	TermYearly  Term = "YEARLY"
	// TermWeekly bills every seven days (times [Schedule.Interval]) from
	// the billing date; anchor day and Friday week do not apply.
	TermWeekly Term = "WEEKLY"
)

// terms is every term, MONTHLY first.
var terms = enum.New(TermMonthly, TermYearly, TermWeekly)

// ParseTerm parses a stored term: "MONTHLY", "YEARLY", "WEEKLY", or ""
// (MONTHLY).
// Anything else wraps [ErrInvalidTerm].
func ParseTerm(s string) (Term, error) {
	return terms.Parse(s, emptyTermIsMonthly, invalidField("term", ErrInvalidTerm))
}

// emptyTermIsMonthly reads a missing term as MONTHLY, as legacy items mean it.
func emptyTermIsMonthly(s string) string {
	if s == "" {
		return string(TermMonthly)
	}
	return s
}

// Months returns the length of the term in months: 1 or 12 (empty is MONTHLY).
// It returns 0 for the weekly term and an unknown one.
func (t Term) Months() int {
	switch t {
	case "", TermMonthly:
		return 1
	case TermYearly:
		return 12
	}
	return 0
}

// Process names the collection stage or flow that last wrote a record
// (the process attribute).
type Process string

// The processes.
const (
	ProcessInitial         Process = "INITIAL"          // first scheduled attempt
	ProcessRetry           Process = "RETRY"            // daily retry of an ERROR record
	ProcessPause           Process = "PAUSE"            // pause run advancing a past-due PAUSED record
	ProcessWebhook         Process = "WEBHOOK"          // income-detection event
	ProcessWebhookBalance  Process = "WEBHOOK_BALANCE"  // new-account balance event
	ProcessBatch           Process = "BATCH"            // operational batch run
	ProcessReactivation    Process = "REACTIVATION"     // user reactivation flow
	ProcessManualRepayment Process = "MANUAL_REPAYMENT" // POST .../pay
	ProcessNotIdentified   Process = "NOT_IDENTIFIED"   // could not be determined
	ProcessSubscribe       Process = "SUBSCRIBE"        // the host's Collector.Subscribe created the record
)

// processes is every known process in the order processValues lists them.
var processes = enum.New(
	ProcessInitial, ProcessRetry, ProcessPause, ProcessWebhook, ProcessWebhookBalance,
	ProcessBatch, ProcessReactivation, ProcessManualRepayment, ProcessNotIdentified, ProcessSubscribe,
)

// processValues lists every known process.
func processValues() []Process { return processes.Values() }

// Valid reports whether p is a known process. Decoding keeps unknown values
// as they are (the attribute is informational); writers should use known ones.
func (p Process) Valid() bool { return processes.Valid(p) }

// UpdatedEvent is a period's updated_event attribute: a mark the legacy
// services read (a pending cancellation, a skipped pause month), not an
// event a host subscribes to — those are [EventType]. Other services write
// it too, so decoding keeps any value.
type UpdatedEvent string

// The known updated events.
const (
	UpdatedPauseSkipped       UpdatedEvent = "pause-skipped"
	UpdatedPausePendingResume UpdatedEvent = "pause-pending-resume"
	UpdatedPauseResume        UpdatedEvent = "pause-resume"
	UpdatedUserReactivated    UpdatedEvent = "user-reactivated"
	// UpdatedUserSubscribed marks the first period of a subscription made by
	// [Collector.Subscribe].
	UpdatedUserSubscribed UpdatedEvent = "user-subscribed"
	// UpdatedACHOverdue marks an ACHSENT record moved to STALE because no
	// settlement came within the collector's ACH settlement deadline.
	UpdatedACHOverdue UpdatedEvent = "ach-overdue"
	// UpdatedPendingCancellation marks a user who has started cancelling; the
	// notifier sends them nothing.
	UpdatedPendingCancellation UpdatedEvent = "PENDING_CANCELLATION"
	// UpdatedTrialConverted is the updated_event of the first paid period
	// after a trial when it is opened, on the trial's end: the period the
	// trial-ending notice is about. A later write of updated_event (a pause,
	// a resume) replaces it, so the engine marks that period with
	// [Period.AfterTrial] too and reads updated_event only for records
	// opened before that attribute existed.
	UpdatedTrialConverted UpdatedEvent = "trial-converted"
)
