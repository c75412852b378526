package layout

import (
	"math/bits"

	av "github.com/dynabill/billing/internal/av"
)

// Row is a history row kept without a map of its own: the values of its
// known attributes in attribute order, and its Extra, data_, change and
// request attributes. A store that keeps history rows, which are written
// once and seldom read, keeps them as Rows and builds the item ([Row.Item])
// when one is read. A Row never changes.
type Row struct {
	set             attrSet
	vals            []av.AttributeValue // of the attributes in set, in order
	extra, data     map[string]av.AttributeValue
	change, request av.AttributeValue // nil for none
}

// HistoryRow is [Flat.Item](true, clone) kept as a Row.
func (f *Flat) HistoryRow(clone func(av.AttributeValue) av.AttributeValue) *Row {
	var vals [numAttrs]av.AttributeValue
	spare := f.values(allAttrs, &vals, 2)
	return f.row(&vals, spare, clone, nil)
}

// ItemAndRow builds both items of a record encoded with its data_
// attributes, sharing their values: the primary item (its attributes but
// the history-only ones, with room for at least room attributes) and the
// history row (Item(true, clone)) kept as a Row.
func (f *Flat) ItemAndRow(room int, clone func(av.AttributeValue) av.AttributeValue) (map[string]av.AttributeValue, *Row) {
	item := make(map[string]av.AttributeValue, max(f.Len(false), room))
	var vals [numAttrs]av.AttributeValue
	spare := f.values(allAttrs, &vals, 2)
	for a := range numAttrs {
		if v := vals[a]; v != nil {
			item[attrNames[a]] = v
		}
	}
	return item, f.row(&vals, spare, clone, item)
}

// row builds f's history row from its known values; the Extra values it
// clones are put in item too, when not nil and not history-only.
func (f *Flat) row(vals *[numAttrs]av.AttributeValue, spare []av.AttributeValueMemberS, clone func(av.AttributeValue) av.AttributeValue, item map[string]av.AttributeValue) *Row {
	if clone == nil {
		clone = func(v av.AttributeValue) av.AttributeValue { return v }
	}
	r := &Row{}
	n := 0
	for a := range numAttrs {
		if vals[a] != nil {
			r.set |= 1 << a
			n++
		}
	}
	r.vals = make([]av.AttributeValue, 0, n)
	for a := range numAttrs {
		if v := vals[a]; v != nil {
			r.vals = append(r.vals, v)
		}
	}
	if len(f.extra) > 0 {
		r.extra = make(map[string]av.AttributeValue, len(f.extra))
		for name, v := range f.extra {
			v = clone(v)
			r.extra[name] = v
			if item != nil && !HistoryOnly(name) {
				item[name] = v
			}
		}
	}
	if len(f.data) > 0 {
		r.data = make(map[string]av.AttributeValue, len(f.data))
		for name, v := range f.data {
			r.data[name] = clone(v)
		}
	}
	if f.change != "" {
		spare[0].Value = f.change
		r.change = &spare[0]
	}
	if f.request != "" {
		spare[1].Value = f.request
		r.request = &spare[1]
	}
	return r
}

// Len is the number of attributes of the row's item.
func (r *Row) Len() int {
	n := len(r.vals) + len(r.extra) + len(r.data)
	if r.change != nil {
		n++
	}
	if r.request != nil {
		n++
	}
	return n
}

// Item builds the row's item: a new map, sharing the row's values (which
// must not be changed).
func (r *Row) Item() map[string]av.AttributeValue {
	item := make(map[string]av.AttributeValue, r.Len())
	r.putKnown(item)
	for name, v := range r.extra {
		item[name] = v
	}
	for name, v := range r.data {
		item[name] = v
	}
	if r.change != nil {
		item[AttrChange] = r.change
	}
	if r.request != nil {
		item[AttrRequest] = r.request
	}
	return item
}

// Primary builds the primary item of the record whose history row r is:
// its attributes but the history-only ones, sharing their values, with
// room for at least room attributes.
func (r *Row) Primary(room int) map[string]av.AttributeValue {
	item := make(map[string]av.AttributeValue, max(len(r.vals)+len(r.extra), room))
	r.putKnown(item)
	for name, v := range r.extra {
		if !HistoryOnly(name) {
			item[name] = v
		}
	}
	return item
}

// putKnown puts the row's known attributes in item.
func (r *Row) putKnown(item map[string]av.AttributeValue) {
	i := 0
	for a := range numAttrs {
		if r.set&(1<<a) != 0 {
			item[attrNames[a]] = r.vals[i]
			i++
		}
	}
}

// known returns the value of known attribute a, if the row has it.
func (r *Row) known(a attr) (av.AttributeValue, bool) {
	if r == nil || r.set&(1<<a) == 0 {
		return nil, false
	}
	return r.vals[bits.OnesCount64(uint64(r.set&(1<<a-1)))], true
}

// String returns the S attribute called name, "" when the row lacks it or
// it is not a string (as a map's lookup would find it).
func (r *Row) String(name string) string {
	var v av.AttributeValue
	if a, ok := attrOf(name); ok {
		v, _ = r.known(a)
	} else {
		switch {
		case name == AttrChange:
			v = r.change
		case name == AttrRequest:
			v = r.request
		case r.extra[name] != nil:
			v = r.extra[name]
		default:
			v = r.data[name]
		}
	}
	if s, ok := v.(*av.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}
