// Package loadsim runs the collector over many due subscriptions against
// the in-memory store with DynamoDB's throughput limits modelled, and
// measures in modelled time what package capacity predicts: the
// collections a second of a billing run and the limit that binds.
//
// # The modelled store
//
// The store is memory.New in the index mode of the row (the legacy
// status index, or the due index with K shards) behind a decorator that
// knows, for every call, what DynamoDB would do:
//
//   - the items' sizes as DynamoDB counts them (the layout's encoding,
//     dynamotest.ItemSize), so a write costs 1 WCU a started KB, doubled in
//     a transaction (Update), and a read 1 RCU a started 4 KB, halved when
//     eventually consistent (index pages);
//   - which status index partitions a write touches: "<STATUS>#<shard>" on
//     the due index, the status on the legacy index, for the record's old
//     and new image. An index write whose key changes costs a delete on the
//     old partition and a put on the new one; a record that leaves the
//     sparse due index costs a delete only;
//   - the lock calls of the DynamoDB locker for a free lock (a GetItem, a
//     conditional PutItem, an UpdateItem to release) on the lock table.
//
// Every limit of the model is a bucket with a rate (an index partition's
// 1,000 WCU/s and 3,000 RCU/s, a table's quotas) and a clock: the units it
// accepted over its rate. There is one global modelled time: the mean of
// the shard runs' clocks, the processor's clock, or the backoff floor,
// whichever is latest. A repository write that would take a bucket more
// than Burst seconds ahead of the global time is refused with
// billing.ErrThrottled before it is applied; the collector's StoreBudget
// then backs off (a few microseconds of real time) and the record is left
// for the next pass of the run, and the global time moves on to where the
// bucket has room for half its burst. Buckets keep capacity they did not
// use (their clock never jumps to the global time): the model is a fluid
// one, and real scheduling jitter between goroutines must not lose the
// simulation capacity the modelled store had. Reads and lock writes are
// counted on their buckets but never refused.
//
// # The modelled clients
//
// Each shard run has a clock: a page's calls (DynamoDB at CallLatency,
// the processor at ProcessorLatency) are handled by min(Workers, users of
// the page) workers at once, and the next page is read when the page is
// done, as the collector does. The processor's clock advances 1/limit a
// request. Nothing reads the machine's clock: the result depends only on
// the counted work, so it is the same however loaded the machine is.
//
// The run's modelled duration is the longest clock of a limit of the
// model (the busiest index partition, the busier table, the slowest shard
// run, the processor); that limit binds. Collections a second are the due
// records over that duration.
package loadsim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/capacity"
	"github.com/dynabill/billing/memory"
)

// Config is one simulated row. Zero fields take the model's defaults
// (package capacity) where it has one.
type Config struct {
	// Index is the status index: capacity.IndexDue or capacity.IndexLegacy.
	Index capacity.Index
	// Shards is K: the due index's shards, all run at once in one
	// process (Config.ShardConcurrency = K). The legacy index has 1.
	Shards int
	// Due is the number of due SCHEDULED records, one per user.
	Due int
	// NotDue is the number of SCHEDULED records billed after the run, one
	// per user: the legacy index reads them too.
	NotDue int
	// Workers is the collector's Concurrency, per shard run.
	Workers int
	// PageSize is the items a status page reads. Defaults to 100, the
	// stores' default.
	PageSize int
	// ProcessorLimit is the processor's requests a second; 0 is none.
	ProcessorLimit float64
	// CallLatency and ProcessorLatency are the modelled latencies.
	CallLatency, ProcessorLatency time.Duration
	// PartitionWCU, PartitionRCU, TableWCU and TableRCU are the modelled
	// store's limits a second.
	PartitionWCU, PartitionRCU, TableWCU, TableRCU float64
	// Burst is how many seconds of its capacity a limit may run ahead of
	// the global modelled time before writes are refused. Defaults to 1.
	Burst float64
	// MaxPasses bounds the scheduled runs made to collect every due
	// record (throttled ones are left for the next). Defaults to 100.
	MaxPasses int
}

// withDefaults fills c's zero fields.
func (c Config) withDefaults() Config {
	def := capacity.Params{}.WithDefaults()
	if c.Index == "" {
		c.Index = capacity.IndexDue
	}
	c.Shards = max(c.Shards, 1)
	if c.Workers == 0 {
		c.Workers = def.Workers
	}
	if c.PageSize == 0 {
		c.PageSize = 100
	}
	if c.CallLatency == 0 {
		c.CallLatency = def.CallLatency
	}
	if c.ProcessorLatency == 0 {
		c.ProcessorLatency = def.ProcessorLatency
	}
	or := func(v, d float64) float64 {
		if v == 0 {
			return d
		}
		return v
	}
	c.PartitionWCU, c.PartitionRCU = or(c.PartitionWCU, def.PartitionWCU), or(c.PartitionRCU, def.PartitionRCU)
	c.TableWCU, c.TableRCU = or(c.TableWCU, def.TableWCU), or(c.TableRCU, def.TableRCU)
	c.Burst = or(c.Burst, 1)
	if c.MaxPasses == 0 {
		c.MaxPasses = 100
	}
	return c
}

// Result is what a simulation measured.
type Result struct {
	Config Config
	// Collected is the due records collected: the distinct charges.
	Collected int
	// Seconds is the modelled duration of the run; PerSecond and PerHour
	// are Collected over it.
	Seconds, PerSecond, PerHour float64
	// Binding is the limit whose clock is Seconds.
	Binding capacity.Limit
	// Clocks are the modelled seconds each limit took.
	Clocks map[capacity.Limit]float64
	// Passes is the scheduled runs made (each from the top of the index).
	Passes int
	// Throttled counts the repository writes refused; ThrottledUpdates
	// those of an outcome (after the charge), whose record the next
	// pass resolves by replaying the charge.
	Throttled, ThrottledUpdates int
	// ProviderCalls counts the processor's Collect calls: one a due record
	// plus one a replay.
	ProviderCalls, Replays int
	// Measured per collected record, the inputs of the model: DynamoDB
	// calls on the data tables and on the lock table; WCU of the data
	// tables and of the lock table; RCU of the data tables (index reads
	// included); index WCU in all and on the busiest index partition (on
	// the due index, times K: above IndexWCU by how unevenly the users
	// hash over the shards); index RCU; index items read.
	DataCalls, LockCalls, BaseWCU, LockWCU, RCU  float64
	IndexWCU, PartitionIndexWCU, IndexRCU, Reads float64
	// MaxItemSize and MaxHistorySize are the largest items written, bytes.
	MaxItemSize, MaxHistorySize int
}

// Params are the model's inputs for r: the simulation's configuration and
// its measured per-collection costs.
func (r Result) Params() capacity.Params {
	c := r.Config
	p := capacity.Params{
		Subscriptions: int64(c.Due + c.NotDue), DueFraction: float64(c.Due) / float64(c.Due+c.NotDue),
		DataCalls: r.DataCalls, LockCalls: r.LockCalls, BaseWCU: r.BaseWCU, LockWCU: r.LockWCU, RCU: r.RCU,
		PartitionWCU: c.PartitionWCU, PartitionRCU: c.PartitionRCU, TableWCU: c.TableWCU, TableRCU: c.TableRCU,
		Workers: c.Workers, CallLatency: c.CallLatency, ProcessorLatency: c.ProcessorLatency,
		Shards: []int{c.Shards}, ProcessorLimits: []float64{c.ProcessorLimit},
	}
	if c.Index == capacity.IndexLegacy {
		p.LegacyIndexWCU, p.LegacyPartitionIndexWCU = r.IndexWCU, r.PartitionIndexWCU
		p.IndexReadRCU = r.IndexRCU / r.Reads
		p.LegacyItemsReadPerDue = r.Reads
	} else {
		// The mean over the K partitions: how unevenly the hash spreads
		// the users is the simulation's to find.
		p.IndexWCU = r.IndexWCU
		p.IndexReadRCU = r.IndexRCU
	}
	return p
}

// Model evaluates the model with r's inputs and returns its row for r's
// index.
func (r Result) Model() (capacity.Row, error) {
	rows, err := capacity.Evaluate(r.Params())
	if err != nil {
		return capacity.Row{}, err
	}
	for _, row := range rows {
		if row.Index == r.Config.Index {
			return row, nil
		}
	}
	return capacity.Row{}, fmt.Errorf("loadsim: no %s row", r.Config.Index)
}

// now is the business time of the run: every due record is billed before
// it.
var now = time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)

// Run simulates cfg: it seeds the records, runs the scheduled run over
// every shard at once until no due record is left, checks that each was
// charged once and collected, and returns the measures.
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg = cfg.withDefaults()
	switch {
	case cfg.Due < 1:
		return Result{}, errors.New("loadsim: Config.Due: want at least 1")
	case cfg.Index == capacity.IndexLegacy && cfg.Shards != 1:
		return Result{}, errors.New("loadsim: the legacy index has one shard")
	case cfg.Index != capacity.IndexLegacy && cfg.Index != capacity.IndexDue:
		return Result{}, fmt.Errorf("loadsim: unknown index %q", cfg.Index)
	}
	opts := memory.Options{PageSize: cfg.PageSize}
	if cfg.Index == capacity.IndexDue {
		opts.StatusIndexMode, opts.DueShards = dynamostore.StatusIndexDue, cfg.Shards
	}
	store, err := memory.New(opts)
	if err != nil {
		return Result{}, fmt.Errorf("loadsim: %w", err)
	}
	if err := seed(ctx, store.Repository(), cfg); err != nil {
		return Result{}, err
	}
	w := newWorld(cfg)
	repo := &repository{inner: store.Repository(), w: w}
	clock := billingtest.NewClock(now)
	prov := &provider{w: w, repo: repo, seen: make(map[string]bool, cfg.Due)}
	c, err := billing.NewCollector(billing.Config{
		Repository: repo, Locker: &locker{inner: billingtest.NewLocker(clock, 0), r: repo}, Provider: prov, Clock: clock,
		Concurrency: cfg.Workers, ShardConcurrency: cfg.Shards, PagesPerInvocation: 1 << 30,
		StoreBudget: billing.StoreBudget{Backoff: time.Microsecond, MaxBackoff: 20 * time.Microsecond},
	})
	if err != nil {
		return Result{}, err
	}

	res := Result{Config: cfg}
	for {
		if res.Passes == cfg.MaxPasses {
			return res, fmt.Errorf("loadsim: due records left after %d passes", res.Passes)
		}
		res.Passes++
		rep, err := c.Run(ctx, billing.RunRequest{Kind: billing.RunScheduled})
		if err != nil {
			return res, fmt.Errorf("loadsim: pass %d: %w", res.Passes, err)
		}
		for _, f := range rep.Failed {
			if !errorsIsThrottled(f.Reason) {
				return res, fmt.Errorf("loadsim: pass %d: %s: %s", res.Passes, f.UserID, f.Reason)
			}
		}
		if rep.Attempted == 0 && rep.Unknown == 0 && len(rep.Failed) == 0 && rep.Collected == 0 {
			break
		}
	}
	if err := checkCollected(ctx, store.Repository(), cfg, prov); err != nil {
		return res, err
	}

	res.Clocks = w.clocks()
	res.Binding, res.Seconds = binding(res.Clocks)
	res.Collected = w.charges
	res.PerSecond = float64(res.Collected) / res.Seconds
	res.PerHour = res.PerSecond * 3600
	res.Throttled, res.ThrottledUpdates = w.throttled, w.throttledUpdates
	res.ProviderCalls, res.Replays = w.providerCalls, w.replays
	n := float64(res.Collected)
	res.DataCalls, res.LockCalls = float64(w.dataCalls)/n, float64(w.lockCalls)/n
	res.BaseWCU, res.LockWCU, res.RCU = w.table.units/n, w.lockTable.units/n, w.tableRead.units/n
	busiest := 0.0
	for _, b := range w.parts {
		res.IndexWCU += b.units / n
		busiest = max(busiest, b.units)
	}
	res.PartitionIndexWCU = busiest / n
	if cfg.Index == capacity.IndexDue {
		// K partitions share the day: the model's per-collection cost is
		// the busiest partition's share times K.
		res.PartitionIndexWCU *= float64(cfg.Shards)
	}
	res.IndexRCU, res.Reads = w.indexRead/n, float64(w.itemsRead)/n
	res.MaxItemSize, res.MaxHistorySize = w.maxItem, w.maxHistory
	return res, nil
}

func errorsIsThrottled(reason string) bool {
	return strings.Contains(reason, billing.ErrThrottled.Error())
}

// seed writes the due records (billed in the month before now) and the
// records billed after now, one per user, straight into the store.
func seed(ctx context.Context, repo billing.Repository, cfg Config) error {
	const batch = 5000
	total := cfg.Due + cfg.NotDue
	for start := 0; start < total; start += batch {
		recs := make([]billing.Period, 0, batch)
		for i := start; i < min(start+batch, total); i++ {
			bd := now.Add(-time.Duration(i%(28*24*60)+1) * time.Minute).Truncate(time.Second)
			if i >= cfg.Due {
				bd = now.AddDate(0, 0, 1+i%27)
			}
			recs = append(recs, billing.Period{
				UserID: userID(i), SubscriptionID: fmt.Sprintf("sub-%07d", i),
				BillingDate: bd, AnchorDay: bd.Day(), BillingPeriod: billing.BillingPeriod(bd), Status: billing.StatusScheduled,
				Amount: billing.MustParseAmount("9.99"), Term: billing.TermMonthly, ReceiptTierName: "Plus:v2",
				CreatedDate: now.AddDate(0, -1, -1), LastRunDate: now.AddDate(0, -1, -1),
			})
		}
		if _, err := repo.AddAll(ctx, recs); err != nil {
			return fmt.Errorf("loadsim: seed: %w", err)
		}
	}
	return nil
}

// userID is the i-th user's ID: a UUID-shaped string, as hosts use.
func userID(i int) string {
	// A fixed bijective mix of i, so IDs look random but repeat run to run.
	x := uint64(i)*0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019
	x ^= x >> 31
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 29
	return fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", uint32(x>>32), uint16(x>>16), uint16(x)&0xfff, i&0xfff, uint64(i)*2654435761&0xffffffffffff)
}

// checkCollected checks what the run left: no due record SCHEDULED or in
// flight, every due record COMPLETED, and each charged exactly once.
func checkCollected(ctx context.Context, repo billing.Repository, cfg Config, prov *provider) error {
	for cur := ""; ; {
		left, err := repo.QueryStatus(ctx, billing.StatusQuery{Status: billing.StatusScheduled, Before: now, Cursor: cur})
		if err != nil {
			return err
		}
		if len(left.Items) > 0 {
			return fmt.Errorf("loadsim: due records still SCHEDULED, first %s", left.Items[0].Key())
		}
		if cur = left.Next; cur == "" {
			break
		}
	}
	prov.mu.Lock()
	defer prov.mu.Unlock()
	if w := prov.w; w.charges != cfg.Due || len(prov.seen) != cfg.Due {
		return fmt.Errorf("loadsim: %d charges (%d keys) for %d due records", w.charges, len(prov.seen), cfg.Due)
	}
	for i := range cfg.Due {
		subs, err := repo.ListByUser(ctx, userID(i))
		if err != nil {
			return err
		}
		if len(subs) != 2 || subs[0].Status != billing.StatusCompleted || subs[0].InFlight() || subs[1].Status != billing.StatusScheduled {
			return fmt.Errorf("loadsim: user %s: want a COMPLETED record and the next period, have %d records", userID(i), len(subs))
		}
		if !prov.seen[billing.IdempotencyKey(subs[0].SubscriptionID, 1)] {
			return fmt.Errorf("loadsim: %s was not charged with its first key", subs[0].Key())
		}
	}
	return nil
}

// provider is a processor that always succeeds, answers a replayed key
// with its first answer, and charges each request to the modelled world.
type provider struct {
	w    *world
	repo *repository
	mu   sync.Mutex
	seen map[string]bool
}

func (p *provider) Collect(_ context.Context, req billing.PaymentRequest) (billing.PaymentResult, error) {
	p.w.processor(p.repo.shard(req.UserID))
	p.mu.Lock()
	defer p.mu.Unlock()
	p.w.mu.Lock()
	if p.seen[req.IdempotencyKey] {
		p.w.replays++
	} else {
		p.seen[req.IdempotencyKey] = true
		p.w.charges++
	}
	p.w.mu.Unlock()
	return billing.PaymentResult{Outcome: billing.OutcomeSucceeded, TransactionID: "tx-" + req.IdempotencyKey}, nil
}
