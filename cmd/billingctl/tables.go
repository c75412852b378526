package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing/dynamostore"
)

var tablesCreateCmd = &command{
	name: "tables create",
	doc: `create the library's tables (those missing) and wait until ACTIVE
The subscriptions table (with the subscription ID index, the status index of
--status-index and, with --due-shards, the due index), the history table, the
lock table and the invoices table, named by --table, --history-table,
--lock-table and --invoices-table, on-demand billing (with --layout single,
the single table, which keeps invoices too, and the lock table). Existing tables are left as they are; compare them with 'billingctl
tables describe', and add the due index to an existing table with 'billingctl
index backfill --create-index'.`,
	run: runTablesCreate,
}

var tablesDescribeCmd = &command{
	name: "tables describe",
	doc: `compare the live tables with the library's definitions
Prints each table's status and item count and every way it differs from the
definition the library uses: missing table, key schema, key attribute types,
missing indexes or indexes with another key schema or projection. Notes
(extra indexes, provisioned billing) are printed but are not differences.
Exits 1 when a table is missing or differs, so it can gate a deployment.`,
	run: runTablesDescribe,
}

// tableRoles names the tables of billing.TableDefinitions, in its order.
var tableRoles = []string{"subscriptions", "history", "locks", "invoices"}

// tableDefs returns the tables of the chosen layout and their roles.
func (a *app) tableDefs() ([]string, []*dynamodb.CreateTableInput) {
	if a.single() {
		return []string{"single table", "locks"}, []*dynamodb.CreateTableInput{
			dynamostore.SingleTableDefinition(a.singleTable()), dynamostore.LockTableDefinition(a.tables().Locks)}
	}
	return tableRoles, dynamostore.TableDefinitions(a.tables())
}

// createSingle creates the single table (with its TTL) and the lock table
// where they do not exist yet.
func (a *app) createSingle(client *dynamodb.Client, defs []*dynamodb.CreateTableInput, existed []bool) error {
	if !existed[0] {
		if err := dynamostore.CreateSingleTable(a.ctx, client, a.singleTable()); err != nil {
			return err
		}
	}
	if !existed[1] {
		if _, err := client.CreateTable(a.ctx, defs[1]); err != nil {
			return fmt.Errorf("create table %s: %w", aws.ToString(defs[1].TableName), err)
		}
		w := dynamodb.NewTableExistsWaiter(client)
		if err := w.Wait(a.ctx, &dynamodb.DescribeTableInput{TableName: defs[1].TableName}, 2*time.Minute); err != nil {
			return fmt.Errorf("wait for table %s: %w", aws.ToString(defs[1].TableName), err)
		}
	}
	return nil
}

func runTablesCreate(a *app, c *command, args []string) error {
	if err := a.parseNoArgs(c, a.newFlags(c), args); err != nil {
		return err
	}
	client, err := a.dynamo()
	if err != nil {
		return err
	}
	cfg := a.tables()
	roles, defs := a.tableDefs()
	existed := make([]bool, len(defs))
	noDueIndex := false // the existing subscriptions table lacks the due index
	for i, def := range defs {
		out, err := client.DescribeTable(a.ctx, &dynamodb.DescribeTableInput{TableName: def.TableName})
		var nf *types.ResourceNotFoundException
		switch {
		case err == nil:
			existed[i] = true
			noDueIndex = noDueIndex || (i == 0 && cfg.DueShards > 0 && findIndex(out.Table, cfg.DueIndex) == nil)
		case !errors.As(err, &nf):
			return fmt.Errorf("describe table %s: %w", aws.ToString(def.TableName), err)
		}
	}
	if a.single() {
		if err := a.createSingle(client, defs, existed); err != nil {
			return err
		}
	} else if err := dynamostore.CreateTables(a.ctx, client, cfg); err != nil {
		return err
	}
	type row struct {
		Role   string `json:"role"`
		Name   string `json:"name"`
		Action string `json:"action"`
	}
	rows := make([]row, len(defs))
	for i, def := range defs {
		rows[i] = row{Role: roles[i], Name: aws.ToString(def.TableName), Action: "created"}
		if existed[i] {
			rows[i].Action = "exists"
		}
	}
	if a.g.json {
		return writeJSON(a.stdout, rows)
	}
	tw := newTable(a.stdout)
	fmt.Fprintln(tw, "ROLE\tTABLE\tACTION")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Role, r.Name, r.Action)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if slices.Contains(existed, true) {
		fmt.Fprintln(a.stdout, "Existing tables were left as they are; compare them with 'billingctl tables describe'.")
	}
	if noDueIndex {
		fmt.Fprintln(a.stdout, "To add the due index to the existing subscriptions table: 'billingctl index backfill --create-index'.")
	}
	return nil
}

// tableReport is what describe says about one table.
type tableReport struct {
	Role        string   `json:"role"`
	Name        string   `json:"name"`
	Exists      bool     `json:"exists"`
	Status      string   `json:"status,omitempty"`
	ItemCount   *int64   `json:"item_count,omitempty"`
	BillingMode string   `json:"billing_mode,omitempty"`
	KeySchema   string   `json:"key_schema,omitempty"`
	Indexes     []string `json:"indexes,omitempty"`
	Differences []string `json:"differences"`
	Notes       []string `json:"notes"`
}

// errTablesDiffer is describe's failure: some table is missing or differs.
var errTablesDiffer = errors.New("tables differ from the library's definitions (see above)")

func runTablesDescribe(a *app, c *command, args []string) error {
	if err := a.parseNoArgs(c, a.newFlags(c), args); err != nil {
		return err
	}
	client, err := a.dynamo()
	if err != nil {
		return err
	}
	var reports []tableReport
	differ := false
	roles, defs := a.tableDefs()
	for i, def := range defs {
		rep := tableReport{Role: roles[i], Name: aws.ToString(def.TableName), Differences: []string{}, Notes: []string{}}
		out, err := client.DescribeTable(a.ctx, &dynamodb.DescribeTableInput{TableName: def.TableName})
		var nf *types.ResourceNotFoundException
		switch {
		case errors.As(err, &nf):
			rep.Differences = append(rep.Differences, "table does not exist")
		case err != nil:
			return fmt.Errorf("describe table %s: %w", rep.Name, err)
		default:
			rep.Exists = true
			compareTable(&rep, def, out.Table)
		}
		differ = differ || len(rep.Differences) > 0
		reports = append(reports, rep)
	}
	if a.g.json {
		if err := writeJSON(a.stdout, reports); err != nil {
			return err
		}
	} else {
		for i, r := range reports {
			if i > 0 {
				fmt.Fprintln(a.stdout)
			}
			writeTableReport(a, &r)
		}
	}
	if differ {
		return errTablesDiffer
	}
	return nil
}

func writeTableReport(a *app, r *tableReport) {
	w := a.stdout
	fmt.Fprintf(w, "%s (%s)", r.Name, r.Role)
	if !r.Exists {
		fmt.Fprintln(w, ": MISSING")
	} else {
		fmt.Fprintf(w, ": %s", r.Status)
		if r.ItemCount != nil {
			fmt.Fprintf(w, ", %d items", *r.ItemCount)
		}
		if r.BillingMode != "" {
			fmt.Fprintf(w, ", %s", r.BillingMode)
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "  key: %s\n", r.KeySchema)
		for _, ix := range r.Indexes {
			fmt.Fprintf(w, "  index: %s\n", ix)
		}
	}
	if len(r.Differences) == 0 {
		fmt.Fprintln(w, "  matches the library's definition")
	}
	for _, d := range r.Differences {
		fmt.Fprintf(w, "  DIFFERS: %s\n", d)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
}

// compareTable fills rep from the live table and lists how it differs
// from def.
func compareTable(rep *tableReport, def *dynamodb.CreateTableInput, live *types.TableDescription) {
	if live == nil {
		rep.Differences = append(rep.Differences, "DescribeTable returned no description")
		return
	}
	rep.Status = string(live.TableStatus)
	rep.ItemCount = live.ItemCount
	rep.KeySchema = keyText(live.KeySchema, live.AttributeDefinitions)
	if live.TableStatus != types.TableStatusActive {
		rep.Notes = append(rep.Notes, fmt.Sprintf("status %s, not ACTIVE", live.TableStatus))
	}
	liveMode := types.BillingModeProvisioned // a table without a summary was created provisioned
	if live.BillingModeSummary != nil && live.BillingModeSummary.BillingMode != "" {
		liveMode = live.BillingModeSummary.BillingMode
	}
	rep.BillingMode = string(liveMode)
	if liveMode != def.BillingMode {
		rep.Notes = append(rep.Notes, fmt.Sprintf("billing mode %s, the definition has %s (works; capacity is yours to manage)",
			liveMode, def.BillingMode))
	}

	want := keyText(def.KeySchema, def.AttributeDefinitions)
	if rep.KeySchema != want {
		rep.Differences = append(rep.Differences, fmt.Sprintf("key schema is %s, want %s", rep.KeySchema, want))
	}

	liveIx := map[string]types.GlobalSecondaryIndexDescription{}
	for _, g := range live.GlobalSecondaryIndexes {
		name := aws.ToString(g.IndexName)
		liveIx[name] = g
		text := name + " " + keyText(g.KeySchema, live.AttributeDefinitions)
		if g.Projection != nil {
			text += " projection " + string(g.Projection.ProjectionType)
		}
		if g.IndexStatus != "" {
			text += " " + string(g.IndexStatus)
		}
		rep.Indexes = append(rep.Indexes, text)
	}
	for _, g := range def.GlobalSecondaryIndexes {
		name := aws.ToString(g.IndexName)
		l, ok := liveIx[name]
		if !ok {
			rep.Differences = append(rep.Differences, fmt.Sprintf("index %s (%s) is missing", name, keyText(g.KeySchema, def.AttributeDefinitions)))
			continue
		}
		delete(liveIx, name)
		gotKey, wantKey := keyText(l.KeySchema, live.AttributeDefinitions), keyText(g.KeySchema, def.AttributeDefinitions)
		if gotKey != wantKey {
			rep.Differences = append(rep.Differences, fmt.Sprintf("index %s key schema is %s, want %s", name, gotKey, wantKey))
		}
		var gotProj types.ProjectionType
		if l.Projection != nil {
			gotProj = l.Projection.ProjectionType
		}
		switch want := g.Projection.ProjectionType; {
		case gotProj == want:
		case want == types.ProjectionTypeKeysOnly && gotProj != "":
			// More than the keys is more than the library needs: it
			// re-reads the records it finds there.
			rep.Notes = append(rep.Notes, fmt.Sprintf("index %s projects %s; %s would do (the library reads only keys from it)", name, gotProj, want))
		default:
			rep.Differences = append(rep.Differences, fmt.Sprintf("index %s projects %s, want %s (the library reads whole records from it)",
				name, cmpOr(string(gotProj), "nothing"), want))
		}
	}
	extra := make([]string, 0, len(liveIx))
	for name := range liveIx {
		extra = append(extra, name)
	}
	slices.Sort(extra)
	for _, name := range extra {
		rep.Notes = append(rep.Notes, fmt.Sprintf("index %s is not in the definition (unused by the library with these flags)", name))
	}
	if n := len(live.LocalSecondaryIndexes); n > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d local secondary index(es), not in the definition", n))
	}
}

// keyText renders a key schema with attribute types: "user_id:S HASH,
// billing_date:S RANGE", hash first.
func keyText(keys []types.KeySchemaElement, attrs []types.AttributeDefinition) string {
	typ := map[string]string{}
	for _, d := range attrs {
		typ[aws.ToString(d.AttributeName)] = string(d.AttributeType)
	}
	sorted := slices.Clone(keys)
	slices.SortStableFunc(sorted, func(x, y types.KeySchemaElement) int {
		if x.KeyType == y.KeyType {
			return 0
		}
		if x.KeyType == types.KeyTypeHash {
			return -1
		}
		return 1
	})
	parts := make([]string, len(sorted))
	for i, k := range sorted {
		name := aws.ToString(k.AttributeName)
		parts[i] = fmt.Sprintf("%s:%s %s", name, cmpOr(typ[name], "?"), k.KeyType)
	}
	return strings.Join(parts, ", ")
}
