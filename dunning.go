package billing

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// This file is dunning: what happens to a period after its charge is
// declined. The period is retried on a schedule counted from its first
// decline, the customer is told (payment failed, action required, a final
// notice), and when the schedule ends unpaid a final action is applied
// once. A new payment method ([Collector.PaymentMethodUpdated]) retries
// the owed periods at once; a payment by any path ends the dunning.
//
// The schedule's state lives on the period's own record ([Period.Dunning]),
// written with the outcomes and notices it follows, so that a run an hour
// later or on another host agrees with the one before.

// DeclineKind says why the processor declined a charge, in the terms
// the dunning schedule decides on ([PaymentResult.Decline]).
type DeclineKind string

// The kinds of decline.
const (
	// DeclineOther is a decline the provider did not classify: retried
	// on the schedule, as a lack of funds is.
	DeclineOther DeclineKind = ""
	// DeclineInsufficientFunds: the account lacks the money today; a
	// later try may succeed. Retried on the schedule.
	DeclineInsufficientFunds DeclineKind = "insufficient_funds"
	// DeclineExpiredCard: the card on file expired or its number is
	// wrong. Trying it again cannot succeed: not retried, but the
	// customer is told to update it and the schedule's end still comes.
	DeclineExpiredCard DeclineKind = "expired_card"
	// DeclineAuthenticationRequired: the bank asks the customer to
	// confirm the payment (3-D Secure). Not retried off session: the
	// customer gets an action-required notice with the processor's
	// confirmation link ([PaymentResult.ActionURL]).
	DeclineAuthenticationRequired DeclineKind = "authentication_required"
	// DeclineHard: the card was reported lost or stolen, the account is
	// closed, or the processor suspects fraud. Never retried, whatever
	// the schedule says; only a new payment method pays the period. A
	// decline the provider marks not [PaymentResult.Retryable] is hard.
	DeclineHard DeclineKind = "hard"
)

// Valid reports whether k is one of the kinds above.
func (k DeclineKind) Valid() bool {
	switch k {
	case DeclineOther, DeclineInsufficientFunds, DeclineExpiredCard, DeclineAuthenticationRequired, DeclineHard:
		return true
	}
	return false
}

// FinalAction is what the collector does when a period's dunning
// schedule ends unpaid ([DunningPolicy.FinalAction]).
type FinalAction string

// The final actions.
const (
	// FinalCancel cancels the subscription: the periods after the owed
	// one that are not charged yet become CANCELLED. The owed period
	// stays owed (ERROR): a new payment method still pays it.
	FinalCancel FinalAction = "cancel"
	// FinalPause pauses the subscription: the period after the owed one,
	// not charged yet, becomes PAUSED for [DunningPolicy.PauseMonths].
	FinalPause FinalAction = "pause"
	// FinalLeavePastDue changes nothing but the end of the retries: the
	// subscription stays past due and its next periods are billed as
	// usual.
	FinalLeavePastDue FinalAction = "past_due"
)

// DunningEnd is how a period's dunning ended ([Dunning.End]): recovered,
// or one of the final actions.
type DunningEnd string

// DunningRecovered: the period was paid (by a retry, a new payment method,
// the customer on session, a late settlement) before the schedule ended.
const DunningRecovered DunningEnd = "recovered"

// The notices of dunning ([RenewalNotice.EventType]).
const (
	// PaymentFailedNoticeEvent tells the customer a charge was declined:
	// the amount, the reason in plain words, and the host's link to
	// update the payment method. Sent once per period, on its first
	// decline.
	PaymentFailedNoticeEvent = "payment_failed"
	// PaymentActionRequiredNoticeEvent asks the customer to confirm a
	// payment the bank holds for authentication, with the processor's
	// link. Sent once per attempt that asks for it.
	PaymentActionRequiredNoticeEvent = "payment_action_required"
	// PaymentFinalNoticeEvent warns the customer, [DunningPolicy.FinalNoticeDays]
	// before the final action, that it is coming. Sent once per period.
	PaymentFinalNoticeEvent = "payment_final_notice"
)

// DefaultRetryDays is the default retry schedule: days after the first
// decline (UTC calendar days) on which a declined period is tried again.
// Seven retries and the first attempt make eight tries within two weeks,
// the number Stripe recommends for its Smart Retries; the spacing is
// tighter early, when a lack of funds is most often brief (a payday), and
// two days apart later so the customer has time to act on the notices.
var DefaultRetryDays = []int{1, 3, 5, 7, 9, 11, 13}

// DunningPolicy configures dunning ([Config.Dunning]): the retry schedule,
// the notices and the final action. The zero value is the default
// schedule, notices off, and [FinalCancel] on day 14.
type DunningPolicy struct {
	// RetryDays are the days after a period's first decline (UTC
	// calendar days: 1 is the day after) on which the retry run tries
	// it again, one try per entry, in increasing order. A retry missed
	// (no run that day) is made by the next run, and the next entry
	// still waits for its own day. Defaults to [DefaultRetryDays].
	RetryDays []int
	// ByDecline overrides RetryDays for a kind of decline (the latest
	// one's). Defaults: [DeclineExpiredCard] and
	// [DeclineAuthenticationRequired] are not retried (an empty
	// schedule: the same card off session cannot succeed), every other
	// kind follows RetryDays. [DeclineHard] is never retried, whatever
	// is set here.
	ByDecline map[DeclineKind][]int
	// FinalDay is the day after the first decline on which the final
	// action is applied to a period still owed. It must be after the
	// last retry day. Defaults to the last of RetryDays plus one (14 with
	// the default schedule).
	FinalDay int
	// FinalNoticeDays is how many days before FinalDay the final notice
	// goes out. Defaults to 3; negative sends none.
	FinalNoticeDays int
	// FinalAction is what the end of the schedule does. Defaults to
	// [FinalCancel], as Stripe's and Recurly's dunning do by default: a
	// subscription nobody pays for ends.
	FinalAction FinalAction
	// PauseMonths is how long [FinalPause] pauses. Defaults to 1.
	PauseMonths int
	// Notifier sends the notices, to the email Users gives for the
	// period's user. Both or neither: without them no notice is sent
	// (the schedule and the final action still run).
	Notifier Notifier
	Users    UserDirectory
	// UpdatePaymentURL is the host's page where a customer updates the
	// payment method, sent in the notices ([RenewalNotice.UpdatePaymentURL]).
	// Optional.
	UpdatePaymentURL string
}

// withDefaults checks p and fills its defaults.
func (p DunningPolicy) withDefaults() (DunningPolicy, error) {
	bad := func(format string, args ...any) (DunningPolicy, error) {
		return p, fmt.Errorf("billing: Config.Dunning: "+format, args...)
	}
	if p.RetryDays == nil {
		p.RetryDays = DefaultRetryDays
	}
	check := func(days []int) error {
		for i, d := range days {
			if d < 1 || d > 365 || i > 0 && d <= days[i-1] {
				return fmt.Errorf("retry days %v: each 1..365, increasing", days)
			}
		}
		return nil
	}
	if err := check(p.RetryDays); err != nil {
		return bad("%v", err)
	}
	last := 0
	if n := len(p.RetryDays); n > 0 {
		last = p.RetryDays[n-1]
	}
	byKind := map[DeclineKind][]int{DeclineExpiredCard: {}, DeclineAuthenticationRequired: {}}
	for k, days := range p.ByDecline {
		if !k.Valid() {
			return bad("ByDecline: unknown kind %q", k)
		}
		if err := check(days); err != nil {
			return bad("ByDecline[%q]: %v", k, err)
		}
		byKind[k] = days
		if n := len(days); n > 0 {
			last = max(last, days[n-1])
		}
	}
	byKind[DeclineHard] = nil
	p.ByDecline = byKind
	switch {
	case p.FinalDay == 0:
		p.FinalDay = last + 1
	case p.FinalDay <= last || p.FinalDay > 366:
		return bad("FinalDay %d: after the last retry day (%d), at most 366", p.FinalDay, last)
	}
	switch {
	case p.FinalNoticeDays == 0:
		p.FinalNoticeDays = 3
	case p.FinalNoticeDays < 0:
		p.FinalNoticeDays = -1
	}
	switch p.FinalAction {
	case "":
		p.FinalAction = FinalCancel
	case FinalCancel, FinalPause, FinalLeavePastDue:
	default:
		return bad("FinalAction: unknown %q", p.FinalAction)
	}
	switch {
	case p.PauseMonths == 0:
		p.PauseMonths = 1
	case checkPauseMonths(p.PauseMonths) != nil:
		return bad("PauseMonths %d: 1..120", p.PauseMonths)
	}
	if (p.Notifier == nil) != (p.Users == nil) {
		return bad("Notifier and Users go together")
	}
	return p, nil
}

// retryDays is the schedule of a decline of kind k.
func (p *DunningPolicy) retryDays(k DeclineKind) []int {
	if days, ok := p.ByDecline[k]; ok {
		return days
	}
	return p.RetryDays
}

// Dunning is the state of a declined period's dunning, kept on the
// period's record (billing_dunning, a JSON object, added by this library
// and optional: absent until the period is first declined with
// [Config.Dunning] set). It is written with the outcome, notice or final
// action it follows, in the same conditional write.
type Dunning struct {
	// Since is when the period was first declined: the schedule's days
	// count from its UTC day.
	Since time.Time `json:"since"`
	// Attempt is the number of the attempt whose decline started it.
	Attempt int `json:"attempt"`
	// Kind is the latest decline's kind, which picks the schedule.
	Kind DeclineKind `json:"kind,omitempty"`
	// Retries counts the retries of the schedule made (outcomes of the
	// retry run's attempts recorded since Since).
	Retries int `json:"retries,omitempty"`
	// ActionURL is the processor's confirmation link of the latest
	// decline that asked the customer to act.
	ActionURL string `json:"action_url,omitempty"`
	// Notices are the notices claimed for the period: each sent at most
	// once.
	Notices []DunningNotice `json:"notices,omitempty"`
	// Ended is when the dunning ended, End how: [DunningRecovered] or
	// the final action applied. Zero while it goes on.
	Ended time.Time  `json:"ended,omitzero"`
	End   DunningEnd `json:"end,omitempty"`
}

// DunningNotice is a notice of a period's dunning, claimed on the record
// before it was sent.
type DunningNotice struct {
	// Kind is the notice's event type (such as [PaymentFailedNoticeEvent]).
	Kind string `json:"kind"`
	// Attempt is the attempt it is about.
	Attempt int `json:"attempt"`
	// At is when it was claimed.
	At time.Time `json:"at"`
}

// Started reports whether the period was declined under dunning.
func (d *Dunning) Started() bool { return !d.Since.IsZero() }

// Active reports whether the dunning started and has not ended.
func (d *Dunning) Active() bool { return d.Started() && d.Ended.IsZero() }

// sent reports whether the notice of kind about attempt was claimed.
func (d *Dunning) sent(kind string, attempt int) bool {
	return slices.ContainsFunc(d.Notices, func(n DunningNotice) bool { return n.Kind == kind && n.Attempt == attempt })
}

// sentKind reports whether a notice of kind was claimed, about any attempt.
func (d *Dunning) sentKind(kind string) bool {
	return slices.ContainsFunc(d.Notices, func(n DunningNotice) bool { return n.Kind == kind })
}

// clone returns a copy of d that shares nothing with it.
func (d Dunning) clone() Dunning {
	d.Notices = slices.Clone(d.Notices)
	return d
}

// dayOf is the start of the UTC day d days after t's.
func dayOf(t time.Time, d int) time.Time { return utcDay(t).AddDate(0, 0, d) }

// DunningState is what a period's dunning comes to under the collector's
// policy at an instant: for a console, a view, a host's own page.
type DunningState struct {
	// Active is set while the schedule goes on: the period is declined,
	// owed, and the final action not applied.
	Active bool
	// RetriesLeft is how many retries of the schedule are still to come;
	// NextRetry the day the next one is made (zero when none is left).
	RetriesLeft int
	NextRetry   time.Time
	// FinalNotice and FinalAction are the days the final notice goes
	// out and the final action is applied, and Action the action.
	FinalNotice, FinalAction time.Time
	Action                   FinalAction
}

// ErrNoDunning reports a call that needs [Config.Dunning].
var ErrNoDunning = errors.New("billing: dunning is not configured")

// DunningOf returns the state of p's dunning under the collector's
// policy; the zero DunningState when p is not in dunning, or the collector
// has none.
func (c *Collector) DunningOf(p *Period) DunningState {
	pol := c.cfg.Dunning
	d := &p.Dunning
	if pol == nil || !d.Active() || p.Status != StatusError {
		return DunningState{}
	}
	st := DunningState{Active: true, FinalAction: dayOf(d.Since, pol.FinalDay), Action: pol.FinalAction}
	if pol.FinalNoticeDays >= 0 {
		st.FinalNotice = dayOf(d.Since, pol.FinalDay-pol.FinalNoticeDays)
	}
	if days := pol.retryDays(d.Kind); !p.NoRetry && d.Retries < len(days) {
		st.RetriesLeft = len(days) - d.Retries
		st.NextRetry = dayOf(d.Since, days[d.Retries])
	}
	return st
}
