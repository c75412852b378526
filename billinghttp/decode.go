package billinghttp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"
)

// decodeBody decodes the request body, a single flat JSON object, into v,
// a pointer to one of the request structs. It is strict, so that a gateway
// or log that reads the body sees what the handler sees:
//
//   - keys must be the struct's JSON names exactly (encoding/json would
//     match "AMOUNT" to "amount"); any other key is unknown_field;
//   - a key given twice is refused (encoding/json would keep the last);
//   - values are strings, numbers, booleans or null: an object or array
//     where a field's value belongs is refused, so nesting never goes
//     deeper than the body itself;
//   - nothing may follow the object, and the body is valid UTF-8.
//
// Bodies over the limit (already set by http.MaxBytesReader) are 413. An
// empty body is an error when required and leaves v unchanged otherwise.
func decodeBody(r *http.Request, v any, required bool) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return bodyError(err)
	}
	if !utf8.Valid(body) {
		// encoding/json would replace the bad bytes with U+FFFD: the
		// handler would act on a value the sender did not write.
		return badRequest("", "request body must be UTF-8")
	}
	if len(bytes.TrimLeft(body, " \t\r\n")) == 0 {
		if required {
			return bodyError(io.EOF)
		}
		return nil
	}
	if err := checkObject(body, jsonFields(v)); err != nil {
		return err
	}
	// checkObject let only the exact JSON names of v's fields through, so
	// the decoder meets no unknown field (it would match keys
	// case-insensitively, which checkObject already refused).
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(v); err != nil {
		return bodyError(err)
	}
	return nil
}

// checkObject walks body once, token by token, and checks that it is one
// JSON object whose keys are distinct names of fields, whose values are
// not objects or arrays, and after which nothing follows.
func checkObject(body []byte, fields map[string]reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // a number out of float64's range is the decoder's to refuse
	tok, err := dec.Token()
	if err != nil {
		return bodyError(err)
	}
	if tok != json.Delim('{') {
		return badRequest("", "request body must be a JSON object")
	}
	seen := make(map[string]bool, len(fields))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return bodyError(err)
		}
		key, _ := tok.(string) // a key is always a string here
		typ, known := fields[key]
		switch {
		case !known:
			return unknownField(key)
		case seen[key]:
			return badRequest(key, fmt.Sprintf("duplicate field %q", key))
		}
		seen[key] = true
		tok, err = dec.Token()
		if err != nil {
			return bodyError(err)
		}
		if _, nested := tok.(json.Delim); nested {
			return badRequest(key, fmt.Sprintf("%s must be %s, not a JSON object or array", key, describeType(typ)))
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return bodyError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return badRequest("", "unexpected data after the JSON object")
	}
	return nil
}

// jsonFields returns the JSON names of the fields of the struct v points
// to, with their types.
func jsonFields(v any) map[string]reflect.Type {
	t := reflect.TypeOf(v).Elem()
	out := make(map[string]reflect.Type, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// decodeEmpty accepts an empty body or an empty JSON object: the body of
// the POST routes that take no parameters.
func decodeEmpty(r *http.Request) error {
	return decodeBody(r, &struct{}{}, false)
}

// unknownField refuses a key the body type does not have. The key is sent
// back only when it is short and plain (letters, digits, '_', '-', '.'),
// so that a response never carries arbitrary client bytes.
func unknownField(key string) *apiError {
	ae := &apiError{status: http.StatusBadRequest, code: CodeUnknownField, message: "unknown field"}
	if plainName(key) {
		ae.field, ae.message = key, fmt.Sprintf("unknown field %q", key)
	}
	return ae
}

func plainName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-', c == '.':
		default:
			return false
		}
	}
	return true
}

// bodyError turns a JSON decoding error into its response, naming the
// field when the decoder knows it. The decoder's own text is not sent.
func bodyError(err error) *apiError {
	var (
		maxErr    *http.MaxBytesError
		syntaxErr *json.SyntaxError
		typeErr   *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &maxErr):
		return &apiError{status: http.StatusRequestEntityTooLarge, code: CodeTooLarge,
			message: fmt.Sprintf("request body is larger than %d bytes", maxErr.Limit), cause: err}
	case errors.Is(err, io.EOF):
		return &apiError{status: http.StatusBadRequest, code: CodeInvalidRequest, message: "request body required: a JSON object", cause: err}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &apiError{status: http.StatusBadRequest, code: CodeInvalidRequest, message: "malformed JSON: unexpected end of the body", cause: err}
	case errors.As(err, &syntaxErr):
		return &apiError{status: http.StatusBadRequest, code: CodeInvalidRequest,
			message: fmt.Sprintf("malformed JSON at byte %d", syntaxErr.Offset), cause: err}
	case errors.As(err, &typeErr):
		if typeErr.Field == "" {
			return &apiError{status: http.StatusBadRequest, code: CodeInvalidRequest, message: "request body must be a JSON object", cause: err}
		}
		return &apiError{status: http.StatusBadRequest, code: CodeInvalidRequest, field: typeErr.Field,
			message: fmt.Sprintf("%s must be %s, not a JSON %s", typeErr.Field, describeType(typeErr.Type), jsonKind(typeErr.Value)), cause: err}
	}
	return &apiError{status: http.StatusBadRequest, code: CodeInvalidRequest, message: "malformed JSON body", cause: err}
}

// describeType says what a value of a request field's type is, for an
// error message.
func describeType(t reflect.Type) string {
	if t == nil {
		return "of another type"
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "an integer"
	case reflect.Bool:
		return "true or false"
	}
	return "of another type"
}

// jsonKind names the kind of JSON value encoding/json reports in an
// UnmarshalTypeError ("string", "number", "number 2.5", "bool", …), without
// the value itself.
func jsonKind(v string) string {
	kind, _, _ := strings.Cut(v, " ")
	switch kind {
	case "string", "number", "bool", "array", "object":
		return kind
	}
	return "value of another type"
}

// parseDate parses a billing date, which is a calendar day: "2024-03-15"
// (midnight UTC), or an RFC 3339 timestamp in UTC ("2024-03-15T09:00:00Z"
// or "…+00:00"). It is required. A timestamp with any other offset is
// refused rather than converted, because converting moves the day
// ("2024-04-16T09:30:00+14:00" is the 15th in UTC), and the year 0 and
// the zero time are refused too.
func parseDate(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, badRequest(field, field+" is required")
	}
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		t, err = time.Parse(time.RFC3339, s)
		if err == nil && !strings.HasSuffix(s, "Z") && !strings.HasSuffix(s, "+00:00") {
			return time.Time{}, badRequest(field, field+` is a calendar day: give it as "YYYY-MM-DD", not as a time with an offset from UTC`)
		}
	}
	if err != nil || t.IsZero() || t.Year() < 1 {
		return time.Time{}, badRequest(field, field+` must be a date "YYYY-MM-DD" (or an RFC 3339 timestamp in UTC, ending in Z)`)
	}
	return t.UTC(), nil
}
