package memory

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/entitlement"
	"github.com/dynabill/billing/internal/av"
	"github.com/dynabill/billing/internal/cursor"
	"github.com/dynabill/billing/internal/layout"
)

// PaymentsOptions configures an in-memory [Payments], like the matching
// fields of dynamostore.PaymentsConfig.
type PaymentsOptions struct {
	// Table sets the account prefix and TTL attribute used in keys and
	// errors. Defaults to [SingleTableConfig]'s defaults.
	Table SingleTableConfig
	// Clock gives "now". Defaults to [billing.SystemClock].
	Clock billing.Clock
	// ReceiptRetention defaults to DefaultReceiptRetention.
	ReceiptRetention time.Duration
	// PageSize of the due-date queries, 1 to MaxPaymentsPageSize.
	// Defaults to DefaultPaymentsPageSize.
	PageSize int
}

// Payments is an in-memory [entitlement.Payments] that behaves like
// dynamostore.Payments: the same validation, normalization (dates to
// days, timestamps to seconds, through the same item encoding), version
// conditions and errors, receipts idempotent on their key, due-date pages
// in index order (last date, then key) with opaque cursors, and
// RecordPayment all-or-nothing. Safe for concurrent use.
//
// Unlike DynamoDB its indexes are exactly consistent, and it never deletes
// expired receipts (DynamoDB's TTL does, some time after ExpiresAt).
type Payments struct {
	table     layout.SingleTableConfig
	clock     billing.Clock
	retention time.Duration
	pageSize  int

	mu    sync.Mutex
	items map[string]map[string]av.AttributeValue // PK "\x00" SK → item, as dynamostore.Payments writes it
	// byDate finds the items of a day as the table's sparse indexes do
	// (attribute of indexedDates → day → item keys), and byPK the items of
	// an account, so that neither walks every item. Only put changes
	// items.
	byDate map[string]map[string]map[string]struct{}
	byPK   map[string]map[string]struct{}
}

// indexedDates are the date attributes the due queries and the single
// table's payment index look items up by.
var indexedDates = []string{layout.AttrNextPaymentDate, layout.AttrNextReminderDate}

// put stores item under its key and keeps byDate and byPK; the caller
// holds mu.
func (p *Payments) put(item map[string]av.AttributeValue) {
	key := itemKey(item)
	if old, ok := p.items[key]; ok {
		for _, a := range indexedDates {
			if d := str(old[a]); d != "" {
				delete(p.byDate[a][d], key)
				if len(p.byDate[a][d]) == 0 {
					delete(p.byDate[a], d)
				}
			}
		}
	} else {
		pk := str(item["PK"])
		if p.byPK[pk] == nil {
			p.byPK[pk] = map[string]struct{}{}
		}
		p.byPK[pk][key] = struct{}{}
	}
	p.items[key] = item
	for _, a := range indexedDates {
		if d := str(item[a]); d != "" {
			if p.byDate[a] == nil {
				p.byDate[a] = map[string]map[string]struct{}{}
			}
			if p.byDate[a][d] == nil {
				p.byDate[a][d] = map[string]struct{}{}
			}
			p.byDate[a][d][key] = struct{}{}
		}
	}
}

// dated returns the items whose attribute a (one of indexedDates) is day
// d, in no order; the caller holds mu.
func (p *Payments) dated(a, d string) []map[string]av.AttributeValue {
	keys := p.byDate[a][d]
	out := make([]map[string]av.AttributeValue, 0, len(keys))
	for k := range keys {
		out = append(out, p.items[k])
	}
	return out
}

var _ entitlement.Payments = (*Payments)(nil)

// NewPayments returns an empty in-memory Payments; invalid options are
// errors as for dynamostore.NewPayments.
func NewPayments(opts PaymentsOptions) (*Payments, error) {
	ret, size, err := layout.PaymentsLimits(opts.ReceiptRetention, opts.PageSize)
	if err != nil {
		return nil, fmt.Errorf("memory: PaymentsOptions.%w", err)
	}
	if opts.Clock == nil {
		opts.Clock = billing.SystemClock{}
	}
	t := layout.SingleTableConfig(opts.Table).WithDefaults()
	return &Payments{table: t, clock: opts.Clock, retention: ret, pageSize: size,
		items: map[string]map[string]av.AttributeValue{}, byDate: map[string]map[string]map[string]struct{}{}, byPK: map[string]map[string]struct{}{}}, nil
}

func (p *Payments) now() time.Time { return p.clock.Now().UTC().Truncate(time.Second) }

func itemKey(item map[string]av.AttributeValue) string {
	return str(item["PK"]) + "\x00" + str(item["SK"])
}

func str(v av.AttributeValue) string {
	if s, ok := v.(*av.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

func keyText(item map[string]av.AttributeValue) string {
	return "PK=" + str(item["PK"]) + " SK=" + str(item["SK"])
}

// CreateSubscription implements [entitlement.Payments.CreateSubscription].
func (p *Payments) CreateSubscription(_ context.Context, s entitlement.RecurringSubscription) (entitlement.RecurringSubscription, error) {
	now := p.now()
	s.CreatedAt, s.UpdatedAt, s.Version = now, now, 1
	item, err := p.table.EncodeRecurringSubscription(s)
	if err != nil {
		return entitlement.RecurringSubscription{}, fmt.Errorf("billing: create subscription: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.items[itemKey(item)]; ok {
		return entitlement.RecurringSubscription{}, &billing.ConflictError{Op: "create subscription", Key: keyText(item), Reason: "subscription exists", Err: billing.ErrAlreadyExists}
	}
	p.put(item)
	return p.table.DecodeRecurringSubscription(item)
}

// GetSubscription implements [entitlement.Payments.GetSubscription].
func (p *Payments) GetSubscription(_ context.Context, accountID, subscriptionID, sku string) (entitlement.RecurringSubscription, error) {
	probe := entitlement.RecurringSubscription{AccountID: accountID, SubscriptionID: subscriptionID, SKU: sku, PaymentDay: 1}
	key, err := p.table.EncodeRecurringSubscription(probe)
	if err != nil {
		return entitlement.RecurringSubscription{}, fmt.Errorf("billing: get subscription: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	item, ok := p.items[itemKey(key)]
	if !ok {
		return entitlement.RecurringSubscription{}, fmt.Errorf("billing: get subscription (%s): %w", keyText(key), billing.ErrNotFound)
	}
	return p.table.DecodeRecurringSubscription(item)
}

// partition returns the items of the account whose SK starts with prefix,
// by SK; the caller holds mu.
func (p *Payments) partition(accountID, prefix string) []map[string]av.AttributeValue {
	pk := p.table.AccountPrefix + accountID
	var out []map[string]av.AttributeValue
	for k := range p.byPK[pk] {
		if it := p.items[k]; strings.HasPrefix(str(it["SK"]), prefix) {
			out = append(out, it)
		}
	}
	slices.SortFunc(out, func(a, b map[string]av.AttributeValue) int { return strings.Compare(str(a["SK"]), str(b["SK"])) })
	return out
}

// SubscriptionsByAccount implements [entitlement.Payments.SubscriptionsByAccount].
func (p *Payments) SubscriptionsByAccount(_ context.Context, accountID string) ([]entitlement.RecurringSubscription, error) {
	if err := entitlement.CheckAccountID(accountID); err != nil {
		return nil, fmt.Errorf("billing: subscriptions by account: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	subs := []entitlement.RecurringSubscription{}
	for _, it := range p.partition(accountID, layout.SKRecurringPrefix) {
		s, err := p.table.DecodeRecurringSubscription(it)
		if err != nil {
			return nil, fmt.Errorf("billing: subscriptions by account: %w", err)
		}
		subs = append(subs, s)
	}
	return subs, nil
}

// update checks prev's version and returns the item of next; the caller
// holds mu and stores it.
func (p *Payments) update(op string, prev, next entitlement.RecurringSubscription) (map[string]av.AttributeValue, entitlement.RecurringSubscription, error) {
	next, err := layout.PrepareSubscriptionUpdate(prev, next, p.now())
	if err != nil {
		return nil, next, fmt.Errorf("billing: %s: %w", op, err)
	}
	item, err := p.table.EncodeRecurringSubscription(next)
	if err != nil {
		return nil, next, fmt.Errorf("billing: %s: %w", op, err)
	}
	old, ok := p.items[itemKey(item)]
	if !ok || numText(old["Version"]) != fmt.Sprint(prev.Version) {
		return nil, next, &billing.ConflictError{Op: op, Key: keyText(item), Reason: "version changed or subscription deleted", Err: billing.ErrConflict}
	}
	item["CreatedAt"] = old["CreatedAt"] // never rewritten by an update
	if item["CreatedAt"] == nil {
		delete(item, "CreatedAt")
	}
	next, err = p.table.DecodeRecurringSubscription(item)
	return item, next, err
}

func numText(v av.AttributeValue) string {
	if n, ok := v.(*av.AttributeValueMemberN); ok {
		return n.Value
	}
	return ""
}

// UpdateSubscription implements [entitlement.Payments.UpdateSubscription].
func (p *Payments) UpdateSubscription(_ context.Context, prev, next entitlement.RecurringSubscription) (entitlement.RecurringSubscription, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	item, next, err := p.update("update subscription", prev, next)
	if err != nil {
		return entitlement.RecurringSubscription{}, err
	}
	p.put(item)
	return next, nil
}

// MarkReminded implements [entitlement.Payments.MarkReminded].
func (p *Payments) MarkReminded(ctx context.Context, prev entitlement.RecurringSubscription, nextReminder time.Time) (entitlement.RecurringSubscription, error) {
	next := prev
	next.LastReminderDate, next.NextReminderDate = entitlement.PaymentDate(p.now()), nextReminder
	return p.UpdateSubscription(ctx, prev, next)
}

// receipt checks r's idempotency and returns its item; the caller holds mu.
func (p *Payments) receipt(op string, r entitlement.Receipt) (map[string]av.AttributeValue, entitlement.Receipt, error) {
	r.ExpiresAt = r.ProcessedDate.Add(p.retention)
	item, err := p.table.EncodeReceipt(r)
	if err != nil {
		return nil, r, fmt.Errorf("billing: %s: %w", op, err)
	}
	if r, err = p.table.DecodeReceipt(item); err != nil {
		return nil, r, err
	}
	if old, ok := p.items[itemKey(item)]; ok {
		for _, a := range []string{"SubscriptionID", "ProcessedAmount", "TransactionID"} {
			if str(old[a]) != str(item[a]) {
				return nil, r, &billing.ConflictError{Op: op, Key: keyText(item), Reason: "a receipt with other content exists", Err: billing.ErrAlreadyExists}
			}
		}
	}
	return item, r, nil
}

// CreateReceipt implements [entitlement.Payments.CreateReceipt].
func (p *Payments) CreateReceipt(_ context.Context, r entitlement.Receipt) (entitlement.Receipt, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	item, r, err := p.receipt("create receipt", r)
	if err != nil {
		return entitlement.Receipt{}, err
	}
	p.put(item)
	return r, nil
}

// ReceiptsByAccount implements [entitlement.Payments.ReceiptsByAccount].
func (p *Payments) ReceiptsByAccount(_ context.Context, accountID string, since time.Time) ([]entitlement.Receipt, error) {
	if err := entitlement.CheckAccountID(accountID); err != nil {
		return nil, fmt.Errorf("billing: receipts by account: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var recs []entitlement.Receipt
	for _, it := range slices.Backward(p.partition(accountID, layout.SKReceiptPrefix)) {
		r, err := p.table.DecodeReceipt(it)
		if err != nil {
			return nil, fmt.Errorf("billing: receipts by account: %w", err)
		}
		if !r.ProcessedDate.Before(since) {
			recs = append(recs, r)
		}
	}
	return recs, nil
}

// RecordPayment implements [entitlement.Payments.RecordPayment].
func (p *Payments) RecordPayment(_ context.Context, prev entitlement.RecurringSubscription, r entitlement.Receipt, nextPayment, nextReminder time.Time) (entitlement.RecurringSubscription, entitlement.Receipt, error) {
	const op = "record payment"
	if r.AccountID != prev.AccountID || r.SubscriptionID != prev.SubscriptionID || r.SKU != prev.SKU {
		return entitlement.RecurringSubscription{}, entitlement.Receipt{}, fmt.Errorf("billing: %s: %w", op,
			&billing.FieldError{Field: "SubscriptionID", Value: r.SubscriptionID, Err: fmt.Errorf("%w: receipt of another subscription", entitlement.ErrInvalidPayment)})
	}
	next := prev
	next.NextPaymentDate, next.NextReminderDate, next.LastPaymentDate = nextPayment, nextReminder, entitlement.PaymentDate(r.ProcessedDate)
	p.mu.Lock()
	defer p.mu.Unlock()
	recItem, r, err := p.receipt(op, r)
	if err != nil {
		return entitlement.RecurringSubscription{}, entitlement.Receipt{}, err
	}
	subItem, next, err := p.update(op, prev, next)
	if err != nil {
		return entitlement.RecurringSubscription{}, entitlement.Receipt{}, err
	}
	p.put(recItem)
	p.put(subItem)
	return next, r, nil
}

// DuePaymentsByDate implements [entitlement.Payments.DuePaymentsByDate].
func (p *Payments) DuePaymentsByDate(_ context.Context, day time.Time, token string) ([]entitlement.RecurringSubscription, string, error) {
	return p.due("due payments", layout.AttrNextPaymentDate, layout.AttrLastPaymentDate, day, token)
}

// DueRemindersByDate implements [entitlement.Payments.DueRemindersByDate].
func (p *Payments) DueRemindersByDate(_ context.Context, day time.Time, token string) ([]entitlement.RecurringSubscription, string, error) {
	return p.due("due reminders", layout.AttrNextReminderDate, layout.AttrLastReminderDate, day, token)
}

// due pages through the items whose hash attribute is day, ordered by
// (range attribute, PK, SK) like a sparse index.
func (p *Payments) due(op, hash, rng string, day time.Time, token string) ([]entitlement.RecurringSubscription, string, error) {
	d := layout.PaymentDayKey(day)
	if d == "" {
		return nil, "", fmt.Errorf("billing: %s: %w: day %v", op, billing.ErrInvalidQuery, day)
	}
	scope := "memory/" + hash + "/" + d
	start, err := cursor.Decode(scope, token, "PK", "SK", hash, rng)
	if err != nil {
		return nil, "", fmt.Errorf("billing: %s: %w: %v", op, billing.ErrInvalidCursor, err)
	}
	order := func(it map[string]av.AttributeValue) []string {
		return []string{str(it[rng]), str(it["PK"]), str(it["SK"])}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var hits []map[string]av.AttributeValue
	for _, it := range p.dated(hash, d) {
		if str(it[rng]) != "" && (start == nil || slices.Compare(order(it), order(start)) > 0) {
			hits = append(hits, it)
		}
	}
	slices.SortFunc(hits, func(a, b map[string]av.AttributeValue) int { return slices.Compare(order(a), order(b)) })
	next := ""
	if len(hits) > p.pageSize {
		hits = hits[:p.pageSize]
		last := hits[len(hits)-1]
		key := map[string]av.AttributeValue{}
		for _, a := range []string{"PK", "SK", hash, rng} {
			key[a] = last[a]
		}
		if next, err = cursor.Encode(scope, key); err != nil {
			return nil, "", err
		}
	}
	page := make([]entitlement.RecurringSubscription, 0, len(hits))
	for _, it := range hits {
		s, err := p.table.DecodeRecurringSubscription(it)
		if err != nil {
			continue // like DynamoPayments: logged and skipped there
		}
		page = append(page, s)
	}
	return page, next, nil
}
