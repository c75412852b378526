package layout

import (
	"strconv"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ItemInFlight reports whether a stored record's item carries an attempt
// whose outcome is not recorded ([billing.Subscription.InFlight]): an
// attempt number above the attempt count. It reads the two numbers
// only, so it answers for items that do not decode too.
func ItemInFlight(item map[string]types.AttributeValue) bool {
	num := func(name string) int {
		if v, ok := item[name].(*types.AttributeValueMemberN); ok {
			n, _ := strconv.Atoi(v.Value)
			return n
		}
		return 0
	}
	return num(AttrAttemptNumber) > num(AttrAttempt)
}
