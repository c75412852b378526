package ddbjson

import (
	"reflect"
	"testing"

	"github.com/dynabill/billing/internal/av"
)

func TestRoundTripEveryType(t *testing.T) {
	in := []byte(`{
	  "s": {"S": "x"}, "n": {"N": "1.5"}, "b": {"B": "AQI="}, "t": {"BOOL": true},
	  "z": {"NULL": true}, "ss": {"SS": ["a","b"]}, "ns": {"NS": ["1"]}, "bs": {"BS": ["AQ=="]},
	  "l": {"L": [{"S": "a"}, {"N": "2"}]}, "m": {"M": {"k": {"S": "v"}}}
	}`)
	item, err := UnmarshalItem(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(item) != 10 {
		t.Fatalf("got %d attributes", len(item))
	}
	if b := item["b"].(*av.AttributeValueMemberB).Value; !reflect.DeepEqual(b, []byte{1, 2}) {
		t.Errorf("B = %v", b)
	}
	out, err := MarshalItem(item)
	if err != nil {
		t.Fatal(err)
	}
	back, err := UnmarshalItem(out)
	if err != nil || !reflect.DeepEqual(item, back) {
		t.Fatalf("round trip: %v\n%s", err, out)
	}
}

func TestRejects(t *testing.T) {
	for _, in := range []string{
		``, `null`, `[]`, `{"a": {}}`, `{"a": {"S": "x", "N": "1"}}`, `{"a": {"X": "1"}}`,
		`{"a": {"N": 1}}`, `{"a": {"NULL": false}}`, `{"a": {"B": "!!"}}`, `{"a": {"S": "x"}} {}`,
		`{"a": {"L": [{"S": 1}]}}`,
	} {
		if _, err := UnmarshalItem([]byte(in)); err == nil {
			t.Errorf("accepted %q", in)
		}
	}
	deep := `{"a": ` + repeat(`{"L": [`, 40) + `{"S": "x"}` + repeat(`]}`, 40) + `}`
	if _, err := UnmarshalItem([]byte(deep)); err == nil {
		t.Error("accepted 40 levels of nesting")
	}
}

func repeat(s string, n int) string {
	out := ""
	for range n {
		out += s
	}
	return out
}

func FuzzUnmarshalItem(f *testing.F) {
	f.Add([]byte(`{"s": {"S": "x"}, "m": {"M": {"k": {"L": [{"N": "1"}]}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		item, err := UnmarshalItem(data)
		if err != nil {
			return
		}
		out, err := MarshalItem(item)
		if err != nil {
			t.Fatal(err)
		}
		back, err := UnmarshalItem(out)
		if err != nil || !reflect.DeepEqual(normalize(item), normalize(back)) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

// normalize maps nil sets to empty ones, which JSON cannot tell apart.
func normalize(m map[string]av.AttributeValue) map[string]av.AttributeValue {
	for k, v := range m {
		switch x := v.(type) {
		case *av.AttributeValueMemberSS:
			if x.Value == nil {
				m[k] = &av.AttributeValueMemberSS{Value: []string{}}
			}
		case *av.AttributeValueMemberNS:
			if x.Value == nil {
				m[k] = &av.AttributeValueMemberNS{Value: []string{}}
			}
		case *av.AttributeValueMemberBS:
			if x.Value == nil {
				m[k] = &av.AttributeValueMemberBS{Value: [][]byte{}}
			}
		case *av.AttributeValueMemberM:
			normalize(x.Value)
		}
	}
	return m
}
