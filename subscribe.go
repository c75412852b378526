package billing

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/dynabill/billing/internal/calendar"
	"github.com/google/uuid"
)

// SubscribeRequest starts a subscription: what [Collector.Subscribe]
// takes. Only RequestKey, UserID and Tier are required; the library
// derives the rest (IDs, billing period, anchor day, creation dates,
// process) from them and the defaults.
type SubscribeRequest struct {
	// RequestKey identifies this request, 1 to 256 bytes of UTF-8 chosen by
	// the host (an order ID, a message ID): a call repeated with the same
	// user and key — a Lambda redelivered, a client that lost the answer —
	// returns the subscription the first call created and creates nothing;
	// the key with other parameters is a [*RequestKeyError].
	RequestKey string
	// UserID is who is billed: the user's ID on the legacy tables, one
	// subscription of an account ("account#subscription#SKU") on the
	// single table. Required: 1 to 1024 bytes of UTF-8 without control
	// characters.
	UserID string
	// Tier is the plan, its name and version together ("Plus:v2"). Required.
	Tier string
	// Amount is what each period costs. Defaults to the price of the plan
	// — Tier on Term and Interval ([PricePlan]) — in [Config.Prices]; without
	// a price list it is required. It must be more
	// than zero (zero with [Config.AllowFreeTiers]) and at most
	// [Config.MaxCharge].
	Amount Amount
	// Term is the billing term. Defaults to [TermMonthly].
	Term Term
	// Interval is how many terms one period spans (3 monthly is
	// quarterly), 1 to [MaxInterval]. Defaults to 1.
	Interval int
	// FirstBillingDate is the first period's billing date: the first charge
	// is made by the first scheduled run after it. A later date gives a
	// free first stretch, like a trial. Read as [Periods.Move]
	// reads dates (a wall-clock date and time in UTC, at least a day
	// inside the stale threshold, at most [MaxDateAhead] ahead). Defaults to now: charged by
	// the next scheduled run. A record is due once its billing date is
	// strictly before a run's instant ([Period.DueAt]): a run in the
	// same second as the date leaves it to the next run.
	FirstBillingDate time.Time
	// AnchorDay is the day of the month the later periods are billed on,
	// 1 to 31 (a short month bills on its last day). Defaults to the day of
	// FirstBillingDate, or, coming back on the date of a cancelled renewal
	// (see [Collector.Subscribe]), to that renewal's anchor day: a plan
	// billed on the 31st, cancelled and resumed on 29 February, goes on
	// on the 31st. Monthly and yearly terms only.
	//
	// It must be FirstBillingDate's own day, as the schedule puts it in that
	// month: the day itself, or on a month's last day any later one (31 with
	// a first date of 30 April, 29 to 31 with 28 February in a common year).
	// Any other anchor would bill a short first period at the full amount
	// and bill again days later (a first date on the 28th, AnchorDay 2: the
	// 28th and then the 2nd); it is refused with a [*FieldError] wrapping
	// [ErrInvalidRequest]. To bill on another day, start on it
	// (FirstBillingDate, a free first stretch until then). Ignored with
	// FridayBilling, which bills by the Friday.
	AnchorDay int
	// FridayBilling bills on the same Friday of every month as
	// FirstBillingDate (its first to fifth Friday), which must then be a
	// Friday. Monthly term only. Defaults to false.
	FridayBilling bool
	// FridayWeek is the Friday of the month FridayBilling bills on, 1 to
	// 5. Defaults to FirstBillingDate's. It may differ from it only to
	// bill on the fifth Friday from a month that has four, whose last
	// Friday FirstBillingDate must then be (a month without a fifth
	// Friday is billed on its last).
	FridayWeek int
	// PauseMonths starts the subscription paused: its first billing date
	// and the months after it are skipped, and the first charge is
	// PauseMonths months after FirstBillingDate. 0 to 120. Defaults to 0.
	PauseMonths int
	// TrialDays starts the subscription with a trial of that many days, 1
	// to [MaxTrialDays]: a period of its own at zero from
	// FirstBillingDate, completed by the engine without a charge, after
	// which the first paid period opens on the trial's end, the day the
	// anchor (or the Friday of FridayBilling) follows. Defaults to no
	// trial. See [Collector.Subscribe].
	TrialDays int
	// TrialEnd is the trial's end as a date instead of TrialDays (not
	// both): the first paid period's billing date, read as
	// FirstBillingDate is and after it.
	TrialEnd time.Time
	// AllowRepeatTrial lets a user who had a trial before have another.
	// Defaults to false: a trial request for a user whose records or
	// history show a trial is refused with a [*FieldError] on TrialDays
	// wrapping [ErrTrialUsed].
	AllowRepeatTrial bool
	// CouponID or Code (a promotion code, any case) applies a coupon to
	// the first charge, as [Collector.ApplyCoupon] would right after the
	// subscription, under a request key derived from RequestKey (a repeat
	// of the subscribe applies it at most once). Optional, at most one;
	// needs [Config.Coupons]. A coupon unknown, of another currency or
	// past its date refuses the subscription before anything is written;
	// one refused when applied (used up meanwhile, a rule of the code
	// unmet) leaves the subscription made and returns it with the error.
	CouponID string
	Code     string
}

// Subscribed is what [Collector.Subscribe] did.
type Subscribed struct {
	// Subscription is the subscription's first period.
	Subscription Period
	// Repeated reports that the request key had been used already: nothing
	// was written and Subscription is the period that first call created
	// (as it is now).
	Repeated bool
}

// maxRequestKey bounds SubscribeRequest.RequestKey.
const maxRequestKey = 256

// subscriptionNamespace makes the subscription IDs of [Collector.Subscribe].
var subscriptionNamespace = uuid.MustParse("6f1b8a52-4f7e-4d0a-9b57-2c6a1e9d3b10")

// FirstPeriodID is the ID (subscription_id) [Collector.Subscribe] gives the
// first period of the request (userID, requestKey): a name-based UUID, so
// that a repeated request finds what the first one wrote.
func FirstPeriodID(userID, requestKey string) string {
	return uuid.NewSHA1(subscriptionNamespace, []byte(userID+"\x00"+requestKey)).String()
}

// Subscribe starts a subscription for req.UserID: it checks every field
// (a [*FieldError] naming the field), derives the rest, and writes the
// first period — SCHEDULED, or PAUSED when req.PauseMonths is set — with
// its history row in one conditional write, under the user's billing lock.
//
// A request key names one request across every call: a key the user
// gave a change by user before ([Collector.Cancel],
// [Collector.Pause], ...) refuses the request with a
// [*RequestKeyError] (its Op that call's, "Op" among its Fields) and
// nothing is written (read through [Config.History]).
//
// It is idempotent on (UserID, RequestKey): a repeated request returns the
// period the first one created, Repeated set, and writes nothing, even
// when it would no longer be accepted (its first billing date now too
// old, its tier gone from the price list), and when a come-back by
// another request has since reopened that period under its own ID: the
// answer is then the period as its last history row left it (read
// through [Config.History]), so a late redelivery never subscribes a
// user who has left. A user
// (a subscription of an account, on the single table) that already has an
// open period — SCHEDULED, ERROR, ACHSENT or PAUSED — is refused with an
// [*OpenSubscriptionError]: change that subscription's plan, or cancel it
// first.
//
// No paid period is billed again: the first billing date must not be
// before the end of the user's last COMPLETED period (its next billing
// date by its own term, interval and anchor), else the request is refused
// with a [*FieldError] on FirstBillingDate wrapping [ErrInvalidDate] that
// names the paid period and the first date not paid for, as
// [Collector.Reactivate] refuses it. That end date itself is the place
// to come back on after cancelling at period end: the cancelled renewal,
// never charged, stands there, and the first period takes its place (the
// one record, SCHEDULED again, with this request's subscription ID,
// plan and amount, its history row appended to the cancelled one's) — no
// gap and no second charge. Any other record on the first billing date
// (a period charged, waived or skipped) refuses it with a [*FieldError]
// wrapping [ErrInvalidDate] naming that record: choose another date. So
// does a first date whose schedule would later bill on the date of a
// record of the user's earlier life (a renewal cancelled before its
// charge, a waived period): that period could not be opened, and the
// subscription would stop there.
//
// A held lock is an error wrapping [ErrAlreadyLocked]; retry with the same
// key. A record another writer put on the first billing date meanwhile is
// read again and judged as above; a write that still loses a race is a
// [*ConflictError] wrapping [ErrConflict]: retry with the same key.
func (c *Collector) Subscribe(ctx context.Context, req SubscribeRequest) (Subscribed, error) {
	if err := checkIdentity(req); err != nil {
		return Subscribed{}, fmt.Errorf("subscribe %s: %w", req.UserID, err)
	}
	if err := c.checkSubscribeCoupon(ctx, req); err != nil {
		return Subscribed{}, fmt.Errorf("subscribe %s: %w", req.UserID, err)
	}
	var out Subscribed
	_, err := c.single(ctx, "subscribe", req.UserID, FirstPeriodID(req.UserID, req.RequestKey), func(ctx context.Context, _ *Report) error {
		var err error
		for pass := 0; ; pass++ {
			out, err = c.subscribeOnce(ctx, req)
			if pass > 0 || !errors.Is(err, ErrAlreadyExists) {
				return lostRace(err)
			}
			// A record appeared on the first billing date since the read:
			// read again, and judge it as any other.
		}
	})
	if err != nil {
		return Subscribed{}, fmt.Errorf("subscribe %s: %w", req.UserID, err)
	}
	if req.CouponID == "" && req.Code == "" {
		return out, nil
	}
	ch, err := c.ApplyCoupon(ctx, ApplyCouponRequest{UserRequest: UserRequest{UserID: req.UserID, RequestKey: subscribeCouponKey(req.RequestKey)},
		CouponID: req.CouponID, Code: req.Code})
	switch {
	case errors.Is(err, ErrNoChange):
		// The coupon is on the subscription already.
	case err != nil:
		return out, fmt.Errorf("subscribe %s: subscribed, coupon not applied: %w", req.UserID, err)
	default:
		for _, p := range ch.Subscription.Periods {
			if p.SubscriptionID == out.Subscription.SubscriptionID {
				out.Subscription = p
			}
		}
	}
	return out, nil
}

// subscribeCouponKey is the request key of the coupon a subscribe of key
// applies.
func subscribeCouponKey(key string) string {
	k := "subscribe-coupon:" + key
	if len(k) > maxRequestKey {
		sum := sha256.Sum256([]byte(key))
		k = "subscribe-coupon:" + hex.EncodeToString(sum[:])
	}
	return k
}

// checkSubscribeCoupon refuses a coupon of req that could not be applied
// whoever subscribes: unknown, of another currency, past its date.
func (c *Collector) checkSubscribeCoupon(ctx context.Context, req SubscribeRequest) error {
	if req.CouponID == "" && req.Code == "" {
		return nil
	}
	if c.cfg.Coupons == nil {
		return fmt.Errorf("%w: a coupon needs Config.Coupons", ErrInvalidRequest)
	}
	if req.CouponID != "" && req.Code != "" {
		return requestField("CouponID", req.CouponID, "at most one of CouponID and Code")
	}
	now := c.cfg.Clock.Now()
	id := req.CouponID
	if req.Code != "" {
		p, err := c.cfg.Coupons.PromotionCode(ctx, req.Code)
		if err != nil {
			return fmt.Errorf("promotion code %q: %w", req.Code, err)
		}
		if !p.ExpiresAt.IsZero() && now.After(p.ExpiresAt) {
			return fmt.Errorf("%w: code %s expired at %s", ErrCouponNotRedeemable, p.Code, p.ExpiresAt.UTC().Format(time.RFC3339))
		}
		id = p.CouponID
	}
	cp, err := c.cfg.Coupons.Coupon(ctx, id)
	switch {
	case err != nil:
		return fmt.Errorf("coupon %q: %w", id, err)
	case cp.currency() != c.cfg.Invoicing.Currency:
		return fmt.Errorf("%w: coupon %s is in %s, charges are in %s", ErrCouponNotRedeemable, cp.ID, cp.currency(), c.cfg.Invoicing.Currency)
	case !cp.RedeemBy.IsZero() && now.After(cp.RedeemBy):
		return fmt.Errorf("%w: coupon %s could be redeemed until %s", ErrCouponNotRedeemable, cp.ID, cp.RedeemBy.UTC().Format(time.RFC3339))
	}
	return nil
}

// subscribeOnce is one read and write of [Collector.Subscribe], under
// the user's lock.
func (c *Collector) subscribeOnce(ctx context.Context, req SubscribeRequest) (Subscribed, error) {
	rctx, unread := collectUnreadable(ctx)
	recs, err := c.cfg.Repository.ListByUser(rctx, req.UserID)
	if err != nil {
		return Subscribed{}, err
	}
	// A repeat is answered before the request is checked again: what
	// was valid then (its date, its price) may not be now.
	if out := repeatOf(req, recs); out.Repeated {
		return out, c.checkSubscribeRepeat(ctx, req, out.Subscription.SubscriptionID)
	}
	if out, err := c.repeatInHistory(ctx, req); err != nil || out.Repeated {
		return out, err
	}
	sub, err := c.newSubscription(ctx, req, c.cfg.Clock.Now())
	if err != nil {
		return Subscribed{}, err
	}
	over, err := againstUser(&sub, recs, req.AnchorDay == 0 && !req.FridayBilling)
	if err != nil {
		return Subscribed{}, err
	}
	if err := refuseBesideUnreadable(*unread, sub.BillingDate); err != nil {
		return Subscribed{}, err
	}
	if err := c.checkRepeatTrial(ctx, req, &sub, recs); err != nil {
		return Subscribed{}, err
	}
	sub.Request = subscribeRequest(req).encode() // on its history row only
	created := EventSubscriptionCreated
	if sub.IsTrial() {
		created = EventTrialStarted
	}
	if err := c.placeFirst(ctx, created, &sub, over, recs); err != nil {
		return Subscribed{}, err
	}
	return Subscribed{Subscription: sub}, nil
}

// addPeriod adds sub, a new first period of its user whose records are
// recs, with its history row recording change: written after every row of the user (its
// creation and last-run dates moved past theirs), and a little later again
// when another row took its history key meanwhile.
func (c *Collector) addPeriod(ctx context.Context, change EventType, sub *Period, recs []Period) error {
	sub.Change = change
	defer func() { sub.Change = "" }()
	for i := range recs {
		sub.LastRunDate = runTime(&recs[i], sub.LastRunDate)
	}
	for i := 0; ; i++ {
		sub.CreatedDate = sub.LastRunDate
		err := c.cfg.Repository.Add(ctx, sub)
		if !isHistoryKeyConflict(err) || i == historyKeyRetries {
			return err
		}
		sub.LastRunDate = sub.LastRunDate.Add(time.Millisecond)
	}
}

// repeatInHistory answers a repeat of req whose period no record carries
// any more: a come-back by another Subscribe reopened it under that
// request's ID. The key was used: the answer is the period as its last
// history row left it, Repeated set, so that a late redelivery never opens
// a subscription the user has left. A key the user's history rows record
// for another call (a change by user: a cancel, a pause, ...) refuses req
// with a [*RequestKeyError] naming that call. Without [Config.History]
// nothing can be told, and req is judged as a new request.
func (c *Collector) repeatInHistory(ctx context.Context, req SubscribeRequest) (Subscribed, error) {
	if c.cfg.History == nil {
		return Subscribed{}, nil
	}
	// The user's rows, a consistent read: "no rows of this key" decides
	// that a new subscription may be written, which an index read that
	// lags behind could not.
	id := FirstPeriodID(req.UserID, req.RequestKey)
	rows, err := c.cfg.History.ListByUser(ctx, req.UserID)
	if err != nil {
		return Subscribed{}, fmt.Errorf("read the history of user %s: %w", req.UserID, err)
	}
	if first, _ := firstRequest(rows, req.RequestKey); first != nil && first.op() != "subscribe" {
		// The key names a change by user (a cancel, a pause, ...): one
		// request across every call, never a sign-up too.
		return Subscribed{}, subscribeRequest(req).reused(req.UserID, *first)
	}
	rows = slices.DeleteFunc(rows, func(r Period) bool { return r.SubscriptionID != id })
	if len(rows) == 0 {
		return Subscribed{}, nil
	}
	last := rows[len(rows)-1]
	last.Change, last.Request = "", ""
	return Subscribed{Subscription: last, Repeated: true}, c.checkSubscribeRepeat(ctx, req, id)
}

// repeatOf returns, Repeated set, the period req created already among
// its user's records recs, or the zero Subscribed.
func repeatOf(req SubscribeRequest, recs []Period) Subscribed {
	id := FirstPeriodID(req.UserID, req.RequestKey)
	for _, r := range recs {
		if r.SubscriptionID == id {
			return Subscribed{Subscription: r, Repeated: true}
		}
	}
	return Subscribed{}
}

// againstUser refuses sub, the first period of a new request, with an
// [*OpenSubscriptionError] when its user's records recs hold an open
// period, and when it would bill days of the user's last paid period
// again or be billed on a record that cannot be reopened (as
// [Collector.Reactivate] refuses). It returns the cancelled period sub
// takes the place of, if any (see [comeBackOn]), whose anchor day sub
// then takes when anchorDefault (the request named none) and it fits.
func againstUser(sub *Period, recs []Period, anchorDefault bool) (*Period, error) {
	for _, r := range recs {
		if !r.Status.IsTerminal() {
			return nil, &OpenSubscriptionError{UserID: sub.UserID, New: sub.Key(), Open: r.Key(), Status: r.Status}
		}
	}
	if err := afterLastPaid("FirstBillingDate", sub.BillingDate, recs); err != nil {
		return nil, err
	}
	over, err := comeBackOn("FirstBillingDate", sub.BillingDate, recs)
	if over != nil && anchorDefault && sub.Term != TermWeekly && anchorFits(over.EffectiveAnchorDay(), sub.BillingDate) {
		sub.AnchorDay = over.EffectiveAnchorDay()
	}
	if err == nil {
		err = clearSchedule("FirstBillingDate", sub, recs)
	}
	return over, err
}

// checkIdentity checks the fields that name a subscribe request: its key
// and its user.
func checkIdentity(req SubscribeRequest) error {
	switch {
	case req.RequestKey == "" || len(req.RequestKey) > maxRequestKey || !utf8.ValidString(req.RequestKey):
		return requestField("RequestKey", req.RequestKey, "1 to %d bytes of UTF-8 required", maxRequestKey)
	case req.UserID == "" || len(req.UserID) > maxUserID || !utf8.ValidString(req.UserID) ||
		strings.ContainsFunc(req.UserID, unicode.IsControl):
		return requestField("UserID", req.UserID, "1 to %d bytes of UTF-8 without control characters required", maxUserID)
	}
	return nil
}

// requestField is the [*FieldError] of a subscribe request's field name
// whose value is refused, why saying what it must be.
func requestField(name, value string, why string, args ...any) error {
	return &FieldError{Field: name, Value: value, Err: fmt.Errorf("%w: %s", ErrInvalidRequest, fmt.Sprintf(why, args...))}
}

// newSubscription checks req and returns its first period.
func (c *Collector) newSubscription(ctx context.Context, req SubscribeRequest, now time.Time) (Period, error) {
	if err := checkIdentity(req); err != nil {
		return Period{}, err
	}
	field := requestField
	switch {
	case req.Interval < 0 || req.Interval > MaxInterval:
		return Period{}, field("Interval", fmt.Sprint(req.Interval), "1 to %d", MaxInterval)
	case req.AnchorDay < 0 || req.AnchorDay > 31:
		return Period{}, field("AnchorDay", fmt.Sprint(req.AnchorDay), "1 to 31")
	case req.PauseMonths < 0 || req.PauseMonths > 120:
		return Period{}, field("PauseMonths", fmt.Sprint(req.PauseMonths), "0 to 120")
	case req.FridayWeek < 0 || req.FridayWeek > 5 || (req.FridayWeek != 0 && !req.FridayBilling):
		return Period{}, field("FridayWeek", fmt.Sprint(req.FridayWeek), "1 to 5, with FridayBilling")
	}
	amount := req.Amount
	if amount == 0 && c.cfg.Prices != nil {
		amount = ListPrice // the field's default: the plan's price
	}
	term := req.Term
	if term == "" {
		term = TermMonthly
	}
	if !terms.Valid(term) {
		return Period{}, &FieldError{Field: "Term", Value: string(term), Err: ErrInvalidTerm}
	}
	amount, err := c.priceOf(ctx, PricePlan{Tier: req.Tier, Term: term, Interval: req.Interval}, amount)
	if err != nil {
		return Period{}, err
	}
	first := req.FirstBillingDate
	if first.IsZero() {
		first = now
	}
	start := first
	if first, err = trialEnd(req, first); err != nil {
		return Period{}, err
	}
	date, err := c.billingDay("FirstBillingDate", first, now)
	if err != nil {
		return Period{}, err
	}
	sub := Period{
		UserID: req.UserID, BillingDate: date, SubscriptionID: FirstPeriodID(req.UserID, req.RequestKey),
		Amount: amount, Status: StatusScheduled, BillingPeriod: BillingPeriod(date), Process: ProcessSubscribe,
		UpdatedEvent: UpdatedUserSubscribed, Term: term, AnchorDay: date.Day(), Interval: req.Interval,
		ReceiptTierName: req.Tier, LastRunDate: now, CreatedDate: now,
	}
	if req.AnchorDay != 0 {
		if term == TermWeekly {
			return Period{}, field("AnchorDay", fmt.Sprint(req.AnchorDay), "a weekly term has no anchor day")
		}
		if !req.FridayBilling && !anchorFits(req.AnchorDay, date) {
			return Period{}, field("AnchorDay", fmt.Sprint(req.AnchorDay),
				"FirstBillingDate %s is day %d of its month: the anchor must be that day (a month's last day may take a later one), "+
					"or the first charge would cover a short period and the next come days later", date.Format(time.DateOnly), date.Day())
		}
		sub.AnchorDay = req.AnchorDay
	}
	if req.FridayBilling {
		if term != TermMonthly {
			return Period{}, field("FridayBilling", "true", "Friday billing needs the monthly term")
		}
		if sub.BillingWeek = calendar.FridayWeek(date); sub.BillingWeek == 0 {
			return Period{}, field("FirstBillingDate", date.Format(time.RFC3339), "Friday billing starts on a Friday")
		}
		if w := req.FridayWeek; w != 0 && w != sub.BillingWeek {
			if w != 5 || !calendar.NthFriday(date.Year(), date.Month(), 5).Equal(calendar.NthFriday(date.Year(), date.Month(), 4)) || sub.BillingWeek != 4 {
				return Period{}, field("FridayWeek", fmt.Sprint(w), "FirstBillingDate %s is Friday %d of its month", date.Format(time.DateOnly), sub.BillingWeek)
			}
			sub.BillingWeek = w
		}
	}
	if _, err := sub.Schedule().Next(date); err != nil {
		return Period{}, &FieldError{Field: "FirstBillingDate", Value: date.Format(time.RFC3339), Err: err}
	}
	if !start.Equal(first) {
		return c.trialPeriod(sub, start, now)
	}
	if req.PauseMonths > 0 {
		sub.Status, sub.PauseDurationMonths, sub.Process = StatusPaused, req.PauseMonths, ProcessSubscribe
		if req.PauseMonths == 1 {
			sub.UpdatedEvent = UpdatedPausePendingResume
		}
	}
	return sub, nil
}

// maxUserID bounds SubscribeRequest.UserID, which is a partition key.
const maxUserID = 1024

// Coming back: a user who cancels at period end keeps what they paid for
// until the paid period ends, and the renewal that would have charged
// them on that day stays in the table as a CANCELLED record that was
// never attempted. Coming back on that very day — the one date with
// neither a gap nor a second charge — puts the new first period where
// that record is: the record is reopened (SCHEDULED or PAUSED again) by
// one write conditional on it as read, with its history row after the
// cancelled one's, rather than added beside it, which its key forbids.

// comeBackOn returns the record among recs, a user's records, that a new
// first period billed on d takes the place of: the CANCELLED period on d
// that was never attempted, or nil when no record is on d. Any other
// record on d cannot be billed again or reopened: the error is a
// [*FieldError] (field names the date) wrapping [ErrInvalidDate] that
// names it.
func comeBackOn(field string, d time.Time, recs []Period) (*Period, error) {
	for i := range recs {
		r := &recs[i]
		if !sameSecond(r.BillingDate, d) {
			continue
		}
		if r.Status == StatusCancelled && !r.Attempted() {
			return r, nil
		}
		why := "its status is not a cancelled renewal"
		if r.Status == StatusCancelled {
			why = "it was attempted (charged, asked for or declined)"
		}
		return nil, &FieldError{Field: field, Value: d.Format(time.RFC3339), Err: fmt.Errorf(
			"%w: the user's period %s (%s) is billed on %s and cannot be reopened: %s; choose another date",
			ErrInvalidDate, r.SubscriptionID, r.Status, r.BillingDate.UTC().Format(time.RFC3339), why)}
	}
	return nil, nil
}

// placeFirst writes sub, a new first period of its user whose records are
// recs, with its history row recording change: added (see addPeriod), or,
// when over is the cancelled period on its date ([comeBackOn]), written
// over it as an update conditional on over as read. sub then keeps what
// the store holds of over beyond the record (attributes the library does
// not own) and its key as stored; every field of the record is sub's,
// except that over as the first paid period after a trial
// ([Period.IsAfterTrial]) leaves sub that marker: the user came
// back during the trial, which goes on (TRIALING, the trial-ending
// notice, [Collector.EndTrial]), and over's end of access
// ([Period.AccessEnd]) stays on the record. Over's balance
// ([Period.Balance]) is added to sub's, and so are its proration lines
// ([Period.Adjustments]) unless a cancellation now ended access.
// Its creation and last-run dates are after every row of the user.
func (c *Collector) placeFirst(ctx context.Context, change EventType, sub, over *Period, recs []Period) error {
	if over == nil {
		return c.addPeriod(ctx, change, sub, recs)
	}
	sub.BillingDate, sub.BillingPeriod, sub.Stored = over.BillingDate, BillingPeriod(over.BillingDate), over.Stored
	if over.IsAfterTrial() && !sub.IsTrial() {
		// The first paid period after a trial, cancelled during the trial:
		// coming back on it goes on with the trial, whose end it is.
		sub.AfterTrial = true
	}
	if !over.AccessEnd.IsZero() {
		// A cancellation now refunded the time after it: it stays unpaid.
		sub.AccessEnd = over.AccessEnd
	}
	// The customer's balance is theirs whatever was cancelled; the lines
	// of a plan change made during the paid period (its credits and
	// charges) are still owed when the subscription goes on from that
	// period's end, unless a cancellation now refunded its rest.
	sub.Balance += over.Balance
	if over.AccessEnd.IsZero() && !sub.IsTrial() {
		sub.Adjustments = append(slices.Clone(over.Adjustments), sub.Adjustments...)
	}
	sub.Change = change
	defer func() { sub.Change = "" }()
	for i := range recs {
		sub.LastRunDate = runTime(&recs[i], sub.LastRunDate)
	}
	for i := 0; ; i++ {
		sub.CreatedDate = sub.LastRunDate
		err := c.cfg.Repository.Update(ctx, over, sub)
		if !isHistoryKeyConflict(err) || i == historyKeyRetries {
			return err
		}
		sub.LastRunDate = sub.LastRunDate.Add(time.Millisecond)
	}
}

// lostRace returns err, except that a write refused because its key was
// taken — by a record another writer put there after this call read the
// user's records — is a [*ConflictError] wrapping [ErrConflict] only:
// the call may be repeated, and judges what it then reads. Lifecycle
// calls never answer [ErrAlreadyExists].
func lostRace(err error) error {
	if !errors.Is(err, ErrAlreadyExists) {
		return err
	}
	var ce *ConflictError
	if !errors.As(err, &ce) {
		return fmt.Errorf("%w: %v", ErrConflict, err)
	}
	out := *ce
	out.Err, out.Taken = ErrConflict, false
	out.Reason += " (written by another writer meanwhile; repeat the call)"
	return &out
}

// anchorFits reports whether anchor, a day of the month, bills on d's
// day in d's month: the day itself, or a later one on the month's last
// day.
func anchorFits(anchor int, d time.Time) bool {
	return min(anchor, daysIn(d.Year(), d.Month())) == d.Day()
}

// keyTaken returns err, the error of an admin write of cur as next,
// except that a key taken by a record another writer put there after the
// change read the user's records is no [ErrAlreadyExists]: a move onto
// it ([Periods.Move]) is a [*DateMoveError] naming that
// record, as when it was there before, and a period to open (the one
// after a waived record) a [*ConflictError] wrapping [ErrConflict]
// (see [lostRace]).
func (c *Collector) keyTaken(ctx context.Context, cur, next *Period, err error) error {
	var ce *ConflictError
	if errors.As(err, &ce) && ce.Taken {
		if r, gerr := c.cfg.Repository.Get(ctx, next.UserID, next.BillingDate); gerr == nil && r.SubscriptionID != cur.SubscriptionID {
			return newDateMoveError(cur, next.BillingDate, &r, r.BillingDate.After(cur.BillingDate))
		}
	}
	return lostRace(err)
}

// This file is the trial: a period of its own at zero from the trial's
// start, completed by the engine without a charge (see completeFree), after
// which the first paid period opens on the trial's end at the plan's price
// and the schedule follows that day.

// trialEnd returns the first paid billing date of req, start being its
// first billing date: start itself without a trial, else the trial's end.
func trialEnd(req SubscribeRequest, start time.Time) (time.Time, error) {
	switch {
	case req.TrialDays == 0 && req.TrialEnd.IsZero():
		return start, nil
	case req.TrialDays != 0 && !req.TrialEnd.IsZero():
		return time.Time{}, requestField("TrialEnd", req.TrialEnd.Format(time.RFC3339), "TrialDays or TrialEnd, not both")
	case req.TrialDays < 0 || req.TrialDays > MaxTrialDays:
		return time.Time{}, requestField("TrialDays", fmt.Sprint(req.TrialDays), "0 to %d", MaxTrialDays)
	case req.PauseMonths != 0:
		return time.Time{}, requestField("TrialDays", fmt.Sprint(req.TrialDays), "a trial cannot start paused (PauseMonths)")
	case req.TrialDays != 0:
		return start.AddDate(0, 0, req.TrialDays), nil
	case !req.TrialEnd.After(start.Add(time.Second)):
		return time.Time{}, requestField("TrialEnd", req.TrialEnd.Format(time.RFC3339), "after FirstBillingDate %s", start.Format(time.RFC3339))
	case req.TrialEnd.Sub(start) > MaxTrialDays*24*time.Hour:
		return time.Time{}, requestField("TrialEnd", req.TrialEnd.Format(time.RFC3339), "at most %d days after FirstBillingDate", MaxTrialDays)
	}
	return req.TrialEnd, nil
}

// trialPeriod returns the trial period before paid, the first paid period
// a request with a trial describes (billed on the trial's end, its anchor
// and Friday week that day's): the same plan at zero, billed on start,
// carrying the trial's end and the paid amount.
func (c *Collector) trialPeriod(paid Period, start, now time.Time) (Period, error) {
	date, err := c.billingDay("FirstBillingDate", start, now)
	if err != nil {
		return Period{}, err
	}
	t := paid
	t.BillingDate, t.BillingPeriod = date, BillingPeriod(date)
	t.TrialEnd, t.TrialAmount, t.Amount = paid.BillingDate, paid.Amount, 0
	return t, nil
}

// checkRepeatTrial refuses sub, a trial, for a user whose records recs
// (read under the lock) or history rows show a trial already, unless req
// allows it.
func (c *Collector) checkRepeatTrial(ctx context.Context, req SubscribeRequest, sub *Period, recs []Period) error {
	if !sub.IsTrial() || req.AllowRepeatTrial {
		return nil
	}
	had := slices.ContainsFunc(recs, func(r Period) bool { return r.IsTrial() })
	if !had && c.cfg.History != nil {
		rows, err := c.cfg.History.ListByUser(ctx, req.UserID)
		if err != nil {
			return fmt.Errorf("read the history of user %s: %w", req.UserID, err)
		}
		had = slices.ContainsFunc(rows, func(r Period) bool { return r.IsTrial() })
	}
	if had {
		return &FieldError{Field: "TrialDays", Value: fmt.Sprint(req.TrialDays), Err: fmt.Errorf("%w: user %s (AllowRepeatTrial lets the host give another)", ErrTrialUsed, req.UserID)}
	}
	return nil
}

// TrialRequest is what [Collector.ExtendTrial] takes.
type TrialRequest struct {
	UserRequest
	// End is the trial's new end: the first paid period's billing date,
	// read as [Periods.Move] reads dates. Required; it
	// must be after the trial's current end.
	End time.Time
}

// EndTrial ends the user's trial now: the first paid period, not charged
// yet, is moved to now (its anchor day and Friday week following), so the
// next scheduled run charges it; a host that wants the charge at once
// calls [Collector.CollectUser] after it. A trial not completed yet is
// given its end now. The request is keyed like every change by user
// ([UserRequest]); a user without a trial in progress is refused with an
// error wrapping [ErrNotCollectible].
func (c *Collector) EndTrial(ctx context.Context, req UserRequest) (UserChange, error) {
	return c.changeTrial(ctx, req, time.Time{}, opEndTrial)
}

// ExtendTrial moves the end of the user's trial in progress to req.End
// (later than it is): the first paid period is billed then, its anchor
// day and Friday week following. Keyed and refused as [Collector.EndTrial];
// an end whose schedule meets a record of the user's earlier life is
// refused as [Periods.Move] refuses such a date (an error
// wrapping [ErrInvalidDate]), since that paid period could not be opened.
func (c *Collector) ExtendTrial(ctx context.Context, req TrialRequest) (UserChange, error) {
	if req.End.IsZero() {
		return UserChange{}, fmt.Errorf("extend trial %s: %w", req.UserID, requestField("End", "", "required"))
	}
	return c.changeTrial(ctx, req.UserRequest, req.End, opExtendTrial)
}

func (c *Collector) changeTrial(ctx context.Context, ur UserRequest, end time.Time, op opName) (UserChange, error) {
	kr := newKeyedRequest(string(op), ur.RequestKey)
	if !end.IsZero() {
		kr = kr.time("End", end)
	}
	return c.byUser(ctx, ur, kr, op, func(recs []Period, kr keyedRequest, now time.Time) ([]Period, keyedRequest, error) {
		if t := trialTarget(recs, now); t != nil {
			return []Period{*t}, kr, nil
		}
		return nil, kr, fmt.Errorf("%w: user %s has no trial in progress", ErrNotCollectible, ur.UserID)
	}, func(ctx context.Context, id string) (Change, error) {
		return c.admin(ctx, op, id, func(ctx context.Context, cur, next *Period, now time.Time) ([]*Period, error) {
			date := end
			if date.IsZero() {
				date = now
			}
			if cur.IsTrial() { // not completed yet: its end moves
				if !end.IsZero() && !date.After(cur.TrialEnd) {
					return nil, requestField("End", date.Format(time.RFC3339), "after the trial's end %s", cur.TrialEnd.Format(time.RFC3339))
				}
				d, err := c.billingDay("End", date, now)
				if err != nil {
					return nil, err
				}
				next.TrialEnd, next.AnchorDay = d, d.Day()
				if cur.BillingWeek != 0 {
					if w := calendar.FridayWeek(d); w != 0 {
						next.BillingWeek = w
					}
				}
				return nil, c.clearTrialEnd(ctx, next)
			}
			if !end.IsZero() && !date.After(cur.BillingDate) {
				return nil, requestField("End", date.Format(time.RFC3339), "after the trial's end %s", cur.BillingDate.Format(time.RFC3339))
			}
			return c.moveDate(date, "")(ctx, cur, next, now)
		}, requireTrialTarget)
	})
}

// clearTrialEnd refuses next, a trial period given a new end, when its
// schedule from that end meets a record of the user's earlier life (read
// under the lock): the paid period on that date could not be opened, and
// the subscription would end with the trial. A date move is refused
// alike (see [Periods.Move]).
func (c *Collector) clearTrialEnd(ctx context.Context, next *Period) error {
	recs, err := c.cfg.Repository.ListByUser(ctx, next.UserID)
	if err != nil {
		return fmt.Errorf("list the records of user %s: %w", next.UserID, err)
	}
	var others []Period
	for _, r := range recs {
		if r.SubscriptionID != next.SubscriptionID && r.Status.IsTerminal() {
			others = append(others, r)
		}
	}
	return clearSchedule("End", next, others)
}

// trialTarget returns the record of recs (ascending) a trial change acts
// on: an open trial period not completed yet, or the first paid period
// after a trial, not attempted yet.
func trialTarget(recs []Period, _ time.Time) *Period {
	for i := len(recs) - 1; i >= 0; i-- {
		r := &recs[i]
		if r.Status.IsTerminal() {
			continue
		}
		if requireTrialTarget(r) == nil {
			return r
		}
	}
	return nil
}

// firstAfterTrial reports whether r is the first paid period after a
// trial, not charged or attempted yet: the trial is still running.
func firstAfterTrial(r *Period) bool {
	return !r.IsTrial() && requireTrialTarget(r) == nil
}

// requireTrialTarget refuses a record a trial change may not act on (see
// trialTarget), as read under the lock.
func requireTrialTarget(r *Period) error {
	switch {
	case r.Status != StatusScheduled || !r.InitialRunDate.IsZero() || r.LastAttempt.Number != 0:
	case r.IsTrial(), r.IsAfterTrial():
		return nil
	}
	return fmt.Errorf("%w: %s is no trial in progress (%s)", ErrNotCollectible, r.SubscriptionID, r.Status)
}
