package billing

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"
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
	// decline the provider marks not [PaymentResult.Retryable] is hard
	// unless its kind is an expired card or an authentication.
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
	// Retries counts the schedule's retries spent: the retry run's
	// attempts declined since Since, or whose bank debit came back. (A
	// retry that pays ends the dunning instead.)
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

// The events of dunning.
const (
	// EventDunningNotice: a notice of a period's dunning was sent to the
	// customer; Reason is its kind (such as [PaymentFailedNoticeEvent]).
	// The history row that claimed it records the same change.
	EventDunningNotice EventType = "payment_dunning_notice"
	// EventDunningNoticeReleased is the change of the history row that
	// takes a notice's claim back after its send failed (so that the next
	// run sends it). The collector emits no event of it.
	EventDunningNoticeReleased EventType = "payment_dunning_notice_released"
	// EventDunningEnded: a period's dunning ended, once: Reason is how
	// ([DunningRecovered], or the final action applied: "cancel",
	// "pause", "past_due").
	EventDunningEnded EventType = "payment_dunning_ended"
)

// declineKindOf is the kind of a declined result: the kind the provider
// gave, hard when it gave none (or one this library does not know) and
// says retrying is not worth it.
func declineKindOf(res *PaymentResult) DeclineKind {
	switch res.Decline {
	case DeclineExpiredCard, DeclineAuthenticationRequired, DeclineHard:
		// Not worth retrying as it stands, but not hopeless: an expired
		// card or a payment to confirm is the customer's to fix.
		return res.Decline
	}
	switch {
	case !res.Retryable:
		return DeclineHard
	case res.Decline == DeclineInsufficientFunds:
		return DeclineInsufficientFunds
	}
	return DeclineOther
}

// dunningMove sets on next, the version of cur an outcome (by proc, of a
// decline of kind with actionURL, when next is ERROR) or a settlement
// writes at at, what the move does to the period's dunning: a first
// decline starts it, a retry's decline counts, a payment ends it. It
// reports whether the move ends the dunning (the write's event follows).
func (c *Collector) dunningMove(cur, next *Period, proc Process, kind DeclineKind, actionURL string, at time.Time) (ended bool) {
	if c.cfg.Dunning == nil {
		return false
	}
	d := &next.Dunning
	switch next.Status {
	case StatusCompleted:
		if d.Active() {
			d.Ended, d.End = at, DunningRecovered
			return true
		}
	case StatusError:
		switch {
		case !d.Started():
			*d = Dunning{Since: at, Attempt: next.Attempt}
		case !d.Active():
			return false // ended: a later decline (a customer's own retry) starts nothing
		case proc == ProcessRetry:
			// A retry's decline, or the return of the bank debit a
			// retry submitted: either way that entry of the schedule
			// is spent.
			d.Retries++
		}
		d.Kind, d.ActionURL = kind, ""
		if kind == DeclineAuthenticationRequired && len(actionURL) <= maxActionURL && utf8.ValidString(actionURL) {
			d.ActionURL = actionURL // a link the store would refuse is dropped: the record is what matters
		}
	}
	return false
}

// maxActionURL bounds the confirmation link kept on a record, as the
// stores do.
const maxActionURL = 2048

// retryDue reports whether the schedule allows the retry run to attempt
// cur, an ERROR record, at now. A record declined before dunning was
// configured (no state yet) is retried once a day, as the policy before
// it did; that retry's outcome starts its schedule.
func (c *Collector) retryDue(cur *Period, now time.Time) bool {
	d := &cur.Dunning
	switch {
	case cur.NoRetry:
		return false
	case !d.Started():
		return DefaultRetryPolicy{}.ShouldRetry(cur, now)
	case !d.Active():
		return false
	}
	days := c.cfg.Dunning.retryDays(d.Kind)
	return d.Retries < len(days) && !now.Before(dayOf(d.Since, days[d.Retries])) && !now.After(dayOf(d.Since, c.cfg.Dunning.FinalDay))
}

// dunningRetries reports whether a host's own collection of cur, an
// ERROR record (a webhook's, a batch's), may try it: without dunning, or
// for a record declined before dunning was configured. Under dunning the
// schedule alone retries a declined period, and after the final action
// only the customer's own payment ([Periods.Repay],
// [Collector.PaymentMethodUpdated]) tries it.
func (c *Collector) dunningRetries(cur *Period) bool {
	return c.cfg.Dunning == nil || !cur.Dunning.Started()
}

// finalDue reports whether cur's final action is due at now.
func (c *Collector) finalDue(cur *Period, now time.Time) bool {
	d := &cur.Dunning
	return cur.Status == StatusError && d.Active() && !cur.InFlight() && !now.Before(dayOf(d.Since, c.cfg.Dunning.FinalDay))
}

// noticesOwed returns the notices cur owes its customer at now, in the
// order they go out: each notice is owed until claimed, and only while
// the dunning goes on.
func (c *Collector) noticesOwed(cur *Period, now time.Time) []DunningNotice {
	pol := c.cfg.Dunning
	d := &cur.Dunning
	if pol.Notifier == nil || cur.Status != StatusError || cur.InFlight() || !d.Active() {
		return nil
	}
	var out []DunningNotice
	switch {
	case d.Kind == DeclineAuthenticationRequired && d.ActionURL != "":
		if !d.sent(PaymentActionRequiredNoticeEvent, cur.Attempt) {
			out = append(out, DunningNotice{Kind: PaymentActionRequiredNoticeEvent, Attempt: cur.Attempt})
		}
	case !d.sentKind(PaymentFailedNoticeEvent):
		out = append(out, DunningNotice{Kind: PaymentFailedNoticeEvent, Attempt: d.Attempt})
	}
	if pol.FinalNoticeDays >= 0 && !d.sentKind(PaymentFinalNoticeEvent) &&
		!now.Before(dayOf(d.Since, pol.FinalDay-pol.FinalNoticeDays)) {
		out = append(out, DunningNotice{Kind: PaymentFinalNoticeEvent, Attempt: cur.Attempt})
	}
	return out
}

// dunningWorth reports whether the retry run has anything to do with
// it, an ERROR record as the index shows it: a retry, a notice, the final
// action.
func (c *Collector) dunningWorth(it *Period, now time.Time) bool {
	return c.retryDue(it, now) || c.finalDue(it, now) || len(c.noticesOwed(it, now)) > 0
}

// dun handles cur, an ERROR record the retry run found, under the
// user's lock: its attempt in flight resolved or the retry the schedule
// allows made (or the record given up on, past the stale threshold),
// then the notices it owes sent, then its final action applied when the
// schedule ended unpaid.
func (c *Collector) dun(ctx context.Context, cur *Period, rep *Report) error {
	now := c.cfg.Clock.Now()
	if cur.InFlight() || c.staleable(ProcessRetry, cur, now) || c.retryDue(cur, now) {
		if err := c.attemptRecord(ctx, ProcessRetry, cur, rep); err != nil {
			return err
		}
		after, err := c.reread(ctx, cur)
		if err != nil {
			return err
		}
		cur = &after
	} else {
		rep.count(&rep.NotEligible)
	}
	return c.dunningStep(ctx, cur, now, true)
}

// dunningStep sends the notices cur owes and, when final, applies its
// final action once it is due.
func (c *Collector) dunningStep(ctx context.Context, cur *Period, now time.Time, final bool) error {
	if cur.Status != StatusError || cur.InFlight() || !cur.Dunning.Active() {
		return nil
	}
	for _, n := range c.noticesOwed(cur, now) {
		next, err := c.notify(ctx, cur, n, now)
		if err != nil {
			c.cfg.Logger.WarnContext(ctx, "billing: dunning notice not sent; the next retry run tries again",
				"subscription_id", cur.SubscriptionID, "notice", n.Kind, "error", err)
			if next == nil {
				return nil // the record changed: the next run sees it
			}
		}
		cur = next
	}
	if final && c.finalDue(cur, now) {
		return c.applyFinal(ctx, cur, now)
	}
	return nil
}

// afterDecline sends the notices of a decline just recorded on cur,
// read again: for a collection made outside the retry run, so the
// customer hears at once rather than at the next run. Failures are
// logged; the retry run sends what is still owed. The notices' rows are
// the collector's own, not the request of the call that charged (an
// operator's retry, a card update): that request is taken off ctx.
func (c *Collector) afterDecline(ctx context.Context, cur *Period) {
	if c.cfg.Dunning == nil || c.cfg.Dunning.Notifier == nil {
		return
	}
	if ctx.Value(attemptRequestKey{}) != nil {
		ctx = context.WithValue(ctx, attemptRequestKey{}, nil)
	}
	rec, err := c.reread(ctx, cur)
	if err != nil {
		return
	}
	if err := c.dunningStep(ctx, &rec, c.cfg.Clock.Now(), false); err != nil {
		c.cfg.Logger.WarnContext(ctx, "billing: dunning notices", "subscription_id", cur.SubscriptionID, "error", err)
	}
}

// notify claims notice n on cur (one conditional write with its history
// row), then sends it; a failed send releases the claim, so that the
// next run sends it. It returns the record as stored afterwards (nil
// when the claim was refused: the record changed). The claim before the
// send makes a notice go out at most once, whatever is redelivered or
// crashes: a crash between the claim and the send loses that notice
// rather than risk a second.
func (c *Collector) notify(ctx context.Context, cur *Period, n DunningNotice, now time.Time) (*Period, error) {
	claimed := cur.Clone()
	n.At = now.UTC()
	claimed.Dunning.Notices = append(claimed.Dunning.Notices, n)
	claimed.LastRunDate = runTime(cur, now)
	if err := c.write(ctx, EventDunningNotice, cur, &claimed, nil); err != nil {
		return nil, fmt.Errorf("claim the %s notice of %s: %w", n.Kind, cur.SubscriptionID, err)
	}
	err := c.sendNotice(ctx, &claimed, n)
	if err == nil {
		e := eventFor(EventDunningNotice, &claimed, claimed.LastRunDate)
		e.Reason = n.Kind
		c.emit(ctx, e)
		return &claimed, nil
	}
	released := claimed.Clone()
	released.Dunning.Notices = slices.Clone(cur.Dunning.Notices)
	released.LastRunDate = runTime(&claimed, c.cfg.Clock.Now())
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if werr := c.write(rctx, EventDunningNoticeReleased, &claimed, &released, nil); werr != nil {
		c.cfg.Logger.ErrorContext(ctx, "billing: cannot release a dunning notice after a failed send; it will not be sent",
			"subscription_id", cur.SubscriptionID, "notice", n.Kind, "error", werr)
		return &claimed, errors.Join(err, werr)
	}
	return &released, err
}

// sendNotice looks the user up and sends n about p.
func (c *Collector) sendNotice(ctx context.Context, p *Period, n DunningNotice) error {
	pol := c.cfg.Dunning
	u, err := pol.Users.GetUser(ctx, p.UserID)
	if err != nil {
		return fmt.Errorf("look user %s up: %w", p.UserID, err)
	}
	due, _, _ := p.Due()
	st := c.DunningOf(p)
	msg := RenewalNotice{
		EventType: n.Kind, UserID: p.UserID, BillingDate: p.BillingDate.UTC().Format(noticeDateLayout),
		Amount: due, MembershipTier: p.Tier(), Account: p.ReceiptAccountMask,
		Reason: DeclineReasonText(p.Dunning.Kind), Attempt: n.Attempt,
		UpdatePaymentURL: pol.UpdatePaymentURL, FinalAction: string(pol.FinalAction),
		FinalDate: st.FinalAction.Format(noticeDateLayout),
	}
	if n.Kind == PaymentActionRequiredNoticeEvent {
		msg.ActionURL = p.Dunning.ActionURL
	}
	if !st.NextRetry.IsZero() {
		msg.NextRetry = st.NextRetry.Format(noticeDateLayout)
	}
	return pol.Notifier.Send(ctx, u.Email, msg)
}

// noticeDateLayout is how a notice writes its dates, MM/DD/YYYY, as the
// pre-billing notice does (notice.DateLayout).
const noticeDateLayout = "01/02/2006"

// DeclineReasonText says why a charge of kind k was declined, in words
// for the customer (the processor's own message is for the operator).
func DeclineReasonText(k DeclineKind) string {
	switch k {
	case DeclineInsufficientFunds:
		return "Your bank declined the payment: the account did not have enough funds."
	case DeclineExpiredCard:
		return "Your card has expired or its details are no longer valid."
	case DeclineAuthenticationRequired:
		return "Your bank asks you to confirm this payment."
	case DeclineHard:
		return "Your bank declined the payment and it cannot be tried again. Please add another payment method."
	}
	return "Your payment was declined."
}

// applyFinal applies the final action to cur, an ERROR record whose
// schedule ended unpaid, once: first what it does to the later periods
// (each one conditional write, skipped when done already), then the
// period's invoice marked uncollectible, then the end written on cur
// (conditional on cur as read: a second host finds it written and does
// nothing), then [EventDunningEnded]. A crash half way leaves the end
// unwritten, and the next run does the rest.
func (c *Collector) applyFinal(ctx context.Context, cur *Period, now time.Time) error {
	pol := c.cfg.Dunning
	if pol.FinalAction != FinalLeavePastDue {
		recs, err := c.cfg.Repository.ListByUser(ctx, cur.UserID)
		if err != nil {
			return fmt.Errorf("final action of %s: read the user's periods: %w", cur.SubscriptionID, err)
		}
		for i := range recs {
			r := &recs[i]
			if !r.BillingDate.After(cur.BillingDate) || r.IsOneOff() || r.Attempted() || r.InFlight() {
				continue
			}
			next := r.Clone()
			next.LastRunDate = runTime(r, now)
			// The same edits as an operator's cancel and pause.
			ev, edit := EventCancelled, cancelEdit
			switch {
			case pol.FinalAction == FinalCancel && (r.Status == StatusScheduled || r.Status == StatusPaused):
			case pol.FinalAction == FinalPause && r.Status == StatusScheduled:
				ev, edit = EventPaused, pauseEdit(pol.PauseMonths)
			default:
				continue
			}
			if _, err := edit(ctx, r, &next, now); err != nil {
				return err
			}
			if err := c.write(ctx, ev, r, &next, nil); err != nil {
				return fmt.Errorf("final action %s of %s on %s: %w", pol.FinalAction, cur.SubscriptionID, r.SubscriptionID, err)
			}
			c.emit(ctx, eventFor(ev, &next, next.LastRunDate))
		}
	}
	if c.cfg.Invoices != nil {
		if err := c.closeInvoices(ctx, cur, func(*Invoice) bool { return true }, InvoiceUncollectible); err != nil {
			return fmt.Errorf("final action of %s: %w", cur.SubscriptionID, err)
		}
	}
	next := cur.Clone()
	next.LastRunDate = runTime(cur, now)
	next.Dunning.Ended, next.Dunning.End = next.LastRunDate, DunningEnd(pol.FinalAction)
	if err := c.write(ctx, EventDunningEnded, cur, &next, nil); err != nil {
		return fmt.Errorf("final action of %s: %w", cur.SubscriptionID, err)
	}
	c.emitDunningEnded(ctx, &next)
	return nil
}

// emitDunningEnded emits [EventDunningEnded] for p, whose dunning ended
// with the write that made it.
func (c *Collector) emitDunningEnded(ctx context.Context, p *Period) {
	e := eventFor(EventDunningEnded, p, p.Dunning.Ended)
	e.Reason = string(p.Dunning.End)
	c.emit(ctx, e)
}

// heldProcesses are the collections a period owed before holds back:
// the runs and the host's batch and webhook collections. A customer's
// own payment ([Periods.Repay], [Collector.PaymentMethodUpdated]) is not
// held.
func heldProcess(proc Process) bool {
	switch proc {
	case ProcessInitial, ProcessWebhook, ProcessWebhookBalance, ProcessBatch:
		return true
	}
	return false
}

// owedBefore returns an earlier record of cur's user whose dunning goes
// on, which holds cur's charge back, or nil: while one period is owed
// the next is not charged; once the owed one is paid (or its schedule
// ends) the next is charged as usual, by the next run or at once by
// [Collector.PaymentMethodUpdated].
func (c *Collector) owedBefore(ctx context.Context, cur *Period) (*Period, error) {
	earlier, ok := earlierOf(ctx, cur)
	if !ok {
		all, err := c.cfg.Repository.ListByUser(ctx, cur.UserID)
		if err != nil {
			return nil, err
		}
		for _, r := range all {
			if r.BillingDate.Before(cur.BillingDate) {
				earlier = append(earlier, r)
			}
		}
	}
	for i := range earlier {
		if r := &earlier[i]; (r.Status == StatusError || r.Status == StatusACHSent) && r.Dunning.Active() {
			return r, nil
		}
	}
	return nil, nil
}

// PaymentMethodUpdate is what [Collector.PaymentMethodUpdated] did.
type PaymentMethodUpdate struct {
	// Periods are the periods charged, oldest first: the user's owed
	// periods, then the periods they held back, each with what came of
	// its charge. A decline stops the call: the periods after it are
	// left as they are.
	Periods []RetryResult
	// Repeated reports that the request key had been answered before for
	// every period listed: nothing was presented to the processor.
	Repeated bool
	// Report counts the call's work.
	Report *Report
}

// PaymentMethodUpdated tells the collector that the user's payment
// method was updated (a new card, a confirmed bank account): the owed
// periods are charged at once, oldest first, whatever the retry schedule
// says, hard declines and periods whose schedule ended included, then
// the periods they held back that are due (see [Config.Dunning]). A
// payment ends a period's dunning; a decline stops the call and leaves
// the schedule where it was (the decline counts as no retry of it).
//
// It is keyed as [Periods.Retry] is: every row its charges write records
// the request, and a repeat of the key answers from those rows for the
// periods it charged, charging only those it had not reached (a call cut
// off half way finishes). Each charge is process MANUAL_REPAYMENT, the
// customer's own payment; an attempt in flight is resolved, never made
// twice. It needs [Config.History] ([ErrInvalidRequest] without it).
// With nothing owed it charges nothing.
func (c *Collector) PaymentMethodUpdated(ctx context.Context, req UserRequest) (PaymentMethodUpdate, error) {
	fail := func(err error) (PaymentMethodUpdate, error) {
		return PaymentMethodUpdate{}, fmt.Errorf("payment method updated for user %s: %w", req.UserID, err)
	}
	if err := checkIdentity(SubscribeRequest{UserID: req.UserID, RequestKey: req.RequestKey}); err != nil {
		return fail(err)
	}
	if err := checkActor(req); err != nil {
		return fail(err)
	}
	if c.cfg.History == nil {
		return fail(fmt.Errorf("%w: the call reads its request back from the history: Config.History is required", ErrInvalidRequest))
	}
	kr := withActor(newKeyedRequest("payment method updated", req.RequestKey), req)
	var out PaymentMethodUpdate
	rep, err := c.single(ctx, "payment method updated", req.UserID, "", func(ctx context.Context, rep *Report) error {
		rows, err := c.cfg.History.ListByUser(ctx, req.UserID)
		if err != nil {
			return fmt.Errorf("read the history: %w", err)
		}
		answered := map[string]Period{}
		if first, done := firstRequest(rows, req.RequestKey); first != nil {
			if err := kr.reused(req.UserID, *first); err != nil {
				return err
			}
			for _, ch := range done {
				answered[ch.After.SubscriptionID] = ch.After
			}
		}
		recs, err := c.cfg.Repository.ListByUser(ctx, req.UserID)
		if err != nil {
			return err
		}
		out.Repeated = true
		owed := false
		for i := range recs {
			cur := &recs[i]
			if first, ok := answered[cur.SubscriptionID]; ok {
				// Charged by the first call with the key: its answer.
				owed = true
				out.Periods = append(out.Periods, RetryResult{Outcome: retryOutcomeOf(&first), Period: first, Repeated: true})
				if first.Status == StatusError {
					return nil
				}
				continue
			}
			switch {
			case cur.Status == StatusError || cur.InFlight():
				owed = true
			case owed && cur.Status == StatusScheduled:
				if ok, _ := c.eligible(ProcessManualRepayment, cur, c.cfg.Clock.Now()); !ok {
					continue // not due yet
				}
			default:
				continue
			}
			out.Repeated = false
			one := &Report{}
			actx := context.WithValue(ctx, attemptRequestKey{}, kr.encode())
			if err := c.attempt(actx, ProcessManualRepayment, cur, one); err != nil {
				rep.add(one)
				return err
			}
			rep.add(one)
			after, err := c.reread(ctx, cur)
			if err != nil {
				return err
			}
			out.Periods = append(out.Periods, RetryResult{Outcome: retryOutcomeOfReport(one, &after), Period: after, Report: one})
			if after.Status == StatusError || after.InFlight() {
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return fail(err)
	}
	if len(out.Periods) == 0 {
		out.Repeated = false
	}
	out.Report = rep
	return out, nil
}

// Dunning returns the collector's dunning policy with its defaults
// filled, and whether it has one ([Config.Dunning]).
func (c *Collector) Dunning() (DunningPolicy, bool) {
	if c.cfg.Dunning == nil {
		return DunningPolicy{}, false
	}
	return *c.cfg.Dunning, true
}
