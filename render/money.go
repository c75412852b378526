package render

import (
	"strings"

	"github.com/bojanz/currency"

	"github.com/dynabill/billing"
)

// money writes the amounts of one document, all in its currency.
type money struct {
	code string
	// plain writes v as the library does ("1234.50"): the exact decimal
	// with the currency's ISO 4217 digits, whatever the locale knows.
	plain func(v int64) string
	f     *currency.Formatter // nil when the locale library lacks the code
	// cp1252 is set for the PDF's built-in font: amounts are written in
	// what Windows-1252 holds.
	cp1252 bool
}

func (r *Renderer) money(code string, cp1252 bool) *money {
	doc := billing.Invoice{Currency: code}
	m := &money{code: code, plain: doc.FormatAmount, cp1252: cp1252}
	if currency.IsValid(code) {
		m.f = currency.NewFormatter(r.locale)
		// The digits are ISO 4217's, as the amounts are stored: 500 JPY is
		// ¥500, 1250 KWD is 1.250 KWD, whatever CLDR rounds cash to.
		d := uint8(doc.MinorDigits())
		m.f.MinDigits, m.f.MaxDigits = d, d
	}
	return m
}

// format writes v minor units with the locale's symbol and grouping:
// 123450 USD is "$1,234.50" in "en". neg writes it as taken off.
func (m *money) format(v int64, neg bool) string {
	if neg && v != 0 {
		v = -v
	}
	dec := m.plain(v)
	if m.f == nil {
		return dec + " " + m.code
	}
	a, err := currency.NewAmount(dec, m.code)
	if err != nil {
		return dec + " " + m.code
	}
	s := m.f.Format(a)
	if !m.cp1252 {
		return s
	}
	if s, ok := cp1252Amount(s); ok {
		return s
	}
	// A symbol Windows-1252 lacks (₹, ₩, ₫, ...): the code instead.
	f := *m.f
	f.CurrencyDisplay = currency.DisplayCode
	if s, ok := cp1252Amount(f.Format(a)); ok {
		return s
	}
	return dec + " " + m.code // digits of another script
}

// cp1252Amount replaces in a formatted amount what Windows-1252 lacks but
// has a stand-in for (the narrow no-break space of French grouping, the
// minus sign, direction marks) and reports whether the rest fits.
func cp1252Amount(s string) (string, bool) {
	s = amountStandIns.Replace(s)
	_, ok := toCP1252(s)
	return s, ok
}

var amountStandIns = strings.NewReplacer("\u202f", "\u00a0", "\u2212", "-", "\u200e", "", "\u200f", "", "\u061c", "")
