// Package av is the stores' SDK-free model of a DynamoDB attribute value.
// Its names and shapes mirror aws-sdk-go-v2's service/dynamodb/types
// (AttributeValue and its AttributeValueMember… variants with a Value
// field of the same type), so the item codecs shared by the DynamoDB store
// and the in-memory store are written once, and the in-memory store, the
// embedded default, links no AWS package. The DynamoDB store converts at
// its SDK calls (internal/sdkav).
package av

// AttributeValue is one attribute value: exactly one of the
// AttributeValueMember… types below, always by pointer, as the SDK's.
type AttributeValue interface {
	isAttributeValue()
}

// AttributeValueMemberS is a String.
type AttributeValueMemberS struct{ Value string }

// AttributeValueMemberN is a Number, in its decimal string form.
type AttributeValueMemberN struct{ Value string }

// AttributeValueMemberB is a Binary.
type AttributeValueMemberB struct{ Value []byte }

// AttributeValueMemberBOOL is a Boolean.
type AttributeValueMemberBOOL struct{ Value bool }

// AttributeValueMemberNULL is a Null; Value is true on the wire.
type AttributeValueMemberNULL struct{ Value bool }

// AttributeValueMemberM is a Map.
type AttributeValueMemberM struct{ Value map[string]AttributeValue }

// AttributeValueMemberL is a List.
type AttributeValueMemberL struct{ Value []AttributeValue }

// AttributeValueMemberSS is a String Set.
type AttributeValueMemberSS struct{ Value []string }

// AttributeValueMemberNS is a Number Set.
type AttributeValueMemberNS struct{ Value []string }

// AttributeValueMemberBS is a Binary Set.
type AttributeValueMemberBS struct{ Value [][]byte }

func (*AttributeValueMemberS) isAttributeValue()    {}
func (*AttributeValueMemberN) isAttributeValue()    {}
func (*AttributeValueMemberB) isAttributeValue()    {}
func (*AttributeValueMemberBOOL) isAttributeValue() {}
func (*AttributeValueMemberNULL) isAttributeValue() {}
func (*AttributeValueMemberM) isAttributeValue()    {}
func (*AttributeValueMemberL) isAttributeValue()    {}
func (*AttributeValueMemberSS) isAttributeValue()   {}
func (*AttributeValueMemberNS) isAttributeValue()   {}
func (*AttributeValueMemberBS) isAttributeValue()   {}
