package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/dynamostore"
)

// defaultRegion is the region when neither the flag, the environment nor
// the shared config names one.
const defaultRegion = "us-east-1"

// globals are the flags every command accepts.
type globals struct {
	endpoint     string
	region       string
	table        string
	historyTable string
	lockTable    string
	invoiceTable string
	statusIndex  string
	dueShards    int
	layout       string
	tablesPrefix string
	json         bool
	yes          bool
}

// globalNames are the names of the global flags, to leave them out of a
// command's own flag list.
var globalNames = []string{"endpoint", "region", "layout", "tables", "table", "history-table", "lock-table", "invoices-table", "status-index",
	"due-shards", "json", "yes"}

// register defines the global flags on fs with the values parsed so far as
// defaults, so a later FlagSet keeps what an earlier one set.
func (g *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&g.endpoint, "endpoint", g.endpoint, "DynamoDB endpoint `URL`, e.g. http://localhost:8000 (default: $"+endpointEnv+", else AWS)")
	fs.StringVar(&g.region, "region", g.region, "AWS `region` (default: $AWS_REGION, $AWS_DEFAULT_REGION, shared config, "+defaultRegion+")")
	fs.StringVar(&g.layout, "layout", g.layout, "table `layout`: legacy (two tables and a lock table) or single (one table and a lock table) (default legacy)")
	fs.StringVar(&g.tablesPrefix, "tables", g.tablesPrefix, "`prefix` naming every table of the layout: PREFIX-activity, PREFIX-activity-history,\n"+
		"PREFIX-locks and PREFIX-invoices (legacy), PREFIX and PREFIX-locks (single); the per-table flags win")
	fs.StringVar(&g.table, "table", g.table, "subscriptions table `name` (default "+dynamostore.DefaultSubscriptionsTable+")")
	fs.StringVar(&g.historyTable, "history-table", g.historyTable, "history table `name` (default "+dynamostore.DefaultHistoryTable+")")
	fs.StringVar(&g.lockTable, "lock-table", g.lockTable, "lock table `name` (default "+dynamostore.DefaultLockTable+")")
	fs.StringVar(&g.invoiceTable, "invoices-table", g.invoiceTable, "invoices table `name` of the legacy layout (default "+defaultInvoicesTable+
		"; the single table\nkeeps invoices in the account's partition)")
	fs.StringVar(&g.statusIndex, "status-index", g.statusIndex, "status index `mode`: legacy ("+dynamostore.DefaultStatusIndex+
		"), sorted ("+dynamostore.DefaultSortedStatusIndex+") or due\n"+
		"(the sharded "+dynamostore.DefaultDueIndex+", needs --due-shards); with --layout single, legacy walks the\n"+
		"payment index and due reads the due index (default legacy)")
	fs.IntVar(&g.dueShards, "due-shards", g.dueShards, "the due index's `K` shards: writes put the due key billing_due on the records (the single\n"+
		"table's period items) runs read, tables create adds "+dynamostore.DefaultDueIndex+", --status-index due reads it (default 0: none)")
	fs.BoolVar(&g.json, "json", g.json, "print JSON instead of tables")
	fs.BoolVar(&g.yes, "yes", g.yes, "apply admin changes without asking; let seed and index backfill write to AWS")
}

// app is one invocation of billingctl.
type app struct {
	ctx    context.Context
	g      globals
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	env    func(string) string
	// now is the clock of every command that needs the time (today's
	// runs for due and notify preview, seed's sample, backfill's pacing),
	// read through clock; sleep is the pause of paced commands (index
	// backfill). Nil for the real ones; sleep returns ctx's error if it
	// ends first. Wall-time measurements (elapsed times, progress redraws)
	// do not use them.
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error

	client *dynamodb.Client
	// endpointFromEnv reports that the endpoint is $DYNAMODB_ENDPOINT's,
	// not the flag's.
	endpointFromEnv bool
}

// clock returns the current time.
func (a *app) clock() time.Time {
	if a.now != nil {
		return a.now()
	}
	return time.Now()
}

// pause waits d, or returns the context's error if it ends first.
func (a *app) pause(d time.Duration) error {
	if a.sleep != nil {
		return a.sleep(a.ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-a.ctx.Done():
		return a.ctx.Err()
	case <-t.C:
		return nil
	}
}

// newFlags returns the FlagSet of command c; define the command's own
// flags on it, then call parse.
func (a *app) newFlags(c *command) *flag.FlagSet {
	fs := flag.NewFlagSet("billingctl "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseNoArgs is parse for commands that take flags only: a positional
// argument is a usage error.
func (a *app) parseNoArgs(c *command, fs *flag.FlagSet, args []string) error {
	pos, err := a.parse(c, fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef(c.name, "unexpected argument %q", pos[0])
	}
	return nil
}

// parse adds the global flags to fs and parses args, flags and arguments
// in any order ("--" ends the flags). It returns the arguments. -h prints
// the command's usage and returns errHelp; a bad flag is a usage error.
func (a *app) parse(c *command, fs *flag.FlagSet, args []string) ([]string, error) {
	a.g.register(fs)
	var pos []string
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			a.commandUsage(a.stdout, c, fs)
			return nil, errHelp
		}
		if err != nil {
			return nil, usagef(c.name, "%v", err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	if err := a.checkGlobals(c); err != nil {
		return nil, err
	}
	return pos, nil
}

func (a *app) checkGlobals(c *command) error {
	switch a.g.statusIndex {
	case "", "legacy", "sorted", "due":
	default:
		return usagef(c.name, "--status-index %q: want legacy, sorted or due", a.g.statusIndex)
	}
	switch a.g.layout {
	case "", "legacy", "single":
	default:
		return usagef(c.name, "--layout %q: want legacy or single", a.g.layout)
	}
	if a.g.dueShards < 0 || a.g.dueShards > dynamostore.MaxDueShards {
		return usagef(c.name, "--due-shards %d: want 0 to %d", a.g.dueShards, dynamostore.MaxDueShards)
	}
	if a.single() && a.g.statusIndex == "sorted" {
		return usagef(c.name, "--layout single: the single table has no sorted status index; "+
			"its status queries walk the payment index, or read the due index with --due-shards K --status-index due")
	}
	if a.g.statusIndex == "due" && a.g.dueShards == 0 {
		return usagef(c.name, "--status-index due needs --due-shards K, the shards the table's due keys were written with")
	}
	source := "--endpoint"
	if a.g.endpoint == "" {
		a.g.endpoint, source = a.env(endpointEnv), endpointEnv
		a.endpointFromEnv = a.g.endpoint != ""
	}
	if a.g.endpoint != "" {
		u, err := url.Parse(a.g.endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usagef(c.name, "%s %q: want a URL such as http://localhost:8000", source, a.g.endpoint)
		}
	}
	return nil
}

// commandUsage prints c's usage and its own flags (not the global ones).
func (a *app) commandUsage(w io.Writer, c *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: billingctl %s", c.name)
	if c.synopsis != "" {
		fmt.Fprintf(w, " %s", c.synopsis)
	}
	summary, rest, _ := strings.Cut(strings.TrimRight(c.doc, "\n"), "\n")
	fmt.Fprintf(w, "\n\n%s.\n", capitalize(summary))
	if rest != "" {
		fmt.Fprintf(w, "\n%s\n", rest)
	}
	own := 0
	fs.VisitAll(func(f *flag.Flag) {
		if !slices.Contains(globalNames, f.Name) {
			own++
		}
	})
	if own > 0 {
		fmt.Fprint(w, "\nFlags:\n")
		printFlags(w, fs, globalNames)
	}
	fmt.Fprint(w, "\nGlobal flags (--endpoint, --layout, --tables, --region, --table, --history-table, --lock-table,\n"+
		"--invoices-table, --status-index, --due-shards, --json, --yes): see 'billingctl help'.\n")
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// single reports whether the single-table layout was chosen.
func (a *app) single() bool { return a.g.layout == "single" }

// tables returns the legacy table configuration of the global flags (for
// the single-table layout only Locks and Subscriptions, the single table's
// name, are used).
func (a *app) tables() dynamostore.TableConfig {
	cfg := dynamostore.TableConfig{Subscriptions: a.g.table, History: a.g.historyTable, Locks: a.g.lockTable, Invoices: a.g.invoiceTable}
	if p := a.g.tablesPrefix; p != "" {
		cfg.Subscriptions = cmpOr(cfg.Subscriptions, p+"-activity")
		cfg.History = cmpOr(cfg.History, p+"-activity-history")
		cfg.Locks = cmpOr(cfg.Locks, p+"-locks")
		cfg.Invoices = cmpOr(cfg.Invoices, p+"-invoices")
		if a.single() {
			cfg.Subscriptions = cmpOr(a.g.table, p)
		}
	}
	if a.single() && cfg.Subscriptions == "" {
		cfg.Subscriptions = singleDefaultTable
	}
	cfg.Invoices = cmpOr(cfg.Invoices, defaultInvoicesTable)
	switch a.g.statusIndex {
	case "sorted":
		cfg.StatusIndexMode = dynamostore.StatusIndexSorted
	case "due":
		cfg.StatusIndexMode = dynamostore.StatusIndexDue
	}
	cfg.DueShards = a.g.dueShards
	return cfg.WithDefaults()
}

func cmpOr(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// singleDefaultTable is the single table's name unless configured.
const singleDefaultTable = "billing"

// defaultInvoicesTable is the legacy layout's invoices table unless
// configured (dynamostore has no default: a host names it in
// TableConfig.Invoices).
const defaultInvoicesTable = "billing-invoices"

// singleTable is the single-table configuration of the global flags:
// with --due-shards, writes keep the due index.
func (a *app) singleTable() dynamostore.SingleTableConfig {
	return dynamostore.SingleTableConfig{Table: a.tables().Subscriptions, DueShards: a.g.dueShards}.WithDefaults()
}

// singleStore returns the single-table repository of the global flags on
// client: status queries read the due index with --status-index due, and
// walk the payment index otherwise (while a backfill is pending, the due
// keys are written all the same).
func (a *app) singleStore(client dynamostore.API, pageSize int) (*dynamostore.SingleTableRepository, error) {
	return dynamostore.NewSingleTableRepository(dynamostore.SingleTableStoreConfig{Client: client, Table: a.singleTable(),
		PageSize: pageSize, DueIndexPending: a.g.statusIndex != "due"})
}

// stores returns the repository and the history on the configured tables
// of the chosen layout.
func (a *app) stores() (billing.Repository, billing.History, error) {
	client, err := a.dynamo()
	if err != nil {
		return nil, nil, err
	}
	if a.single() {
		repo, err := a.singleStore(client, 0)
		if err != nil {
			return nil, nil, err
		}
		return repo, repo.History(), nil
	}
	cfg := dynamostore.Config{Client: client, Tables: a.tables()}
	repo, err := dynamostore.NewRepository(cfg)
	if err != nil {
		return nil, nil, err
	}
	hist, err := dynamostore.NewHistory(cfg)
	if err != nil {
		return nil, nil, err
	}
	return repo, hist, nil
}

// notFoundError is an unknown subscription ID.
type notFoundError struct{ id string }

func (e *notFoundError) Error() string { return "unknown subscription ID " + e.id }

// getByID reads a record by subscription ID; an unknown ID is a
// *notFoundError.
func getByID(ctx context.Context, repo billing.Repository, id string) (billing.Period, error) {
	sub, err := repo.GetByID(ctx, id)
	if errors.Is(err, billing.ErrNotFound) {
		return sub, &notFoundError{id: id}
	}
	return sub, err
}

// explain turns an error into the message printed after "billingctl: ",
// naming what went wrong: unknown ID, conflict, locked, missing table, a
// server that cannot be reached.
func (a *app) explain(err error) string {
	var nf *notFoundError
	var rnf *types.ResourceNotFoundException
	if msg, ok := a.unreachable(err); ok {
		return msg
	}
	switch {
	case errors.As(err, &nf):
		return nf.Error()
	case errors.Is(err, errAborted):
		return "aborted: nothing was changed"
	case errors.Is(err, billing.ErrAlreadyLocked):
		return "locked: the user's billing lock is held by another process (a run or another operator); " +
			"nothing was changed, try again later: " + err.Error()
	case errors.Is(err, billing.ErrDateMove):
		return "date out of order: nothing was changed, choose a date between the user's neighbouring periods: " + err.Error()
	case errors.Is(err, billing.ErrOpenSubscription):
		return "open subscription: nothing was changed; change that subscription (change-tier, change-date) " +
			"or cancel it first: " + err.Error()
	case errors.Is(err, billing.ErrNotCollectible), billing.IsConflict(err):
		return "conflict: " + err.Error()
	case errors.As(err, &rnf):
		return "table not found (check --table, --history-table, --lock-table, --invoices-table, --region and --endpoint, " +
			"or run 'billingctl tables create'): " + err.Error()
	}
	return err.Error()
}
