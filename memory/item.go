package memory

import "github.com/dynabill/billing/internal/av"

// Raw items, as [Store.PutRawItem] and [SingleTable.PutRawItem] take them,
// are maps of attribute names to these values: the same shapes and names
// as aws-sdk-go-v2's service/dynamodb/types (an AttributeValue is one of
// the AttributeValueMember… types, by pointer, each with a Value field of
// the same type), defined without the SDK so that this package links no
// AWS code. A test that has an SDK item rewrites types.X as memory.X.

// AttributeValue is one attribute value of a raw item.
type AttributeValue = av.AttributeValue

// The kinds of attribute value.
type (
	AttributeValueMemberS    = av.AttributeValueMemberS    // String
	AttributeValueMemberN    = av.AttributeValueMemberN    // Number, as its decimal text
	AttributeValueMemberB    = av.AttributeValueMemberB    // Binary
	AttributeValueMemberBOOL = av.AttributeValueMemberBOOL // Boolean
	AttributeValueMemberNULL = av.AttributeValueMemberNULL // Null (Value true)
	AttributeValueMemberM    = av.AttributeValueMemberM    // Map
	AttributeValueMemberL    = av.AttributeValueMemberL    // List
	AttributeValueMemberSS   = av.AttributeValueMemberSS   // String Set
	AttributeValueMemberNS   = av.AttributeValueMemberNS   // Number Set
	AttributeValueMemberBS   = av.AttributeValueMemberBS   // Binary Set
)
