package layout

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/av"
	"github.com/dynabill/billing/internal/timefmt"
)

// itemReader decodes attributes of one stored item, remembering the first
// error as a [*billing.FieldError] naming the attribute and the item's key.
// It is the one hand-written decoder of the single-table entities, kept
// because attributevalue cannot do its two jobs: its type errors name
// neither the attribute nor the item, and existing items hold forms it
// would reject or misread (timestamps in any RFC 3339 form, "never" days,
// a missing attribute meaning a default). Encoders use attributevalue
// struct tags where the items' form allows it.
type itemReader struct {
	item map[string]av.AttributeValue
	key  string
	err  error
}

func newItemReader(item map[string]av.AttributeValue) *itemReader {
	return &itemReader{item: item, key: "PK=" + StringOf(item[AttrPK]) + " SK=" + StringOf(item[AttrSK])}
}

func (r *itemReader) fail(attr, value string, err error) {
	if r.err == nil {
		r.err = &billing.FieldError{Field: attr, Value: value, Key: r.key, Err: err}
	}
}

// str returns a string attribute, "" when absent.
func (r *itemReader) str(attr string) string {
	v, ok := r.item[attr]
	if !ok {
		return ""
	}
	s, ok := v.(*av.AttributeValueMemberS)
	if !ok {
		r.fail(attr, fmt.Sprintf("%T", v), fmt.Errorf("%w: not a string", billing.ErrInvalidItem))
		return ""
	}
	return s.Value
}

// required returns a string attribute that must be present and non-empty.
func (r *itemReader) required(attr string) string {
	s := r.str(attr)
	if s == "" && r.err == nil {
		r.fail(attr, "", fmt.Errorf("%w: missing", billing.ErrInvalidItem))
	}
	return s
}

// timestamp returns a timestamp attribute (any RFC3339 form), zero when absent.
func (r *itemReader) timestamp(attr string) time.Time {
	s := r.str(attr)
	if s == "" {
		return time.Time{}
	}
	t, err := timefmt.Parse(s)
	if err != nil {
		r.fail(attr, s, billing.ErrInvalidDate)
	}
	return t
}

// num returns an integer Number attribute, 0 when absent.
func (r *itemReader) num(attr string) int64 {
	v, ok := r.item[attr]
	if !ok {
		return 0
	}
	n, ok := v.(*av.AttributeValueMemberN)
	if !ok {
		r.fail(attr, fmt.Sprintf("%T", v), fmt.Errorf("%w: not a number", billing.ErrInvalidItem))
		return 0
	}
	i, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		r.fail(attr, n.Value, fmt.Errorf("%w: not an integer", billing.ErrInvalidItem))
	}
	return i
}

// boolean returns a Boolean attribute, false when absent.
func (r *itemReader) boolean(attr string) bool {
	v, ok := r.item[attr]
	if !ok {
		return false
	}
	b, ok := v.(*av.AttributeValueMemberBOOL)
	if !ok {
		r.fail(attr, fmt.Sprintf("%T", v), fmt.Errorf("%w: not a boolean", billing.ErrInvalidItem))
		return false
	}
	return b.Value
}

// unix returns a Unix-seconds Number attribute as a time, zero when absent.
func (r *itemReader) unix(attr string) time.Time {
	if _, ok := r.item[attr]; !ok {
		return time.Time{}
	}
	return time.Unix(r.num(attr), 0).UTC()
}

// day reads a date attribute of a subscription, zero when absent or "never".
func (r *itemReader) day(attr string) time.Time {
	s := r.str(attr)
	if s == "" || s == payNever {
		return time.Time{}
	}
	t, err := time.Parse(PayDayLayout, s)
	if err != nil {
		r.fail(attr, s, billing.ErrInvalidDate)
	}
	return t
}

// accountID returns the account ID of a partition key of this layout.
func (c SingleTableConfig) accountID(r *itemReader) string {
	pk := r.required(AttrPK)
	id, ok := strings.CutPrefix(pk, c.AccountPrefix)
	if r.err == nil && (!ok || id == "") {
		r.fail(AttrPK, pk, fmt.Errorf("%w: not an account partition (prefix %q)", billing.ErrInvalidItem, c.AccountPrefix))
	}
	return id
}

// sortKey returns the required sort key and what follows prefix in it; ok
// reports whether it starts with prefix.
func (r *itemReader) sortKey(prefix string) (sk, rest string, ok bool) {
	sk = r.required(AttrSK)
	rest, ok = strings.CutPrefix(sk, prefix)
	return sk, rest, ok
}

// amount returns a required money attribute.
func (r *itemReader) amount(attr string) billing.Amount {
	s := r.required(attr)
	if r.err != nil {
		return 0
	}
	a, err := billing.ParseAmount(s)
	if err != nil {
		r.fail(attr, s, err)
	}
	return a
}

// readFields fills the tagged fields of the struct dst points to from the
// reader's item, in field order, so the first bad attribute is the one
// reported. A field's `item:"name,option"` tag names its attribute and its
// type picks the reader: string, int, int64, bool or time.Time (any RFC
// 3339 form). Options: "required" (a string that must be present and
// non-empty), "day" (a payment date; absent or "never" is the zero time),
// "account" (the account ID after the configured partition-key prefix) and
// "ttl" (Unix seconds in the configured TTL attribute, so the name is
// empty). Untagged fields are the decoder's to fill.
//
// The structs read this way are the entitlement types field for field with
// tags added, so a decoder converts the result instead of copying fields.
func (c SingleTableConfig) readFields(r *itemReader, dst any) {
	v := reflect.ValueOf(dst).Elem()
	t := v.Type()
	for i := range t.NumField() {
		tag, ok := t.Field(i).Tag.Lookup("item")
		if !ok {
			continue
		}
		name, opt, _ := strings.Cut(tag, ",")
		switch p := v.Field(i).Addr().Interface().(type) {
		case *string:
			switch opt {
			case "account":
				*p = c.accountID(r)
			case "required":
				*p = r.required(name)
			default:
				*p = r.str(name)
			}
		case *time.Time:
			switch opt {
			case "ttl":
				*p = r.unix(c.TTLAttribute)
			case "day":
				*p = r.day(name)
			default:
				*p = r.timestamp(name)
			}
		case *int:
			*p = int(r.num(name))
		case *int64:
			*p = r.num(name)
		case *bool:
			*p = r.boolean(name)
		default:
			panic(fmt.Sprintf("layout: no reader for %s.%s", t, t.Field(i).Name))
		}
	}
}

// readAs decodes item into T through F, T's fields with tags (see
// readFields), and returns the reader for the decoder's own checks.
func readAs[F, T any](c SingleTableConfig, item map[string]av.AttributeValue) (T, *itemReader) {
	var f F
	r := newItemReader(item)
	c.decodeDefaults().readFields(r, &f)
	return reflect.ValueOf(f).Convert(reflect.TypeFor[T]()).Interface().(T), r
}
