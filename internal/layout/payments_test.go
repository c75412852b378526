package layout

import (
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/entitlement"
	"github.com/dynabill/billing/internal/av"
	"github.com/stretchr/testify/require"
)

// The struct-tag encoders write exactly the attributes, types and
// omissions existing items have: PaymentDay and Version are Numbers even
// when 0, empty strings and zero times are left out, and a receipt's TTL
// goes to the configured attribute.
func TestEncodersKeepTheWireForm(t *testing.T) {
	c := SingleTableConfig{AccountPrefix: "ACC#", TTLAttribute: "TTL"}
	s := entitlement.RecurringSubscription{AccountID: "a1", SubscriptionID: "s1", SKU: "STREAM", PaymentDay: 5,
		PaymentAmount: billing.Cents(499), NextPaymentDate: time.Date(2024, 3, 5, 0, 0, 0, 0, time.UTC)}
	item, err := c.EncodeRecurringSubscription(s)
	require.NoError(t, err)
	S := func(v string) av.AttributeValue { return &av.AttributeValueMemberS{Value: v} }
	N := func(v string) av.AttributeValue { return &av.AttributeValueMemberN{Value: v} }
	require.Equal(t, map[string]av.AttributeValue{
		"PK": S("ACC#a1"), "SK": S(RecurringSK("s1", "STREAM")), "Entity": S("Subscription"), "SKU": S("STREAM"),
		"PaymentDay": N("5"), "PaymentAmount": S("4.99"), "Version": N("0"),
		"NextPaymentDate": S("2024-03-05"), "LastPaymentDate": S("0001-01-01"), "LastReminderDate": S("0001-01-01"),
	}, item)

	r := entitlement.Receipt{AccountID: "a1", SubscriptionID: "s1", SKU: "STREAM", ProcessedDate: time.Date(2024, 3, 5, 9, 0, 0, 0, time.UTC),
		ProcessedAmount: billing.Cents(499), ExpiresAt: time.Unix(1800000000, 0)}
	item, err = c.EncodeReceipt(r)
	require.NoError(t, err)
	sk, err := ReceiptSK(r.ProcessedDate, "STREAM")
	require.NoError(t, err)
	require.Equal(t, map[string]av.AttributeValue{
		"PK": S("ACC#a1"), "SK": S(sk), "Entity": S("Receipt"), "SKU": S("STREAM"), "SubscriptionID": S("s1"),
		"ProcessedDate": S("2024-03-05T09:00:00.000000000Z"), "ProcessedAmount": S("4.99"), "TTL": N("1800000000"),
	}, item)
	back, err := c.DecodeReceipt(item)
	require.NoError(t, err)
	require.Equal(t, r.ProcessedAmount, back.ProcessedAmount)
}
