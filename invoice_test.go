package billing_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
)

func TestInvoiceValidate(t *testing.T) {
	for _, tc := range []struct {
		name, field string
		edit        func(*billing.Invoice)
	}{
		{"adds up", "", func(*billing.Invoice) {}},
		{"JPY, no minor unit", "", func(inv *billing.Invoice) { inv.Currency = "JPY" }},
		{"unknown currency", "Currency", func(inv *billing.Invoice) { inv.Currency = "usd" }},
		{"not a code", "Currency", func(inv *billing.Invoice) { inv.Currency = "D A" }},
		{"plan line not quantity × unit", "Lines[0].Amount", func(inv *billing.Invoice) { inv.Lines[0].UnitAmount = 500 }},
		{"unknown kind", "Lines[1].Kind", func(inv *billing.Invoice) { inv.Lines[1].Kind = "rebate" }},
		{"negative line", "Lines[2].Amount", func(inv *billing.Invoice) { inv.Lines[2].Amount = -81 }},
		{"subtotal", "Subtotal", func(inv *billing.Invoice) { inv.Subtotal = 999 }},
		{"discounts", "Discounts", func(inv *billing.Invoice) { inv.Discounts = 0 }},
		{"tax", "Tax", func(inv *billing.Invoice) { inv.Tax = 80 }},
		{"total", "Total", func(inv *billing.Invoice) { inv.Total = 978 }},
		{"due", "AmountDue", func(inv *billing.Invoice) { inv.AmountDue = 0 }},
		{"paid beyond total", "AmountPaid", func(inv *billing.Invoice) { inv.AmountPaid, inv.AmountDue = 980, -1 }},
		{"balance applied", "", func(inv *billing.Invoice) {
			inv.Lines = append(inv.Lines, billing.InvoiceLine{Amount: 200, Kind: billing.LineCredit})
			inv.AmountPaid, inv.AmountDue = 200, 779
		}},
		{"balance not counted as paid", "AmountPaid", func(inv *billing.Invoice) {
			inv.Lines = append(inv.Lines, billing.InvoiceLine{Amount: 200, Kind: billing.LineCredit})
		}},
		{"discount beyond subtotal", "Discounts", func(inv *billing.Invoice) {
			inv.Lines[1].Amount, inv.Discounts, inv.Total, inv.AmountDue = 1000, 1000, 79, 79
		}},
		{"no key", "Key", func(inv *billing.Invoice) { inv.Key = "" }},
		// Prices that include the tax: the tax line adds nothing.
		{"tax included", "", func(inv *billing.Invoice) { inv.TaxInclusive, inv.Total, inv.AmountDue = true, 898, 898 }},
		{"tax included but added", "Total", func(inv *billing.Invoice) { inv.TaxInclusive = true }},
		{"tax added but included", "Total", func(inv *billing.Invoice) { inv.Total, inv.AmountDue = 898, 898 }},
		{"tax included beyond the total", "Tax", func(inv *billing.Invoice) {
			inv.Lines[2].Amount, inv.Tax, inv.TaxInclusive, inv.Total, inv.AmountDue = 899, 899, true, 898, 898
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv := billingtest.NewTestInvoice("u1", "p1", 0)
			tc.edit(inv)
			err := inv.Validate()
			if tc.field == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, billing.ErrInvalidInvoice)
			var fe *billing.FieldError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, tc.field, fe.Field)
			if tc.field != "Key" {
				assert.Equal(t, "p1", fe.Key, "the error names the invoice's key")
			}
		})
	}
}

func TestInvoiceTransitions(t *testing.T) {
	all := []billing.InvoiceStatus{billing.InvoiceDraft, billing.InvoiceOpen, billing.InvoicePaid, billing.InvoiceVoid, billing.InvoiceUncollectible}
	allowed := map[[2]billing.InvoiceStatus]bool{
		{billing.InvoiceDraft, billing.InvoiceOpen}: true, {billing.InvoiceDraft, billing.InvoiceVoid}: true,
		{billing.InvoiceOpen, billing.InvoicePaid}: true, {billing.InvoiceOpen, billing.InvoiceVoid}: true,
		{billing.InvoiceOpen, billing.InvoiceUncollectible}: true,
		{billing.InvoiceUncollectible, billing.InvoicePaid}: true, {billing.InvoiceUncollectible, billing.InvoiceVoid}: true,
	}
	for _, from := range all {
		for _, to := range all {
			err := from.CheckTransition(to)
			if allowed[[2]billing.InvoiceStatus{from, to}] {
				assert.NoError(t, err, "%s -> %s", from, to)
			} else {
				assert.ErrorIs(t, err, billing.ErrIllegalTransition, "%s -> %s", from, to)
			}
		}
	}
}

func TestInvoiceFormatAmount(t *testing.T) {
	for _, tc := range []struct {
		cur  string
		v    int64
		want string
	}{
		{"USD", 979, "9.79"}, {"USD", 5, "0.05"}, {"EUR", 100000, "1000.00"},
		{"JPY", 500, "500"}, {"KRW", 12000, "12000"}, {"KWD", 1250, "1.250"}, {"CLF", 1, "0.0001"},
		{"USD", -979, "-9.79"},
	} {
		inv := billing.Invoice{Currency: tc.cur}
		assert.Equal(t, tc.want, inv.FormatAmount(tc.v), "%s %d", tc.cur, tc.v)
	}
}
