package cursor

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/dynabill/billing/internal/av"
)

func key() map[string]av.AttributeValue {
	return map[string]av.AttributeValue{
		"user_id":        &av.AttributeValueMemberS{Value: "u1"},
		"billing_date":   &av.AttributeValueMemberS{Value: "2024-01-31T00:00:00Z"},
		"billing_status": &av.AttributeValueMemberS{Value: "SCHEDULED"},
	}
}

var names = []string{"user_id", "billing_date", "billing_status"}

func TestRoundTrip(t *testing.T) {
	tok, err := Encode("q1", key())
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(tok, "+/=") {
		t.Fatalf("token %q is not URL-safe", tok)
	}
	got, err := Decode("q1", tok, names...)
	if err != nil || !reflect.DeepEqual(got, key()) {
		t.Fatalf("Decode = %v, %v", got, err)
	}
	if tok, _ := Encode("q1", nil); tok != "" {
		t.Fatal("empty key should give empty token")
	}
	if k, err := Decode("q1", ""); k != nil || err != nil {
		t.Fatal("empty token should decode to nil")
	}
}

func TestRejects(t *testing.T) {
	tok, _ := Encode("q1", key())
	flipped := []byte(tok)
	flipped[len(flipped)/2] ^= 1
	other, _ := Encode("q1", map[string]av.AttributeValue{"user_id": &av.AttributeValueMemberS{Value: "u"}})
	num, _ := Encode("q1", map[string]av.AttributeValue{
		"user_id": &av.AttributeValueMemberN{Value: "1"}, "billing_date": &av.AttributeValueMemberS{Value: "x"},
		"billing_status": &av.AttributeValueMemberS{Value: "x"}})
	for name, bad := range map[string]string{
		"other scope":    tok,
		"flipped":        string(flipped),
		"truncated":      tok[:len(tok)-3],
		"not base64":     "!!!",
		"garbage":        "AAAA",
		"wrong names":    other,
		"number key":     num,
		"too long":       strings.Repeat("A", 5000),
		"version 2":      "Ag",
		"appended bytes": tok + "AA",
	} {
		scope := "q1"
		if name == "other scope" {
			scope = "q2"
		}
		if _, err := Decode(scope, bad, names...); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	tok, _ := Encode("q", key())
	f.Add(tok)
	f.Add("")
	f.Add("AQ")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := Decode("q", s, names...)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error not ErrInvalid: %v", err)
			}
			return
		}
		if s == "" {
			return
		}
		again, err := Encode("q", k)
		if err != nil {
			t.Fatal(err)
		}
		k2, err := Decode("q", again, names...)
		if err != nil || !reflect.DeepEqual(k, k2) {
			t.Fatalf("re-encode: %v", err)
		}
	})
}
