package dynamostore_test

import (
	"errors"
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
	t.Fatal("paging does not end")
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
		if got, err := e.payments.GetSubscription(ctx, "123", "s1", "999"); err != nil || got != a {
			t.Fatalf("get %+v %v", got, err)
		}
		_, err := e.payments.CreateSubscription(ctx, newRecurring("123", "s1", "999"))
		require.ErrorIs(t, err, billing.ErrAlreadyExists, "duplicate")
		var ce *billing.ConflictError
		if _, err := e.payments.CreateSubscription(ctx, newRecurring("123", "s1", "999")); !errors.As(err, &ce) || ce.Key != "PK=ACC#123 SK=SUB#s1#SKU#999" {
			t.Fatalf("conflict key: %v", err)
		}
		_, err = e.payments.GetSubscription(ctx, "123", "s9", "999")
		require.ErrorIs(t, err, billing.ErrNotFound, "missing")
		subs, err := e.payments.SubscriptionsByAccount(ctx, "123")
		if err != nil || len(subs) != 2 || subs[0].SKU != "777" || subs[1] != a || subs[0].Email != "" || !subs[0].NextReminderDate.IsZero() {
			t.Fatalf("list: %+v %v", subs, err)
		}
		if subs, err := e.payments.SubscriptionsByAccount(ctx, "nobody"); err != nil || len(subs) != 0 {
			t.Fatalf("empty list: %+v %v", subs, err)
		}
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
			if _, err := e.payments.CreateSubscription(t.Context(), s); !errors.Is(err, entitlement.ErrInvalidPayment) {
				t.Errorf("%s: %v", name, err)
			}
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
		if err != nil || v2.Version != 2 || v2.PaymentAmount != 499 || v2.Email != "" || !v2.NextPaymentDate.IsZero() ||
			!v2.CreatedAt.Equal(payStart) || !v2.UpdatedAt.Equal(payStart.Add(time.Hour)) {
			t.Fatalf("update: %+v %v", v2, err)
		}
		if got, _ := e.payments.GetSubscription(ctx, "123", "s1", "999"); got != v2 {
			t.Fatalf("stored %+v\nwant   %+v", got, v2)
		}
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
		if got, _ := e.payments.GetSubscription(ctx, "123", "s1", "999"); got != v2 {
			t.Fatalf("changed by failed updates: %+v", got)
		}
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
		if got := allDue(t, e, false, day(1, 28).Add(20*time.Hour)); !slices.Equal(got, []string{"123/s1#999"}) {
			t.Fatalf("due 28 Jan: %v", got)
		}
		if got := allDue(t, e, true, day(1, 21)); !slices.Equal(got, []string{"123/s1#999"}) {
			t.Fatalf("reminders 21 Jan: %v", got)
		}
		rec := entitlement.Receipt{AccountID: "123", SubscriptionID: "s1", SKU: "999",
			ProcessedDate: day(1, 28).Add(9 * time.Hour), ProcessedAmount: due.PaymentAmount, TransactionID: "tx1"}
		sub, r, err := e.payments.RecordPayment(ctx, due, rec, day(2, 28), day(2, 21))
		if err != nil || sub.Version != 2 || !sub.LastPaymentDate.Equal(day(1, 28)) || !sub.NextPaymentDate.Equal(day(2, 28)) ||
			!r.ExpiresAt.Equal(rec.ProcessedDate.Add(layout.DefaultReceiptRetention)) {
			t.Fatalf("record: %+v %+v %v", sub, r, err)
		}
		if got := allDue(t, e, false, day(1, 28)); len(got) != 0 {
			t.Fatalf("still due on the old date: %v", got)
		}
		if got := allDue(t, e, false, day(2, 28)); !slices.Equal(got, []string{"123/s1#999", "456/s3#888"}) {
			t.Fatalf("due 28 Feb: %v", got)
		}
		page, _, err := e.payments.DuePaymentsByDate(ctx, day(2, 28), "")
		if err != nil || len(page) != 2 || page[0].Version == 0 || page[0].PaymentDetails == "" || page[0].CreatedAt.IsZero() {
			t.Fatalf("due page is not full subscriptions: %+v %v", page, err)
		}
		got, err := e.payments.GetSubscription(ctx, "123", "s1", "999")
		if err != nil || got != sub {
			t.Fatalf("stored %+v\nwant   %+v", got, sub)
		}
		// Reminders: MarkReminded records today and moves the next one.
		e.clock.Set(day(2, 21).Add(8 * time.Hour))
		rem, err := e.payments.MarkReminded(ctx, sub, time.Time{})
		if err != nil || !rem.LastReminderDate.Equal(day(2, 21)) || !rem.NextReminderDate.IsZero() || rem.Version != 3 {
			t.Fatalf("mark reminded: %+v %v", rem, err)
		}
		if got := allDue(t, e, true, day(2, 21)); !slices.Equal(got, []string{"456/s3#888"}) {
			t.Fatalf("reminders 21 Feb: %v", got)
		}
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
		if got := allDue(t, e, false, day(1, 28)); !slices.Equal(got, want) {
			t.Fatalf("paged %v\nwant  %v", got, want)
		}
		page, next, err := e.payments.DuePaymentsByDate(ctx, day(1, 28), "")
		if err != nil || len(page) != 2 || next == "" {
			t.Fatalf("first page: %d %q %v", len(page), next, err)
		}
		c := byte('A')
		if next[10] == 'A' {
			c = 'B'
		}
		tampered := next[:10] + string(c) + next[11:]
		for name, tok := range map[string]string{"tampered": tampered, "garbage": "!!", "truncated": next[:len(next)/2]} {
			if _, _, err := e.payments.DuePaymentsByDate(ctx, day(1, 28), tok); !errors.Is(err, billing.ErrInvalidCursor) {
				t.Errorf("%s cursor: %v", name, err)
			}
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
		if _, err := dynamostore.NewPayments(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := memory.NewPayments(memory.PaymentsOptions{PageSize: -1}); err == nil {
		t.Error("twin: negative page size accepted")
	}
	if _, err := dynamostore.NewPayments(dynamostore.PaymentsConfig{Client: client}); err != nil {
		t.Errorf("defaults: %v", err)
	}
}
