// Package enum is the one shape of the library's string enums (billing
// statuses, terms and processes; entitlement tiers, provider statuses and
// pass types): a fixed, ordered set of values built once, with membership,
// position and parsing. The exported types keep their own methods and doc
// comments; this package only holds the code they would otherwise repeat.
package enum

import (
	"slices"
	"strings"
)

// Set is an ordered set of the values of a string enum. Build it once with
// [New], in a package-level variable; it is never changed afterwards, so it
// is safe for concurrent use.
type Set[T ~string] struct {
	values []T
	index  map[T]int
}

// New returns the set of values, in the order given. A value given twice is
// a programming error and panics.
func New[T ~string](values ...T) *Set[T] {
	s := &Set[T]{values: slices.Clone(values), index: make(map[T]int, len(values))}
	for i, v := range values {
		if _, dup := s.index[v]; dup {
			panic("enum: duplicate value " + string(v))
		}
		s.index[v] = i
	}
	return s
}

// Values returns every value in order, as a new slice the caller may change.
func (s *Set[T]) Values() []T { return slices.Clone(s.values) }

// Valid reports whether v is one of the values, exactly as spelled.
func (s *Set[T]) Valid(v T) bool {
	_, ok := s.index[v]
	return ok
}

// Index returns the position of v in the order given to [New], or -1 when
// v is not one of the values.
func (s *Set[T]) Index(v T) int {
	if i, ok := s.index[v]; ok {
		return i
	}
	return -1
}

// Parse returns the value raw names. normalize, when not nil, maps raw to
// the canonical spelling first (see [TrimUpperASCII]). When the result is
// not one of the values, Parse returns the zero value and invalid(raw):
// the error names the value exactly as it was given.
func (s *Set[T]) Parse(raw string, normalize func(string) string, invalid func(raw string) error) (T, error) {
	v := raw
	if normalize != nil {
		v = normalize(v)
	}
	if t := T(v); s.Valid(t) {
		return t, nil
	}
	var zero T
	return zero, invalid(raw)
}

// TrimUpperASCII removes surrounding white space and upper-cases ASCII
// letters only: Unicode case mapping would let look-alikes such as "ſage"
// (long s) parse as "SAGE".
func TrimUpperASCII(s string) string {
	return strings.Map(func(r rune) rune {
		if 'a' <= r && r <= 'z' {
			return r - 'a' + 'A'
		}
		return r
	}, strings.TrimSpace(s))
}
