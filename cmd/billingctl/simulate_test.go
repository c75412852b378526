package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
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
	assert.Equal(t, 30, got.Users, "simulation JSON: %+v", got)
	assert.Len(t, got.Months, 2, "simulation JSON: %+v", got)
	assert.NotZero(t, got.Total.Attempts, "simulation JSON: %+v", got)
	assert.Positive(t, got.Total.Revenue, "simulation JSON: %+v", got)
}
