package dynamotest

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing/internal/sdkav"

	"github.com/dynabill/billing/internal/ddbjson"
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
		n += ddbjson.ValueSize(sdkav.FromSDKValue(v))
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

// ItemSize returns the size of an item as DynamoDB counts it (see
// [ddbjson.ItemSize], which the stores bound their transactions with).
func ItemSize(item map[string]types.AttributeValue) int { return ddbjson.ItemSize(sdkav.FromSDK(item)) }
