package billinghttp

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// decodeBody decodes the request body, a single JSON object, into v.
// Unknown fields, trailing data and bodies over the limit (already set by
// http.MaxBytesReader) are refused. An empty body is an error when
// required and leaves v unchanged otherwise.
func decodeBody(r *http.Request, v any, required bool) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) && !required {
			return nil
		}
		return bodyError(err)
	}
	var extra json.RawMessage
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
		return nil
	case err == nil:
		return badRequest("", "unexpected data after the JSON object")
	default:
		if ae := bodyError(err); ae.status == http.StatusRequestEntityTooLarge {
			return ae
		}
		return badRequest("", "unexpected data after the JSON object")
	}
}

// decodeEmpty accepts an empty body or an empty JSON object: the body of
// the POST routes that take no parameters.
func decodeEmpty(r *http.Request) error {
	return decodeBody(r, &struct{}{}, false)
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
			message: fmt.Sprintf("%s must be %s, not a JSON %s", typeErr.Field, describeType(typeErr), typeErr.Value), cause: err}
	}
	// encoding/json reports unknown fields as `json: unknown field "name"`,
	// without an error type.
	if _, after, ok := strings.Cut(err.Error(), "unknown field "); ok {
		name, uerr := strconv.Unquote(after)
		if uerr != nil {
			name = ""
		}
		msg := "unknown field"
		if name != "" {
			msg = fmt.Sprintf("unknown field %q", name)
		}
		return &apiError{status: http.StatusBadRequest, code: CodeUnknownField, field: name, message: msg, cause: err}
	}
	return &apiError{status: http.StatusBadRequest, code: CodeInvalidRequest, message: "malformed JSON body", cause: err}
}

func describeType(e *json.UnmarshalTypeError) string {
	if e.Type == nil {
		return "of another type"
	}
	switch e.Type.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "an integer"
	case reflect.Bool:
		return "true or false"
	}
	return "of another type"
}

// parseDate parses a billing date: "2024-03-15" (midnight UTC) or RFC 3339
// ("2024-03-15T09:00:00Z", any offset). It is required.
func parseDate(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, badRequest(field, field+" is required")
	}
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		t, err = time.Parse(time.RFC3339, s)
	}
	if err != nil || t.IsZero() {
		return time.Time{}, badRequest(field, field+` must be a date "YYYY-MM-DD" or an RFC 3339 timestamp`)
	}
	return t.UTC(), nil
}
