package layout

import (
	"errors"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/av"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rowStore is a user's stored history rows by last_run_date key.
type rowStore map[string]map[string]av.AttributeValue

func (s rowStore) plan(t *testing.T, recs []billing.Period) []RowPlan {
	t.Helper()
	plans, err := PlanHistoryRows(recs, func(i int, key string) (map[string]av.AttributeValue, bool) {
		row, ok := s[recs[i].UserID+"\x00"+key]
		return row, ok
	}, func(i int, at time.Time) (map[string]av.AttributeValue, error) {
		rec := recs[i].Clone()
		rec.LastRunDate = at
		return EncodeHistoryItem(&rec)
	})
	require.NoError(t, err)
	return plans
}

// write stores the rows the plans write, as a store would.
func (s rowStore) write(recs []billing.Period, plans []RowPlan) {
	for i, p := range plans {
		if p.Err != nil || p.RowStored {
			continue
		}
		rec := recs[i].Clone()
		rec.LastRunDate = p.LastRunDate
		s[rec.UserID+"\x00"+LastRunDateKey(&rec)], _ = EncodeHistoryItem(&rec)
	}
}

func planRecord(id string, lrd time.Time) billing.Period {
	bd := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
	return billing.Period{UserID: "u1", SubscriptionID: id, Status: billing.StatusScheduled, Amount: billing.Cents(499),
		BillingDate: bd, BillingPeriod: billing.BillingPeriod(bd), LastRunDate: lrd}
}

// TestPlanHistoryRowsRetryFindsItsRows: a batch whose keys other rows
// hold moves around them and the batch's own keys; the identical batch
// again finds each row where the first try put it and writes nothing.
func TestPlanHistoryRowsRetryFindsItsRows(t *testing.T) {
	l := time.Date(2024, 2, 20, 8, 0, 0, 0, time.UTC)
	stored := rowStore{}
	other := planRecord("other", l)
	stored.write([]billing.Period{other}, []RowPlan{{LastRunDate: l}})
	batch := []billing.Period{planRecord("a", l), planRecord("b", l.Add(1))}

	first := stored.plan(t, batch)
	assert.Equal(t, []RowPlan{{LastRunDate: l.Add(2), Moved: true}, {LastRunDate: l.Add(1)}}, first,
		"a moves past the stored row and b's key; b keeps its own")
	stored.write(batch, first)

	again := stored.plan(t, batch)
	assert.Equal(t, []RowPlan{{LastRunDate: l.Add(2), Moved: true, RowStored: true}, {LastRunDate: l.Add(1), RowStored: true}}, again)
	assert.Len(t, stored, 3)
}

// TestPlanHistoryRowsRefusesWhenSpanIsTaken: with every key of the span
// held by other rows the record is refused with a typed error.
func TestPlanHistoryRowsRefusesWhenSpanIsTaken(t *testing.T) {
	l := time.Date(2024, 2, 20, 8, 0, 0, 0, time.UTC)
	stored := rowStore{}
	for n := time.Duration(0); n < HistoryKeySpan; n++ {
		stored.write([]billing.Period{planRecord("other", l.Add(n))}, []RowPlan{{LastRunDate: l.Add(n)}})
	}
	plans := stored.plan(t, []billing.Period{planRecord("a", l)})
	require.ErrorIs(t, plans[0].Err, billing.ErrAlreadyExists)
	var ce *billing.ConflictError
	assert.True(t, errors.As(plans[0].Err, &ce) && ce.HistoryRow)
	assert.Len(t, stored, int(HistoryKeySpan))
}
