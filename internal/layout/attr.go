package layout

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func StringOf(v types.AttributeValue) string {
	if s, ok := v.(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

func StringAV(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
