package billinghttp

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestDecodeBodyStrict checks that a body means one thing: exact keys,
// no duplicates, flat values, one object, and fixed messages that never
// carry the decoder's text or the client's bytes.
func TestDecodeBodyStrict(t *testing.T) {
	deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	cases := []struct {
		name, body string
		code       string // "" when accepted
		field      string
		want       TierRequest
	}{
		{name: "exact keys", body: `{"tier":"Lite:v1","amount":"2.99","downgrade":true}`,
			want: TierRequest{Tier: "Lite:v1", Amount: ptr("2.99"), Downgrade: true}},
		{name: "escaped key is the same key", body: `{"tier":"Lite:v1","\u0061mount":"2.99"}`,
			want: TierRequest{Tier: "Lite:v1", Amount: ptr("2.99")}},
		{name: "null values", body: `{"tier":null,"amount":null,"downgrade":null}`},
		{name: "whitespace around", body: " \n\t{ \"tier\" : \"X:v1\" } \r\n", want: TierRequest{Tier: "X:v1"}},

		{name: "mis-cased key", body: `{"TIER":"X","amount":"1.00"}`, code: CodeUnknownField, field: "TIER"},
		{name: "mis-cased key beside the exact one", body: `{"tier":"X","Amount":"1.00","amount":"2.00"}`, code: CodeUnknownField, field: "Amount"},
		{name: "duplicate key", body: `{"tier":"X","amount":"1.00","amount":"2.00"}`, code: CodeInvalidRequest, field: "amount"},
		{name: "duplicate string key", body: `{"tier":"X","tier":"Y"}`, code: CodeInvalidRequest, field: "tier"},
		{name: "duplicate of an escaped key", body: `{"amount":"1.00","\u0061mount":"2.00"}`, code: CodeInvalidRequest, field: "amount"},
		{name: "unknown key", body: `{"tier":"X","price":"1"}`, code: CodeUnknownField, field: "price"},
		{name: "unknown key not echoed when odd", body: `{"<script>":1}`, code: CodeUnknownField},
		{name: "unknown long key not echoed", body: `{"` + strings.Repeat("k", 65) + `":1}`, code: CodeUnknownField},
		{name: "object as a value", body: `{"tier":{"name":"X"}}`, code: CodeInvalidRequest, field: "tier"},
		{name: "array as a value", body: `{"amount":["1.00"]}`, code: CodeInvalidRequest, field: "amount"},
		{name: "deeply nested value", body: `{"tier":` + deep + `}`, code: CodeInvalidRequest, field: "tier"},
		{name: "deeply nested body", body: deep, code: CodeInvalidRequest},
		{name: "nested under an unknown key", body: `{"x":` + deep + `}`, code: CodeUnknownField, field: "x"},
		{name: "array body", body: `[{"tier":"X"}]`, code: CodeInvalidRequest},
		{name: "string body", body: `"tier"`, code: CodeInvalidRequest},
		{name: "null body", body: `null`, code: CodeInvalidRequest},
		{name: "number body", body: `1`, code: CodeInvalidRequest},
		{name: "trailing object", body: `{"tier":"X"}{"tier":"Y"}`, code: CodeInvalidRequest},
		{name: "trailing garbage", body: `{"tier":"X"} x`, code: CodeInvalidRequest},
		{name: "unclosed", body: `{"tier":"X"`, code: CodeInvalidRequest},
		{name: "wrong type", body: `{"downgrade":"yes"}`, code: CodeInvalidRequest, field: "downgrade"},
		{name: "number too large", body: `{"downgrade":1e999999}`, code: CodeInvalidRequest, field: "downgrade"},
		{name: "invalid UTF-8 in a value", body: "{\"tier\":\"Lite\xff:v1\"}", code: CodeInvalidRequest},
		{name: "invalid UTF-8 in a key", body: "{\"tier\xff\":\"Lite:v1\"}", code: CodeInvalidRequest},
		{name: "byte order mark", body: "\xef\xbb\xbf{\"tier\":\"Lite:v1\"}", code: CodeInvalidRequest},
		{name: "empty", body: ``, code: CodeInvalidRequest},
		{name: "blank", body: " \n", code: CodeInvalidRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got TierRequest
			r := httptest.NewRequest("POST", "/u/subscriptions/s/tier", strings.NewReader(tc.body))
			err := decodeBody(r, &got, true)
			if tc.code == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if got.Tier != tc.want.Tier || got.Downgrade != tc.want.Downgrade || (got.Amount == nil) != (tc.want.Amount == nil) ||
					(got.Amount != nil && *got.Amount != *tc.want.Amount) {
					t.Errorf("decoded %+v, want %+v", got, tc.want)
				}
				return
			}
			var ae *apiError
			if !errors.As(err, &ae) {
				t.Fatalf("error %v, want an apiError", err)
			}
			if ae.status != 400 || ae.code != tc.code || ae.field != tc.field {
				t.Errorf("= %d %s field %q, want 400 %s field %q", ae.status, ae.code, ae.field, tc.code, tc.field)
			}
			if strings.Contains(ae.message, "json:") || strings.Contains(ae.message, "<script>") || len(ae.message) > 120 {
				t.Errorf("message %q carries the decoder's or the client's text", ae.message)
			}
		})
	}
}

// TestDecodeEmpty: the routes without parameters take nothing, {} or a
// blank body, and refuse any key.
func TestDecodeEmpty(t *testing.T) {
	for body, ok := range map[string]bool{``: true, `{}`: true, " { } ": true, `{"force":true}`: false, `[]`: false, `null`: false, `{}{}`: false} {
		r := httptest.NewRequest("POST", "/u/subscriptions/s/cancel", strings.NewReader(body))
		if err := decodeEmpty(r); (err == nil) != ok {
			t.Errorf("decodeEmpty(%q) = %v, want ok=%v", body, err, ok)
		}
	}
}

func ptr[T any](v T) *T { return &v }
