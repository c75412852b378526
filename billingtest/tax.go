package billingtest

import (
	"context"
	"math/big"
	"slices"
	"sync"

	"github.com/dynabill/billing"
)

// TaxRate is a fake [billing.TaxProvider]: one rate for every charge,
// exclusive or inclusive, rounded half to even to the cent, or an error.
// It records every request. The zero TaxRate answers a tax of zero. Its
// fields may be changed between runs (not during one).
type TaxRate struct {
	// BasisPoints is the rate in hundredths of a percent: 2000 is 20 %.
	BasisPoints int64
	// Inclusive says the prices include the tax: the tax of an amount A
	// is A × rate / (1 + rate); otherwise it is A × rate.
	Inclusive bool
	// Description is given with the tax ("" lets the collector name it).
	Description string
	// Err, when set, is answered instead of a tax.
	Err error
	// Answer, when set, is answered instead of the rate's tax (a
	// provider's mistake: a negative tax, one larger than the price).
	Answer *billing.Tax

	mu    sync.Mutex
	calls []billing.TaxRequest
}

var _ billing.TaxProvider = (*TaxRate)(nil)

// Tax implements [billing.TaxProvider].
func (r *TaxRate) Tax(_ context.Context, req billing.TaxRequest) (billing.Tax, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, req)
	if r.Err != nil {
		return billing.Tax{}, r.Err
	}
	if r.Answer != nil {
		return *r.Answer, nil
	}
	den := int64(10000)
	if r.Inclusive {
		den += r.BasisPoints
	}
	return billing.Tax{Amount: halfEven(req.Amount, r.BasisPoints, den), Inclusive: r.Inclusive, Description: r.Description}, nil
}

// Calls returns the requests received, in order.
func (r *TaxRate) Calls() []billing.TaxRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// halfEven is a × num / den rounded half to even.
func halfEven(a billing.Amount, num, den int64) billing.Amount {
	n := new(big.Int).Mul(big.NewInt(int64(a)), big.NewInt(num))
	d := big.NewInt(den)
	q, rem := new(big.Int).QuoRem(n, d, new(big.Int))
	switch rem.Lsh(rem, 1).Cmp(d) {
	case 1:
		q.Add(q, big.NewInt(1))
	case 0:
		if q.Bit(0) == 1 {
			q.Add(q, big.NewInt(1))
		}
	}
	return billing.Amount(q.Int64())
}
