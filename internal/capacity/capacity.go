// Package capacity is a model of what bounds a billing run at scale: how
// many collections a second the due index, the tables, the run's
// concurrency and the payment processor allow, which of them binds, how
// long the day's due records take, and what they cost on DynamoDB
// on-demand.
//
// The model is pure arithmetic on its inputs ([Params]): no DynamoDB, no
// clock, no randomness, so the same inputs give the same rows. Its
// defaults are the library's measurements for the legacy layout
// (README.md, "Collector cost") and DynamoDB's documented limits and
// prices (docs/capacity.md names the sources).
//
// Each row takes the smallest of these ceilings, in collections a second:
//
//	index partition WCU  partitions × PartitionWCU / index WCU per collection on the day's partition
//	index partition RCU  partitions × PartitionRCU / index RCU per collection
//	table WCU            TableWCU / max(BaseWCU, LockWCU)  (the lock table is a table of its own, same limit)
//	table RCU            TableRCU / RCU
//	run concurrency      runs × Workers / latency, latency = (DataCalls + LockCalls) × CallLatency + ProcessorLatency
//	processor            the processor's requests a second (one request per collection)
//
// On the sharded due index a row's K shards are K index partitions and K
// runs; the legacy status index (partition key billing_status, no sort
// key) puts a day's SCHEDULED index writes on one partition whatever the
// shards, and its row has one partition and one run. Of its four index
// writes a collection, three are on that partition (the in-flight write,
// the record leaving SCHEDULED, the next period arriving); the fourth puts
// the record under its new status, another partition key
// ([Params.LegacyPartitionIndexWCU]).
//
// The model is checked against a simulation: package internal/loadsim runs
// the collector over 100,000 due records on the in-memory store with
// these limits modelled, and its test asserts the model's rate within 10%
// and the same binding limit (docs/capacity.md, "Simulation").
package capacity

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Limit names a ceiling of the model.
type Limit string

// The limits, in the order a tie is resolved (the first binds).
const (
	LimitIndexWCU    Limit = "index partition WCU"
	LimitIndexRCU    Limit = "index partition RCU"
	LimitTableWCU    Limit = "table WCU"
	LimitTableRCU    Limit = "table RCU"
	LimitConcurrency Limit = "run concurrency"
	LimitProcessor   Limit = "processor"
)

// Index names the status index a row is about.
type Index string

const (
	// IndexDue is the sharded due index: its partition key spreads a
	// day's records over the K shards.
	IndexDue Index = "due"
	// IndexLegacy is the legacy billing_status-index: partition key
	// billing_status, no sort key, so a day's index writes land on one
	// partition and a run reads every SCHEDULED record.
	IndexLegacy Index = "legacy"
)

// The defaults of [Params].
const (
	DefaultSubscriptions  = 10_000_000
	DefaultDueFraction    = 0.4
	DefaultDataCalls      = 3.05
	DefaultLockCalls      = 3.0
	DefaultBaseWCU        = 9.0
	DefaultLockWCU        = 2.1
	DefaultRCU            = 1.06
	DefaultIndexWCU       = 3.0
	DefaultIndexReadRCU   = 0.5
	DefaultLegacyIndexWCU = 4.0
	// DefaultLegacyPartitionShare is the share of LegacyIndexWCU on the
	// day's partition of the legacy index by default: three writes of four.
	DefaultLegacyPartitionShare  = 0.75
	DefaultPartitionWCU          = 1000.0
	DefaultPartitionRCU          = 3000.0
	DefaultTableWCU              = 40_000.0
	DefaultTableRCU              = 40_000.0
	DefaultWorkers               = 4
	DefaultCallLatency           = 5 * time.Millisecond
	DefaultProcessorLatency      = 300 * time.Millisecond
	DefaultWriteRequestUnitPrice = 0.625
	DefaultReadRequestUnitPrice  = 0.125
)

// DefaultShards are the shard counts evaluated unless told otherwise.
func DefaultShards() []int { return []int{1, 8, 32} }

// DefaultProcessorLimits are the processor limits evaluated unless told
// otherwise: Stripe's live-mode 100 requests a second, and none.
func DefaultProcessorLimits() []float64 { return []float64{100, 0} }

// Params are the model's inputs. A zero field takes its default. Where a
// field says "negative means none", a negative value models zero (no lock
// calls, no processor latency, ...): zero itself means the default.
type Params struct {
	// Subscriptions is the number of subscriptions, N. Defaults to
	// 10,000,000.
	Subscriptions int64
	// DueFraction is the share of Subscriptions due on the busiest day
	// (the 1st of the month), in (0, 1]. Defaults to 0.4: 4,000,000 of
	// 10,000,000.
	DueFraction float64

	// DataCalls is the DynamoDB calls of the data tables per collected
	// subscription. Defaults to 3.05 (measured, legacy layout). Negative
	// means none.
	DataCalls float64
	// LockCalls is the lock table's calls per collected subscription.
	// Defaults to 3.0 (measured: 3.01). Negative means none.
	LockCalls float64
	// BaseWCU is the write capacity units per collected subscription on
	// the data tables (the subscriptions and history tables, counted
	// against one table's limit). Defaults to 9 (measured).
	BaseWCU float64
	// LockWCU is the write capacity units per collected subscription on
	// the lock table. Defaults to 2.1 (measured). Negative means none.
	LockWCU float64
	// RCU is the read capacity units per collected subscription (the run's
	// index reads included). Defaults to 1.06 (measured). Negative means
	// none.
	RCU float64
	// IndexWCU is the due index's write capacity units per collection:
	// the in-flight write, the record leaving the index and the next
	// period entering it. Defaults to 3 (measured:
	// BenchmarkCollectorDynamoDB, index WCU of the due layout less the
	// legacy one's).
	IndexWCU float64
	// IndexReadRCU is the due index's read capacity units per collection:
	// one item read per due item, at most 4 KB, eventually consistent.
	// Defaults to 0.5. Negative means none.
	IndexReadRCU float64
	// LegacyIndexWCU is the legacy status index's write capacity units per
	// collection: the in-flight write, the status change (a delete and a
	// put) and the next period. Defaults to 4 (counted from the same
	// benchmark). The cost counts all of them.
	LegacyIndexWCU float64
	// LegacyPartitionIndexWCU is the part of LegacyIndexWCU written to the
	// day's partition of the legacy index, the SCHEDULED key: the in-flight
	// write, the record leaving it (a delete) and the next period entering
	// it. The put of the record under its new status is on another
	// partition key. The index partition WCU ceiling divides by it.
	// Defaults to DefaultLegacyPartitionShare × LegacyIndexWCU (3 of the
	// default 4: internal/loadsim counts these writes partition by
	// partition). At most LegacyIndexWCU.
	LegacyPartitionIndexWCU float64
	// LegacyItemsReadPerDue is the items a run reads on the legacy status
	// index per due item: it reads every SCHEDULED record and filters on
	// billing_date. At least 1. Defaults to 1/DueFraction (every
	// subscription SCHEDULED).
	LegacyItemsReadPerDue float64

	// PartitionWCU and PartitionRCU are one partition's ceilings, per
	// second. Default to DynamoDB's 1,000 WCU and 3,000 RCU.
	PartitionWCU float64
	PartitionRCU float64
	// TableWCU and TableRCU are one table's ceilings, per second (the
	// lock table has the same). Default to 40,000 each, DynamoDB's default
	// table-level quota for on-demand tables.
	TableWCU float64
	TableRCU float64

	// Workers is the collections one shard's run makes at once, W (the
	// collector's Config.Concurrency). Defaults to 4.
	Workers int
	// CallLatency is the latency of one DynamoDB call. Defaults to 5ms.
	// Negative means none.
	CallLatency time.Duration
	// ProcessorLatency is the latency of one processor request. Defaults
	// to 300ms. Negative means none.
	ProcessorLatency time.Duration

	// Shards are the shard counts K to evaluate, each at least 1. Default
	// to 1, 8 and 32.
	Shards []int
	// ProcessorLimits are the processor limits to evaluate, in requests a
	// second (one request per collection); 0 is no limit. Default to 100
	// (Stripe, live mode) and 0.
	ProcessorLimits []float64

	// WriteRequestUnitPrice and ReadRequestUnitPrice are the on-demand
	// prices in dollars per million request units. Default to 0.625 and
	// 0.125 (us-east-1). Negative means free.
	WriteRequestUnitPrice float64
	ReadRequestUnitPrice  float64
}

// WithDefaults returns p with its zero fields set to their defaults.
// Negative "none" values are kept; Evaluate reads them as zero.
func (p Params) WithDefaults() Params {
	p.Subscriptions = orDefault(p.Subscriptions, DefaultSubscriptions)
	p.DueFraction = orDefault(p.DueFraction, DefaultDueFraction)
	p.DataCalls = orDefault(p.DataCalls, DefaultDataCalls)
	p.LockCalls = orDefault(p.LockCalls, DefaultLockCalls)
	p.BaseWCU = orDefault(p.BaseWCU, DefaultBaseWCU)
	p.LockWCU = orDefault(p.LockWCU, DefaultLockWCU)
	p.RCU = orDefault(p.RCU, DefaultRCU)
	p.IndexWCU = orDefault(p.IndexWCU, DefaultIndexWCU)
	p.IndexReadRCU = orDefault(p.IndexReadRCU, DefaultIndexReadRCU)
	p.LegacyIndexWCU = orDefault(p.LegacyIndexWCU, DefaultLegacyIndexWCU)
	p.LegacyPartitionIndexWCU = orDefault(p.LegacyPartitionIndexWCU, DefaultLegacyPartitionShare*p.LegacyIndexWCU)
	if p.LegacyItemsReadPerDue == 0 && p.DueFraction > 0 {
		p.LegacyItemsReadPerDue = 1 / p.DueFraction
	}
	p.PartitionWCU = orDefault(p.PartitionWCU, DefaultPartitionWCU)
	p.PartitionRCU = orDefault(p.PartitionRCU, DefaultPartitionRCU)
	p.TableWCU = orDefault(p.TableWCU, DefaultTableWCU)
	p.TableRCU = orDefault(p.TableRCU, DefaultTableRCU)
	p.Workers = orDefault(p.Workers, DefaultWorkers)
	p.CallLatency = orDefault(p.CallLatency, DefaultCallLatency)
	p.ProcessorLatency = orDefault(p.ProcessorLatency, DefaultProcessorLatency)
	if p.Shards == nil {
		p.Shards = DefaultShards()
	}
	if p.ProcessorLimits == nil {
		p.ProcessorLimits = DefaultProcessorLimits()
	}
	p.WriteRequestUnitPrice = orDefault(p.WriteRequestUnitPrice, DefaultWriteRequestUnitPrice)
	p.ReadRequestUnitPrice = orDefault(p.ReadRequestUnitPrice, DefaultReadRequestUnitPrice)
	return p
}

func orDefault[T int | int64 | float64 | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// none reads a "negative means none" value.
func none[T float64 | time.Duration](v T) T { return max(v, 0) }

// Validate reports the first input the model cannot use, after defaults.
func (p Params) Validate() error {
	p = p.WithDefaults()
	type input struct {
		name string
		v    float64
	}
	for _, f := range []input{
		{"DueFraction", p.DueFraction}, {"DataCalls", p.DataCalls}, {"LockCalls", p.LockCalls},
		{"BaseWCU", p.BaseWCU}, {"LockWCU", p.LockWCU}, {"RCU", p.RCU}, {"IndexWCU", p.IndexWCU},
		{"IndexReadRCU", p.IndexReadRCU}, {"LegacyIndexWCU", p.LegacyIndexWCU}, {"LegacyPartitionIndexWCU", p.LegacyPartitionIndexWCU},
		{"LegacyItemsReadPerDue", p.LegacyItemsReadPerDue}, {"PartitionWCU", p.PartitionWCU},
		{"PartitionRCU", p.PartitionRCU}, {"TableWCU", p.TableWCU}, {"TableRCU", p.TableRCU},
		{"WriteRequestUnitPrice", p.WriteRequestUnitPrice}, {"ReadRequestUnitPrice", p.ReadRequestUnitPrice},
	} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return fmt.Errorf("capacity: Params.%s: %v is not a number", f.name, f.v)
		}
	}
	for _, f := range []input{
		{"BaseWCU", p.BaseWCU}, {"IndexWCU", p.IndexWCU}, {"LegacyIndexWCU", p.LegacyIndexWCU}, {"LegacyPartitionIndexWCU", p.LegacyPartitionIndexWCU},
		{"PartitionWCU", p.PartitionWCU}, {"PartitionRCU", p.PartitionRCU}, {"TableWCU", p.TableWCU},
		{"TableRCU", p.TableRCU},
	} {
		if f.v < 0 {
			return fmt.Errorf("capacity: Params.%s: negative %v", f.name, f.v)
		}
	}
	switch {
	case p.Subscriptions < 0:
		return fmt.Errorf("capacity: Params.Subscriptions: negative %d", p.Subscriptions)
	case p.DueFraction < 0 || p.DueFraction > 1:
		return fmt.Errorf("capacity: Params.DueFraction: %v is not in (0, 1]", p.DueFraction)
	case p.LegacyPartitionIndexWCU > p.LegacyIndexWCU:
		return fmt.Errorf("capacity: Params.LegacyPartitionIndexWCU: %v is more than LegacyIndexWCU %v", p.LegacyPartitionIndexWCU, p.LegacyIndexWCU)
	case p.LegacyItemsReadPerDue < 1:
		return fmt.Errorf("capacity: Params.LegacyItemsReadPerDue: %v is less than 1 (a run reads every due item)", p.LegacyItemsReadPerDue)
	case p.Workers < 0:
		return fmt.Errorf("capacity: Params.Workers: negative %d", p.Workers)
	case len(p.Shards) == 0:
		return errors.New("capacity: Params.Shards: empty")
	case len(p.ProcessorLimits) == 0:
		return errors.New("capacity: Params.ProcessorLimits: empty")
	}
	for _, k := range p.Shards {
		if k < 1 {
			return fmt.Errorf("capacity: Params.Shards: %d is less than 1", k)
		}
	}
	for _, l := range p.ProcessorLimits {
		if math.IsNaN(l) || math.IsInf(l, 0) || l < 0 {
			return fmt.Errorf("capacity: Params.ProcessorLimits: %v is not a rate (0 is no limit)", l)
		}
	}
	return nil
}

// Due is the number of subscriptions due on the busiest day:
// Subscriptions × DueFraction, rounded.
func (p Params) Due() int64 {
	p = p.WithDefaults()
	return int64(math.Round(float64(p.Subscriptions) * p.DueFraction))
}

// Latency is one collection's latency in a run: (DataCalls + LockCalls) ×
// CallLatency + ProcessorLatency, the calls one after the other.
func (p Params) Latency() time.Duration {
	p = p.WithDefaults()
	calls := none(p.DataCalls) + none(p.LockCalls)
	return time.Duration(math.Round(calls*float64(none(p.CallLatency)))) + none(p.ProcessorLatency)
}

// latencySeconds is Latency in seconds, without rounding to nanoseconds.
func (p Params) latencySeconds() float64 {
	calls := none(p.DataCalls) + none(p.LockCalls)
	return calls*none(p.CallLatency).Seconds() + none(p.ProcessorLatency).Seconds()
}

// Cap is one ceiling of a row, in collections a second.
type Cap struct {
	Limit     Limit   `json:"limit"`
	PerSecond float64 `json:"per_second"`
}

// Row is the model's answer for one index, shard count and processor
// limit.
type Row struct {
	// Index is the status index: due (sharded) or legacy.
	Index Index `json:"index"`
	// Shards is K: the due index's partitions for a day and the runs that
	// work them, one each. The legacy row has 1.
	Shards int `json:"shards"`
	// ProcessorLimit is the processor's requests a second, 0 for none.
	ProcessorLimit float64 `json:"processor_limit"`
	// Caps are the row's ceilings in the order of the Limit constants;
	// a limit the inputs leave unbounded (no processor limit, no reads,
	// no latency) is left out.
	Caps []Cap `json:"caps"`
	// PerSecond is the collections a second: the smallest cap.
	PerSecond float64 `json:"collections_per_second"`
	// PerHour is PerSecond × 3600: invoices an hour.
	PerHour float64 `json:"invoices_per_hour"`
	// Due is the number of due subscriptions billed ([Params.Due]).
	Due int64 `json:"due"`
	// Seconds is the time to bill Due at PerSecond.
	Seconds float64 `json:"seconds_to_bill_due"`
	// Binding is the limit of the smallest cap.
	Binding Limit `json:"binding"`
	// DollarsPerMillion is the on-demand cost of a million collections:
	// (BaseWCU + LockWCU + index WCU) × WriteRequestUnitPrice + RCU ×
	// ReadRequestUnitPrice.
	DollarsPerMillion float64 `json:"dollars_per_million_collections"`
}

// Cap returns the row's ceiling of limit l and whether it has one.
func (r Row) Cap(l Limit) (float64, bool) {
	for _, c := range r.Caps {
		if c.Limit == l {
			return c.PerSecond, true
		}
	}
	return 0, false
}

// Evaluate runs the model: for each processor limit, the legacy status
// index's row, then the due index's row for each shard count, in the
// order of p.ProcessorLimits and p.Shards.
func Evaluate(p Params) ([]Row, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	p = p.WithDefaults()
	rows := make([]Row, 0, len(p.ProcessorLimits)*(len(p.Shards)+1))
	for _, limit := range p.ProcessorLimits {
		rows = append(rows, p.row(IndexLegacy, 1, limit))
		for _, k := range p.Shards {
			rows = append(rows, p.row(IndexDue, k, limit))
		}
	}
	return rows, nil
}

// row evaluates one index with k shards (partitions and runs) under a
// processor limit; p has its defaults and is valid.
func (p Params) row(index Index, k int, limit float64) Row {
	// indexWCU is the cost, partWCU what the day's partition takes.
	indexWCU, partWCU, indexRCU := p.IndexWCU, p.IndexWCU, none(p.IndexReadRCU)
	if index == IndexLegacy {
		indexWCU, partWCU, indexRCU = p.LegacyIndexWCU, p.LegacyPartitionIndexWCU, indexRCU*p.LegacyItemsReadPerDue
	}
	parts := float64(k)
	var caps []Cap
	add := func(l Limit, perSecond float64, bounded bool) {
		if bounded {
			caps = append(caps, Cap{Limit: l, PerSecond: perSecond})
		}
	}
	add(LimitIndexWCU, parts*p.PartitionWCU/partWCU, true)
	add(LimitIndexRCU, parts*p.PartitionRCU/indexRCU, indexRCU > 0)
	add(LimitTableWCU, p.TableWCU/max(p.BaseWCU, none(p.LockWCU)), true)
	add(LimitTableRCU, p.TableRCU/none(p.RCU), p.RCU > 0)
	lat := p.latencySeconds()
	add(LimitConcurrency, float64(k)*float64(p.Workers)/lat, lat > 0)
	add(LimitProcessor, limit, limit > 0)

	best := caps[0]
	for _, c := range caps[1:] {
		if c.PerSecond < best.PerSecond {
			best = c
		}
	}
	due := p.Due()
	wru := p.BaseWCU + none(p.LockWCU) + indexWCU
	return Row{
		Index: index, Shards: k, ProcessorLimit: limit, Caps: caps,
		PerSecond: best.PerSecond, PerHour: best.PerSecond * 3600, Due: due,
		Seconds: float64(due) / best.PerSecond, Binding: best.Limit,
		DollarsPerMillion: wru*none(p.WriteRequestUnitPrice) + none(p.RCU)*none(p.ReadRequestUnitPrice),
	}
}

// FormatDuration formats a time to bill, rounded up: "45s" under a minute,
// then to the minute: "15m", "2h 53m", "3d 19h 45m". A time too long to
// say is "never".
func FormatDuration(seconds float64) string {
	switch {
	case math.IsNaN(seconds) || seconds > 1e15:
		return "never"
	case seconds <= 0:
		return "0s"
	case seconds < 60:
		return fmt.Sprintf("%.0fs", max(math.Ceil(seconds-1e-9), 1))
	}
	m := int64(math.Ceil(seconds/60 - 1e-9))
	d, h, m := m/(24*60), m/60%24, m%60
	switch {
	case d > 0:
		return fmt.Sprintf("%dd %dh %dm", d, h, m)
	case h > 0:
		return fmt.Sprintf("%dh %dm", h, m)
	}
	return fmt.Sprintf("%dm", m)
}
