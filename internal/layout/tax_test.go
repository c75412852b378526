package layout

import (
	"errors"
	"maps"
	"testing"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/av"
	"github.com/stretchr/testify/require"
)

// TestTaxRoundTrip: a period's tax is written as billing_tax (an amount),
// billing_tax_description and, when included, billing_tax_inclusive
// (BOOL true), on the primary item and its history row, and reads back
// equal; a tax of zero that was fixed keeps its amount and description;
// no tax writes none of the three.
func TestTaxRoundTrip(t *testing.T) {
	base := loadItem(t, "../../testdata/items/monthly_completed.json")
	for _, tc := range []struct {
		name string
		tax  billing.Tax
		want map[string]av.AttributeValue
	}{
		{"none", billing.Tax{}, map[string]av.AttributeValue{}},
		{"exclusive", billing.Tax{Amount: billing.Cents(100), Description: "VAT 20%"}, map[string]av.AttributeValue{
			AttrTax: &av.AttributeValueMemberS{Value: "1.00"}, AttrTaxDescription: &av.AttributeValueMemberS{Value: "VAT 20%"}}},
		{"inclusive", billing.Tax{Amount: billing.Cents(83), Inclusive: true, Description: "MwSt."}, map[string]av.AttributeValue{
			AttrTax: &av.AttributeValueMemberS{Value: "0.83"}, AttrTaxDescription: &av.AttributeValueMemberS{Value: "MwSt."},
			AttrTaxInclusive: &av.AttributeValueMemberBOOL{Value: true}}},
		{"zero", billing.Tax{Description: "Tax"}, map[string]av.AttributeValue{
			AttrTax: &av.AttributeValueMemberS{Value: "0.00"}, AttrTaxDescription: &av.AttributeValueMemberS{Value: "Tax"}}},
	} {
		rec, err := DecodeItem(base)
		require.NoError(t, err)
		rec.Tax = tc.tax
		want := maps.Clone(base)
		maps.Copy(want, tc.want)
		item, err := EncodeItem(&rec)
		require.NoError(t, err, tc.name)
		require.Equal(t, want, item, tc.name)
		hist, err := EncodeHistoryItem(&rec)
		require.NoError(t, err, tc.name)
		for _, a := range []string{AttrTax, AttrTaxDescription, AttrTaxInclusive} {
			require.Equal(t, item[a], hist[a], "%s: %s on the history row", tc.name, a)
		}
		back, err := DecodeItem(item)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.tax, back.Tax, tc.name)
	}
}

// TestTaxRefused: a tax read or written other than as EncodeItem writes it
// is a FieldError naming the attribute: half of it (an amount without its
// description, or the reverse, or the inclusive flag alone), a negative
// amount, one that overflows with the charge, the wrong types.
func TestTaxRefused(t *testing.T) {
	s := func(v string) av.AttributeValue { return &av.AttributeValueMemberS{Value: v} }
	for _, tt := range []struct {
		what  string
		field string
		attrs map[string]av.AttributeValue
		cause error
	}{
		{"an amount alone", AttrTaxDescription, map[string]av.AttributeValue{AttrTax: s("1.00")}, nil},
		{"a description alone", AttrTax, map[string]av.AttributeValue{AttrTaxDescription: s("VAT")}, nil},
		{"inclusive alone", AttrTax, map[string]av.AttributeValue{AttrTaxInclusive: &av.AttributeValueMemberBOOL{Value: true}}, nil},
		{"negative", AttrTax, map[string]av.AttributeValue{AttrTax: s("-1.00"), AttrTaxDescription: s("VAT")}, billing.ErrInvalidAmount},
		{"overflowing", AttrTax, map[string]av.AttributeValue{AttrTax: s(billing.MaxAmount.String()), AttrTaxDescription: s("VAT")}, billing.ErrInvalidAmount},
		{"a number", AttrTax, map[string]av.AttributeValue{AttrTax: &av.AttributeValueMemberN{Value: "1"}, AttrTaxDescription: s("VAT")}, nil},
		{"inclusive as a string", AttrTaxInclusive, map[string]av.AttributeValue{AttrTax: s("1.00"), AttrTaxDescription: s("VAT"), AttrTaxInclusive: s("true")}, nil},
	} {
		item := loadItem(t, "../../testdata/items/monthly_completed.json")
		maps.Copy(item, tt.attrs)
		_, err := DecodeItem(item)
		var fe *billing.FieldError
		require.True(t, errors.As(err, &fe), "read %s: %v", tt.what, err)
		require.Equal(t, tt.field, fe.Field, "read %s: %v", tt.what, err)
		require.ErrorIs(t, err, billing.ErrInvalidItem, tt.what)
		if tt.cause != nil {
			require.ErrorIs(t, err, tt.cause, tt.what)
		}
	}
	for _, tt := range []struct {
		what, field string
		tax         billing.Tax
	}{
		{"no description", AttrTaxDescription, billing.Tax{Amount: 1}},
		{"inclusive without description", AttrTaxDescription, billing.Tax{Inclusive: true}},
		{"negative", AttrTax, billing.Tax{Amount: -1, Description: "VAT"}},
		{"overflowing", AttrTax, billing.Tax{Amount: billing.MaxAmount, Description: "VAT"}},
	} {
		rec, err := DecodeItem(loadItem(t, "../../testdata/items/monthly_completed.json"))
		require.NoError(t, err)
		rec.Tax = tt.tax
		_, err = EncodeItem(&rec)
		var fe *billing.FieldError
		require.True(t, errors.As(err, &fe), "write %s: %v", tt.what, err)
		require.Equal(t, tt.field, fe.Field, "write %s: %v", tt.what, err)
		require.ErrorIs(t, err, billing.ErrInvalidItem, tt.what)
	}
}
