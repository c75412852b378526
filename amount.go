package billing

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// Amount is a sum of money in integer minor units (cents): Amount(499) is
// 4.99. It never goes through floating point.
//
// Stored and serialized amounts use the legacy decimal text form, e.g. "4.99",
// "39.99", "0.50" or "5"; see [ParseAmount] for the exact grammar and
// [Amount.String] for the canonical form written back. The zero value is 0.00.
//
// Amounts read from text are never negative, but arithmetic may produce
// negative values (e.g. a - b with b > a). Negative amounts format with a
// leading "-" yet cannot be marshaled or parsed back: they are intermediate
// results, not storable values.
type Amount int64

const (
	// MaxAmount is the largest representable amount, 92233720368547758.07.
	MaxAmount Amount = math.MaxInt64

	// ListPrice, given as the amount of [Periods.ChangeTier], asks for the
	// price in [Config.Prices] of the tier on the record's term and interval. It is no amount (amounts are never
	// negative), so a caller's zero always means zero.
	ListPrice Amount = -1
)

// maxQuoted bounds how much of an offending input an error message quotes,
// matching the truncation done by [FieldError].
const maxQuoted = 64

// amountError returns an error wrapping [ErrInvalidAmount] that quotes the
// input s (truncated when long) and says what is wrong with it.
func amountError(s, reason string) error {
	if len(s) > maxQuoted {
		s = s[:maxQuoted] + "…"
	}
	return fmt.Errorf("%w %q: %s", ErrInvalidAmount, s, reason)
}

// ParseAmount parses the decimal text form of an amount exactly.
//
// The accepted grammar is
//
//	digit+ [ "." digit [ digit ] ]
//
// with ASCII digits only: "5", "5.0", "5.00", "0.50", "4.99", "39.99",
// "1234567.89". Leading zeros are accepted ("05.00" is 5.00) because legacy
// data may contain them. Everything else is rejected, among others: the empty
// string, signs ("-1", "+1"), more than two fraction digits (even zeros, as in
// "4.990"), a missing integer or fraction part (".5", "5."), exponents
// ("1e3"), "NaN", "Inf", surrounding or inner whitespace, "," as decimal
// separator, hexadecimal ("0x10"), non-ASCII digits, and any value above
// [MaxAmount]. Overflow is detected exactly with integer arithmetic.
//
// The error wraps [ErrInvalidAmount], quotes the input and says what is wrong
// with it. The result is always >= 0.
func ParseAmount(s string) (Amount, error) {
	if s == "" {
		return 0, amountError(s, "empty string")
	}
	// Syntax first, so that a malformed input is reported as such even when
	// it is also too large.
	dot := -1
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case '0' <= c && c <= '9':
			i++
			continue
		case c == '.':
			switch {
			case dot >= 0:
				return 0, amountError(s, "more than one decimal point")
			case i == 0:
				return 0, amountError(s, "missing digits before the decimal point")
			case i == len(s)-1:
				return 0, amountError(s, "missing digits after the decimal point")
			}
			dot = i
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			return 0, amountError(s, fmt.Sprintf("invalid UTF-8 byte %#02x at offset %d", c, i))
		case unicode.IsSpace(r):
			return 0, amountError(s, fmt.Sprintf("whitespace %q at offset %d", r, i))
		case r == '-' && i == 0:
			return 0, amountError(s, "negative amounts are not allowed")
		case r == '+' && i == 0:
			return 0, amountError(s, "a sign is not allowed")
		case r == ',':
			return 0, amountError(s, fmt.Sprintf("unexpected ',' at offset %d (the decimal separator is '.')", i))
		case unicode.IsDigit(r):
			return 0, amountError(s, fmt.Sprintf("non-ASCII digit %q at offset %d", r, i))
		default:
			return 0, amountError(s, fmt.Sprintf("unexpected character %q at offset %d", r, i))
		}
	}

	intPart, frac := s, ""
	if dot >= 0 {
		intPart, frac = s[:dot], s[dot+1:]
		if len(frac) > 2 {
			return 0, amountError(s, "more than two digits after the decimal point")
		}
	}

	// units*100 + cents must not exceed math.MaxInt64.
	const maxUnits = math.MaxInt64 / 100 // 92233720368547758
	var units int64
	for i := 0; i < len(intPart); i++ {
		d := int64(intPart[i] - '0')
		if units > (maxUnits-d)/10 {
			return 0, amountError(s, "too large (maximum is "+MaxAmount.String()+")")
		}
		units = units*10 + d
	}
	var cents int64
	switch len(frac) {
	case 1:
		cents = int64(frac[0]-'0') * 10
	case 2:
		cents = int64(frac[0]-'0')*10 + int64(frac[1]-'0')
	}
	if units == maxUnits && cents > math.MaxInt64%100 {
		return 0, amountError(s, "too large (maximum is "+MaxAmount.String()+")")
	}
	return Amount(units*100 + cents), nil
}

// MustParseAmount is like [ParseAmount] but panics if s is not a valid
// amount. It is meant for tests and package-level constants.
func MustParseAmount(s string) Amount {
	a, err := ParseAmount(s)
	if err != nil {
		panic(err)
	}
	return a
}

// Cents returns the amount of n minor units: Cents(499) is 4.99. n may be
// negative.
func Cents(n int64) Amount { return Amount(n) }

// newAmount returns the amount units + cents/100, e.g. newAmount(4, 99) is
// 4.99. units must be >= 0 and cents in [0, 99]; the result must not exceed
// [MaxAmount]. Otherwise the error wraps [ErrInvalidAmount].
func newAmount(units, cents int64) (Amount, error) {
	var reason string
	switch {
	case units < 0:
		reason = "negative units"
	case cents < 0 || cents > 99:
		reason = "cents out of range [0, 99]"
	case units > (math.MaxInt64-cents)/100:
		reason = "too large (maximum is " + MaxAmount.String() + ")"
	default:
		return Amount(units*100 + cents), nil
	}
	return 0, fmt.Errorf("%w: newAmount(%d, %d): %s", ErrInvalidAmount, units, cents, reason)
}

// MinorUnits returns a in minor units (cents).
func (a Amount) MinorUnits() int64 { return int64(a) }

// String returns the canonical text form of a: the integer part without
// leading zeros, a "." and exactly two fraction digits, e.g. "4.99", "0.50",
// "5.00", "0.00". Negative amounts get a leading "-", e.g. "-1.50".
//
// String is the canonical form, not necessarily the text that was parsed:
// "5", "5.0" and "05.00" all format as "5.00". For every a >= 0,
// ParseAmount(a.String()) returns a.
func (a Amount) String() string {
	return string(a.appendText(make([]byte, 0, 24)))
}

func (a Amount) appendText(b []byte) []byte {
	u := uint64(a)
	if a < 0 {
		b = append(b, '-')
		u = -u // correct for math.MinInt64 too
	}
	b = strconv.AppendUint(b, u/100, 10)
	c := u % 100
	return append(b, '.', byte('0'+c/10), byte('0'+c%10))
}

// MarshalText implements [encoding.TextMarshaler] with the canonical form of
// [Amount.String]. A negative amount is an error wrapping [ErrInvalidAmount],
// because [ParseAmount] could not read it back.
func (a Amount) MarshalText() ([]byte, error) {
	if a < 0 {
		return nil, amountError(a.String(), "negative amounts cannot be marshaled")
	}
	return a.appendText(nil), nil
}

// UnmarshalText implements [encoding.TextUnmarshaler] with [ParseAmount].
// On error *a is left unchanged.
func (a *Amount) UnmarshalText(text []byte) error {
	v, err := ParseAmount(string(text))
	if err != nil {
		return err
	}
	*a = v
	return nil
}

// MarshalJSON implements [json.Marshaler]: the amount is a JSON string in
// canonical form, e.g. "4.99", never a JSON number. Negative amounts are an
// error, as for [Amount.MarshalText].
func (a Amount) MarshalJSON() ([]byte, error) {
	if a < 0 {
		return nil, amountError(a.String(), "negative amounts cannot be marshaled")
	}
	b := append(make([]byte, 0, 24), '"')
	b = a.appendText(b)
	return append(b, '"'), nil
}

// UnmarshalJSON implements [json.Unmarshaler]. It accepts only a JSON string
// holding text that [ParseAmount] accepts, e.g. "4.99". JSON numbers (4.99)
// are rejected because JSON decoders commonly route them through binary
// floating point, which is not allowed in money paths. JSON null is rejected
// too; use a *Amount field for an optional amount (encoding/json then stores
// nil without calling this method). On error *a is left unchanged.
func (a *Amount) UnmarshalJSON(data []byte) error {
	if len(data) == 0 || data[0] != '"' {
		what := "a JSON string"
		switch {
		case string(data) == "null":
			what = "a JSON string, not null"
		case len(data) > 0 && (data[0] == '-' || '0' <= data[0] && data[0] <= '9'):
			what = `a JSON string such as "4.99", not a JSON number`
		}
		return amountError(string(data), "amount must be "+what)
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return amountError(string(data), "malformed JSON string: "+err.Error())
	}
	return a.UnmarshalText([]byte(s))
}

// Add returns a + b. If the sum does not fit in an Amount the error wraps
// [ErrInvalidAmount].
func (a Amount) Add(b Amount) (Amount, error) {
	if (b > 0 && a > math.MaxInt64-b) || (b < 0 && a < math.MinInt64-b) {
		return 0, fmt.Errorf("%w: %s + %s overflows", ErrInvalidAmount, a, b)
	}
	return a + b, nil
}

// Sub returns a - b, which may be negative. If the difference does not fit in
// an Amount the error wraps [ErrInvalidAmount].
func (a Amount) Sub(b Amount) (Amount, error) {
	if (b < 0 && a > math.MaxInt64+b) || (b > 0 && a < math.MinInt64+b) {
		return 0, fmt.Errorf("%w: %s - %s overflows", ErrInvalidAmount, a, b)
	}
	return a - b, nil
}
