package billingui

import (
	"math"
	"net/url"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
)

// TestCurrencyFormat: symbol, grouping and the currency's minor unit.
func TestCurrencyFormat(t *testing.T) {
	for _, c := range []struct {
		code string
		a    billing.Amount
		want string
	}{
		{"", 140845, "$1,408.45"},
		{"USD", 0, "$0.00"},
		{"USD", 5, "$0.05"},
		{"USD", 99999, "$999.99"},
		{"USD", 100000, "$1,000.00"},
		{"USD", -123456789, "-$1,234,567.89"},
		{"USD", math.MaxInt64, "$92,233,720,368,547,758.07"},
		{"USD", math.MinInt64, "-$92,233,720,368,547,758.08"},
		{"EUR", 999, "€9.99"},
		{"JPY", 140845, "¥140,845"},
		{"KRW", 0, "₩0"},
		{"KWD", 1408, "KWD\u00a01.408"},
		{"CLF", 12345, "CLF\u00a01.2345"},
		{"CHF", 140845, "CHF\u00a01,408.45"},
	} {
		cur, err := currencyOf(c.code)
		require.NoError(t, err, c.code)
		assert.Equal(t, c.want, cur.format(c.a), "%s %d", c.code, c.a)
	}
	for _, bad := range []string{"usd", "US", "USDX", "U$D", "ÜSD"} {
		_, err := currencyOf(bad)
		assert.Error(t, err, bad)
	}
}

// FuzzIntParam: a parameter is taken only as the decimal number it
// spells, within its bounds; anything else is a *paramError, never a
// panic or a number out of range.
func FuzzIntParam(f *testing.F) {
	for _, s := range []string{"", "0", "7", "-1", "99999999999999999999", "9223372036854775807", "+3", "1e3", "0x1", " 1", "٣", "00000000000000000001"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, b := range []struct{ lo, hi int }{{0, maxPageNumber}, {1, 120}, {-5, 5}} {
			n, err := intParam(url.Values{"n": {s}}, "n", b.lo, b.hi, b.lo)
			if s == "" {
				require.NoError(t, err)
				require.Equal(t, b.lo, n)
				continue
			}
			if err != nil {
				var pe *paramError
				require.ErrorAs(t, err, &pe)
				require.Contains(t, err.Error(), "n must be a whole number from "+strconv.Itoa(b.lo)+" to "+strconv.Itoa(b.hi))
				continue
			}
			require.GreaterOrEqual(t, n, b.lo)
			require.LessOrEqual(t, n, b.hi)
			v, perr := strconv.ParseInt(s, 10, 64)
			require.NoError(t, perr, s)
			require.Equal(t, int64(n), v)
			require.NotContains(t, s, "+")
		}
	})
}
