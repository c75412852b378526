package memory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/entitlement"
	"github.com/dynabill/billing/internal/av"
	"github.com/dynabill/billing/internal/cursor"
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/internal/timefmt"
)

// SingleTableOptions configures NewSingleTable; zero values are defaults.
type SingleTableOptions struct {
	// Clock gives "now" for the subscription items' UpdatedAt, receipts'
	// expiry and the open end of status queries. Defaults to a [billing.Clock]
	// that always reads 2024-01-01T00:00:00Z, so that a model built without
	// one is deterministic; pass billing.SystemClock{} for wall time.
	Clock billing.Clock
	// PageSize is the number of index items a status page reads when the
	// query sets no Limit. Defaults to 100.
	PageSize int
	// CatchUpDays is how many days before a status query's range the walk
	// over the payment index starts. Defaults to
	// DefaultCatchUpDays.
	CatchUpDays int
	// ReminderLeadDays is how many days before a SCHEDULED period's day
	// NextReminderDate falls. Defaults to [billing.NoticeLeadDays].
	ReminderLeadDays int
	// ReceiptRetention is how long after its processed date a receipt
	// expires. Defaults to DefaultReceiptRetention.
	ReceiptRetention time.Duration
	// Collisions resolves duplicate keys in AddAll. Defaults to
	// the legacy rule: of the records of one user sharing a billing_date, the
	// SCHEDULED one (else the first) keeps the date and every other moves on
	// by whole hours; records sharing a last_run_date by nanoseconds. A
	// policy returns the records to write (copies) or an error.
	Collisions func(batch []billing.Period) ([]billing.Period, error)
	// Table sets the account prefix, index names and TTL attribute used in
	// keys, errors and cursors, and the due shards, as
	// dynamostore.SingleTableStoreConfig.Table does: with DueShards,
	// status queries read the sharded due index (one shard a page) instead
	// of walking the payment index. Defaults to
	// [SingleTableConfig]'s defaults.
	Table SingleTableConfig
	// DueIndexPending keeps status queries on the payment-index walk with
	// Table.DueShards, as dynamostore.SingleTableStoreConfig.DueIndexPending
	// does. Defaults to false.
	DueIndexPending bool
	// Logger receives a warning for each item a per-user read (ListByUser,
	// Recent, History.ListByUser) skips because it does not decode.
	// Defaults to nil: not logged.
	Logger *slog.Logger
}

// stMaxEmptyDays bounds the days of the payment index one status page
// walks without finding anything, as dynamostore.SingleTableRepository
// does.
const stMaxEmptyDays = 62

// stCursorDay is the attribute of a status cursor naming the day of the
// payment index the walk is at.
const stCursorDay = "day"

// SingleTable is the in-memory twin of dynamostore.SingleTableRepository:
// the collection engine's periods, history rows and period-ID pointers,
// and the subscription items and receipts of the same single table,
// which its [SingleTable.Payments] view reads and writes. It behaves like
// the DynamoDB store: the same validation and errors (conflict reasons
// are worded as [Store] words them), every period write updating the
// subscription item (open periods, due dates, amount, version) and
// writing a receipt when it completes a period (moved on by a nanosecond
// when another receipt of the SKU holds its key), all or nothing, AddAll
// in groups of up to 8 records of one subscription, and status queries
// that walk the payment index day by day with opaque cursors bound to
// their query. It shares the item codec and the index walk with the
// DynamoDB store.
//
// One mutex serializes every operation of the three views, and a write
// computes and checks everything that could fail (subscription item,
// receipt key, conditions) before it changes anything, so each write is
// atomic for every reader, as a DynamoDB transaction is. Unlike DynamoDB
// its indexes are exactly consistent, and it never deletes expired
// receipts. Safe for concurrent use.
type SingleTable struct {
	clock      billing.Clock
	table      layout.SingleTableConfig
	pageSize   int
	catchUp    int
	leadDays   int
	collisions layout.CollisionPolicy
	duePending bool

	mu      sync.Mutex
	periods *Store    // periods (primary) and history rows, by engine user ID
	pay     *Payments // subscription items and receipts
	// open is the OpenPeriods attribute of each subscription item the
	// engine wrote, by engine user ID (Payments items carry only the
	// attributes of a RecurringSubscription).
	open map[string]layout.OpenPeriods
	// pointers are the period-ID pointers: subscription_id → engine user
	// ID → billing_date key.
	pointers map[string]map[string]string
}

// NewSingleTable returns an empty single table. Options the DynamoDB
// store rejects are an error naming the field, as
// dynamostore.NewSingleTableRepository returns them: a negative
// PageSize, CatchUpDays or ReminderLeadDays, a Table its config check
// rejects, an account prefix that clashes with the period ID pointers'
// prefix, or a negative ReceiptRetention.
func NewSingleTable(opts SingleTableOptions) (*SingleTable, error) {
	switch {
	case opts.PageSize < 0:
		return nil, fmt.Errorf("memory: SingleTableOptions.PageSize: negative %d", opts.PageSize)
	case opts.CatchUpDays < 0:
		return nil, fmt.Errorf("memory: SingleTableOptions.CatchUpDays: negative %d", opts.CatchUpDays)
	case opts.ReminderLeadDays < 0:
		return nil, fmt.Errorf("memory: SingleTableOptions.ReminderLeadDays: negative %d", opts.ReminderLeadDays)
	case opts.ReceiptRetention < 0:
		return nil, fmt.Errorf("memory: SingleTableOptions.ReceiptRetention: negative %v", opts.ReceiptRetention)
	}
	table := layout.SingleTableConfig(opts.Table).WithDefaults()
	if err := table.Validate(); err != nil {
		return nil, fmt.Errorf("memory: SingleTableOptions.Table: %w", err)
	}
	if err := table.CheckEngine("memory: SingleTableOptions.Table"); err != nil {
		return nil, err
	}
	if opts.Clock == nil {
		opts.Clock = billing.ClockFunc(func() time.Time { return time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC) })
	}
	pay, err := NewPayments(PaymentsOptions{Table: SingleTableConfig(table), Clock: opts.Clock, ReceiptRetention: opts.ReceiptRetention})
	if err != nil {
		return nil, fmt.Errorf("memory: SingleTableOptions: %w", err)
	}
	if opts.PageSize == 0 {
		opts.PageSize = defaultPageSize
	}
	if opts.CatchUpDays == 0 {
		opts.CatchUpDays = layout.DefaultCatchUpDays
	}
	if opts.ReminderLeadDays == 0 {
		opts.ReminderLeadDays = billing.NoticeLeadDays
	}
	if opts.Collisions == nil {
		opts.Collisions = layout.DefaultCollisionPolicy
	}
	// The inner store writes what it is given: the collision policy is
	// applied here, before records are grouped like the DynamoDB store's
	// transactions.
	keep := func(subs []billing.Period) ([]billing.Period, error) { return subs, nil }
	// An account has several subscriptions: several open periods of one
	// engine user are the table's to keep, not refused.
	periods, err := New(periodOptions(table, opts, keep))
	if err != nil {
		return nil, fmt.Errorf("memory: SingleTableOptions: %w", err)
	}
	periods.severalOpen = true
	return &SingleTable{
		clock: opts.Clock, table: table, pageSize: opts.PageSize, catchUp: opts.CatchUpDays,
		leadDays: opts.ReminderLeadDays, collisions: opts.Collisions, duePending: opts.DueIndexPending,
		periods: periods, pay: pay,
		open: map[string]layout.OpenPeriods{}, pointers: map[string]map[string]string{},
	}, nil
}

// Repository returns the engine's [billing.Repository] on the table, as
// dynamostore.SingleTableRepository implements it.
func (s *SingleTable) Repository() billing.Repository { return (*stRepository)(s) }

// History returns the engine's history rows in the table, as
// dynamostore.SingleTableRepository.History implements [billing.History].
func (s *SingleTable) History() billing.History { return (*stHistory)(s) }

// Payments returns the [Payments] view of the table, as
// dynamostore.SingleTableRepository.Payments: the subscription items the
// engine maintains and its receipts.
func (s *SingleTable) Payments() entitlement.Payments { return (*stPayments)(s) }

// PutRawItem writes item unchanged (a copy) as a period
// ([SubscriptionsTable]) or a history row ([HistoryTable]), as a PutItem
// by another service would: the way to store items the engine would not
// write, such as undecodable ones. The twin keeps periods and history rows
// in the legacy tables' form, without the single table's PK, SK and
// entity: item needs user_id (an engine user ID) and billing_date or
// last_run_date as non-empty strings, as [Store.PutRawItem] does. The
// subscription item and the period ID pointers are left as they are.
func (s *SingleTable) PutRawItem(tableName string, item map[string]AttributeValue) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.periods.PutRawItem(tableName, item)
}

type (
	stRepository SingleTable
	stHistory    SingleTable
	stPayments   SingleTable
)

var (
	_ billing.Repository   = (*stRepository)(nil)
	_ billing.History      = (*stHistory)(nil)
	_ entitlement.Payments = (*stPayments)(nil)
)

// engineRef parses the UserID of a record to be stored, with the error
// of the DynamoDB store.
func engineRef(sub *billing.Period) (layout.SubscriptionRef, error) {
	ref, err := layout.ParseSubscriptionRef(sub.UserID)
	if err != nil {
		return ref, fmt.Errorf("billing: single table: record %s: %w", sub.Key(), err)
	}
	return ref, nil
}

func recordKey(userID, billingDateKey string) string {
	return "user_id=" + userID + " billing_date=" + billingDateKey
}

// subItemKey is the key of a subscription item in the Payments twin.
func (s *SingleTable) subItemKey(ref layout.SubscriptionRef) string {
	return s.table.AccountPrefix + ref.AccountID + "\x00" + ref.SK()
}

func (s *SingleTable) subKeyText(ref layout.SubscriptionRef) string {
	return "PK=" + s.table.AccountPrefix + ref.AccountID + " SK=" + ref.SK()
}

// stTx is one write: the period writes whose subscription items it
// updates, the pointers and the receipt it writes.
type stTx struct {
	op       string
	chains   []*stChain
	pointers []stPointer
	receipt  *entitlement.Receipt
	// receiptItem is the receipt's item once checked against the table.
	receiptItem map[string]av.AttributeValue
}

// stChain is the writes of one subscription (engine user) in a tx, and
// the subscription item they leave.
type stChain struct {
	ref     layout.SubscriptionRef
	deleted []string // billing_date keys of periods removed
	written []*billing.Period
	item    map[string]av.AttributeValue
	open    layout.OpenPeriods
}

// stPointer is the write of a period-ID pointer.
type stPointer struct {
	subscriptionID, userID, billingDate string
	ifAbsent                            bool // keep a stored billing_date (History.Add)
}

func (t *stTx) chain(ref layout.SubscriptionRef) *stChain {
	for _, c := range t.chains {
		if c.ref == ref {
			return c
		}
	}
	c := &stChain{ref: ref}
	t.chains = append(t.chains, c)
	return c
}

// putPeriod checks next as the DynamoDB store does before its
// transaction (user ID, period and history items, receipt) and notes its
// writes: prev is the record it replaces (nil for a new one).
func (s *SingleTable) putPeriod(t *stTx, prev, next *billing.Period) error {
	ref, err := engineRef(next)
	if err != nil {
		return err
	}
	if _, err := layout.EncodeItem(next); err != nil {
		return err
	}
	if _, err := layout.EncodeHistoryItem(next); err != nil {
		return err
	}
	if prev == nil || layout.BillingDateKey(prev) != layout.BillingDateKey(next) || prev.SubscriptionID != next.SubscriptionID {
		t.pointers = append(t.pointers, stPointer{subscriptionID: next.SubscriptionID, userID: next.UserID, billingDate: layout.BillingDateKey(next)})
	}
	if rc, ok := layout.PeriodReceipt(ref, prev, next); ok {
		rc.ExpiresAt = rc.ProcessedDate.Add(s.pay.retention)
		if _, err := s.table.EncodeReceipt(rc); err != nil {
			return err
		}
		t.receipt = &rc
	}
	c := t.chain(ref)
	c.written = append(c.written, next)
	return nil
}

// prepare computes the subscription item each chain leaves
// (EngineSubscription over the stored item and its open
// periods) and the receipt's item: its key, REC#<processed date>#SKU#<sku>,
// must be free or hold the same receipt; when another receipt holds it,
// the processed date moves on by a nanosecond, up to 8 times. The caller
// holds s.mu; nothing is written.
func (s *SingleTable) prepare(t *stTx) error {
	s.pay.mu.Lock()
	defer s.pay.mu.Unlock()
	for _, c := range t.chains {
		var cur entitlement.RecurringSubscription
		stored, exists := s.pay.items[s.subItemKey(c.ref)]
		if exists {
			var err error
			if cur, err = s.table.DecodeRecurringSubscription(stored); err != nil {
				return fmt.Errorf("billing: %s: subscription (%s): %w", t.op, s.subKeyText(c.ref), err)
			}
		}
		open := layout.OpenPeriods{}
		if exists {
			maps.Copy(open, s.open[c.ref.UserID()])
		}
		for _, d := range c.deleted {
			delete(open, d)
		}
		for _, w := range c.written {
			open.Record(w)
		}
		next := layout.EngineSubscription(c.ref, cur, exists, open, c.written, s.clock.Now(), s.leadDays)
		item, err := s.table.EncodeRecurringSubscription(next)
		if err != nil {
			return fmt.Errorf("billing: %s: subscription (%s): %w", t.op, s.subKeyText(c.ref), err)
		}
		c.item, c.open = item, open
	}
	if t.receipt != nil {
		rc := *t.receipt
		for attempt := 0; ; attempt++ {
			item, _, err := s.pay.receipt(t.op, rc)
			if err == nil {
				t.receiptItem = item
				break
			}
			var ce *billing.ConflictError
			if !errors.As(err, &ce) || attempt == stMaxReceiptMoves {
				return err
			}
			// Another receipt of the SKU in the account has this processed
			// date: the DynamoDB store moves the receipt on by a
			// nanosecond, retrying its transaction.
			rc.ProcessedDate = rc.ProcessedDate.Add(time.Nanosecond)
		}
	}
	return nil
}

// stMaxReceiptMoves is how many times a receipt moves on by a nanosecond
// to a free key before the write fails: the DynamoDB store's transaction
// retries (maxSubRetries there).
const stMaxReceiptMoves = 8

// apply stores what prepare computed, after the periods were written.
// The caller holds s.mu.
func (s *SingleTable) apply(t *stTx) {
	s.pay.mu.Lock()
	for _, c := range t.chains {
		s.pay.put(c.item)
		s.open[c.ref.UserID()] = c.open
	}
	if t.receiptItem != nil {
		s.pay.put(t.receiptItem)
	}
	s.pay.mu.Unlock()
	for _, p := range t.pointers {
		users := s.pointers[p.subscriptionID]
		if users == nil {
			users = map[string]string{}
			s.pointers[p.subscriptionID] = users
		}
		if _, ok := users[p.userID]; ok && p.ifAbsent {
			continue
		}
		users[p.userID] = p.billingDate
	}
}

// write runs a tx whose periods and history rows inner writes: prepare,
// then inner (which checks their conditions), then apply. A receipt that
// finds no free key fails the write, after the conditions of next's own
// items (the DynamoDB transaction's order): prev's record as read, the
// new key of a move, next's history row.
func (s *SingleTable) write(t *stTx, prev, next *billing.Period, inner func() error) error {
	if err := s.prepare(t); err != nil {
		var ce *billing.ConflictError
		if t.receipt != nil && t.receiptItem == nil && errors.As(err, &ce) {
			if perr := s.periodConflict(t.op, prev, next); perr != nil {
				return perr
			}
		}
		return err
	}
	if err := inner(); err != nil {
		return err
	}
	s.apply(t)
	return nil
}

// periodConflict returns the error the inner store gives when the update
// of prev to next fails a condition of next's own items, or nil.
func (s *SingleTable) periodConflict(op string, prev, next *billing.Period) error {
	st := s.periods
	st.locks.rlock(allStripes)
	defer st.locks.runlock(allStripes)
	oldKey := tableKey{prev.UserID, layout.BillingDateKey(prev)}
	cur, ok := st.primary.get(oldKey)
	switch {
	case !ok:
		return &billing.ConflictError{Op: op, Key: prev.Key(), Reason: "record does not exist", Err: billing.ErrConflict}
	case !fenceHolds(cur, prev):
		return &billing.ConflictError{Op: op, Key: prev.Key(), Reason: "status, last_run_date or attempt changed", Err: billing.ErrConflict}
	}
	if newKey := (tableKey{next.UserID, layout.BillingDateKey(next)}); newKey != oldKey {
		if st.primary.has(newKey) {
			return &billing.ConflictError{Op: op, Key: next.Key(), Reason: "new billing_date taken", Err: billing.ErrConflict, Taken: true}
		}
	}
	if st.history.has(tableKey{next.UserID, layout.LastRunDateKey(next)}) {
		return &billing.ConflictError{Op: op, Key: next.Key(), Reason: "history row exists", Err: billing.ErrConflict, HistoryRow: true}
	}
	return nil
}

// Add implements [billing.Repository.Add]: the period, its history row,
// its ID pointer and the subscription item (created when absent), all or
// nothing.
func (r *stRepository) Add(ctx context.Context, sub *billing.Period) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if sub == nil {
		return errors.New("memory: add: nil record")
	}
	if _, err := layout.EncodeHistoryItem(sub); err != nil {
		return err
	}
	s := (*SingleTable)(r)
	t := &stTx{op: "add"}
	if err := s.putPeriod(t, nil, sub); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.write(t, nil, sub, func() error { return s.periods.Repository().Add(ctx, sub) })
}

// Get implements [billing.Repository.Get].
func (r *stRepository) Get(ctx context.Context, userID string, billingDate time.Time) (billing.Period, error) {
	if err := ctx.Err(); err != nil {
		return billing.Period{}, err
	}
	bd, err := timefmt.Seconds(billingDate)
	if err != nil {
		return billing.Period{}, fmt.Errorf("%w: billing_date %v: %w", billing.ErrInvalidDate, billingDate, err)
	}
	s := (*SingleTable)(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.getKey(userID, bd)
}

// getKey reads one period by its key strings; the caller holds s.mu.
func (s *SingleTable) getKey(userID, billingDateKey string) (billing.Period, error) {
	key := recordKey(userID, billingDateKey)
	if _, err := layout.ParseSubscriptionRef(userID); err != nil {
		return billing.Period{}, fmt.Errorf("%w: record %s: %w", billing.ErrNotFound, key, err)
	}
	user := s.periods.locks.of(userID)
	s.periods.locks.rlock(user)
	defer s.periods.locks.runlock(user)
	item, ok := s.periods.primary.get(tableKey{userID, billingDateKey})
	if !ok {
		return billing.Period{}, fmt.Errorf("%w: record %s", billing.ErrNotFound, key)
	}
	return decodeItem(item)
}

// GetByID implements [billing.Repository.GetByID] through the period ID
// pointers, as the DynamoDB store does: the period each pointer names,
// else the first period of its user with the ID.
func (r *stRepository) GetByID(ctx context.Context, subscriptionID string) (billing.Period, error) {
	if err := ctx.Err(); err != nil {
		return billing.Period{}, err
	}
	if subscriptionID == "" {
		return billing.Period{}, fmt.Errorf("%w: empty subscription ID", billing.ErrNotFound)
	}
	s := (*SingleTable)(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	ptrs := s.pointers[subscriptionID]
	for _, u := range slices.Sorted(maps.Keys(ptrs)) {
		sub, err := s.getKey(u, ptrs[u])
		if err == nil && sub.SubscriptionID == subscriptionID {
			return sub, nil
		}
		if err != nil && !errors.Is(err, billing.ErrNotFound) {
			return billing.Period{}, err
		}
		// The fallback fails on an item that does not decode, as the
		// DynamoDB store's does.
		subs, invalid, err := s.listPeriods(ctx, u, false, 0)
		if err == nil && len(invalid) > 0 {
			err = invalid[0]
		}
		if err != nil {
			return billing.Period{}, err
		}
		for _, p := range subs {
			if p.SubscriptionID == subscriptionID {
				return p, nil
			}
		}
	}
	return billing.Period{}, fmt.Errorf("%w: subscription_id %s", billing.ErrNotFound, subscriptionID)
}

// listPeriods lists a user's periods, and the errors of the items it
// skipped (see [Store.listUser]); no user that is not a subscription
// reference can be stored. The caller holds s.mu.
func (s *SingleTable) listPeriods(ctx context.Context, userID string, desc bool, limit int) ([]billing.Period, []error, error) {
	if _, err := layout.ParseSubscriptionRef(userID); err != nil {
		return nil, nil, nil
	}
	return s.periods.listUser(ctx, s.periods.primary, userID, desc, limit)
}

// ListByUser implements [billing.Repository.ListByUser]: items that do not
// decode are skipped and reported (see [billing.WithInvalidItems]).
func (r *stRepository) ListByUser(ctx context.Context, userID string) ([]billing.Period, error) {
	s := (*SingleTable)(r)
	s.mu.Lock()
	subs, invalid, err := s.listPeriods(ctx, userID, false, 0)
	s.mu.Unlock()
	s.periods.skipItems(ctx, "list user ", userID, invalid)
	return subs, err
}

// Recent implements [billing.Repository.Recent]: items that do not decode
// are skipped and reported (see [billing.WithInvalidItems]), and do not
// count in limit.
func (r *stRepository) Recent(ctx context.Context, userID string, limit int) ([]billing.Period, error) {
	if limit <= 0 {
		limit = 10
	}
	s := (*SingleTable)(r)
	s.mu.Lock()
	subs, invalid, err := s.listPeriods(ctx, userID, true, limit)
	s.mu.Unlock()
	s.periods.skipItems(ctx, "recent of user ", userID, invalid)
	return subs, err
}

// Update implements [billing.Repository.Update]: next's period
// (conditional on prev), its history row, the records created with
// theirs, a receipt when next completes the period, and the subscription
// items, all or nothing.
func (r *stRepository) Update(ctx context.Context, prev, next *billing.Period, create ...*billing.Period) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if prev == nil || next == nil || slices.Contains(create, nil) {
		return errors.New("memory: update: nil record")
	}
	if err := layout.ValidateUpdate(prev, next, false); err != nil {
		return err
	}
	if len(create) > billing.MaxUpdateCreates {
		return fmt.Errorf("billing: update (%s): %d records to create, at most %d", prev.Key(), len(create), billing.MaxUpdateCreates)
	}
	if err := layout.ValidateCreates(prev, next, create); err != nil {
		return err
	}
	s := (*SingleTable)(r)
	t := &stTx{op: "update"}
	if err := s.putPeriod(t, prev, next); err != nil {
		return err
	}
	for _, c := range create {
		if err := s.putPeriod(t, nil, c); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.write(t, prev, next, func() error { return s.periods.Repository().Update(ctx, prev, next, create...) })
}

// SetAttempt implements [billing.Repository.SetAttempt]: the period's
// attempt attributes only; the subscription item does not change.
func (r *stRepository) SetAttempt(ctx context.Context, prev, next *billing.Period) error {
	if prev != nil {
		if _, err := layout.ParseSubscriptionRef(prev.UserID); err != nil {
			return err
		}
	}
	s := (*SingleTable)(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.periods.setAttempt(ctx, prev, next)
}

// AdminUpdate implements [billing.Repository.AdminUpdate]: a move deletes
// the old period (conditional on prev), puts the new one (its key must be
// free), moves the ID pointer and updates the subscription item, all or
// nothing. With an unchanged billing_date it is Update.
func (r *stRepository) AdminUpdate(ctx context.Context, prev, next *billing.Period) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if prev == nil || next == nil {
		return errors.New("memory: admin update: nil record")
	}
	if layout.BillingDateKey(next) == layout.BillingDateKey(prev) {
		return r.Update(ctx, prev, next)
	}
	if err := layout.ValidateUpdate(prev, next, true); err != nil {
		return err
	}
	ref, err := engineRef(prev)
	if err != nil {
		return err
	}
	s := (*SingleTable)(r)
	t := &stTx{op: "admin update"}
	if err := s.putPeriod(t, prev, next); err != nil {
		return err
	}
	c := t.chain(ref)
	c.deleted = append(c.deleted, layout.BillingDateKey(prev))
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.write(t, prev, next, func() error { return s.periods.Repository().AdminUpdate(ctx, prev, next) })
}

// AddAll implements [billing.Repository.AddAll] as the DynamoDB store
// does: the collision policy, then groups of up to 8 records of one
// subscription, each written with its subscription item all or nothing,
// overwriting records with the same keys but never a history row: a
// record whose history key holds another row moves to a free one
// ([layout.PlanHistoryRows]). A group that cannot be written (one item
// twice in it, which a DynamoDB transaction rejects, a record in flight,
// or one with no free history key) is named in a [*billing.BatchError];
// the others are written.
func (r *stRepository) AddAll(ctx context.Context, subs []billing.Period) ([]billing.Period, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := (*SingleTable)(r)
	resolved, err := s.collisions(subs)
	if err != nil {
		return nil, err
	}
	groups, err := layout.SingleTableGroups(resolved)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// History rows never replace another: a record whose key holds
	// another row moves on (its group's transaction carries it there).
	s.periods.locks.lock(allStripes)
	plans, err := s.periods.planRows(resolved)
	s.periods.locks.unlock(allStripes)
	if err != nil {
		return resolved, err
	}
	be := &billing.BatchError{}
	for _, g := range groups {
		t := &stTx{op: "add all"}
		recs := make([]billing.Period, 0, len(g))
		var err error
		for _, i := range g {
			if plans[i].Err != nil && err == nil {
				err = plans[i].Err
			}
			if err == nil && !plans[i].RowStored && s.periods.changedSinceAt(resolved[i].UserID, layout.BillingDateKey(&resolved[i]), resolved[i].LastRunDate) {
				err = layout.StaleCopyError(&resolved[i])
			}
			resolved[i].LastRunDate = plans[i].LastRunDate
			if err := s.putPeriod(t, nil, &resolved[i]); err != nil {
				return resolved, err
			}
			recs = append(recs, resolved[i])
		}
		if err == nil {
			err = checkGroup(recs)
		}
		for _, rec := range recs {
			if err == nil && s.periods.inFlightAt(rec.UserID, layout.BillingDateKey(&rec)) {
				err = &billing.ConflictError{Op: "add all", Key: rec.Key(), Reason: "the record is in flight", Err: billing.ErrAttemptInFlight}
			}
		}
		if err == nil {
			err = s.write(t, nil, nil, func() error {
				_, err := s.periods.Repository().AddAll(ctx, recs)
				return err
			})
		}
		if err != nil {
			be.Err = err
			for _, i := range g {
				be.Unwritten = append(be.Unwritten, resolved[i].Key())
			}
		}
	}
	if len(be.Unwritten) > 0 {
		return resolved, be
	}
	return resolved, nil
}

// checkGroup fails a group of AddAll that would write one period or
// history row twice: DynamoDB rejects a transaction with two actions on
// one item. The default collision policy never leaves such keys.
func checkGroup(recs []billing.Period) error {
	periods, rows := map[string]bool{}, map[string]bool{}
	for i := range recs {
		p, h := recs[i].UserID+"\x00"+layout.BillingDateKey(&recs[i]), recs[i].UserID+"\x00"+layout.LastRunDateKey(&recs[i])
		if periods[p] || rows[h] {
			return fmt.Errorf("billing: add all (%s): transaction cancelled: two actions on one item", recs[i].Key())
		}
		periods[p], rows[h] = true, true
	}
	return nil
}

// QueryStatus implements [billing.Repository.QueryStatus] as the DynamoDB
// store does: it walks the payment index (the subscription items'
// NextPaymentDate) over the same days as the DynamoDB store, expands
// each subscription found on a day into its periods in the query's
// status and range, and pages with opaque cursors
// bound to the query. A page reads at most Limit index items (a day's
// items in index order: LastPaymentDate, then key); like DynamoDB, a page
// that reaches Limit carries a cursor even if nothing remains. It also
// ends after a day that matched something, or after 62 empty days.
// Scanned counts the index items and the periods in the range read.
func (r *stRepository) QueryStatus(ctx context.Context, q billing.StatusQuery) (billing.Page, error) {
	if err := ctx.Err(); err != nil {
		return billing.Page{}, err
	}
	if err := q.Validate(); err != nil {
		return billing.Page{}, err
	}
	s := (*SingleTable)(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dueReads() {
		return s.queryDue(ctx, q)
	}
	w, err := layout.SingleTableWalk(q, s.clock.Now(), s.catchUp)
	if err != nil {
		return billing.Page{}, err
	}
	scope := fmt.Sprintf("billingtest/single/%s/%s/%s/%s/%s", s.table.Table, s.table.PaymentIndex, q.Status, w.Lo, w.Hi)
	day, start, err := decodeStatusCursor(scope, q.Cursor, w)
	if err != nil {
		return billing.Page{}, err
	}
	limit := q.Limit
	if limit == 0 {
		limit = s.pageSize
	}
	var page billing.Page
	read, empty := 0, 0
	for !day.After(w.Last) {
		d := layout.PaymentDayKey(day)
		hits := s.paymentIndex(d, start)
		more := len(hits) >= limit-read // DynamoDB: Limit reached, LastEvaluatedKey set
		hits = hits[:min(len(hits), limit-read)]
		read += len(hits)
		page.Scanned += len(hits)
		for _, hit := range hits {
			if err := s.expand(ctx, q, w, day, hit, &page); err != nil {
				return billing.Page{}, err
			}
		}
		if more && len(hits) > 0 {
			key := map[string]av.AttributeValue{stCursorDay: &av.AttributeValueMemberS{Value: d}}
			for _, a := range []string{layout.AttrPK, layout.AttrSK, layout.AttrNextPaymentDate, layout.AttrLastPaymentDate} {
				key[a] = hits[len(hits)-1][a]
			}
			return finishStatusPage(scope, page, key)
		}
		day, start = day.AddDate(0, 0, 1), nil
		if len(hits) == 0 {
			empty++
		}
		if !day.After(w.Last) && (read >= limit || page.Count > 0 || empty >= stMaxEmptyDays) {
			return finishStatusPage(scope, page, map[string]av.AttributeValue{stCursorDay: &av.AttributeValueMemberS{Value: layout.PaymentDayKey(day)}})
		}
	}
	return page, nil
}

func finishStatusPage(scope string, page billing.Page, key map[string]av.AttributeValue) (billing.Page, error) {
	next, err := cursor.Encode(scope, key)
	if err != nil {
		return billing.Page{}, fmt.Errorf("billing: status page: cursor: %w", err)
	}
	page.Next = next
	return page, nil
}

// decodeStatusCursor returns the day and index position a cursor
// continues from: the walk's first day for "".
func decodeStatusCursor(scope, token string, w layout.StatusWalk) (time.Time, map[string]av.AttributeValue, error) {
	if token == "" {
		return w.First, nil, nil
	}
	key, err := cursor.Decode(scope, token, stCursorDay)
	if err != nil {
		key, err = cursor.Decode(scope, token, stCursorDay, layout.AttrPK, layout.AttrSK, layout.AttrNextPaymentDate, layout.AttrLastPaymentDate)
	}
	if err != nil {
		return time.Time{}, nil, fmt.Errorf("%w: %v", billing.ErrInvalidCursor, err)
	}
	d := str(key[stCursorDay])
	day, err := time.Parse(layout.PayDayLayout, d)
	if err != nil || day.After(w.Last) { // an earlier day is a run continued later: it walks on from there
		return time.Time{}, nil, fmt.Errorf("%w: day %q outside the query", billing.ErrInvalidCursor, d)
	}
	delete(key, stCursorDay)
	if len(key) == 0 {
		key = nil
	} else if str(key[layout.AttrNextPaymentDate]) != d {
		return time.Time{}, nil, fmt.Errorf("%w: index key of another day", billing.ErrInvalidCursor)
	}
	return day, key, nil
}

// paymentIndex returns the subscription items of the payment index on
// day d after start, in index order (LastPaymentDate, then PK and SK), as
// copies. The caller holds s.mu.
func (s *SingleTable) paymentIndex(d string, start map[string]av.AttributeValue) []map[string]av.AttributeValue {
	order := func(it map[string]av.AttributeValue) []string {
		return []string{str(it[layout.AttrLastPaymentDate]), str(it[layout.AttrPK]), str(it[layout.AttrSK])}
	}
	s.pay.mu.Lock()
	defer s.pay.mu.Unlock()
	var hits []map[string]av.AttributeValue
	for _, it := range s.pay.dated(layout.AttrNextPaymentDate, d) {
		if str(it[layout.AttrLastPaymentDate]) != "" &&
			(start == nil || slices.Compare(order(it), order(start)) > 0) {
			hits = append(hits, cloneItem(it))
		}
	}
	slices.SortFunc(hits, func(a, b map[string]av.AttributeValue) int { return slices.Compare(order(a), order(b)) })
	return hits
}

// expand adds the periods of the subscription item hit (found at day)
// that are in the query's status and kept by the walk. It reads, and
// counts in Scanned, the subscription's periods from the later of the
// day and the range's start to the range's end.
func (s *SingleTable) expand(ctx context.Context, q billing.StatusQuery, w layout.StatusWalk, day time.Time, hit map[string]av.AttributeValue, page *billing.Page) error {
	rs, err := s.table.DecodeRecurringSubscription(hit)
	if err != nil {
		page.Invalid = append(page.Invalid, err)
		page.Count++
		return nil
	}
	ref := layout.SubscriptionRef{AccountID: rs.AccountID, SubscriptionID: rs.SubscriptionID, SKU: rs.SKU}
	lo := w.Lo
	if d, _ := timefmt.Seconds(day); d > lo {
		lo = d
	}
	user := s.periods.locks.of(ref.UserID())
	s.periods.locks.rlock(user)
	var found []keyedItem
	if p := s.periods.primary.partitionOf(ref.UserID()); p != nil {
		for i, _ := p.find(lo); i < len(p.recs) && p.recs[i].sk <= w.Hi; i++ {
			found = append(found, keyedItem{tableKey{ref.UserID(), p.recs[i].sk}, cloneItem(p.recs[i].view())})
		}
	}
	s.periods.locks.runlock(user)
	for _, ki := range found {
		if err := ctx.Err(); err != nil {
			return err
		}
		page.Scanned++
		if stringAttr(ki.item, layout.AttrBillingStatus) != string(q.Status) {
			continue // the query's filter
		}
		sub, err := layout.DecodeItem(ki.item)
		_ = w.Add(page, q, day, sub, err) // counted in Invalid
	}
	return nil
}

// Add implements [billing.History.Add]: the row and its ID pointer (whose
// billing_date a period write set is kept), all or nothing.
func (h *stHistory) Add(ctx context.Context, sub *billing.Period) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if sub == nil {
		return errors.New("memory: history add: nil row")
	}
	if _, err := engineRef(sub); err != nil {
		return err
	}
	s := (*SingleTable)(h)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.periods.History().Add(ctx, sub); err != nil {
		return err
	}
	s.apply(&stTx{pointers: []stPointer{{subscriptionID: sub.SubscriptionID, userID: sub.UserID, billingDate: layout.BillingDateKey(sub), ifAbsent: true}}})
	return nil
}

// AddAll implements [billing.History.AddAll]: every row and its ID
// pointer (the billing_date of the first row of each subscription ID and
// user in the call), overwriting pointers with the same keys but never a
// row: a row whose key holds another row is refused (see
// [History.AddAll]).
// Unstorable rows, rows sharing a key and user IDs that are not
// subscription references are errors before anything is written.
func (h *stHistory) AddAll(ctx context.Context, subs []billing.Period) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	seen := map[string]bool{}
	for i := range subs {
		if _, err := layout.EncodeHistoryItem(&subs[i]); err != nil {
			return fmt.Errorf("history row %d: %w", i, err)
		}
		k := "user_id=" + subs[i].UserID + " last_run_date=" + layout.LastRunDateKey(&subs[i])
		if seen[k] {
			return &billing.ConflictError{Op: "history add", Key: k, Reason: "two rows of the batch share user_id and last_run_date", Err: billing.ErrAlreadyExists}
		}
		seen[k] = true
	}
	t := &stTx{}
	ptrs := map[string]bool{}
	for i := range subs {
		if _, err := engineRef(&subs[i]); err != nil {
			return err
		}
		if p := subs[i].SubscriptionID + "\x00" + subs[i].UserID; !ptrs[p] {
			ptrs[p] = true
			t.pointers = append(t.pointers, stPointer{subscriptionID: subs[i].SubscriptionID, userID: subs[i].UserID, billingDate: layout.BillingDateKey(&subs[i])})
		}
	}
	s := (*SingleTable)(h)
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.periods.History().AddAll(ctx, subs)
	var be *billing.BatchError
	if err != nil && !errors.As(err, &be) {
		return err
	}
	s.apply(t) // the pointers of the rows written (a row refused leaves its pointer, as DynamoDB's batch does)
	return err
}

// ListBySubscription implements [billing.History.ListBySubscription]:
// rows ascending by last_run_date, then user ID.
func (h *stHistory) ListBySubscription(ctx context.Context, subscriptionID string) ([]billing.Period, error) {
	if subscriptionID == "" {
		return nil, ctx.Err()
	}
	s := (*SingleTable)(h)
	s.mu.Lock()
	defer s.mu.Unlock()
	rows, err := s.periods.History().ListBySubscription(ctx, subscriptionID)
	if len(rows) == 0 {
		rows = nil
	}
	return rows, err
}

// ListByUser implements [billing.History.ListByUser]: rows that do not
// decode are skipped and reported (see [billing.WithInvalidItems]).
func (h *stHistory) ListByUser(ctx context.Context, userID string) ([]billing.Period, error) {
	if _, err := layout.ParseSubscriptionRef(userID); err != nil {
		return nil, ctx.Err()
	}
	s := (*SingleTable)(h)
	s.mu.Lock()
	rows, invalid, err := s.periods.listUser(ctx, s.periods.history, userID, false, 0)
	s.mu.Unlock()
	s.periods.skipItems(ctx, "history of user ", userID, invalid)
	return rows, err
}

// CreateSubscription implements [Payments.CreateSubscription].
func (p *stPayments) CreateSubscription(ctx context.Context, s entitlement.RecurringSubscription) (entitlement.RecurringSubscription, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pay.CreateSubscription(ctx, s)
}

// GetSubscription implements [Payments.GetSubscription].
func (p *stPayments) GetSubscription(ctx context.Context, accountID, subscriptionID, sku string) (entitlement.RecurringSubscription, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pay.GetSubscription(ctx, accountID, subscriptionID, sku)
}

// UpdateSubscription implements [Payments.UpdateSubscription].
func (p *stPayments) UpdateSubscription(ctx context.Context, prev, next entitlement.RecurringSubscription) (entitlement.RecurringSubscription, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pay.UpdateSubscription(ctx, prev, next)
}

// MarkReminded implements [Payments.MarkReminded].
func (p *stPayments) MarkReminded(ctx context.Context, prev entitlement.RecurringSubscription, nextReminder time.Time) (entitlement.RecurringSubscription, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pay.MarkReminded(ctx, prev, nextReminder)
}

// SubscriptionsByAccount implements [Payments.SubscriptionsByAccount].
func (p *stPayments) SubscriptionsByAccount(ctx context.Context, accountID string) ([]entitlement.RecurringSubscription, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pay.SubscriptionsByAccount(ctx, accountID)
}

// DuePaymentsByDate implements [Payments.DuePaymentsByDate].
func (p *stPayments) DuePaymentsByDate(ctx context.Context, day time.Time, token string) ([]entitlement.RecurringSubscription, string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pay.DuePaymentsByDate(ctx, day, token)
}

// DueRemindersByDate implements [Payments.DueRemindersByDate].
func (p *stPayments) DueRemindersByDate(ctx context.Context, day time.Time, token string) ([]entitlement.RecurringSubscription, string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pay.DueRemindersByDate(ctx, day, token)
}

// CreateReceipt implements [Payments.CreateReceipt].
func (p *stPayments) CreateReceipt(ctx context.Context, r entitlement.Receipt) (entitlement.Receipt, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pay.CreateReceipt(ctx, r)
}

// ReceiptsByAccount implements [Payments.ReceiptsByAccount].
func (p *stPayments) ReceiptsByAccount(ctx context.Context, accountID string, since time.Time) ([]entitlement.Receipt, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pay.ReceiptsByAccount(ctx, accountID, since)
}

// RecordPayment implements [Payments.RecordPayment].
func (p *stPayments) RecordPayment(ctx context.Context, prev entitlement.RecurringSubscription, r entitlement.Receipt, nextPayment, nextReminder time.Time) (entitlement.RecurringSubscription, entitlement.Receipt, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pay.RecordPayment(ctx, prev, r, nextPayment, nextReminder)
}
