// Package sdkav converts between the stores' SDK-free attribute values
// (internal/av), which the item codecs read and write, and aws-sdk-go-v2's
// (service/dynamodb/types), which the DynamoDB client sends and returns.
// Only the DynamoDB side (dynamostore and tests against DynamoDB) imports
// it, so the in-memory store links no AWS package.
//
// Every conversion is deep, copies nothing it does not have to (strings
// and byte slices are shared, maps and lists are rebuilt), and maps nil to
// nil.
package sdkav

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing/internal/av"
)

// ToSDK converts an item to the SDK's form.
func ToSDK(item map[string]av.AttributeValue) map[string]types.AttributeValue {
	if item == nil {
		return nil
	}
	out := make(map[string]types.AttributeValue, len(item))
	for k, v := range item {
		out[k] = ToSDKValue(v)
	}
	return out
}

// FromSDK converts an item from the SDK's form.
func FromSDK(item map[string]types.AttributeValue) map[string]av.AttributeValue {
	if item == nil {
		return nil
	}
	out := make(map[string]av.AttributeValue, len(item))
	for k, v := range item {
		out[k] = FromSDKValue(v)
	}
	return out
}

// ToSDKItems converts a slice of items with [ToSDK].
func ToSDKItems(items []map[string]av.AttributeValue) []map[string]types.AttributeValue {
	if items == nil {
		return nil
	}
	out := make([]map[string]types.AttributeValue, len(items))
	for i, it := range items {
		out[i] = ToSDK(it)
	}
	return out
}

// FromSDKItems converts a slice of items with [FromSDK].
func FromSDKItems(items []map[string]types.AttributeValue) []map[string]av.AttributeValue {
	if items == nil {
		return nil
	}
	out := make([]map[string]av.AttributeValue, len(items))
	for i, it := range items {
		out[i] = FromSDK(it)
	}
	return out
}

// ToSDKValue converts one value to the SDK's form; nil stays nil. It
// panics on a type outside av's, which only a programming error makes.
func ToSDKValue(v av.AttributeValue) types.AttributeValue {
	switch v := v.(type) {
	case nil:
		return nil
	case *av.AttributeValueMemberS:
		return &types.AttributeValueMemberS{Value: v.Value}
	case *av.AttributeValueMemberN:
		return &types.AttributeValueMemberN{Value: v.Value}
	case *av.AttributeValueMemberB:
		return &types.AttributeValueMemberB{Value: v.Value}
	case *av.AttributeValueMemberBOOL:
		return &types.AttributeValueMemberBOOL{Value: v.Value}
	case *av.AttributeValueMemberNULL:
		return &types.AttributeValueMemberNULL{Value: v.Value}
	case *av.AttributeValueMemberSS:
		return &types.AttributeValueMemberSS{Value: v.Value}
	case *av.AttributeValueMemberNS:
		return &types.AttributeValueMemberNS{Value: v.Value}
	case *av.AttributeValueMemberBS:
		return &types.AttributeValueMemberBS{Value: v.Value}
	case *av.AttributeValueMemberM:
		return &types.AttributeValueMemberM{Value: ToSDK(v.Value)}
	case *av.AttributeValueMemberL:
		var l []types.AttributeValue
		if v.Value != nil {
			l = make([]types.AttributeValue, len(v.Value))
			for i, e := range v.Value {
				l[i] = ToSDKValue(e)
			}
		}
		return &types.AttributeValueMemberL{Value: l}
	}
	panic(fmt.Sprintf("sdkav: unknown attribute value %T", v))
}

// FromSDKValue converts one value from the SDK's form; nil stays nil. A
// type the SDK adds later (its UnknownUnionMember included) panics: the
// codecs could not read it anyway.
func FromSDKValue(v types.AttributeValue) av.AttributeValue {
	switch v := v.(type) {
	case nil:
		return nil
	case *types.AttributeValueMemberS:
		return &av.AttributeValueMemberS{Value: v.Value}
	case *types.AttributeValueMemberN:
		return &av.AttributeValueMemberN{Value: v.Value}
	case *types.AttributeValueMemberB:
		return &av.AttributeValueMemberB{Value: v.Value}
	case *types.AttributeValueMemberBOOL:
		return &av.AttributeValueMemberBOOL{Value: v.Value}
	case *types.AttributeValueMemberNULL:
		return &av.AttributeValueMemberNULL{Value: v.Value}
	case *types.AttributeValueMemberSS:
		return &av.AttributeValueMemberSS{Value: v.Value}
	case *types.AttributeValueMemberNS:
		return &av.AttributeValueMemberNS{Value: v.Value}
	case *types.AttributeValueMemberBS:
		return &av.AttributeValueMemberBS{Value: v.Value}
	case *types.AttributeValueMemberM:
		return &av.AttributeValueMemberM{Value: FromSDK(v.Value)}
	case *types.AttributeValueMemberL:
		var l []av.AttributeValue
		if v.Value != nil {
			l = make([]av.AttributeValue, len(v.Value))
			for i, e := range v.Value {
				l[i] = FromSDKValue(e)
			}
		}
		return &av.AttributeValueMemberL{Value: l}
	}
	panic(fmt.Sprintf("sdkav: unknown attribute value %T", v))
}
