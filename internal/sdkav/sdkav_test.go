package sdkav

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing/internal/av"
	"github.com/stretchr/testify/require"
)

// TestRoundTrip: every kind of value, nested, converts to the SDK's form
// and back unchanged, and nil stays nil at every level.
func TestRoundTrip(t *testing.T) {
	item := map[string]av.AttributeValue{
		"s": &av.AttributeValueMemberS{Value: "x"}, "empty": &av.AttributeValueMemberS{},
		"n": &av.AttributeValueMemberN{Value: "4.99"}, "b": &av.AttributeValueMemberB{Value: []byte{1, 2}},
		"t": &av.AttributeValueMemberBOOL{Value: true}, "null": &av.AttributeValueMemberNULL{Value: true},
		"ss": &av.AttributeValueMemberSS{Value: []string{"a", "b"}}, "ns": &av.AttributeValueMemberNS{Value: []string{"1"}},
		"bs": &av.AttributeValueMemberBS{Value: [][]byte{{3}}},
		"l":  &av.AttributeValueMemberL{Value: []av.AttributeValue{&av.AttributeValueMemberS{Value: "e"}, &av.AttributeValueMemberM{Value: map[string]av.AttributeValue{}}}},
		"m":  &av.AttributeValueMemberM{Value: map[string]av.AttributeValue{"k": &av.AttributeValueMemberN{Value: "1"}}},
		"el": &av.AttributeValueMemberL{Value: []av.AttributeValue{}}, "nl": &av.AttributeValueMemberL{},
	}
	sdk := ToSDK(item)
	require.Equal(t, &types.AttributeValueMemberN{Value: "4.99"}, sdk["n"])
	require.Equal(t, &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k": &types.AttributeValueMemberN{Value: "1"}}}, sdk["m"])
	require.Equal(t, item, FromSDK(sdk))
	require.Equal(t, []map[string]av.AttributeValue{item, nil}, FromSDKItems(ToSDKItems([]map[string]av.AttributeValue{item, nil})))

	require.Nil(t, ToSDK(nil))
	require.Nil(t, FromSDK(nil))
	require.Nil(t, ToSDKItems(nil))
	require.Nil(t, FromSDKItems(nil))
	require.Nil(t, ToSDKValue(nil))
	require.Nil(t, FromSDKValue(nil))
	require.Panics(t, func() { FromSDKValue(&types.UnknownUnionMember{Tag: "X"}) })
}
