package billinghttp

import (
	"bytes"
	"errors"
	"net/http/httptest"
	"testing"
	"time"
)

// FuzzParseDate: never panics; an accepted date is UTC and parses again
// from its RFC 3339 form to the same instant; a refusal is a 400 naming
// the field.
func FuzzParseDate(f *testing.F) {
	for _, s := range []string{"2024-03-15", "2024-03-15T09:00:00Z", "2024-03-15T09:00:00+02:00", "2024-03-15T09:00:00+00:00", "0000-01-01", "", "15/03/2024", "2024-02-30"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseDate("billing_date", s)
		if err != nil {
			var ae *apiError
			if !errors.As(err, &ae) || ae.status != 400 || ae.field != "billing_date" {
				t.Fatalf("parseDate(%q) error %v is not a 400 naming billing_date", s, err)
			}
			return
		}
		if d.Location() != time.UTC || d.IsZero() || d.Year() < 1 {
			t.Fatalf("parseDate(%q) = %v", s, d)
		}
		again, err := parseDate("billing_date", d.Format(time.RFC3339Nano))
		if err != nil || !again.Equal(d) {
			t.Fatalf("re-parse of %v: %v %v", d, again, err)
		}
	})
}

// FuzzDecodeBody: arbitrary request bodies never panic the decoder, and
// every refusal is a 4xx, never an internal error.
func FuzzDecodeBody(f *testing.F) {
	for _, s := range []string{`{"months": 2}`, `{"months": 2, "x": 1}`, `{}`, ``, `[]`, `{"months": "2"}`, `{"months": 2} {}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var v struct {
			Months int `json:"months"`
		}
		r := httptest.NewRequest("POST", "/u/subscriptions/s/pause", bytes.NewReader(body))
		if err := decodeBody(r, &v, true); err != nil {
			var ae *apiError
			if !errors.As(err, &ae) || ae.status/100 != 4 {
				t.Fatalf("decodeBody(%q) error %v is not a 4xx", body, err)
			}
		}
	})
}
