package memory

import (
	"cmp"
	"hash/maphash"
	"slices"
	"strings"
	"sync"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/av"
	"github.com/dynabill/billing/internal/layout"
)

// table holds the encoded items of one table by key, as DynamoDB does,
// with the indexes that answer the store's queries without reading
// every item: the items of each user in sort key order (the table's own
// key), the users holding items of each subscription_id (the
// subscription-ID index) and, for the primary table, the keys of each
// billing_status in the status index's order (in the due mode, the keys
// of each billing_status in each due shard: the due index). Every index
// follows every write, so its cost per lookup does not grow with the
// table.
//
// The items are the table's own: they are changed in place and never
// handed out; readers decode or copy them while they hold their lock.
// Attribute values are never changed once stored (a write replaces them),
// so items may share them.
//
// Locking (see locks): the users of stripe i, and their items, are
// guarded by the store's stripe lock i, which the caller holds; the
// indexes and the count by the store's index lock, which the table's
// writes take themselves while the caller holds the stripe.
type table struct {
	locks *locks
	users [stripes]map[string]*partition
	n     int
	bySub subIndex
	// status is the status index: its partition key → positions; nil
	// for a table without one (history).
	status map[statusKey]*posSet
	// bySK orders the status index by sort key, then user
	// (StatusIndexSorted); else by user, then sort key.
	bySK bool
	// dueShards, when not 0, makes the status index the due index: it
	// holds the statuses runs read (layout.DueStatus) only, partitioned
	// by the user's due shard among dueShards as billing_due is.
	dueShards int
}

// statusKey is a partition of the status index: a billing_status, and in
// the due index the shard (else 0).
type statusKey struct {
	status string
	shard  int
}

// newTable returns an empty table locked by l, with a status index when
// withStatus, the due index when dueShards is not 0.
func newTable(l *locks, withStatus, bySK bool, dueShards int) *table {
	t := &table{locks: l, bySub: subIndex{}, bySK: bySK, dueShards: dueShards}
	for i := range t.users {
		t.users[i] = map[string]*partition{}
	}
	if withStatus {
		t.status = map[statusKey]*posSet{}
	}
	return t
}

// partitionOf returns the items of user pk, nil when there are none.
func (t *table) partitionOf(pk string) *partition {
	return t.users[t.locks.stripe(pk)][pk]
}

// partition is one user's items, ordered by sort key string.
type partition struct{ recs []entry }

type entry struct {
	sk   string
	item map[string]av.AttributeValue // nil when row holds the item
	// row is a history row kept without its map (see putRow).
	row *layout.Row
}

// view returns the entry's item: its map, or one built from its row (a
// new map each time, sharing the row's values, which must not change).
func (e *entry) view() map[string]av.AttributeValue {
	if e.row != nil {
		return e.row.Item()
	}
	return e.item
}

// str returns the entry's S attribute name, "" when absent or not S.
func (e *entry) str(name string) string {
	if e.row != nil {
		return e.row.String(name)
	}
	return stringAttr(e.item, name)
}

// partitionCap is the room a new partition has: a subscription's periods
// and history rows arrive a few at a time.
const partitionCap = 4

// find returns the position of sk in p and whether an item is there.
func (p *partition) find(sk string) (int, bool) {
	lo, hi := 0, len(p.recs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if p.recs[m].sk < sk {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(p.recs) && p.recs[lo].sk == sk
}

// findBytes is find of a sort key given as bytes.
func (p *partition) findBytes(sk []byte) (int, bool) {
	lo, hi := 0, len(p.recs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if p.recs[m].sk < string(sk) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(p.recs) && p.recs[lo].sk == string(sk)
}

// getBytes is get of user pk's item at the sort key sk given as bytes,
// which it does not keep.
func (t *table) getBytes(pk string, sk []byte) (map[string]av.AttributeValue, bool) {
	p := t.partitionOf(pk)
	if p == nil {
		return nil, false
	}
	i, ok := p.findBytes(sk)
	if !ok {
		return nil, false
	}
	return p.recs[i].view(), true
}

// get returns the item at k.
func (t *table) get(k tableKey) (map[string]av.AttributeValue, bool) {
	p := t.partitionOf(k.pk)
	if p == nil {
		return nil, false
	}
	i, ok := p.find(k.sk)
	if !ok {
		return nil, false
	}
	return p.recs[i].view(), true
}

// has reports whether an item is at k.
func (t *table) has(k tableKey) bool {
	p := t.partitionOf(k.pk)
	if p == nil {
		return false
	}
	_, ok := p.find(k.sk)
	return ok
}

// put stores item at k, replacing any item there.
func (t *table) put(k tableKey, item map[string]av.AttributeValue) {
	t.putEntry(k, entry{sk: k.sk, item: item})
}

// putRow stores the history row row at k, replacing any item there: kept
// as it is, its item is built only when read.
func (t *table) putRow(k tableKey, row *layout.Row) {
	t.putEntry(k, entry{sk: k.sk, row: row})
}

func (t *table) putEntry(k tableKey, e entry) {
	users := t.users[t.locks.stripe(k.pk)]
	p := users[k.pk]
	if p == nil {
		p = &partition{recs: make([]entry, 0, partitionCap)}
		users[k.pk] = p
	}
	i, ok := p.find(k.sk)
	var old entry
	if ok {
		old = p.recs[i]
		p.recs[i] = e
	} else {
		p.recs = slices.Insert(p.recs, i, e)
	}
	t.locks.index.Lock()
	defer t.locks.index.Unlock()
	if ok {
		t.unindex(k, &old)
	} else {
		t.n++
	}
	t.index(k, &e)
}

// del removes the item at k, if any.
func (t *table) del(k tableKey) {
	users := t.users[t.locks.stripe(k.pk)]
	p := users[k.pk]
	if p == nil {
		return
	}
	i, ok := p.find(k.sk)
	if !ok {
		return
	}
	old := p.recs[i]
	p.recs = slices.Delete(p.recs, i, i+1)
	if len(p.recs) == 0 {
		delete(users, k.pk)
	}
	t.locks.index.Lock()
	defer t.locks.index.Unlock()
	t.unindex(k, &old)
	t.n--
}

// update changes the item at k in place with f, and its index entries
// with it. The item must exist.
func (t *table) update(k tableKey, f func(item map[string]av.AttributeValue)) {
	p := t.partitionOf(k.pk)
	i, ok := 0, false
	if p != nil {
		i, ok = p.find(k.sk)
	}
	if !ok {
		panic("memory: update of a missing item")
	}
	e := &p.recs[i]
	if e.row != nil { // a kept row changed in place becomes a map
		e.item, e.row = e.row.Item(), nil
	}
	item := e.item
	sub, st := stringAttr(item, layout.AttrSubscriptionID), t.statusOf(k, e)
	f(item)
	nsub, nst := stringAttr(item, layout.AttrSubscriptionID), t.statusOf(k, e)
	if nsub == sub && nst == st {
		return
	}
	t.locks.index.Lock()
	defer t.locks.index.Unlock()
	if nsub != sub {
		t.bySub.remove(sub, k.pk)
		t.bySub.add(nsub, k.pk)
	}
	if nst != st {
		t.removeStatus(st, k)
		t.addStatus(nst, k)
	}
}

// count returns the number of items.
func (t *table) count() int {
	t.locks.index.Lock()
	defer t.locks.index.Unlock()
	return t.n
}

// statusOf is the status index's key of item at k: the zero key when
// the table has no status index, the item no status string, or (in the
// due index) a status runs do not read.
func (t *table) statusOf(k tableKey, e *entry) statusKey {
	if t.status == nil {
		return statusKey{}
	}
	st := e.str(layout.AttrBillingStatus)
	if t.dueShards == 0 || st == "" {
		return statusKey{status: st}
	}
	if !layout.DueStatus(billing.Status(st)) {
		return statusKey{}
	}
	return statusKey{st, layout.DueShard(k.pk, t.dueShards)}
}

func (t *table) index(k tableKey, e *entry) {
	t.bySub.add(e.str(layout.AttrSubscriptionID), k.pk)
	t.addStatus(t.statusOf(k, e), k)
}

func (t *table) unindex(k tableKey, e *entry) {
	t.bySub.remove(e.str(layout.AttrSubscriptionID), k.pk)
	t.removeStatus(t.statusOf(k, e), k)
}

func (t *table) addStatus(st statusKey, k tableKey) {
	if st.status == "" {
		return
	}
	set := t.status[st]
	if set == nil {
		set = &posSet{}
		t.status[st] = set
	}
	set.insert(t.position(k))
}

func (t *table) removeStatus(st statusKey, k tableKey) {
	if st.status == "" {
		return
	}
	if set := t.status[st]; set != nil {
		set.remove(t.position(k))
	}
}

// position is k's position in the status index.
func (t *table) position(k tableKey) indexPos {
	if t.bySK {
		return indexPos{k.sk, k.pk}
	}
	return indexPos{k.pk, k.sk}
}

// key is the item key at a position of the status index.
func (t *table) key(p indexPos) tableKey {
	if t.bySK {
		return tableKey{pk: p[1], sk: p[0]}
	}
	return tableKey{pk: p[0], sk: p[1]}
}

// withSub returns the items whose subscription_id is id (a query on a
// hash-only index), in no order. The caller holds every stripe.
func (t *table) withSub(id string) []keyedItem {
	t.locks.index.Lock()
	users := t.bySub.users(id)
	t.locks.index.Unlock()
	var out []keyedItem
	for _, u := range users {
		for _, e := range t.partitionOf(u).recs {
			if e.str(layout.AttrSubscriptionID) == id {
				out = append(out, keyedItem{tableKey{u, e.sk}, e.view()})
			}
		}
	}
	return out
}

// subIndex is the subscription-ID index: the users holding items of each
// ID, with how many items each holds.
type subIndex map[string]subRefs

// subRefs are the holders of one ID: nearly always a single user, kept
// without a map of its own.
type subRefs struct {
	user string
	n    int
	more map[string]int // other users, rare
}

func (x subIndex) add(id, user string) {
	if id == "" {
		return
	}
	r := x[id]
	switch {
	case r.n == 0:
		r.user, r.n = user, 1
	case r.user == user:
		r.n++
	default:
		if r.more == nil {
			r.more = map[string]int{}
		}
		r.more[user]++
	}
	x[id] = r
}

func (x subIndex) remove(id, user string) {
	r, ok := x[id]
	if !ok {
		return
	}
	switch {
	case r.user == user:
		r.n--
	case r.more[user] > 1:
		r.more[user]--
	default:
		delete(r.more, user)
	}
	if r.n == 0 {
		// Another holder, if any, takes the first place.
		for u, n := range r.more {
			r.user, r.n = u, n
			delete(r.more, u)
			break
		}
	}
	if r.n == 0 {
		delete(x, id)
		return
	}
	x[id] = r
}

// users returns the holders of id in ascending order.
func (x subIndex) users(id string) []string {
	r, ok := x[id]
	if !ok {
		return nil
	}
	out := make([]string, 0, 1+len(r.more))
	out = append(out, r.user)
	for u := range r.more {
		out = append(out, u)
	}
	slices.Sort(out)
	return out
}

// indexPos is an item's position in the status index: (billing_date key,
// user_id) when sorted, else (user_id, billing_date key).
type indexPos [2]string

func comparePos(a, b indexPos) int {
	if c := strings.Compare(a[0], b[0]); c != 0 {
		return c
	}
	return strings.Compare(a[1], b[1])
}

// posSet is an ordered set of positions: sorted chunks of at most
// chunkMax positions, so that an insert or a removal moves at most a
// chunk's positions and the chunk list changes only when a chunk splits
// or empties.
type posSet struct {
	chunks [][]indexPos
	n      int
}

const chunkMax = 128

// seek returns the chunk and the index in it of the first position >= p;
// ci is len(chunks) when there is none.
func (s *posSet) seek(p indexPos) (ci, i int) {
	ci, _ = slices.BinarySearchFunc(s.chunks, p, func(c []indexPos, p indexPos) int {
		return comparePos(c[len(c)-1], p)
	})
	if ci == len(s.chunks) {
		return ci, 0
	}
	i, _ = slices.BinarySearchFunc(s.chunks[ci], p, comparePos)
	return ci, i
}

func (s *posSet) insert(p indexPos) {
	if len(s.chunks) == 0 {
		c := make([]indexPos, 1, chunkMax)
		c[0] = p
		s.chunks = append(s.chunks, c)
		s.n++
		return
	}
	ci, i := s.seek(p)
	if ci == len(s.chunks) {
		ci = len(s.chunks) - 1
		i = len(s.chunks[ci])
	} else if s.chunks[ci][i] == p {
		return
	}
	c := slices.Insert(s.chunks[ci], i, p)
	if len(c) > chunkMax {
		half := len(c) / 2
		tail := make([]indexPos, len(c)-half, chunkMax)
		copy(tail, c[half:])
		clear(c[half:])
		c = c[:half]
		s.chunks = slices.Insert(s.chunks, ci+1, tail)
	}
	s.chunks[ci] = c
	s.n++
}

func (s *posSet) remove(p indexPos) {
	ci, i := s.seek(p)
	if ci == len(s.chunks) || s.chunks[ci][i] != p {
		return
	}
	c := slices.Delete(s.chunks[ci], i, i+1)
	if len(c) == 0 {
		s.chunks = slices.Delete(s.chunks, ci, ci+1)
	} else {
		s.chunks[ci] = c
	}
	s.n--
}

// ascend calls f with the positions from from on, in order, until f
// returns false; from itself is left out when after.
func (s *posSet) ascend(from indexPos, after bool, f func(indexPos) bool) {
	ci, i := s.seek(from)
	for ; ci < len(s.chunks); ci, i = ci+1, 0 {
		c := s.chunks[ci]
		for ; i < len(c); i++ {
			if after && c[i] == from {
				continue
			}
			if !f(c[i]) {
				return
			}
		}
	}
}

// keyedItem is an item with its key, for sorting.
type keyedItem struct {
	key  tableKey
	item map[string]av.AttributeValue
}

// sortByKey orders items by user_id then sort key string, or by the sort
// key string then user_id when bySK.
func sortByKey(items []keyedItem, bySK bool) {
	slices.SortFunc(items, func(a, b keyedItem) int {
		if bySK {
			return cmp.Or(strings.Compare(a.key.sk, b.key.sk), strings.Compare(a.key.pk, b.key.pk))
		}
		return cmp.Or(strings.Compare(a.key.pk, b.key.pk), strings.Compare(a.key.sk, b.key.sk))
	})
}

// stripes is the number of stripe locks of a store: writes of different
// users rarely wait for each other.
const stripes = 64

// locks are a store's locks. Stripe i guards the items of the users whose
// ID hashes to i, in both tables; index guards the tables' indexes and
// counts. An operation takes the stripes of the users it reads or writes
// (every stripe for queries across users), in ascending order, and the
// index lock after them.
type locks struct {
	seed  maphash.Seed
	mu    [stripes]sync.RWMutex
	index sync.Mutex
}

func newLocks() *locks { return &locks{seed: maphash.MakeSeed()} }

// stripe returns the stripe of userID.
func (l *locks) stripe(userID string) int {
	return int(maphash.String(l.seed, userID) % stripes)
}

// stripeSet is a set of stripes, bit i for stripe i.
type stripeSet uint64

func (l *locks) of(userIDs ...string) stripeSet {
	var set stripeSet
	for _, u := range userIDs {
		set |= 1 << l.stripe(u)
	}
	return set
}

// lock takes the stripes of set for writing, in ascending order.
func (l *locks) lock(set stripeSet) { l.each(set, (*sync.RWMutex).Lock) }

func (l *locks) unlock(set stripeSet) { l.each(set, (*sync.RWMutex).Unlock) }

// rlock takes the stripes of set for reading, in ascending order.
func (l *locks) rlock(set stripeSet) { l.each(set, (*sync.RWMutex).RLock) }

func (l *locks) runlock(set stripeSet) { l.each(set, (*sync.RWMutex).RUnlock) }

// each calls f on the stripe locks of set, in ascending order.
func (l *locks) each(set stripeSet, f func(*sync.RWMutex)) {
	for i := range stripes {
		if set&(1<<i) != 0 {
			f(&l.mu[i])
		}
	}
}

// allStripes is every stripe: what queries across users and batches lock.
const allStripes = ^stripeSet(0)
