package faultsim

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/dynabill/billing/internal/seedhash"
)

// draw returns a number in [0, 1) determined by the seed and the parts
// alone: the identity of what is decided (a user, a key, a call index per
// key, a day), never the order in which goroutines got there.
func draw(seed int64, parts ...any) float64 {
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(seed))
	h.Write(b[:])
	for _, p := range parts {
		switch v := p.(type) {
		case string:
			h.Write([]byte(v))
		case int:
			h.Write(strconv.AppendInt(b[:0], int64(v), 10))
		case int64:
			h.Write(strconv.AppendInt(b[:0], v, 10))
		case time.Time:
			h.Write(strconv.AppendInt(b[:0], v.UnixNano(), 10))
		case time.Duration:
			h.Write(strconv.AppendInt(b[:0], int64(v), 10))
		default:
			fmt.Fprint(h, v)
		}
		h.Write([]byte{0})
	}
	return seedhash.Unit(h.Sum64())
}

// pick returns an integer in [0, n) drawn like draw.
func pick(seed int64, n int, parts ...any) int {
	if n <= 1 {
		return 0
	}
	return min(int(draw(seed, parts...)*float64(n)), n-1)
}

// between returns a duration in [lo, hi] drawn like draw, in whole seconds.
func between(seed int64, lo, hi time.Duration, parts ...any) time.Duration {
	if hi <= lo {
		return lo
	}
	span := int((hi - lo) / time.Second)
	return lo + time.Duration(pick(seed, span+1, parts...))*time.Second
}
