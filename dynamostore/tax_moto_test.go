package dynamostore_test

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/layout"
)

// taxAttrs are the attributes of a period's tax.
var taxAttrs = []string{layout.AttrTax, layout.AttrTaxInclusive, layout.AttrTaxDescription}

// taxedAttempt returns cur with attempt 1 made durable for a charge of
// amount and tax fixed for it, as the collector writes them together.
func taxedAttempt(cur billing.Period, tax billing.Tax, amount billing.Amount, at time.Time) billing.Period {
	next := cur.Clone()
	next.Tax = tax
	next.LastAttempt = billing.Attempt{Number: 1, Key: billing.IdempotencyKey(cur.SubscriptionID, 1), Amount: amount,
		Tier: cur.ReceiptTierName, Process: billing.ProcessInitial, Started: at}
	return next
}

// requireTaxBytes checks the tax attributes of a stored item: the amount
// and description as S, the inclusive flag as BOOL true or absent.
func requireTaxBytes(t *testing.T, item map[string]types.AttributeValue, amount, description string, inclusive bool) {
	t.Helper()
	require.Equal(t, avS(amount), item[layout.AttrTax], layout.AttrTax)
	require.Equal(t, avS(description), item[layout.AttrTaxDescription], layout.AttrTaxDescription)
	if inclusive {
		require.Equal(t, &types.AttributeValueMemberBOOL{Value: true}, item[layout.AttrTaxInclusive], layout.AttrTaxInclusive)
	} else {
		require.NotContains(t, item, layout.AttrTaxInclusive, "omitted when false")
	}
}

// TestDynamoTaxAttributes (legacy tables, on the local DynamoDB server):
// a period's tax is written with the attempt it is fixed for, in the same
// conditional write and nothing else beside the attempt (a legacy item's
// other bytes stay); it reads back as written; withdrawing the attempt
// takes the attributes off again, leaving the item as it was. An item
// without a tax has none of them.
func TestDynamoTaxAttributes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		tax  billing.Tax
		want string
	}{
		{"exclusive", billing.Tax{Amount: billing.Cents(100), Description: "VAT 20%"}, "1.00"},
		{"inclusive", billing.Tax{Amount: billing.Cents(83), Inclusive: true, Description: "VAT 20% incl."}, "0.83"},
		{"zero", billing.Tax{Description: "Tax"}, "0.00"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			started := time.Date(2024, 1, 31, 16, 0, 0, 0, time.UTC)
			e := newLegacyEnv(t, started)
			user := "tax-" + tc.name
			before := legacyItem(user, user+"-jan", billing.StatusScheduled)
			e.put(t, before)
			for _, a := range taxAttrs {
				require.NotContains(t, before, a)
			}
			bd, err := time.Parse(time.RFC3339, legacyBillingDate)
			require.NoError(t, err)
			cur, err := e.repo.Get(t.Context(), user, bd)
			require.NoError(t, err)
			require.False(t, cur.Tax.Fixed(), "absent: no tax")

			marked := taxedAttempt(cur, tc.tax, cur.Amount+tc.tax.Amount, started)
			require.NoError(t, e.repo.SetAttempt(t.Context(), &cur, &marked))
			after := e.get(t, user, legacyBillingDate)
			requireOnlyChanged(t, before, after, append(taxAttrs, attemptAttrs...)...)
			requireTaxBytes(t, after, tc.want, tc.tax.Description, tc.tax.Inclusive)
			got, err := e.repo.Get(t.Context(), user, bd)
			require.NoError(t, err)
			require.Equal(t, tc.tax, got.Tax)

			// Withdrawn: the item as it was, byte for byte.
			require.NoError(t, e.repo.SetAttempt(t.Context(), &got, &cur))
			requireOnlyChanged(t, before, e.get(t, user, legacyBillingDate))
		})
	}
}

// TestSingleTableTaxAttributes is TestDynamoTaxAttributes on the single
// table: the period item gets the tax with its attempt, and loses it with
// the attempt's withdrawal.
func TestSingleTableTaxAttributes(t *testing.T) {
	t.Parallel()
	started := time.Date(2024, 1, 31, 16, 0, 0, 0, time.UTC)
	e := newSingleWriteBackEnv(t, started)
	ref := layout.SubscriptionRef{AccountID: "tax-acc", SubscriptionID: "s1", SKU: "STREAM"}
	bd := time.Date(2024, 1, 31, 15, 0, 0, 0, time.UTC)
	rec := billing.Period{UserID: ref.UserID(), SubscriptionID: "tax-period-jan", BillingDate: bd,
		Amount: billing.MustParseAmount("10.00"), Status: billing.StatusScheduled, BillingPeriod: "01/2024",
		Term: billing.TermMonthly, AnchorDay: 31, ReceiptTierName: "Plus:v2",
		CreatedDate: bd.AddDate(0, -1, 0), LastRunDate: bd.AddDate(0, -1, 0)}
	require.NoError(t, e.repo.Add(t.Context(), &rec))
	pk, periodSK := "ACC#tax-acc", "PER#s1#SKU#STREAM#"+legacyBillingDate
	before := e.get(t, pk, periodSK)
	for _, a := range taxAttrs {
		require.NotContains(t, before, a, "absent: no tax")
	}
	cur, err := e.repo.Get(t.Context(), ref.UserID(), bd)
	require.NoError(t, err)

	tax := billing.Tax{Amount: billing.Cents(167), Inclusive: true, Description: "VAT 20%"}
	marked := taxedAttempt(cur, tax, cur.Amount, started)
	require.NoError(t, e.repo.SetAttempt(t.Context(), &cur, &marked))
	after := e.get(t, pk, periodSK)
	requireOnlyChanged(t, before, after, append(taxAttrs, attemptAttrs...)...)
	requireTaxBytes(t, after, "1.67", "VAT 20%", true)
	got, err := e.repo.Get(t.Context(), ref.UserID(), bd)
	require.NoError(t, err)
	require.Equal(t, tax, got.Tax)

	require.NoError(t, e.repo.SetAttempt(t.Context(), &got, &cur))
	requireOnlyChanged(t, before, e.get(t, pk, periodSK))
}
