package dynamostore

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing/internal/layout"
	"github.com/stretchr/testify/require"
)

// TestExprValueConvertsCodecValues: the codecs' values are not the SDK's,
// and expression.Value would take one for a struct and send a map in its
// place without a compile error. exprValue sends the SDK's value, and
// leaves SDK values and plain Go values as expression.Value takes them.
func TestExprValueConvertsCodecValues(t *testing.T) {
	cond := expression.Name("a").Equal(exprValue(layout.StringAV("x"))).
		And(expression.Name("b").Equal(exprValue(layout.NumberAV(7)))).
		And(expression.Name("c").Equal(exprValue(stringAV("y")))).
		And(expression.Name("d").Equal(exprValue("z")))
	expr, err := expression.NewBuilder().WithCondition(cond).Build()
	require.NoError(t, err)
	require.Equal(t, map[string]types.AttributeValue{
		":0": &types.AttributeValueMemberS{Value: "x"}, ":1": &types.AttributeValueMemberN{Value: "7"},
		":2": &types.AttributeValueMemberS{Value: "y"}, ":3": &types.AttributeValueMemberS{Value: "z"},
	}, expr.Values())
}

// TestNoBareExpressionValue: every value this store puts in an expression
// goes through exprValue, so a codec value can never be sent as a map.
func TestNoBareExpressionValue(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	for _, f := range files {
		if f == "sdkitem.go" || strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		require.NotContains(t, string(src), "expression.Value(", "%s: use exprValue", f)
	}
}
