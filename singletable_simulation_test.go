package billing_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/billingtest/simulation"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/entitlement"
	"github.com/dynabill/billing/internal/dynamotest"
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/memory"
	"github.com/dynabill/billing/notice"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The acceptance simulation of the single-table layout: the three-month
// collection simulation (simulation_test.go, with every check of
// runSimulation) on SingleTableRepository and its in-memory twin, with
// three SKUs (three engine users) per account. On this layout the status
// queries the runs read are under test, so the step checks take what is
// due from every user's records (ListByUser, stOracle) and filter them as
// the run's queries would. On top of them:
//
//   - reminders: before each day's scheduled run (12:00 UTC) the notifier's
//     Scheduler runs to completion; the users it messages must be exactly
//     the subscriptions Payments.DueRemindersByDate gives for the day, and
//     exactly the users with a SCHEDULED record billed in the notification
//     window [day+4, day+5), one message per such record;
//   - receipts: at the end, per account, exactly one receipt per COMPLETED
//     record (its subscription and SKU, amount, transaction ID, processed
//     at its CompletionDate, or nanoseconds later when another receipt of
//     the SKU took that sort key), none other, newest first;
//   - subscription items: at the end, per account, exactly its
//     subscriptions, each due (NextPaymentDate) on the day of its earliest
//     SCHEDULED, ERROR or PAUSED record and reminded (NextReminderDate)
//     NoticeLeadDays before the day of its earliest SCHEDULED one.

// stSimSKUs are the SKUs of an account: user i is the subscription
// sub-<i> of SKU stSimSKUs[i%3] of account acct-<i/3>.
var stSimSKUs = []string{"STREAM", "MUSIC", "NEWS"}

func stSimUserID(i int) string {
	return layout.SubscriptionRef{
		AccountID: fmt.Sprintf("acct-%03d", i/3), SubscriptionID: fmt.Sprintf("sub-%04d", i), SKU: stSimSKUs[i%3],
	}.UserID()
}

func TestSingleTableSimulationInMemory(t *testing.T) {
	t.Parallel()
	clock := billingtest.NewClock(simulation.DefaultStart)
	st := billingtest.NewMemorySingleTable(t, memory.SingleTableOptions{Clock: clock, PageSize: 250})
	users := 900
	if !dynamotest.LongTests() {
		users = 300 // the README's test command: 9 s of CPU under -race instead of 27; CI's long step runs 900
	}
	res := runSingleTableSimulation(t, st.Repository(), st.History(), st.Payments(), simulation.Options{
		Users: users, Months: 3, Seed: 7, Clock: clock,
	})
	little := "the simulation exercised too little:\n" + formatResult(res)
	assert.GreaterOrEqual(t, res.Total.Collected, 2*users, little)
	assert.NotZero(t, res.Total.Returned, little)
	assert.NotZero(t, res.Total.Stale, little)
	assert.NotZero(t, res.Total.Paused, little)
	assert.NotZero(t, res.Total.Unknown, little)
}

func TestSingleTableSimulationDynamoDB(t *testing.T) {
	t.Parallel()
	dynamotest.Long(t)
	months := stDynamoMonths(t)
	clock := billingtest.NewClock(simulation.DefaultStart)
	// The table of newSingleTableStore (ACC# partitions, TTL attribute
	// "TTL"), with the wrapper's counters logged; status pages of 20 index
	// items and one page per invocation, so runs continue.
	client := dynamotest.Client(t)
	table := dynamostore.SingleTableConfig{Table: dynamotest.TableName(t, "payments"), AccountPrefix: "ACC#", TTLAttribute: "TTL"}
	dynamotest.CreateTable(t, client, dynamostore.SingleTableDefinition(table))
	locks := dynamotest.TableName(t, "locks")
	dynamotest.CreateTable(t, client, dynamostore.LockTableDefinition(locks))
	w := dynamotest.Wrap(client)
	t.Cleanup(func() { w.AssertNoViolations(t) })
	repo, err := dynamostore.NewSingleTableRepository(dynamostore.SingleTableStoreConfig{Client: w, Table: table, Clock: clock, PageSize: 20})
	require.NoError(t, err)
	locker, err := dynamostore.NewLocker(w, dynamostore.WithLockTable(locks))
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, locker.Close(context.Background()), "closing the locker")
	})
	res := runSingleTableSimulation(t, repo, repo.History(), repo.Payments(), simulation.Options{
		Users: stDynamoUsers, Months: months, Seed: stDynamoSeed, Clock: clock,
		DeclineRate: 0.1, PendingRate: 0.35, ReturnRate: 0.15, PagesPerInvocation: 1,
		Locker: locker,
	})
	var ops []string
	for _, op := range []string{"GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "BatchGetItem", "BatchWriteItem", "TransactWriteItems"} {
		ops = append(ops, fmt.Sprintf("%s %d", op, w.Calls(op)))
	}
	t.Logf("DynamoDB: %v (%s)", w, strings.Join(ops, ", "))
	// The seed was chosen so that these users cover every path but the
	// insolvent user's month of daily retries (as TestSimulationDynamoDB).
	behaviours := map[simulation.Behavior]bool{}
	var paused, backlog, yearly, friday bool
	skus := map[string]map[string]bool{}
	for _, u := range res.Users {
		behaviours[u.Behavior] = true
		paused = paused || u.PauseMonths > 0
		backlog = backlog || u.Backlog
		yearly = yearly || u.Term == billing.TermYearly
		friday = friday || u.BillingWeek > 0
		ref, err := layout.ParseSubscriptionRef(u.ID)
		require.NoError(t, err)
		if skus[ref.AccountID] == nil {
			skus[ref.AccountID] = map[string]bool{}
		}
		skus[ref.AccountID][ref.SKU] = true
	}
	full := 0
	for _, s := range skus {
		if len(s) == len(stSimSKUs) {
			full++
		}
	}
	cover := fmt.Sprintf("seed %d no longer covers every path (behaviours %v, paused %v, backlog %v, yearly %v, friday %v, %d accounts with %d SKUs):\n%s",
		stDynamoSeed, behaviours, paused, backlog, yearly, friday, full, len(stSimSKUs), formatResult(res))
	assert.GreaterOrEqual(t, len(behaviours), 4, cover)
	assert.True(t, paused, cover)
	assert.True(t, backlog, cover)
	assert.True(t, yearly, cover)
	assert.True(t, friday, cover)
	assert.GreaterOrEqual(t, full, 10, cover)
	assert.NotZero(t, res.Total.Returned, cover)
	assert.NotZero(t, res.Total.Unknown, cover)
	assert.NotZero(t, res.Total.Retried, cover)
	assert.NotZero(t, res.Total.Stale, cover)
}

// stDynamoMonths is the number of months TestSingleTableSimulationDynamoDB
// simulates: 1 by default, or $BILLING_SIM_MONTHS (the acceptance run:
// BILLING_LONG_TESTS=1 BILLING_SIM_MONTHS=3 CI=true go test -timeout 30m -run
// TestSingleTableSimulationDynamoDB .). Each simulated day costs about
// 220 queries of the payment index whatever the number of users (the
// status walks over CatchUpDays of the scheduled, retry and pause runs and
// of the notifier), and moto answers each by reading the whole table, in
// 10 to 30 ms as it grows: three months take about 11 minutes on two
// cores, beyond the package's 10-minute test timeout.
func stDynamoMonths(t *testing.T) int {
	v := os.Getenv("BILLING_SIM_MONTHS")
	if v == "" {
		return 1
	}
	n, err := strconv.Atoi(v)
	require.NoError(t, err, "BILLING_SIM_MONTHS=%q: want a number of months", v)
	require.GreaterOrEqual(t, n, 1, "BILLING_SIM_MONTHS=%q: want a number of months", v)
	return n
}

// stDynamoUsers and stDynamoSeed: 16 accounts of 3 SKUs with a closed
// account, timeouts before and after charging, paused users, a backlog
// record, yearly and Friday billing users, returned debits and retries.
const (
	stDynamoUsers = 48
	stDynamoSeed  = 50
)

// runSingleTableSimulation runs runSimulation on a single-table store with
// stOracle as the step checks' oracle, checks the reminders every day and
// the receipts and subscription items at the end. opts.UserID, Repository,
// History and the step hooks are set here; opts.Clock must be the store's.
func runSingleTableSimulation(t *testing.T, repo billing.Repository, hist billing.History, pay entitlement.Payments, opts simulation.Options) *simulation.Result {
	t.Helper()
	require.NotNil(t, opts.Clock, "runSingleTableSimulation: opts.Clock must be the store's clock")
	opts.UserID = stSimUserID
	users := make([]string, opts.Users)
	for i := range users {
		users[i] = opts.UserID(i)
	}
	o := newSTOracle(repo, users)
	rc := &stReminderCheck{repo: repo, pay: pay, clock: opts.Clock, oracle: o}
	opts.Repository, opts.History = &stWriteTracker{Repository: repo, o: o}, hist
	opts.BeforeStep = func(ctx context.Context, s simulation.Step) error {
		switch {
		case s.Kind == simulation.StepSettlement && s.Day.Day() == 15:
			return o.verify(ctx)
		case s.Kind == simulation.StepScheduled:
			return rc.check(ctx, s)
		}
		return nil
	}
	res := runSimulationWith(t, opts, o.due)
	assert.NoError(t, o.verify(t.Context()))
	assert.NotZero(t, rc.messages, "no reminder sent in %d days", rc.days)
	t.Logf("reminders: %d messages on %d days; oracle: %d users listed after writes, %d in full re-lists", rc.messages, rc.days, o.listed, o.verified)
	checkSingleTablePayments(t, res, pay)
	return res
}

// stOracle knows every user's records, read with ListByUser: it is the
// single-table simulation's source of what is due, independent of the
// status queries under test. It re-reads a user after a write of the
// user's records (stWriteTracker sees every write), and verify re-reads
// everyone to check that no write went unseen.
type stOracle struct {
	repo  billing.Repository
	users []string

	mu    sync.Mutex
	dirty map[string]bool // users written since they were read
	recs  map[string][]billing.Period

	listed, verified int
}

func newSTOracle(repo billing.Repository, users []string) *stOracle {
	o := &stOracle{repo: repo, users: users, dirty: map[string]bool{}, recs: map[string][]billing.Period{}}
	for _, u := range users {
		o.dirty[u] = true
	}
	return o
}

// touch notes a write of userID's records.
func (o *stOracle) touch(userIDs ...string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, u := range userIDs {
		o.dirty[u] = true
	}
}

// records returns every user's records, in the population's order and
// ascending by billing_date.
func (o *stOracle) records(ctx context.Context) ([]billing.Period, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []billing.Period
	for _, u := range o.users {
		if o.dirty[u] {
			recs, err := o.repo.ListByUser(ctx, u)
			if err != nil {
				return nil, fmt.Errorf("oracle: ListByUser(%s): %w", u, err)
			}
			o.recs[u] = recs
			delete(o.dirty, u)
			o.listed++
		}
		out = append(out, o.recs[u]...)
	}
	return out, nil
}

// verify re-reads every user and fails when a user's records changed
// without a write the tracker saw.
func (o *stOracle) verify(ctx context.Context) error {
	if _, err := o.records(ctx); err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	var problems []string
	for _, u := range o.users {
		recs, err := o.repo.ListByUser(ctx, u)
		if err != nil {
			return fmt.Errorf("oracle: ListByUser(%s): %w", u, err)
		}
		o.verified++
		if !reflect.DeepEqual(recs, o.recs[u]) {
			problems = append(problems, fmt.Sprintf("%s: records changed without a write through the repository:\n\t\t%+v\n\t\tnow %+v", u, o.recs[u], recs))
			o.recs[u] = recs
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("oracle:\n\t%s", strings.Join(problems, "\n\t"))
	}
	return nil
}

// due is the step checks' dueFunc: the filters of the runs' status
// queries (runDue) applied to every user's records.
func (o *stOracle) due(ctx context.Context, s simulation.Step) (read, due []billing.Period, err error) {
	var keep func(r *billing.Period) bool
	switch s.Kind {
	case simulation.StepScheduled:
		keep = func(r *billing.Period) bool {
			return r.Status == billing.StatusScheduled && r.BillingDate.Before(s.At)
		}
	case simulation.StepPause:
		keep = func(r *billing.Period) bool {
			return r.Status == billing.StatusPaused && r.BillingDate.Before(s.At)
		}
	case simulation.StepRetry:
		// The retry run reads 30 + 7 days of ERROR records; the policy
		// picks those retried.
		after := s.At.AddDate(0, 0, -37)
		keep = func(r *billing.Period) bool {
			return r.Status == billing.StatusError && r.BillingDate.After(after)
		}
	default:
		return nil, nil, nil
	}
	recs, err := o.records(ctx)
	if err != nil {
		return nil, nil, err
	}
	for i := range recs {
		r := &recs[i]
		if !keep(r) {
			continue
		}
		read = append(read, *r)
		if s.Kind != simulation.StepRetry || (!r.NoRetry && (billing.DefaultRetryPolicy{}).ShouldRetry(r, s.At)) {
			due = append(due, *r)
		}
	}
	return read, due, nil
}

// stWriteTracker is the repository the simulation writes through: it
// tells the oracle which users' records each write may change.
type stWriteTracker struct {
	billing.Repository
	o *stOracle
}

func (w *stWriteTracker) Add(ctx context.Context, s *billing.Period) error {
	w.o.touch(s.UserID)
	return w.Repository.Add(ctx, s)
}

func (w *stWriteTracker) Update(ctx context.Context, prev, next *billing.Period, create ...*billing.Period) error {
	w.o.touch(prev.UserID, next.UserID)
	for _, c := range create {
		w.o.touch(c.UserID)
	}
	return w.Repository.Update(ctx, prev, next, create...)
}

func (w *stWriteTracker) SetAttempt(ctx context.Context, prev, next *billing.Period) error {
	w.o.touch(prev.UserID)
	return w.Repository.SetAttempt(ctx, prev, next)
}

func (w *stWriteTracker) AdminUpdate(ctx context.Context, prev, next *billing.Period) error {
	w.o.touch(prev.UserID, next.UserID)
	return w.Repository.AdminUpdate(ctx, prev, next)
}

func (w *stWriteTracker) AddAll(ctx context.Context, subs []billing.Period) ([]billing.Period, error) {
	for i := range subs {
		w.o.touch(subs[i].UserID)
	}
	return w.Repository.AddAll(ctx, subs)
}

// stReminderCheck runs the notifier before each scheduled run and checks
// whom it reminded.
type stReminderCheck struct {
	repo   billing.Repository
	pay    entitlement.Payments
	clock  billing.Clock
	oracle *stOracle

	messages, days int
}

func (c *stReminderCheck) check(ctx context.Context, s simulation.Step) error {
	var mu sync.Mutex
	var bodies []string
	sched, err := notice.NewScheduler(notice.SchedulerConfig{
		Repository: c.repo, Clock: c.clock,
		Enqueuer: notice.EnqueuerFunc(func(_ context.Context, b []string) error {
			mu.Lock()
			defer mu.Unlock()
			bodies = append(bodies, b...)
			return nil
		}),
	})
	if err != nil {
		return err
	}
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	// The daily trigger, then the continuations through the scheduler
	// queue (as JSON).
	ev := notice.Event{}
	for invocations := 1; ; invocations++ {
		res, err := sched.Run(ctx, ev)
		if err != nil {
			return fmt.Errorf("notifier: %w", err)
		}
		if res.Skipped > 0 {
			bad("notifier skipped %d records", res.Skipped)
		}
		if res.Continuation == nil {
			break
		}
		if invocations == 1000 {
			return fmt.Errorf("notifier: still continuing after %d invocations", invocations)
		}
		body, err := json.Marshal(res.Continuation)
		if err != nil {
			return err
		}
		if ev, err = notice.ParseEvent(body); err != nil {
			return fmt.Errorf("notifier continuation %s: %w", body, err)
		}
	}
	start, end, err := notice.Window(s.At, "")
	if err != nil {
		return err
	}
	// The oracle: the SCHEDULED records billed in the window.
	recs, err := c.oracle.records(ctx)
	if err != nil {
		return err
	}
	byKey := map[string]*billing.Period{}
	inWindow := map[string]bool{} // record keys
	wantUsers := map[string]bool{}
	for i := range recs {
		r := &recs[i]
		byKey[r.Key()] = r
		if r.Status == billing.StatusScheduled && !r.BillingDate.Before(start) && r.BillingDate.Before(end) {
			inWindow[r.Key()] = true
			wantUsers[r.UserID] = true
		}
	}
	// The messages.
	messaged := map[string]bool{}
	sent := map[string]bool{} // record keys
	for _, b := range bodies {
		m, err := notice.ParseMessage([]byte(b))
		if err != nil {
			bad("message %s: %v", b, err)
			continue
		}
		key := (&billing.Period{UserID: m.UserID, BillingDate: m.BillingDate}).Key()
		r, ok := byKey[key]
		switch {
		case !ok:
			bad("message for %s, which is not a record: %s", key, b)
			continue
		case !inWindow[key]:
			bad("message for %s (%s, billed %v), not a SCHEDULED record billed in [%v, %v)", key, r.Status, r.BillingDate, start, end)
		case sent[key]:
			bad("two messages for %s", key)
		case m.SubscriptionID != r.SubscriptionID || m.Amount != r.Amount || m.Status != r.Status || m.TierName != r.ReceiptTierName:
			bad("message %s for the record %+v", b, *r)
		}
		sent[key] = true
		messaged[m.UserID] = true
	}
	for key := range inWindow {
		if !sent[key] {
			r := byKey[key]
			bad("%s: SCHEDULED record %s billed %v, in the window, not reminded", r.UserID, r.SubscriptionID, r.BillingDate)
		}
	}
	// The reminder index.
	indexed := map[string]bool{}
	cursor := ""
	for pages := 1; ; pages++ {
		subs, next, err := c.pay.DueRemindersByDate(ctx, s.Day, cursor)
		if err != nil {
			return fmt.Errorf("due reminders %s: %w", s.Day.Format("2006-01-02"), err)
		}
		for _, sub := range subs {
			u := layout.SubscriptionRef{AccountID: sub.AccountID, SubscriptionID: sub.SubscriptionID, SKU: sub.SKU}.UserID()
			if indexed[u] {
				bad("%s listed twice by DueRemindersByDate", u)
			}
			indexed[u] = true
			if !sub.NextReminderDate.Equal(s.Day) {
				bad("%s listed by DueRemindersByDate(%s) with NextReminderDate %v", u, s.Day.Format("2006-01-02"), sub.NextReminderDate)
			}
		}
		if next == "" {
			break
		}
		if pages == 10000 {
			return fmt.Errorf("due reminders %s: still paging after %d pages", s.Day.Format("2006-01-02"), pages)
		}
		cursor = next
	}
	if !maps.Equal(messaged, indexed) || !maps.Equal(messaged, wantUsers) {
		bad("users reminded by the notifier %v, due a reminder by DueRemindersByDate %v, with a SCHEDULED record billed in [%v, %v) %v",
			sortedKeys(messaged), sortedKeys(indexed), start.Format("2006-01-02"), end.Format("2006-01-02"), sortedKeys(wantUsers))
	}
	c.messages += len(bodies)
	c.days++
	if len(problems) > 0 {
		slices.Sort(problems)
		return fmt.Errorf("reminders of %s:\n\t%s", s.Day.Format("2006-01-02"), strings.Join(problems, "\n\t"))
	}
	return nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// checkSingleTablePayments checks every account's receipts and
// subscription items against its users' records at the end.
func checkSingleTablePayments(t *testing.T, res *simulation.Result, pay entitlement.Payments) {
	t.Helper()
	ctx := t.Context()
	type account struct {
		refs []layout.SubscriptionRef
		recs [][]billing.Period // per ref
	}
	accounts := map[string]*account{}
	var names []string
	for _, u := range res.Users {
		ref, err := layout.ParseSubscriptionRef(u.ID)
		require.NoError(t, err)
		recs, err := res.Repository.ListByUser(ctx, u.ID)
		require.NoError(t, err)
		a := accounts[ref.AccountID]
		if a == nil {
			a = &account{}
			accounts[ref.AccountID] = a
			names = append(names, ref.AccountID)
		}
		a.refs, a.recs = append(a.refs, ref), append(a.recs, recs)
	}
	var problems []string
	bad := func(acct, format string, args ...any) {
		problems = append(problems, acct+": "+fmt.Sprintf(format, args...))
	}
	receipts, subItems, nudged := 0, 0, 0
	for _, name := range names {
		a := accounts[name]
		// Receipts: one per COMPLETED record, none other, newest first.
		got, err := pay.ReceiptsByAccount(ctx, name, time.Time{})
		require.NoError(t, err)
		receipts += len(got)
		type want struct {
			ref layout.SubscriptionRef
			rec billing.Period
		}
		wanted := map[string]want{} // by subscription, SKU and transaction ID
		for i, ref := range a.refs {
			for _, r := range a.recs[i] {
				if r.Status != billing.StatusCompleted {
					continue
				}
				k := ref.SubscriptionID + "/" + ref.SKU + "/" + r.TransactionID
				if _, dup := wanted[k]; dup || r.TransactionID == "" {
					bad(name, "%s: COMPLETED record %s with transaction ID %q, not unique", ref.UserID(), r.SubscriptionID, r.TransactionID)
				}
				wanted[k] = want{ref, r}
			}
		}
		matched := map[string]bool{}
		for i, rc := range got {
			k := rc.SubscriptionID + "/" + rc.SKU + "/" + rc.TransactionID
			w, ok := wanted[k]
			switch {
			case !ok:
				bad(name, "receipt %+v for no COMPLETED record", rc)
			case matched[k]:
				bad(name, "second receipt %+v for %s %s", rc, w.ref.UserID(), w.rec.SubscriptionID)
			case rc.AccountID != name || rc.ProcessedAmount != w.rec.Amount ||
				rc.ProcessedDate.Before(w.rec.CompletionDate) || rc.ProcessedDate.Sub(w.rec.CompletionDate) >= time.Microsecond:
				bad(name, "receipt %+v for %s %s (amount %s, completed %v)", rc, w.ref.UserID(), w.rec.SubscriptionID, w.rec.Amount, w.rec.CompletionDate)
			case !rc.ProcessedDate.Equal(w.rec.CompletionDate):
				// Another receipt of the SKU has this processed date: the
				// store moves this one on by nanoseconds (REC#<date>#SKU#<sku>
				// is the receipt's sort key).
				nudged++
			}
			matched[k] = true
			if i > 0 && rc.ProcessedDate.After(got[i-1].ProcessedDate) {
				bad(name, "receipts not newest first: %v after %v", rc.ProcessedDate, got[i-1].ProcessedDate)
			}
		}
		for k, w := range wanted {
			if !matched[k] {
				bad(name, "%s: COMPLETED record %s (billed %v, completed %v, %s, %s) has no receipt",
					w.ref.UserID(), w.rec.SubscriptionID, w.rec.BillingDate, w.rec.CompletionDate, w.rec.Amount, w.rec.TransactionID)
			}
		}
		// Subscription items: exactly the account's, due on its earliest
		// open record.
		subs, err := pay.SubscriptionsByAccount(ctx, name)
		require.NoError(t, err)
		subItems += len(subs)
		bySK := map[string]entitlement.RecurringSubscription{}
		for _, s := range subs {
			ref := layout.SubscriptionRef{AccountID: s.AccountID, SubscriptionID: s.SubscriptionID, SKU: s.SKU}
			if _, dup := bySK[ref.SK()]; dup || s.AccountID != name || !slices.Contains(a.refs, ref) {
				bad(name, "subscription item %s/%s of no user of the account (or twice)", s.SubscriptionID, s.SKU)
			}
			bySK[ref.SK()] = s
		}
		for i, ref := range a.refs {
			s, ok := bySK[ref.SK()]
			if !ok {
				bad(name, "%s: no subscription item", ref.UserID())
				continue
			}
			var nextPay, nextRemind time.Time
			var amount billing.Amount
			for _, r := range a.recs[i] {
				amount = r.Amount
				if !layout.PeriodOpen(r.Status) {
					continue
				}
				if d := entitlement.PaymentDate(r.BillingDate); nextPay.IsZero() || d.Before(nextPay) {
					nextPay = d
				}
				if r.Status != billing.StatusScheduled {
					continue
				}
				if d := entitlement.PaymentDate(r.BillingDate).AddDate(0, 0, -billing.NoticeLeadDays); nextRemind.IsZero() || d.Before(nextRemind) {
					nextRemind = d
				}
			}
			if !s.NextPaymentDate.Equal(nextPay) || !s.NextReminderDate.Equal(nextRemind) || s.PaymentAmount != amount {
				bad(name, "%s: subscription item due %v, reminded %v, amount %s; its records say %v, %v, %s",
					ref.UserID(), s.NextPaymentDate, s.NextReminderDate, s.PaymentAmount, nextPay, nextRemind, amount)
			}
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		if len(problems) > 30 {
			problems = append(problems[:30], fmt.Sprintf("... and %d more", len(problems)-30))
		}
		t.Errorf("payments entities:\n\t%s", strings.Join(problems, "\n\t"))
	}
	assert.NotZero(t, receipts, "no receipt in %d accounts", len(names))
	t.Logf("checked %d accounts: %d receipts (%d moved on by nanoseconds), %d subscription items", len(names), receipts, nudged, subItems)
}
