package memory

import (
	"maps"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/av"
	"github.com/dynabill/billing/internal/layout"
	"github.com/stretchr/testify/require"
)

// TestDiffIsWriteBackItem: the store writes records back with layout.Diff
// on Flats, and single-table subscription items with writeBackItem on
// item maps; both are DynamoDB's write-back, so they must leave the same
// item, whatever else the stored item holds.
func TestDiffIsWriteBackItem(t *testing.T) {
	at := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	base := billing.Period{UserID: "u", SubscriptionID: "s", BillingDate: at, Status: billing.StatusScheduled,
		Amount: 999, Term: billing.TermMonthly, ReceiptTierName: "Plus", CreatedDate: at, LastRunDate: at, AnchorDay: 1}
	done := base.Clone()
	done.Status, done.TransactionID, done.CompletionDate, done.LastRunDate = billing.StatusCompleted, "txn", at.Add(time.Hour), at.Add(time.Hour)
	attempt := base.Clone()
	attempt.LastAttempt = billing.Attempt{Number: 1, Key: "k", Amount: 999, Tier: "Plus", Process: billing.ProcessInitial, Started: at}
	settled := attempt.Clone()
	settled.Attempt, settled.ReceiptTierName, settled.AnchorDay = 1, "", 0
	extra := base.Clone()
	layout.SetExtraAttributes(&extra, map[string]av.AttributeValue{"other": &av.AttributeValueMemberS{Value: "v"}})
	recs := []billing.Period{base, done, attempt, settled, extra}
	keys, always := []string{layout.AttrUserID, layout.AttrBillingDate}, []string{layout.AttrLastRunDate}
	for i := range recs {
		prevItem, err := layout.EncodeItem(&recs[i])
		require.NoError(t, err)
		stored := maps.Clone(prevItem)
		stored["claimed_by"] = &av.AttributeValueMemberS{Value: "x"}
		stored[layout.AttrCreatedDate] = &av.AttributeValueMemberS{Value: "2024-06-01T12:00:00Z"}
		prev := layout.NewFlat()
		require.NoError(t, prev.Encode(&recs[i], false))
		for j := range recs {
			nextItem, err := layout.EncodeItem(&recs[j])
			require.NoError(t, err)
			next := layout.NewFlat()
			require.NoError(t, next.Encode(&recs[j], false))
			for _, runDate := range []bool{false, true} {
				var alw []string
				if runDate {
					alw = always
				}
				want := writeBackItem(stored, prevItem, nextItem, keys, alw)
				got := cloneItem(stored)
				var d layout.Diff
				d.Make(prev, next, nil, cloneValue, runDate)
				d.Apply(got)
				require.Equal(t, want, got, "records %d to %d, run date %v", i, j, runDate)
			}
			next.Release()
		}
		prev.Release()
	}
}
