package billing

import (
	"bytes"
	"reflect"
	"testing"
	"time"
)

// FuzzDecodeRunCursor: a run's cursor comes back from a queue message or a
// Step Functions state, so anything may arrive. Decoding never panics, and
// whatever decodes — unkeyed, or signed with the collector's keys — is a
// run of the kind, store and shards asked for that encodes to a cursor
// decoding to the same state.
func FuzzDecodeRunCursor(f *testing.F) {
	at := time.Date(2024, 1, 31, 15, 0, 0, 0, time.UTC)
	keys := [][]byte{bytes.Repeat([]byte{'k'}, MinRunCursorKeyLen), bytes.Repeat([]byte{'o'}, MinRunCursorKeyLen)}
	for _, st := range []runState{
		{Kind: RunScheduled, At: at, Store: "s/4", Shards: []int{0, 1, 2, 3}, Left: []chain{{Shards: []int{2, 3}, Cursor: "abc"}, {Shards: []int{0, 1}}}},
		{Kind: RunRetry, At: at, Store: "s/4", Shards: []int{0, 1, 2, 3}, Left: []chain{{Shards: []int{1}, Phase: 2}}},
	} {
		f.Add(st.encode(nil))
		f.Add(st.encode(keys))
		f.Add(st.encode(keys[1:]))
	}
	f.Add("run1.")
	f.Add("run2.")
	f.Add("shards:e30")
	f.Fuzz(func(t *testing.T, token string) {
		for _, ks := range [][][]byte{nil, keys} {
			for _, kind := range []RunKind{RunScheduled, RunRetry} {
				st, err := decodeRunCursor(token, ks, kind, "s/4", []int{0, 1, 2, 3})
				if err != nil {
					continue
				}
				if st.Kind != kind || st.Store != "s/4" || len(st.Shards) != 4 {
					t.Fatalf("decoded a cursor of another run: %+v", st)
				}
				again, err := decodeRunCursor(st.encode(ks), ks, kind, "s/4", []int{0, 1, 2, 3})
				if err != nil || !reflect.DeepEqual(again, st) {
					t.Fatalf("re-encoded %+v decodes to %+v, %v", st, again, err)
				}
			}
		}
	})
}
