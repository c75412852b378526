package memory

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/av"
	"github.com/dynabill/billing/internal/layout"
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

// TestDueIndexIsPartitionedByShard: in the due mode the status index is
// the due index, partitioned as billing_due is: each status runs read, in
// each shard, holds that shard's records only (a page of a shard reads
// none of another's), a status runs do not read is not indexed, and a
// write that changes the status moves the record between partitions.
func TestDueIndexIsPartitionedByShard(t *testing.T) {
	const shards = 4
	tb := newTable(newLocks(), true, true, shards)
	item := func(user, status string) map[string]av.AttributeValue {
		return map[string]av.AttributeValue{
			layout.AttrUserID:        &av.AttributeValueMemberS{Value: user},
			layout.AttrBillingStatus: &av.AttributeValueMemberS{Value: status},
		}
	}
	want := map[statusKey]int{}
	for i := range 40 {
		user := fmt.Sprintf("u%02d", i)
		tb.put(tableKey{user, "2024-06-01T00:00:00Z"}, item(user, string(billing.StatusScheduled)))
		tb.put(tableKey{user, "2024-05-01T00:00:00Z"}, item(user, string(billing.StatusCompleted)))
		want[statusKey{string(billing.StatusScheduled), layout.DueShard(user, shards)}]++
	}
	got := map[statusKey]int{}
	for key, set := range tb.status {
		set.ascend(indexPos{}, false, func(p indexPos) bool {
			require.Equal(t, key.shard, layout.DueShard(tb.key(p).pk, shards), "%v holds %v", key, p)
			return true
		})
		if set.n > 0 {
			got[key] = set.n
		}
	}
	require.Equal(t, want, got)

	moved := tableKey{"u00", "2024-06-01T00:00:00Z"}
	tb.update(moved, func(it map[string]av.AttributeValue) {
		it[layout.AttrBillingStatus] = &av.AttributeValueMemberS{Value: string(billing.StatusError)}
	})
	shard := layout.DueShard(moved.pk, shards)
	require.Equal(t, want[statusKey{string(billing.StatusScheduled), shard}]-1, tb.status[statusKey{string(billing.StatusScheduled), shard}].n)
	require.Equal(t, 1, tb.status[statusKey{string(billing.StatusError), shard}].n)
}
