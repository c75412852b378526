package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/av"
	"github.com/dynabill/billing/internal/layout"
)

// newTable returns a tabwriter for aligned columns.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// attrOrder is the order records are printed in: the key, what an operator
// looks at first, then the rest of the wire contract and the library's
// attributes. Other attributes follow sorted, data_ ones last.
var attrOrder = []string{
	layout.AttrSubscriptionID, layout.AttrUserID, layout.AttrBillingDate, layout.AttrBillingStatus,
	layout.AttrBillingAmount, layout.AttrReceiptTierName, layout.AttrTerm, layout.AttrBillingPeriod,
	layout.AttrBillingWeek, layout.AttrAnchorDay, layout.AttrInterval, layout.AttrProcess, layout.AttrUpdatedEvent,
	layout.AttrPauseDurationMonths, layout.AttrIsPendingDowngrade, layout.AttrPendingTier, layout.AttrPendingAmount,
	layout.AttrTrialEnd, layout.AttrTrialAmount, layout.AttrBalance, layout.AttrAdjustments, layout.AttrDiscounts,
	layout.AttrTax, layout.AttrTaxInclusive, layout.AttrTaxDescription, layout.AttrDunning,
	layout.AttrAttempt, layout.AttrNoRetry, layout.AttrTransactionID, layout.AttrPaymentError,
	layout.AttrReceiptAccountMask, layout.AttrReceiptPaymentType,
	layout.AttrInitialRunDate, layout.AttrCompletionDate, layout.AttrCreatedDate, layout.AttrLastRunDate,
}

// orderedNames returns the attribute names of the items in print order.
func orderedNames(items ...map[string]av.AttributeValue) []string {
	seen := map[string]bool{}
	for _, it := range items {
		for name := range it {
			seen[name] = true
		}
	}
	var names []string
	for _, n := range attrOrder {
		if seen[n] {
			names = append(names, n)
			delete(seen, n)
		}
	}
	var rest []string
	for n := range seen {
		rest = append(rest, n)
	}
	slices.SortFunc(rest, func(a, b string) int {
		da, db := strings.HasPrefix(a, layout.DataPrefix), strings.HasPrefix(b, layout.DataPrefix)
		if da != db {
			if da {
				return 1
			}
			return -1
		}
		return strings.Compare(a, b)
	})
	return append(names, rest...)
}

// plainItem converts an item to plain JSON values: strings, numbers (exact,
// as json.Number), booleans, null, lists, objects, base64 for binary.
func plainItem(item map[string]av.AttributeValue) map[string]any {
	out := make(map[string]any, len(item))
	for k, v := range item {
		out[k] = plainValue(v)
	}
	return out
}

func plainValue(attrVal av.AttributeValue) any {
	switch v := attrVal.(type) {
	case *av.AttributeValueMemberS:
		return v.Value
	case *av.AttributeValueMemberN:
		return json.Number(v.Value)
	case *av.AttributeValueMemberBOOL:
		return v.Value
	case *av.AttributeValueMemberNULL:
		return nil
	case *av.AttributeValueMemberB:
		return base64.StdEncoding.EncodeToString(v.Value)
	case *av.AttributeValueMemberSS:
		return v.Value
	case *av.AttributeValueMemberNS:
		ns := make([]json.Number, len(v.Value))
		for i, n := range v.Value {
			ns[i] = json.Number(n)
		}
		return ns
	case *av.AttributeValueMemberBS:
		bs := make([]string, len(v.Value))
		for i, b := range v.Value {
			bs[i] = base64.StdEncoding.EncodeToString(b)
		}
		return bs
	case *av.AttributeValueMemberL:
		l := make([]any, len(v.Value))
		for i, e := range v.Value {
			l[i] = plainValue(e)
		}
		return l
	case *av.AttributeValueMemberM:
		return plainItem(v.Value)
	}
	return fmt.Sprintf("%T", attrVal)
}

// valueText renders an attribute value for a table cell.
func valueText(attrVal av.AttributeValue) string {
	switch v := attrVal.(type) {
	case nil:
		return ""
	case *av.AttributeValueMemberS:
		return v.Value
	case *av.AttributeValueMemberN:
		return v.Value
	case *av.AttributeValueMemberBOOL:
		return fmt.Sprint(v.Value)
	case *av.AttributeValueMemberNULL:
		return "null"
	}
	b, err := json.Marshal(plainValue(attrVal))
	if err != nil {
		return fmt.Sprintf("%T", attrVal)
	}
	return string(b)
}

// recordItem is the stored form of a record: what the table holds.
func recordItem(s *billing.Period) map[string]av.AttributeValue {
	item, err := layout.EncodeItem(s)
	if err != nil {
		return fallbackItem(s, err)
	}
	return item
}

// historyItem is the stored form of a history row (data_ attributes
// included).
func historyItem(s *billing.Period) map[string]av.AttributeValue {
	item, err := layout.EncodeHistoryItem(s)
	if err != nil {
		return fallbackItem(s, err)
	}
	return item
}

// fallbackItem shows what can be shown of a record that does not encode
// (it was decoded, so this should not happen).
func fallbackItem(s *billing.Period, err error) map[string]av.AttributeValue {
	str := func(v string) av.AttributeValue { return &av.AttributeValueMemberS{Value: v} }
	return map[string]av.AttributeValue{
		layout.AttrUserID:         str(s.UserID),
		layout.AttrSubscriptionID: str(s.SubscriptionID),
		layout.AttrBillingDate:    str(fmtTime(s.BillingDate)),
		layout.AttrBillingStatus:  str(string(s.Status)),
		layout.AttrBillingAmount:  str(s.Amount.String()),
		"billingctl_error":        str(err.Error()),
	}
}

// writeRecord prints an item as "attribute  value" lines.
func writeRecord(w io.Writer, item map[string]av.AttributeValue) error {
	tw := newTable(w)
	for _, n := range orderedNames(item) {
		fmt.Fprintf(tw, "  %s\t%s\n", n, valueText(item[n]))
	}
	return tw.Flush()
}

// writeChanged prints after as "attribute  value" lines, marking with "*"
// the attributes that differ from before (a removed one shows "(removed)").
func writeChanged(w io.Writer, before, after map[string]av.AttributeValue) error {
	tw := newTable(w)
	for _, n := range orderedNames(before, after) {
		b, a := valueText(before[n]), valueText(after[n])
		_, inB := before[n]
		_, inA := after[n]
		switch {
		case !inA:
			fmt.Fprintf(tw, "* %s\t(removed; was %s)\n", n, b)
		case !inB || a != b:
			fmt.Fprintf(tw, "* %s\t%s\n", n, a)
		default:
			fmt.Fprintf(tw, "  %s\t%s\n", n, a)
		}
	}
	return tw.Flush()
}

// fmtTime formats a time in UTC to the second; "" for the zero time.
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// ratio formats items read per item returned; "-" when nothing was
// returned.
func ratio(read, returned int) string {
	if returned == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", float64(read)/float64(returned))
}

// ratioJSON is ratio for JSON: null when nothing was returned.
func ratioJSON(read, returned int) *float64 {
	if returned == 0 {
		return nil
	}
	r := float64(read) / float64(returned)
	return &r
}

// sumAmounts adds amounts exactly.
func sumAmounts(total *billing.Amount, a billing.Amount) error {
	s, err := total.Add(a)
	if err != nil {
		return err
	}
	*total = s
	return nil
}

// plural formats a count and a noun: "1 page", "3 pages".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
