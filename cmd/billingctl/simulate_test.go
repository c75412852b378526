package main

import (
	"testing"
)

func TestSimulate(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "", "simulate", "--users", "30", "--months", "1", "--decline-rate", "0.2", "--seed", "7")
	r.want(t, exitOK, "Simulated 30 users for 31 days, 2024-01-01 to 2024-01-31", "month", "attempts", "revenue",
		"01/2024", "total", "(in memory")

	var got struct {
		Users  int        `json:"users"`
		Months []simMonth `json:"months"`
		Total  simMonth   `json:"total"`
	}
	r = runCLI(t, "", "simulate", "--users", "30", "--months", "2", "--decline-rate", "0", "--json")
	r.want(t, exitOK)
	r.decode(t, &got)
	if got.Users != 30 || len(got.Months) != 2 || got.Total.Attempts == 0 || got.Total.Revenue <= 0 {
		t.Errorf("simulation JSON: %+v", got)
	}
}
