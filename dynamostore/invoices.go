package dynamostore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/invoicedoc"
)

// Invoices stores invoices and credit notes in DynamoDB: on the legacy
// layout in a table of their own ([TableConfig.Invoices], made by
// [InvoicesTableDefinition]), on the single table as items of the
// account's partition. Every change is one transaction conditional on what
// was read, with its history row; a number is taken from a counter item
// in the transaction that finalizes. Make one with [NewInvoices] or
// [NewSingleTableInvoices].
//
// Cost (measured on the local server): a finalization in the account's
// own sequence is 2 calls (a consistent BatchGetItem of the invoice and
// its counter, and a TransactWriteItems of four actions), 8 WCU for an
// invoice of a few lines; in a host-wide sequence 3 calls (the counter is
// read once more, from its own partition). A draft is one transaction of
// three puts. Each lost race on a
// shared counter costs one more transaction. One sequence is one counter
// item: DynamoDB takes about 1,000 writes a second on an item, fewer under
// contention (transactions on one item are serialized), so a host that
// finalizes more than a few hundred invoices a second on one sequence
// should number per account (the default) or split its sequence by prefix.
type Invoices struct {
	client  API
	clock   billing.Clock
	table   string
	pk, sk  string // key attribute names
	account string // prefix of account partitions
	retries int
	// single: on the single table, where a subscription's user ID
	// (account#subscription#SKU) keeps its invoices in its account's
	// partition and numbers them in its account's sequence.
	single bool
}

var _ billing.Invoices = (*Invoices)(nil)

// maxNumberRetries bounds the transactions of one finalization or credit
// note that lose the race for their counter.
const maxNumberRetries = 200

// NewInvoices returns the invoice store of the legacy layout, in the table
// cfg.Tables.Invoices names (required).
func NewInvoices(cfg Config) (*Invoices, error) {
	if cfg.Client == nil {
		return nil, errors.New("billing: dynamostore invoices: Client is required")
	}
	if cfg.Tables.Invoices == "" {
		return nil, errors.New("billing: dynamostore invoices: Tables.Invoices is required")
	}
	return &Invoices{client: cfg.Client, clock: billing.SystemClock{}, table: cfg.Tables.Invoices,
		pk: attrInvoicePK, sk: attrInvoiceSK, account: legacyInvoiceAccountPrefix, retries: maxNumberRetries}, nil
}

// NewSingleTableInvoices returns the invoice store of the single table:
// items in the account's partition (PK AccountPrefix + user ID).
func NewSingleTableInvoices(cfg SingleTableStoreConfig) (*Invoices, error) {
	if cfg.Client == nil {
		return nil, errors.New("billing: dynamostore invoices: Client is required")
	}
	tbl := codecOf(cfg.Table)
	clock := cfg.Clock
	if clock == nil {
		clock = billing.SystemClock{}
	}
	return &Invoices{client: cfg.Client, clock: clock, table: tbl.Table, pk: "PK", sk: "SK", account: tbl.AccountPrefix,
		retries: maxNumberRetries, single: true}, nil
}

// keyOf is an item's primary key.
func (s *Invoices) keyOf(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{s.pk: &types.AttributeValueMemberS{Value: pk}, s.sk: &types.AttributeValueMemberS{Value: sk}}
}

func (s *Invoices) item(pk, sk string, attrs map[string]types.AttributeValue) map[string]types.AttributeValue {
	m := s.keyOf(pk, sk)
	maps.Copy(m, attrs)
	return m
}

// seqPK is the partition of a sequence's counter and numbers.
func (s *Invoices) seqPK(userID, sequence string) string {
	if sequence != "" {
		return pkSharedPrefix + sequence
	}
	return s.account + s.accountOf(userID)
}

// accountOf is whose partition holds userID's invoices: on the single
// table the account of a subscription's user ID (its invoices are items of
// the account, numbered in the account's sequence), else the user.
func (s *Invoices) accountOf(userID string) string {
	if s.single {
		return invoicedoc.Account(userID)
	}
	return userID
}

func (s *Invoices) putAbsent(it map[string]types.AttributeValue) types.TransactWriteItem {
	expr := mustBuild(expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(s.pk))))
	return types.TransactWriteItem{Put: &types.Put{TableName: &s.table, Item: it, ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names()}}
}

func histSK(local string, version int64) string {
	return fmt.Sprintf("%s%s#%06d", skInvoiceHist, local, version)
}

// historyItem is the history row of version inv.Version of the invoice
// whose ID's local part is local, in partition pk; note is the credit
// note that version issued (nil for every other change), whose ID,
// number, total and issue time the row carries for the stream's
// credit_note_issued event.
func (s *Invoices) historyItem(pk, local string, inv *billing.Invoice, note *billing.CreditNote) map[string]types.AttributeValue {
	attrs := encodeInvoice(inv, "InvoiceHistory")
	if note != nil {
		maps.Copy(attrs, encodeNoteOnHistory(note))
	}
	return s.item(pk, histSK(local, inv.Version), attrs)
}

// invoiceKey returns the partition and sort key of invoice id.
func (s *Invoices) invoiceKey(id string) (pk, sk, local string, err error) {
	user, local, err := invoicedoc.ParseID(id, false)
	if err != nil {
		return "", "", "", err
	}
	return s.account + s.accountOf(user), skInvoice + local, local, nil
}

// txWrite runs a transaction; it returns the cancellation reasons of a
// cancelled one (nil, nil on success) and other errors.
func (s *Invoices) txWrite(ctx context.Context, items []types.TransactWriteItem) ([]string, []types.CancellationReason, error) {
	_, err := s.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if err == nil {
		return nil, nil, nil
	}
	if reasons, codes := cancelCodes(err, len(items)); codes != nil {
		for _, c := range codes {
			if c != "" && c != "None" && c != codeConditionFailed && c != codeTxConflict {
				return nil, nil, err // throttled or invalid: not a race
			}
		}
		return codes, reasons, nil
	}
	return nil, nil, err
}

// invoiceBackoff waits a little, more with each attempt, before a transaction
// that lost a race is tried again.
func invoiceBackoff(ctx context.Context, attempt int) error {
	d := time.Duration(rand.IntN(min(attempt+1, 20))+1) * 2 * time.Millisecond
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// CreateDraft implements [billing.Invoices.CreateDraft]: one transaction
// of the key's claim, the invoice and its first history row, each
// conditional on its key being free.
func (s *Invoices) CreateDraft(ctx context.Context, inv *billing.Invoice) (billing.Invoice, error) {
	if acct := s.accountOf(inv.UserID); acct != inv.UserID && inv.Prefix == "" && inv.Sequence == "" {
		own := *inv
		own.Prefix = acct // the account's sequence: its numbers start with the account
		inv = &own
	}
	d, err := invoicedoc.Draft(inv, s.clock.Now())
	if err != nil {
		return billing.Invoice{}, err
	}
	pk, sk, local, _ := s.invoiceKey(d.ID)
	claim := s.item(pk, skInvoiceKey+d.Key, map[string]types.AttributeValue{
		attrInvoiceID: &types.AttributeValueMemberS{Value: d.ID}, attrEntity: &types.AttributeValueMemberS{Value: "InvoiceKey"}})
	attrs := encodeInvoice(&d, "Invoice")
	codes, _, err := s.txWrite(ctx, []types.TransactWriteItem{
		s.putAbsent(claim),
		s.putAbsent(s.item(pk, sk, attrs)),
		s.putAbsent(s.historyItem(pk, local, &d, nil)),
	})
	switch {
	case err != nil:
		return billing.Invoice{}, fmt.Errorf("billing: create invoice (user %s key %s): %w", d.UserID, d.Key, err)
	case codes == nil:
		return d, nil
	case codes[0] != codeConditionFailed:
		return billing.Invoice{}, &billing.ConflictError{Op: "create invoice", Key: d.Key, Reason: "a concurrent transaction wrote the same item", Err: billing.ErrConflict}
	}
	// The key is claimed: a repeat, or another request under its key.
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: s.keyOf(pk, skInvoiceKey+d.Key), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return billing.Invoice{}, fmt.Errorf("billing: create invoice (user %s key %s): %w", d.UserID, d.Key, err)
	}
	idAV, _ := out.Item[attrInvoiceID].(*types.AttributeValueMemberS)
	if idAV == nil {
		return billing.Invoice{}, fmt.Errorf("%w: invoice key item (user %s key %s) without %s", billing.ErrInvalidItem, d.UserID, d.Key, attrInvoiceID)
	}
	rows, err := s.History(ctx, idAV.Value)
	if err != nil {
		return billing.Invoice{}, err
	}
	if len(rows) == 0 {
		return billing.Invoice{}, fmt.Errorf("%w: invoice %s has no history row", billing.ErrNotFound, idAV.Value)
	}
	if f := invoicedoc.Differs(&rows[0], inv); len(f) > 0 {
		return billing.Invoice{}, invoicedoc.KeyReused(d.UserID, d.Key, "invoice", f)
	}
	return s.Invoice(ctx, idAV.Value)
}

// Invoice implements [billing.Invoices.Invoice] with a consistent GetItem.
func (s *Invoices) Invoice(ctx context.Context, id string) (billing.Invoice, error) {
	pk, sk, _, err := s.invoiceKey(id)
	if err != nil {
		return billing.Invoice{}, err
	}
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: s.keyOf(pk, sk), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return billing.Invoice{}, fmt.Errorf("billing: get invoice %s: %w", id, err)
	}
	if out.Item == nil {
		return billing.Invoice{}, fmt.Errorf("%w: invoice %s", billing.ErrNotFound, id)
	}
	return decodeInvoice(out.Item, id)
}

// changeUpdate is the update of the invoice item from cur to next: SET of
// the attributes that differ, REMOVE of those next drops, conditional on
// cur's version and status.
func (s *Invoices) changeUpdate(pk, sk string, cur, next *billing.Invoice) *types.Update {
	before, after := encodeInvoice(cur, "Invoice"), encodeInvoice(next, "Invoice")
	var upd expression.UpdateBuilder
	for _, name := range slices.Sorted(maps.Keys(after)) {
		if !reflect.DeepEqual(before[name], after[name]) {
			upd = upd.Set(expression.Name(name), exprValue(after[name]))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(before)) {
		if _, ok := after[name]; !ok {
			upd = upd.Remove(expression.Name(name))
		}
	}
	cond := expression.Name(attrVersion).Equal(exprValue(cur.Version)).
		And(expression.Name(attrStatus).Equal(exprValue(string(cur.Status))))
	expr := mustBuild(expression.NewBuilder().WithUpdate(upd).WithCondition(cond))
	return &types.Update{TableName: &s.table, Key: s.keyOf(pk, sk), UpdateExpression: expr.Update(),
		ConditionExpression: expr.Condition(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values()}
}

// counterUpdate takes number seq of a counter last read at seq-1 (absent
// for 0).
func (s *Invoices) counterUpdate(pk, sk string, seq int64) *types.Update {
	last := expression.Name(attrLastSeq)
	cond := last.Equal(exprValue(seq - 1))
	if seq == 1 {
		cond = expression.AttributeNotExists(last)
	}
	expr := mustBuild(expression.NewBuilder().
		WithUpdate(expression.Set(last, exprValue(seq)).Set(expression.Name(attrEntity), exprValue("InvoiceSequence"))).
		WithCondition(cond))
	return &types.Update{TableName: &s.table, Key: s.keyOf(pk, sk), UpdateExpression: expr.Update(),
		ConditionExpression: expr.Condition(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}
}

// lastSeq reads a counter's last_seq from an item (0 when absent).
func lastSeq(item map[string]types.AttributeValue) int64 {
	n, ok := item[attrLastSeq].(*types.AttributeValueMemberN)
	if !ok {
		return 0
	}
	v, _ := strconv.ParseInt(n.Value, 10, 64)
	return v
}

// readTwo reads two items with one consistent BatchGetItem; a missing item
// is nil.
func (s *Invoices) readTwo(ctx context.Context, a, b map[string]types.AttributeValue) (ia, ib map[string]types.AttributeValue, err error) {
	keys := []map[string]types.AttributeValue{a, b}
	same := func(x, y map[string]types.AttributeValue) bool {
		return reflect.DeepEqual(x[s.pk], y[s.pk]) && reflect.DeepEqual(x[s.sk], y[s.sk])
	}
	for len(keys) > 0 {
		out, err := s.client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
			s.table: {Keys: keys, ConsistentRead: aws.Bool(true)}}})
		if err != nil {
			return nil, nil, err
		}
		for _, it := range out.Responses[s.table] {
			if same(it, a) {
				ia = it
			} else if same(it, b) {
				ib = it
			}
		}
		keys = out.UnprocessedKeys[s.table].Keys
	}
	return ia, ib, nil
}

// Finalize implements [billing.Invoices.Finalize]: a consistent read of
// the invoice and its counter, then one transaction of four actions — the
// counter to seq (conditional on the value read), the invoice numbered
// and open (conditional on its version and draft status), the number's
// claim (conditional on being new) and the history row. A transaction
// lost to another finalization of the sequence is tried again on the
// counter's new value, which the cancellation returns.
func (s *Invoices) Finalize(ctx context.Context, id string, at time.Time) (billing.Invoice, error) {
	pk, sk, local, err := s.invoiceKey(id)
	if err != nil {
		return billing.Invoice{}, err
	}
	var cur billing.Invoice
	ctrPK := pk        // the counter's partition: first guess the account's own sequence, the default
	var seq int64 = -1 // unknown: read it
	for attempt := 0; ; attempt++ {
		if seq < 0 {
			invItem, ctrItem, err := s.readTwo(ctx, s.keyOf(pk, sk), s.keyOf(ctrPK, skCounterInv))
			if err != nil {
				return billing.Invoice{}, fmt.Errorf("billing: finalize invoice %s: %w", id, err)
			}
			if invItem == nil {
				return billing.Invoice{}, fmt.Errorf("%w: invoice %s", billing.ErrNotFound, id)
			}
			if cur, err = decodeInvoice(invItem, id); err != nil {
				return billing.Invoice{}, err
			}
			if want := s.seqPK(cur.UserID, cur.Sequence); want != ctrPK && cur.Number == "" {
				ctrPK = want // a host-wide sequence: read its counter
				continue
			}
			seq = lastSeq(ctrItem)
		}
		if cur.Number != "" {
			return cur, nil // finalized already: a repeat
		}
		if err := cur.Status.CheckTransition(billing.InvoiceOpen); err != nil {
			return billing.Invoice{}, fmt.Errorf("billing: finalize invoice %s (key %s): %w", id, cur.Key, err)
		}
		if err := invoicedoc.CheckTime(cur.Key, at); err != nil {
			return billing.Invoice{}, err
		}
		next := invoicedoc.Finalized(cur, seq+1, at)
		claim := s.item(ctrPK, fmt.Sprintf("%s%012d", skNumberInv, next.Seq), map[string]types.AttributeValue{
			attrInvoiceID: &types.AttributeValueMemberS{Value: id}, "number": &types.AttributeValueMemberS{Value: next.Number},
			attrEntity: &types.AttributeValueMemberS{Value: "InvoiceNumber"}})
		codes, reasons, err := s.txWrite(ctx, []types.TransactWriteItem{
			{Update: s.counterUpdate(ctrPK, skCounterInv, next.Seq)},
			{Update: s.changeUpdate(pk, sk, &cur, &next)},
			s.putAbsent(claim),
			s.putAbsent(s.historyItem(pk, local, &next, nil)),
		})
		switch {
		case err != nil:
			return billing.Invoice{}, fmt.Errorf("billing: finalize invoice %s: %w", id, err)
		case codes == nil:
			return next, nil
		case codes[2] == codeConditionFailed && codes[0] != codeConditionFailed && codes[0] != codeTxConflict:
			// The counter held at seq, yet its next number is claimed: the
			// sequence's items disagree, and no retry mends that.
			return billing.Invoice{}, &billing.ConflictError{Op: "finalize invoice", Key: id,
				Reason: fmt.Sprintf("number %d of the sequence is claimed, yet the counter was at %d", next.Seq, seq), Err: billing.ErrConflict}
		case attempt >= s.retries:
			return billing.Invoice{}, &billing.ConflictError{Op: "finalize invoice", Key: id,
				Reason: fmt.Sprintf("lost the race for the sequence's counter %d times", attempt+1), Err: billing.ErrConflict}
		}
		switch {
		case codes[1] == codeConditionFailed:
			seq = -1 // the invoice changed: read it again
		case codes[0] == codeConditionFailed && reasons[0].Item != nil:
			seq = lastSeq(reasons[0].Item) // the counter moved on: its value came back
		default:
			seq = -1
		}
		if err := invoiceBackoff(ctx, attempt); err != nil {
			return billing.Invoice{}, fmt.Errorf("billing: finalize invoice %s: %w", id, err)
		}
	}
}

// change makes the status change ch: a consistent read, then one
// transaction of the invoice's update (conditional on the version and
// status read) and its history row. A lost race reads again.
func (s *Invoices) change(ctx context.Context, op, id string, ch invoicedoc.Change, at time.Time) (billing.Invoice, error) {
	pk, sk, local, err := s.invoiceKey(id)
	if err != nil {
		return billing.Invoice{}, err
	}
	for attempt := 0; ; attempt++ {
		cur, err := s.Invoice(ctx, id)
		if err != nil {
			return billing.Invoice{}, err
		}
		next, repeat, err := invoicedoc.Apply(cur, ch, at)
		if err != nil {
			return billing.Invoice{}, fmt.Errorf("billing: %s: %w", op, err)
		}
		if repeat {
			return cur, nil
		}
		codes, _, err := s.txWrite(ctx, []types.TransactWriteItem{
			{Update: s.changeUpdate(pk, sk, &cur, &next)},
			s.putAbsent(s.historyItem(pk, local, &next, nil)),
		})
		switch {
		case err != nil:
			return billing.Invoice{}, fmt.Errorf("billing: %s %s: %w", op, id, err)
		case codes == nil:
			return next, nil
		case attempt >= 8:
			return billing.Invoice{}, &billing.ConflictError{Op: op, Key: id, Reason: "the invoice kept changing", Err: billing.ErrConflict}
		}
		if err := invoiceBackoff(ctx, attempt); err != nil {
			return billing.Invoice{}, err
		}
	}
}

// MarkPaid implements [billing.Invoices.MarkPaid].
func (s *Invoices) MarkPaid(ctx context.Context, id, txID string, at time.Time) (billing.Invoice, error) {
	return s.change(ctx, "mark invoice paid", id, invoicedoc.Change{To: billing.InvoicePaid, TxID: txID}, at)
}

// Void implements [billing.Invoices.Void].
func (s *Invoices) Void(ctx context.Context, id string, at time.Time) (billing.Invoice, error) {
	return s.change(ctx, "void invoice", id, invoicedoc.Change{To: billing.InvoiceVoid}, at)
}

// MarkUncollectible implements [billing.Invoices.MarkUncollectible].
func (s *Invoices) MarkUncollectible(ctx context.Context, id string, at time.Time) (billing.Invoice, error) {
	return s.change(ctx, "mark invoice uncollectible", id, invoicedoc.Change{To: billing.InvoiceUncollectible}, at)
}

// IssueCreditNote implements [billing.Invoices.IssueCreditNote]: one
// transaction of the note (its ID is its key's: conditional on being new),
// the credit counter, the number's claim, the invoice's AmountCredited
// (conditional on its version) and its history row.
func (s *Invoices) IssueCreditNote(ctx context.Context, note *billing.CreditNote) (billing.CreditNote, error) {
	pk, sk, local, err := s.invoiceKey(note.InvoiceID)
	if err != nil {
		return billing.CreditNote{}, err
	}
	_, nlocal, _ := invoicedoc.ParseID(invoicedoc.NoteID(note.InvoiceID, note.Key), true)
	noteKey := s.keyOf(pk, skNote+nlocal)
	for attempt := 0; ; attempt++ {
		inv, err := s.Invoice(ctx, note.InvoiceID)
		if err != nil {
			return billing.CreditNote{}, err
		}
		ctrPK := s.seqPK(inv.UserID, inv.Sequence)
		noteItem, ctrItem, err := s.readTwo(ctx, noteKey, s.keyOf(ctrPK, skCounterNote))
		if err != nil {
			return billing.CreditNote{}, fmt.Errorf("billing: issue credit note (invoice %s key %s): %w", inv.ID, note.Key, err)
		}
		if noteItem != nil {
			cur, err := decodeNote(noteItem, note.Key)
			if err != nil {
				return billing.CreditNote{}, err
			}
			if f := invoicedoc.NoteDiffers(&cur, note); len(f) > 0 {
				return billing.CreditNote{}, invoicedoc.KeyReused(inv.UserID, note.Key, "credit note", f)
			}
			return cur, nil
		}
		n, next, err := invoicedoc.Note(inv, note, s.clock.Now())
		if err != nil {
			return billing.CreditNote{}, err
		}
		n.Seq = lastSeq(ctrItem) + 1
		n.Number = invoicedoc.Number(n.Prefix, n.Seq, true)
		claim := s.item(ctrPK, fmt.Sprintf("%s%012d", skNumberNote, n.Seq), map[string]types.AttributeValue{
			attrNoteID: &types.AttributeValueMemberS{Value: n.ID}, "number": &types.AttributeValueMemberS{Value: n.Number},
			attrEntity: &types.AttributeValueMemberS{Value: "CreditNoteNumber"}})
		codes, _, err := s.txWrite(ctx, []types.TransactWriteItem{
			s.putAbsent(s.item(pk, skNote+nlocal, encodeNote(&n))),
			{Update: s.counterUpdate(ctrPK, skCounterNote, n.Seq)},
			s.putAbsent(claim),
			{Update: s.changeUpdate(pk, sk, &inv, &next)},
			s.putAbsent(s.historyItem(pk, local, &next, &n)),
		})
		switch {
		case err != nil:
			return billing.CreditNote{}, fmt.Errorf("billing: issue credit note (invoice %s key %s): %w", inv.ID, note.Key, err)
		case codes == nil:
			return n, nil
		case attempt >= s.retries:
			return billing.CreditNote{}, &billing.ConflictError{Op: "issue credit note", Key: note.Key, Reason: "lost the race for the counter", Err: billing.ErrConflict}
		}
		if err := invoiceBackoff(ctx, attempt); err != nil {
			return billing.CreditNote{}, err
		}
	}
}

// query reads every item of partition pk whose sort key begins with
// prefix, consistently, in order (or reverse order), at most limit (0: all)
// after exclusive start key from.
func (s *Invoices) query(ctx context.Context, pk, prefix string, forward bool, limit int, from string) ([]map[string]types.AttributeValue, bool, error) {
	key := expression.Key(s.pk).Equal(exprValue(pk)).And(expression.Key(s.sk).BeginsWith(prefix))
	expr := mustBuild(expression.NewBuilder().WithKeyCondition(key))
	in := &dynamodb.QueryInput{TableName: &s.table, KeyConditionExpression: expr.KeyCondition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ConsistentRead: aws.Bool(true), ScanIndexForward: aws.Bool(forward)}
	if from != "" {
		in.ExclusiveStartKey = s.keyOf(pk, from)
	}
	var out []map[string]types.AttributeValue
	for page, err := range queryPages(ctx, s.client, in) {
		if err != nil {
			return nil, false, err
		}
		out = append(out, page.Items...)
		if limit > 0 && len(out) > limit {
			return out[:limit], true, nil
		}
		if limit > 0 {
			in.Limit = aws.Int32(int32(limit + 1 - len(out)))
		}
	}
	return out, false, nil
}

// ByUser implements [billing.Invoices.ByUser] with one Query of the
// account's invoices, newest first.
func (s *Invoices) ByUser(ctx context.Context, userID, after string, limit int) ([]billing.Invoice, string, error) {
	if limit <= 0 {
		limit = 100
	}
	from := ""
	if after != "" {
		u, local, err := invoicedoc.ParseID(after, false)
		if err != nil || s.accountOf(u) != s.accountOf(userID) {
			return nil, "", fmt.Errorf("%w: invoice page after %q of user %s", billing.ErrInvalidCursor, after, userID)
		}
		from = skInvoice + local
	}
	items, more, err := s.query(ctx, s.account+s.accountOf(userID), skInvoice, false, limit, from)
	if err != nil {
		return nil, "", fmt.Errorf("billing: invoices of user %s: %w", userID, err)
	}
	out := make([]billing.Invoice, 0, len(items))
	last := ""
	for _, it := range items {
		inv, err := decodeInvoice(it, userID)
		if err != nil {
			billing.ReportInvalidItem(ctx, err)
			continue
		}
		last = inv.ID
		if inv.UserID != userID && s.accountOf(userID) != userID {
			continue // another subscription of the account (a page may come out short)
		}
		out = append(out, inv)
	}
	next := ""
	if more {
		next = last
	}
	return out, next, nil
}

// ByNumber implements [billing.Invoices.ByNumber]: the number's claim, then
// the invoice.
func (s *Invoices) ByNumber(ctx context.Context, userID, sequence, number string) (billing.Invoice, error) {
	seq, ok := invoicedoc.ParseSeq(number)
	if !ok {
		return billing.Invoice{}, fmt.Errorf("%w: invoice number %q", billing.ErrNotFound, number)
	}
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, ConsistentRead: aws.Bool(true),
		Key: s.keyOf(s.seqPK(userID, sequence), fmt.Sprintf("%s%012d", skNumberInv, seq))})
	if err != nil {
		return billing.Invoice{}, fmt.Errorf("billing: invoice number %s: %w", number, err)
	}
	id, _ := out.Item[attrInvoiceID].(*types.AttributeValueMemberS)
	if id == nil {
		return billing.Invoice{}, fmt.Errorf("%w: invoice number %s", billing.ErrNotFound, number)
	}
	inv, err := s.Invoice(ctx, id.Value)
	if err == nil && inv.Number != number {
		err = fmt.Errorf("%w: invoice number %s", billing.ErrNotFound, number)
	}
	return inv, err
}

// History implements [billing.Invoices.History] with one Query.
func (s *Invoices) History(ctx context.Context, id string) ([]billing.Invoice, error) {
	pk, _, local, err := s.invoiceKey(id)
	if err != nil {
		return nil, err
	}
	items, _, err := s.query(ctx, pk, skInvoiceHist+local+"#", true, 0, "")
	if err != nil {
		return nil, fmt.Errorf("billing: history of invoice %s: %w", id, err)
	}
	out := make([]billing.Invoice, 0, len(items))
	for _, it := range items {
		row, err := decodeInvoice(it, id)
		if err != nil {
			return nil, err
		}
		out = append(out, row)
	}
	return out, nil
}

// CreditNotes implements [billing.Invoices.CreditNotes] with one Query.
func (s *Invoices) CreditNotes(ctx context.Context, invoiceID string) ([]billing.CreditNote, error) {
	pk, _, _, err := s.invoiceKey(invoiceID)
	if err != nil {
		return nil, err
	}
	_, prefix, _ := invoicedoc.ParseID(invoicedoc.NoteIDPrefix(invoiceID)+"x", true)
	items, _, err := s.query(ctx, pk, skNote+prefix[:len(prefix)-1], true, 0, "")
	if err != nil {
		return nil, fmt.Errorf("billing: credit notes of invoice %s: %w", invoiceID, err)
	}
	out := make([]billing.CreditNote, 0, len(items))
	for _, it := range items {
		n, err := decodeNote(it, invoiceID)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b billing.CreditNote) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, nil
}
