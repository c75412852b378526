package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCapacityDefaults(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "", "capacity")
	// Rows worked out by hand in internal/capacity's tests: a collection
	// takes (3.05 + 3) × 5 ms + 300 ms = 330.25 ms, so K runs of 4 workers
	// make K × 12.1 a second; 4,000,000 due.
	r.want(t, exitOK,
		"Busiest day: 4,000,000 of 10,000,000 subscriptions due (40%).",
		"(3.05 data + 3 lock calls) × 5ms + 300ms processor = 330.25ms; 4 workers a shard run.",
		"INDEX K PROCESSOR COLLECTIONS/S INVOICES/HOUR TIME_TO_BILL_4,000,000 BINDING $/MILLION_COLLECTIONS",
		"legacy 1 100/s 12.1 43,603 3d 19h 45m run concurrency 9.570",
		"due 8 100/s 96.9 348,827 11h 29m run concurrency 8.945",
		"due 32 100/s 100 360,000 11h 7m processor 8.945",
		"due 32 none 388 1,395,307 2h 53m run concurrency 8.945",
		"INDEX K INDEX_PARTITION_WCU INDEX_PARTITION_RCU TABLE_WCU TABLE_RCU RUN_CONCURRENCY",
		"legacy 1 333 2,400 4,444 37,736 12.1", // 3 of the legacy index's 4 WCU on its SCHEDULED partition
		"due 1 333 6,000 4,444 37,736 12.1",
		"due 32 10,667 192,000 4,444 37,736 388",
	)
	assert.Equal(t, "", r.stderr)
	// Rows: legacy then K = 1, 8, 32, for 100/s then none; ceilings: one
	// line per index and K.
	assert.Equal(t, 8, strings.Count(r.stdout, "100/s")+strings.Count(r.stdout, " none "), r.stdout)
}

// TestCapacityRaisedConcurrency is the docs' second table: with 200
// workers a shard the index binds at K = 1 and 8, the table at K = 32.
func TestCapacityRaisedConcurrency(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "", "capacity", "--workers", "200", "--processor-limit", "0")
	r.want(t, exitOK,
		"legacy 1 none 333 1,200,000 3h 20m index partition WCU 9.570", // 1000 / 3; the cost counts all 4 index WCU
		"due 1 none 333 1,200,000 3h 20m index partition WCU",          // 1000 / 3
		"due 8 none 2,667 9,600,000 25m index partition WCU",
		"due 32 none 4,444 16,000,000 15m table WCU",
		"due 32 10,667 192,000 4,444 37,736 19,379",
	)
	assert.NotContains(t, r.stdout, "100/s")
}

func TestCapacityFlags(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "", "capacity", "--subscriptions", "1000000", "--due-fraction", "0.25", "--shards", "2,4",
		"--processor-limit", "12.5", "--lock-calls", "0", "--processor-latency", "0", "--call-latency", "10ms",
		"--lock-wcu", "0", "--index-rcu", "0", "--wru-price", "1.25", "--rru-price", "0.25")
	r.want(t, exitOK,
		"Busiest day: 250,000 of 1,000,000 subscriptions due (25%).",
		"(3.05 data + 0 lock calls) × 10ms + 0s processor = 30.5ms",
		// 2 × 4 / 0.0305 = 262.3/s, above the processor's 12.5/s; (9 + 0 + 3) × 1.25 + 1.06 × 0.25.
		"due 2 12.5/s 12.5 45,000 5h 34m processor 15.265",
		"due 4 1,333 - 4,444 37,736 525", // no index reads: no index RCU ceiling
		"legacy 1 333 - 4,444 37,736 131",
	)
	assert.Equal(t, 1, strings.Count(squeeze(r.stdout), "legacy 1 12.5/s"), r.stdout)

	// Every legacy index write on one partition, as the model had it
	// before the simulation.
	r = runCLI(t, "", "capacity", "--workers", "200", "--processor-limit", "0", "--legacy-partition-wcu", "4")
	r.want(t, exitOK, "(legacy index 4, 4 on its SCHEDULED partition)", "legacy 1 none 250 900,000 4h 27m index partition WCU")
}

func TestCapacityJSON(t *testing.T) {
	t.Parallel()
	var got struct {
		Inputs struct {
			Due                 int64   `json:"due"`
			CollectionLatencyMS float64 `json:"collection_latency_ms"`
			Shards              []int   `json:"shards"`
		} `json:"inputs"`
		Rows []struct {
			Index      string  `json:"index"`
			Shards     int     `json:"shards"`
			Limit      float64 `json:"processor_limit"`
			PerSecond  float64 `json:"collections_per_second"`
			Binding    string  `json:"binding"`
			TimeToBill string  `json:"time_to_bill"`
			Seconds    float64 `json:"seconds_to_bill_due"`
			Caps       []struct {
				Limit     string  `json:"limit"`
				PerSecond float64 `json:"per_second"`
			} `json:"caps"`
		} `json:"rows"`
	}
	r := runCLI(t, "", "capacity", "--json")
	r.want(t, exitOK)
	r.decode(t, &got)
	assert.Equal(t, int64(4_000_000), got.Inputs.Due)
	assert.InDelta(t, 330.25, got.Inputs.CollectionLatencyMS, 1e-9)
	assert.Equal(t, []int{1, 8, 32}, got.Inputs.Shards)
	require.Len(t, got.Rows, 8)
	last := got.Rows[7]
	assert.Equal(t, "due", last.Index)
	assert.Equal(t, 32, last.Shards)
	assert.Equal(t, 0.0, last.Limit)
	assert.Equal(t, "run concurrency", last.Binding)
	assert.InDelta(t, 128/0.33025, last.PerSecond, 1e-9)
	assert.InDelta(t, 10320.3125, last.Seconds, 1e-6)
	assert.Equal(t, "2h 53m", last.TimeToBill)
	assert.Len(t, last.Caps, 5, "no processor cap without a processor limit")
	assert.Equal(t, "processor", got.Rows[3].Binding)
	assert.Len(t, got.Rows[3].Caps, 6)
}

// TestCapacityNeedsNoDynamoDB: the model is arithmetic; it makes no
// client, so it runs with no endpoint and no credentials (runCLI's
// environment is empty) and ignores an endpoint nothing listens on.
func TestCapacityNeedsNoDynamoDB(t *testing.T) {
	t.Parallel()
	want := runCLI(t, "", "capacity")
	want.want(t, exitOK)
	r := runCLI(t, "", "--endpoint", "http://127.0.0.1:1", "capacity", "--table", "nowhere")
	r.want(t, exitOK)
	assert.Equal(t, want.stdout, r.stdout)

	var out, errb bytes.Buffer
	a := &app{ctx: t.Context(), stdin: strings.NewReader(""), stdout: &out, stderr: &errb, env: noEnv}
	require.NoError(t, a.main([]string{"capacity"}))
	assert.Nil(t, a.client, "capacity made a DynamoDB client")
}

func TestCapacityUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--shards", "0"}, "--shards 0: want 1 to 1000000"},
		{[]string{"--shards", "8,x"}, `invalid value "8,x" for flag -shards: "x" is not a whole number`},
		{[]string{"--processor-limit", "-1"}, "--processor-limit -1"},
		{[]string{"--processor-limit", "fast"}, `"fast" is not a number`},
		{[]string{"--due-fraction", "1.5"}, "--due-fraction 1.5: want more than 0, at most 1"},
		{[]string{"--due-fraction", "0"}, "--due-fraction 0"},
		{[]string{"--subscriptions", "0"}, "--subscriptions 0: want at least 1"},
		{[]string{"--workers", "0"}, "--workers 0: want at least 1"},
		{[]string{"--wcu", "0"}, "--wcu 0: want more than 0"},
		{[]string{"--table-wcu", "NaN"}, "--table-wcu NaN"},
		{[]string{"--lock-calls", "-1"}, "--lock-calls -1: must not be negative"},
		{[]string{"--call-latency", "-5ms"}, "--call-latency -5ms: must not be negative"},
		{[]string{"--legacy-reads-per-due", "0.5"}, "--legacy-reads-per-due 0.5: want at least 1"},
		{[]string{"--legacy-partition-wcu", "5"}, "--legacy-partition-wcu 5: want more than 0, at most --legacy-index-wcu 4"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, "", append([]string{"capacity"}, tc.args...)...)
			r.want(t, exitUsage, tc.want, "Run 'billingctl help capacity' for usage.")
			assert.Equal(t, "", r.stdout)
		})
	}
}

func TestCapacityHelp(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "", "help", "capacity")
	r.want(t, exitOK, "Usage: billingctl capacity", "needs no DynamoDB", "--shards K", "(default 1,8,32)",
		"--processor-limit rates", "(default 100,0)", "--call-latency duration", "(default 5ms)", "(default 1/--due-fraction)")
}

func TestGrouped(t *testing.T) {
	t.Parallel()
	for v, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 4444.44: "4,444", 1374497.3: "1,374,497",
		-12345: "-12,345", 16e6: "16,000,000"} {
		assert.Equal(t, want, grouped(v, 0), "%v", v)
	}
	assert.Equal(t, "1,234.57", grouped(1234.567, 2))
}
