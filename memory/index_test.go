package memory

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPosSetIsASortedSet: random inserts and removals leave the set
// holding what a sorted slice holds, across chunk splits and empty
// chunks, and ascend reads it from any position.
func TestPosSetIsASortedSet(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var s posSet
	var want []indexPos
	pos := func() indexPos {
		return indexPos{fmt.Sprintf("2024-%02d", rng.IntN(40)), fmt.Sprintf("u%03d", rng.IntN(300))}
	}
	for i := range 20000 {
		p := pos()
		j, found := slices.BinarySearchFunc(want, p, comparePos)
		if rng.IntN(3) == 0 {
			s.remove(p)
			if found {
				want = slices.Delete(want, j, j+1)
			}
		} else {
			s.insert(p)
			if !found {
				want = slices.Insert(want, j, p)
			}
		}
		if i%997 != 0 {
			continue
		}
		require.Equal(t, len(want), s.n)
		for _, c := range s.chunks {
			require.NotEmpty(t, c)
			require.LessOrEqual(t, len(c), chunkMax)
		}
		from := pos()
		for _, after := range []bool{false, true} {
			var got []indexPos
			s.ascend(from, after, func(p indexPos) bool {
				got = append(got, p)
				return len(got) < 50
			})
			k, found := slices.BinarySearchFunc(want, from, comparePos)
			if after && found {
				k++
			}
			require.Equal(t, want[k:min(len(want), k+50)], append([]indexPos{}, got...)[:len(got):len(got)], "from %v after %v", from, after)
		}
	}
	for len(want) > 0 {
		s.remove(want[0])
		want = want[1:]
	}
	require.Zero(t, s.n)
	require.Empty(t, s.chunks)
}

// TestSubIndexCountsHolders: the subscription-ID index lists every user
// holding items of an ID, however items come and go.
func TestSubIndexCountsHolders(t *testing.T) {
	x := subIndex{}
	x.add("s", "u2")
	x.add("s", "u1")
	x.add("s", "u2")
	x.add("s", "u3")
	require.Equal(t, []string{"u1", "u2", "u3"}, x.users("s"))
	x.remove("s", "u2")
	require.Equal(t, []string{"u1", "u2", "u3"}, x.users("s"))
	x.remove("s", "u2")
	require.Equal(t, []string{"u1", "u3"}, x.users("s"))
	x.remove("s", "u1")
	x.remove("s", "nobody")
	require.Equal(t, []string{"u3"}, x.users("s"))
	x.remove("s", "u3")
	require.Nil(t, x.users("s"))
	require.Empty(t, x)
	x.add("", "u1")
	require.Empty(t, x)
}
