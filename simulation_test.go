package billing_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/billingtest/simulation"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/dynamotest"
	"github.com/dynabill/billing/internal/storetest"
	"github.com/dynabill/billing/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The simulation tests run three months of daily billing (package
// billingtest/simulation) and check the collector's invariants from what the
// store and the processor's call log hold, never from the simulator's own
// counters (those are checked against the store instead):
//
//   - around every run: each record due (SCHEDULED before the run's time),
//     retryable (ERROR that DefaultRetryPolicy selects) or past due (PAUSED)
//     when the run starts is handled by it: attempted exactly once, with
//     the next attempt number and the run's process, or marked STALE,
//     or moved to PAUSED_SKIPPED; none is left behind unless its attempt's
//     outcome was unknown; no other record is attempted (except one the
//     run itself created already due);
//   - around every settlement: every ACH debit of an earlier day is
//     resolved, unless its record does not know the transaction yet;
//   - over the call log: at most one call per record per run and per UTC
//     day, INITIAL calls only from the scheduled run and RETRY calls only
//     from the retry run, never more than 30 days after the billing date,
//     none after a decline marked not retryable;
//   - per user: records form the chain of billing periods from the seeded
//     one (NextBillingDate on the user's schedule, so exactly one record per
//     user and billing_period, with no gap), every record but the last one
//     handled and the last one not due (or its outcome unknown), paused
//     periods skipped exactly as asked and never charged, STALE only for
//     the outage backlog, plan, amount and tier unchanged; the keys used are
//     those of the attempts recorded (plus one whose outcome is unknown);
//   - history: RequireHistoryMatchesPrimary, and per subscription exactly
//     1 + attempts + settlements (+1 for STALE or PAUSED_SKIPPED) rows whose
//     statuses follow the transition table;
//   - money: per record, COMPLETED has exactly one charge kept (succeeded, or
//     pending and settled) with its transaction ID and amount, ACHSENT one
//     pending unresolved charge, every other record none; the sums agree
//     exactly (billing.Amount); RequireNoDoubleCharge;
//   - the simulator's month table equals what the store and the log say.

// toleratePerUserRunBug accepts the consequence of the collector bug
// reproduced by TestCollectorKnownBugTwoRecordsOfOneUserInOneRun: when a
// run reads two records of one user, it handles them concurrently and one
// of them may be skipped because its sibling holds the user's lock (at
// most Report.SkippedLocked of them, and only for such users: the checks
// stay strict otherwise). Set it to false once the bug is fixed.
const toleratePerUserRunBug = false

func TestSimulationInMemory(t *testing.T) {
	t.Parallel()
	store := billingtest.NewMemoryStore(t, memory.Options{PageSize: 250})
	res := runSimulation(t, simulation.Options{
		Users: 1000, Months: 3, Seed: 7,
		Repository: store.Repository(), History: store.History(),
	})
	little := "the simulation exercised too little:\n" + formatResult(res)
	assert.GreaterOrEqual(t, res.Total.Collected, 2000, little)
	assert.NotZero(t, res.Total.Returned, little)
	assert.NotZero(t, res.Total.Stale, little)
	assert.NotZero(t, res.Total.Paused, little)
	assert.NotZero(t, res.Total.Unknown, little)
}

func TestSimulationDynamoDB(t *testing.T) {
	t.Parallel()
	dynamotest.Long(t)
	client := dynamotest.Client(t)
	tables := dynamostore.TableConfig{
		Subscriptions: dynamotest.TableName(t, "billing-activity"),
		History:       dynamotest.TableName(t, "billing-activity-history"),
		Locks:         dynamotest.TableName(t, "locks"),
	}
	dynamotest.CreateTable(t, client, dynamostore.SubscriptionsTableDefinition(tables))
	dynamotest.CreateTable(t, client, dynamostore.HistoryTableDefinition(tables))
	dynamotest.CreateTable(t, client, dynamostore.LockTableDefinition(tables.Locks))
	w := dynamotest.Wrap(client)
	t.Cleanup(func() { w.AssertNoViolations(t) })
	// Pages of 20 and one page per invocation: the scheduled run (which
	// reads every SCHEDULED record on the legacy index) takes three.
	repo, hist := storetest.NewDynamoStores(t, dynamostore.Config{Client: w, Tables: tables, PageSize: 20})
	locker, err := dynamostore.NewLocker(w, dynamostore.WithLockTable(tables.Locks))
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, locker.Close(context.Background()), "closing the locker")
	})
	res := runSimulation(t, simulation.Options{
		Users: 50, Months: 3, Seed: dynamoSeed,
		DeclineRate: 0.1, PendingRate: 0.35, ReturnRate: 0.15, PagesPerInvocation: 1,
		Repository: repo, History: hist, Locker: locker,
	})
	// The seed was chosen so that 50 users cover every path but the
	// insolvent user's month of daily retries (moto's transactions copy
	// the tables they write, so each costs tens of milliseconds; the
	// in-memory test has insolvent users).
	behaviours := map[simulation.Behavior]bool{}
	var paused, backlog, yearly, friday bool
	for _, u := range res.Users {
		behaviours[u.Behavior] = true
		paused = paused || u.PauseMonths > 0
		backlog = backlog || u.Backlog
		yearly = yearly || u.Term == billing.TermYearly
		friday = friday || u.BillingWeek > 0
	}
	cover := fmt.Sprintf("seed %d no longer covers every path (behaviours %v, paused %v, backlog %v, yearly %v, friday %v):\n%s",
		dynamoSeed, behaviours, paused, backlog, yearly, friday, formatResult(res))
	assert.GreaterOrEqual(t, len(behaviours), 4, cover)
	assert.True(t, paused, cover)
	assert.True(t, backlog, cover)
	assert.True(t, yearly, cover)
	assert.True(t, friday, cover)
	assert.NotZero(t, res.Total.Returned, cover)
	assert.NotZero(t, res.Total.Unknown, cover)
	assert.NotZero(t, res.Total.Retried, cover)
	assert.NotZero(t, res.Total.Stale, cover)
	var ops []string
	for _, op := range []string{"GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "BatchWriteItem", "TransactWriteItems"} {
		ops = append(ops, fmt.Sprintf("%s %d", op, w.Calls(op)))
	}
	t.Logf("DynamoDB: %v (%s)", w, strings.Join(ops, ", "))
}

// dynamoSeed gives 50 users with a closed account, timeouts before and
// after charging, paused users, a backlog record, yearly and Friday
// billing users.
const dynamoSeed = 50

func formatResult(res *simulation.Result) string {
	var b strings.Builder
	_ = res.Format(&b)
	return b.String()
}

// runSimulation runs the simulation with the step checks and then checks
// the end state. It fails t on the first broken invariant.
func runSimulation(t *testing.T, opts simulation.Options) *simulation.Result {
	t.Helper()
	return runSimulationWith(t, opts, nil)
}

// dueFunc returns the records a step's run reads and, among them, those
// it must handle (see runDue).
type dueFunc func(ctx context.Context, s simulation.Step) (read, due []billing.Period, err error)

// runSimulationWith is runSimulation with the step checks' oracle of what
// is due: due, or when nil the run's own status queries (runDue), which a
// layout whose status queries are under test cannot use. opts.BeforeStep
// and AfterStep, when set, run after the step checks' own.
func runSimulationWith(t *testing.T, opts simulation.Options, due dueFunc) *simulation.Result {
	t.Helper()
	if opts.Clock == nil {
		opts.Clock = billingtest.NewClock(time.Time{})
	}
	if opts.Provider == nil {
		opts.Provider = billingtest.NewProvider(billingtest.ProviderOptions{Clock: opts.Clock})
	}
	ck := &stepChecker{repo: opts.Repository, prov: opts.Provider, due: due}
	if ck.due == nil {
		ck.due = func(ctx context.Context, s simulation.Step) (read, due []billing.Period, err error) {
			return runDue(ctx, ck.repo, s)
		}
	}
	opts.BeforeStep, opts.AfterStep = chainStep(ck.before, opts.BeforeStep), chainStep(ck.after, opts.AfterStep)
	began := time.Now()
	res, err := simulation.Run(t.Context(), opts)
	require.NoError(t, err, "simulation")
	t.Logf("simulated in %v:\n%s", time.Since(began).Round(time.Millisecond), formatResult(res))
	ck.tolerated = append(ck.tolerated, checkFailures(t, res, ck)...)
	checkCallLog(t, res)
	checkEndState(t, res, ck.lastScheduled)
	if len(ck.tolerated) > 0 {
		t.Logf("tolerated %d effects of the known collector bug (toleratePerUserRunBug):\n\t%s",
			len(ck.tolerated), strings.Join(ck.tolerated, "\n\t"))
	}
	return res
}

// chainStep returns a step hook calling first, then next (when set).
func chainStep(first, next func(context.Context, simulation.Step) error) func(context.Context, simulation.Step) error {
	if next == nil {
		return first
	}
	return func(ctx context.Context, s simulation.Step) error {
		if err := first(ctx, s); err != nil {
			return err
		}
		return next(ctx, s)
	}
}

// stepChecker checks each step of each day against a snapshot taken just
// before it.
type stepChecker struct {
	repo billing.Repository
	prov *billingtest.Provider
	due  dueFunc // the records due at a step

	calls         int                           // provider calls before the step
	snapshot      map[string]billing.Period     // by subscription ID
	perUser       map[string]int                // records the run reads, per user
	runs          map[time.Time]map[string]bool // users with several records in a run
	lastScheduled time.Time
	tolerated     []string
}

// queryStatusAll reads every page of q, in large pages.
func queryStatusAll(ctx context.Context, repo billing.Repository, q billing.StatusQuery) ([]billing.Period, error) {
	var out []billing.Period
	q.Limit = 1000
	for {
		p, err := repo.QueryStatus(ctx, q)
		if err != nil {
			return nil, err
		}
		if len(p.Invalid) > 0 {
			return nil, fmt.Errorf("undecodable records: %v", p.Invalid)
		}
		out = append(out, p.Items...)
		if q.Cursor = p.Next; q.Cursor == "" {
			return out, nil
		}
	}
}

// runDue returns the records the step's run reads (its status query)
// and, among them, those it must handle.
func runDue(ctx context.Context, repo billing.Repository, s simulation.Step) (read, due []billing.Period, err error) {
	switch s.Kind {
	case simulation.StepScheduled:
		read, err = queryStatusAll(ctx, repo, billing.StatusQuery{Status: billing.StatusScheduled, Before: s.At})
		return read, read, err
	case simulation.StepPause:
		read, err = queryStatusAll(ctx, repo, billing.StatusQuery{Status: billing.StatusPaused, Before: s.At})
		return read, read, err
	case simulation.StepRetry:
		// The retry run reads 30 + 7 days of ERROR records; the policy
		// picks those retried.
		read, err = queryStatusAll(ctx, repo, billing.StatusQuery{Status: billing.StatusError, After: s.At.AddDate(0, 0, -37)})
		for _, r := range read {
			if !r.NoRetry && (billing.DefaultRetryPolicy{}).ShouldRetry(&r, s.At) {
				due = append(due, r)
			}
		}
		return read, due, err
	}
	return nil, nil, nil
}

func (ck *stepChecker) before(ctx context.Context, s simulation.Step) error {
	ck.calls = ck.prov.CallCount()
	read, due, err := ck.due(ctx, s)
	if err != nil {
		return err
	}
	ck.snapshot, ck.perUser = map[string]billing.Period{}, map[string]int{}
	for _, r := range due {
		ck.snapshot[r.SubscriptionID] = r
	}
	for _, r := range read {
		ck.perUser[r.UserID]++
	}
	if s.Kind == simulation.StepScheduled {
		ck.lastScheduled = s.At
	}
	return nil
}

func (ck *stepChecker) after(ctx context.Context, s simulation.Step) error {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	var calls []billingtest.Call
	if s.Kind == simulation.StepScheduled || s.Kind == simulation.StepRetry || ck.prov.CallCount() != ck.calls {
		calls = ck.prov.Calls()[ck.calls:]
	}
	bySub := map[string][]billingtest.Call{}
	for _, c := range calls {
		bySub[c.Request.SubscriptionID] = append(bySub[c.Request.SubscriptionID], c)
		if !c.At.Equal(s.At) {
			bad("call %s at %v during the %s step at %v", c.Request.IdempotencyKey, c.At, s.Kind, s.At)
		}
	}
	if s.Kind == simulation.StepSettlement || s.Kind == simulation.StepPause {
		// The only calls these steps make resolve an attempt in flight:
		// they present a key the provider was given before.
		seen := map[string]bool{}
		for _, c := range ck.prov.Calls()[:ck.calls] {
			seen[c.Request.IdempotencyKey] = true
		}
		for _, c := range calls {
			if !seen[c.Request.IdempotencyKey] {
				bad("provider call with the new key %s during the %s step", c.Request.IdempotencyKey, s.Kind)
			}
		}
	}
	if s.Kind == simulation.StepSettlement {
		for _, ch := range ck.prov.PendingSettlements() {
			if !ch.At.Before(s.Day) {
				continue
			}
			rec, err := ck.repo.GetByID(ctx, ch.SubscriptionID)
			if err != nil {
				return err
			}
			if rec.TransactionID == ch.TransactionID {
				bad("ACH debit %s of %v not settled on %v (record %s)", ch.Key, ch.At, s.Day, rec.Status)
			}
		}
		return joinProblems(s, problems)
	}
	proc := billing.ProcessInitial
	if s.Kind == simulation.StepRetry {
		proc = billing.ProcessRetry
	}
	skipped, skippedSeen := 0, 0
	for _, rep := range s.Reports {
		skipped += rep.SkippedLocked
	}
	unknown := func(sub string) bool {
		cs := bySub[sub]
		return len(cs) > 0 && cs[len(cs)-1].Err != nil
	}
	// The records still due after the run, read as before it.
	_, leftList, err := ck.due(ctx, s)
	if err != nil {
		return err
	}
	left := map[string]billing.Period{}
	for _, r := range leftList {
		left[r.SubscriptionID] = r
	}
	for id, prev := range ck.snapshot {
		cs := bySub[id]
		_, isLeft := left[id]
		stale := s.Kind == simulation.StepScheduled && s.At.Sub(prev.BillingDate) > 30*24*time.Hour
		switch {
		case stale || s.Kind == simulation.StepPause:
			// Marked STALE or PAUSED_SKIPPED without a call (the end state
			// checks which status).
			if len(cs) > 0 || isLeft {
				bad("%s %s (%s, billed %v): %d calls, still due after the %s run", prev.UserID, id, prev.Status, prev.BillingDate, len(cs), s.Kind)
			}
			continue
		case len(cs) == 0 && ck.perUser[prev.UserID] > 1 && toleratePerUserRunBug:
			skippedSeen++
			ck.tolerated = append(ck.tolerated, fmt.Sprintf("%s %s run at %v: %s not attempted (a sibling record held the lock)", prev.UserID, s.Kind, s.At, id))
			continue
		case len(cs) == 0:
			bad("%s %s (%s, billed %v, last run %v): due, not attempted", prev.UserID, id, prev.Status, prev.BillingDate, prev.LastRunDate)
			continue
		case isLeft && !unknown(id):
			bad("%s %s: answered %v, yet still due after the %s run", prev.UserID, id, cs[len(cs)-1].Result.Outcome, s.Kind)
		}
		want := billing.IdempotencyKey(id, prev.Attempt+1)
		for _, c := range cs {
			if c.Request.IdempotencyKey != want || c.Request.Process != proc || c.Request.Amount != prev.Amount {
				bad("%s: call %s %s %s, want key %s process %s amount %s", id, c.Request.IdempotencyKey, c.Request.Process, c.Request.Amount, want, proc, prev.Amount)
			}
		}
	}
	for id, r := range left {
		if _, ok := ck.snapshot[id]; !ok && r.CreatedDate.Before(s.At) {
			bad("%s %s (%s, billed %v, last run %v): due before the %s run and after it, not seen by it", r.UserID, id, r.Status, r.BillingDate, r.LastRunDate, s.Kind)
		}
	}
	for sub, cs := range bySub {
		if _, ok := ck.snapshot[sub]; ok {
			continue
		}
		// Only a record this run created, already due (after a STALE
		// backlog record), may be attempted without being in the snapshot.
		rec, err := ck.repo.GetByID(ctx, sub)
		if err != nil {
			return fmt.Errorf("re-read %s: %w", sub, err)
		}
		if s.Kind != simulation.StepScheduled || rec.CreatedDate.Before(s.At) {
			bad("%s %s (%s, billed %v): %d calls in the %s run, not expected", rec.UserID, sub, rec.Status, rec.BillingDate, len(cs), s.Kind)
		}
	}
	if skippedSeen > skipped {
		bad("%d records of users with several records not attempted, %d skipped for a held lock", skippedSeen, skipped)
	}
	if ck.runs == nil {
		ck.runs = map[time.Time]map[string]bool{}
	}
	for u, n := range ck.perUser {
		if n > 1 {
			if ck.runs[s.At] == nil {
				ck.runs[s.At] = map[string]bool{}
			}
			ck.runs[s.At][u] = true
		}
	}
	return joinProblems(s, problems)
}

func joinProblems(s simulation.Step, problems []string) error {
	if len(problems) == 0 {
		return nil
	}
	slices.Sort(problems)
	if len(problems) > 20 {
		problems = append(problems[:20], fmt.Sprintf("... and %d more", len(problems)-20))
	}
	return fmt.Errorf("%s step at %v:\n\t%s", s.Kind, s.At, strings.Join(problems, "\n\t"))
}

// checkFailures checks that every item a run failed is an attempt whose
// outcome the provider did not give (or, while tolerated, the known bug),
// and returns the tolerated ones.
func checkFailures(t *testing.T, res *simulation.Result, ck *stepChecker) []string {
	t.Helper()
	failedCall := map[string]bool{} // run time + subscription of calls that failed
	for _, c := range res.Provider.Calls() {
		if c.Err != nil {
			failedCall[c.At.String()+" "+c.Request.SubscriptionID] = true
		}
	}
	var tolerated []string
	for _, f := range res.Failures {
		switch {
		case failedCall[f.Step.At.String()+" "+f.SubscriptionID]:
		case toleratePerUserRunBug && ck.runs[f.Step.At][f.UserID]:
			tolerated = append(tolerated, fmt.Sprintf("%s %s run at %v: %s", f.UserID, f.Step.Kind, f.Step.At, f.Reason))
		default:
			t.Errorf("%s run at %v failed %s %s: %s", f.Step.Kind, f.Step.At, f.UserID, f.SubscriptionID, f.Reason)
		}
	}
	return tolerated
}

// checkCallLog checks the provider's call log on its own.
func checkCallLog(t *testing.T, res *simulation.Result) {
	t.Helper()
	type runKey struct {
		at  time.Time
		sub string
	}
	perRun := map[runKey][]billingtest.Call{}
	perDay := map[runKey]int{}
	noRetry := map[string]time.Time{}
	seen := map[string]bool{}
	var problems []string
	for _, c := range res.Provider.Calls() {
		r := c.Request
		if first, ok := noRetry[r.SubscriptionID]; ok {
			problems = append(problems, fmt.Sprintf("%s: called at %v after a decline marked not retryable at %v", r.SubscriptionID, c.At, first))
		}
		k := runKey{c.At, r.SubscriptionID}
		if prev := perRun[k]; len(prev) > 0 && prev[len(prev)-1].Err == nil {
			problems = append(problems, fmt.Sprintf("%s: called twice in the run at %v", r.SubscriptionID, c.At))
		}
		perRun[k] = append(perRun[k], c)
		day := runKey{c.At.Truncate(24 * time.Hour), r.SubscriptionID}
		if perDay[day]++; perDay[day] == 2 {
			problems = append(problems, fmt.Sprintf("%s: called more than once on %s", r.SubscriptionID, day.at.Format("2006-01-02")))
		}
		since := c.At.Sub(r.BillingDate)
		replay := seen[r.IdempotencyKey]
		seen[r.IdempotencyKey] = true
		switch {
		case replay:
			// Resolving an attempt in flight presents its recorded request
			// again, whichever step finds it.
		case r.Process == billing.ProcessInitial:
			if c.At.Sub(c.At.Truncate(24*time.Hour)) != simulation.ScheduledAt || since < 0 || since > 30*24*time.Hour {
				problems = append(problems, fmt.Sprintf("%s: INITIAL call at %v for billing date %v", r.SubscriptionID, c.At, r.BillingDate))
			}
		case r.Process == billing.ProcessRetry:
			if c.At.Sub(c.At.Truncate(24*time.Hour)) != simulation.RetryAt || since <= 0 || since > 30*24*time.Hour || r.Attempt < 2 {
				problems = append(problems, fmt.Sprintf("%s: RETRY call (attempt %d) at %v for billing date %v", r.SubscriptionID, r.Attempt, c.At, r.BillingDate))
			}
		default:
			problems = append(problems, fmt.Sprintf("%s: call with process %s", r.SubscriptionID, r.Process))
		}
		if c.Err == nil && c.Result.Outcome == billing.OutcomeDeclined && !c.Result.Retryable {
			noRetry[r.SubscriptionID] = c.At
		}
	}
	if len(problems) > 0 {
		t.Fatalf("call log:\n\t%s", strings.Join(problems, "\n\t"))
	}
	billingtest.RequireNoDoubleCharge(t, res.Provider)
}

// checkEndState checks every user's records, history and money at the end.
func checkEndState(t *testing.T, res *simulation.Result, lastScheduled time.Time) {
	t.Helper()
	ctx := t.Context()
	calls := res.Provider.Calls()
	answer := map[string]billingtest.Call{} // key → a call answered (the first answer, or its replay)
	keys := map[string][]string{}           // subscription → keys in order of first use
	lastCall := map[string]billingtest.Call{}
	var retried, unknownCalls int
	for _, c := range calls {
		k, sub := c.Request.IdempotencyKey, c.Request.SubscriptionID
		if _, ok := answer[k]; !ok && c.Err == nil {
			answer[k] = c
		}
		if !slices.Contains(keys[sub], k) {
			keys[sub] = append(keys[sub], k)
		}
		lastCall[sub] = c
		if c.Request.Process == billing.ProcessRetry {
			retried++
		}
		if c.Err != nil {
			unknownCalls++
		}
	}
	charges := map[string][]billingtest.Charge{}
	var kept, completedSum, heldSum, timedOutSum billing.Amount
	var settled, returned int
	add := func(sum *billing.Amount, a billing.Amount) {
		s, err := sum.Add(a)
		require.NoError(t, err)
		*sum = s
	}
	for _, ch := range res.Provider.Charges() {
		charges[ch.SubscriptionID] = append(charges[ch.SubscriptionID], ch)
		if !ch.Returned {
			add(&kept, ch.Amount)
		}
		if ch.Settled {
			settled++
		}
		if ch.Returned {
			returned++
		}
	}
	var completed, stale, skipped, declines, pendings, historyRows int
	var problems []string
	bad := func(u *simulation.User, format string, args ...any) {
		problems = append(problems, u.ID+": "+fmt.Sprintf(format, args...))
	}
	for i := range res.Users {
		u := &res.Users[i]
		billingtest.RequireHistoryMatchesPrimary(t, res.Repository, res.History, u.ID)
		recs, err := res.Repository.ListByUser(ctx, u.ID)
		require.NoError(t, err)
		rows, err := res.History.ListByUser(ctx, u.ID)
		require.NoError(t, err)
		historyRows += len(rows)
		rowsOf := map[string][]billing.Period{}
		for _, r := range rows {
			rowsOf[r.SubscriptionID] = append(rowsOf[r.SubscriptionID], r)
		}
		if len(recs) == 0 || recs[0].SubscriptionID != u.FirstSubscriptionID || !recs[0].BillingDate.Equal(u.FirstBillingDate) {
			bad(u, "the first record is not the seeded one (%s billed %v)", u.FirstSubscriptionID, u.FirstBillingDate)
			continue
		}
		sched := billing.Schedule{Term: u.Term, AnchorDay: u.AnchorDay, BillingWeek: u.BillingWeek}
		periods := map[string]bool{}
		for j := range recs {
			r := &recs[j]
			last := j == len(recs)-1
			if j > 0 {
				// A pause counts months on every term: the record after a
				// paused one is a month later.
				want, _ := sched.Next(recs[j-1].BillingDate)
				if recs[j-1].Status == billing.StatusPausedSkipped {
					want, _ = sched.AfterPause(recs[j-1].BillingDate, 1)
				}
				if !r.BillingDate.Equal(want) {
					bad(u, "record %d billed %v, want %v (one period after %v)", j, r.BillingDate, want, recs[j-1].BillingDate)
				}
			}
			if r.BillingPeriod != billing.BillingPeriod(r.BillingDate) || periods[r.BillingPeriod] {
				bad(u, "record %d: billing_period %s twice or not that of %v", j, r.BillingPeriod, r.BillingDate)
			}
			periods[r.BillingPeriod] = true
			if r.Amount != u.Amount || r.ReceiptTierName != u.Tier || r.Term != u.Term || r.BillingWeek != u.BillingWeek {
				bad(u, "record %d: %s %s %s week %d, want the plan %s %s %s week %d", j, r.ReceiptTierName, r.Term, r.Amount, r.BillingWeek, u.Tier, u.Term, u.Amount, u.BillingWeek)
			}
			open := r.Status == billing.StatusScheduled || r.Status == billing.StatusPaused
			lc, called := lastCall[r.SubscriptionID]
			outcomeUnknown := called && lc.Err != nil
			switch {
			case !last && open:
				bad(u, "record %d (%s, billed %v) is still open, yet the next period exists", j, r.Status, r.BillingDate)
			case last && !open:
				bad(u, "the last record (%s, billed %v) is closed: the subscription did not go on", r.Status, r.BillingDate)
			case last && r.BillingDate.Before(lastScheduled) && !outcomeUnknown:
				bad(u, "the last record (%s, billed %v) was due at the last run %v", r.Status, r.BillingDate, lastScheduled)
			}
			// Pauses, stale records and attempts.
			paused := j < u.PauseMonths
			switch {
			case paused && r.Status != billing.StatusPausedSkipped && !(last && r.Status == billing.StatusPaused):
				bad(u, "record %d is %s, want a skipped pause (%d months)", j, r.Status, u.PauseMonths)
			case !paused && (r.Status == billing.StatusPaused || r.Status == billing.StatusPausedSkipped):
				bad(u, "record %d is %s beyond the pause of %d months", j, r.Status, u.PauseMonths)
			case j == u.PauseMonths && j > 0 && r.UpdatedEvent != billing.UpdatedPauseResume:
				bad(u, "record %d after the pause has updated_event %q", j, r.UpdatedEvent)
			case u.Backlog && j == 0 && r.Status != billing.StatusStale:
				bad(u, "the backlog record is %s, want STALE", r.Status)
			case r.Status == billing.StatusStale && !(u.Backlog && j == 0) &&
				(r.Attempt == 0 || lastScheduled.Sub(r.BillingDate) <= 30*24*time.Hour):
				bad(u, "record %d (billed %v, %d attempts) is STALE", j, r.BillingDate, r.Attempt)
			case r.Attempt == 0 && called && !outcomeUnknown:
				bad(u, "record %d was called but records no attempt", j)
			}
			switch r.Status {
			case billing.StatusStale:
				stale++
			case billing.StatusPausedSkipped:
				skipped++
			}
			// The keys presented are those of the recorded attempts, and
			// maybe one more whose outcome is still unknown.
			ks := keys[r.SubscriptionID]
			for n := 1; n <= len(ks); n++ {
				if ks[n-1] != billing.IdempotencyKey(r.SubscriptionID, n) {
					bad(u, "record %d: keys %q not numbered from 1", j, ks)
					break
				}
			}
			if extra := len(ks) - r.Attempt; extra < 0 || extra > 1 {
				bad(u, "record %d: %d attempts recorded, %d keys used", j, r.Attempt, len(ks))
			} else if extra == 1 {
				if _, answered := answer[ks[len(ks)-1]]; answered && !toleratePerUserRunBug {
					bad(u, "record %d: attempt %d answered but not recorded", j, len(ks))
				}
			}
			for n := 1; n <= r.Attempt && n <= len(ks); n++ {
				switch answer[ks[n-1]].Result.Outcome {
				case billing.OutcomeDeclined:
					declines++
				case billing.OutcomePending:
					pendings++
				case billing.OutcomeSucceeded:
				default:
					bad(u, "record %d: attempt %d recorded without an answer", j, n)
				}
			}
			// Money.
			var keptCh []billingtest.Charge
			resolved := 0
			for _, ch := range charges[r.SubscriptionID] {
				if !ch.Returned {
					keptCh = append(keptCh, ch)
				}
				if ch.Settled || ch.Returned {
					resolved++
				}
				if ch.Amount != r.Amount {
					bad(u, "record %d: charged %s, amount %s", j, ch.Amount, r.Amount)
				}
			}
			switch r.Status {
			case billing.StatusCompleted:
				completed++
				add(&completedSum, r.Amount)
				if len(keptCh) != 1 || keptCh[0].TransactionID != r.TransactionID ||
					!(keptCh[0].Outcome == billing.OutcomeSucceeded || keptCh[0].Settled) {
					bad(u, "record %d COMPLETED (%s) with charges %+v", j, r.TransactionID, keptCh)
				}
			case billing.StatusACHSent:
				add(&heldSum, r.Amount)
				if len(keptCh) != 1 || keptCh[0].TransactionID != r.TransactionID || keptCh[0].Outcome != billing.OutcomePending || keptCh[0].Settled {
					bad(u, "record %d ACHSENT (%s) with charges %+v", j, r.TransactionID, keptCh)
				}
			default:
				if len(keptCh) == 1 && outcomeUnknown && r.Status == billing.StatusScheduled {
					add(&timedOutSum, r.Amount) // charged, then timed out on the last day
				} else if len(keptCh) > 0 {
					bad(u, "record %d %s with charges %+v", j, r.Status, keptCh)
				}
			}
			// History: one row per write, following the transition table.
			hs := rowsOf[r.SubscriptionID]
			want := 1 + r.Attempt + resolved
			if r.Status == billing.StatusStale || r.Status == billing.StatusPausedSkipped {
				want++
			}
			if len(hs) != want {
				bad(u, "record %d (%s, %d attempts, %d settlements): %d history rows, want %d", j, r.Status, r.Attempt, resolved, len(hs), want)
			}
			for h := range hs {
				if h == 0 && hs[0].Status != billing.StatusScheduled && hs[0].Status != billing.StatusPaused {
					bad(u, "record %d created %s", j, hs[0].Status)
				}
				if h > 0 && !billing.CanTransition(hs[h-1].Status, hs[h].Status) {
					bad(u, "record %d history goes %s → %s", j, hs[h-1].Status, hs[h].Status)
				}
			}
		}
		delete(rowsOf, "")
		for sub := range rowsOf {
			if !slices.ContainsFunc(recs, func(r billing.Period) bool { return r.SubscriptionID == sub }) {
				bad(u, "history rows of %s, which is not a record", sub)
			}
		}
	}
	if len(problems) > 0 {
		if len(problems) > 30 {
			problems = append(problems[:30], fmt.Sprintf("... and %d more", len(problems)-30))
		}
		t.Fatalf("end state:\n\t%s", strings.Join(problems, "\n\t"))
	}
	var held billing.Amount
	add(&held, completedSum)
	add(&held, heldSum)
	add(&held, timedOutSum)
	assert.Equal(t, held, kept, "money kept by the processor %s, records COMPLETED %s + ACHSENT %s + charged-then-timed-out %s = %s",
		kept, completedSum, heldSum, timedOutSum, held)
	// The simulator's table agrees with the store and the call log.
	got := res.Total
	want := simulation.Month{Period: "total", Attempts: len(calls), Collected: completed, Pending: pendings, Settled: settled,
		Returned: returned, Declined: declines, Retried: retried, Unknown: unknownCalls, Stale: stale, Paused: skipped, Revenue: completedSum}
	assert.Equal(t, want, got, "month table total\n\t%+v\nstore and call log say\n\t%+v", got, want)
	assert.Len(t, res.Provider.PendingSettlements(), res.PendingAtEnd, "PendingAtEnd %d, provider's pending settlements", res.PendingAtEnd)
	t.Logf("checked %d users, %d history rows, %d calls; %s collected, %s in flight", len(res.Users), historyRows, len(calls), completedSum, heldSum)
}

// Regression tests for two collector bugs the simulation found (fixed):
// a run skipped the second record of a user on one page (lock held by the
// first), and an ERROR record past the retry window never became STALE.

// barrierLocker makes the race of two lock calls for one user certain:
// the first Lock of a user takes the lock and holds it until a second
// Lock of that user has been tried (or a second has passed).
type barrierLocker struct {
	billing.Locker
	mu      sync.Mutex
	waiting map[string]chan struct{}
}

func (l *barrierLocker) Lock(ctx context.Context, userID string) (billing.Lease, error) {
	lease, err := l.Locker.Lock(ctx, userID)
	l.mu.Lock()
	ch, second := l.waiting[userID]
	if !second {
		ch = make(chan struct{})
		l.waiting[userID] = ch
	}
	l.mu.Unlock()
	if second {
		close(ch)
		return lease, err
	}
	select {
	case <-ch:
	case <-time.After(time.Second):
	}
	return lease, err
}

// TestCollectorTwoRecordsOfOneUserInOneRun: a run used to handle the
// records of a page concurrently, each under its user's lock, so when a
// page holds two records of one user, the second finds the lock held by
// the first and is skipped (Report.SkippedLocked): a due record is left
// unattempted that day. It happens every day to a user whose older ERROR
// record (read by the retry run for 37 days, though the policy stops
// retrying after 30) sits next to a retryable one, and to a user with two
// ERROR records within the window (billing dates 28–29 days apart: Friday
// billing, February). The simulation sees it several times a quarter.
// Fixed: a run handles one user's records of a page in order under one
// hold of the lock (as CollectUser does).
func TestCollectorTwoRecordsOfOneUserInOneRun(t *testing.T) {
	// Friday billing, week 1: January 5 and February 2 are 28 days apart,
	// so on February 3 both records are inside the 30-day retry window.
	now := time.Date(2024, 2, 3, 12, 10, 0, 0, time.UTC)
	e := newCollectorEnv(t, func(c *billing.Config) {
		c.Locker = &barrierLocker{Locker: c.Locker, waiting: map[string]chan struct{}{}}
	})
	e.clock.Set(now)
	declined := func(attempt int, last time.Time) func(*billing.Period) {
		return func(s *billing.Period) {
			s.BillingWeek, s.Attempt, s.PaymentError = 1, attempt, "R01"
			s.InitialRunDate, s.LastRunDate = s.BillingDate.Add(9*time.Hour), last
		}
	}
	jan := e.add("u1", time.Date(2024, 1, 5, 3, 0, 0, 0, time.UTC), billing.StatusError, declined(29, now.Add(-24*time.Hour)))
	feb := e.add("u1", time.Date(2024, 2, 2, 3, 0, 0, 0, time.UTC), billing.StatusError, declined(1, now.Add(-24*time.Hour-10*time.Minute)))
	rep := e.run(billing.RunRetry)
	for _, s := range []billing.Period{jan, feb} {
		assert.Len(t, e.pay.KeysFor(s.SubscriptionID), 1, "retryable record billed %v not attempted (report: attempted %d, skipped for a held lock %d)",
			s.BillingDate, rep.Attempted, rep.SkippedLocked)
	}
}

// TestCollectorErrorRecordPastWindowBecomesStale: Config.OldSubscriptionDays
// says a SCHEDULED or ERROR record older than it is marked STALE, and the
// retry run reads 7 days past it so that records crossing it are marked,
// but attempt checks the retry policy first: DefaultRetryPolicy (30 days)
// refuses a record older than 30 days, attempt returns NotEligible, and
// markStale is never reached. ERROR records stay ERROR for ever (the
// simulation's insolvent users show it). Fixed: attempt checks the stale
// threshold before the retry policy.
func TestCollectorErrorRecordPastWindowBecomesStale(t *testing.T) {
	now := time.Date(2024, 2, 5, 12, 10, 0, 0, time.UTC)
	e := newCollectorEnv(t)
	e.clock.Set(now)
	s := e.add("u1", time.Date(2024, 1, 3, 2, 0, 0, 0, time.UTC), billing.StatusError, func(s *billing.Period) {
		s.Attempt, s.PaymentError, s.Process = 30, "R01", billing.ProcessRetry
		s.InitialRunDate, s.LastRunDate = time.Date(2024, 1, 3, 12, 0, 0, 0, time.UTC), time.Date(2024, 2, 1, 12, 10, 0, 0, time.UTC)
	})
	rep := e.run(billing.RunRetry)
	cur, err := e.repo.GetByID(t.Context(), s.SubscriptionID)
	require.NoError(t, err)
	require.Equal(t, billing.StatusStale, cur.Status, "ERROR record billed %v, %v old at the retry run: status %s (report: stale %d, not eligible %d); want STALE",
		s.BillingDate, now.Sub(s.BillingDate), cur.Status, rep.Stale, rep.NotEligible)
	require.Equal(t, 1, rep.Stale, "ERROR record billed %v, %v old at the retry run: status %s (report: stale %d, not eligible %d); want STALE",
		s.BillingDate, now.Sub(s.BillingDate), cur.Status, rep.Stale, rep.NotEligible)
}
