package memory

import (
	"context"
	"errors"
	"fmt"
	"github.com/dynabill/billing/internal/storeconf"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/av"
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/internal/timefmt"
)

// Options configures an in-memory [Store]. The zero value is the
// legacy deployment: the hash-only status index, 100 items per status page
// and the default collision rule.
type Options struct {
	// PageSize is the number of items a status page reads when the query
	// sets no Limit (DynamoDB's Limit). Defaults to 100.
	PageSize int
	// StatusIndexMode selects the status index the store emulates, as
	// dynamostore.TableConfig does. Defaults to [StatusIndexLegacy].
	StatusIndexMode StatusIndexMode
	// DueShards splits the records into shards by user, as
	// dynamostore.TableConfig.DueShards does: status queries may read
	// some shards only, and in [StatusIndexDue] mode the
	// statuses runs read are read one shard a page, in billing_date order.
	// Defaults to 0: one shard.
	DueShards int
	// Collisions makes the keys of an AddAll batch distinct. Defaults to
	// the legacy rule: of the records of one user sharing a billing_date, the
	// SCHEDULED one (else the first) keeps the date and every other moves on
	// by whole hours; records sharing a last_run_date by nanoseconds. A
	// policy returns the records to write (copies) or an error.
	Collisions func(batch []billing.Period) ([]billing.Period, error)
	// Logger receives a warning for each item a per-user read (ListByUser,
	// Recent, History.ListByUser) skips because it does not decode.
	// Defaults to nil: not logged.
	Logger *slog.Logger
}

// defaultPageSize is the page size when StoreOptions.PageSize is 0.
const defaultPageSize = 100

// Table names accepted by [Store.Items] and [Store.PutRawItem].
const (
	SubscriptionsTable = storeconf.DefaultSubscriptionsTable
	HistoryTable       = storeconf.DefaultHistoryTable
)

// tableKey is an item's primary key: user_id and the sort key string
// (billing_date in the primary table, last_run_date in history).
type tableKey struct{ pk, sk string }

// Store is an in-memory stand-in for the billing-activity and
// billing-activity-history tables. It keeps items in their encoded form
// (EncodeItem, EncodeHistoryItem) keyed by their key
// strings, so key order, conditions and round trips are those of DynamoDB:
// transactional adds and updates with their conditions, overwriting batch
// writes, and status pages that read (and count) items like a Query on the
// status index with Limit, including opaque cursors and items that cannot
// be decoded. Records returned are copies. Safe for concurrent use.
//
// Its tables are indexed like the DynamoDB tables (see table): a lookup,
// a user's records or a status page costs the same however many records
// the store holds. Unlike DynamoDB its indexes are always up to date, and
// it never fails for capacity or network reasons.
type Store struct {
	opts Options

	// locks guard the tables: a user's items by the user's stripe (held
	// shared by readers while they decode, exclusively by writers while
	// they check and change them), the indexes by the index lock.
	locks   *locks
	primary *table
	history *table

	repo *Repository
	hist *History

	// totals are the day totals of the records' outcomes.
	totals totals

	// severalOpen lets Add store a user's second open record: the
	// single table's periods, where an account has several
	// subscriptions.
	severalOpen bool
}

// Repository is the [billing.Repository] of a [Store].
type Repository struct{ s *Store }

// History is the [billing.History] of a [Store].
type History struct{ s *Store }

var (
	_ billing.Repository = (*Repository)(nil)
	_ billing.History    = (*History)(nil)
)

// New returns an empty store. Options out of range are an error naming
// the field: a negative PageSize, an unknown StatusIndexMode, DueShards
// outside 0..[MaxDueShards], or [StatusIndexDue]
// without DueShards.
func New(opts Options) (*Store, error) {
	switch {
	case opts.PageSize < 0:
		return nil, fmt.Errorf("memory: Options.PageSize: negative %d", opts.PageSize)
	case opts.StatusIndexMode < StatusIndexLegacy || opts.StatusIndexMode > StatusIndexDue:
		return nil, fmt.Errorf("memory: Options.StatusIndexMode: unknown %v", opts.StatusIndexMode)
	case opts.DueShards < 0 || opts.DueShards > MaxDueShards:
		return nil, fmt.Errorf("memory: Options.DueShards: %d outside 0..%d", opts.DueShards, MaxDueShards)
	case opts.StatusIndexMode == StatusIndexDue && opts.DueShards == 0:
		return nil, fmt.Errorf("memory: Options.StatusIndexMode: %v needs DueShards", opts.StatusIndexMode)
	}
	if opts.PageSize == 0 {
		opts.PageSize = defaultPageSize
	}
	if opts.Collisions == nil {
		opts.Collisions = layout.DefaultCollisionPolicy
	}
	l := newLocks()
	dueShards := 0
	if opts.StatusIndexMode == StatusIndexDue {
		dueShards = opts.DueShards
	}
	s := &Store{opts: opts, locks: l, primary: newTable(l, true, opts.StatusIndexMode != StatusIndexLegacy, dueShards), history: newTable(l, false, false, 0)}
	s.repo = &Repository{s: s}
	s.hist = &History{s: s}
	return s, nil
}

// Repository returns the store's billing-activity table.
func (s *Store) Repository() *Repository { return s.repo }

// History returns the store's billing-activity-history table.
func (s *Store) History() *History { return s.hist }

// Items returns the number of items in a table: [SubscriptionsTable] or
// [HistoryTable]. It panics on another name.
func (s *Store) Items(tableName string) int {
	return s.table(tableName).count()
}

// PutRawItem writes item unchanged (a copy) to a table, overwriting any
// item with its key, as a PutItem by another service would: the way to
// store items this library would not write, such as undecodable ones. The
// item needs its key attributes as non-empty strings (user_id, and
// billing_date or last_run_date); other attributes are not checked.
func (s *Store) PutRawItem(tableName string, item map[string]AttributeValue) error {
	skName := layout.AttrBillingDate
	switch tableName {
	case SubscriptionsTable:
	case HistoryTable:
		skName = layout.AttrLastRunDate
	default:
		return fmt.Errorf("memory: PutRawItem: unknown table %q (want %q or %q)", tableName, SubscriptionsTable, HistoryTable)
	}
	pk, sk := stringAttr(item, layout.AttrUserID), stringAttr(item, skName)
	if pk == "" || sk == "" {
		return fmt.Errorf("memory: PutRawItem: %s needs %s and %s as non-empty strings", tableName, layout.AttrUserID, skName)
	}
	t, user := s.table(tableName), s.locks.of(pk)
	s.locks.lock(user)
	defer s.locks.unlock(user)
	t.put(tableKey{pk, sk}, cloneItem(item))
	return nil
}

func (s *Store) table(name string) *table {
	switch name {
	case SubscriptionsTable:
		return s.primary
	case HistoryTable:
		return s.history
	}
	panic(fmt.Sprintf("memory: unknown table %q (want %q or %q)", name, SubscriptionsTable, HistoryTable))
}

// Add implements [billing.Repository.Add] as dynamostore.Repository.Add
// does on the legacy tables: a new SCHEDULED or PAUSED record of a user
// who has one already is refused with a [*billing.OpenSubscriptionError].
// The check and the write are made under the user's lock, so the race
// the DynamoDB store documents does not happen here.
func (r *Repository) Add(ctx context.Context, sub *billing.Period) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f := layout.NewFlat()
	defer f.Release()
	if err := f.EncodeRecord(sub); err != nil {
		return err
	}
	item, hitem := storedItems(f)
	pk, hk := primaryKey(item), historyKey(hitem)
	s := r.s
	user := s.locks.of(sub.UserID)
	s.locks.lock(user)
	defer s.locks.unlock(user)
	exists := func(reason string, history bool) error {
		return &billing.ConflictError{Op: "add", Key: sub.Key(), Reason: reason, Err: billing.ErrAlreadyExists, HistoryRow: history}
	}
	if s.primary.has(pk) {
		return exists("record exists", false)
	}
	if err := s.openRecord(sub); err != nil {
		return err
	}
	if s.history.has(hk) {
		return exists("history row exists", true)
	}
	s.primary.put(pk, item)
	s.history.put(hk, hitem)
	s.totals.count(nil, sub)
	return nil
}

// openRecord returns the *billing.OpenSubscriptionError of adding sub
// when sub is open (SCHEDULED or PAUSED) and its user has an open record
// already, else nil. The caller holds the user's lock.
func (s *Store) openRecord(sub *billing.Period) error {
	if s.severalOpen || !layout.OpenStatus(sub.Status) {
		return nil
	}
	p := s.primary.partitionOf(sub.UserID)
	if p == nil {
		return nil
	}
	for _, e := range p.recs {
		if st := billing.Status(e.str(layout.AttrBillingStatus)); layout.OpenStatus(st) {
			return &billing.OpenSubscriptionError{UserID: sub.UserID, New: sub.Key(), Open: recordKey(sub.UserID, e.sk), Status: st}
		}
	}
	return nil
}

// Get implements [billing.Repository.Get].
func (r *Repository) Get(ctx context.Context, userID string, billingDate time.Time) (billing.Period, error) {
	if err := ctx.Err(); err != nil {
		return billing.Period{}, err
	}
	var buf [32]byte
	bd, err := timefmt.AppendSeconds(buf[:0], billingDate)
	if err != nil || billingDate.IsZero() || userID == "" {
		return billing.Period{}, fmt.Errorf("memory: get user_id=%q billing_date=%v: %w: not a key", userID, billingDate, billing.ErrInvalidDate)
	}
	user := r.s.locks.of(userID)
	r.s.locks.rlock(user)
	defer r.s.locks.runlock(user)
	item, ok := r.s.primary.getBytes(userID, bd)
	if !ok {
		return billing.Period{}, fmt.Errorf("%w: user_id=%s billing_date=%s", billing.ErrNotFound, userID, bd)
	}
	return decodeItem(item)
}

// GetByID implements [billing.Repository.GetByID]. Should several records
// share the ID, the one with the smallest key is returned.
func (r *Repository) GetByID(ctx context.Context, subscriptionID string) (billing.Period, error) {
	if err := ctx.Err(); err != nil {
		return billing.Period{}, err
	}
	r.s.locks.rlock(allStripes)
	defer r.s.locks.runlock(allStripes)
	found := r.s.primary.withSub(subscriptionID)
	if len(found) == 0 {
		return billing.Period{}, fmt.Errorf("%w: subscription_id=%s", billing.ErrNotFound, subscriptionID)
	}
	sortByKey(found, false)
	return decodeItem(found[0].item)
}

// ListByUser implements [billing.Repository.ListByUser]: items that do not
// decode are skipped and reported (see [billing.WithInvalidItems]).
func (r *Repository) ListByUser(ctx context.Context, userID string) ([]billing.Period, error) {
	subs, invalid, err := r.s.listUser(ctx, r.s.primary, userID, false, 0)
	r.s.skipItems(ctx, "list user ", userID, invalid)
	return subs, err
}

// Recent implements [billing.Repository.Recent]: items that do not decode
// are skipped and reported (see [billing.WithInvalidItems]), and do not
// count in limit.
func (r *Repository) Recent(ctx context.Context, userID string, limit int) ([]billing.Period, error) {
	if limit <= 0 {
		limit = 10
	}
	subs, invalid, err := r.s.listUser(ctx, r.s.primary, userID, true, limit)
	r.s.skipItems(ctx, "recent of user ", userID, invalid)
	return subs, err
}

// Update implements [billing.Repository.Update].
func (r *Repository) Update(ctx context.Context, prev, next *billing.Period, create ...*billing.Period) error {
	return r.s.update(ctx, "update", prev, next, false, create)
}

// AdminUpdate implements [billing.Repository.AdminUpdate].
func (r *Repository) AdminUpdate(ctx context.Context, prev, next *billing.Period) error {
	return r.s.update(ctx, "admin update", prev, next, true, nil)
}

// SetAttempt implements [billing.Repository.SetAttempt].
func (r *Repository) SetAttempt(ctx context.Context, prev, next *billing.Period) error {
	return r.s.setAttempt(ctx, prev, next)
}

// setAttempt writes next's attempt attributes on the stored record,
// conditional on prev; no history row.
func (s *Store) setAttempt(ctx context.Context, prev, next *billing.Period) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if prev == nil || next == nil {
		return errors.New("memory: set attempt: nil record")
	}
	before, enc := layout.NewFlat(), layout.NewFlat()
	defer before.Release()
	defer enc.Release()
	if err := layout.EncodeAttemptUpdate(prev, next, before, enc); err != nil {
		return err
	}
	// Only the attempt differs between the two encodings (validated):
	// written back as DynamoDB's UpdateItem does, only the attempt
	// attributes change and every other stored form stays. The change and
	// its values are made before the lock, which covers only the writes.
	var diff layout.Diff
	diff.Make(before, enc, nil, cloneValue, false)
	key := tableKey{prev.UserID, layout.BillingDateKey(prev)}
	user := s.locks.of(prev.UserID)
	s.locks.lock(user)
	defer s.locks.unlock(user)
	cur, ok := s.primary.get(key)
	if !ok || !fenceHolds(cur, prev) {
		return &billing.ConflictError{Op: "set attempt", Key: prev.Key(), Reason: "record gone, or status, last_run_date or attempt changed", Err: billing.ErrConflict}
	}
	s.primary.update(key, diff.Apply)
	return nil
}

// update is one transaction: a condition on the stored record (prev's
// status and last_run_date), the new key free when it moves, the history
// row free; then delete, put and history put. Any failed condition is a
// *ConflictError wrapping ErrConflict, a taken history row included.
func (s *Store) update(ctx context.Context, op string, prev, next *billing.Period, dateChange bool, create []*billing.Period) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if prev == nil || next == nil {
		return fmt.Errorf("memory: %s: nil record", op)
	}
	if err := layout.ValidateUpdate(prev, next, dateChange); err != nil {
		return err
	}
	enc := layout.NewFlat()
	defer enc.Release()
	if err := enc.EncodeRecord(next); err != nil {
		return err
	}
	if len(create) > billing.MaxUpdateCreates {
		return fmt.Errorf("memory: %s: %d records to create, at most %d", op, len(create), billing.MaxUpdateCreates)
	}
	type created struct {
		item      map[string]av.AttributeValue
		hrow      *layout.Row
		key, hkey tableKey
	}
	var room [billing.MaxUpdateCreates]created
	adds := room[:0]
	if len(create) > 0 {
		cf := layout.NewFlat()
		defer cf.Release()
		for _, c := range create {
			if err := cf.EncodeRecord(c); err != nil {
				return err
			}
			ci, ch := cf.ItemAndRow(primaryRoom, cloneValue)
			adds = append(adds, created{ci, ch, primaryKey(ci), rowKey(ch)})
		}
	}
	// The history row is a new item, kept as a row (history rows are
	// written once and seldom read); the record's changed attributes share
	// its values. Everything is built before the lock, which covers only
	// the checks and the writes.
	hrow := enc.HistoryRow(cloneValue)
	oldKey := tableKey{prev.UserID, layout.BillingDateKey(prev)}
	newKey := tableKey{hrow.String(layout.AttrUserID), hrow.String(layout.AttrBillingDate)}
	hk := rowKey(hrow)
	var (
		diff      layout.Diff
		beforeErr error // reported after the conditions, as it was found
		newItem   map[string]av.AttributeValue
	)
	if newKey == oldKey {
		// An update of the item in place, as DynamoDB's write-back: only
		// the attributes whose encoding changes are written, so unknown
		// ones (a reminder's claim) and stored forms stay.
		before := layout.NewFlat()
		defer before.Release()
		if beforeErr = before.Encode(prev, false); beforeErr == nil {
			diff.Make(before, enc, hrow, cloneValue, true)
		}
	} else {
		newItem = hrow.Primary(max(enc.Len(false), primaryRoom))
	}
	conflict := func(key, reason string) error {
		return &billing.ConflictError{Op: op, Key: key, Reason: reason, Err: billing.ErrConflict}
	}
	// The transaction's users: prev's (next's and its history row's, the
	// same) and those of the records to create.
	users := s.locks.of(prev.UserID)
	for _, a := range adds {
		users |= s.locks.of(a.key.pk)
	}
	s.locks.lock(users)
	defer s.locks.unlock(users)
	cur, ok := s.primary.get(oldKey)
	switch {
	case !ok:
		return conflict(prev.Key(), "record does not exist")
	case !fenceHolds(cur, prev):
		return conflict(prev.Key(), "status, last_run_date or attempt changed")
	}
	if newKey != oldKey && s.primary.has(newKey) {
		return &billing.ConflictError{Op: op, Key: next.Key(), Reason: "new billing_date taken", Err: billing.ErrConflict, Taken: true}
	}
	if s.history.has(hk) {
		return &billing.ConflictError{Op: op, Key: next.Key(), Reason: "history row exists", Err: billing.ErrConflict, HistoryRow: true}
	}
	for i, a := range adds {
		usedP := a.key == newKey || a.key == oldKey
		usedH := a.hkey == hk
		for _, b := range adds[:i] {
			usedP = usedP || b.key == a.key
			usedH = usedH || b.hkey == a.hkey
		}
		if usedP || s.primary.has(a.key) {
			return &billing.ConflictError{Op: op, Key: create[i].Key(), Reason: "a record to create exists", Err: billing.ErrAlreadyExists}
		}
		if usedH || s.history.has(a.hkey) {
			return &billing.ConflictError{Op: op, Key: create[i].Key(), Reason: "a history row of a record to create exists", Err: billing.ErrAlreadyExists, HistoryRow: true}
		}
	}
	if beforeErr != nil {
		return beforeErr
	}
	if newKey == oldKey {
		s.primary.update(oldKey, diff.Apply)
	} else {
		s.primary.del(oldKey)
		s.primary.put(newKey, newItem)
	}
	s.history.putRow(hk, hrow)
	s.totals.count(prev, next)
	for i, a := range adds {
		s.primary.put(a.key, a.item)
		s.history.putRow(a.hkey, a.hrow)
		s.totals.count(nil, create[i])
	}
	return nil
}

// AddAll implements [billing.Repository.AddAll]. It resolves collisions
// with the store's policy; a batch that still holds one key twice, or a
// record that does not encode, writes nothing and the error is a
// *billing.BatchError naming every record. Otherwise it reads and writes
// under the lock of every user, so nothing changes between its read of a
// key and its write: every record and its history row is written, except
// over a stored record in flight, which is named in the
// *billing.BatchError (wrapping [billing.ErrAttemptInFlight]). History
// rows are placed as [layout.PlanHistoryRows] says: never over another
// row. A record
// replacing a stored one carries the stored one's attempt and reminder
// claim unless it sets them itself, as the DynamoDB stores do (see
// dynamostore.Repository.AddAll).
func (r *Repository) AddAll(ctx context.Context, subs []billing.Period) ([]billing.Period, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(subs) == 0 {
		return nil, nil
	}
	out, err := r.s.opts.Collisions(subs)
	if err != nil {
		return nil, batchError(subs, err)
	}
	items := make([]map[string]av.AttributeValue, len(out))
	hitems := make([]map[string]av.AttributeValue, len(out))
	pks, hks := map[tableKey]bool{}, map[tableKey]bool{}
	f := layout.NewFlat()
	defer f.Release()
	for i := range out {
		if err := f.EncodeRecord(&out[i]); err != nil {
			return nil, batchError(out, fmt.Errorf("record %d: %w", i, err))
		}
		items[i], hitems[i] = storedItems(f)
		pk, hk := primaryKey(items[i]), historyKey(hitems[i])
		if pks[pk] || hks[hk] {
			// BatchWriteItem rejects a batch holding one key twice.
			return nil, batchError(out, fmt.Errorf("record %d (%s): %w: key twice in one batch after the collision policy", i, out[i].Key(), billing.ErrAlreadyExists))
		}
		pks[pk], hks[hk] = true, true
	}
	r.s.locks.lock(allStripes)
	defer r.s.locks.unlock(allStripes)
	plans, err := r.s.planRows(out)
	if err != nil {
		return nil, batchError(out, err)
	}
	be := &billing.BatchError{}
	for i := range out {
		cur, ok := r.s.primary.get(primaryKey(items[i]))
		if ok && itemInFlight(cur) {
			// A record whose charge may have happened is not overwritten.
			be.Unwritten = append(be.Unwritten, out[i].Key())
			be.Err = errors.Join(be.Err, &billing.ConflictError{Op: "add all", Key: out[i].Key(),
				Reason: "the record is in flight: not overwritten", Err: billing.ErrAttemptInFlight})
			continue
		}
		p := plans[i]
		if p.Err == nil && ok && !p.RowStored && layout.ChangedSince(cur, out[i].LastRunDate) {
			p.Err = layout.StaleCopyError(&out[i])
		}
		if p.Err != nil {
			be.Unwritten = append(be.Unwritten, out[i].Key())
			be.Err = errors.Join(be.Err, p.Err)
			continue
		}
		if p.Moved {
			out[i].LastRunDate = p.LastRunDate
			_ = f.EncodeRecord(&out[i]) // it encoded at its own last_run_date
			items[i], hitems[i] = storedItems(f)
		}
		if p.RowStored && ok && layout.WrittenSince(cur, p.LastRunDate) {
			continue // written by an earlier try, and maybe changed since: nothing to do
		}
		if ok {
			layout.CarryOwned(items[i], hitems[i], cloneItem(cur))
			layout.CarryProration(items[i], hitems[i], cloneItem(cur))
			layout.CarryDunning(items[i], hitems[i], cloneItem(cur))
		}
		r.s.primary.put(primaryKey(items[i]), items[i])
		if !p.RowStored {
			r.s.history.put(historyKey(hitems[i]), hitems[i])
		}
	}
	written := make([]billing.Period, len(out))
	for i := range out {
		written[i] = out[i].Clone()
	}
	if len(be.Unwritten) > 0 {
		return written, be
	}
	return written, nil
}

// planRows places the history rows of a batch of AddAll (see
// [layout.PlanHistoryRows]) over the rows stored: no row is replaced.
// The caller holds every lock.
func (s *Store) planRows(out []billing.Period) ([]layout.RowPlan, error) {
	f := layout.NewFlat()
	defer f.Release()
	return layout.PlanHistoryRows(out, func(i int, key string) (map[string]av.AttributeValue, bool) {
		return s.history.get(tableKey{out[i].UserID, key})
	}, func(i int, at time.Time) (map[string]av.AttributeValue, error) {
		rec := out[i].Clone()
		rec.LastRunDate = at
		if err := f.EncodeRecord(&rec); err != nil {
			return nil, err
		}
		item, hitem := storedItems(f)
		if cur, ok := s.primary.get(primaryKey(item)); ok {
			layout.CarryOwned(item, hitem, cur)
			layout.CarryProration(item, hitem, cur)
			layout.CarryDunning(item, hitem, cur)
		}
		return hitem, nil
	})
}

// itemInFlight reports whether a stored item carries an attempt whose
// outcome is not recorded ([billing.Period.InFlight]).
func itemInFlight(item map[string]av.AttributeValue) bool { return layout.ItemInFlight(item) }

// inFlightAt reports whether the stored record at userID and billingDate
// (as stored) is in flight.
// changedSinceAt reports whether the record stored at (userID,
// billingDate) was written after at ([layout.ChangedSince]).
func (s *Store) changedSinceAt(userID, billingDate string, at time.Time) bool {
	user := s.locks.of(userID)
	s.locks.rlock(user)
	defer s.locks.runlock(user)
	cur, ok := s.primary.get(tableKey{userID, billingDate})
	return ok && layout.ChangedSince(cur, at)
}

func (s *Store) inFlightAt(userID, billingDate string) bool {
	user := s.locks.of(userID)
	s.locks.rlock(user)
	defer s.locks.runlock(user)
	cur, ok := s.primary.get(tableKey{userID, billingDate})
	return ok && itemInFlight(cur)
}

// storedItems builds the items of a record encoded by EncodeRecord: its
// primary item and its history row. They share their attribute values,
// which the record does not (its Extra and data_ values are copied).
func storedItems(f *layout.Flat) (item, hitem map[string]av.AttributeValue) {
	item, row := f.ItemAndRow(primaryRoom, cloneValue)
	return item, row.Item()
}

// primaryRoom is the room a new primary item has: the attributes of a
// record with its attempt and outcome, which write-backs add to a new
// period's item, so that they do not grow its map.
const primaryRoom = 24

// decodeItem decodes a stored item, which the caller holds the lock
// for. The record shares only strings with the item: its Extra and data_
// attributes are copies.
func decodeItem(item map[string]av.AttributeValue) (billing.Period, error) {
	sub, err := layout.DecodeItem(item)
	if err != nil {
		return sub, err
	}
	if x := layout.ExtraAttributes(&sub); len(x) > 0 {
		layout.SetExtraAttributes(&sub, cloneItem(x))
	}
	if d := layout.DataAttributes(&sub); len(d) > 0 {
		layout.SetDataAttributes(&sub, cloneItem(d))
	}
	return sub, nil
}

func batchError(subs []billing.Period, err error) error {
	keys := make([]string, len(subs))
	for i := range subs {
		keys[i] = subs[i].Key()
	}
	return &billing.BatchError{Unwritten: keys, Err: err}
}

func primaryKey(item map[string]av.AttributeValue) tableKey {
	return tableKey{stringAttr(item, layout.AttrUserID), stringAttr(item, layout.AttrBillingDate)}
}

func historyKey(item map[string]av.AttributeValue) tableKey {
	return tableKey{stringAttr(item, layout.AttrUserID), stringAttr(item, layout.AttrLastRunDate)}
}

// rowKey is historyKey of a history row kept as a row.
func rowKey(r *layout.Row) tableKey {
	return tableKey{r.String(layout.AttrUserID), r.String(layout.AttrLastRunDate)}
}

// stringAttr returns an S attribute's value, "" when absent or not S.
func stringAttr(item map[string]av.AttributeValue, name string) string {
	if v, ok := item[name].(*av.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// fenceHolds is the condition of every update of prev: the stored item
// still has prev's status, last_run_date and attempt numbers.
func fenceHolds(cur map[string]av.AttributeValue, prev *billing.Period) bool {
	num := func(name string, want int) bool {
		v, ok := cur[name].(*av.AttributeValueMemberN)
		if !ok {
			return want == 0 && cur[name] == nil
		}
		return v.Value == strconv.Itoa(want)
	}
	return attrIs(cur, layout.AttrBillingStatus, string(prev.Status)) && attrIs(cur, layout.AttrLastRunDate, layout.LastRunDateKey(prev)) &&
		num(layout.AttrAttempt, prev.Attempt) && num(layout.AttrAttemptNumber, prev.LastAttempt.Number)
}

// attrIs is a condition: attribute = want, or attribute_not_exists when
// want is "".
func attrIs(item map[string]av.AttributeValue, name, want string) bool {
	v, ok := item[name]
	if want == "" {
		return !ok
	}
	s, isS := v.(*av.AttributeValueMemberS)
	return isS && s.Value == want
}

// listUser queries one partition of t by sort key string, ascending or
// descending, stopping after limit records when limit > 0. An item that
// does not decode is skipped and does not count in limit: its error is in
// invalid, for the caller to report once it holds no lock (skipItems), as
// the DynamoDB store reads on past an item it cannot decode.
func (s *Store) listUser(ctx context.Context, t *table, userID string, desc bool, limit int) (out []billing.Period, invalid []error, err error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	user := s.locks.of(userID)
	s.locks.rlock(user)
	defer s.locks.runlock(user)
	var recs []entry
	if p := t.partitionOf(userID); p != nil {
		recs = p.recs
	}
	n := len(recs)
	if limit > 0 && n > limit {
		n = limit
	}
	out = make([]billing.Period, 0, n)
	for i := range recs {
		if limit > 0 && len(out) == limit {
			break
		}
		j := i
		if desc {
			j = len(recs) - 1 - i
		}
		sub, err := decodeItem(recs[j].view())
		if err != nil {
			invalid = append(invalid, err)
			continue
		}
		out = append(out, sub)
	}
	return out, invalid, nil
}

// skipItems logs and reports the items a per-user read of userID skipped
// (see [layout.SkipItem]), naming the read op followed by the user ID: a
// name built only when there are some. The caller holds no lock.
func (s *Store) skipItems(ctx context.Context, op, userID string, invalid []error) {
	if len(invalid) == 0 {
		return
	}
	op += userID
	for _, err := range invalid {
		layout.SkipItem(ctx, s.opts.Logger, op, err)
	}
}

// decodeAll decodes items in order; the first that fails is the error.
// The caller holds the lock.
func decodeAll(items []keyedItem) ([]billing.Period, error) {
	out := make([]billing.Period, 0, len(items))
	for _, ki := range items {
		sub, err := decodeItem(ki.item)
		if err != nil {
			return nil, err
		}
		out = append(out, sub)
	}
	return out, nil
}

// cloneItem deep-copies an item, so that neither the store nor a caller
// shares attribute values with the other.
func cloneItem(item map[string]av.AttributeValue) map[string]av.AttributeValue {
	if item == nil {
		return nil
	}
	out := make(map[string]av.AttributeValue, len(item))
	for k, v := range item {
		out[k] = cloneValue(v)
	}
	return out
}

func cloneValue(v av.AttributeValue) av.AttributeValue {
	switch v := v.(type) {
	case *av.AttributeValueMemberS:
		return &av.AttributeValueMemberS{Value: v.Value}
	case *av.AttributeValueMemberN:
		return &av.AttributeValueMemberN{Value: v.Value}
	case *av.AttributeValueMemberBOOL:
		return &av.AttributeValueMemberBOOL{Value: v.Value}
	case *av.AttributeValueMemberNULL:
		return &av.AttributeValueMemberNULL{Value: v.Value}
	case *av.AttributeValueMemberB:
		return &av.AttributeValueMemberB{Value: slices.Clone(v.Value)}
	case *av.AttributeValueMemberSS:
		return &av.AttributeValueMemberSS{Value: slices.Clone(v.Value)}
	case *av.AttributeValueMemberNS:
		return &av.AttributeValueMemberNS{Value: slices.Clone(v.Value)}
	case *av.AttributeValueMemberBS:
		bs := make([][]byte, len(v.Value))
		for i, b := range v.Value {
			bs[i] = slices.Clone(b)
		}
		return &av.AttributeValueMemberBS{Value: bs}
	case *av.AttributeValueMemberL:
		l := make([]av.AttributeValue, len(v.Value))
		for i, e := range v.Value {
			l[i] = cloneValue(e)
		}
		return &av.AttributeValueMemberL{Value: l}
	case *av.AttributeValueMemberM:
		return &av.AttributeValueMemberM{Value: cloneItem(v.Value)}
	}
	return v
}
