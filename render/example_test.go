package render_test

import (
	"bytes"
	"fmt"
	"log"
	"regexp"
	"strings"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/render"
)

// A host makes its Renderer once, from its seller's details, and writes
// the invoice a customer asks for: here as HTML (a PDF is r.PDF), in
// German amounts. The page's heading and total are printed.
func Example() {
	r, err := render.New(render.Config{
		Seller: render.Seller{
			Name:    "Acme Video GmbH",
			Address: []string{"Friedrichstraße 10", "10117 Berlin"},
			TaxID:   "USt-IdNr. DE123456789",
			// Logo: the PNG or JPEG bytes of the seller's logo.
		},
		Locale: "de",
	})
	if err != nil {
		log.Fatal(err)
	}
	day := time.Date(2025, 3, 14, 0, 0, 0, 0, time.UTC)
	inv := billing.Invoice{
		ID: "in_example", UserID: "acct-7", Key: "period-2025-03", Number: "ACME-0001", Currency: "EUR",
		Lines: []billing.InvoiceLine{
			{Description: "Plus, monthly", PeriodStart: day, PeriodEnd: day.AddDate(0, 1, 0), Quantity: 1, UnitAmount: 129900,
				Amount: 129900, Kind: billing.LinePlan},
			{Description: "USt. 19 %", Amount: 24681, Kind: billing.LineTax},
		},
		Subtotal: 129900, Tax: 24681, Total: 154581, AmountPaid: 154581,
		Status: billing.InvoicePaid, Created: day, IssuedAt: day, PaidAt: day, TransactionID: "pi_123",
	}
	var page bytes.Buffer
	if err := r.HTML(&page, inv); err != nil {
		log.Fatal(err)
	}
	for _, re := range []string{`<h1>.*</h1>`, `<dd>PAID.*</dd>`, `>Total<.*</td>`} {
		// The amount's space is a no-break space (U+00A0): shown as "_".
		fmt.Println(strings.ReplaceAll(regexp.MustCompile(re).FindString(page.String()), "\u00a0", "_"))
	}
	// Output:
	// <h1>Invoice ACME-0001</h1>
	// <dd>PAID 2025-03-14</dd>
	// >Total</th><td class="num">1.545,81_€</td>
}
