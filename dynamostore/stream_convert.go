package dynamostore

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/dynabill/billing"
)

// convertStreamItem converts an item of the DynamoDB Streams API into the
// dynamodb types the item codecs read, with the SDK's converter. A nil item
// stays nil (the SDK would return an empty map), so a record without a new
// image is still told apart from one with an empty image. A nil value or a
// member this SDK does not know (a newer API's), at any depth, is an error
// wrapping [billing.ErrInvalidItem], so the record is reported, never
// dropped.
func convertStreamItem(item map[string]streamtypes.AttributeValue) (map[string]types.AttributeValue, error) {
	if item == nil {
		return nil, nil
	}
	out, err := attributevalue.FromDynamoDBStreamsMap(item)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", billing.ErrInvalidItem, err)
	}
	return out, nil
}
