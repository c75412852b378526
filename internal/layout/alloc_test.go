//go:build !race

package layout

import (
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/stretchr/testify/require"
)

// TestCodecAllocations pins the codec's allocations (the in-memory
// store's collection path is made of these): decoding allocates the
// record's stored part only, encoding an item its map, one block of values
// and one string, and checking or comparing records nothing.
func TestCodecAllocations(t *testing.T) {
	now := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	rec := billing.Period{UserID: "u", SubscriptionID: "s", BillingDate: now, AnchorDay: 1, BillingPeriod: "2024-06",
		Status: billing.StatusScheduled, Amount: 999, Term: billing.TermMonthly, ReceiptTierName: "Plus:v2",
		CreatedDate: now, LastRunDate: now, Attempt: 1, LastAttempt: billing.Attempt{Number: 2, Key: "k", Amount: 999,
			Tier: "Plus:v2", Process: billing.ProcessInitial, Started: now}}
	item, err := EncodeHistoryItem(&rec)
	require.NoError(t, err)
	read, err := DecodeItem(item)
	require.NoError(t, err)
	next := read.Clone()
	next.Status, next.LastRunDate, next.CompletionDate = billing.StatusCompleted, now.Add(time.Second), now.Add(time.Second)
	settled := read.Clone()
	settled.Attempt = 2
	for _, c := range []struct {
		name string
		max  float64
		f    func()
	}{
		{"EncodeItem", 4 + 2, func() { _, _ = EncodeItem(&rec) }},
		{"DecodeItem", 1, func() { _, _ = DecodeItem(item) }},
		{"Encode", 0, func() { f := NewFlat(); _ = f.Encode(&read, true); f.Release() }},
		{"EncodeRecord", 0, func() { f := NewFlat(); _ = f.EncodeRecord(&read); f.Release() }},
		{"keys", 0, func() { _, _ = BillingDateKey(&read), LastRunDateKey(&read) }},
		{"ValidateUpdate", 0, func() { _ = ValidateUpdate(&read, &next, false) }},
		{"ValidateAttemptUpdate", 0, func() { _ = ValidateAttemptUpdate(&read, &settled) }},
	} {
		if got := testing.AllocsPerRun(50, c.f); got > c.max {
			t.Errorf("%s: %v allocations, want at most %v", c.name, got, c.max)
		}
	}
	require.NoError(t, ValidateUpdate(&read, &next, false))
	require.NoError(t, ValidateAttemptUpdate(&read, &settled))
}
