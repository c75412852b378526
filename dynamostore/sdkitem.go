package dynamostore

import (
	"strconv"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/dynabill/billing/internal/sdkav"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing/internal/av"
)

// The item codecs (internal/layout) read and write SDK-free attribute
// values (internal/av) so that the in-memory store links no AWS package;
// this store converts with internal/sdkav where items cross to the client.
// These helpers build and read the SDK's values directly for keys,
// expression values and the attributes it reads off SDK items.

// stringAV is an S value.
func stringAV(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

// numberAV is an N value.
func numberAV(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// stringOf is the text of an S value in either form, "" for anything else.
func stringOf(v any) string {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return v.Value
	case *av.AttributeValueMemberS:
		return v.Value
	}
	return ""
}

// boolAV is a BOOL value.
func boolAV(b bool) types.AttributeValue { return &types.AttributeValueMemberBOOL{Value: b} }

// exprValue is expression.Value for every value this store puts in an
// expression: an SDK-free attribute value from the codecs is converted
// first, since the expression package would otherwise marshal its struct
// as a map.
func exprValue(v any) expression.ValueBuilder {
	if a, ok := v.(av.AttributeValue); ok {
		v = sdkav.ToSDKValue(a)
	}
	return expression.Value(v)
}
