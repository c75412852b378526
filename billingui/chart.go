package billingui

import (
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
