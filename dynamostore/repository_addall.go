package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"github.com/dynabill/billing/internal/av"
	"github.com/dynabill/billing/internal/sdkav"
	"maps"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/ddbjson"
	"github.com/dynabill/billing/internal/layout"
	"github.com/google/uuid"
)

// addAllRecord is one record of an AddAll batch on the legacy tables: its
// items and the stored item its write is conditional on.
type addAllRecord struct {
	i      int // index in the resolved batch
	prim   map[string]av.AttributeValue
	hist   map[string]av.AttributeValue
	stored map[string]av.AttributeValue // the item at its key as read; nil when there is none
	noRow  bool                         // its history row is stored already: the item is written alone
}

// Limits of one AddAll transaction: DynamoDB allows 100 actions (a record
// takes two) and 4 MB of items; the size bound leaves room for the
// conditions.
const (
	maxAddAllTx     = 50
	maxAddAllTxSize = 3 << 20
)

// AddAll implements [Repository.AddAll] on the legacy tables. It applies
// the collision policy, reads the stored items at the batch's keys with a
// consistent read, refuses those in flight, places the history rows over
// the stored ones (see [Repository.placeRows]: a record whose history key
// holds another row moves to a free last_run_date; one written by an
// earlier try is not written again), and writes every other record
// with its history row in transactions of up to 50 records, each
// record's put conditional on its stored item as read: absent, or still
// holding the billing_status, last_run_date, attempt count and number and
// reminder claim read, and each row's on its key being free. An existing record is replaced by the new one,
// but the library's own attributes of the stored item the new record
// does not set (its attempt, a reminder's claim) are carried over (see
// [layout.CarryOwned]), and the due key is the new record's.
//
// A failed condition cancels the whole transaction: the records whose
// condition failed are not written (the record changed since it was read:
// a collection may have charged it, and the new record would lose that
// charge), the others of the transaction are written again as they were.
// A record that is in flight or changed is named in the [*billing.BatchError]
// (wrapping [billing.ErrAttemptInFlight] or [billing.ErrConflict]), as is
// every record of a transaction that failed for another reason after the
// retries (throttling, a network error).
func (r *Repository) AddAll(ctx context.Context, subs []billing.Period) ([]billing.Period, error) {
	resolved, err := r.cfg.Collisions(subs)
	if err != nil {
		return nil, err
	}
	recs := make([]*addAllRecord, len(resolved))
	keys := map[string]bool{}
	for i := range resolved {
		hist, err := layout.EncodeHistoryItem(&resolved[i])
		if err != nil {
			return nil, err
		}
		prim, _ := layout.EncodeItem(&resolved[i])
		pk := "p" + keyString(resolved[i].UserID, layout.BillingDateKey(&resolved[i]))
		hk := "h" + resolved[i].UserID + "\x00" + layout.LastRunDateKey(&resolved[i])
		if keys[pk] || keys[hk] {
			// A transaction may not write one item twice.
			return nil, &billing.BatchError{Unwritten: keysOf(resolved), Err: fmt.Errorf("record %d (%s): %w: key twice in one batch after the collision policy",
				i, resolved[i].Key(), billing.ErrAlreadyExists)}
		}
		keys[pk], keys[hk] = true, true
		recs[i] = &addAllRecord{i: i, prim: prim, hist: hist}
	}
	if len(recs) == 0 {
		return resolved, nil
	}
	if err := r.readStored(ctx, resolved, recs); err != nil {
		return resolved, &billing.BatchError{Unwritten: keysOf(resolved), Err: err}
	}
	failed := map[int]error{}
	todo, err := r.placeRows(ctx, resolved, recs, failed)
	if err != nil {
		return resolved, &billing.BatchError{Unwritten: keysOf(resolved), Err: err}
	}
	for len(todo) > 0 {
		var conflicted, retry []*addAllRecord
		for _, g := range addAllGroups(resolved, r.spareInFlight(resolved, todo, failed)) {
			c, rest, err := r.writeGroup(ctx, resolved, g)
			if err != nil {
				for _, rec := range g {
					failed[rec.i] = err
				}
				continue
			}
			conflicted, retry = append(conflicted, c...), append(retry, rest...)
		}
		for _, rec := range conflicted {
			// Changed since it was read: a collection may have charged it,
			// and writing the new record over it would lose that charge.
			failed[rec.i] = &billing.ConflictError{Op: "add all", Key: resolved[rec.i].Key(),
				Reason: "the record changed since it was read (collected, or written by another writer), or its history row's key is another row's: not overwritten", Err: billing.ErrConflict}
		}
		todo = retry
	}
	if len(failed) == 0 {
		return resolved, nil
	}
	be := &billing.BatchError{}
	var errs []error
	for i := range resolved {
		if err, ok := failed[i]; ok {
			be.Unwritten = append(be.Unwritten, resolved[i].Key())
			if !slices.Contains(errs, err) {
				errs = append(errs, err)
			}
		}
	}
	be.Err = errors.Join(errs...)
	return resolved, be
}

// placeRows places the records' history rows so that none replaces a
// stored row (see [layout.PlanHistoryRows]): a record whose key holds
// another row moves to a free last_run_date, which its item takes too
// (resolved and recs are updated), one whose row is stored already is
// written without it, or not at all when its stored item was written at
// or after that row (an earlier try of the batch), and one with no free
// key is noted in failed. It returns the records to write.
func (r *Repository) placeRows(ctx context.Context, resolved []billing.Period, recs []*addAllRecord, failed map[int]error) ([]*addAllRecord, error) {
	plans, err := r.legacyRowReader(resolved).planRows(ctx, resolved, func(i int, at time.Time) (map[string]av.AttributeValue, error) {
		rec := resolved[i].Clone()
		rec.LastRunDate = at
		hist, err := layout.EncodeHistoryItem(&rec)
		if err != nil {
			return nil, err
		}
		prim, _ := layout.EncodeItem(&rec)
		layout.CarryOwned(prim, hist, recs[i].stored)
		layout.CarryProration(prim, hist, recs[i].stored)
		layout.CarryDunning(prim, hist, recs[i].stored)
		return hist, nil
	})
	if err != nil {
		return nil, err
	}
	todo := make([]*addAllRecord, 0, len(recs))
	for i, rec := range recs {
		p := plans[i]
		switch {
		case p.Err != nil:
			failed[i] = p.Err
			continue
		case rec.stored != nil && !p.RowStored && layout.ChangedSince(rec.stored, resolved[i].LastRunDate):
			failed[i] = layout.StaleCopyError(&resolved[i])
			continue
		case p.Moved:
			resolved[i].LastRunDate = p.LastRunDate
			rec.hist, _ = layout.EncodeHistoryItem(&resolved[i]) // it encoded at its own last_run_date
			rec.prim, _ = layout.EncodeItem(&resolved[i])
		}
		if p.RowStored {
			if rec.stored != nil && layout.WrittenSince(rec.stored, p.LastRunDate) {
				continue // written by an earlier try, and maybe changed since
			}
			rec.noRow = true
		}
		todo = append(todo, rec)
	}
	return todo, nil
}

// spareInFlight returns the records of todo whose stored item is not in
// flight, and notes the others in failed: a record whose charge may have
// happened is never overwritten.
func (r *Repository) spareInFlight(resolved []billing.Period, todo []*addAllRecord, failed map[int]error) []*addAllRecord {
	refused := map[string]bool{} // users with a record not written: none of theirs is
	for _, rec := range todo {
		if rec.stored != nil && layout.ItemInFlight(rec.stored) {
			failed[rec.i] = &billing.ConflictError{Op: "add all", Key: resolved[rec.i].Key(),
				Reason: "the record is in flight: not overwritten", Err: billing.ErrAttemptInFlight}
		}
	}
	for i := range failed {
		refused[resolved[i].UserID] = true
	}
	var out []*addAllRecord
	for _, rec := range todo {
		if _, done := failed[rec.i]; done {
			continue
		}
		if refused[resolved[rec.i].UserID] {
			failed[rec.i] = &billing.ConflictError{Op: "add all", Key: resolved[rec.i].Key(),
				Reason: "another record of the user in the batch was not written: a user's records are written together or not at all", Err: billing.ErrConflict}
			continue
		}
		out = append(out, rec)
	}
	return out
}

// addAllGroups splits recs into the records of one transaction each:
// at most maxAddAllTx, and items of at most maxAddAllTxSize bytes, a
// user's records in one transaction (unless they alone pass the bounds),
// so that they are written together or not at all.
func addAllGroups(resolved []billing.Period, recs []*addAllRecord) [][]*addAllRecord {
	var users []string
	byUser := map[string][]*addAllRecord{}
	for _, rec := range recs {
		u := resolved[rec.i].UserID
		if _, ok := byUser[u]; !ok {
			users = append(users, u)
		}
		byUser[u] = append(byUser[u], rec)
	}
	var groups [][]*addAllRecord
	var g []*addAllRecord
	size := 0
	for _, u := range users {
		block, n := byUser[u], 0
		for _, rec := range block {
			n += ddbjson.ItemSize(rec.prim) + ddbjson.ItemSize(rec.stored) + ddbjson.ItemSize(rec.hist)
		}
		if len(g) > 0 && (len(g)+len(block) > maxAddAllTx || size+n > maxAddAllTxSize) {
			groups, g, size = append(groups, g), nil, 0
		}
		for _, rec := range block {
			if len(g) == maxAddAllTx {
				groups, g, size = append(groups, g), nil, 0
			}
			g = append(g, rec)
		}
		size += n
	}
	if len(g) > 0 {
		groups = append(groups, g)
	}
	return groups
}

// writeGroup writes the records of g and their history rows in one
// transaction (see [Repository.addAllPut]). When the transaction is
// cancelled by failed conditions it returns the records whose condition
// failed and the others (neither written). Throttling, concurrent
// transactions and failed requests are retried with backoff: a failed
// request with the same client request token, so that DynamoDB applies a
// transaction that reached it once only; the error is the last one when
// the retries are spent.
func (r *Repository) writeGroup(ctx context.Context, resolved []billing.Period, g []*addAllRecord) (conflicted, rest []*addAllRecord, err error) {
	items := make([]types.TransactWriteItem, 0, 2*len(g))
	owner := make([]*addAllRecord, 0, 2*len(g)) // the record of each action
	for _, rec := range g {
		prim, hist := r.addAllPuts(&resolved[rec.i], rec)
		items, owner = append(items, types.TransactWriteItem{Put: prim}), append(owner, rec)
		if hist != nil {
			items, owner = append(items, types.TransactWriteItem{Put: hist}), append(owner, rec)
		}
	}
	in := &dynamodb.TransactWriteItemsInput{TransactItems: items, ClientRequestToken: aws.String(uuid.NewString())}
	for try := 0; ; try++ {
		_, err := r.cfg.Client.TransactWriteItems(ctx, in)
		if err == nil {
			return nil, nil, nil
		}
		var tce *types.TransactionCanceledException
		if errors.As(err, &tce) {
			for j, reason := range tce.CancellationReasons {
				// A record's put or its history row's (the row's key was
				// taken since it was read, by another writer).
				if aws.ToString(reason.Code) == "ConditionalCheckFailed" && j < len(owner) && !slices.Contains(conflicted, owner[j]) {
					conflicted = append(conflicted, owner[j])
				}
			}
			if len(conflicted) > 0 {
				for _, rec := range g {
					if !slices.Contains(conflicted, rec) {
						rest = append(rest, rec)
					}
				}
				return conflicted, rest, nil
			}
			// Cancelled for another reason (throttled, a concurrent
			// transaction on one of its items): nothing was written, the
			// next try is a new transaction.
			in.ClientRequestToken = aws.String(uuid.NewString())
		}
		if try >= r.bw.retries {
			return nil, nil, fmt.Errorf("billing: add all (%s and %d more): gave up after %d attempts: %w",
				resolved[g[0].i].Key(), len(g)-1, try+1, err)
		}
		if serr := r.bw.sleep(ctx, try); serr != nil {
			return nil, nil, fmt.Errorf("billing: add all (%s and %d more): %w (last failure: %v)", resolved[g[0].i].Key(), len(g)-1, serr, err)
		}
	}
}

// addAllPuts are the puts of rec's item, conditional on its stored item as
// read (see [storedCondition]), and of its history row (nil when
// rec.noRow), conditional on its key being free: history is append-only,
// and a row is never replaced (a retry of a request that reached
// DynamoDB carries the same client request token). The library's own
// attributes of the stored item are carried onto both (see
// [layout.CarryOwned]), and the item gets the new record's due key.
func (r *Repository) addAllPuts(sub *billing.Period, rec *addAllRecord) (prim, hist *types.Put) {
	item, row := maps.Clone(rec.prim), maps.Clone(rec.hist)
	layout.CarryOwned(item, row, rec.stored)
	layout.CarryProration(item, row, rec.stored)
	layout.CarryDunning(item, row, rec.stored)
	withDue(item, sub, r.cfg.Tables.DueShards)
	expr := mustBuild(expression.NewBuilder().WithCondition(storedCondition(rec.stored)))
	prim = &types.Put{TableName: &r.cfg.Tables.Subscriptions, Item: sdkav.ToSDK(item),
		ConditionExpression: expr.Condition(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values()}
	if rec.noRow {
		return prim, nil
	}
	return prim, putAbsent(&r.cfg.Tables.History, row, layout.AttrUserID)
}

// fencedAttributes are the attributes whose stored values AddAll's put of
// an existing record is conditional on: those of [fence] (what a
// collection or an update changes) and the reminder claim, so that what
// it carries is what is stored when it writes.
var fencedAttributes = []string{layout.AttrBillingStatus, layout.AttrLastRunDate, layout.AttrAttempt, layout.AttrAttemptNumber, layout.AttrReminderClaim}

// storedCondition is the condition that the item at a key is still stored
// as read: absent when stored is nil, else present with the
// fencedAttributes of stored, as stored (an attribute stored is absent
// must still be absent).
func storedCondition(stored map[string]av.AttributeValue) expression.ConditionBuilder {
	if stored == nil {
		return expression.AttributeNotExists(expression.Name(layout.AttrUserID))
	}
	cond := expression.AttributeExists(expression.Name(layout.AttrUserID))
	for _, name := range fencedAttributes {
		if v, ok := stored[name]; ok {
			cond = cond.And(expression.Name(name).Equal(exprValue(v)))
		} else {
			cond = cond.And(expression.AttributeNotExists(expression.Name(name)))
		}
	}
	return cond
}

// readStored reads the stored items at the keys of recs with consistent
// reads and sets each record's stored item (nil when there is none).
func (r *Repository) readStored(ctx context.Context, resolved []billing.Period, recs []*addAllRecord) error {
	keys := make([]map[string]types.AttributeValue, len(recs))
	for j, rec := range recs {
		s := &resolved[rec.i]
		keys[j] = map[string]types.AttributeValue{layout.AttrUserID: stringAV(s.UserID), layout.AttrBillingDate: stringAV(layout.BillingDateKey(s))}
	}
	items, err := readItems(ctx, r.cfg.Client, r.bw, r.cfg.Tables.Subscriptions, keys)
	if err != nil {
		return fmt.Errorf("billing: add all: reading the stored records: %w", err)
	}
	for j, rec := range recs {
		rec.stored = sdkav.FromSDK(items[j])
	}
	return nil
}

// readItems reads the items at keys of table (a key's attributes are
// strings) with consistent BatchGetItems of up to 100 keys, and returns
// them in the order of keys, nil where there is none (a key given twice
// is read once and returned twice). Unprocessed keys and
// failed requests are retried with bw's backoff.
func readItems(ctx context.Context, client API, bw *batchWriter, table string, keys []map[string]types.AttributeValue) ([]map[string]types.AttributeValue, error) {
	out := make([]map[string]types.AttributeValue, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	names := slices.Sorted(maps.Keys(keys[0]))
	keyOf := func(item map[string]types.AttributeValue) string {
		var k string
		for _, n := range names {
			k += stringOf(item[n]) + "\x00"
		}
		return k
	}
	for start := 0; start < len(keys); start += maxBatchGet {
		at := map[string][]int{} // a key asked for twice is read once
		var chunk []map[string]types.AttributeValue
		for j, key := range keys[start:min(start+maxBatchGet, len(keys))] {
			k := keyOf(key)
			if len(at[k]) == 0 {
				chunk = append(chunk, key)
			}
			at[k] = append(at[k], start+j)
		}
		req := map[string]types.KeysAndAttributes{table: {Keys: chunk, ConsistentRead: aws.Bool(true)}}
		for try := 0; len(req) > 0; try++ {
			if try > bw.retries {
				return nil, fmt.Errorf("keys still unprocessed after %d tries", try)
			}
			resp, err := client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				if try == bw.retries {
					return nil, err
				}
				if err := bw.sleep(ctx, try); err != nil {
					return nil, err
				}
				continue
			}
			for _, item := range resp.Responses[table] {
				for _, j := range at[keyOf(item)] {
					out[j] = item
				}
			}
			req = resp.UnprocessedKeys
			if len(req) > 0 {
				if err := bw.sleep(ctx, try); err != nil {
					return nil, err
				}
			}
		}
	}
	return out, nil
}
