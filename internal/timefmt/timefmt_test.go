package timefmt

import (
	"errors"
	"math/rand/v2"
	"sort"
	"testing"
	"time"
)

func TestFormats(t *testing.T) {
	tm := time.Date(2024, 1, 31, 12, 0, 5, 500_000_000, time.FixedZone("X", 3600))
	if got, _ := Seconds(tm); got != "2024-01-31T11:00:05Z" {
		t.Errorf("Seconds = %q", got)
	}
	if got, _ := Nanos(tm); got != "2024-01-31T11:00:05.500000000Z" {
		t.Errorf("Nanos = %q", got)
	}
	if got, _ := AppendSeconds([]byte("x"), tm); string(got) != "x2024-01-31T11:00:05Z" {
		t.Errorf("AppendSeconds = %q", got)
	}
	if got, _ := AppendNanos([]byte("x"), tm); string(got) != "x2024-01-31T11:00:05.500000000Z" {
		t.Errorf("AppendNanos = %q", got)
	}
	for _, bad := range []time.Time{
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		if _, err := Seconds(bad); !errors.Is(err, ErrRange) {
			t.Errorf("Seconds(%v) err = %v", bad, err)
		}
		if _, err := Nanos(bad); !errors.Is(err, ErrRange) {
			t.Errorf("Nanos(%v) err = %v", bad, err)
		}
		if b, err := AppendSeconds(nil, bad); !errors.Is(err, ErrRange) || len(b) != 0 {
			t.Errorf("AppendSeconds(%v) = %q, %v", bad, b, err)
		}
		if b, err := AppendNanos(nil, bad); !errors.Is(err, ErrRange) || len(b) != 0 {
			t.Errorf("AppendNanos(%v) = %q, %v", bad, b, err)
		}
	}
}

// TestAppendIsFormat: the digit-by-digit forms are the layouts' text over
// the whole range, at its ends and at random instants.
func TestAppendIsFormat(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	lo, hi := time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC).Unix(), time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).Unix()
	for i := range 100000 {
		sec := lo + rng.Int64N(hi-lo+1)
		if i < 2 {
			sec = []int64{lo, hi}[i]
		}
		tm := time.Unix(sec, rng.Int64N(1e9)).In(time.FixedZone("X", rng.IntN(20)*1800-18000))
		if tm.UTC().Year() > 9999 || tm.UTC().Year() < 0 {
			continue
		}
		s, _ := AppendSeconds(nil, tm)
		n, _ := AppendNanos(nil, tm)
		if string(s) != tm.UTC().Format(SecondsLayout) || string(n) != tm.UTC().Format(NanosLayout) {
			t.Fatalf("%v: %q, %q", tm, s, n)
		}
	}
}

// TestParseFixedIsTimeParse: the fast path reads the package's own forms
// as time.Parse does, and leaves every other text (and every invalid date
// in those forms) to it.
func TestParseFixedIsTimeParse(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	texts := []string{"2024-02-29T00:00:00Z", "2023-02-29T00:00:00Z", "2024-13-01T00:00:00Z", "2024-04-31T10:00:00Z",
		"2024-01-01T24:00:00Z", "2024-01-01T23:60:00Z", "2024-01-01T23:59:60Z", "0000-01-01T00:00:00Z", "9999-12-31T23:59:59.999999999Z",
		"2024-01-01T00:00:00.5Z", "2024-01-01T00:00:00+00:00", "2024-01-01 00:00:00Z", "2024-01-01T00:00:00.12345678xZ", "+024-01-01T00:00:00Z"}
	for range 20000 {
		b := []byte(time.Unix(rng.Int64N(400e9)-62e9, rng.Int64N(1e9)).UTC().Format(NanosLayout))
		if rng.IntN(2) == 0 {
			b = append(b[:19], 'Z')
		}
		if rng.IntN(4) == 0 {
			b[rng.IntN(len(b))] = "0123456789:-.TZ "[rng.IntN(16)]
		}
		texts = append(texts, string(b))
	}
	for _, s := range texts {
		got, err := Parse(s)
		want, werr := time.Parse(time.RFC3339Nano, s)
		if (err == nil) != (werr == nil) || err == nil && (!got.Equal(want) || got.Location() != time.UTC) {
			t.Fatalf("Parse(%q) = %v, %v; time.Parse: %v, %v", s, got, err, want, werr)
		}
	}
}

func TestParseAcceptsEveryRFC3339Form(t *testing.T) {
	want := time.Date(2024, 3, 1, 10, 15, 30, 500_000_000, time.UTC)
	for _, s := range []string{
		"2024-03-01T10:15:30.5Z",
		"2024-03-01T10:15:30.500Z",
		"2024-03-01T10:15:30.500000000Z",
		"2024-03-01T05:15:30.5-05:00",
		"2024-03-01T11:15:30.5+01:00",
	} {
		got, err := Parse(s)
		if err != nil || !got.Equal(want) || got.Location() != time.UTC {
			t.Errorf("Parse(%q) = %v, %v", s, got, err)
		}
	}
	for _, bad := range []string{"", "2024-03-01", "2024-03-01 10:15:30Z", "2024-13-01T00:00:00Z", "01/03/2024"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

// TestNanoTrimBreaksOrder documents why the fixed layouts exist.
func TestNanoTrimBreaksOrder(t *testing.T) {
	a := time.Date(2024, 1, 1, 0, 0, 5, 0, time.UTC)
	b := a.Add(500 * time.Millisecond)
	if !(b.Format(time.RFC3339Nano) < a.Format(time.RFC3339Nano)) {
		t.Fatal("expected RFC3339Nano to misorder; the premise of this package changed")
	}
	sa, _ := Nanos(a)
	sb, _ := Nanos(b)
	if !(sa < sb) {
		t.Fatalf("Nanos misorders: %q !< %q", sa, sb)
	}
}

func TestOrderOverManyInstants(t *testing.T) {
	base := time.Date(1999, 12, 31, 23, 59, 59, 0, time.UTC)
	var ts []time.Time
	for i := range 2000 {
		ts = append(ts, base.Add(time.Duration(i*i*7919)*time.Millisecond+time.Duration(i)))
	}
	var strs []string
	for _, x := range ts {
		s, _ := Nanos(x)
		strs = append(strs, s)
	}
	if !sort.StringsAreSorted(strs) {
		t.Fatal("Nanos strings not in time order")
	}
}

func FuzzTimeEncoding(f *testing.F) {
	f.Add(int64(0), int64(0), int64(1))
	f.Add(int64(1706702405), int64(500_000_000), int64(-1))
	f.Add(int64(-62135596800), int64(0), int64(999_999_999))
	f.Fuzz(func(t *testing.T, sec, nsec, delta int64) {
		a := time.Unix(sec, nsec)
		b := a.Add(time.Duration(delta))
		if checkRange(a) != nil || checkRange(b) != nil {
			return
		}
		na, err := Nanos(a)
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := AppendNanos(nil, a); string(b) != na {
			t.Fatalf("AppendNanos(%v) = %q, Nanos %q", a, b, na)
		}
		if b, _ := AppendSeconds(nil, a); string(b) != a.UTC().Format(SecondsLayout) {
			t.Fatalf("AppendSeconds(%v) = %q", a, b)
		}
		nb, _ := Nanos(b)
		// Round trip.
		pa, err := Parse(na)
		if err != nil || !pa.Equal(a) {
			t.Fatalf("Parse(Nanos(%v)) = %v, %v", a, pa, err)
		}
		// Order preserved, for nanos and for seconds.
		if cmp(na, nb) != a.Compare(b) {
			t.Fatalf("order: %q vs %q but %v vs %v", na, nb, a, b)
		}
		sa, _ := Seconds(a)
		sb, _ := Seconds(b)
		at, bt := a.Truncate(time.Second), b.Truncate(time.Second)
		if at.Before(time.Unix(0, 0)) || bt.Before(time.Unix(0, 0)) {
			// Truncate rounds toward the zero time, not down, before 1970 it's
			// still monotonic: compare the parsed values instead.
			at, _ = Parse(sa)
			bt, _ = Parse(sb)
		}
		if cmp(sa, sb) != at.Compare(bt) {
			t.Fatalf("seconds order: %q vs %q", sa, sb)
		}
		ps, err := Parse(sa)
		if err != nil || ps.Unix() != a.Unix() {
			t.Fatalf("Parse(Seconds(%v)) = %v, %v", a, ps, err)
		}
	})
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"2024-03-01T10:15:30.5Z", "2024-03-01T05:15:30-05:00", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tm, err := Parse(s)
		want, werr := time.Parse(time.RFC3339Nano, s)
		if (err == nil) != (werr == nil) || err == nil && !tm.Equal(want) {
			t.Fatalf("Parse(%q) = %v, %v; time.Parse: %v, %v", s, tm, err, want, werr)
		}
		if err != nil {
			return
		}
		if checkRange(tm) != nil {
			return
		}
		n, err := Nanos(tm)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Parse(n)
		if err != nil || !back.Equal(tm) {
			t.Fatalf("re-parse of %q (%q) = %v, %v", s, n, back, err)
		}
	})
}

func cmp(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
