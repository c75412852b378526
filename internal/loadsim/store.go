package loadsim

import (
	"context"
	"github.com/dynabill/billing/internal/ddbjson"
	"sync"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/av"
	"github.com/dynabill/billing/internal/capacity"
	"github.com/dynabill/billing/internal/dynamotest"
	"github.com/dynabill/billing/internal/layout"
)

// repository is the store decorator: a billing.ShardedRepository over the
// in-memory store that charges every call to the modelled world (its
// latency to the shard run of the user, its capacity units to the limits
// it touches, computed from the sizes of the items as DynamoDB would store
// them) and refuses, with billing.ErrThrottled and before applying them,
// the writes that would take a limit past its burst.
type repository struct {
	inner billing.ShardedRepository
	w     *world
}

var _ billing.ShardedRepository = (*repository)(nil)

func (r *repository) DueShards() int { return r.inner.DueShards() }

// shard is the shard (and run) of userID's records.
func (r *repository) shard(userID string) int {
	if r.w.cfg.Index == capacity.IndexLegacy {
		return 0
	}
	return layout.DueShard(userID, r.w.cfg.Shards)
}

// indexKey is the status index partition a record is on, "" for none:
// the due index's "<STATUS>#<shard>" for the statuses it holds, the legacy
// index's status for every record.
func (r *repository) indexKey(s *billing.Period) string {
	if r.w.cfg.Index == capacity.IndexLegacy {
		return string(s.Status)
	}
	if !layout.DueStatus(s.Status) {
		return ""
	}
	return layout.DueKey(s.Status, layout.DueShard(s.UserID, r.w.cfg.Shards))
}

// itemSize is the size of s's item in the subscriptions table, its due
// key included. Encoding every item would cost the simulation more than
// the store does, so sizes are measured on a sample (see sizer).
func (r *repository) itemSize(s *billing.Period) int {
	return r.w.itemSizes.size(s, func() int {
		item, err := layout.EncodeItem(s)
		if err != nil {
			return 0
		}
		n := ddbjson.ItemSize(item)
		if k := r.indexKey(s); k != "" && r.w.cfg.Index == capacity.IndexDue {
			n += len(layout.AttrDue) + len(k)
		}
		return n
	})
}

func (r *repository) historySize(s *billing.Period) int {
	return r.w.historySizes.size(s, func() int {
		item, err := layout.EncodeHistoryItem(s)
		if err != nil {
			return 0
		}
		return ddbjson.ItemSize(item)
	})
}

// sizer measures item sizes on a sample: the first item of each kind (a
// record's status and whether its attempt is in flight) and every
// sampleEvery-th one after it, the latest measure standing for the items
// between. The simulation's items of one kind differ only in values of
// the same length, and a size counts by started KB (or 4 KB), so the
// sample gives the units every item would.
type sizer struct {
	mu    sync.Mutex
	kinds map[sizeKind]*sample
}

type sizeKind struct {
	status   billing.Status
	inFlight bool
}

type sample struct{ n, size int }

const sampleEvery = 64

func (z *sizer) size(s *billing.Period, measure func() int) int {
	k := sizeKind{s.Status, s.InFlight()}
	z.mu.Lock()
	if z.kinds == nil {
		z.kinds = map[sizeKind]*sample{}
	}
	sm := z.kinds[k]
	if sm == nil {
		sm = &sample{}
		z.kinds[k] = sm
	}
	sm.n++
	if sm.n%sampleEvery != 1 {
		defer z.mu.Unlock()
		return sm.size
	}
	z.mu.Unlock()
	size := measure()
	z.mu.Lock()
	sm.size = max(sm.size, size)
	z.mu.Unlock()
	return size
}

// indexWrites are the index partition writes of a change of a record from
// prev (nil: a new one) to next: a put where it stays or arrives, a delete
// where it leaves (an index key that changes costs both).
func (r *repository) indexWrites(prev, next *billing.Period, nextSize int, out []charge) []charge {
	to := r.indexKey(next)
	if prev != nil {
		if from := r.indexKey(prev); from != "" && from != to {
			out = append(out, charge{r.w.partition(r.w.parts, from, r.w.cfg.PartitionWCU), dynamotest.WriteUnits(r.itemSize(prev))})
		}
	}
	if to != "" {
		out = append(out, charge{r.w.partition(r.w.parts, to, r.w.cfg.PartitionWCU), dynamotest.WriteUnits(nextSize)})
	}
	return out
}

func (r *repository) read(userID string, units float64) {
	w := r.w
	w.mu.Lock()
	defer w.mu.Unlock()
	w.call(r.shard(userID), false)
	w.tableRead.clock += units / w.tableRead.rate
	w.tableRead.units += units
}

func (r *repository) Add(ctx context.Context, s *billing.Period) error {
	r.read(s.UserID, 0)
	return r.inner.Add(ctx, s)
}

func (r *repository) Get(ctx context.Context, userID string, billingDate time.Time) (billing.Period, error) {
	sub, err := r.inner.Get(ctx, userID, billingDate)
	size := 0
	if err == nil {
		size = r.itemSize(&sub)
	}
	r.read(userID, dynamotest.ReadUnits(size, true))
	return sub, err
}

func (r *repository) GetByID(ctx context.Context, id string) (billing.Period, error) {
	sub, err := r.inner.GetByID(ctx, id)
	r.read(sub.UserID, 1.5)
	return sub, err
}

func (r *repository) ListByUser(ctx context.Context, userID string) ([]billing.Period, error) {
	subs, err := r.inner.ListByUser(ctx, userID)
	r.read(userID, r.pageUnits(subs, len(subs), true))
	return subs, err
}

func (r *repository) Recent(ctx context.Context, userID string, limit int) ([]billing.Period, error) {
	subs, err := r.inner.Recent(ctx, userID, limit)
	r.read(userID, r.pageUnits(subs, len(subs), true))
	return subs, err
}

// pageUnits is the RCU of a query page that read n items like subs: their
// sizes summed, rounded up once (the first item's size stands for the
// items a filter dropped).
func (r *repository) pageUnits(subs []billing.Period, n int, consistent bool) float64 {
	if len(subs) == 0 {
		return dynamotest.ReadUnits(0, consistent)
	}
	size := 0
	for i := range subs {
		size += r.itemSize(&subs[i])
	}
	size += (n - len(subs)) * r.itemSize(&subs[0])
	return dynamotest.ReadUnits(size, consistent)
}

func (r *repository) QueryStatus(ctx context.Context, q billing.StatusQuery) (billing.Page, error) {
	s := 0
	if len(q.Shards) == 1 {
		s = q.Shards[0]
	}
	r.w.page(s)
	p, err := r.inner.QueryStatus(ctx, q)
	if err != nil {
		return p, err
	}
	units := r.pageUnits(p.Items, p.Scanned, false)
	key := string(q.Status)
	if r.w.cfg.Index == capacity.IndexDue {
		key = layout.DueKey(q.Status, s)
	}
	w := r.w
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.partition(w.partReads, key, w.cfg.PartitionRCU)
	b.clock += units / b.rate
	b.units += units
	w.tableRead.clock += units / w.tableRead.rate
	w.tableRead.units += units
	w.indexRead += units
	w.itemsRead += p.Scanned
	return p, nil
}

func (r *repository) Update(ctx context.Context, prev, next *billing.Period, create ...*billing.Period) error {
	size := max(r.itemSize(prev), r.itemSize(next))
	hist := r.historySize(next)
	// A transaction: every item it writes costs twice; the index
	// writes it causes do not.
	charges := []charge{{r.w.table, 2*dynamotest.WriteUnits(size) + 2*dynamotest.WriteUnits(hist)}}
	charges = r.indexWrites(prev, next, r.itemSize(next), charges)
	for _, c := range create {
		cs, ch := r.itemSize(c), r.historySize(c)
		charges = append(charges, charge{r.w.table, 2*dynamotest.WriteUnits(cs) + 2*dynamotest.WriteUnits(ch)})
		charges = r.indexWrites(nil, c, cs, charges)
		r.w.noteSizes(cs, ch)
	}
	r.w.noteSizes(size, hist)
	if err := r.w.write(r.shard(prev.UserID), false, true, charges); err != nil {
		r.w.mu.Lock()
		r.w.throttledUpdates++
		r.w.mu.Unlock()
		return err
	}
	return r.inner.Update(ctx, prev, next, create...)
}

func (r *repository) AdminUpdate(ctx context.Context, prev, next *billing.Period) error {
	size := max(r.itemSize(prev), r.itemSize(next))
	charges := []charge{{r.w.table, 4*dynamotest.WriteUnits(size) + 2*dynamotest.WriteUnits(r.historySize(next))}}
	charges = r.indexWrites(prev, next, r.itemSize(next), charges)
	if err := r.w.write(r.shard(prev.UserID), false, true, charges); err != nil {
		return err
	}
	return r.inner.AdminUpdate(ctx, prev, next)
}

func (r *repository) SetAttempt(ctx context.Context, prev, next *billing.Period) error {
	size := max(r.itemSize(prev), r.itemSize(next))
	// One UpdateItem: the item's size, and the index rewrites its
	// projection of the item.
	charges := r.indexWrites(prev, next, r.itemSize(next), []charge{{r.w.table, dynamotest.WriteUnits(size)}})
	if err := r.w.write(r.shard(prev.UserID), false, true, charges); err != nil {
		return err
	}
	return r.inner.SetAttempt(ctx, prev, next)
}

func (r *repository) AddAll(ctx context.Context, subs []billing.Period) ([]billing.Period, error) {
	return r.inner.AddAll(ctx, subs)
}

// noteSizes keeps the largest item and history row sizes seen.
func (w *world) noteSizes(item, hist int) {
	w.mu.Lock()
	w.maxItem, w.maxHistory = max(w.maxItem, item), max(w.maxHistory, hist)
	w.mu.Unlock()
}

// lockItemSize is the size of a lock item as the DynamoDB locker writes
// it: PartitionKey (the user ID), data, ownerName, leaseDuration,
// recordVersionNumber; well under 1 KB.
func lockItemSize(userID string) int {
	return ddbjson.ItemSize(map[string]av.AttributeValue{
		"PartitionKey":        &av.AttributeValueMemberS{Value: userID},
		"data":                &av.AttributeValueMemberB{Value: nil},
		"ownerName":           &av.AttributeValueMemberS{Value: "00000000-0000-0000-0000-000000000000"},
		"leaseDuration":       &av.AttributeValueMemberS{Value: "1m0s"},
		"recordVersionNumber": &av.AttributeValueMemberS{Value: "00000000-0000-0000-0000-000000000000"},
		"isReleased":          &av.AttributeValueMemberS{Value: "1"},
	})
}

// locker charges the DynamoDB locker's calls for a lock that is free: a
// consistent GetItem and a conditional PutItem to take it, an UpdateItem
// to release it. They cost the lock table's WCU and the shard run's
// latency; they are never refused (a refused release would leave the
// in-memory lease held).
type locker struct {
	inner billing.Locker
	r     *repository
}

func (l *locker) Lock(ctx context.Context, userID string) (billing.Lease, error) {
	w, s := l.r.w, l.r.shard(userID)
	w.mu.Lock()
	w.call(s, true)
	w.lockRCU += dynamotest.ReadUnits(lockItemSize(userID), true)
	w.mu.Unlock()
	_ = w.write(s, true, false, []charge{{w.lockTable, dynamotest.WriteUnits(lockItemSize(userID))}})
	lease, err := l.inner.Lock(ctx, userID)
	if err == nil {
		w.locked(s)
		lease = &simLease{Lease: lease, l: l, s: s}
	}
	return lease, err
}

type simLease struct {
	billing.Lease
	l *locker
	s int
}

func (le *simLease) Release(ctx context.Context) error {
	w := le.l.r.w
	_ = w.write(le.s, true, false, []charge{{w.lockTable, dynamotest.WriteUnits(lockItemSize(le.UserID()))}})
	return le.Lease.Release(ctx)
}
