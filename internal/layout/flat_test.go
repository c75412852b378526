package layout

import (
	"maps"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/av"
	"github.com/stretchr/testify/require"
)

// flatRecords returns records to compare Flats on: every fixture, canonical
// and legacy, as decoded (their stored key texts kept), and changed copies
// of each (status, run date, attempt, an unknown attribute, a legacy
// timestamp text).
func flatRecords(t *testing.T) []billing.Period {
	t.Helper()
	files, _ := filepath.Glob("../../testdata/items/*.json")
	legacy, _ := filepath.Glob("../../testdata/legacy/*.json")
	for _, f := range legacy {
		if !strings.HasSuffix(f, ".golden.json") {
			files = append(files, f)
		}
	}
	require.GreaterOrEqual(t, len(files), 7)
	var out []billing.Period
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
		SetExtraAttributes(&x, map[string]av.AttributeValue{"other_service": &av.AttributeValueMemberS{Value: "v"}})
		out = append(out, x)
		// Another text of the same last_run_date: kept byte for byte.
		l := s.Clone()
		l.Stored = nil
		withStored(&l, func(st *stored) {
			*st = *storedOf(&s)
			st.lastRunDate, st.lastRunDateAt = s.LastRunDate.UTC().Format(time.RFC3339Nano), s.LastRunDate
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
	items := make([]map[string]av.AttributeValue, len(recs))
	flats := make([]Flat, len(recs))
	for i := range recs {
		var err error
		items[i], err = EncodeHistoryItem(&recs[i])
		require.NoError(t, err)
		require.NoError(t, flats[i].EncodeHistory(&recs[i]))
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
			noAttempt := func(item map[string]av.AttributeValue) map[string]av.AttributeValue {
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
// dynamostore's writeBack): the reference a Diff must agree with.
func writeBackMaps(cur, prev, next map[string]av.AttributeValue, runDate bool) map[string]av.AttributeValue {
	keys := []string{AttrUserID, AttrBillingDate}
	out := maps.Clone(cur)
	for name, n := range next {
		if slices.Contains(keys, name) {
			continue
		}
		if p, ok := prev[name]; !ok || !reflect.DeepEqual(p, n) || runDate && name == AttrLastRunDate {
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

// TestWriteBackIsItemWriteBack: a Diff on Flats leaves the item the
// write-back of the two records' items leaves, whatever the stored item
// holds besides (legacy texts, unknown attributes), taking values from src
// when it has them.
func TestWriteBackIsItemWriteBack(t *testing.T) {
	recs := flatRecords(t)
	for i := range recs {
		stored, err := EncodeItem(&recs[i])
		require.NoError(t, err)
		// What another writer left: an unknown attribute and a legacy text.
		stored["claimed_by"] = &av.AttributeValueMemberS{Value: "x"}
		stored[AttrCreatedDate] = &av.AttributeValueMemberS{Value: "2020-01-01T00:00:00Z"}
		prevItem, _ := EncodeItem(&recs[i])
		prev := NewFlat()
		require.NoError(t, prev.Encode(&recs[i], false))
		for j := range recs {
			if recs[j].UserID != recs[i].UserID {
				continue
			}
			nextItem, err := EncodeItem(&recs[j])
			require.NoError(t, err)
			next := NewFlat()
			require.NoError(t, next.Encode(&recs[j], false))
			for _, runDate := range []bool{false, true} {
				want := writeBackMaps(stored, prevItem, nextItem, runDate)
				got := maps.Clone(stored)
				writeBack(got, prev, next, nil, func(v av.AttributeValue) av.AttributeValue { return v }, runDate)
				require.Equal(t, want, got, "records %d to %d, run date %v", i, j, runDate)
				got = maps.Clone(stored)
				src := next.HistoryRow(nil)
				srcItem := src.Item()
				writeBack(got, prev, next, src, nil, runDate)
				require.Equal(t, want, got, "records %d to %d from src, run date %v", i, j, runDate)
				for name, v := range got {
					if n, ok := srcItem[name]; ok && reflect.DeepEqual(n, v) && (runDate && name == AttrLastRunDate || !reflect.DeepEqual(prevItem[name], n)) && name != AttrUserID && name != AttrBillingDate {
						require.Same(t, n, v, "%s taken from src", name)
					}
				}
			}
		}
	}
}

// TestEncodeRecordErrorOrder: EncodeRecord reports what encoding the
// primary item and then the history row reports, and EncodeHistory what
// EncodeHistoryItem does.
func TestEncodeRecordErrorOrder(t *testing.T) {
	base := billing.Period{UserID: "u", SubscriptionID: "s", BillingDate: time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC),
		Status: billing.StatusScheduled, LastRunDate: time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)}
	badData := base.Clone()
	SetDataAttributes(&badData, map[string]av.AttributeValue{"nodata": &av.AttributeValueMemberS{Value: "v"}})
	noRun := badData.Clone()
	noRun.LastRunDate = time.Time{}
	badWeek := noRun.Clone()
	badWeek.BillingWeek = 9
	for _, s := range []billing.Period{base, badData, noRun, badWeek} {
		var f Flat
		err := f.EncodeRecord(&s)
		_, perr := EncodeItem(&s)
		_, herr := EncodeHistoryItem(&s)
		want := perr
		if want == nil {
			want = herr
		}
		require.Equal(t, want, err)
		err = f.EncodeHistory(&s)
		require.Equal(t, herr, err)
	}
}

// TestStoredKeyTexts: the key texts of a record read with legacy or
// canonical forms, then given the same or other instants, are what
// parsing and formatting the stored texts gives (the codec keeps the
// instants a record was read with instead).
func TestStoredKeyTexts(t *testing.T) {
	base := time.Date(2024, 3, 1, 10, 15, 30, 0, time.UTC)
	forms := []func(time.Time) string{
		func(t time.Time) string { return t.Format("2006-01-02T15:04:05Z") },
		func(t time.Time) string { return t.Format(time.RFC3339Nano) },
		func(t time.Time) string { return t.In(time.FixedZone("X", -6*3600)).Format(time.RFC3339Nano) },
		func(t time.Time) string { return t.Format("2006-01-02T15:04:05.000000000Z") },
		func(t time.Time) string { return t.Format("2006-01-02T15:04:05.000Z07:00") },
	}
	moves := []time.Duration{0, time.Nanosecond, 500 * time.Millisecond, time.Second, -time.Nanosecond, time.Hour}
	refKey := func(raw string, at time.Time, layout string) string {
		k := at.UTC().Format(layout)
		if raw != "" && raw != k {
			if p, err := time.Parse(time.RFC3339Nano, raw); err == nil && p.Equal(at) {
				return raw
			}
		}
		return k
	}
	for _, read := range []time.Time{base, base.Add(250 * time.Millisecond)} {
		for _, form := range forms {
			item, err := EncodeHistoryItem(&billing.Period{UserID: "u", SubscriptionID: "s", BillingDate: read,
				Status: billing.StatusScheduled, LastRunDate: read})
			require.NoError(t, err)
			item[AttrBillingDate] = &av.AttributeValueMemberS{Value: form(read)}
			item[AttrLastRunDate] = &av.AttributeValueMemberS{Value: form(read)}
			s, err := DecodeItem(item)
			require.NoError(t, err)
			for _, m := range moves {
				c := s.Clone()
				c.BillingDate, c.LastRunDate = s.BillingDate.Add(m), s.LastRunDate.Add(m)
				require.Equal(t, refKey(form(read), c.BillingDate, "2006-01-02T15:04:05Z"), BillingDateKey(&c), "%s moved %v", form(read), m)
				require.Equal(t, refKey(form(read), c.LastRunDate, "2006-01-02T15:04:05.000000000Z"), LastRunDateKey(&c), "%s moved %v", form(read), m)
			}
		}
	}
}

// TestAppendAmountIsAmountString: the codec writes amounts digit by digit
// (appendAmount) instead of through billing.Amount.String, the wire form
// ParseAmount reads back; the two must not drift apart.
func TestAppendAmountIsAmountString(t *testing.T) {
	ns := []int64{0, 1, 9, 10, 99, 100, 101, 499, 999, 1000, 123456, int64(billing.MaxAmount)}
	for n := int64(1); n > 0 && n <= int64(billing.MaxAmount)/10; n *= 10 {
		ns = append(ns, n-1, n, n+1)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for range 10000 {
		ns = append(ns, rng.Int64N(int64(billing.MaxAmount)))
	}
	for _, n := range ns {
		want := billing.Amount(n).String()
		require.Equal(t, want, string(appendAmount([]byte("x"), n))[1:], "amount %d", n)
		v := val{kind: vAmount, n: n}
		require.Equal(t, want, v.text(), "amount %d", n)
		back, err := billing.ParseAmount(want)
		require.NoError(t, err)
		require.Equal(t, billing.Amount(n), back)
	}
}

// TestAttrTables: the codec's tables of known attributes agree. attrOf
// (a switch, for speed) is attrNames read backwards, and the kind lists
// encode walks are exactly the attributes the field accessors decode, in
// attr order, each of one kind: an attribute added to one table and not
// the others would be decoded as an Extra attribute, or decoded but never
// written, without any other test noticing.
func TestAttrTables(t *testing.T) {
	seen := map[string]attr{}
	for a := range numAttrs {
		name := attrNames[a]
		require.NotEmpty(t, name, "attr %d has no name", a)
		require.NotContains(t, seen, name, "attr %d and %d share a name", seen[name], a)
		seen[name] = a
		got, ok := attrOf(name)
		require.True(t, ok, name)
		require.Equal(t, a, got, name)
		require.True(t, isKnown(name), name)
		require.False(t, strings.HasPrefix(name, DataPrefix), name)
	}
	for _, name := range []string{"", "claimed_by", DataPrefix + "x", "USER_ID", AttrUserID + " "} {
		_, ok := attrOf(name)
		require.False(t, ok, "%q", name)
	}
	var s billing.Period
	var str, tm, num []attr
	for a := range numAttrs {
		kinds := 0
		if stringField(&s, a) != nil {
			str, kinds = append(str, a), kinds+1
		}
		if timeField(&s, a) != nil {
			tm, kinds = append(tm, a), kinds+1
		}
		if p, lo, hi := intField(&s, a); p != nil {
			require.LessOrEqual(t, lo, hi, attrNames[a])
			num, kinds = append(num, a), kinds+1
		}
		require.LessOrEqual(t, kinds, 1, "%s has %d field kinds", attrNames[a], kinds)
	}
	require.Equal(t, str, stringAttrs)
	require.Equal(t, tm, timeAttrs)
	require.Equal(t, num, intAttrs[:])
}

// writeBack applies to cur, the stored primary item of prev, the Diff from
// prev to next, as a store does.
func writeBack(cur map[string]av.AttributeValue, prev, next *Flat, src *Row, clone func(av.AttributeValue) av.AttributeValue, writeRunDate bool) {
	var d Diff
	d.Make(prev, next, src, clone, writeRunDate)
	d.Apply(cur)
}
