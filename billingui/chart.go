package billingui

import (
	"fmt"
	"html/template"
	"net/url"
	"strings"
	"time"

	"github.com/dynabill/billing"
)

// chart is the revenue per day drawn as SVG bars by today.html.
type chart struct {
	Width, Height int
	Bars          []bar
	Total         billing.Amount
	Max           billing.Amount
	First, Last   string
	// Partial says the bars sum only the records read (Read of them):
	// the read stopped at its bound before the days' last record.
	Partial bool
	Read    int
}

type bar struct {
	X, Y, W, H float64
	Day        string
	Amount     billing.Amount
}

const (
	chartW, chartH = 720, 180
	chartPad       = 20
)

func newChart(first time.Time, days []billing.Amount, partial bool) chart {
	c := chart{Width: chartW, Height: chartH + chartPad, Partial: partial,
		First: first.Format("Jan 2"), Last: first.AddDate(0, 0, len(days)-1).Format("Jan 2")}
	for _, a := range days {
		c.Total += a
		if a > c.Max {
			c.Max = a
		}
	}
	slot := float64(chartW) / float64(len(days))
	for i, a := range days {
		h := 0.0
		if c.Max > 0 {
			h = float64(a) / float64(c.Max) * (chartH - 10)
		}
		if a > 0 && h < 1 {
			h = 1
		}
		c.Bars = append(c.Bars, bar{
			X: float64(i)*slot + 2, W: slot - 4, Y: chartH - h, H: h,
			Day: first.AddDate(0, 0, i).Format("Mon Jan 2"), Amount: a,
		})
	}
	return c
}

var funcs = template.FuncMap{
	"date": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02")
	},
	"datetime": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05")
	},
	"money": func(a billing.Amount) string { return a.String() },
	"lower": func(s any) string { return strings.ToLower(fmt.Sprint(s)) },
	"f1":    func(f float64) string { return fmt.Sprintf("%.1f", f) },
	"qs":    queryEscape,
	"ago":   ago,
	"inc":   func(i int) int { return i + 1 },
	"dec":   func(i int) int { return i - 1 },
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
