package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/dynabill/billing/internal/av"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPlainItem(t *testing.T) {
	t.Parallel()
	item := map[string]av.AttributeValue{
		"s":    &av.AttributeValueMemberS{Value: "x"},
		"n":    &av.AttributeValueMemberN{Value: "12345678901234567890.5"},
		"b":    &av.AttributeValueMemberBOOL{Value: true},
		"null": &av.AttributeValueMemberNULL{Value: true},
		"bin":  &av.AttributeValueMemberB{Value: []byte("hi")},
		"ss":   &av.AttributeValueMemberSS{Value: []string{"a", "b"}},
		"l":    &av.AttributeValueMemberL{Value: []av.AttributeValue{&av.AttributeValueMemberN{Value: "1"}}},
		"m":    &av.AttributeValueMemberM{Value: map[string]av.AttributeValue{"k": &av.AttributeValueMemberS{Value: "v"}}},
	}
	var buf bytes.Buffer
	require.NoError(t, writeJSON(&buf, plainItem(item)))
	var back map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(buf.Bytes(), &back))
	for k, want := range map[string]string{
		"s": `"x"`, "n": `12345678901234567890.5`, "b": `true`, "null": `null`, "bin": `"aGk="`,
		"ss": `["a","b"]`, "l": `[1]`, "m": `{"k":"v"}`,
	} {
		var compact bytes.Buffer
		_ = json.Compact(&compact, back[k])
		assert.Equal(t, want, compact.String(), "%s: got %s, want %s", k, compact.String(), want)
	}
	assert.Equal(t, `{"k":"v"}`, valueText(item["m"]), "valueText of a map")
}

func TestOrderedNames(t *testing.T) {
	t.Parallel()
	s := func(v string) av.AttributeValue { return &av.AttributeValueMemberS{Value: v} }
	got := orderedNames(map[string]av.AttributeValue{
		"zeta": s(""), "data_x": s(""), "billing_status": s(""), "user_id": s(""), "subscription_id": s(""), "alpha": s(""),
	})
	want := "subscription_id user_id billing_status alpha zeta data_x"
	assert.Equal(t, want, strings.Join(got, " "))
}

// TestOrderedNamesLibraryAttributes: the proration, discount and dunning
// attributes are printed beside the trial's, in the order of attrOrder,
// not among the unknown attributes sorted at the end.
func TestOrderedNamesLibraryAttributes(t *testing.T) {
	t.Parallel()
	s := func(v string) av.AttributeValue { return &av.AttributeValueMemberS{Value: v} }
	got := orderedNames(map[string]av.AttributeValue{
		"alpha": s(""), "billing_attempt": s(""), "billing_discounts": s(""), "billing_adjustments": s(""),
		"billing_balance": s(""), "billing_trial_amount": s(""), "user_id": s(""), "billing_dunning": s(""),
	})
	want := "user_id billing_trial_amount billing_balance billing_adjustments billing_discounts billing_dunning billing_attempt alpha"
	assert.Equal(t, want, strings.Join(got, " "))
}
