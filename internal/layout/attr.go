package layout

import (
	"github.com/dynabill/billing/internal/av"
)

func StringOf(v av.AttributeValue) string {
	if s, ok := v.(*av.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

func StringAV(v string) av.AttributeValue { return &av.AttributeValueMemberS{Value: v} }
