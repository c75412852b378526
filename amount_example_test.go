package billing_test

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/dynabill/billing"
)

func ExampleParseAmount() {
	for _, s := range []string{"4.99", "39.99", "0.50", "5", "05.0"} {
		a, err := billing.ParseAmount(s)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%q -> %d cents, canonical %s\n", s, a.MinorUnits(), a)
	}

	_, err := billing.ParseAmount("4.999")
	fmt.Println(err)
	fmt.Println(errors.Is(err, billing.ErrInvalidAmount))
	// Output:
	// "4.99" -> 499 cents, canonical 4.99
	// "39.99" -> 3999 cents, canonical 39.99
	// "0.50" -> 50 cents, canonical 0.50
	// "5" -> 500 cents, canonical 5.00
	// "05.0" -> 500 cents, canonical 5.00
	// billing: invalid amount "4.999": more than two digits after the decimal point
	// true
}

func ExampleAmount_Sub() {
	price := billing.MustParseAmount("9.99")
	credit := billing.MustParseAmount("12.50")
	due, err := price.Sub(credit)
	if err != nil {
		panic(err)
	}
	fmt.Println(due)
	// Output: -2.51
}

func ExampleAmount_MarshalJSON() {
	type charge struct {
		Amount billing.Amount `json:"amount"`
	}
	b, _ := json.Marshal(charge{Amount: billing.Cents(499)})
	fmt.Println(string(b))

	var c charge
	fmt.Println(json.Unmarshal([]byte(`{"amount":4.99}`), &c))
	// Output:
	// {"amount":"4.99"}
	// billing: invalid amount "4.99": amount must be a JSON string such as "4.99", not a JSON number
}
