package dynamostore

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/dynabill/billing"
)

// convertStreamItem converts an item of the DynamoDB Streams API into the
// dynamodb types the item codecs read; nil stays nil. A value of a member
// this library does not know (a newer API's), or a nil value, is an error
// naming the attribute.
func convertStreamItem(item map[string]streamtypes.AttributeValue) (map[string]types.AttributeValue, error) {
	if item == nil {
		return nil, nil
	}
	out := make(map[string]types.AttributeValue, len(item))
	for name, av := range item {
		v, err := convertStreamValue(av)
		if err != nil {
			return nil, fmt.Errorf("attribute %q: %w", name, err)
		}
		out[name] = v
	}
	return out, nil
}

// convertStreamValue converts one attribute value, recursively.
func convertStreamValue(av streamtypes.AttributeValue) (types.AttributeValue, error) {
	switch v := av.(type) {
	case *streamtypes.AttributeValueMemberS:
		return &types.AttributeValueMemberS{Value: v.Value}, nil
	case *streamtypes.AttributeValueMemberN:
		return &types.AttributeValueMemberN{Value: v.Value}, nil
	case *streamtypes.AttributeValueMemberB:
		return &types.AttributeValueMemberB{Value: v.Value}, nil
	case *streamtypes.AttributeValueMemberSS:
		return &types.AttributeValueMemberSS{Value: v.Value}, nil
	case *streamtypes.AttributeValueMemberNS:
		return &types.AttributeValueMemberNS{Value: v.Value}, nil
	case *streamtypes.AttributeValueMemberBS:
		return &types.AttributeValueMemberBS{Value: v.Value}, nil
	case *streamtypes.AttributeValueMemberM:
		m, err := convertStreamItem(v.Value)
		if err != nil {
			return nil, err
		}
		if m == nil {
			m = map[string]types.AttributeValue{}
		}
		return &types.AttributeValueMemberM{Value: m}, nil
	case *streamtypes.AttributeValueMemberL:
		l := make([]types.AttributeValue, len(v.Value))
		for i, e := range v.Value {
			c, err := convertStreamValue(e)
			if err != nil {
				return nil, fmt.Errorf("element %d: %w", i, err)
			}
			l[i] = c
		}
		return &types.AttributeValueMemberL{Value: l}, nil
	case *streamtypes.AttributeValueMemberNULL:
		return &types.AttributeValueMemberNULL{Value: v.Value}, nil
	case *streamtypes.AttributeValueMemberBOOL:
		return &types.AttributeValueMemberBOOL{Value: v.Value}, nil
	case nil:
		return nil, fmt.Errorf("%w: nil attribute value", billing.ErrInvalidItem)
	}
	return nil, fmt.Errorf("%w: unknown attribute value type %T", billing.ErrInvalidItem, av)
}
