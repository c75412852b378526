package dynamostore_test

import (
	"errors"
	"github.com/dynabill/billing/internal/sdkav"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/entitlement"
	"github.com/dynabill/billing/internal/layout"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newReceipt(account, sub, sku string, processed time.Time, amount string) entitlement.Receipt {
	return entitlement.Receipt{AccountID: account, SubscriptionID: sub, SKU: sku, ProcessedDate: processed,
		ProcessedAmount: billing.MustParseAmount(amount), TransactionID: "tx-" + processed.Format(time.DateOnly)}
}

// TestReceiptCreateIdempotentTTL: a replay of the same receipt succeeds,
// other content conflicts; the TTL attribute holds ProcessedDate + retention.
func TestReceiptCreateIdempotentTTL(t *testing.T) {
	forEachPayments(t, 0, func(t *testing.T, e *payEnv) {
		ctx := t.Context()
		processed := time.Date(2025, 5, 28, 9, 0, 0, 123456789, time.UTC)
		r := newReceipt("123", "s1", "999", processed, "39.99")
		got, err := e.payments.CreateReceipt(ctx, r)
		want := r
		want.ExpiresAt = processed.Add(layout.DefaultReceiptRetention).Truncate(time.Second)
		require.NoError(t, err, "create")
		require.Equal(t, want, got, "create")
		again, err := e.payments.CreateReceipt(ctx, r)
		require.NoError(t, err, "replay")
		require.Equal(t, want, again, "replay")
		noTx := newReceipt("123", "s1", "999", processed.Add(time.Second), "1.00")
		noTx.TransactionID = ""
		for range 2 {
			_, err := e.payments.CreateReceipt(ctx, noTx)
			require.NoError(t, err, "receipt without transaction ID")
		}
		for name, edit := range map[string]func(*entitlement.Receipt){
			"amount":      func(r *entitlement.Receipt) { r.ProcessedAmount++ },
			"transaction": func(r *entitlement.Receipt) { r.TransactionID = "tx-other" },
			"no tx":       func(r *entitlement.Receipt) { r.TransactionID = "" },
		} {
			other := r
			edit(&other)
			_, err := e.payments.CreateReceipt(ctx, other)
			assert.ErrorIs(t, err, billing.ErrAlreadyExists, "replay with other %s", name)
		}
		recs, err := e.payments.ReceiptsByAccount(ctx, "123", time.Time{})
		require.NoError(t, err, "stored")
		require.Len(t, recs, 2, "stored %+v", recs)
		require.Equal(t, want, recs[1], "stored")
		if bad := newReceipt("123", "s1", "999", time.Time{}, "1.00"); true {
			_, err := e.payments.CreateReceipt(ctx, bad)
			assert.ErrorIs(t, err, entitlement.ErrInvalidPayment, "no processed date")
		}
		if e.acct == nil {
			return
		}
		item := e.acct.raw(t, "ACC#123", "REC#2025-05-28T09:00:00.123456789Z#SKU#999")
		require.IsType(t, &types.AttributeValueMemberN{}, item["TTL"], "TTL attribute (item %v)", item)
		require.Equal(t, "1764234000", item["TTL"].(*types.AttributeValueMemberN).Value, "TTL attribute (item %v)", item)
		require.Equal(t, int64(1764234000), want.ExpiresAt.Unix(), "expected TTL: %d", want.ExpiresAt.Unix())
	})
}

// TestReceiptsByAccountNewestFirst: receipts since a date, newest first,
// never subscriptions; subscriptions never receipts.
func TestReceiptsByAccountNewestFirst(t *testing.T) {
	forEachPayments(t, 0, func(t *testing.T, e *payEnv) {
		ctx := t.Context()
		mustCreate(t, e, newRecurring("123", "s1", "999"))
		mustCreate(t, e, newRecurring("123", "s1", "777"))
		dates := []time.Time{day(1, 28), day(2, 28).Add(time.Hour), day(3, 28), day(3, 28).Add(500 * time.Millisecond)}
		for i, d := range dates {
			sku := []string{"999", "777"}[i%2]
			_, err := e.payments.CreateReceipt(ctx, newReceipt("123", "s1", sku, d, "39.99"))
			require.NoError(t, err)
		}
		_, err := e.payments.CreateReceipt(ctx, newReceipt("456", "s1", "999", day(3, 1), "1.00"))
		require.NoError(t, err)
		recs, err := e.payments.ReceiptsByAccount(ctx, "123", day(2, 28))
		require.NoError(t, err, "since 28 Feb")
		require.Len(t, recs, 3, "since 28 Feb: %+v", recs)
		for i, want := range []time.Time{dates[3], dates[2], dates[1]} {
			assert.True(t, recs[i].ProcessedDate.Equal(want), "receipt %d: %+v, want processed %v", i, recs[i], want)
			assert.Equal(t, "123", recs[i].AccountID, "receipt %d: %+v", i, recs[i])
		}
		recs, err = e.payments.ReceiptsByAccount(ctx, "123", time.Time{})
		require.NoError(t, err, "all")
		require.Len(t, recs, 4, "all")
		recs, err = e.payments.ReceiptsByAccount(ctx, "123", dates[3])
		require.NoError(t, err, "since the newest (inclusive)")
		require.Len(t, recs, 1, "since the newest (inclusive)")
		subs, err := e.payments.SubscriptionsByAccount(ctx, "123")
		require.NoError(t, err, "subscriptions among receipts")
		require.Len(t, subs, 2, "subscriptions among receipts: %+v", subs)
	})
}

// TestRecordPaymentAtomic: with a stale prev, or a receipt key holding
// other content, RecordPayment writes nothing: no receipt, no update.
func TestRecordPaymentAtomic(t *testing.T) {
	forEachPayments(t, 0, func(t *testing.T, e *payEnv) {
		ctx := t.Context()
		v1 := mustCreate(t, e, newRecurring("123", "s1", "999"))
		next := v1
		next.Email = "new@example.com"
		v2, err := e.payments.UpdateSubscription(ctx, v1, next)
		require.NoError(t, err)
		rec := newReceipt("123", "s1", "999", day(1, 28).Add(time.Hour), "39.99")
		_, _, err = e.payments.RecordPayment(ctx, v1, rec, day(2, 28), day(2, 21))
		require.ErrorIs(t, err, billing.ErrConflict, "stale prev")
		recs, _ := e.payments.ReceiptsByAccount(ctx, "123", time.Time{})
		require.Empty(t, recs, "receipt written by a failed transaction")
		clash := rec
		clash.ProcessedAmount = 1
		_, err = e.payments.CreateReceipt(ctx, clash)
		require.NoError(t, err)
		_, _, err = e.payments.RecordPayment(ctx, v2, rec, day(2, 28), day(2, 21))
		require.ErrorIs(t, err, billing.ErrAlreadyExists, "receipt clash")
		got, _ := e.payments.GetSubscription(ctx, "123", "s1", "999")
		require.Equal(t, v2, got, "subscription updated by a failed transaction")
		wrong := rec
		wrong.SKU = "777"
		_, _, err = e.payments.RecordPayment(ctx, v2, wrong, day(2, 28), day(2, 21))
		require.ErrorIs(t, err, entitlement.ErrInvalidPayment, "receipt of another subscription")
		rec.ProcessedDate = rec.ProcessedDate.Add(time.Minute)
		v3, r, err := e.payments.RecordPayment(ctx, v2, rec, day(2, 28), time.Time{})
		require.NoError(t, err, "record")
		require.Equal(t, 3, v3.Version, "record: %+v", v3)
		require.True(t, v3.NextReminderDate.IsZero(), "record: %+v", v3)
		require.Equal(t, rec.ProcessedAmount, r.ProcessedAmount, "record: %+v", r)
		recs, _ = e.payments.ReceiptsByAccount(ctx, "123", time.Time{})
		require.Len(t, recs, 2, "receipts %+v", recs)
		require.Equal(t, r, recs[0], "receipts")
	})
}

// FuzzDecodeRecurringSubscription: the decoders never panic, and what
// they accept re-encodes to an item that decodes to the same value.
func FuzzDecodeRecurringSubscription(f *testing.F) {
	f.Add("ACC#123", "SUB#s1#SKU#999", "999", "28", "39.99", "2025-01-28", "0001-01-01", "1")
	f.Add("ACC#1", "SUB##SKU#", "", "x", "-1", "2025-13-01", "", "-3")
	f.Fuzz(func(t *testing.T, pk, sk, sku, payDay, amount, next, last, version string) {
		item := map[string]types.AttributeValue{
			"PK": &types.AttributeValueMemberS{Value: pk}, "SK": &types.AttributeValueMemberS{Value: sk},
			"SKU": &types.AttributeValueMemberS{Value: sku}, "PaymentDay": &types.AttributeValueMemberN{Value: payDay},
			"PaymentAmount": &types.AttributeValueMemberS{Value: amount}, "NextPaymentDate": &types.AttributeValueMemberS{Value: next},
			"LastPaymentDate": &types.AttributeValueMemberS{Value: last}, "Version": &types.AttributeValueMemberN{Value: version},
		}
		s, err := layout.SingleTableConfig(payTable).DecodeRecurringSubscription(sdkav.FromSDK(item))
		if err != nil {
			if !errors.Is(err, billing.ErrInvalidItem) && !errors.Is(err, billing.ErrInvalidDate) && !errors.Is(err, billing.ErrInvalidAmount) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		again, err := layout.SingleTableConfig(payTable).EncodeRecurringSubscription(s)
		require.NoError(t, err, "accepted %+v but cannot encode it", s)
		s2, err := layout.SingleTableConfig(payTable).DecodeRecurringSubscription(again)
		require.NoError(t, err, "round trip %+v", s)
		require.Equal(t, s, s2, "round trip")
		_, err = layout.SingleTableConfig(payTable).DecodeReceipt(sdkav.FromSDK(item))
		require.Error(t, err, "a subscription item decodes as a receipt: %v", item)
	})
}

// FuzzDecodeReceipt: see FuzzDecodeRecurringSubscription.
func FuzzDecodeReceipt(f *testing.F) {
	f.Add("ACC#123", "REC#2025-05-28T09:00:00.000000000Z#SKU#999", "s1", "2025-05-28T09:00:00Z", "39.99", "1764234000")
	f.Add("ACC#123", "REC#x#SKU#", "", "2025-05-28T09:00:00.5+02:00", "1", "1e3")
	f.Fuzz(func(t *testing.T, pk, sk, sub, processed, amount, ttl string) {
		item := map[string]types.AttributeValue{
			"PK": &types.AttributeValueMemberS{Value: pk}, "SK": &types.AttributeValueMemberS{Value: sk},
			"SubscriptionID": &types.AttributeValueMemberS{Value: sub}, "ProcessedDate": &types.AttributeValueMemberS{Value: processed},
			"ProcessedAmount": &types.AttributeValueMemberS{Value: amount}, "TTL": &types.AttributeValueMemberN{Value: ttl},
		}
		r, err := layout.SingleTableConfig(payTable).DecodeReceipt(sdkav.FromSDK(item))
		if err != nil {
			return
		}
		again, err := layout.SingleTableConfig(payTable).EncodeReceipt(r)
		require.NoError(t, err, "accepted %+v but cannot encode it", r)
		r2, err := layout.SingleTableConfig(payTable).DecodeReceipt(again)
		require.NoError(t, err, "round trip %+v", r)
		require.Equal(t, r, r2, "round trip")
	})
}
