// Package ddbjson reads and writes items in DynamoDB's JSON wire format
// ({"user_id": {"S": "u1"}, "billing_week": {"N": "2"}}), the form the AWS CLI
// prints and the test fixtures use.
package ddbjson

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/dynabill/billing/internal/av"
)

// maxDepth bounds nesting so hostile input cannot exhaust the stack.
const maxDepth = 32

// UnmarshalItem parses one item: a JSON object mapping attribute names to
// typed values. Each value must be an object with exactly one type key.
func UnmarshalItem(data []byte) (map[string]av.AttributeValue, error) {
	var raw map[string]json.RawMessage
	if err := strictDecode(data, &raw); err != nil {
		return nil, fmt.Errorf("ddbjson: item: %w", err)
	}
	if raw == nil {
		return nil, fmt.Errorf("ddbjson: item is null")
	}
	return decodeMap(raw, 0)
}

// MarshalItem writes an item as indented JSON with sorted attribute names.
func MarshalItem(item map[string]av.AttributeValue) ([]byte, error) {
	v, err := encodeMap(item)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func strictDecode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data")
	}
	return nil
}

func decodeMap(raw map[string]json.RawMessage, depth int) (map[string]av.AttributeValue, error) {
	out := make(map[string]av.AttributeValue, len(raw))
	for name, msg := range raw {
		attrVal, err := decodeValue(msg, depth+1)
		if err != nil {
			return nil, fmt.Errorf("attribute %q: %w", name, err)
		}
		out[name] = attrVal
	}
	return out, nil
}

func decodeValue(msg json.RawMessage, depth int) (av.AttributeValue, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("nested deeper than %d", maxDepth)
	}
	var typed map[string]json.RawMessage
	if err := strictDecode(msg, &typed); err != nil {
		return nil, err
	}
	if len(typed) != 1 {
		return nil, fmt.Errorf("want exactly one type key, got %d", len(typed))
	}
	for typ, body := range typed {
		switch typ {
		case "S":
			var s string
			if err := strictDecode(body, &s); err != nil {
				return nil, fmt.Errorf("S: %w", err)
			}
			return &av.AttributeValueMemberS{Value: s}, nil
		case "N":
			var s string
			if err := strictDecode(body, &s); err != nil {
				return nil, fmt.Errorf("N must be a string: %w", err)
			}
			return &av.AttributeValueMemberN{Value: s}, nil
		case "B":
			b, err := decodeBytes(body)
			if err != nil {
				return nil, fmt.Errorf("B: %w", err)
			}
			return &av.AttributeValueMemberB{Value: b}, nil
		case "BOOL":
			var b bool
			if err := strictDecode(body, &b); err != nil {
				return nil, fmt.Errorf("BOOL: %w", err)
			}
			return &av.AttributeValueMemberBOOL{Value: b}, nil
		case "NULL":
			var b bool
			if err := strictDecode(body, &b); err != nil || !b {
				return nil, fmt.Errorf("NULL must be true")
			}
			return &av.AttributeValueMemberNULL{Value: true}, nil
		case "SS", "NS":
			var ss []string
			if err := strictDecode(body, &ss); err != nil {
				return nil, fmt.Errorf("%s: %w", typ, err)
			}
			if typ == "SS" {
				return &av.AttributeValueMemberSS{Value: ss}, nil
			}
			return &av.AttributeValueMemberNS{Value: ss}, nil
		case "BS":
			var parts []json.RawMessage
			if err := strictDecode(body, &parts); err != nil {
				return nil, fmt.Errorf("BS: %w", err)
			}
			bs := make([][]byte, 0, len(parts))
			for _, p := range parts {
				b, err := decodeBytes(p)
				if err != nil {
					return nil, fmt.Errorf("BS: %w", err)
				}
				bs = append(bs, b)
			}
			return &av.AttributeValueMemberBS{Value: bs}, nil
		case "L":
			var parts []json.RawMessage
			if err := strictDecode(body, &parts); err != nil {
				return nil, fmt.Errorf("L: %w", err)
			}
			l := make([]av.AttributeValue, 0, len(parts))
			for i, p := range parts {
				attrVal, err := decodeValue(p, depth+1)
				if err != nil {
					return nil, fmt.Errorf("L[%d]: %w", i, err)
				}
				l = append(l, attrVal)
			}
			return &av.AttributeValueMemberL{Value: l}, nil
		case "M":
			var m map[string]json.RawMessage
			if err := strictDecode(body, &m); err != nil {
				return nil, fmt.Errorf("M: %w", err)
			}
			mm, err := decodeMap(m, depth)
			if err != nil {
				return nil, fmt.Errorf("M: %w", err)
			}
			return &av.AttributeValueMemberM{Value: mm}, nil
		default:
			return nil, fmt.Errorf("unknown type key %q", typ)
		}
	}
	panic("unreachable")
}

func decodeBytes(body json.RawMessage) ([]byte, error) {
	var s string
	if err := strictDecode(body, &s); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(s)
}

func encodeMap(m map[string]av.AttributeValue) (map[string]any, error) {
	out := make(map[string]any, len(m))
	for k, v := range m {
		e, err := encodeValue(v)
		if err != nil {
			return nil, fmt.Errorf("attribute %q: %w", k, err)
		}
		out[k] = e
	}
	return out, nil
}

func encodeValue(attrVal av.AttributeValue) (map[string]any, error) {
	switch v := attrVal.(type) {
	case *av.AttributeValueMemberS:
		return map[string]any{"S": v.Value}, nil
	case *av.AttributeValueMemberN:
		return map[string]any{"N": v.Value}, nil
	case *av.AttributeValueMemberB:
		return map[string]any{"B": base64.StdEncoding.EncodeToString(v.Value)}, nil
	case *av.AttributeValueMemberBOOL:
		return map[string]any{"BOOL": v.Value}, nil
	case *av.AttributeValueMemberNULL:
		return map[string]any{"NULL": true}, nil
	case *av.AttributeValueMemberSS:
		return map[string]any{"SS": nonNil(v.Value)}, nil
	case *av.AttributeValueMemberNS:
		return map[string]any{"NS": nonNil(v.Value)}, nil
	case *av.AttributeValueMemberBS:
		bs := make([]string, len(v.Value))
		for i, b := range v.Value {
			bs[i] = base64.StdEncoding.EncodeToString(b)
		}
		return map[string]any{"BS": bs}, nil
	case *av.AttributeValueMemberL:
		l := make([]any, len(v.Value))
		for i, e := range v.Value {
			x, err := encodeValue(e)
			if err != nil {
				return nil, err
			}
			l[i] = x
		}
		return map[string]any{"L": l}, nil
	case *av.AttributeValueMemberM:
		m, err := encodeMap(v.Value)
		if err != nil {
			return nil, err
		}
		return map[string]any{"M": m}, nil
	}
	return nil, fmt.Errorf("unsupported attribute value %T", attrVal)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// SortedNames returns the attribute names of item in order; handy for stable
// diffs in tests.
func SortedNames(item map[string]av.AttributeValue) []string {
	names := make([]string, 0, len(item))
	for k := range item {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}
