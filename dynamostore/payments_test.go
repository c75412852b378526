package dynamostore_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/entitlement"
	"github.com/dynabill/billing/internal/dynamotest"
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// payStart is the clock's start in the recurring payments tests.
var payStart = time.Date(2025, 1, 15, 10, 30, 0, 0, time.UTC)

// payTable is the recurring payments layout: ACC# partitions, TTL attribute "TTL".
var payTable = dynamostore.SingleTableConfig{AccountPrefix: "ACC#", TTLAttribute: "TTL"}

// payEnv is one implementation of billing.Payments under test; acct is
// set for DynamoDB only (raw reads of the same table).
type payEnv struct {
	payments entitlement.Payments
	clock    *billingtest.Clock
	acct     *acctEnv
}

// forEachPayments runs f against the in-memory twin and DynamoDB (a fresh
// table on the local server behind the limit-checking wrapper).
func forEachPayments(t *testing.T, pageSize int, f func(t *testing.T, e *payEnv)) {
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		clock := billingtest.NewClock(payStart)
		p, err := memory.NewPayments(memory.PaymentsOptions{Table: payTable, Clock: clock, PageSize: pageSize})
		require.NoError(t, err)
		f(t, &payEnv{payments: p, clock: clock})
	})
	t.Run("dynamo", func(t *testing.T) {
		t.Parallel()
		client := dynamotest.Client(t)
		cfg := payTable
		cfg.Table = dynamotest.TableName(t, "payments")
		cfg = cfg.WithDefaults()
		dynamotest.CreateTable(t, client, dynamostore.SingleTableDefinition(cfg))
		w := dynamotest.Wrap(client)
		t.Cleanup(func() { w.AssertNoViolations(t) })
		clock := billingtest.NewClock(payStart)
		p, err := dynamostore.NewPayments(dynamostore.PaymentsConfig{Client: w, Table: cfg, Clock: clock, PageSize: pageSize})
		require.NoError(t, err)
		f(t, &payEnv{payments: p, clock: clock, acct: &acctEnv{db: w, table: cfg}})
	})
}

func day(m time.Month, d int) time.Time { return time.Date(2025, m, d, 0, 0, 0, 0, time.UTC) }

func newRecurring(account, sub, sku string) entitlement.RecurringSubscription {
	return entitlement.RecurringSubscription{
		AccountID: account, SubscriptionID: sub, SKU: sku, Email: account + "@example.com",
		PaymentDay: 28, PaymentAmount: billing.MustParseAmount("39.99"), PaymentDetails: "pm_tok_" + sub,
		NextPaymentDate: day(1, 28).Add(13 * time.Hour), NextReminderDate: day(1, 21),
	}
}

func mustCreate(t *testing.T, e *payEnv, s entitlement.RecurringSubscription) entitlement.RecurringSubscription {
	t.Helper()
	got, err := e.payments.CreateSubscription(t.Context(), s)
	require.NoError(t, err, "create %s/%s", s.SubscriptionID, s.SKU)
	return got
}

// allDue pages through a due query and returns every subscription ID#SKU.
func allDue(t *testing.T, e *payEnv, reminders bool, d time.Time) []string {
	t.Helper()
	var ids []string
	tok := ""
	for range 100 {
		q := e.payments.DuePaymentsByDate
		if reminders {
			q = e.payments.DueRemindersByDate
		}
		page, next, err := q(t.Context(), d, tok)
		require.NoError(t, err, "due %v", d)
		for _, s := range page {
			ids = append(ids, s.AccountID+"/"+s.SubscriptionID+"#"+s.SKU)
		}
		if next == "" {
			slices.Sort(ids)
			return ids
		}
		tok = next
	}
	require.FailNow(t, "paging does not end")
	return nil
}

func TestRecurringSubscriptionCreateGetList(t *testing.T) {
	forEachPayments(t, 0, func(t *testing.T, e *payEnv) {
		ctx := t.Context()
		a := mustCreate(t, e, newRecurring("123", "s1", "999"))
		want := newRecurring("123", "s1", "999")
		want.NextPaymentDate = day(1, 28) // kept as a day
		want.CreatedAt, want.UpdatedAt, want.Version = payStart, payStart, 1
		require.Equal(t, want, a, "created %+v\nwant    %+v", a, want)
		b := newRecurring("123", "s1", "777") // another SKU of the same subscription
		b.Email, b.PaymentDetails, b.NextReminderDate = "", "", time.Time{}
		mustCreate(t, e, b)
		mustCreate(t, e, newRecurring("456", "s2", "999"))
		got, err := e.payments.GetSubscription(ctx, "123", "s1", "999")
		require.NoError(t, err, "get")
		require.Equal(t, a, got, "get")
		_, err = e.payments.CreateSubscription(ctx, newRecurring("123", "s1", "999"))
		require.ErrorIs(t, err, billing.ErrAlreadyExists, "duplicate")
		var ce *billing.ConflictError
		_, err = e.payments.CreateSubscription(ctx, newRecurring("123", "s1", "999"))
		require.ErrorAs(t, err, &ce, "conflict key")
		require.Equal(t, "PK=ACC#123 SK=SUB#s1#SKU#999", ce.Key, "conflict key: %v", err)
		_, err = e.payments.GetSubscription(ctx, "123", "s9", "999")
		require.ErrorIs(t, err, billing.ErrNotFound, "missing")
		subs, err := e.payments.SubscriptionsByAccount(ctx, "123")
		require.NoError(t, err, "list")
		require.Len(t, subs, 2, "list: %+v", subs)
		require.Equal(t, "777", subs[0].SKU, "list: %+v", subs)
		require.Equal(t, a, subs[1], "list")
		require.Empty(t, subs[0].Email, "list: %+v", subs)
		require.True(t, subs[0].NextReminderDate.IsZero(), "list: %+v", subs)
		subs, err = e.payments.SubscriptionsByAccount(ctx, "nobody")
		require.NoError(t, err, "empty list")
		require.Empty(t, subs, "empty list")
	})
}

func TestRecurringSubscriptionInvalid(t *testing.T) {
	forEachPayments(t, 0, func(t *testing.T, e *payEnv) {
		for name, edit := range map[string]func(*entitlement.RecurringSubscription){
			"day 29":       func(s *entitlement.RecurringSubscription) { s.PaymentDay = 29 },
			"day 0":        func(s *entitlement.RecurringSubscription) { s.PaymentDay = 0 },
			"hash in SKU":  func(s *entitlement.RecurringSubscription) { s.SKU = "a#b" },
			"no sub ID":    func(s *entitlement.RecurringSubscription) { s.SubscriptionID = "" },
			"negative amt": func(s *entitlement.RecurringSubscription) { s.PaymentAmount = -1 },
		} {
			s := newRecurring("123", "s1", "999")
			edit(&s)
			_, err := e.payments.CreateSubscription(t.Context(), s)
			assert.ErrorIs(t, err, entitlement.ErrInvalidPayment, name)
		}
		_, err := e.payments.CreateSubscription(t.Context(), entitlement.RecurringSubscription{SubscriptionID: "s", SKU: "k", PaymentDay: 1})
		assert.ErrorIs(t, err, entitlement.ErrInvalidAccount, "no account")
	})
}

func TestRecurringSubscriptionUpdateVersions(t *testing.T) {
	forEachPayments(t, 0, func(t *testing.T, e *payEnv) {
		ctx := t.Context()
		v1 := mustCreate(t, e, newRecurring("123", "s1", "999"))
		e.clock.Advance(time.Hour)
		next := v1
		next.PaymentAmount, next.Email, next.NextPaymentDate = billing.MustParseAmount("4.99"), "", time.Time{}
		v2, err := e.payments.UpdateSubscription(ctx, v1, next)
		require.NoError(t, err, "update")
		require.Equal(t, 2, v2.Version, "update: %+v", v2)
		require.Equal(t, billing.Amount(499), v2.PaymentAmount, "update: %+v", v2)
		require.Empty(t, v2.Email, "update: %+v", v2)
		require.True(t, v2.NextPaymentDate.IsZero(), "update: %+v", v2)
		require.True(t, v2.CreatedAt.Equal(payStart), "update: %+v", v2)
		require.True(t, v2.UpdatedAt.Equal(payStart.Add(time.Hour)), "update: %+v", v2)
		stored, _ := e.payments.GetSubscription(ctx, "123", "s1", "999")
		require.Equal(t, v2, stored, "stored")
		_, err = e.payments.UpdateSubscription(ctx, v1, next)
		require.ErrorIs(t, err, billing.ErrConflict, "stale version")
		other := v2
		other.SKU = "000"
		_, err = e.payments.UpdateSubscription(ctx, v2, other)
		require.ErrorIs(t, err, entitlement.ErrInvalidPayment, "key change")
		ghost := newRecurring("123", "gone", "999")
		ghost.Version = 1
		_, err = e.payments.UpdateSubscription(ctx, ghost, ghost)
		require.ErrorIs(t, err, billing.ErrConflict, "missing item")
		stored, _ = e.payments.GetSubscription(ctx, "123", "s1", "999")
		require.Equal(t, v2, stored, "changed by failed updates")
	})
}

// TestDuePaymentsSparseIndex: only subscriptions with a NextPaymentDate
// are due; RecordPayment moves one from its old date to its new one.
func TestDuePaymentsSparseIndex(t *testing.T) {
	forEachPayments(t, 0, func(t *testing.T, e *payEnv) {
		ctx := t.Context()
		due := mustCreate(t, e, newRecurring("123", "s1", "999"))
		paused := newRecurring("123", "s2", "999")
		paused.NextPaymentDate, paused.NextReminderDate = time.Time{}, time.Time{}
		mustCreate(t, e, paused)
		later := newRecurring("456", "s3", "888")
		later.NextPaymentDate, later.NextReminderDate = day(2, 28), day(2, 21)
		mustCreate(t, e, later)
		require.Equal(t, []string{"123/s1#999"}, allDue(t, e, false, day(1, 28).Add(20*time.Hour)), "due 28 Jan")
		require.Equal(t, []string{"123/s1#999"}, allDue(t, e, true, day(1, 21)), "reminders 21 Jan")
		rec := entitlement.Receipt{AccountID: "123", SubscriptionID: "s1", SKU: "999",
			ProcessedDate: day(1, 28).Add(9 * time.Hour), ProcessedAmount: due.PaymentAmount, TransactionID: "tx1"}
		sub, r, err := e.payments.RecordPayment(ctx, due, rec, day(2, 28), day(2, 21))
		require.NoError(t, err, "record")
		require.Equal(t, 2, sub.Version, "record: %+v", sub)
		require.True(t, sub.LastPaymentDate.Equal(day(1, 28)), "record: %+v", sub)
		require.True(t, sub.NextPaymentDate.Equal(day(2, 28)), "record: %+v", sub)
		require.True(t, r.ExpiresAt.Equal(rec.ProcessedDate.Add(layout.DefaultReceiptRetention)), "record: %+v", r)
		require.Empty(t, allDue(t, e, false, day(1, 28)), "still due on the old date")
		require.Equal(t, []string{"123/s1#999", "456/s3#888"}, allDue(t, e, false, day(2, 28)), "due 28 Feb")
		page, _, err := e.payments.DuePaymentsByDate(ctx, day(2, 28), "")
		require.NoError(t, err, "due page")
		require.Len(t, page, 2, "due page is not full subscriptions: %+v", page)
		require.NotZero(t, page[0].Version, "due page is not full subscriptions: %+v", page)
		require.NotEmpty(t, page[0].PaymentDetails, "due page is not full subscriptions: %+v", page)
		require.False(t, page[0].CreatedAt.IsZero(), "due page is not full subscriptions: %+v", page)
		got, err := e.payments.GetSubscription(ctx, "123", "s1", "999")
		require.NoError(t, err, "stored")
		require.Equal(t, sub, got, "stored")
		// Reminders: MarkReminded records today and moves the next one.
		e.clock.Set(day(2, 21).Add(8 * time.Hour))
		rem, err := e.payments.MarkReminded(ctx, sub, time.Time{})
		require.NoError(t, err, "mark reminded")
		require.True(t, rem.LastReminderDate.Equal(day(2, 21)), "mark reminded: %+v", rem)
		require.True(t, rem.NextReminderDate.IsZero(), "mark reminded: %+v", rem)
		require.Equal(t, 3, rem.Version, "mark reminded: %+v", rem)
		require.Equal(t, []string{"456/s3#888"}, allDue(t, e, true, day(2, 21)), "reminders 21 Feb")
		_, _, err = e.payments.DuePaymentsByDate(ctx, time.Time{}, "")
		require.ErrorIs(t, err, billing.ErrInvalidQuery, "zero day")
	})
}

// TestDuePaymentsPaging: page size 2 over 5 due subscriptions returns each
// once; a tampered or foreign cursor fails with ErrInvalidCursor.
func TestDuePaymentsPaging(t *testing.T) {
	forEachPayments(t, 2, func(t *testing.T, e *payEnv) {
		ctx := t.Context()
		var want []string
		for i := range 5 {
			s := newRecurring(fmt.Sprint("acc", i%3), fmt.Sprint("s", i), "999")
			if i%2 == 0 {
				s.LastPaymentDate = day(1, 1) // mixed sort keys
			}
			mustCreate(t, e, s)
			want = append(want, s.AccountID+"/"+s.SubscriptionID+"#999")
		}
		other := newRecurring("acc9", "s9", "999")
		other.NextPaymentDate = day(1, 29)
		mustCreate(t, e, other)
		slices.Sort(want)
		require.Equal(t, want, allDue(t, e, false, day(1, 28)), "paged")
		page, next, err := e.payments.DuePaymentsByDate(ctx, day(1, 28), "")
		require.NoError(t, err, "first page")
		require.Len(t, page, 2, "first page")
		require.NotEmpty(t, next, "first page")
		c := byte('A')
		if next[10] == 'A' {
			c = 'B'
		}
		tampered := next[:10] + string(c) + next[11:]
		for name, tok := range map[string]string{"tampered": tampered, "garbage": "!!", "truncated": next[:len(next)/2]} {
			_, _, err := e.payments.DuePaymentsByDate(ctx, day(1, 28), tok)
			assert.ErrorIs(t, err, billing.ErrInvalidCursor, "%s cursor", name)
		}
		_, _, err = e.payments.DuePaymentsByDate(ctx, day(1, 29), next)
		assert.ErrorIs(t, err, billing.ErrInvalidCursor, "cursor of another day")
		_, _, err = e.payments.DueRemindersByDate(ctx, day(1, 28), next)
		assert.ErrorIs(t, err, billing.ErrInvalidCursor, "payment cursor on the reminder index")
	})
}

func TestPaymentsConfig(t *testing.T) {
	client := dynamotest.Wrap(nil)
	for name, cfg := range map[string]dynamostore.PaymentsConfig{
		"no client":          {},
		"page size 101":      {Client: client, PageSize: 101},
		"negative retention": {Client: client, ReceiptRetention: -time.Hour},
		"same indexes":       {Client: client, Table: dynamostore.SingleTableConfig{PaymentIndex: "X", ReminderIndex: "X"}},
	} {
		_, err := dynamostore.NewPayments(cfg)
		assert.Error(t, err, "%s: accepted", name)
	}
	_, err := memory.NewPayments(memory.PaymentsOptions{PageSize: -1})
	assert.Error(t, err, "twin: negative page size accepted")
	_, err = dynamostore.NewPayments(dynamostore.PaymentsConfig{Client: client})
	assert.NoError(t, err, "defaults")
}
