package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"github.com/dynabill/billing/internal/av"
	"github.com/dynabill/billing/internal/sdkav"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/cursor"
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/internal/timefmt"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Config configures [NewRepository] and [NewHistory].
type Config struct {
	// Client talks to DynamoDB; *dynamodb.Client satisfies it. Required.
	Client API
	// Tables names the tables and indexes and picks the status index mode.
	// Defaults to the existing deployment's names, legacy status index.
	Tables TableConfig
	// PageSize is the number of items a status page reads (DynamoDB's
	// Limit). Defaults to 100.
	PageSize int
	// Collisions resolves duplicate keys in AddAll. Defaults to
	// the legacy rule: of the records of one user sharing a billing_date, the
	// SCHEDULED one (else the first) keeps the date and every other moves on
	// by whole hours; records sharing a last_run_date by nanoseconds. A
	// policy returns the records to write (copies) or an error.
	Collisions func(batch []billing.Period) ([]billing.Period, error)
	// BatchRetries is how many times a batch chunk with unprocessed items or
	// a failed request is retried. Defaults to 8.
	BatchRetries int
	// BatchBackoff is the first retry delay; it doubles per attempt (with
	// full jitter) up to BatchMaxBackoff. Defaults to 50ms.
	BatchBackoff time.Duration
	// BatchMaxBackoff caps the retry delay. Defaults to 5s.
	BatchMaxBackoff time.Duration
	// Logger receives debug and warning logs. Defaults to discarding them.
	Logger *slog.Logger
	// MeterProvider makes the DynamoDB latency metric (see
	// the dynabill.dynamodb.duration histogram); every call of Client is timed. Defaults to
	// otel.GetMeterProvider(), a no-op unless the host installs a global
	// provider.
	MeterProvider metric.MeterProvider
	// TracerProvider makes a client span per DynamoDB call (see
	// the dynabill.dynamodb.OPERATION spans). Defaults to otel.GetTracerProvider(), a no-op
	// unless the host installs a global provider.
	TracerProvider trace.TracerProvider
}

func (c Config) withDefaults() (Config, error) {
	if c.Client == nil {
		return c, errors.New("billing: DynamoConfig.Client is required")
	}
	if err := c.Tables.validate(); err != nil {
		return c, err
	}
	if c.PageSize < 0 {
		return c, fmt.Errorf("billing: DynamoConfig.PageSize: negative %d", c.PageSize)
	}
	if c.BatchRetries < 0 {
		return c, fmt.Errorf("billing: DynamoConfig.BatchRetries: negative %d", c.BatchRetries)
	}
	c.Tables = c.Tables.WithDefaults()
	if c.PageSize == 0 {
		c.PageSize = 100
	}
	if c.Collisions == nil {
		c.Collisions = layout.DefaultCollisionPolicy
	}
	if c.BatchRetries == 0 {
		c.BatchRetries = 8
	}
	if c.BatchBackoff <= 0 {
		c.BatchBackoff = 50 * time.Millisecond
	}
	if c.BatchMaxBackoff <= 0 {
		c.BatchMaxBackoff = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.Client = instrumentDynamo(c.Client, newTelemetry(c.MeterProvider, c.TracerProvider))
	return c, nil
}

func (c Config) batchWriter() *batchWriter {
	return &batchWriter{
		client: c.Client, retries: c.BatchRetries, baseDelay: c.BatchBackoff, maxDelay: c.BatchMaxBackoff,
		keyAttrs: map[string][2]string{
			c.Tables.Subscriptions: {layout.AttrUserID, layout.AttrBillingDate},
			c.Tables.History:       {layout.AttrUserID, layout.AttrLastRunDate},
		},
	}
}

// Repository is the [Repository] on the legacy billing-activity and
// billing-activity-history tables.
type Repository struct {
	cfg    Config
	bw     *batchWriter
	totals *dayTotals // nil: no totals kept
}

var _ billing.Repository = (*Repository)(nil)

// NewRepository returns a Repository on the tables of cfg.Tables.
func NewRepository(cfg Config) (*Repository, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &Repository{cfg: cfg, bw: cfg.batchWriter()}
	if cfg.Tables.Totals != "" {
		r.totals = &dayTotals{client: cfg.Client, table: cfg.Tables.Totals, pk: totalsTablePK, sk: totalsTableSK, shards: cfg.Tables.TotalsShards}
	}
	return r, nil
}

// mustBuild builds an expression whose operands are all set (names and
// values never empty): the builder fails only on empty operands.
func mustBuild(b expression.Builder) expression.Expression {
	expr, err := b.Build()
	if err != nil {
		panic("billing: expression: " + err.Error())
	}
	return expr
}

// absent is the condition that no item with the key exists: the partition
// key attribute pk is not there.
func absent(pk string) expression.Expression {
	return mustBuild(expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(pk))))
}

// putAbsent is the put of item into table conditional on absent(pk): it
// creates the item, never overwrites one.
func putAbsent(table *string, item map[string]av.AttributeValue, pk string) *types.Put {
	return putAbsentSDK(table, sdkav.ToSDK(item), pk)
}

// putAbsentSDK is [putAbsent] of an item built in the SDK's form.
func putAbsentSDK(table *string, item map[string]types.AttributeValue, pk string) *types.Put {
	expr := absent(pk)
	return &types.Put{TableName: table, Item: item, ConditionExpression: expr.Condition(), ExpressionAttributeNames: expr.Names()}
}

// keyEquals is the key condition name = v on a string key attribute.
func keyEquals(name, v string) expression.Expression {
	return mustBuild(expression.NewBuilder().WithKeyCondition(expression.Key(name).Equal(exprValue(layout.StringAV(v)))))
}

// Add implements [Repository.Add]. The legacy tables hold one
// subscription a user: a new SCHEDULED or PAUSED record is refused with a
// [*billing.OpenSubscriptionError] when a consistent read of the user's
// records finds a SCHEDULED or PAUSED one at another key (one at the same
// key is the transaction's [billing.ErrAlreadyExists], as for any
// record). Records in other statuses (history imports, closed periods)
// are added without the read.
//
// The read and the write are not one transaction: a condition can only
// fence the item written, not the user's other items, so two Adds of
// open records at different keys for a user with none may both succeed.
// The collector reports a record it finds beside the period it handles
// that is neither that period nor its successor
// ([billing.EventUnexpectedRecord]) rather than collect it for the
// subscription.
func (r *Repository) Add(ctx context.Context, sub *billing.Period) error {
	hist, err := layout.EncodeHistoryItem(sub)
	if err != nil {
		return err
	}
	if err := r.refuseSecondOpen(ctx, sub); err != nil {
		return err
	}
	prim, _ := layout.EncodeItem(sub)
	withDue(prim, sub, r.cfg.Tables.DueShards)
	items := []types.TransactWriteItem{
		{Put: putAbsent(&r.cfg.Tables.Subscriptions, prim, layout.AttrUserID)},
		{Put: putAbsent(&r.cfg.Tables.History, hist, layout.AttrUserID)},
	}
	ops := []txOp{
		{key: sub.Key(), reason: "a record with this user_id and billing_date exists", exists: true},
		{key: sub.Key(), reason: "a history row with this user_id and last_run_date exists", exists: true, history: true},
	}
	ti, to := r.totals.actions(write{nil, sub})
	items, ops = append(items, ti...), append(ops, to...)
	err = transact(ctx, r.cfg.Client, &dynamodb.TransactWriteItemsInput{TransactItems: items}, len(ti) > 0)
	return translateWrite("add", ops, err)
}

// refuseSecondOpen returns the *billing.OpenSubscriptionError of adding
// sub when sub is open (SCHEDULED or PAUSED) and a consistent read of its
// user's records finds an open one at another billing_date, else nil.
func (r *Repository) refuseSecondOpen(ctx context.Context, sub *billing.Period) error {
	if !layout.OpenStatus(sub.Status) {
		return nil
	}
	bd := layout.BillingDateKey(sub)
	expr := mustBuild(expression.NewBuilder().
		WithKeyCondition(expression.Key(layout.AttrUserID).Equal(exprValue(layout.StringAV(sub.UserID)))).
		WithProjection(expression.NamesList(expression.Name(layout.AttrBillingDate), expression.Name(layout.AttrBillingStatus))))
	in := &dynamodb.QueryInput{
		TableName:                 &r.cfg.Tables.Subscriptions,
		KeyConditionExpression:    expr.KeyCondition(),
		ProjectionExpression:      expr.Projection(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		ConsistentRead:            aws.Bool(true),
	}
	var open error
	for out, err := range queryPages(ctx, r.cfg.Client, in) {
		if err != nil {
			return fmt.Errorf("billing: add (%s): reading the user's records: %w", sub.Key(), err)
		}
		for _, it := range out.Items {
			st, other := billing.Status(stringOf(it[layout.AttrBillingStatus])), stringOf(it[layout.AttrBillingDate])
			switch {
			case other == bd:
				return nil // the key is taken: the transaction says so
			case open == nil && layout.OpenStatus(st):
				open = &billing.OpenSubscriptionError{UserID: sub.UserID, New: sub.Key(), Open: keyString(sub.UserID, other), Status: st}
			}
		}
	}
	return open
}

// Get implements [Repository.Get].
func (r *Repository) Get(ctx context.Context, userID string, billingDate time.Time) (billing.Period, error) {
	return getByDate(ctx, r.getKey, userID, billingDate)
}

func (r *Repository) getKey(ctx context.Context, userID, billingDate string) (billing.Period, error) {
	key := keyString(userID, billingDate)
	out, err := r.cfg.Client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &r.cfg.Tables.Subscriptions,
		Key:            map[string]types.AttributeValue{layout.AttrUserID: stringAV(userID), layout.AttrBillingDate: stringAV(billingDate)},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return billing.Period{}, fmt.Errorf("billing: get (%s): %w", key, err)
	}
	if len(out.Item) == 0 {
		return billing.Period{}, fmt.Errorf("%w: record %s", billing.ErrNotFound, key)
	}
	return decodeRecord(sdkav.FromSDK(out.Item))
}

func keyString(userID, billingDate string) string {
	return "user_id=" + userID + " billing_date=" + billingDate
}

// GetByID implements [Repository.GetByID]: an index query, then a consistent
// read of each key found (an index lagging behind an AdminUpdate may still
// list the old key).
func (r *Repository) GetByID(ctx context.Context, subscriptionID string) (billing.Period, error) {
	if subscriptionID == "" {
		return billing.Period{}, fmt.Errorf("%w: empty subscription ID", billing.ErrNotFound)
	}
	expr := keyEquals(layout.AttrSubscriptionID, subscriptionID)
	in := &dynamodb.QueryInput{
		TableName:                 &r.cfg.Tables.Subscriptions,
		IndexName:                 &r.cfg.Tables.SubscriptionIDIndex,
		KeyConditionExpression:    expr.KeyCondition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	}
	for out, err := range queryPages(ctx, r.cfg.Client, in) {
		if err != nil {
			return billing.Period{}, fmt.Errorf("billing: get by id %s: %w", subscriptionID, err)
		}
		for _, it := range out.Items {
			sub, err := r.getKey(ctx, stringOf(it[layout.AttrUserID]), stringOf(it[layout.AttrBillingDate]))
			if errors.Is(err, billing.ErrNotFound) {
				continue
			}
			if err != nil {
				return billing.Period{}, err
			}
			if sub.SubscriptionID == subscriptionID {
				return sub, nil
			}
		}
	}
	return billing.Period{}, fmt.Errorf("%w: subscription_id %s", billing.ErrNotFound, subscriptionID)
}

// ListByUser implements [Repository.ListByUser]. Items that do not decode
// are skipped: logged at Warn and reported (see [billing.WithInvalidItems]).
func (r *Repository) ListByUser(ctx context.Context, userID string) ([]billing.Period, error) {
	return r.queryUser(ctx, userID, true, 0)
}

// Recent implements [Repository.Recent]. Items that do not decode are
// skipped: logged at Warn and reported (see [billing.WithInvalidItems]);
// the read goes on past them, so that they take no record's place.
func (r *Repository) Recent(ctx context.Context, userID string, limit int) ([]billing.Period, error) {
	return r.queryUser(ctx, userID, false, recentLimit(limit))
}

func (r *Repository) queryUser(ctx context.Context, userID string, forward bool, limit int) ([]billing.Period, error) {
	expr := keyEquals(layout.AttrUserID, userID)
	in := &dynamodb.QueryInput{
		TableName:                 &r.cfg.Tables.Subscriptions,
		KeyConditionExpression:    expr.KeyCondition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		ScanIndexForward:          aws.Bool(forward),
		ConsistentRead:            aws.Bool(true),
	}
	op := "list user " + userID
	subs, err := userRead{client: r.cfg.Client, logger: r.cfg.Logger, op: op, decode: decodeRecord}.query(ctx, in, limit)
	if err != nil {
		return nil, fmt.Errorf("billing: %s: %w", op, err)
	}
	return subs, nil
}

// statusCursorNames are the attributes of a status index LastEvaluatedKey.
var statusCursorNames = []string{layout.AttrUserID, layout.AttrBillingDate, layout.AttrBillingStatus}

func (r *Repository) cursorScope(st billing.Status) string {
	t := r.cfg.Tables
	return "status/" + t.StatusIndexMode.String() + "/" + t.Subscriptions + "/" + t.StatusIndex + "/" + string(st)
}

// QueryStatus implements [Repository.QueryStatus]. In legacy mode the date
// bounds are a filter over every record of the status; in sorted mode they
// are a key condition (plus the same filter for exactness when both ends are
// bounded).
func (r *Repository) QueryStatus(ctx context.Context, q billing.StatusQuery) (billing.Page, error) {
	if err := q.Validate(); err != nil {
		return billing.Page{}, err
	}
	if r.cfg.Tables.StatusIndexMode == StatusIndexDue {
		return r.queryDue(ctx, q)
	}
	shards, err := q.ShardsIn(r.cfg.Tables.DueShards)
	if err != nil {
		return billing.Page{}, err
	}
	scope := r.cursorScope(q.Status) + shardScope(q.Shards, shards)
	start, err := cursor.Decode(scope, q.Cursor, statusCursorNames...)
	if err != nil {
		return billing.Page{}, fmt.Errorf("%w: %v", billing.ErrInvalidCursor, err)
	}
	if start != nil && stringOf(start[layout.AttrBillingStatus]) != string(q.Status) {
		return billing.Page{}, fmt.Errorf("%w: cursor of another status", billing.ErrInvalidCursor)
	}
	expr, err := r.statusConditions(q)
	if err != nil {
		return billing.Page{}, err
	}
	page, next, err := r.statusPage(ctx, q, shards, expr, start)
	if err != nil {
		return billing.Page{}, fmt.Errorf("billing: status page %s: %w", q.Status, err)
	}
	if page.Next, err = cursor.Encode(scope, next); err != nil {
		return billing.Page{}, fmt.Errorf("billing: status page %s: cursor: %w", q.Status, err)
	}
	return page, nil
}

// statusPage reads one page of q from the status index with expr's
// conditions from start (the query's Limit, else the page size) and
// returns the records of q's status and shards it found, and the index's
// LastEvaluatedKey.
func (r *Repository) statusPage(ctx context.Context, q billing.StatusQuery, shards []int, expr expression.Expression, start map[string]av.AttributeValue) (billing.Page, map[string]av.AttributeValue, error) {
	limit := q.Limit
	if limit == 0 {
		limit = r.cfg.PageSize
	}
	out, err := r.cfg.Client.Query(ctx, &dynamodb.QueryInput{
		TableName:                 &r.cfg.Tables.Subscriptions,
		IndexName:                 &r.cfg.Tables.StatusIndex,
		KeyConditionExpression:    expr.KeyCondition(),
		FilterExpression:          expr.Filter(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		ExclusiveStartKey:         sdkav.ToSDK(start),
		Limit:                     aws.Int32(int32(min(limit, 1<<30))),
	})
	if err != nil {
		return billing.Page{}, nil, err
	}
	page := billing.Page{Scanned: int(out.ScannedCount)}
	r.addItems(ctx, &page, q, out.Items, shards)
	return page, sdkav.FromSDK(out.LastEvaluatedKey), nil
}

// statusConditions builds the key condition and filter of a status query
// on the status index.
func (r *Repository) statusConditions(q billing.StatusQuery) (expression.Expression, error) {
	keyCond := expression.Key(layout.AttrBillingStatus).Equal(exprValue(layout.StringAV(string(q.Status))))
	return dateConditions(q, keyCond, r.cfg.Tables.StatusIndexMode == StatusIndexSorted)
}

// dateConditions builds the key condition and filter of a query of q's
// billing_date range on an index whose partition key condition is
// keyCond: with billing_date as the index's sort key (sorted) the range
// is a key condition, else a filter.
func dateConditions(q billing.StatusQuery, keyCond expression.KeyConditionBuilder, sorted bool) (expression.Expression, error) {
	date := expression.Name(layout.AttrBillingDate)
	var filters []expression.ConditionBuilder
	var keyDate expression.KeyConditionBuilder // the one bound of a sorted index
	value := func(t time.Time) (expression.ValueBuilder, error) {
		v, err := timefmt.Seconds(t)
		if err != nil {
			return expression.ValueBuilder{}, fmt.Errorf("%w: %v", billing.ErrInvalidQuery, err)
		}
		return exprValue(layout.StringAV(v)), nil
	}
	if !q.Since.IsZero() {
		v, err := value(q.Since)
		if err != nil {
			return expression.Expression{}, err
		}
		filters = append(filters, date.GreaterThanEqual(v))
		keyDate = expression.Key(layout.AttrBillingDate).GreaterThanEqual(v)
	}
	if !q.After.IsZero() {
		v, err := value(q.After)
		if err != nil {
			return expression.Expression{}, err
		}
		filters = append(filters, date.GreaterThan(v))
		keyDate = expression.Key(layout.AttrBillingDate).GreaterThan(v)
	}
	if !q.Before.IsZero() {
		v, err := value(q.Before)
		if err != nil {
			return expression.Expression{}, err
		}
		filters = append(filters, date.LessThan(v))
		keyDate = expression.Key(layout.AttrBillingDate).LessThan(v)
	}
	b := expression.NewBuilder()
	switch {
	case len(filters) == 0:
		b = b.WithKeyCondition(keyCond)
	case !sorted:
		b = b.WithKeyCondition(keyCond).WithFilter(joinAnd(filters))
	case len(filters) == 1:
		b = b.WithKeyCondition(keyCond.And(keyDate))
	default:
		// Both ends bounded: the key condition allows one BETWEEN
		// (inclusive); whole-second keys make [lo, hi-1s] the same range,
		// and the filter keeps the exact bounds.
		lo := q.Since
		if lo.IsZero() {
			lo = q.After.Truncate(time.Second).Add(time.Second)
		}
		hi := q.Before.Truncate(time.Second).Add(-time.Second)
		if hi.Before(lo) {
			hi = lo
		}
		lov, err := value(lo)
		if err != nil {
			return expression.Expression{}, err
		}
		hiv, err := value(hi)
		if err != nil {
			return expression.Expression{}, err
		}
		b = b.WithKeyCondition(keyCond.And(expression.Key(layout.AttrBillingDate).Between(lov, hiv))).WithFilter(joinAnd(filters))
	}
	expr, err := b.Build()
	if err != nil {
		return expression.Expression{}, fmt.Errorf("billing: status page %s: %w", q.Status, err)
	}
	return expr, nil
}

// joinAnd is the conjunction of one or more conditions.
func joinAnd(conds []expression.ConditionBuilder) expression.ConditionBuilder {
	if len(conds) == 1 {
		return conds[0]
	}
	return expression.And(conds[0], conds[1], conds[2:]...)
}

// updateCondition is the fence of Update, AdminUpdate and SetAttempt: the
// stored record still has the status, last_run_date and attempt fields the
// writer read.
func updateCondition(prev *billing.Period) expression.Expression {
	return mustBuild(expression.NewBuilder().WithCondition(fence(prev)))
}

// fence is updateCondition's condition, for expressions that add to it.
func fence(prev *billing.Period) expression.ConditionBuilder {
	cond := expression.AttributeExists(expression.Name(layout.AttrUserID)).
		And(expression.Name(layout.AttrBillingStatus).Equal(exprValue(string(prev.Status))))
	if lr := layout.LastRunDateKey(prev); lr != "" {
		cond = cond.And(expression.Name(layout.AttrLastRunDate).Equal(exprValue(lr)))
	} else {
		cond = cond.And(expression.AttributeNotExists(expression.Name(layout.AttrLastRunDate)))
	}
	for name, n := range map[string]int{layout.AttrAttempt: prev.Attempt, layout.AttrAttemptNumber: prev.LastAttempt.Number} {
		v := expression.Name(name).Equal(exprValue(&types.AttributeValueMemberN{Value: strconv.Itoa(n)}))
		if n == 0 {
			v = expression.AttributeNotExists(expression.Name(name)).Or(v)
		}
		cond = cond.And(v)
	}
	return cond
}

// attemptUpdate is SetAttempt's write on the fence of prev: the
// write-back of prev to next (see [writeBack]), which ValidateAttemptUpdate
// has checked differ in their attempt attributes only.
func attemptUpdate(prev, next *billing.Period) (expression.Expression, error) {
	if err := layout.ValidateAttemptUpdate(prev, next); err != nil {
		return expression.Expression{}, err
	}
	before, _ := layout.EncodeItem(prev)
	after, _ := layout.EncodeItem(next)
	upd := writeBack(before, after, []string{layout.AttrUserID, layout.AttrBillingDate}, nil)
	expr, err := expression.NewBuilder().WithUpdate(upd).WithCondition(fence(prev)).Build()
	if err != nil {
		return expression.Expression{}, fmt.Errorf("billing: set attempt (%s): %w", prev.Key(), err)
	}
	return expr, nil
}

const staleReason = "the record changed since it was read (status or last_run_date differ) or was deleted"

// SetAttempt implements [Repository.SetAttempt] with one conditional
// UpdateItem.
func (r *Repository) SetAttempt(ctx context.Context, prev, next *billing.Period) error {
	key := map[string]types.AttributeValue{layout.AttrUserID: stringAV(prev.UserID), layout.AttrBillingDate: stringAV(layout.BillingDateKey(prev))}
	return setAttempt(ctx, r.cfg.Client, &r.cfg.Tables.Subscriptions, key, prev, next)
}

// setAttempt writes next's attempt on prev's item at key with one
// UpdateItem conditional on prev's fence: both layouts store a record's
// attempt the same way and differ only in its key.
func setAttempt(ctx context.Context, client API, table *string, key map[string]types.AttributeValue, prev, next *billing.Period) error {
	expr, err := attemptUpdate(prev, next)
	if err != nil {
		return err
	}
	_, err = client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: table, Key: key,
		UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	})
	return translateWrite("set attempt", []txOp{{key: prev.Key(), reason: staleReason}}, err)
}

// checkUpdate checks what Update of either layout requires before it
// builds anything: a valid change of prev into next and few enough
// records to create in the same transaction.
func checkUpdate(prev, next *billing.Period, create []*billing.Period) error {
	if err := layout.ValidateUpdate(prev, next, false); err != nil {
		return err
	}
	if len(create) > billing.MaxUpdateCreates {
		return fmt.Errorf("billing: update (%s): %d records to create, at most %d", prev.Key(), len(create), billing.MaxUpdateCreates)
	}
	return nil
}

// Update implements [Repository.Update]. The record is written back with
// an update of only the attributes whose encoding changes from prev to
// next (SET, or REMOVE when next omits one): every other attribute of the
// stored item keeps its bytes, whatever form a legacy writer gave them
// (a timestamp text, an empty string, a NULL, an N "0"), and so do data_
// attributes other services put on the item and attributes the library has
// never heard of. The update is conditional on the fence of prev (status,
// last_run_date and attempt as read); the history row is a new item, a
// full put of next.
func (r *Repository) Update(ctx context.Context, prev, next *billing.Period, create ...*billing.Period) error {
	if err := checkUpdate(prev, next, create); err != nil {
		return err
	}
	upd, err := r.writeBackAction(prev, next)
	if err != nil {
		return err
	}
	hist, _ := layout.EncodeHistoryItem(next)
	items := []types.TransactWriteItem{
		{Update: upd},
		{Put: putAbsent(&r.cfg.Tables.History, hist, layout.AttrUserID)},
	}
	ops := []txOp{
		{key: prev.Key(), reason: staleReason},
		{key: next.Key(), reason: "a history row with this user_id and last_run_date exists", history: true},
	}
	if err := layout.ValidateCreates(prev, next, create); err != nil {
		return err
	}
	for _, c := range create {
		ch, _ := layout.EncodeHistoryItem(c)
		cp, _ := layout.EncodeItem(c)
		withDue(cp, c, r.cfg.Tables.DueShards)
		items = append(items,
			types.TransactWriteItem{Put: putAbsent(&r.cfg.Tables.Subscriptions, cp, layout.AttrUserID)},
			types.TransactWriteItem{Put: putAbsent(&r.cfg.Tables.History, ch, layout.AttrUserID)})
		ops = append(ops,
			txOp{key: c.Key(), reason: "a record to create exists", exists: true},
			txOp{key: c.Key(), reason: "a history row of a record to create exists", exists: true, history: true})
	}
	writes := []write{{prev, next}}
	for _, c := range create {
		writes = append(writes, write{nil, c})
	}
	ti, to := r.totals.actions(writes...)
	items, ops = append(items, ti...), append(ops, to...)
	err = transact(ctx, r.cfg.Client, &dynamodb.TransactWriteItemsInput{TransactItems: items}, len(ti) > 0)
	return translateWrite("update", ops, err)
}

// writeBackAction is the update action of Update: the change from prev's
// encoding to next's (see [writeBack]) on prev's key, conditional on the
// fence of prev.
func (r *Repository) writeBackAction(prev, next *billing.Period) (*types.Update, error) {
	prevItem, err := layout.EncodeItem(prev)
	if err != nil {
		return nil, err
	}
	nextItem, _ := layout.EncodeItem(next) // ValidateUpdate encoded it
	withDue(nextItem, next, r.cfg.Tables.DueShards)
	writesDue(prevItem, next, r.cfg.Tables.DueShards)
	key := map[string]types.AttributeValue{layout.AttrUserID: stringAV(prev.UserID), layout.AttrBillingDate: stringAV(layout.BillingDateKey(prev))}
	upd, err := updateAction(&r.cfg.Tables.Subscriptions, key, prevItem, nextItem, fence(prev), layout.AttrLastRunDate)
	if err != nil {
		return nil, fmt.Errorf("billing: update (%s): %w", prev.Key(), err)
	}
	return upd, nil
}

// AdminUpdate implements [Repository.AdminUpdate]. With an unchanged
// billing_date it is [Repository.Update]: only the changed attributes
// are written. A changed billing_date is a move, one transaction of the
// conditional delete of prev's item, the put of next's under the new key and
// the history row. The new item is written from the records, so the
// attributes the library knows are written canonically (as EncodeItem
// writes them; a legacy text form of a timestamp is not kept), while the
// attributes it does not own are carried over: unknown ones (prev's Extra,
// which next carries) and the data_ attributes of prev's primary item
// (prev's Data) keep their values.
func (r *Repository) AdminUpdate(ctx context.Context, prev, next *billing.Period) error {
	if layout.BillingDateKey(next) == layout.BillingDateKey(prev) {
		return r.Update(ctx, prev, next)
	}
	if err := layout.ValidateUpdate(prev, next, true); err != nil {
		return err
	}
	prim, _ := layout.EncodeItem(next) // ValidateUpdate encoded it
	carryData(prim, prev)
	withDue(prim, next, r.cfg.Tables.DueShards)
	hist, _ := layout.EncodeHistoryItem(next)
	cond := updateCondition(prev)
	items := []types.TransactWriteItem{
		{Delete: &types.Delete{TableName: &r.cfg.Tables.Subscriptions,
			Key:                 map[string]types.AttributeValue{layout.AttrUserID: stringAV(prev.UserID), layout.AttrBillingDate: stringAV(layout.BillingDateKey(prev))},
			ConditionExpression: cond.Condition(), ExpressionAttributeNames: cond.Names(), ExpressionAttributeValues: cond.Values()}},
		{Put: putAbsent(&r.cfg.Tables.Subscriptions, prim, layout.AttrUserID)},
		{Put: putAbsent(&r.cfg.Tables.History, hist, layout.AttrUserID)},
	}
	ops := []txOp{
		{key: prev.Key(), reason: staleReason},
		{key: next.Key(), reason: "new billing_date taken: a record with that key exists", taken: true},
		{key: next.Key(), reason: "a history row with this user_id and last_run_date exists", history: true},
	}
	ti, to := r.totals.actions(write{prev, next})
	items, ops = append(items, ti...), append(ops, to...)
	err := transact(ctx, r.cfg.Client, &dynamodb.TransactWriteItemsInput{TransactItems: items}, len(ti) > 0)
	return translateWrite("admin update", ops, err)
}

// maxBatchGet is DynamoDB's limit of keys in one BatchGetItem.
const maxBatchGet = 100

func keysOf(recs []billing.Period) []string {
	out := make([]string, len(recs))
	for i := range recs {
		out[i] = recs[i].Key()
	}
	return out
}

// ClientOf returns the client a [Repository], [History]
// or [SingleTableRepository] was configured with (nil for other
// implementations):
// for tests and tools that wrap it to count calls.
func ClientOf(store any) API {
	switch s := store.(type) {
	case *Repository:
		return unwrapDynamo(s.cfg.Client)
	case *History:
		return unwrapDynamo(s.cfg.Client)
	case *SingleTableRepository:
		return unwrapDynamo(s.cfg.Client)
	}
	return nil
}

// recentLimit is Recent's limit: 10 when not positive.
func recentLimit(limit int) int {
	if limit <= 0 {
		return 10
	}
	return limit
}

// getByDate is Get of either layout: the billing_date argument as its
// stored key (whole seconds), read by the layout's getKey.
func getByDate(ctx context.Context, getKey func(context.Context, string, string) (billing.Period, error),
	userID string, billingDate time.Time) (billing.Period, error) {
	bd, err := timefmt.Seconds(billingDate)
	if err != nil {
		return billing.Period{}, fmt.Errorf("%w: billing_date %v: %w", billing.ErrInvalidDate, billingDate, err)
	}
	return getKey(ctx, userID, bd)
}
