package billing

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Repository stores the billing-activity records: one record per user per
// billing period, keyed by user_id and billing_date. Every write also appends
// the record's row to the history (billing-activity-history) atomically.
//
// Implementations: [dynamostore.Repository] on the legacy tables, and the
// in-memory store of package memory. Both pass
// billingtest.TestRepository.
type Repository interface {
	// Add writes a new record and its history row in one transaction. The
	// record's LastRunDate must be set (it keys the history row). When a
	// record with the same user_id and billing_date exists, or the history
	// row exists, nothing is written and the error is a [*ConflictError]
	// wrapping [ErrAlreadyExists].
	//
	// On the legacy layout (one subscription per user) a new SCHEDULED or
	// PAUSED record is refused when the user already has a SCHEDULED or
	// PAUSED record at another key: nothing is written and the error is an
	// [*OpenSubscriptionError] wrapping [ErrOpenSubscription]. Records in
	// other statuses (closed periods, history imports) are added as any.
	// The check is a consistent read of the user's records before the
	// write, which a condition on the new item cannot fence: two
	// concurrent Adds for a user with no open record may both succeed. The
	// collector reports an open record it finds that is neither the period
	// it handles nor its successor, rather than collect it for that
	// subscription. The single table, where an account has several
	// subscriptions, does not refuse.
	Add(ctx context.Context, s *Period) error

	// Get reads a record by its key with a consistent read. [ErrNotFound]
	// when there is none.
	Get(ctx context.Context, userID string, billingDate time.Time) (Period, error)

	// GetByID finds a record by subscription_id through the
	// subscription_id-index, then re-reads it from the table with a
	// consistent read (indexes are eventually consistent). [ErrNotFound]
	// when there is none.
	GetByID(ctx context.Context, subscriptionID string) (Period, error)

	// ListByUser returns all records of a user ascending by billing_date,
	// reading every page. An item that cannot be decoded is skipped, not
	// an error: the store logs it and reports it through the function
	// [WithInvalidItems] put in ctx.
	ListByUser(ctx context.Context, userID string) ([]Period, error)

	// Recent returns at most limit records of a user, most recent
	// billing_date first, with a consistent read: the collector re-reads
	// a record a run found through it, learning in the same call whether
	// a later period is open. limit <= 0 means 10. An item that cannot be
	// decoded is skipped, as by ListByUser, and takes no record's place:
	// the read goes on until it has limit records or the user has no more.
	Recent(ctx context.Context, userID string, limit int) ([]Period, error)

	// QueryStatus returns one page of records in a status, narrowed by
	// billing_date (see [StatusQuery]). Items that cannot be decoded are
	// reported in [Page.Invalid], not returned as an error: one bad item
	// never stops a run.
	QueryStatus(ctx context.Context, q StatusQuery) (Page, error)

	// Update replaces the record prev with next (the same user_id,
	// billing_date and subscription_id) and appends next's history row, in
	// one transaction conditional on the stored record still having prev's
	// billing_status, last_run_date and attempt (billing_attempt and
	// billing_attempt_number): a record made in flight since it was read is
	// never overwritten. The change prev → next must be allowed by
	// [CheckTransition] (the table of [canTransition], and a
	// cancelled period never attempted reopened, which may also take a new
	// subscription_id: [Repository.GetByID] then finds it by that ID), and
	// next.LastRunDate must be after prev.LastRunDate. When someone else wrote first (or the
	// record is gone) nothing is written and the error is a
	// [*ConflictError] wrapping [ErrConflict].
	//
	// Records in create (at most [MaxUpdateCreates]) are added in the same
	// transaction with their history rows, each key required to be free
	// (else [ErrAlreadyExists] and nothing is written): the collector
	// records an attempt and creates the next period's record at once.
	Update(ctx context.Context, prev, next *Period, create ...*Period) error

	// AdminUpdate is Update for changes of billing_date (the sort key): the
	// old item is deleted, the new one put (its key must be free) and the
	// history row appended, in one transaction conditional on prev as in
	// Update. With an unchanged billing_date it is Update.
	AdminUpdate(ctx context.Context, prev, next *Period) error

	// SetAttempt makes an attempt durable before the processor is called,
	// settles one that will never have an outcome, or withdraws one the
	// processor refused before acting on it (next is then the record as it
	// was before the attempt, its attempt count unchanged): it writes next's
	// LastAttempt and Attempt onto the stored record prev, and nothing
	// else. next must be prev with only those two fields changed (see
	// ValidateAttemptUpdate). It is one write conditional on the stored
	// record still having prev's billing_status, last_run_date, attempt
	// count and attempt number; it is not a status change and appends no
	// history row (the row that records the attempt's outcome carries the
	// attempt). When someone else wrote first the error is a
	// [*ConflictError] wrapping [ErrConflict].
	SetAttempt(ctx context.Context, prev, next *Period) error

	// AddAll writes many records (upgrades and downgrades) to the table and
	// their history rows. It first applies the collision policy (the
	// legacy rule unless the store is configured otherwise), so records
	// sharing a key get distinct ones, and returns the records as written.
	// A record replaces the stored record with its key, if any; each
	// record's write is conditional on what AddAll read at its key (no
	// record, or the stored record's billing_status, last_run_date and
	// attempt), together with its history row.
	//
	// History is append-only: a history row is never replaced. A record
	// whose history key (user_id, last_run_date) holds another row, as a
	// record read back and written again does, moves to the first free
	// last_run_date after it, a nanosecond at a time (within a
	// microsecond; else it is refused with a [*ConflictError] wrapping
	// [ErrAlreadyExists]), and its stored record takes that
	// last_run_date too, the version the engine's writes are conditional
	// on. A key holding the very row the record writes is its own write
	// of an earlier try: an identical retry of a batch writes nothing.
	// The records returned carry the last_run_dates written. A stored record in flight is
	// never overwritten, nor is one changed meanwhile (e.g. an attempt
	// made durable after the read) that the store cannot write on a fresh
	// read, nor one written after the copy the batch's record was made
	// from (its last_run_date later than the record's: collected since the
	// host read it, say, which the copy would make owed again): it is
	// named in the [*BatchError], which wraps [ErrAttemptInFlight] or
	// [ErrConflict]. Read such a record again. Every record is either written
	// exactly once with its history row, or named in
	// [BatchError.Unwritten].
	AddAll(ctx context.Context, subs []Period) ([]Period, error)
}

// StatusQuery selects one page of records in a status by billing_date.
// At most one of Since and After may be set; zero times are unbounded.
type StatusQuery struct {
	// Status is required.
	Status Status
	// Since keeps billing_date >= Since.
	Since time.Time
	// After keeps billing_date > After.
	After time.Time
	// Before keeps billing_date < Before.
	Before time.Time
	// Cursor continues a previous page ([Page.Next]); "" starts at the top.
	Cursor string
	// Limit is the number of items read (not returned) per page, as
	// DynamoDB's Limit. 0 uses the store's page size.
	Limit int
	// Shards narrows the query to records in these shards (see
	// [ShardedRepository]); empty reads every shard. A store that does not
	// shard has one shard, 0: any other shard is an [ErrInvalidQuery]. A
	// cursor continues the query with the same Shards only.
	Shards []int
}

// ShardedRepository is a [Repository] whose records are split into
// DueShards shards, numbered from 0, by user: every record of a user is in
// one shard, and a status query may read some shards only
// ([StatusQuery.Shards]). The collector uses it to run shards apart, in one
// process ([Config.ShardConcurrency]) or in many ([RunRequest.Shards]). A
// Repository that does not implement it has one shard.
type ShardedRepository interface {
	Repository
	// DueShards is the number of shards, at least 1.
	DueShards() int
}

// ShardsIn returns the shards q reads of a store with k shards (k < 1 is
// one shard): q.Shards ascending without repeats, or every shard when it
// names none. A shard outside [0, k) is an [ErrInvalidQuery]. Stores
// check a query's shards with it, as the collector checks a run's.
func (q StatusQuery) ShardsIn(k int) ([]int, error) { return shardList(q.Shards, k) }

func shardList(named []int, k int) ([]int, error) {
	k = max(k, 1)
	if len(named) == 0 {
		all := make([]int, k)
		for i := range all {
			all[i] = i
		}
		return all, nil
	}
	out := slices.Clone(named)
	slices.Sort(out)
	out = slices.Compact(out)
	if out[0] < 0 || out[len(out)-1] >= k {
		return nil, fmt.Errorf("%w: shards %v of a store with %d", ErrInvalidQuery, named, k)
	}
	return out, nil
}

// shardsOf is the number of shards of r.
func shardsOf(r Repository) int {
	if s, ok := r.(ShardedRepository); ok {
		return max(s.DueShards(), 1)
	}
	return 1
}

// Validate checks the query: a storable status, not both Since and After,
// a non-negative limit, and a non-empty range.
func (q StatusQuery) Validate() error {
	switch {
	case !q.Status.Storable():
		return fmt.Errorf("%w: status %q", ErrInvalidQuery, q.Status)
	case !q.Since.IsZero() && !q.After.IsZero():
		return fmt.Errorf("%w: both Since and After set", ErrInvalidQuery)
	case q.Limit < 0:
		return fmt.Errorf("%w: negative limit %d", ErrInvalidQuery, q.Limit)
	case slices.ContainsFunc(q.Shards, func(s int) bool { return s < 0 }):
		return fmt.Errorf("%w: negative shard in %v", ErrInvalidQuery, q.Shards)
	case !q.Before.IsZero() && !q.Since.IsZero() && !q.Since.Truncate(time.Second).Before(q.Before.Truncate(time.Second)):
		return fmt.Errorf("%w: empty billing_date range [%v, %v)", ErrInvalidQuery, q.Since, q.Before)
	case !q.Before.IsZero() && !q.After.IsZero() && !q.After.Truncate(time.Second).Add(time.Second).Before(q.Before.Truncate(time.Second)):
		return fmt.Errorf("%w: empty billing_date range (%v, %v)", ErrInvalidQuery, q.After, q.Before)
	}
	return nil
}

// Matches reports whether billingDate is inside the query's range. Stores
// use it to filter; it compares whole seconds, as stored.
func (q StatusQuery) Matches(billingDate time.Time) bool {
	d := billingDate.Truncate(time.Second)
	if !q.Since.IsZero() && d.Before(q.Since.Truncate(time.Second)) {
		return false
	}
	if !q.After.IsZero() && !d.After(q.After.Truncate(time.Second)) {
		return false
	}
	if !q.Before.IsZero() && !d.Before(q.Before.Truncate(time.Second)) {
		return false
	}
	return true
}

// Page is one page of a status query.
type Page struct {
	// Items are the decoded records of the page, in index order.
	Items []Period
	// Invalid holds one error per item of the page that could not be
	// decoded (a [*FieldError] naming the attribute and key).
	Invalid []error
	// Next continues the query; "" when there are no more pages. It is an
	// opaque URL-safe token, safe to put in a queue message.
	Next string
	// Scanned is the number of items read (DynamoDB's ScannedCount): what
	// the page cost.
	Scanned int
	// Count is the number of items that matched (DynamoDB's Count):
	// len(Items) + len(Invalid).
	Count int
}

type invalidItemsKey struct{}

// WithInvalidItems returns a copy of ctx in which the per-user reads of a
// store — [Repository.ListByUser], [Repository.Recent] and
// [History.ListByUser] — report to fn each stored item they skip because
// it does not decode (err is a [*FieldError] naming the attribute and the
// item's key). Such reads never fail for a bad item: they return the
// user's other records, so one item written by another program cannot stop
// a user's collections, listings or changes. But the [Collector] never
// takes such an item as absent when it decides whether a new period may
// be written: when what of it decodes (its billing date and status) leaves
// it possibly the next period, an open one or a paid one the change would
// bill again, the charge or change is refused with an error wrapping its
// [*FieldError] and [ErrInvalidItem] until it is repaired. It sets fn on
// every collection and change, counting the items in [Report.Invalid] and
// emitting an [EventInvalidRecord] for each.
func WithInvalidItems(ctx context.Context, fn func(ctx context.Context, err error)) context.Context {
	return context.WithValue(ctx, invalidItemsKey{}, invalidReporter(invalidFunc(fn)))
}

// invalidReporter is what a context carries under invalidItemsKey: the
// function of [WithInvalidItems], or a context of the collector's own
// that reports to itself (one allocation per record instead of a closure
// and a context each).
type invalidReporter interface {
	reportInvalidItem(ctx context.Context, err error)
}

// invalidFunc is the function [WithInvalidItems] was given.
type invalidFunc func(ctx context.Context, err error)

func (f invalidFunc) reportInvalidItem(ctx context.Context, err error) {
	if f != nil {
		f(ctx, err)
	}
}

// invalidReporterOf returns the reporter ctx carries, nil when none.
func invalidReporterOf(ctx context.Context) invalidReporter {
	r, _ := ctx.Value(invalidItemsKey{}).(invalidReporter)
	return r
}

// unreadable holds the records of a user that the per-user reads made
// with a context from [collectUnreadable] skipped because they do not
// decode. A check that decides whether a new period may be written cannot
// rule such a record out: it takes it for whatever its billing date and
// status, where they decode, allow (see [unreadable.refuse]).
type unreadable []*FieldError

// collectUnreadable returns ctx in which each item a per-user read skips
// is reported as before (to the function ctx carries) and added to the
// returned list.
func collectUnreadable(ctx context.Context) (context.Context, *unreadable) {
	c := &unreadableCtx{Context: ctx, report: invalidReporterOf(ctx)}
	return c, &c.u
}

// unreadableCtx is the context of [collectUnreadable]: its parent, with
// itself as the reporter of invalid items.
type unreadableCtx struct {
	context.Context
	report invalidReporter // the parent's, nil when none
	u      unreadable
}

// Value returns c itself for invalidItemsKey, else the parent's value.
func (c *unreadableCtx) Value(key any) any {
	if key == any(invalidItemsKey{}) {
		return invalidReporter(c)
	}
	return c.Context.Value(key)
}

func (c *unreadableCtx) reportInvalidItem(ctx context.Context, err error) {
	if c.report != nil {
		c.report.reportInvalidItem(ctx, err)
	}
	fe := &FieldError{}
	if !errors.As(err, &fe) {
		fe = &FieldError{Err: err} // neither date nor status known
	}
	c.u = append(c.u, fe)
}

// refuse returns an error wrapping the first unreadable record that may
// be what, by what of it decodes: match is given its billing date and
// status, zero and "" when unknown, and must answer true unless what is
// known rules it out. The error wraps the record's [*FieldError] and
// [ErrInvalidItem]: the record must be repaired (or removed) first.
func (u unreadable) refuse(what string, match func(date time.Time, status Status) bool) error {
	for _, fe := range u {
		if match(fe.BillingDate, fe.Status) {
			return fmt.Errorf("a record of the user that cannot be read may be %s; repair it first: %w", what, fe)
		}
	}
	return nil
}

// mayBeOpen matches a record that may be open (not terminal).
func mayBeOpen(_ time.Time, st Status) bool { return st == "" || !st.IsTerminal() }

// ReportInvalidItem is what a store calls for an item a per-user read
// skipped: it calls the function [WithInvalidItems] put in ctx, if any. The
// store logs the item too (with its key), so a host that sets nothing
// still sees it.
func ReportInvalidItem(ctx context.Context, err error) {
	if r := invalidReporterOf(ctx); r != nil {
		r.reportInvalidItem(ctx, err)
	}
}

// IsConflict reports whether err is a lost race ([ErrConflict] or
// [ErrAlreadyExists]) rather than a failure: the caller re-reads and
// decides again.
func IsConflict(err error) bool {
	return errors.Is(err, ErrConflict) || errors.Is(err, ErrAlreadyExists)
}
