package billingtest

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/av"
	"github.com/dynabill/billing/internal/layout"
)

// RequireHistoryMatchesPrimary checks the invariant that history mirrors
// the primary table: for every record of the user, the history holds a row
// of its subscription_id, and the newest such row (latest last_run_date)
// equals the record in every stored attribute except the history-only
// data_ ones and a reminder's claim (notice.ReminderClaimer), which only
// the record carries. It fails t at once otherwise, listing every mismatch.
//
// It reads the history with ListByUser (a base-table query), not through
// the subscription_id index.
func RequireHistoryMatchesPrimary(t testing.TB, repo billing.Repository, hist billing.History, userID string) {
	t.Helper()
	recs, err := repo.ListByUser(t.Context(), userID)
	if err != nil {
		t.Fatalf("RequireHistoryMatchesPrimary: ListByUser(%q): %v", userID, err)
	}
	rows, err := hist.ListByUser(t.Context(), userID)
	if err != nil {
		t.Fatalf("RequireHistoryMatchesPrimary: History.ListByUser(%q): %v", userID, err)
	}
	newest := map[string]billing.Period{}
	for _, r := range rows {
		cur, ok := newest[r.SubscriptionID]
		if !ok || r.LastRunDate.After(cur.LastRunDate) {
			newest[r.SubscriptionID] = r
		}
	}
	var problems []string
	for i := range recs {
		rec := &recs[i]
		row, ok := newest[rec.SubscriptionID]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s (subscription_id %s): no history row", rec.Key(), rec.SubscriptionID))
			continue
		}
		if d := diffStored(&row, rec); d != "" {
			problems = append(problems, fmt.Sprintf("%s (subscription_id %s): newest history row (last_run_date %s) differs from the record: %s",
				rec.Key(), rec.SubscriptionID, layout.LastRunDateKey(&row), d))
		}
	}
	if len(problems) > 0 {
		t.Fatalf("history does not match the primary table for user %q:\n\t%s", userID, strings.Join(problems, "\n\t"))
	}
}

// diffStored compares two records as the primary table stores them
// (EncodeItem: data_ attributes left out, and a reminder's claim
// attributes ignored) and describes the attributes that differ as
// "name: got vs want"; "" when equal.
func diffStored(got, want *billing.Period) string {
	return diffItems(layout.EncodeItem, got, want)
}

// diffHistoryRow is diffStored with the data_ attributes.
func diffHistoryRow(got, want *billing.Period) string {
	return diffItems(layout.EncodeHistoryItem, got, want)
}

func diffItems(encode func(*billing.Period) (map[string]av.AttributeValue, error), got, want *billing.Period) string {
	g, err := encode(got)
	if err != nil {
		return "got does not encode: " + err.Error()
	}
	w, err := encode(want)
	if err != nil {
		return "want does not encode: " + err.Error()
	}
	names := map[string]bool{}
	for n := range g {
		names[n] = true
	}
	for n := range w {
		names[n] = true
	}
	// A reminder's claim is written on the primary item alone, and kept
	// through updates: it is not part of the record's state.
	for _, n := range layout.ReminderAttributes() {
		delete(names, n)
	}
	var diffs []string
	for n := range names {
		gv, gok := g[n]
		wv, wok := w[n]
		if gok != wok || !reflect.DeepEqual(gv, wv) {
			diffs = append(diffs, fmt.Sprintf("%s: %s vs %s", n, showValue(gv, gok), showValue(wv, wok)))
		}
	}
	sort.Strings(diffs)
	return strings.Join(diffs, "; ")
}

// showValue renders an attribute value for a failure message.
func showValue(v av.AttributeValue, ok bool) string {
	if !ok {
		return "(absent)"
	}
	switch v := v.(type) {
	case *av.AttributeValueMemberS:
		return fmt.Sprintf("S %q", v.Value)
	case *av.AttributeValueMemberN:
		return "N " + v.Value
	case *av.AttributeValueMemberBOOL:
		return fmt.Sprintf("BOOL %t", v.Value)
	case *av.AttributeValueMemberNULL:
		return "NULL"
	case *av.AttributeValueMemberSS:
		return fmt.Sprintf("SS %q", v.Value)
	case *av.AttributeValueMemberNS:
		return fmt.Sprintf("NS %v", v.Value)
	case *av.AttributeValueMemberL:
		parts := make([]string, len(v.Value))
		for i, e := range v.Value {
			parts[i] = showValue(e, true)
		}
		return "L [" + strings.Join(parts, ", ") + "]"
	case *av.AttributeValueMemberM:
		keys := make([]string, 0, len(v.Value))
		for k := range v.Value {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + ": " + showValue(v.Value[k], true)
		}
		return "M {" + strings.Join(parts, ", ") + "}"
	}
	return fmt.Sprintf("%T", v)
}
