package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/dynamostore"
)

var indexBackfillCmd = &command{
	name:     "index backfill",
	synopsis: "[--create-index] [--page N] [--rate N] [--from TOKEN]",
	doc: `key existing records for the due index of --due-shards, paced, resumable
Moves a legacy table to the sharded due index: scans the subscriptions table
and writes billing_due ("<status>#<shard>") where a record lacks the key its
status and user call for with --due-shards K (and removes it from records in
a status runs do not read), each write conditional on the record read, so a
record a run or an admin change wrote meanwhile is left to its writer
("changed"). Nothing else on a record changes; a rerun writes nothing new.
With --layout single it does the same for the single table's period items
(the user is the subscription); its other items are scanned and left alone.

The migration: give every writer --due-shards K (TableConfig.DueShards, or
SingleTableConfig.DueShards with SingleTableStoreConfig.DueIndexPending),
then 'index backfill --create-index' (adds the index with UpdateTable and
waits until it is ACTIVE), then run 'index backfill' again until a pass
updates 0 items, then read with --status-index due.

Pages are paced to at most --rate items scanned a second (a scan page of N
items costs about N/40 read units, each updated item a write unit and its
index writes). A line per page on stderr gives the totals and the command
that resumes after the page; after an interruption or a failed page, that
command (with --from) continues where the scan stopped. Against AWS (no
--endpoint) it needs --yes.`,
	run: runIndexBackfill,
}

// backfillSummary is what one invocation of index backfill did.
type backfillSummary struct {
	Table     string `json:"table"`
	Index     string `json:"index"`
	DueShards int    `json:"due_shards"`
	// IndexStatus is the due index's status when the pass ended, "" when
	// the table has none.
	IndexStatus string `json:"index_status"`
	// From is the token the pass started from, "" for the table's start.
	From    string `json:"from"`
	Pages   int    `json:"pages"`
	Scanned int    `json:"scanned"`
	Updated int    `json:"updated"`
	Changed int    `json:"changed"`
	// Clean reports a pass over the whole table that wrote nothing and
	// met no concurrent change: every record has its due key.
	Clean bool   `json:"clean_pass"`
	Hint  string `json:"hint"`
}

func (s *backfillSummary) add(p dynamostore.BackfillPage) {
	s.Scanned += p.Scanned
	s.Updated += p.Updated
	s.Changed += p.Changed
}

// counts are the item totals so far, as the progress lines give them.
func (s *backfillSummary) counts() string {
	return fmt.Sprintf("%d scanned, %d updated, %d changed", s.Scanned, s.Updated, s.Changed)
}

const (
	defaultBackfillPage = 100
	defaultBackfillRate = 500
)

func runIndexBackfill(a *app, c *command, args []string) error {
	fs := a.newFlags(c)
	create := fs.Bool("create-index", false, "first add the due index to the table (UpdateTable) unless it exists, and wait until it is ACTIVE")
	pageSize := fs.Int("page", defaultBackfillPage, "`N` items scanned per page (the Scan's Limit)")
	rate := fs.Int("rate", defaultBackfillRate, "at most `N` items scanned per second; 0 for no pacing")
	from := fs.String("from", "", "resume from the `TOKEN` a progress line printed (default: the table's start)")
	if err := a.parseNoArgs(c, fs, args); err != nil {
		return err
	}
	if *pageSize < 1 {
		return usagef(c.name, "--page %d: want at least 1", *pageSize)
	}
	if *rate < 0 {
		return usagef(c.name, "--rate %d: want 0 (no pacing) or more", *rate)
	}
	if a.g.dueShards == 0 {
		return usagef(c.name, "index backfill needs --due-shards K: the number of shards every writer uses")
	}
	if a.g.endpoint == "" && !a.g.yes {
		return errors.New("index backfill writes the due key on every record of the table that lacks it; " +
			"no --endpoint (or " + endpointEnv + ") means AWS: to go ahead, pass --yes")
	}
	client, err := a.dynamo()
	if err != nil {
		return err
	}
	cfg := a.tables()
	var repo interface {
		BackfillDue(ctx context.Context, token string, limit int) (dynamostore.BackfillPage, error)
	}
	if a.single() {
		cfg.DueIndex = a.singleTable().DueIndex
		repo, err = a.singleStore(client, *pageSize)
	} else {
		repo, err = dynamostore.NewRepository(dynamostore.Config{Client: client, Tables: cfg, PageSize: *pageSize})
	}
	if err != nil {
		return err
	}
	sum := backfillSummary{Table: cfg.Subscriptions, Index: cfg.DueIndex, DueShards: cfg.DueShards, From: *from}
	if sum.IndexStatus, err = a.dueIndex(client, cfg, *create); err != nil {
		return err
	}

	resume := func(token string) string {
		return a.backfillCommand(*pageSize, *rate, token)
	}
	stopped := func(token string) {
		fmt.Fprintf(a.stderr, "backfill stopped after %s: %s; resume: %s\n", plural(sum.Pages, "page"), sum.counts(), resume(token))
	}
	start := a.clock()
	token := *from
	for {
		page, err := repo.BackfillDue(a.ctx, token, *pageSize)
		sum.add(page)
		if err != nil {
			if sum.Pages == 0 && errors.Is(err, billing.ErrInvalidCursor) {
				return usagef(c.name, "--from: not a token of a backfill of %s with --due-shards %d: %v", cfg.Subscriptions, cfg.DueShards, err)
			}
			stopped(token)
			return fmt.Errorf("index backfill: page %d failed (its writes are idempotent, resume redoes it): %w", sum.Pages+1, err)
		}
		sum.Pages++
		token = page.Next
		if token == "" {
			fmt.Fprintf(a.stderr, "backfill: %s, %s; done: the scan reached the end of the table\n", plural(sum.Pages, "page"), sum.counts())
			break
		}
		fmt.Fprintf(a.stderr, "backfill: %s, %s; resume: %s\n", plural(sum.Pages, "page"), sum.counts(), resume(token))
		if *rate > 0 {
			// The pace counts what this invocation scanned: sum's totals.
			due := start.Add(time.Duration(sum.Scanned) * time.Second / time.Duration(*rate))
			if d := due.Sub(a.clock()); d > 0 {
				if err := a.pause(d); err != nil {
					stopped(token)
					return fmt.Errorf("index backfill interrupted: %w", err)
				}
			}
		}
	}

	// The index may have become ACTIVE meanwhile (or been added); an
	// ACTIVE one stays so, and needs no second look.
	if sum.IndexStatus != string(types.IndexStatusActive) {
		if _, g, err := a.describeDue(client, cfg); err == nil && g != nil {
			sum.IndexStatus = string(g.IndexStatus)
		}
	}
	sum.Clean = sum.From == "" && sum.Updated == 0 && sum.Changed == 0
	switch {
	case sum.Clean && sum.IndexStatus == string(types.IndexStatusActive):
		sum.Hint = fmt.Sprintf("a full pass updated 0 items: every record has its due key; reads can switch to --status-index due (with --due-shards %d)", sum.DueShards)
	case sum.Clean:
		sum.Hint = fmt.Sprintf("a full pass updated 0 items, but the index %s is %s: add it (index backfill --create-index) "+
			"and wait until it is ACTIVE before reads switch to --status-index due", sum.Index, cmpOr(sum.IndexStatus, "missing"))
	default:
		sum.Hint = "run again to confirm: a pass that updates 0 items means reads can switch to --status-index due"
	}
	if a.g.json {
		return writeJSON(a.stdout, sum)
	}
	tw := newTable(a.stdout)
	fmt.Fprintln(tw, "TABLE\tINDEX\tINDEX_STATUS\tSHARDS\tFROM\tPAGES\tSCANNED\tUPDATED\tCHANGED")
	fromText := "start"
	if sum.From != "" {
		fromText = "--from"
	}
	fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\t%d\t%d\t%d\n", sum.Table, sum.Index, cmpOr(sum.IndexStatus, "MISSING"),
		sum.DueShards, fromText, sum.Pages, sum.Scanned, sum.Updated, sum.Changed)
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(a.stdout, "\n%s.\n", capitalize(sum.Hint))
	return err
}

// dueIndex checks the table's due index and, with create, adds it when it
// is missing and waits until it is ACTIVE. It returns the index's status,
// "" when the table has none.
func (a *app) dueIndex(client *dynamodb.Client, cfg dynamostore.TableConfig, create bool) (string, error) {
	table, g, err := a.describeDue(client, cfg)
	if err != nil {
		return "", err
	}
	// The library's definition of the table (cfg has DueShards) has the
	// due index and the types of its key attributes.
	tableDef, def := dynamostore.SubscriptionsTableDefinition(cfg), dynamostore.DueIndexDefinition(cfg)
	if a.single() {
		st := a.singleTable()
		tableDef, def = dynamostore.SingleTableDefinition(st), dynamostore.SingleTableDueIndexDefinition(st)
	}
	want := keyText(def.KeySchema, tableDef.AttributeDefinitions)
	if g != nil {
		if got := keyText(g.KeySchema, table.AttributeDefinitions); got != want {
			return "", fmt.Errorf("index %s of %s has the key %s, want %s: see 'billingctl tables describe'", cfg.DueIndex, cfg.Subscriptions, got, want)
		}
		if create {
			fmt.Fprintf(a.stderr, "index %s exists (%s): not creating it\n", cfg.DueIndex, g.IndexStatus)
		}
		if g.IndexStatus == types.IndexStatusActive || !create {
			return string(g.IndexStatus), nil
		}
		return a.waitIndex(client, cfg)
	}
	if !create {
		fmt.Fprintf(a.stderr, "note: %s has no index %s yet: the keys are written all the same; "+
			"add it with 'index backfill --create-index' before reads switch to --status-index due\n", cfg.Subscriptions, cfg.DueIndex)
		return "", nil
	}
	action := &types.CreateGlobalSecondaryIndexAction{IndexName: def.IndexName, KeySchema: def.KeySchema, Projection: def.Projection}
	provisioned := table.BillingModeSummary == nil || table.BillingModeSummary.BillingMode == types.BillingModeProvisioned
	if pt := table.ProvisionedThroughput; provisioned && pt != nil {
		// A provisioned table's index needs its own capacity: the
		// table's, to be tuned afterwards.
		action.ProvisionedThroughput = &types.ProvisionedThroughput{ReadCapacityUnits: pt.ReadCapacityUnits, WriteCapacityUnits: pt.WriteCapacityUnits}
		fmt.Fprintf(a.stderr, "the table is provisioned: the index gets the table's capacity, %d read and %d write units\n",
			aws.ToInt64(pt.ReadCapacityUnits), aws.ToInt64(pt.WriteCapacityUnits))
	}
	fmt.Fprintf(a.stderr, "creating index %s (%s) on %s\n", cfg.DueIndex, want, cfg.Subscriptions)
	_, err = client.UpdateTable(a.ctx, &dynamodb.UpdateTableInput{
		TableName:                   aws.String(cfg.Subscriptions),
		AttributeDefinitions:        withIndexAttrs(table.AttributeDefinitions, def.KeySchema, tableDef.AttributeDefinitions),
		GlobalSecondaryIndexUpdates: []types.GlobalSecondaryIndexUpdate{{Create: action}},
	})
	if err != nil {
		return "", fmt.Errorf("add index %s to %s: %w", cfg.DueIndex, cfg.Subscriptions, err)
	}
	return a.waitIndex(client, cfg)
}

// withIndexAttrs returns the table's attribute definitions (have) and
// those of the new index's keys, from the library's definitions (defs).
// UpdateTable needs the new index's; DynamoDB adds them to the table's,
// but some local servers (moto) replace the table's with what the request
// lists, so the request lists them all.
func withIndexAttrs(have []types.AttributeDefinition, keys []types.KeySchemaElement, defs []types.AttributeDefinition) []types.AttributeDefinition {
	out := slices.Clone(have)
	named := func(name string) func(types.AttributeDefinition) bool {
		return func(d types.AttributeDefinition) bool { return aws.ToString(d.AttributeName) == name }
	}
	for _, k := range keys {
		name := aws.ToString(k.AttributeName)
		if slices.ContainsFunc(out, named(name)) {
			continue
		}
		if i := slices.IndexFunc(defs, named(name)); i >= 0 {
			out = append(out, defs[i])
		}
	}
	return out
}

// findIndex returns the GSI named name of table, or nil.
func findIndex(table *types.TableDescription, name string) *types.GlobalSecondaryIndexDescription {
	if table == nil {
		return nil
	}
	for i := range table.GlobalSecondaryIndexes {
		if aws.ToString(table.GlobalSecondaryIndexes[i].IndexName) == name {
			return &table.GlobalSecondaryIndexes[i]
		}
	}
	return nil
}

// describeDue describes the subscriptions table and returns it and its
// due index, nil when it has none.
func (a *app) describeDue(client *dynamodb.Client, cfg dynamostore.TableConfig) (*types.TableDescription, *types.GlobalSecondaryIndexDescription, error) {
	out, err := client.DescribeTable(a.ctx, &dynamodb.DescribeTableInput{TableName: aws.String(cfg.Subscriptions)})
	if err != nil {
		return nil, nil, fmt.Errorf("describe table %s: %w", cfg.Subscriptions, err)
	}
	if out.Table == nil {
		return nil, nil, fmt.Errorf("describe table %s: no description", cfg.Subscriptions)
	}
	return out.Table, findIndex(out.Table, cfg.DueIndex), nil
}

// waitIndex polls DescribeTable until the table and its due index are
// ACTIVE. On AWS the index is CREATING while DynamoDB fills it from the
// existing items, which takes a while on a large table.
func (a *app) waitIndex(client *dynamodb.Client, cfg dynamostore.TableConfig) (string, error) {
	delay, last := time.Second, ""
	for {
		table, g, err := a.describeDue(client, cfg)
		if err != nil {
			return "", err
		}
		if g == nil {
			return "", fmt.Errorf("index %s of %s: not in DescribeTable after UpdateTable added it", cfg.DueIndex, cfg.Subscriptions)
		}
		if g.IndexStatus == types.IndexStatusActive && table.TableStatus == types.TableStatusActive {
			fmt.Fprintf(a.stderr, "index %s is ACTIVE\n", cfg.DueIndex)
			return string(g.IndexStatus), nil
		}
		state := fmt.Sprintf("table %s, index %s", table.TableStatus, g.IndexStatus)
		if aws.ToBool(g.Backfilling) {
			state += " (DynamoDB is indexing the existing items)"
		}
		if state != last {
			fmt.Fprintf(a.stderr, "waiting for index %s: %s\n", cfg.DueIndex, state)
			last = state
		}
		if err := a.pause(delay); err != nil {
			return "", fmt.Errorf("waiting for index %s: %w (it is still being created; rerun to wait again)", cfg.DueIndex, err)
		}
		delay = min(delay*2, 20*time.Second)
	}
}

// backfillCommand is the billingctl command line that continues this
// backfill from token: the flags that name the tables and the pace, as
// given.
func (a *app) backfillCommand(pageSize, rate int, token string) string {
	args := []string{"billingctl"}
	flag := func(name, value string) {
		if value != "" {
			args = append(args, "--"+name, shellQuote(value))
		}
	}
	if !a.endpointFromEnv {
		flag("endpoint", a.g.endpoint)
	}
	flag("region", a.g.region)
	flag("layout", a.g.layout)
	flag("tables", a.g.tablesPrefix)
	flag("table", a.g.table)
	flag("due-shards", strconv.Itoa(a.g.dueShards))
	if a.g.yes {
		args = append(args, "--yes")
	}
	if a.g.json {
		args = append(args, "--json")
	}
	args = append(args, "index", "backfill")
	if pageSize != defaultBackfillPage {
		flag("page", strconv.Itoa(pageSize))
	}
	if rate != defaultBackfillRate {
		flag("rate", strconv.Itoa(rate))
	}
	flag("from", token)
	return strings.Join(args, " ")
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_./:=@%+,-]+$`)

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
