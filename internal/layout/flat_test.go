package layout

import (
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
	"github.com/stretchr/testify/require"
)

// flatRecords returns records to compare Flats on: every fixture, canonical
// and legacy, as decoded (their stored key texts kept), and changed copies
// of each (status, run date, attempt, an unknown attribute, a legacy
// timestamp text).
func flatRecords(t *testing.T) []billing.Subscription {
	t.Helper()
	files, _ := filepath.Glob("../../testdata/items/*.json")
	legacy, _ := filepath.Glob("../../testdata/legacy/*.json")
	for _, f := range legacy {
		if !strings.HasSuffix(f, ".golden.json") {
			files = append(files, f)
		}
	}
	require.GreaterOrEqual(t, len(files), 7)
	var out []billing.Subscription
	for _, f := range files {
		s, err := DecodeItem(loadItem(t, f))
		require.NoError(t, err, f)
		if s.LastRunDate.IsZero() {
			s.LastRunDate = s.BillingDate
		}
		out = append(out, s)
		c := s.Clone()
		c.Status, c.CompletionDate, c.TransactionID = billing.StatusCompleted, s.LastRunDate.Add(time.Second), "txn-1"
		c.LastRunDate = c.CompletionDate
		out = append(out, c)
		a := s.Clone()
		a.LastAttempt = billing.Attempt{Number: s.Attempt + 1, Key: "k", Amount: s.Amount, Tier: s.ReceiptTierName, Process: billing.ProcessInitial, Started: s.LastRunDate}
		out = append(out, a)
		x := s.Clone()
		SetExtraAttributes(&x, map[string]types.AttributeValue{"other_service": &types.AttributeValueMemberS{Value: "v"}})
		out = append(out, x)
		// Another text of the same last_run_date: kept byte for byte.
		l := s.Clone()
		l.Stored = nil
		withStored(&l, func(st *stored) {
			*st = *storedOf(&s)
			st.lastRunDate = s.LastRunDate.UTC().Format(time.RFC3339Nano)
		})
		out = append(out, l)
		// One attribute of another text and instant: its stored text
		// against a formatted one.
		r := s.Clone()
		r.LastRunDate = s.LastRunDate.Add(time.Nanosecond)
		out = append(out, r)
		b := s.Clone()
		b.BillingDate = s.BillingDate.Add(time.Hour)
		out = append(out, b)
	}
	return out
}

// TestFlatEqualIsItemEquality: two records' Flats are equal exactly when
// their items are (reflect.DeepEqual, as the stores compared them), and
// the Flat builds the item EncodeHistoryItem returns.
func TestFlatEqualIsItemEquality(t *testing.T) {
	recs := flatRecords(t)
	items := make([]map[string]types.AttributeValue, len(recs))
	flats := make([]Flat, len(recs))
	for i := range recs {
		var err error
		items[i], err = EncodeHistoryItem(&recs[i])
		require.NoError(t, err)
		flats[i], err = EncodeHistoryFlat(&recs[i])
		require.NoError(t, err)
		require.Equal(t, items[i], flats[i].Item(true, nil))
		require.Equal(t, len(items[i]), flats[i].Len(true))
		for name := range items[i] {
			require.True(t, flats[i].Has(name), name)
		}
	}
	for i := range recs {
		for j := range recs {
			want := reflect.DeepEqual(items[i], items[j])
			require.Equal(t, want, flats[i].equal(&flats[j]), "records %d and %d", i, j)
			noAttempt := func(item map[string]types.AttributeValue) map[string]types.AttributeValue {
				out := maps.Clone(item)
				for _, a := range []string{AttrAttempt, AttrAttemptNumber, AttrAttemptKey, AttrAttemptAmount, AttrAttemptTier, AttrAttemptProcess, AttrAttemptStarted} {
					delete(out, a)
				}
				return out
			}
			want = reflect.DeepEqual(noAttempt(items[i]), noAttempt(items[j]))
			require.Equal(t, want, flats[i].SameExceptAttempt(&flats[j]), "records %d and %d without attempts", i, j)
		}
	}
}

// writeBackMaps is the write-back of the DynamoDB stores on items (see
// dynamostore's writeBack): the reference WriteBack must agree with.
func writeBackMaps(cur, prev, next map[string]types.AttributeValue, all bool) map[string]types.AttributeValue {
	keys := []string{AttrUserID, AttrBillingDate}
	out := maps.Clone(cur)
	for name, n := range next {
		if slices.Contains(keys, name) {
			continue
		}
		if p, ok := prev[name]; all || !ok || !reflect.DeepEqual(p, n) || name == AttrLastRunDate {
			out[name] = n
		}
	}
	for name := range prev {
		if _, ok := next[name]; !ok && !slices.Contains(keys, name) {
			delete(out, name)
		}
	}
	return out
}

// TestWriteBackIsItemWriteBack: WriteBack on Flats leaves the item the
// write-back of the two records' items leaves, whatever the stored item
// holds besides (legacy texts, unknown attributes), taking values from src
// when it has them.
func TestWriteBackIsItemWriteBack(t *testing.T) {
	recs := flatRecords(t)
	for i := range recs {
		stored, err := EncodeItem(&recs[i])
		require.NoError(t, err)
		// What another writer left: an unknown attribute and a legacy text.
		stored["claimed_by"] = &types.AttributeValueMemberS{Value: "x"}
		stored[AttrCreatedDate] = &types.AttributeValueMemberS{Value: "2020-01-01T00:00:00Z"}
		prevItem, _ := EncodeItem(&recs[i])
		prev, _ := EncodeFlat(&recs[i], false)
		for j := range recs {
			if recs[j].UserID != recs[i].UserID {
				continue
			}
			nextItem, err := EncodeItem(&recs[j])
			require.NoError(t, err)
			next, _ := EncodeFlat(&recs[j], false)
			for _, all := range []bool{false, true} {
				want := writeBackMaps(stored, prevItem, nextItem, all)
				got := maps.Clone(stored)
				WriteBack(got, &prev, &next, nil, func(v types.AttributeValue) types.AttributeValue { return v }, all)
				require.Equal(t, want, got, "records %d to %d, all %v", i, j, all)
				got = maps.Clone(stored)
				WriteBack(got, &prev, &next, nextItem, nil, all)
				require.Equal(t, want, got, "records %d to %d from src, all %v", i, j, all)
				for name, v := range got {
					if n, ok := nextItem[name]; ok && reflect.DeepEqual(n, v) && (all || !reflect.DeepEqual(prevItem[name], n)) && name != AttrUserID && name != AttrBillingDate {
						require.Same(t, n, v, "%s taken from src", name)
					}
				}
			}
		}
	}
}

// TestEncodeRecordErrorOrder: EncodeRecord reports what encoding the
// primary item and then the history row reports, and EncodeHistoryFlat
// what EncodeHistoryItem does.
func TestEncodeRecordErrorOrder(t *testing.T) {
	base := billing.Subscription{UserID: "u", SubscriptionID: "s", BillingDate: time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC),
		Status: billing.StatusScheduled, LastRunDate: time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)}
	badData := base.Clone()
	SetDataAttributes(&badData, map[string]types.AttributeValue{"nodata": &types.AttributeValueMemberS{Value: "v"}})
	noRun := badData.Clone()
	noRun.LastRunDate = time.Time{}
	badWeek := noRun.Clone()
	badWeek.BillingWeek = 9
	for _, s := range []billing.Subscription{base, badData, noRun, badWeek} {
		_, err := EncodeRecord(&s)
		_, perr := EncodeItem(&s)
		_, herr := EncodeHistoryItem(&s)
		want := perr
		if want == nil {
			want = herr
		}
		require.Equal(t, want, err)
		_, err = EncodeHistoryFlat(&s)
		require.Equal(t, herr, err)
	}
}
