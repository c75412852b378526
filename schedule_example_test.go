package billing_test

import (
	"fmt"
	"time"

	"github.com/dynabill/billing"
)

// A monthly subscription first billed on Jan 31 keeps its anchor day: it is
// billed on the last day of shorter months and returns to the 31st whenever
// the month has one, instead of drifting to the 29th.
func ExampleSchedule_Next() {
	s := billing.Schedule{Term: billing.TermMonthly, AnchorDay: 31}
	date := time.Date(2024, time.January, 31, 9, 0, 0, 0, time.UTC)
	fmt.Println(date.Format(time.RFC3339))
	for range 5 {
		next, err := s.Next(date)
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		fmt.Println(next.Format(time.RFC3339))
		date = next
	}
	// Output:
	// 2024-01-31T09:00:00Z
	// 2024-02-29T09:00:00Z
	// 2024-03-31T09:00:00Z
	// 2024-04-30T09:00:00Z
	// 2024-05-31T09:00:00Z
	// 2024-06-30T09:00:00Z
}
