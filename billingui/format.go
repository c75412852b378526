package billingui

import (
	"fmt"
	"html/template"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/dynabill/billing"
)

// DefaultCurrency is the currency amounts are shown in when
// Config.Currency is empty.
const DefaultCurrency = "USD"

// currency is how the pages show an amount: the symbol written before it
// and the digits after its decimal point (ISO 4217's minor unit).
type currency struct {
	code   string
	symbol string
	digits int
}

// symbols are the symbols of the common currencies, as English-language
// pages write them (CLDR's "en" locale); a currency outside the table is
// shown with its code ("CHF 1,408.45").
var symbols = map[string]string{
	"USD": "$", "EUR": "€", "GBP": "£", "JPY": "¥", "CNY": "CN¥", "CAD": "CA$", "AUD": "A$",
	"NZD": "NZ$", "HKD": "HK$", "MXN": "MX$", "BRL": "R$", "INR": "₹", "KRW": "₩", "ILS": "₪",
	"VND": "₫", "PHP": "₱", "TWD": "NT$",
}

// minorDigits are the ISO 4217 currencies whose minor unit is not the
// hundredth: a billing.Amount counts minor units, so ¥1,408 is
// Amount(1408) and 1.408 KWD is Amount(1408).
var minorDigits = map[string]int{
	"BIF": 0, "CLP": 0, "DJF": 0, "GNF": 0, "ISK": 0, "JPY": 0, "KMF": 0, "KRW": 0, "PYG": 0,
	"RWF": 0, "UGX": 0, "UYI": 0, "VND": 0, "VUV": 0, "XAF": 0, "XOF": 0, "XPF": 0,
	"BHD": 3, "IQD": 3, "JOD": 3, "KWD": 3, "LYD": 3, "OMR": 3, "TND": 3,
	"CLF": 4, "UYW": 4,
}

// currencyOf returns the currency of an ISO 4217 code ("" is
// DefaultCurrency): three capital letters, the table's symbol and minor
// unit when it has them, else the code and two decimals.
func currencyOf(code string) (currency, error) {
	if code == "" {
		code = DefaultCurrency
	}
	if len(code) != 3 || strings.ContainsFunc(code, func(r rune) bool { return r < 'A' || r > 'Z' }) {
		return currency{}, fmt.Errorf("billingui: Config.Currency %q is not an ISO 4217 code (three capital letters, like USD)", code)
	}
	c := currency{code: code, symbol: code + "\u00a0", digits: 2}
	if s, ok := symbols[code]; ok {
		c.symbol = s
	}
	if d, ok := minorDigits[code]; ok {
		c.digits = d
	}
	return c, nil
}

// format writes a (minor units) with the symbol, a comma between groups of
// three digits and a point before the minor unit: "$1,408.45", "-€3.00",
// "¥1,408".
func (c currency) format(a billing.Amount) string {
	u := uint64(a)
	var b strings.Builder
	if a < 0 {
		b.WriteByte('-')
		u = -u // correct for math.MinInt64 too
	}
	b.WriteString(c.symbol)
	div := uint64(1)
	for range c.digits {
		div *= 10
	}
	whole := strconv.FormatUint(u/div, 10)
	for i, d := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(d)
	}
	if c.digits > 0 {
		frac := strconv.FormatUint(u%div, 10)
		b.WriteByte('.')
		b.WriteString(strings.Repeat("0", c.digits-len(frac)))
		b.WriteString(frac)
	}
	return b.String()
}

// Formats of the pages' times: every time carries its zone's abbreviation
// (Config.Location's at that instant).
const (
	dateLayout     = "2006-01-02"
	dateTimeLayout = "2006-01-02 15:04:05 MST"
)

// funcs are the templates' functions, with the handler's currency and
// location.
func (h *Handler) funcs() template.FuncMap {
	loc, cur := h.cfg.Location, h.currency
	return template.FuncMap{
		// date shows the day of t in the console's location; the element's
		// title and datetime give the instant with its zone.
		"date": func(t time.Time) template.HTML {
			if t.IsZero() {
				return "—"
			}
			t = t.In(loc)
			return template.HTML(`<time datetime="` + t.Format(time.RFC3339) + `" title="` +
				template.HTMLEscapeString(t.Format(dateTimeLayout)) + `">` + t.Format(dateLayout) + `</time>`)
		},
		// day shows a UTC calendar day (a dunning schedule's: the retry
		// run on or after it acts), whatever the console's location.
		"day": func(t time.Time) template.HTML {
			if t.IsZero() {
				return "—"
			}
			d := t.UTC().Format(dateLayout)
			return template.HTML(`<time datetime="` + d + `" title="` + d + ` (UTC day)">` + d + `</time>`)
		},
		"finalAction": finalActionText,
		"datetime": func(t time.Time) string {
			if t.IsZero() {
				return "—"
			}
			return t.In(loc).Format(dateTimeLayout)
		},
		"money": cur.format,
		"uid":   visibleID,
		"lower": func(s any) string { return strings.ToLower(fmt.Sprint(s)) },
		"f1":    func(f float64) string { return fmt.Sprintf("%.1f", f) },
		"qs":    queryEscape,
		"ago":   ago,
		"inc":   func(i int) int { return i + 1 },
		"dec":   func(i int) int { return i - 1 },
		// staleWhy says why a STALE period was given up on.
		"staleWhy": staleWhy,
		// imoney shows v, in minor units of the ISO 4217 currency code (an
		// invoice's), with that currency's symbol and digits.
		"imoney": documentMoney,
		// span shows the time a proration line prorates.
		"neg":  func(a billing.Amount) billing.Amount { return -a },
		"span": func(a billing.Adjustment) string { return lineSpan(a, loc) },
	}
}

// documentMoney shows v, in minor units of currency code (an invoice's or
// a credit note's), as the pages show amounts: "$1,408.45", "¥500". A
// code the table cannot take is written after the bare number.
func documentMoney(code string, v int64) string {
	c, err := currencyOf(code)
	if err != nil || code == "" {
		inv := billing.Invoice{Currency: code}
		return strings.TrimSpace(inv.FormatAmount(v) + " " + code)
	}
	return c.format(billing.Amount(v))
}

func queryEscape(s string) string { return url.QueryEscape(s) }

func ago(now, t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	d := now.Sub(t)
	switch {
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h", int(d.Hours()))
	default:
		return fmt.Sprintf("%d days", int(d.Hours()/24))
	}
}

// hidden reports whether r changes how text around it is shown, or is not
// shown at all: the format characters (Cf: the bidirectional embeddings,
// overrides and isolates U+202A–U+202E and U+2066–U+2069, the marks U+200E
// and U+200F, zero-width spaces and joiners, the byte order mark, the soft
// hyphen), the controls, and the separators other than the space.
func hidden(r rune) bool {
	return unicode.Is(unicode.Cf, r) || unicode.IsControl(r) ||
		(unicode.In(r, unicode.Zl, unicode.Zp, unicode.Zs) && r != ' ') ||
		(r >= 0xE0000 && r <= 0xE007F) // tags
}

// visibleID writes an ID (a user's, a period's) as an isolated run of text
// in which every hidden character is shown as its escape, \u202E, in a
// marked span: an ID with a right-to-left override reads as what it is,
// not as the ID it would display as.
func visibleID(s string) template.HTML {
	var b strings.Builder
	b.WriteString(`<bdi class="id">`)
	start := 0
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if hidden(r) {
			b.WriteString(template.HTMLEscapeString(s[start:i]))
			e := escapeRune(r)
			b.WriteString(`<span class="hidden-char" title="` + e + `">` + e + `</span>`)
			start = i + n
		}
		i += n
	}
	b.WriteString(template.HTMLEscapeString(s[start:]))
	b.WriteString(`</bdi>`)
	return template.HTML(b.String())
}

// plainID is visibleID for where no markup goes (a page's title): the
// hidden characters as escapes.
func plainID(s string) string {
	var b strings.Builder
	for _, r := range s {
		if hidden(r) {
			b.WriteString(escapeRune(r))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// escapeRune is Go's escape of r: \u202E, or \U000E0001 past the BMP.
func escapeRune(r rune) string {
	if r > 0xFFFF {
		return fmt.Sprintf(`\U%08X`, r)
	}
	return fmt.Sprintf(`\u%04X`, r)
}
