package billinghttp_test

import (
	"testing"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billinghttp"
	"github.com/stretchr/testify/assert"
)

// prices is the host's price list of the tests that have one.
var prices = billing.PriceListMap{
	"Plus:v2": billing.MustParseAmount("4.99"),
	"Lite:v1": billing.MustParseAmount("2.99"),
	"Max:v1":  billing.MustParseAmount("9.99"),
}

func withPrices(c *billing.Config) { c.Prices = prices }

// The messages of a refused tier name and a refused amount.
const (
	unknownTier   = "unknown tier: not in the price list, or not a tier name"
	amountRefused = "amount refused: it is required when there is no price list, and must be more than zero, " +
		"at most the largest charge allowed, and the price list's price of the tier when there is a price list"
)

// TestTierAmount checks where a tier change's amount comes from: the
// request without a price list, the price list when there is one.
func TestTierAmount(t *testing.T) {
	cases := []struct {
		name      string
		opts      []func(*billing.Config)
		body      string
		status    int
		field     string
		amount    string // the stored amount after an accepted change
		unchanged bool
		message   string // the refusal's message, when checked
	}{
		{name: "no list: amount given", body: `{"tier": "Max:v1", "amount": "9.99"}`, status: 200, amount: "9.99"},
		{name: "no list: amount required", body: `{"tier": "Max:v1"}`, status: 400, field: "amount", message: amountRefused},
		{name: "no list: amount null", body: `{"tier": "Max:v1", "amount": null}`, status: 400, field: "amount", message: amountRefused},
		{name: "no list: amount required, downgrade", body: `{"tier": "Max:v1", "downgrade": true}`, status: 400, field: "amount", message: amountRefused},
		{name: "no list: zero", body: `{"tier": "Max:v1", "amount": "0.00"}`, status: 400, field: "amount"},
		{name: "no list: the largest charge", body: `{"tier": "Max:v1", "amount": "10000.00"}`, status: 200, amount: "10000.00"},
		{name: "no list: above the largest charge", body: `{"tier": "Max:v1", "amount": "10000.01"}`, status: 400, field: "amount"},
		{name: "no list: free tiers allowed", opts: []func(*billing.Config){func(c *billing.Config) { c.AllowFreeTiers = true }},
			body: `{"tier": "Free:v1", "amount": "0.00"}`, status: 200, amount: "0.00"},
		{name: "no list: a lower largest charge", opts: []func(*billing.Config){func(c *billing.Config) { c.MaxCharge = billing.MustParseAmount("5.00") }},
			body: `{"tier": "Max:v1", "amount": "9.99"}`, status: 400, field: "amount"},
		{name: "list: amount left out", opts: []func(*billing.Config){withPrices}, body: `{"tier": "Max:v1"}`, status: 200, amount: "9.99"},
		{name: "list: the list's amount", opts: []func(*billing.Config){withPrices}, body: `{"tier": "Max:v1", "amount": "9.99"}`, status: 200, amount: "9.99"},
		{name: "list: another amount", opts: []func(*billing.Config){withPrices}, body: `{"tier": "Max:v1", "amount": "1.00"}`, status: 400, field: "amount"},
		{name: "list: zero is not 'take the price'", opts: []func(*billing.Config){withPrices}, body: `{"tier": "Max:v1", "amount": "0.00"}`, status: 400, field: "amount"},
		{name: "list: unknown tier", opts: []func(*billing.Config){withPrices}, body: `{"tier": "Gold:v9"}`, status: 400, field: "tier"},
		{name: "list: unknown tier with zero", opts: []func(*billing.Config){withPrices}, body: `{"tier": "Gold:v9", "amount": "0.00"}`, status: 400, field: "tier"},
		{name: "list: tier names are exact", opts: []func(*billing.Config){withPrices}, body: `{"tier": "max:v1"}`, status: 400, field: "tier"},
		// The tier name rule is the collector's: a name with control
		// characters is an unknown tier, with or without a price list.
		{name: "no list: NUL in the tier", body: `{"tier": "Max\u0000:v1", "amount": "9.99"}`, status: 400, field: "tier", message: unknownTier},
		{name: "no list: newline in the tier", body: `{"tier": "Max:v1\nPAID", "amount": "9.99"}`, status: 400, field: "tier", message: unknownTier},
		{name: "no list: DEL in the tier", body: `{"tier": "Max\u007f:v1", "amount": "9.99"}`, status: 400, field: "tier", message: unknownTier},
		{name: "no list: C1 control in the tier", body: `{"tier": "Max\u0085:v1", "amount": "9.99"}`, status: 400, field: "tier", message: unknownTier},
		{name: "no list: control character, amount left out", body: `{"tier": "Max\t:v1"}`, status: 400, field: "tier", message: unknownTier},
		{name: "list: control character in the tier", opts: []func(*billing.Config){withPrices}, body: `{"tier": "Max:v1\u001b"}`, status: 400, field: "tier", message: unknownTier},
		{name: "no list: non-ASCII tier", body: `{"tier": "Max ünlimited:v1", "amount": "9.99"}`, status: 200, amount: "9.99"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.opts...)
			before := e.stored("d-new")
			w := e.do("POST", "/dave/subscriptions/d-new/tier", "operator", tc.body)
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.status, w.Body)
			}
			r := decode(t, w)
			if tc.status != 200 {
				assert.Equal(t, billinghttp.CodeInvalidRequest, r.Error.Code, "code")
				assert.Equal(t, tc.field, r.Error.Field, "field")
				if tc.message != "" {
					assert.Equal(t, tc.message, r.Error.Message, "message")
				}
				assert.Equal(t, before, e.stored("d-new"), "record changed")
				return
			}
			assert.Equal(t, tc.amount, r.After.BillingAmount, "answered amount")
			assert.Equal(t, billing.MustParseAmount(tc.amount), e.stored("d-new").Amount, "stored amount")
		})
	}
}
