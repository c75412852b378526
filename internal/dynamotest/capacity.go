package dynamotest

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Capacity is computed from item sizes because moto reports a constant
// ConsumedCapacity; the rules and approximations are in the package
// documentation.
const (
	kib = 1024
	// MaxItemSize is DynamoDB's item size limit (400 KB).
	MaxItemSize = 400 * kib
	// MaxPageSize is the size of data a Query or Scan page may hold (1 MB).
	MaxPageSize = 1024 * kib
	// maxTransactSize bounds the aggregate size of a TransactWriteItems (4 MB).
	maxTransactSize = 4 * 1024 * kib
)

// ItemSize returns the size of an item as DynamoDB counts it: for each
// attribute the length of its name plus the size of its value. Values: S and
// B their length in bytes; N about one byte per two significant digits plus
// one; BOOL and NULL 1; L and M 3 plus, per element, 1 plus the element (and,
// for M, the length of its name); SS, NS and BS the sum of their elements.
func ItemSize(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return numberSize(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += 1 + len(k) + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberSS:
		n := 0
		for _, e := range v.Value {
			n += len(e)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, e := range v.Value {
			n += numberSize(e)
		}
		return n
	case *types.AttributeValueMemberBS:
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

// WriteUnits is the WCU cost of writing size bytes outside a transaction.
func WriteUnits(size int) float64 {
	return float64(max(1, (size+kib-1)/kib))
}

// ReadUnits is the RCU cost of reading size bytes outside a transaction.
func ReadUnits(size int, consistent bool) float64 {
	u := float64(max(1, (size+4*kib-1)/(4*kib)))
	if !consistent {
		u /= 2
	}
	return u
}

// updateSize estimates the size an UpdateItem writes: see the package notes.
func updateSize(key, values map[string]types.AttributeValue, names map[string]string) int {
	n := ItemSize(key)
	for _, v := range values {
		n += valueSize(v)
	}
	for _, name := range names {
		n += len(name)
	}
	return n
}

func pageSize(items []map[string]types.AttributeValue) int {
	n := 0
	for _, it := range items {
		n += ItemSize(it)
	}
	return n
}
