package layout

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/dynabill/billing/internal/sdkav"
	"github.com/stretchr/testify/require"
)

// TestMarshalTaggedMatchesAttributeValue: the payments layout's items were
// written with attributevalue.MarshalMap before the codecs left the SDK;
// marshalTagged must write the same attributes, empty and zero fields
// and omitempty included, so existing items and new ones stay alike.
func TestMarshalTaggedMatchesAttributeValue(t *testing.T) {
	for _, v := range []any{
		recurringItem{},
		recurringItem{PK: "ACC#1", SK: "SUB#s#SKU#k", Entity: "Subscription", SKU: "k", PaymentDay: 31, PaymentAmount: "4.99", Version: 7,
			Email: "a@b", PaymentDetails: "tok", NextPaymentDate: "2025-01-31", NextReminderDate: "2025-01-28",
			LastPaymentDate: "2024-12-31", LastReminderDate: "2024-12-28", CreatedAt: "1", UpdatedAt: "2"},
		recurringItem{PK: "ACC#1", PaymentDay: -1, Version: 0},
		receiptItem{},
		receiptItem{PK: "ACC#1", SK: "REC#x", Entity: "Receipt", SKU: "k", SubscriptionID: "s", ProcessedDate: "d", ProcessedAmount: "1.00", TransactionID: "tx"},
	} {
		want, err := attributevalue.MarshalMap(v)
		require.NoError(t, err)
		got, err := marshalTagged(v)
		require.NoError(t, err)
		require.Equal(t, want, sdkav.ToSDK(got), "%#v", v)
	}
	_, err := marshalTagged(struct {
		F float64 `dynamodbav:"F"`
	}{})
	require.Error(t, err, "a kind it does not write is refused, not guessed")
}
