package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"github.com/dynabill/billing/internal/av"
	"github.com/dynabill/billing/internal/sdkav"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/entitlement"
	"github.com/dynabill/billing/internal/layout"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// SingleTableStoreConfig configures [NewSingleTableRepository].
type SingleTableStoreConfig struct {
	// Client talks to DynamoDB; *dynamodb.Client satisfies it. Required.
	Client API
	// Table names the single table, its indexes, TTL attribute and account
	// prefix. Defaults to [SingleTableConfig]'s defaults; the recurring
	// payments layout uses AccountPrefix "ACC#".
	Table SingleTableConfig
	// Clock gives "now" for the open end of status queries and for the
	// subscription items' UpdatedAt. Defaults to [billing.SystemClock].
	Clock billing.Clock
	// PageSize is the number of index items a status page reads.
	// Defaults to 100.
	PageSize int
	// CatchUpDays is how many days before today the walk over the
	// payment index starts, so that a subscription
	// whose earliest open period is overdue (it stays at that period's day
	// until the period is handled) is still found. A period left open
	// longer than this is not seen by status queries: runs mark SCHEDULED and ERROR
	// periods STALE after Config.OldSubscriptionDays (30) and advance
	// PAUSED ones the day they are due, so only runs missed for longer than
	// the difference leave one behind. Two kinds of periods stay open
	// longer by design and must be handled within it: an ACHSENT period
	// waits at most Config.ACHSettlementDeadline (14 days unless
	// configured: keep it below CatchUpDays), and a period whose attempt
	// is in flight is never closed before the attempt is resolved. The
	// retry run also reads ERROR periods older than its window, so an
	// ERROR period in flight is revisited for CatchUpDays beyond that
	// window (82 days with the defaults) and a SCHEDULED one for
	// CatchUpDays; a processor unreachable for longer leaves it to single
	// collections (CollectByID) and operators, after daily
	// payment_attempt_unresolved events. The due index
	// (SingleTableConfig.DueShards) has no such limit. Defaults to
	// DefaultCatchUpDays.
	CatchUpDays int
	// ReminderLeadDays is how many days before a SCHEDULED period's day
	// NextReminderDate falls. Defaults to [billing.NoticeLeadDays], the
	// notifier's window, so that the notifier's daily run and the reminder
	// index agree.
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
	// DueIndexPending keeps status queries on the payment-index walk (one
	// shard) while Table.DueShards already writes the due keys: the state
	// of a table whose [SingleTableRepository.BackfillDue] has not
	// finished. Defaults to false: with DueShards, status queries read the
	// due index.
	DueIndexPending bool
	// Totals keeps the day totals of the periods' outcomes
	// ([billing.TotalsRepository]) in items of the table's own,
	// partition keys "TOTALS#<day>#<shard>": an outcome adds to its
	// day's item in the transaction of its write, 2 WCU more a
	// collection, 4 more a decline. Totals count from the day the
	// writers are given it on. Defaults to false: Totals answers
	// [billing.ErrNoTotals].
	Totals bool
	// TotalsShards is the number of counter items a day's totals are
	// spread over (see [TableConfig.TotalsShards]). Defaults to
	// [DefaultTotalsShards].
	TotalsShards int
	// Logger receives warnings about undecodable items. Defaults to
	// discarding.
	Logger *slog.Logger
	// MeterProvider and TracerProvider observe every DynamoDB call.
	// Default to the global OpenTelemetry providers.
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider
}

// SingleTableRepository is the [Repository] (and, through History, the
// [History]) of the collection engine on the recurring payments single
// table, next to the [Payments] and accounts entities
// of the same table. The collector and the notifier drive it exactly as
// they drive [Repository]; the mapping is described in the package
// documentation ("Single-table layout").
//
// An engine user is one subscription of an account: a record's UserID is
// SubscriptionRef.UserID, and a record whose UserID is not one is
// rejected.
type SingleTableRepository struct {
	cfg    SingleTableStoreConfig
	tbl    layout.SingleTableConfig
	pay    *Payments
	bw     *batchWriter
	totals *dayTotals // nil: no totals kept
}

var _ billing.Repository = (*SingleTableRepository)(nil)

// NewSingleTableRepository checks cfg and returns the repository.
func NewSingleTableRepository(cfg SingleTableStoreConfig) (*SingleTableRepository, error) {
	switch {
	case cfg.PageSize < 0:
		return nil, fmt.Errorf("billing: SingleTableStoreConfig.PageSize: negative %d", cfg.PageSize)
	case cfg.CatchUpDays < 0:
		return nil, fmt.Errorf("billing: SingleTableStoreConfig.CatchUpDays: negative %d", cfg.CatchUpDays)
	case cfg.ReminderLeadDays < 0:
		return nil, fmt.Errorf("billing: SingleTableStoreConfig.ReminderLeadDays: negative %d", cfg.ReminderLeadDays)
	case cfg.TotalsShards < 0 || cfg.TotalsShards > MaxTotalsShards:
		return nil, fmt.Errorf("billing: SingleTableStoreConfig.TotalsShards: %d outside 0..%d", cfg.TotalsShards, MaxTotalsShards)
	}
	if cfg.TotalsShards == 0 {
		cfg.TotalsShards = DefaultTotalsShards
	}
	if err := codecOf(cfg.Table).CheckEngine("billing: SingleTableStoreConfig.Table"); err != nil {
		return nil, err
	}
	pay, err := NewPayments(PaymentsConfig{
		Client: cfg.Client, Table: cfg.Table, Clock: cfg.Clock, ReceiptRetention: cfg.ReceiptRetention,
		Logger: cfg.Logger, MeterProvider: cfg.MeterProvider, TracerProvider: cfg.TracerProvider,
	})
	if err != nil {
		return nil, err
	}
	pc := pay.cfg
	cfg.Client, cfg.Table, cfg.Clock, cfg.ReceiptRetention, cfg.Logger = pc.Client, pc.Table, pc.Clock, pc.ReceiptRetention, pc.Logger
	if cfg.PageSize == 0 {
		cfg.PageSize = 100
	}
	if cfg.CatchUpDays == 0 {
		cfg.CatchUpDays = layout.DefaultCatchUpDays
	}
	if cfg.ReminderLeadDays == 0 {
		cfg.ReminderLeadDays = billing.NoticeLeadDays
	}
	if cfg.Collisions == nil {
		cfg.Collisions = layout.DefaultCollisionPolicy
	}
	bw := &batchWriter{client: cfg.Client, retries: 8, baseDelay: 50 * time.Millisecond, maxDelay: 5 * time.Second,
		keyAttrs: map[string][2]string{cfg.Table.Table: {layout.AttrPK, layout.AttrSK}}}
	r := &SingleTableRepository{cfg: cfg, tbl: pay.tbl, pay: pay, bw: bw}
	if cfg.Totals {
		r.totals = &dayTotals{client: cfg.Client, table: cfg.Table.Table, pk: layout.AttrPK, sk: layout.AttrSK, shards: cfg.TotalsShards}
	}
	return r, nil
}

// Payments returns the [Payments] view of the same table: the
// subscription items the engine maintains (getSubscriptionsByAccount,
// getDuePaymentsByDate, getDueRemindersByDate) and its receipts
// (getReceiptsByAccount).
func (r *SingleTableRepository) Payments() *Payments { return r.pay }

// History returns the engine's history rows in the same table.
func (r *SingleTableRepository) History() *SingleTableHistory { return &SingleTableHistory{r: r} }

func (r *SingleTableRepository) table() *string { return &r.tbl.Table }

func (r *SingleTableRepository) keyText(accountID, sk string) string {
	return "PK=" + r.tbl.AccountPK(accountID) + " SK=" + sk
}

// periodItem is the item of a period: the legacy record's attributes
// (EncodeItem) with the layout's keys and its due key (see withDue).
func (r *SingleTableRepository) periodItem(ref layout.SubscriptionRef, sub *billing.Period) (map[string]av.AttributeValue, error) {
	item, err := layout.EncodeItem(sub)
	if err != nil {
		return nil, err
	}
	item[layout.AttrPK], item[layout.AttrSK] = layout.StringAV(r.tbl.AccountPK(ref.AccountID)), layout.StringAV(layout.PeriodSK(ref, layout.BillingDateKey(sub)))
	item[layout.PayEntity] = layout.StringAV(layout.EntityPeriod)
	withDue(item, sub, r.tbl.DueShards)
	return item, nil
}

func (r *SingleTableRepository) historyItem(ref layout.SubscriptionRef, sub *billing.Period) (map[string]av.AttributeValue, error) {
	item, err := layout.EncodeHistoryItem(sub)
	if err != nil {
		return nil, err
	}
	item[layout.AttrPK], item[layout.AttrSK] = layout.StringAV(r.tbl.AccountPK(ref.AccountID)), layout.StringAV(layout.HistorySK(ref, layout.LastRunDateKey(sub)))
	item[layout.PayEntity] = layout.StringAV(layout.EntityHistory)
	return item, nil
}

// pointerKey is the key of a period ID pointer.
func pointerKey(subscriptionID, userID string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{layout.AttrPK: stringAV(layout.PeriodIDPrefix + subscriptionID), layout.AttrSK: stringAV(userID)}
}

// decodeEngineItem decodes a period or history item: the layout's own
// attributes, the due key included, are not part of the record, so they
// are neither carried in its stored attributes nor compared when it is
// written back. The key of an error names the item's PK and SK before
// the record's user_id and dates.
func decodeEngineItem(item map[string]av.AttributeValue) (billing.Period, error) {
	rec := maps.Clone(item)
	delete(rec, layout.AttrPK)
	delete(rec, layout.AttrSK)
	delete(rec, layout.PayEntity)
	delete(rec, layout.AttrDue)
	sub, err := layout.DecodeItem(rec)
	if fe := (*billing.FieldError)(nil); errors.As(err, &fe) {
		fe.Key = "PK=" + stringOf(item[layout.AttrPK]) + " SK=" + stringOf(item[layout.AttrSK]) + " " + fe.Key
	}
	return sub, err
}

// stTx collects the actions of one transaction on the single table and
// the period writes whose subscription items it must update.
type stTx struct {
	op     string
	items  []types.TransactWriteItem
	ops    []txOp
	chains map[string]*chainWrite
	order  []string
	// receipts are the receipts put, by action index.
	receipts map[int]entitlement.Receipt
	// pointers are the ID pointers put, by subscription ID and user ID:
	// one action per item in a transaction.
	pointers map[string]int
	// counted are the records' writes that may add to the day totals.
	counted []write
}

type chainWrite struct {
	ref     layout.SubscriptionRef
	deleted []string // billing_date keys of periods removed
	written []*billing.Period
}

func newSTTx(op string) *stTx {
	return &stTx{op: op, chains: map[string]*chainWrite{}, receipts: map[int]entitlement.Receipt{}, pointers: map[string]int{}}
}

func (t *stTx) add(item types.TransactWriteItem, op txOp) {
	t.items = append(t.items, item)
	t.ops = append(t.ops, op)
}

func (t *stTx) chain(ref layout.SubscriptionRef) *chainWrite {
	u := ref.UserID()
	c, ok := t.chains[u]
	if !ok {
		c = &chainWrite{ref: ref}
		t.chains[u] = c
		t.order = append(t.order, u)
	}
	return c
}

// putPeriod adds the write of next's period, its history row, its ID
// pointer and, when it completes a period, its receipt. The period is
// written back when prev is the same period (an update of only the
// attributes whose encoding changes, conditional on prev, see
// [writeBack]); otherwise it is put: conditional on the key being free
// (a new record, or prev moved to a new key, which carries prev's data_
// attributes along), or, for AddAll (over set), conditional on the
// period as AddAll read it (see [storedCondition]), carrying its
// library-owned attributes (see [layout.CarryOwned]). The history row's
// key must be free; AddAll leaves out a row it found stored already
// (over.noRow).
func (r *SingleTableRepository) putPeriod(t *stTx, prev, next *billing.Period, over *storedPeriod) error {
	ref, err := layout.EngineRef(next)
	if err != nil {
		return err
	}
	prim, err := r.periodItem(ref, next)
	if err != nil {
		return err
	}
	hist, err := r.historyItem(ref, next)
	if err != nil {
		return err
	}
	put := &types.Put{TableName: r.table()}
	op := txOp{key: next.Key(), reason: "a record with this user_id and billing_date exists", exists: true}
	switch {
	case over != nil:
		// AddAll replaces the period as it read it, carrying the library's
		// own attributes; the due key is next's.
		layout.CarryOwned(prim, hist, over.item)
		layout.CarryProration(prim, hist, over.item)
		layout.CarryDunning(prim, hist, over.item)
		withDue(prim, next, r.tbl.DueShards)
		expr := mustBuild(expression.NewBuilder().WithCondition(storedCondition(over.item)))
		put.ConditionExpression, put.ExpressionAttributeNames, put.ExpressionAttributeValues = expr.Condition(), expr.Names(), expr.Values()
		op = txOp{key: next.Key(), reason: "the record changed since it was read: not overwritten"}
	case prev != nil && layout.BillingDateKey(prev) == layout.BillingDateKey(next):
		upd, err := r.periodWriteBack(ref, prev, next, prim)
		if err != nil {
			return err
		}
		t.add(types.TransactWriteItem{Update: upd}, txOp{key: prev.Key(), reason: staleReason})
		put = nil
	default:
		put = putAbsent(r.table(), prim, layout.AttrPK)
		if prev != nil {
			op = txOp{key: next.Key(), reason: "new billing_date taken: a record with that key exists", taken: true}
			carryData(prim, prev)
		}
	}
	if put != nil {
		// prim is final only now (CarryOwned, withDue, carryData above).
		put.Item = sdkav.ToSDK(prim)
		t.add(types.TransactWriteItem{Put: put}, op)
	}
	if over == nil || !over.noRow {
		// Never over another row: history is append-only.
		t.add(types.TransactWriteItem{Put: putAbsent(r.table(), hist, layout.AttrPK)}, txOp{key: next.Key(), reason: "a history row with this user_id and last_run_date exists",
			exists: prev == nil, history: true})
	}
	// A new ID (a reopened period, see billing.CheckTransition)
	// gets its pointer; the old one finds the period no more.
	if prev == nil || layout.BillingDateKey(prev) != layout.BillingDateKey(next) || prev.SubscriptionID != next.SubscriptionID {
		ptr := types.TransactWriteItem{Put: &types.Put{TableName: r.table(), Item: r.pointerItem(next.SubscriptionID, next.UserID, layout.BillingDateKey(next))}}
		// Records of one transaction sharing an ID (imports may) share the
		// pointer: the last one's key is kept.
		if i, ok := t.pointers[next.SubscriptionID+"\x00"+next.UserID]; ok {
			t.items[i] = ptr
		} else {
			t.pointers[next.SubscriptionID+"\x00"+next.UserID] = len(t.items)
			t.add(ptr, txOp{key: next.Key(), reason: "period ID pointer"})
		}
	}
	if rc, ok := layout.PeriodReceipt(ref, prev, next); ok {
		if err := r.putReceipt(t, len(t.items), rc); err != nil {
			return err
		}
	}
	if over == nil {
		t.counted = append(t.counted, write{prev, next})
	}
	c := t.chain(ref)
	c.written = append(c.written, next)
	return nil
}

// periodWriteBack is the update of prev's period to nextItem (next's
// period item): see [writeBack].
func (r *SingleTableRepository) periodWriteBack(ref layout.SubscriptionRef, prev, next *billing.Period, nextItem map[string]av.AttributeValue) (*types.Update, error) {
	prevItem, err := r.periodItem(ref, prev)
	if err != nil {
		return nil, err
	}
	writesDue(prevItem, next, r.tbl.DueShards)
	key := map[string]types.AttributeValue{layout.AttrPK: sdkav.ToSDKValue(prevItem[layout.AttrPK]), layout.AttrSK: sdkav.ToSDKValue(prevItem[layout.AttrSK])}
	upd, err := updateAction(r.table(), key, prevItem, nextItem, fence(prev), layout.AttrLastRunDate)
	if err != nil {
		return nil, fmt.Errorf("billing: update (%s): %w", prev.Key(), err)
	}
	return upd, nil
}

// putReceipt sets action i of t (appending it when i is the next) to the
// idempotent put of rc.
func (r *SingleTableRepository) putReceipt(t *stTx, i int, rc entitlement.Receipt) error {
	rput, rc, err := r.pay.receiptPut(rc)
	if err != nil {
		return err
	}
	if i == len(t.items) {
		t.add(types.TransactWriteItem{Put: rput}, r.pay.receiptOp(rc))
	} else {
		t.items[i], t.ops[i] = types.TransactWriteItem{Put: rput}, r.pay.receiptOp(rc)
	}
	t.receipts[i] = rc
	return nil
}

func (r *SingleTableRepository) pointerItem(subscriptionID, userID, billingDateKey string) map[string]types.AttributeValue {
	item := pointerKey(subscriptionID, userID)
	item[layout.AttrUserID], item[layout.AttrBillingDate], item[layout.PayEntity] = stringAV(userID), stringAV(billingDateKey), stringAV(layout.EntityPeriodID)
	return item
}

// maxSubRetries bounds the re-reads of subscription items whose version
// moved under a transaction (another period of the same subscription was
// written concurrently).
const maxSubRetries = 8

// commit reads the subscription items the transaction's periods belong
// to, adds their updates (conditional on the version read) and runs the
// transaction. When only a subscription item's version moved, it is read
// again and the transaction retried; any other failed condition is the
// write's conflict.
func (r *SingleTableRepository) commit(ctx context.Context, t *stTx) error {
	subRetries, receiptMoves, conflicts := 0, 0, 0
	ti, to := r.totals.actions(t.counted...)
	t.items, t.ops = append(t.items, ti...), append(t.ops, to...)
	for {
		// Clipped: the subscription items are appended anew each attempt.
		items, ops := slices.Clip(t.items), slices.Clip(t.ops)
		for _, u := range t.order {
			it, op, err := r.subscriptionWrite(ctx, t.chains[u])
			if err != nil {
				return fmt.Errorf("billing: %s: %w", t.op, err)
			}
			items, ops = append(items, it), append(ops, op)
		}
		_, err := r.cfg.Client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		if err == nil {
			return nil
		}
		if len(ti) > 0 && conflicts < totalsTxRetries && onlyTxConflict(err) {
			// Another transaction wrote a day totals item (or another
			// item) meanwhile: nothing was written; try again.
			conflicts++
			if err := sleepCtx(ctx, backoff(conflicts)); err != nil {
				return err
			}
			continue
		}
		i := failedAction(err)
		if i >= len(t.items) && i < len(items) && subRetries < maxSubRetries {
			subRetries++
			continue
		}
		if rc, ok := t.receipts[i]; ok && receiptMoves < maxSubRetries {
			receiptMoves++
			// Another receipt of the same SKU in the account has this
			// processed date to the nanosecond: the sort key
			// REC#<date>#SKU#<sku> must be unique, so this one moves on by
			// a nanosecond.
			rc.ProcessedDate = rc.ProcessedDate.Add(time.Nanosecond)
			if err := r.putReceipt(t, i, rc); err != nil {
				return err
			}
			continue
		}
		return translateWrite(t.op, ops, err)
	}
}

// failedAction returns the index of the first action of a cancelled
// transaction whose condition failed, or -1.
func failedAction(err error) int {
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		for i, rs := range tce.CancellationReasons {
			if aws.ToString(rs.Code) == "ConditionalCheckFailed" {
				return i
			}
		}
	}
	return -1
}

// subscriptionWrite reads a subscription item and returns its write with
// the open periods and due dates after the chain's writes, conditional on
// the version read (or on its absence). The item is shared with
// [Payments] and the host's own code, so an existing one is written
// back with an update of only the attributes whose encoding changes (see
// [writeBack]): the rest, unknown attributes and the stored form of known
// ones included, keep their bytes. A missing one is put.
func (r *SingleTableRepository) subscriptionWrite(ctx context.Context, c *chainWrite) (types.TransactWriteItem, txOp, error) {
	key := map[string]types.AttributeValue{layout.AttrPK: stringAV(r.tbl.AccountPK(c.ref.AccountID)), layout.AttrSK: stringAV(c.ref.SK())}
	keyText := r.keyText(c.ref.AccountID, c.ref.SK())
	op := txOp{key: keyText, reason: "the subscription item changed concurrently"}
	out, err := r.cfg.Client.GetItem(ctx, &dynamodb.GetItemInput{TableName: r.table(), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return types.TransactWriteItem{}, txOp{}, fmt.Errorf("read subscription (%s): %w", keyText, err)
	}
	var cur entitlement.RecurringSubscription
	open := layout.OpenPeriods{}
	stored := sdkav.FromSDK(out.Item)
	exists := len(stored) > 0
	if exists {
		if cur, err = r.tbl.DecodeRecurringSubscription(stored); err != nil {
			return types.TransactWriteItem{}, txOp{}, fmt.Errorf("subscription (%s): %w", keyText, err)
		}
		open = layout.DecodeOpenPeriods(stored[layout.AttrOpenPeriods])
	}
	for _, d := range c.deleted {
		delete(open, d)
	}
	for _, w := range c.written {
		open.Record(w)
	}
	next := layout.EngineSubscription(c.ref, cur, exists, open, c.written, r.cfg.Clock.Now(), r.cfg.ReminderLeadDays)
	enc, err := r.tbl.EncodeRecurringSubscription(next)
	if err != nil {
		return types.TransactWriteItem{}, txOp{}, fmt.Errorf("subscription (%s): %w", keyText, err)
	}
	enc[layout.AttrOpenPeriods] = open.AttributeValue()
	if !exists {
		return types.TransactWriteItem{Put: putAbsent(r.table(), enc, layout.AttrPK)}, op, nil
	}
	was, err := r.tbl.EncodeRecurringSubscription(cur)
	if err != nil {
		return types.TransactWriteItem{}, txOp{}, fmt.Errorf("subscription (%s): %w", keyText, err)
	}
	// The stored open periods, and due dates that decode as none (an
	// empty string): the write owns them, so they are compared as stored
	// (a due date no period has left is removed, the index keys must go).
	for _, name := range []string{layout.AttrOpenPeriods, layout.AttrNextPaymentDate, layout.AttrNextReminderDate} {
		if v, ok := stored[name]; ok {
			if _, known := was[name]; !known || name == layout.AttrOpenPeriods {
				was[name] = v
			}
		}
	}
	cond := expression.Name(layout.PayVersion).Equal(exprValue(layout.NumberAV(int64(cur.Version))))
	upd, err := updateAction(r.table(), key, was, enc, cond, layout.PayVersion)
	if err != nil {
		return types.TransactWriteItem{}, txOp{}, fmt.Errorf("subscription (%s): %w", keyText, err)
	}
	return types.TransactWriteItem{Update: upd}, op, nil
}

// Add implements [Repository.Add]: the period, its history row, its ID
// pointer and the subscription item (created when absent) in one
// transaction.
func (r *SingleTableRepository) Add(ctx context.Context, sub *billing.Period) error {
	if _, err := layout.EncodeHistoryItem(sub); err != nil {
		return err
	}
	t := newSTTx("add")
	if err := r.putPeriod(t, nil, sub, nil); err != nil {
		return err
	}
	return r.commit(ctx, t)
}

// Get implements [Repository.Get] with one consistent GetItem.
func (r *SingleTableRepository) Get(ctx context.Context, userID string, billingDate time.Time) (billing.Period, error) {
	return getByDate(ctx, r.getKey, userID, billingDate)
}

func (r *SingleTableRepository) getKey(ctx context.Context, userID, billingDateKey string) (billing.Period, error) {
	key := keyString(userID, billingDateKey)
	ref, err := layout.ParseSubscriptionRef(userID)
	if err != nil {
		return billing.Period{}, fmt.Errorf("%w: record %s: %w", billing.ErrNotFound, key, err)
	}
	out, err := r.cfg.Client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: r.table(), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{layout.AttrPK: stringAV(r.tbl.AccountPK(ref.AccountID)), layout.AttrSK: stringAV(layout.PeriodSK(ref, billingDateKey))},
	})
	if err != nil {
		return billing.Period{}, fmt.Errorf("billing: get (%s): %w", key, err)
	}
	if len(out.Item) == 0 {
		return billing.Period{}, fmt.Errorf("%w: record %s", billing.ErrNotFound, key)
	}
	return decodeEngineItem(sdkav.FromSDK(out.Item))
}

// GetByID implements [Repository.GetByID]: a consistent query of the
// period's ID pointers, then a consistent read of each period they name.
func (r *SingleTableRepository) GetByID(ctx context.Context, subscriptionID string) (billing.Period, error) {
	if subscriptionID == "" {
		return billing.Period{}, fmt.Errorf("%w: empty subscription ID", billing.ErrNotFound)
	}
	ptrs, err := r.pointers(ctx, subscriptionID)
	if err != nil {
		return billing.Period{}, err
	}
	for _, p := range ptrs {
		sub, err := r.getKey(ctx, stringOf(p[layout.AttrUserID]), stringOf(p[layout.AttrBillingDate]))
		if err == nil && sub.SubscriptionID == subscriptionID {
			return sub, nil
		}
		if err != nil && !errors.Is(err, billing.ErrNotFound) {
			return billing.Period{}, err
		}
		// The pointer was written by a history row or an overwrite: look
		// through the user's periods, failing on one that does not decode.
		subs, err := r.listPeriodsStrict(ctx, stringOf(p[layout.AttrUserID]))
		if err != nil {
			return billing.Period{}, err
		}
		for _, s := range subs {
			if s.SubscriptionID == subscriptionID {
				return s, nil
			}
		}
	}
	return billing.Period{}, fmt.Errorf("%w: subscription_id %s", billing.ErrNotFound, subscriptionID)
}

func (r *SingleTableRepository) pointers(ctx context.Context, subscriptionID string) ([]map[string]types.AttributeValue, error) {
	expr := keyEquals(layout.AttrPK, layout.PeriodIDPrefix+subscriptionID)
	return r.queryAll(ctx, "get by id "+subscriptionID, &dynamodb.QueryInput{
		TableName:                 r.table(),
		KeyConditionExpression:    expr.KeyCondition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		ConsistentRead:            aws.Bool(true),
	}, 0)
}

// queryAll reads every page of in (at most limit items when limit > 0).
func (r *SingleTableRepository) queryAll(ctx context.Context, op string, in *dynamodb.QueryInput, limit int) ([]map[string]types.AttributeValue, error) {
	items, err := queryAll(ctx, r.cfg.Client, in, limit)
	if err != nil {
		return nil, fmt.Errorf("billing: %s: %w", op, err)
	}
	return items, nil
}

// chainQuery is a consistent query of one subscription's items whose sort
// key is between lo and hi (periods or history rows), keeping those that
// match filter when one is given.
func (r *SingleTableRepository) chainQuery(ref layout.SubscriptionRef, lo, hi string, forward bool, filter ...expression.ConditionBuilder) *dynamodb.QueryInput {
	b := expression.NewBuilder().WithKeyCondition(expression.Key(layout.AttrPK).Equal(exprValue(layout.StringAV(r.tbl.AccountPK(ref.AccountID)))).
		And(expression.Key(layout.AttrSK).Between(exprValue(layout.StringAV(lo)), exprValue(layout.StringAV(hi)))))
	if len(filter) > 0 {
		b = b.WithFilter(joinAnd(filter))
	}
	expr := mustBuild(b)
	return &dynamodb.QueryInput{
		TableName:                 r.table(),
		KeyConditionExpression:    expr.KeyCondition(),
		FilterExpression:          expr.Filter(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		ScanIndexForward:          aws.Bool(forward),
		ConsistentRead:            aws.Bool(true),
	}
}

// ListByUser implements [Repository.ListByUser]. Items that do not decode
// are skipped: logged at Warn and reported (see [billing.WithInvalidItems]).
func (r *SingleTableRepository) ListByUser(ctx context.Context, userID string) ([]billing.Period, error) {
	return r.listPeriods(ctx, userID, true, 0)
}

// Recent implements [Repository.Recent]. Items that do not decode are
// skipped: logged at Warn and reported (see [billing.WithInvalidItems]);
// the read goes on past them, so that they take no period's place.
func (r *SingleTableRepository) Recent(ctx context.Context, userID string, limit int) ([]billing.Period, error) {
	return r.listPeriods(ctx, userID, false, recentLimit(limit))
}

func (r *SingleTableRepository) listPeriods(ctx context.Context, userID string, forward bool, limit int) ([]billing.Period, error) {
	ref, err := layout.ParseSubscriptionRef(userID)
	if err != nil {
		return nil, nil // no such user can be stored
	}
	prefix := layout.PeriodSK(ref, "")
	op := "list user " + userID
	subs, err := r.userRead(op).query(ctx, r.chainQuery(ref, prefix, prefix+"~", forward), limit)
	if err != nil {
		return nil, fmt.Errorf("billing: %s: %w", op, err)
	}
	return subs, nil
}

// listPeriodsStrict is ListByUser failing on the first item that does not
// decode, for the lookups by ID (GetByID, History.ListBySubscription),
// which are not per-user reads: a period they cannot decode may be the
// one they look for.
func (r *SingleTableRepository) listPeriodsStrict(ctx context.Context, userID string) ([]billing.Period, error) {
	ref, err := layout.ParseSubscriptionRef(userID)
	if err != nil {
		return nil, nil // no such user can be stored
	}
	prefix := layout.PeriodSK(ref, "")
	items, err := r.queryAll(ctx, "list user "+userID, r.chainQuery(ref, prefix, prefix+"~", true), 0)
	if err != nil {
		return nil, err
	}
	return layout.DecodeAll(sdkav.FromSDKItems(items), decodeEngineItem)
}

// userRead is a per-user read of the table's period or history items.
func (r *SingleTableRepository) userRead(op string) userRead {
	return userRead{client: r.cfg.Client, logger: r.cfg.Logger, op: op, decode: decodeEngineItem}
}

// SetAttempt implements [Repository.SetAttempt] with one conditional
// UpdateItem of the period; the subscription item does not change (its
// open periods and due dates depend on statuses only).
func (r *SingleTableRepository) SetAttempt(ctx context.Context, prev, next *billing.Period) error {
	ref, err := layout.EngineRef(prev)
	if err != nil {
		return err
	}
	key := map[string]types.AttributeValue{layout.AttrPK: stringAV(r.tbl.AccountPK(ref.AccountID)), layout.AttrSK: stringAV(layout.PeriodSK(ref, layout.BillingDateKey(prev)))}
	return setAttempt(ctx, r.cfg.Client, r.table(), key, prev, next)
}

// Update implements [Repository.Update]: next's period (conditional on
// prev), its history row, the records created with theirs, a receipt when
// next completes the period, and the subscription items, in one
// transaction.
func (r *SingleTableRepository) Update(ctx context.Context, prev, next *billing.Period, create ...*billing.Period) error {
	if err := checkUpdate(prev, next, create); err != nil {
		return err
	}
	if err := layout.ValidateCreates(prev, next, create); err != nil {
		return err
	}
	t := newSTTx("update")
	if err := r.putPeriod(t, prev, next, nil); err != nil {
		return err
	}
	for _, c := range create {
		if err := r.putPeriod(t, nil, c, nil); err != nil {
			return err
		}
	}
	return r.commit(ctx, t)
}

// AdminUpdate implements [Repository.AdminUpdate]: a move deletes the old
// period (conditional on prev), puts the new one (its key must be free),
// moves the ID pointer and updates the subscription item, atomically.
func (r *SingleTableRepository) AdminUpdate(ctx context.Context, prev, next *billing.Period) error {
	if layout.BillingDateKey(next) == layout.BillingDateKey(prev) {
		return r.Update(ctx, prev, next)
	}
	if err := layout.ValidateUpdate(prev, next, true); err != nil {
		return err
	}
	ref, err := layout.EngineRef(prev)
	if err != nil {
		return err
	}
	t := newSTTx("admin update")
	cond := updateCondition(prev)
	t.add(types.TransactWriteItem{Delete: &types.Delete{TableName: r.table(),
		Key:                 map[string]types.AttributeValue{layout.AttrPK: stringAV(r.tbl.AccountPK(ref.AccountID)), layout.AttrSK: stringAV(layout.PeriodSK(ref, layout.BillingDateKey(prev)))},
		ConditionExpression: cond.Condition(), ExpressionAttributeNames: cond.Names(), ExpressionAttributeValues: cond.Values()}},
		txOp{key: prev.Key(), reason: staleReason})
	if err := r.putPeriod(t, prev, next, nil); err != nil {
		return err
	}
	// The pointer of the same ID and user is rewritten in place by putPeriod.
	t.chain(ref).deleted = append(t.chain(ref).deleted, layout.BillingDateKey(prev))
	return r.commit(ctx, t)
}

// storedPeriod is a period as AddAll read it: item is nil when there was
// none.
type storedPeriod struct {
	item  map[string]av.AttributeValue
	noRow bool // the period's history row is stored already: it is not put
}

// AddAll implements [Repository.AddAll]. It reads the stored periods at
// the batch's keys with a consistent read, then writes with
// transactions, one per subscription and up to [maxAddAllGroup] of its
// records, so that the subscription item always matches its periods.
// Each period's put is conditional on the period as read (absent, or
// still holding its status, last_run_date, attempt and reminder claim),
// and carries the library's own attributes of the period it replaces
// (see [layout.CarryOwned]). History rows are never overwritten: they are
// placed first ([layout.PlanHistoryRows]), a record whose history key
// holds another row moving to a free last_run_date, and each row's put
// is conditional on its key being free. A group with a period in flight is not written, nor is
// one whose transaction fails (a period changed since the read, a
// failed request): its records are named in the [*billing.BatchError]
// (wrapping [billing.ErrAttemptInFlight], or the transaction's error:
// [billing.ErrConflict] for a changed period).
func (r *SingleTableRepository) AddAll(ctx context.Context, subs []billing.Period) ([]billing.Period, error) {
	resolved, err := r.cfg.Collisions(subs)
	if err != nil {
		return nil, err
	}
	groups, err := layout.SingleTableGroups(resolved)
	if err != nil {
		return nil, err
	}
	stored, err := r.readPeriods(ctx, resolved)
	if err != nil {
		return resolved, &billing.BatchError{Unwritten: keysOf(resolved), Err: err}
	}
	plans, err := r.planRows(ctx, resolved, stored)
	if err != nil {
		return resolved, &billing.BatchError{Unwritten: keysOf(resolved), Err: err}
	}
	be := &billing.BatchError{}
	var errs []error
	for _, g := range groups {
		var gerr error
		for _, i := range g {
			if stored[i] != nil && layout.ItemInFlight(stored[i]) {
				gerr = &billing.ConflictError{Op: "add all", Key: resolved[i].Key(), Reason: "the record is in flight: not overwritten", Err: billing.ErrAttemptInFlight}
				break
			}
			if plans[i].Err != nil {
				gerr = plans[i].Err
				break
			}
			if stored[i] != nil && !plans[i].RowStored && layout.ChangedSince(stored[i], resolved[i].LastRunDate) {
				gerr = layout.StaleCopyError(&resolved[i])
				break
			}
		}
		if gerr == nil {
			t := newSTTx("add all")
			for _, i := range g {
				p := plans[i]
				resolved[i].LastRunDate = p.LastRunDate
				if p.RowStored && stored[i] != nil && layout.WrittenSince(stored[i], p.LastRunDate) {
					continue // written by an earlier try, and maybe changed since
				}
				if err := r.putPeriod(t, nil, &resolved[i], &storedPeriod{item: stored[i], noRow: p.RowStored}); err != nil {
					return resolved, err
				}
			}
			if len(t.items) > 0 {
				gerr = r.commit(ctx, t)
			}
		}
		if gerr != nil {
			errs = append(errs, gerr)
			for _, i := range g {
				be.Unwritten = append(be.Unwritten, resolved[i].Key())
			}
		}
	}
	if len(be.Unwritten) > 0 {
		be.Err = errors.Join(errs...)
		return resolved, be
	}
	return resolved, nil
}

// planRows places the history rows of recs over the rows stored (see
// [layout.PlanHistoryRows]); stored are the periods at their keys.
func (r *SingleTableRepository) planRows(ctx context.Context, recs []billing.Period, stored []map[string]av.AttributeValue) ([]layout.RowPlan, error) {
	refs := make([]layout.SubscriptionRef, len(recs))
	for i := range recs {
		ref, err := layout.EngineRef(&recs[i])
		if err != nil {
			return nil, err
		}
		refs[i] = ref
	}
	rr := &rowReader{client: r.cfg.Client, bw: r.bw, table: r.tbl.Table,
		key: func(i int, lrd string) map[string]types.AttributeValue {
			return map[string]types.AttributeValue{layout.AttrPK: stringAV(r.tbl.AccountPK(refs[i].AccountID)), layout.AttrSK: stringAV(layout.HistorySK(refs[i], lrd))}
		},
		span: func(i int, lo, hi string) *dynamodb.QueryInput {
			expr := keyRange(layout.AttrPK, r.tbl.AccountPK(refs[i].AccountID), layout.AttrSK, layout.HistorySK(refs[i], lo), layout.HistorySK(refs[i], hi))
			return &dynamodb.QueryInput{TableName: r.table(), KeyConditionExpression: expr.KeyCondition(),
				ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(), ConsistentRead: aws.Bool(true)}
		}}
	return rr.planRows(ctx, recs, func(i int, at time.Time) (map[string]av.AttributeValue, error) {
		rec := recs[i].Clone()
		rec.LastRunDate = at
		prim, err := r.periodItem(refs[i], &rec)
		if err != nil {
			return nil, err
		}
		hist, err := r.historyItem(refs[i], &rec)
		if err != nil {
			return nil, err
		}
		layout.CarryOwned(prim, hist, stored[i])
		layout.CarryProration(prim, hist, stored[i])
		layout.CarryDunning(prim, hist, stored[i])
		return hist, nil
	})
}

// readPeriods reads the stored periods at the keys of recs with
// consistent reads, in the order of recs (nil where there is none).
func (r *SingleTableRepository) readPeriods(ctx context.Context, recs []billing.Period) ([]map[string]av.AttributeValue, error) {
	keys := make([]map[string]types.AttributeValue, len(recs))
	for i := range recs {
		ref, err := layout.EngineRef(&recs[i])
		if err != nil {
			return nil, err
		}
		keys[i] = map[string]types.AttributeValue{layout.AttrPK: stringAV(r.tbl.AccountPK(ref.AccountID)), layout.AttrSK: stringAV(layout.PeriodSK(ref, layout.BillingDateKey(&recs[i])))}
	}
	items, err := readItems(ctx, r.cfg.Client, r.bw, r.tbl.Table, keys)
	if err != nil {
		return nil, fmt.Errorf("billing: add all: reading the stored periods: %w", err)
	}
	return sdkav.FromSDKItems(items), nil
}
