package billing

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Assertion helpers over testify's require: they stop the test on failure.
// ctx is an optional format string and arguments.

func amtCtx(ctx []any) string {
	if len(ctx) == 0 {
		return ""
	}
	if f, ok := ctx[0].(string); ok {
		return ": " + fmt.Sprintf(f, ctx[1:]...)
	}
	return ": " + fmt.Sprint(ctx...)
}

func amtNoError(t testing.TB, err error, ctx ...any) {
	t.Helper()
	require.NoError(t, err, "unexpected error%s", amtCtx(ctx))
}

func amtErrorIs(t testing.TB, err, target error, ctx ...any) {
	t.Helper()
	require.ErrorIs(t, err, target, "error %v does not wrap %v%s", err, target, amtCtx(ctx))
}

func amtEqual[T any](t testing.TB, want, got T, ctx ...any) {
	t.Helper()
	require.Equal(t, want, got, "got %#v, want %#v%s", got, want, amtCtx(ctx))
}

func amtZero[T comparable](t testing.TB, got T, ctx ...any) {
	t.Helper()
	require.Zero(t, got, "got %#v, want zero value%s", got, amtCtx(ctx))
}

func amtContains(t testing.TB, s, sub string, ctx ...any) {
	t.Helper()
	require.Contains(t, s, sub, "%q does not contain %q%s", s, sub, amtCtx(ctx))
}

func amtPanicsWithError(t testing.TB, msg string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		err, ok := r.(error)
		if !ok || err.Error() != msg {
			t.Fatalf("panic value %#v, want error %q", r, msg)
		}
	}()
	f()
}

// quotedInput is how amount errors quote their input.
func quotedInput(s string) string {
	if len(s) > maxQuoted {
		s = s[:maxQuoted] + "…"
	}
	return strconv.Quote(s)
}

func TestParseAmountAccepted(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"0", 0},
		{"0.0", 0},
		{"0.00", 0},
		{"00", 0},
		{"5", 500},
		{"5.0", 500},
		{"5.00", 500},
		{"05.00", 500},
		{"0005", 500},
		{"5.5", 550},
		{"0.5", 50},
		{"0.50", 50},
		{"0.05", 5},
		{"0.01", 1},
		{"0.99", 99},
		{"1", 100},
		{"4.99", 499},
		{"39.99", 3999},
		{"100.00", 10000},
		{"1234567.89", 123456789},
		{"92233720368547758", 9223372036854775800},
		{"92233720368547758.0", 9223372036854775800},
		{"92233720368547758.07", math.MaxInt64},
		{"000000000000000000000000000092233720368547758.07", math.MaxInt64},
		{"92233720368547757.99", 9223372036854775799},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseAmount(tt.in)
			amtNoError(t, err)
			amtEqual(t, tt.want, got.MinorUnits())
			amtEqual(t, Amount(tt.want), MustParseAmount(tt.in))
			var u Amount
			amtNoError(t, u.UnmarshalText([]byte(tt.in)))
			amtEqual(t, got, u)
		})
	}
}

func TestParseAmountRejected(t *testing.T) {
	long := strings.Repeat("9", 1000)
	tests := []struct {
		in     string
		reason string // substring of the error message
	}{
		{"", "empty string"},
		{"4.999", "more than two digits after the decimal point"},
		{"4.990", "more than two digits after the decimal point"},
		{"0.000", "more than two digits after the decimal point"},
		{"-1", "negative amounts are not allowed"},
		{"-0", "negative amounts are not allowed"},
		{"-4.99", "negative amounts are not allowed"},
		{"+1", "a sign is not allowed"},
		{"1-", "unexpected character '-' at offset 1"},
		{"1e3", "unexpected character 'e' at offset 1"},
		{"1E3", "unexpected character 'E' at offset 1"},
		{"NaN", "unexpected character 'N' at offset 0"},
		{"Inf", "unexpected character 'I' at offset 0"},
		{"Infinity", "unexpected character 'I' at offset 0"},
		{" 4.99", "whitespace ' ' at offset 0"},
		{"4.99 ", "whitespace ' ' at offset 4"},
		{"4.99\n", `whitespace '\n' at offset 4`},
		{"\t4.99", `whitespace '\t' at offset 0`},
		{"4 99", "whitespace ' ' at offset 1"},
		{"4\u00a099", `whitespace '\u00a0' at offset 1`},
		{"4,99", "unexpected ',' at offset 1 (the decimal separator is '.')"},
		{"1,000.00", "unexpected ','"},
		{".5", "missing digits before the decimal point"},
		{".", "missing digits before the decimal point"},
		{"5.", "missing digits after the decimal point"},
		{"1.2.3", "more than one decimal point"},
		{"1..2", "more than one decimal point"},
		{"0x10", "unexpected character 'x' at offset 1"},
		{"0b1", "unexpected character 'b' at offset 1"},
		{"1_000", "unexpected character '_' at offset 1"},
		{"$5", "unexpected character '$' at offset 0"},
		{"4.99€", "unexpected character '€' at offset 4"},
		{"٤.٩٩", "non-ASCII digit '٤' at offset 0"}, // Arabic-Indic digits
		{"4.９９", "non-ASCII digit '９' at offset 2"}, // fullwidth digits
		{"\xff", "invalid UTF-8 byte 0xff at offset 0"},
		{"4.9\x00", `unexpected character '\x00' at offset 3`},
		{"92233720368547758.08", "too large (maximum is 92233720368547758.07)"},
		{"92233720368547758.1", "too large"},
		{"92233720368547759", "too large"},
		{"92233720368547760.00", "too large"},
		{"100000000000000000", "too large"},
		{"9223372036854775807", "too large"}, // MaxInt64 units, not cents
		{"18446744073709551616", "too large"},
		{long, "too large"},
		{long + ".99", "too large"},
		{long + ".999", "more than two digits after the decimal point"}, // syntax before size
		{long + "x", "unexpected character 'x' at offset 1000"},
	}
	for _, tt := range tests {
		name := tt.in
		if len(name) > 30 {
			name = name[:30] + "..."
		}
		t.Run(name, func(t *testing.T) {
			got, err := ParseAmount(tt.in)
			amtErrorIs(t, err, ErrInvalidAmount)
			amtZero(t, got)
			msg := err.Error()
			amtContains(t, msg, quotedInput(tt.in))
			amtContains(t, msg, tt.reason)
			assert.LessOrEqual(t, len(msg), 250, "message must not grow with the input: %d bytes", len(msg))

			amtPanicsWithError(t, msg, func() { MustParseAmount(tt.in) })

			u := Cents(42)
			amtErrorIs(t, u.UnmarshalText([]byte(tt.in)), ErrInvalidAmount)
			amtEqual(t, Cents(42), u, "unchanged on error")
		})
	}
}

func TestAmountStringCanonical(t *testing.T) {
	tests := []struct {
		a    Amount
		want string
	}{
		{0, "0.00"},
		{1, "0.01"},
		{9, "0.09"},
		{10, "0.10"},
		{50, "0.50"},
		{99, "0.99"},
		{100, "1.00"},
		{499, "4.99"},
		{500, "5.00"},
		{3999, "39.99"},
		{123456789, "1234567.89"},
		{math.MaxInt64, "92233720368547758.07"},
		{-1, "-0.01"},
		{-150, "-1.50"},
		{-499, "-4.99"},
		{math.MinInt64 + 1, "-92233720368547758.07"},
		{math.MinInt64, "-92233720368547758.08"},
	}
	for _, tt := range tests {
		amtEqual(t, tt.want, tt.a.String(), "Amount(%d)", int64(tt.a))
	}

	// Non-canonical inputs format in canonical form.
	for in, want := range map[string]string{
		"5":     "5.00",
		"5.0":   "5.00",
		"05.00": "5.00",
		"0.5":   "0.50",
		"000":   "0.00",
		"007.1": "7.10",
	} {
		amtEqual(t, want, MustParseAmount(in).String(), "input %q", in)
	}
}

func TestAmountRoundTrip(t *testing.T) {
	// Canonical strings come back unchanged.
	for _, s := range []string{
		"0.00", "0.01", "0.50", "0.99", "1.00", "4.99", "5.00", "39.99",
		"1234567.89", "92233720368547758.07",
	} {
		a, err := ParseAmount(s)
		amtNoError(t, err)
		amtEqual(t, s, a.String())
	}

	check := func(a Amount) {
		t.Helper()
		got, err := ParseAmount(a.String())
		require.NoError(t, err, "ParseAmount(%q)", a.String())
		require.Equal(t, a, got, "ParseAmount(%q) = %d; want %d", a.String(), int64(got), int64(a))
	}
	for a := Amount(0); a <= 200_000; a++ {
		check(a)
	}
	for a := Amount(math.MaxInt64 - 200_000); ; a++ {
		check(a)
		if a == math.MaxInt64 {
			break
		}
	}
	for _, a := range []Amount{0, 1, 99, 100, 101, 1 << 31, 1 << 32, 1 << 53, 1<<53 + 1, 1 << 62, math.MaxInt64 - 1, math.MaxInt64, MaxAmount} {
		check(a)
	}
	for p := Amount(1); p < math.MaxInt64/10; p *= 10 {
		check(p - 1)
		check(p)
		check(p + 1)
	}
}

func TestAmountTextJSON(t *testing.T) {
	for _, a := range []Amount{0, 1, 50, 499, 3999, math.MaxInt64} {
		text, err := a.MarshalText()
		amtNoError(t, err)
		amtEqual(t, a.String(), string(text))
		var back Amount
		amtNoError(t, back.UnmarshalText(text))
		amtEqual(t, a, back)

		js, err := json.Marshal(a)
		amtNoError(t, err)
		amtEqual(t, strconv.Quote(a.String()), string(js))
		back = 0
		amtNoError(t, json.Unmarshal(js, &back))
		amtEqual(t, a, back)
	}

	type item struct {
		Amount   Amount            `json:"amount"`
		Optional *Amount           `json:"optional"`
		ByAmount map[Amount]string `json:"by_amount,omitempty"`
	}
	in := item{Amount: 499, ByAmount: map[Amount]string{50: "half"}}
	js, err := json.Marshal(in)
	amtNoError(t, err)
	amtEqual(t, `{"amount":"4.99","optional":null,"by_amount":{"0.50":"half"}}`, string(js))
	var out item
	amtNoError(t, json.Unmarshal(js, &out))
	amtEqual(t, in, out)

	// Legacy, non-canonical and escaped strings decode.
	var a Amount
	amtNoError(t, json.Unmarshal([]byte(`"5"`), &a))
	amtEqual(t, Cents(500), a)
	amtNoError(t, json.Unmarshal([]byte(`"\u0034.99"`), &a))
	amtEqual(t, Cents(499), a)
	amtNoError(t, json.Unmarshal([]byte(`{"amount":"39.99","optional":"0.50"}`), &out))
	amtEqual(t, Cents(3999), out.Amount)
	amtEqual(t, Cents(50), *out.Optional)
}

func TestAmountJSONRejected(t *testing.T) {
	tests := []struct {
		in     string
		reason string
	}{
		{`4.99`, "not a JSON number"},
		{`5`, "not a JSON number"},
		{`-1`, "not a JSON number"},
		{`1e3`, "not a JSON number"},
		{`null`, "not null"},
		{`true`, "must be a JSON string"},
		{`{}`, "must be a JSON string"},
		{`["4.99"]`, "must be a JSON string"},
		{`"4.999"`, "more than two digits after the decimal point"},
		{`"-1.50"`, "negative amounts are not allowed"},
		{`""`, "empty string"},
		{`" 4.99"`, "whitespace"},
		{`"NaN"`, "unexpected character 'N'"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			a := Cents(42)
			err := json.Unmarshal([]byte(tt.in), &a)
			amtErrorIs(t, err, ErrInvalidAmount)
			amtContains(t, err.Error(), tt.reason)
			amtEqual(t, Cents(42), a, "unchanged on error")

			// Direct call, including inputs encoding/json would not pass on.
			amtErrorIs(t, a.UnmarshalJSON([]byte(tt.in)), ErrInvalidAmount)
		})
	}
	amtErrorIs(t, new(Amount).UnmarshalJSON(nil), ErrInvalidAmount)
	amtErrorIs(t, new(Amount).UnmarshalJSON([]byte(`"4.99`)), ErrInvalidAmount)

	var s struct{ A Amount }
	err := json.Unmarshal([]byte(`{"A":4.99}`), &s)
	amtErrorIs(t, err, ErrInvalidAmount)
	amtZero(t, s.A)
}

func TestAmountMarshalNegative(t *testing.T) {
	for _, a := range []Amount{-1, -150, math.MinInt64} {
		_, err := a.MarshalText()
		amtErrorIs(t, err, ErrInvalidAmount)
		amtContains(t, err.Error(), strconv.Quote(a.String()))
		_, err = a.MarshalJSON()
		amtErrorIs(t, err, ErrInvalidAmount)
		_, err = json.Marshal(a)
		amtErrorIs(t, err, ErrInvalidAmount)
	}
}

func TestNewAmountInternal(t *testing.T) {
	a, err := newAmount(4, 99)
	amtNoError(t, err)
	amtEqual(t, MustParseAmount("4.99"), a)
	a, err = newAmount(0, 0)
	amtNoError(t, err)
	amtZero(t, a)
	a, err = newAmount(92233720368547758, 7)
	amtNoError(t, err)
	amtEqual(t, MaxAmount, a)

	for _, tc := range [][2]int64{
		{-1, 0},
		{0, -1},
		{0, 100},
		{92233720368547758, 8},
		{92233720368547759, 0},
		{math.MaxInt64, 0},
		{math.MinInt64, 0},
	} {
		_, err := newAmount(tc[0], tc[1])
		amtErrorIs(t, err, ErrInvalidAmount, "newAmount(%d, %d)", tc[0], tc[1])
	}

	amtEqual(t, Amount(499), Cents(499))
	amtEqual(t, int64(-7), Cents(-7).MinorUnits())
}

func TestAmountAddSub(t *testing.T) {
	sum, err := MustParseAmount("4.99").Add(MustParseAmount("0.01"))
	amtNoError(t, err)
	amtEqual(t, "5.00", sum.String())

	diff, err := MustParseAmount("1.00").Sub(MustParseAmount("2.50"))
	amtNoError(t, err)
	amtEqual(t, "-1.50", diff.String())

	for _, tt := range []struct {
		a, b Amount
	}{
		{0, 0}, {1, 2}, {math.MaxInt64, 0}, {math.MaxInt64 - 1, 1}, {math.MaxInt64, -1},
		{math.MinInt64, 0}, {math.MinInt64 + 1, -1}, {math.MinInt64, math.MaxInt64},
		{math.MaxInt64, math.MinInt64}, {-1, math.MinInt64 + 1},
	} {
		got, err := tt.a.Add(tt.b)
		amtNoError(t, err, "%d + %d", int64(tt.a), int64(tt.b))
		amtEqual(t, tt.a+tt.b, got)
	}
	for _, tt := range []struct {
		a, b Amount
	}{
		{0, 0}, {1, 2}, {math.MaxInt64, 0}, {math.MaxInt64, math.MaxInt64},
		{0, math.MaxInt64}, {-1, math.MaxInt64}, {math.MinInt64, -1}, {math.MinInt64, math.MinInt64},
		{-1, math.MinInt64}, {math.MaxInt64 - 1, -1}, {math.MinInt64 + 1, 1},
	} {
		got, err := tt.a.Sub(tt.b)
		amtNoError(t, err, "%d - %d", int64(tt.a), int64(tt.b))
		amtEqual(t, tt.a-tt.b, got)
	}

	for _, tt := range []struct {
		a, b Amount
	}{
		{math.MaxInt64, 1}, {1, math.MaxInt64}, {math.MaxInt64, math.MaxInt64},
		{math.MinInt64, -1}, {-1, math.MinInt64}, {math.MinInt64, math.MinInt64},
		{math.MaxInt64 / 2, math.MaxInt64/2 + 2},
	} {
		_, err := tt.a.Add(tt.b)
		amtErrorIs(t, err, ErrInvalidAmount, "%d + %d", int64(tt.a), int64(tt.b))
		amtContains(t, err.Error(), "overflows")
	}
	for _, tt := range []struct {
		a, b Amount
	}{
		{math.MaxInt64, -1}, {0, math.MinInt64}, {1, math.MinInt64}, {math.MaxInt64, math.MinInt64},
		{math.MinInt64, 1}, {-2, math.MaxInt64}, {math.MinInt64, math.MaxInt64},
	} {
		_, err := tt.a.Sub(tt.b)
		amtErrorIs(t, err, ErrInvalidAmount, "%d - %d", int64(tt.a), int64(tt.b))
		amtContains(t, err.Error(), "overflows")
	}
}

// canonicalDigits returns the canonical text of an input matching
// digit+ ["." digit [digit]] (leading zeros stripped, fraction padded to two
// digits), computed on the digit string alone, and whether s has that form.
func canonicalDigits(s string) (string, bool) {
	intPart, frac, hasDot := strings.Cut(s, ".")
	if intPart == "" || (hasDot && (frac == "" || len(frac) > 2)) {
		return "", false
	}
	for _, part := range []string{intPart, frac} {
		for i := 0; i < len(part); i++ {
			if part[i] < '0' || part[i] > '9' {
				return "", false
			}
		}
	}
	intPart = strings.TrimLeft(intPart, "0")
	if intPart == "" {
		intPart = "0"
	}
	for len(frac) < 2 {
		frac += "0"
	}
	return intPart + "." + frac, true
}

// fitsAmount reports whether the canonical text c is at most MaxAmount,
// comparing digit strings only.
func fitsAmount(c string) bool {
	const max = "92233720368547758.07"
	if len(c) != len(max) {
		return len(c) < len(max)
	}
	return c <= max
}

func FuzzParseAmount(f *testing.F) {
	for _, s := range []string{
		"", "0", "5", "5.0", "5.00", "05.00", "0.50", "4.99", "39.99", "1234567.89",
		"4.999", "-1", "+1", "1e3", "NaN", "Inf", " 4.99", "4.99 ", "4,99", ".5", "5.",
		"1.2.3", "0x10", "٤.٩٩", "92233720368547758.07", "92233720368547758.08",
		"000000000000000000000092233720368547758.07", "18446744073709551616", "\xff",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAmount(s)
		canon, wellFormed := canonicalDigits(s)
		if err != nil {
			require.ErrorIs(t, err, ErrInvalidAmount, "ParseAmount(%q): error %v does not wrap ErrInvalidAmount", s, err)
			require.Contains(t, err.Error(), quotedInput(s), "ParseAmount(%q): error does not quote the input", s)
			require.Zero(t, a, "ParseAmount(%q) = %d with error", s, int64(a))
			require.False(t, wellFormed && fitsAmount(canon), "ParseAmount(%q) rejected a well-formed in-range amount: %v", s, err)
			return
		}
		require.True(t, wellFormed, "ParseAmount(%q) = %d, accepted a malformed input", s, int64(a))
		require.True(t, fitsAmount(canon), "ParseAmount(%q) = %d, accepted an out-of-range input", s, int64(a))
		require.GreaterOrEqual(t, a, Amount(0), "ParseAmount(%q) = %d < 0", s, int64(a))
		require.Equal(t, canon, a.String(), "ParseAmount(%q).String()", s)
		back, err := ParseAmount(a.String())
		require.NoError(t, err, "ParseAmount(%q)", a.String())
		require.Equal(t, a, back, "ParseAmount(%q) = %d; want %d", a.String(), int64(back), int64(a))
		// Minor units as a digit string must equal the input's digits.
		units := strings.TrimLeft(strings.Replace(canon, ".", "", 1), "0")
		if units == "" {
			units = "0"
		}
		require.Equal(t, units, strconv.FormatInt(a.MinorUnits(), 10), "ParseAmount(%q).MinorUnits()", s)
	})
}
