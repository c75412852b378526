package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/dynabill/billing/internal/capacity"
)

var capacityCmd = &command{
	name:     "capacity",
	synopsis: "[--subscriptions N] [--due-fraction F] [--shards 1,8,32] [--processor-limit 100,0] [--workers W] ...",
	doc: `what bounds a billing run at scale: a capacity model
Prints, for the legacy status index and the sharded due index with K shards
(K index partitions for a day, K runs of --workers collections each), under
each processor limit: collections a second, invoices an hour, the time to
bill the day's due subscriptions, the limit that binds (index partition WCU
or RCU, table WCU or RCU, run concurrency, processor) and the on-demand cost
of a million collections; then every ceiling. The per-collection costs
default to the library's measurements for the legacy layout, the limits
and prices to DynamoDB's documented ones (docs/capacity.md). It is
arithmetic only: it needs no DynamoDB and ignores --endpoint and the table
flags. A count or latency of 0 means none; a processor limit of 0, no limit.`,
	run: runCapacity,
}

// intList is a flag of comma-separated integers.
type intList []int

func (l *intList) String() string {
	parts := make([]string, len(*l))
	for i, v := range *l {
		parts[i] = strconv.Itoa(v)
	}
	return strings.Join(parts, ",")
}

func (l *intList) Set(s string) error {
	var out intList
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return fmt.Errorf("%q is not a whole number", f)
		}
		out = append(out, v)
	}
	*l = out
	return nil
}

// floatList is a flag of comma-separated numbers.
type floatList []float64

func (l *floatList) String() string {
	parts := make([]string, len(*l))
	for i, v := range *l {
		parts[i] = strconv.FormatFloat(v, 'g', -1, 64)
	}
	return strings.Join(parts, ",")
}

func (l *floatList) Set(s string) error {
	var out floatList
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			return fmt.Errorf("%q is not a number", f)
		}
		out = append(out, v)
	}
	*l = out
	return nil
}

// capacityInputs are the model's inputs as the JSON output shows them.
type capacityInputs struct {
	Subscriptions         int64     `json:"subscriptions"`
	DueFraction           float64   `json:"due_fraction"`
	Due                   int64     `json:"due"`
	DataCalls             float64   `json:"data_calls"`
	LockCalls             float64   `json:"lock_calls"`
	WCU                   float64   `json:"wcu"`
	LockWCU               float64   `json:"lock_wcu"`
	RCU                   float64   `json:"rcu"`
	IndexWCU              float64   `json:"index_wcu"`
	IndexRCU              float64   `json:"index_rcu"`
	LegacyIndexWCU        float64   `json:"legacy_index_wcu"`
	LegacyPartitionWCU    float64   `json:"legacy_partition_wcu"`
	LegacyItemsReadPerDue float64   `json:"legacy_items_read_per_due"`
	PartitionWCU          float64   `json:"partition_wcu"`
	PartitionRCU          float64   `json:"partition_rcu"`
	TableWCU              float64   `json:"table_wcu"`
	TableRCU              float64   `json:"table_rcu"`
	Workers               int       `json:"workers"`
	CallLatencyMS         float64   `json:"call_latency_ms"`
	ProcessorLatencyMS    float64   `json:"processor_latency_ms"`
	CollectionLatencyMS   float64   `json:"collection_latency_ms"`
	Shards                []int     `json:"shards"`
	ProcessorLimits       []float64 `json:"processor_limits"`
	WRUPrice              float64   `json:"wru_price_per_million"`
	RRUPrice              float64   `json:"rru_price_per_million"`
}

// capacityRow is a row for JSON: the model's row and its time to bill as
// printed.
type capacityRow struct {
	capacity.Row
	TimeToBill string `json:"time_to_bill"`
}

// capacityCost is a number flag of the model's per-collection costs,
// limits and prices, bound to its field of capacity.Params.
type capacityCost struct {
	name, usage string
	def         float64
	field       func(*capacity.Params) *float64
	// zeroIsNone: the flag may be 0, which models none (the field's
	// negative, as Params reads 0 as the default); otherwise it must be
	// more than 0.
	zeroIsNone bool
}

var capacityCosts = []capacityCost{
	{"data-calls", "DynamoDB calls on the data tables per collection", capacity.DefaultDataCalls,
		func(p *capacity.Params) *float64 { return &p.DataCalls }, true},
	{"lock-calls", "lock table calls per collection", capacity.DefaultLockCalls,
		func(p *capacity.Params) *float64 { return &p.LockCalls }, true},
	{"wcu", "data tables' WCU per collection", capacity.DefaultBaseWCU,
		func(p *capacity.Params) *float64 { return &p.BaseWCU }, false},
	{"lock-wcu", "lock table's WCU per collection", capacity.DefaultLockWCU,
		func(p *capacity.Params) *float64 { return &p.LockWCU }, true},
	{"rcu", "RCU per collection", capacity.DefaultRCU,
		func(p *capacity.Params) *float64 { return &p.RCU }, true},
	{"index-wcu", "due index's WCU per collection", capacity.DefaultIndexWCU,
		func(p *capacity.Params) *float64 { return &p.IndexWCU }, false},
	{"index-rcu", "due index's read RCU per collection", capacity.DefaultIndexReadRCU,
		func(p *capacity.Params) *float64 { return &p.IndexReadRCU }, true},
	{"legacy-index-wcu", "legacy status index's WCU per collection", capacity.DefaultLegacyIndexWCU,
		func(p *capacity.Params) *float64 { return &p.LegacyIndexWCU }, false},
	{"partition-wcu", "one partition's WCU a second", capacity.DefaultPartitionWCU,
		func(p *capacity.Params) *float64 { return &p.PartitionWCU }, false},
	{"partition-rcu", "one partition's RCU a second", capacity.DefaultPartitionRCU,
		func(p *capacity.Params) *float64 { return &p.PartitionRCU }, false},
	{"table-wcu", "one table's WCU a second (the lock table's too)", capacity.DefaultTableWCU,
		func(p *capacity.Params) *float64 { return &p.TableWCU }, false},
	{"table-rcu", "one table's RCU a second", capacity.DefaultTableRCU,
		func(p *capacity.Params) *float64 { return &p.TableRCU }, false},
	{"wru-price", "on-demand `dollars` per million write request units", capacity.DefaultWriteRequestUnitPrice,
		func(p *capacity.Params) *float64 { return &p.WriteRequestUnitPrice }, true},
	{"rru-price", "on-demand `dollars` per million read request units", capacity.DefaultReadRequestUnitPrice,
		func(p *capacity.Params) *float64 { return &p.ReadRequestUnitPrice }, true},
}

func runCapacity(a *app, c *command, args []string) error {
	fs := a.newFlags(c)
	p := capacity.Params{Shards: capacity.DefaultShards(), ProcessorLimits: capacity.DefaultProcessorLimits()}
	fs.Int64Var(&p.Subscriptions, "subscriptions", capacity.DefaultSubscriptions, "subscriptions, N")
	fs.Float64Var(&p.DueFraction, "due-fraction", capacity.DefaultDueFraction, "share of the subscriptions due on the busiest day, 0 to 1")
	fs.Var((*intList)(&p.Shards), "shards", "shard counts `K` to evaluate, comma-separated: the due index's partitions for a day and its runs")
	fs.Var((*floatList)(&p.ProcessorLimits), "processor-limit", "processor limits to evaluate, comma-separated `rates` in requests a second; 0 is none")
	fs.IntVar(&p.Workers, "workers", capacity.DefaultWorkers, "collections one shard's run makes at once, W (the collector's Concurrency)")
	fs.DurationVar(&p.CallLatency, "call-latency", capacity.DefaultCallLatency, "latency of one DynamoDB call")
	fs.DurationVar(&p.ProcessorLatency, "processor-latency", capacity.DefaultProcessorLatency, "latency of one processor request")
	for _, f := range capacityCosts {
		fs.Float64Var(f.field(&p), f.name, f.def, f.usage)
	}
	fs.Float64Var(&p.LegacyItemsReadPerDue, "legacy-reads-per-due", 0, "items the legacy index reads per due item, at least 1 (default 1/--due-fraction)")
	fs.Float64Var(&p.LegacyPartitionIndexWCU, "legacy-partition-wcu", 0, "of --legacy-index-wcu, the WCU on the legacy index's SCHEDULED partition, at most --legacy-index-wcu (default 3/4 of it)")
	if err := a.parseNoArgs(c, fs, args); err != nil {
		return err
	}

	bad := func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }
	switch {
	case p.Subscriptions < 1:
		return usagef(c.name, "--subscriptions %d: want at least 1", p.Subscriptions)
	case !(p.DueFraction > 0 && p.DueFraction <= 1):
		return usagef(c.name, "--due-fraction %v: want more than 0, at most 1", p.DueFraction)
	case p.Workers < 1:
		return usagef(c.name, "--workers %d: want at least 1", p.Workers)
	case p.CallLatency < 0:
		return usagef(c.name, "--call-latency %v: must not be negative", p.CallLatency)
	case p.ProcessorLatency < 0:
		return usagef(c.name, "--processor-latency %v: must not be negative", p.ProcessorLatency)
	case len(p.Shards) == 0:
		return usagef(c.name, "--shards: want at least one shard count")
	case len(p.ProcessorLimits) == 0:
		return usagef(c.name, "--processor-limit: want at least one limit")
	case p.LegacyItemsReadPerDue != 0 && !(p.LegacyItemsReadPerDue >= 1 && !bad(p.LegacyItemsReadPerDue)):
		return usagef(c.name, "--legacy-reads-per-due %v: want at least 1", p.LegacyItemsReadPerDue)
	case p.LegacyPartitionIndexWCU != 0 && !(p.LegacyPartitionIndexWCU > 0 && p.LegacyPartitionIndexWCU <= p.LegacyIndexWCU && !bad(p.LegacyPartitionIndexWCU)):
		return usagef(c.name, "--legacy-partition-wcu %v: want more than 0, at most --legacy-index-wcu %v", p.LegacyPartitionIndexWCU, p.LegacyIndexWCU)
	}
	for _, k := range p.Shards {
		if k < 1 || k > 1_000_000 {
			return usagef(c.name, "--shards %d: want 1 to 1000000", k)
		}
	}
	for _, l := range p.ProcessorLimits {
		if !(l >= 0) || bad(l) {
			return usagef(c.name, "--processor-limit %v: want requests a second, 0 for none", l)
		}
	}
	for _, f := range capacityCosts {
		v := f.field(&p)
		switch {
		case f.zeroIsNone && (!(*v >= 0) || bad(*v)):
			return usagef(c.name, "--%s %v: must not be negative", f.name, *v)
		case !f.zeroIsNone && (!(*v > 0) || bad(*v)):
			return usagef(c.name, "--%s %v: want more than 0", f.name, *v)
		case f.zeroIsNone && *v == 0:
			*v = -1 // the model's none
		}
	}
	p.CallLatency, p.ProcessorLatency = noLatencyIfZero(p.CallLatency), noLatencyIfZero(p.ProcessorLatency)

	rows, err := capacity.Evaluate(p)
	if err != nil {
		return usagef(c.name, "%v", err)
	}
	p = p.WithDefaults()
	if !a.g.json {
		return writeCapacity(a.stdout, p, rows)
	}
	out := make([]capacityRow, len(rows))
	for i, r := range rows {
		out[i] = capacityRow{Row: r, TimeToBill: capacity.FormatDuration(r.Seconds)}
	}
	// The inputs as given: a "none" (negative in p) was 0.
	none := func(v float64) float64 { return max(v, 0) }
	ms := func(d time.Duration) float64 { return float64(max(d, 0)) / float64(time.Millisecond) }
	in := capacityInputs{
		Subscriptions: p.Subscriptions, DueFraction: p.DueFraction, Due: p.Due(),
		DataCalls: none(p.DataCalls), LockCalls: none(p.LockCalls), WCU: p.BaseWCU, LockWCU: none(p.LockWCU), RCU: none(p.RCU),
		IndexWCU: p.IndexWCU, IndexRCU: none(p.IndexReadRCU), LegacyIndexWCU: p.LegacyIndexWCU, LegacyPartitionWCU: p.LegacyPartitionIndexWCU, LegacyItemsReadPerDue: p.LegacyItemsReadPerDue,
		PartitionWCU: p.PartitionWCU, PartitionRCU: p.PartitionRCU, TableWCU: p.TableWCU, TableRCU: p.TableRCU,
		Workers: p.Workers, CallLatencyMS: ms(p.CallLatency), ProcessorLatencyMS: ms(p.ProcessorLatency),
		CollectionLatencyMS: ms(p.Latency()), Shards: p.Shards, ProcessorLimits: p.ProcessorLimits,
		WRUPrice: none(p.WriteRequestUnitPrice), RRUPrice: none(p.ReadRequestUnitPrice),
	}
	return writeJSON(a.stdout, map[string]any{"inputs": in, "rows": out})
}

// writeCapacity prints the inputs, the rows and their ceilings.
func writeCapacity(w io.Writer, p capacity.Params, rows []capacity.Row) error {
	due := p.Due()
	fmt.Fprintf(w, "Busiest day: %s of %s subscriptions due (%.4g%%).\n", grouped(float64(due), 0),
		grouped(float64(p.Subscriptions), 0), p.DueFraction*100)
	fmt.Fprintf(w, "A collection: (%s data + %s lock calls) × %v + %v processor = %v; %d workers a shard run.\n",
		num(max(p.DataCalls, 0)), num(max(p.LockCalls, 0)), max(p.CallLatency, 0), max(p.ProcessorLatency, 0), p.Latency(), p.Workers)
	fmt.Fprintf(w, "Per collection: %s WCU data tables + %s WCU lock table + %s WCU due index (legacy index %s, %s on its SCHEDULED partition), %s RCU;\n",
		num(p.BaseWCU), num(max(p.LockWCU, 0)), num(p.IndexWCU), num(p.LegacyIndexWCU), num(p.LegacyPartitionIndexWCU), num(max(p.RCU, 0)))
	fmt.Fprintf(w, "  index reads %s RCU (legacy: %s items read per due item, %s RCU).\n",
		num(max(p.IndexReadRCU, 0)), num(p.LegacyItemsReadPerDue), num(max(p.IndexReadRCU, 0)*p.LegacyItemsReadPerDue))
	fmt.Fprintf(w, "Limits: a partition %s WCU/s and %s RCU/s; a table %s WCU/s and %s RCU/s.\n",
		grouped(p.PartitionWCU, 0), grouped(p.PartitionRCU, 0), grouped(p.TableWCU, 0), grouped(p.TableRCU, 0))
	fmt.Fprintf(w, "Prices: $%s per million WRU, $%s per million RRU (on-demand).\n\n",
		num(max(p.WriteRequestUnitPrice, 0)), num(max(p.ReadRequestUnitPrice, 0)))

	tw := newTable(w)
	fmt.Fprintf(tw, "INDEX\tK\tPROCESSOR\tCOLLECTIONS/S\tINVOICES/HOUR\tTIME_TO_BILL_%s\tBINDING\t$/MILLION_COLLECTIONS\n", grouped(float64(due), 0))
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%.3f\n", r.Index, r.Shards, processorText(r.ProcessorLimit),
			rate(r.PerSecond), grouped(r.PerHour, 0), capacity.FormatDuration(r.Seconds), r.Binding, r.DollarsPerMillion)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprint(w, "\nCeilings, collections/s (the smallest binds; - is none):\n")
	tw = newTable(w)
	limits := []capacity.Limit{capacity.LimitIndexWCU, capacity.LimitIndexRCU, capacity.LimitTableWCU,
		capacity.LimitTableRCU, capacity.LimitConcurrency}
	fmt.Fprint(tw, "INDEX\tK")
	for _, l := range limits {
		fmt.Fprintf(tw, "\t%s", strings.ToUpper(strings.ReplaceAll(string(l), " ", "_")))
	}
	fmt.Fprintln(tw)
	seen := map[string]bool{}
	for _, r := range rows {
		// The ceilings other than the processor's do not depend on the
		// processor limit: one line per index and K.
		key := fmt.Sprint(r.Index, r.Shards)
		if seen[key] {
			continue
		}
		seen[key] = true
		fmt.Fprintf(tw, "%s\t%d", r.Index, r.Shards)
		for _, l := range limits {
			v, ok := r.Cap(l)
			cell := "-"
			if ok {
				cell = rate(v)
			}
			fmt.Fprintf(tw, "\t%s", cell)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// noLatencyIfZero maps a latency of 0 to the model's "none" (negative; its
// 0 means the default).
func noLatencyIfZero(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// processorText is a processor limit for a cell: "100/s" or "none".
func processorText(limit float64) string {
	if limit == 0 {
		return "none"
	}
	return num(limit) + "/s"
}

// rate formats collections a second: one decimal below 100, whole numbers
// with thousands separators above.
func rate(v float64) string {
	if v < 100 {
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return grouped(v, 0)
}

// num formats an input as given: 3.05, 3, 0.4.
func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// grouped formats v rounded to decimals places with thousands separators:
// 4,444.
func grouped(v float64, decimals int) string {
	s := strconv.FormatFloat(v, 'f', decimals, 64)
	intPart, frac, _ := strings.Cut(s, ".")
	sign := ""
	if strings.HasPrefix(intPart, "-") {
		sign, intPart = "-", intPart[1:]
	}
	var b strings.Builder
	for i, d := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(d)
	}
	if frac != "" {
		return sign + b.String() + "." + frac
	}
	return sign + b.String()
}
