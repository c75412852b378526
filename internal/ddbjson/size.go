package ddbjson

import (
	"strings"

	"github.com/dynabill/billing/internal/av"
)

// ItemSize returns the size of an item as DynamoDB counts it: for each
// attribute the length of its name plus the size of its value. Values: S and
// B their length in bytes; N about one byte per two significant digits plus
// one; BOOL and NULL 1; L and M 3 plus, per element, 1 plus the element (and,
// for M, the length of its name); SS, NS and BS the sum of their elements.
func ItemSize(item map[string]av.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name) + ValueSize(v)
	}
	return n
}

// ValueSize is the size of an attribute value as [ItemSize] counts it.
func ValueSize(v av.AttributeValue) int {
	switch v := v.(type) {
	case *av.AttributeValueMemberS:
		return len(v.Value)
	case *av.AttributeValueMemberN:
		return numberSize(v.Value)
	case *av.AttributeValueMemberB:
		return len(v.Value)
	case *av.AttributeValueMemberBOOL, *av.AttributeValueMemberNULL:
		return 1
	case *av.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + ValueSize(e)
		}
		return n
	case *av.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += 1 + len(k) + ValueSize(e)
		}
		return n
	case *av.AttributeValueMemberSS:
		n := 0
		for _, e := range v.Value {
			n += len(e)
		}
		return n
	case *av.AttributeValueMemberNS:
		n := 0
		for _, e := range v.Value {
			n += numberSize(e)
		}
		return n
	case *av.AttributeValueMemberBS:
		n := 0
		for _, e := range v.Value {
			n += len(e)
		}
		return n
	}
	return 0
}

// numberSize is (significant digits + 1) / 2 + 1: sign, exponent, decimal
// point and leading and trailing zeros do not count.
func numberSize(s string) int {
	s = strings.TrimLeft(s, "+-")
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		s = s[:i]
	}
	digits := strings.Trim(strings.Replace(s, ".", "", 1), "0")
	return (len(digits)+1)/2 + 1
}
