package layout

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/dynabill/billing/internal/av"
)

// marshalTagged encodes a flat struct of string and int fields tagged
// `dynamodbav:"Name[,omitempty]"` as attributevalue.MarshalMap does: a
// string is an S (empty included), an int an N in base 10, and omitempty
// leaves out "" and 0. The payments layout's items are written with it so
// that the codecs need no AWS package; a test in internal/sdkav holds it
// to attributevalue's output.
func marshalTagged(v any) (map[string]av.AttributeValue, error) {
	rv := reflect.ValueOf(v)
	rt := rv.Type()
	if rt.Kind() != reflect.Struct {
		return nil, fmt.Errorf("layout: marshalTagged: %T is not a struct", v)
	}
	item := make(map[string]av.AttributeValue, rt.NumField())
	for i := range rt.NumField() {
		tag, ok := rt.Field(i).Tag.Lookup("dynamodbav")
		if !ok || tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = rt.Field(i).Name
		}
		f := rv.Field(i)
		if opts == "omitempty" && f.IsZero() {
			continue
		}
		switch f.Kind() {
		case reflect.String:
			item[name] = &av.AttributeValueMemberS{Value: f.String()}
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			item[name] = &av.AttributeValueMemberN{Value: strconv.FormatInt(f.Int(), 10)}
		default:
			return nil, fmt.Errorf("layout: marshalTagged: field %s: unsupported kind %s", rt.Field(i).Name, f.Kind())
		}
	}
	return item, nil
}
