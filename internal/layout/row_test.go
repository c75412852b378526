package layout

import (
	"testing"

	"github.com/dynabill/billing"
	av "github.com/dynabill/billing/internal/av"
	"github.com/stretchr/testify/require"
)

// TestRowIsTheHistoryItem: a Row builds the item Item(true, clone) builds,
// its primary item is that item less the history-only attributes (with
// the room asked for), as ItemAndRow's is, and String reads what a lookup
// in the item reads.
func TestRowIsTheHistoryItem(t *testing.T) {
	recs := flatRecords(t)
	// A history row's own attributes: data_, change and request.
	h := recs[0].Clone()
	SetDataAttributes(&h, map[string]av.AttributeValue{"data_note": &av.AttributeValueMemberS{Value: "n"}})
	h.Change, h.Request = billing.EventType("payment_succeeded"), "req-1"
	h.Operator, h.Reason = "ann", "asked by phone"
	recs = append(recs, h)
	names := append([]string{AttrChange, AttrRequest, "data_note", AttrOperator, AttrReason, "other_service", "missing"}, attrNames[:]...)
	for i := range recs {
		f := NewFlat()
		require.NoError(t, f.EncodeRecord(&recs[i]), i)
		want := f.Item(true, nil)
		row := f.HistoryRow(nil)
		require.Equal(t, want, row.Item(), "record %d", i)
		require.Equal(t, len(want), row.Len(), "record %d", i)
		primary := map[string]av.AttributeValue{}
		for name, v := range want {
			if !HistoryOnly(name) {
				primary[name] = v
			}
		}
		require.Equal(t, primary, row.Primary(24), "record %d", i)
		item, row2 := f.ItemAndRow(24, nil)
		require.Equal(t, primary, item, "record %d", i)
		require.Equal(t, want, row2.Item(), "record %d", i)
		for name, v := range row2.Item() { // the primary item and the row share their values
			if p, ok := item[name]; ok {
				require.Same(t, v, p, "record %d, %s", i, name)
			}
		}
		for _, name := range names {
			s, _ := want[name].(*av.AttributeValueMemberS)
			w := ""
			if s != nil {
				w = s.Value
			}
			require.Equal(t, w, row.String(name), "record %d, %s", i, name)
		}
		f.Release()
	}
}
