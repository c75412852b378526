// Command billingctl inspects and operates dynabill's subscription billing
// tables on DynamoDB, or on a local DynamoDB-compatible server.
//
// Install it with
//
//	go install github.com/dynabill/billing/cmd/billingctl@latest
//
// # Usage
//
//	billingctl [global flags] COMMAND [arguments] [flags]
//
//	tables create                      create the library's tables (those missing) and wait until ACTIVE
//	tables describe                    compare the live tables with the library's definitions
//	subs list USER                     a user's records, oldest billing date first
//	subs get SUBSCRIPTION_ID           one record, every attribute
//	history SUBSCRIPTION_ID            the audit rows of a record, oldest first (or --user USER)
//	invoices list --user USER          a user's invoices, newest first
//	invoices show INVOICE_ID           one invoice, its lines, history rows and credit notes (or
//	                                   --number N --user USER [--sequence S])
//	invoices pdf ID -o FILE --seller NAME [--html]
//	                                   write an invoice or credit note as the PDF (or HTML page) a
//	                                   customer downloads (package render)
//	due [--at RFC3339 | --date D [--time HH:MM]]
//	                                   what the scheduled, retry and pause runs at an instant would
//	                                   pick up: the records billed before it (default now)
//	notify preview                     who the pre-billing notifier would message for a date
//	subscribe USER_ID --tier NAME:VERSION --amount 4.99 [--key KEY] [--first-date DATE] [...]
//	                                   start a subscription (Collector.Subscribe), idempotent on
//	                                   USER_ID and --key
//	waive SUBSCRIPTION_ID              forgive a SCHEDULED or ERROR record (WAIVED)
//	cancel SUBSCRIPTION_ID             cancel a SCHEDULED, ERROR or PAUSED record (CANCELLED)
//	pause SUBSCRIPTION_ID --months N   pause a SCHEDULED record, or change a pause, for N months
//	resume SUBSCRIPTION_ID             end the pause of a PAUSED record
//	change-date SUBSCRIPTION_ID --date YYYY-MM-DD|RFC3339
//	                                   move a record to another billing date
//	change-tier SUBSCRIPTION_ID --tier NAME:VERSION --amount 9.99 [--downgrade]
//	                                   change a SCHEDULED record's tier and amount
//	reactivate USER_ID --date YYYY-MM-DD|RFC3339
//	                                   open a new period for a user whose subscription ended
//	seed [--users N] [--now DATE]      fill the tables with sample subscriptions (local servers)
//	index backfill [--create-index] [--from TOKEN]
//	                                   key existing records for the due index of --due-shards,
//	                                   paced, resumable (legacy layout)
//	simulate                           the quickstart simulation, in memory
//	capacity                           what bounds a billing run at scale: a capacity model
//	pacing [--processes 8,32,128] [--calls]
//	                                   how well a fleet keeps the processor at its limit: the
//	                                   shared budget beside a static split, modelled
//	help [COMMAND]                     usage of billingctl or of a command
//
// Global flags may come before or after the command:
//
//	--endpoint URL          DynamoDB endpoint, e.g. http://localhost:8000 (default:
//	                        $DYNAMODB_ENDPOINT, else AWS)
//	--layout LAYOUT         legacy (two tables and a lock table, the default) or single
//	                        (one table and a lock table)
//	--tables PREFIX         name every table from one prefix: PREFIX-activity,
//	                        PREFIX-activity-history, PREFIX-locks, PREFIX-invoices
//	                        (legacy); PREFIX and PREFIX-locks (single). The per-table
//	                        flags below win.
//	--region REGION         AWS region (default: $AWS_REGION, $AWS_DEFAULT_REGION, the
//	                        shared config, then us-east-1)
//	--table NAME            subscriptions table (default billing-activity)
//	--history-table NAME    history table (default billing-activity-history)
//	--lock-table NAME       lock table (default locks)
//	--invoices-table NAME   invoices table of the legacy layout (default billing-invoices;
//	                        the single table keeps invoices in the account's partition)
//	--status-index MODE     legacy (billing_status-index), sorted
//	                        (billing_status-billing_date-index) or due (the sharded
//	                        billing_due-billing_date-index; needs --due-shards);
//	                        default legacy
//	--due-shards K          the due index's K shards. Writes put the due key
//	                        billing_due on the records (the single table's period
//	                        items) runs read, tables create adds the index,
//	                        --status-index due reads it. Default 0, no due index.
//	--json                  print JSON instead of tables, for scripts
//	--yes                   apply admin changes without asking; let seed and index
//	                        backfill write to AWS (without --endpoint)
//
// Commands print tables by default and JSON with --json. Run
// "billingctl help COMMAND" for a command's flags.
//
// # Credentials
//
// billingctl uses the usual AWS credential chain (environment, shared
// config and credentials files, SSO, web identity, container and instance
// roles). With --endpoint pointing at a local server (localhost, a loopback
// address or a single-label host name such as a docker-compose service
// "dynamodb-local") and no AWS_ACCESS_KEY_ID or AWS_PROFILE in the
// environment, the chain is tried without the instance metadata service,
// and if it finds nothing, static dummy credentials are used: local servers
// accept any. Without an endpoint and without credentials billingctl stops
// at once (exit status 1) with an error saying to pass --endpoint, set
// DYNAMODB_ENDPOINT or configure credentials, rather than waiting for the
// instance metadata service to time out; with another endpoint and no
// credentials it says to configure them. The AWS SDK's warnings about the
// instance metadata service are not printed (its other warnings are, on
// stderr). A server that cannot be reached is one line, e.g.
// "billingctl: cannot reach DynamoDB at http://127.0.0.1:8000: connection
// refused" (exit status 1); a refused connection is not retried.
//
// # Admin changes
//
// subscribe, waive, cancel, pause, resume, change-date, change-tier and
// reactivate go through the collector: under the user's billing lock (the
// --lock-table dynamolock table), conditional on the record read, with a
// history row. Each first checks the change by the collector's own rules
// (internal/preview: CheckChange, CheckSubscribe, CheckReactivate) and refuses it
// before showing anything when the record's status does not allow it or
// the library refuses an input; then prints the record, asks
// "Apply? [y/N]" on stderr (unless --yes), applies the change and prints
// the record after it, marking the changed attributes with "*". Admin
// changes never charge.
//
// # Moving a legacy table to the due index
//
// The sharded due index (TableConfig.DueShards, --due-shards K) is added to
// a table in use in four steps: give every writer K (the hosts'
// TableConfig.DueShards, and --due-shards K on billingctl's admin
// commands), so new writes carry the due key; run
// "billingctl --due-shards K index backfill --create-index", which adds the
// index with UpdateTable, waits until it is ACTIVE and keys the existing
// records, paced by --rate and resumable with --from after an interruption;
// run "billingctl --due-shards K index backfill" again until a pass reports
// 0 updated; then read with --status-index due (StatusIndexDue). With
// --layout single the same commands move the single table's period items
// to its due index; without --status-index due it walks the payment index.
//
// # Exit codes
//
//	0  success
//	1  the operation failed: unknown subscription ID, a conflict (the
//	   record is not in a status the change allows, or it changed
//	   meanwhile), the user's billing is locked, a DynamoDB error, a
//	   declined confirmation ("aborted"), or a table that differs from the
//	   library's definition (tables describe)
//	2  usage: unknown command or flag, a missing or extra argument, a
//	   missing required flag, a malformed date, amount or number, or a
//	   value the library refuses (the flag is named: an amount over the
//	   maximum charge, a date outside the window of billing dates)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// command is one billingctl command.
type command struct {
	// name is the command as typed: "subs list", "waive".
	name string
	// synopsis is what follows the name in the usage line.
	synopsis string
	// doc describes the command (a few lines).
	doc string
	// run parses args (flags and arguments after the name) and runs.
	run func(a *app, c *command, args []string) error
}

// commands lists every command in the order of the usage text.
var commands []*command

func init() {
	commands = []*command{
		tablesCreateCmd, tablesDescribeCmd,
		subsListCmd, subsGetCmd, historyCmd,
		invoicesListCmd, invoicesShowCmd, invoicesPDFCmd,
		dueCmd, notifyPreviewCmd,
		subscribeCmd, waiveCmd, cancelCmd, pauseCmd, resumeCmd, changeDateCmd, changeTierCmd, reactivateCmd,
		seedCmd, indexBackfillCmd, simulateCmd, capacityCmd, pacingCmd,
	}
}

// groups are the commands that take a subcommand.
var groups = map[string]bool{"tables": true, "subs": true, "notify": true, "index": true, "invoices": true}

// lookup finds the command args start with and returns the rest.
func lookup(args []string) (*command, []string, error) {
	if len(args) == 0 {
		return nil, nil, usagef("", "no command given")
	}
	name := args[0]
	rest := args[1:]
	if groups[name] {
		if len(rest) == 0 || strings.HasPrefix(rest[0], "-") {
			return nil, nil, usagef("", "%q needs a subcommand: %s", name, strings.Join(subcommands(name), ", "))
		}
		name += " " + rest[0]
		rest = rest[1:]
	}
	for _, c := range commands {
		if c.name == name {
			return c, rest, nil
		}
	}
	if g, _, ok := strings.Cut(name, " "); ok && groups[g] {
		return nil, nil, usagef("", "unknown command %q (%s has: %s)", name, g, strings.Join(subcommands(g), ", "))
	}
	return nil, nil, usagef("", "unknown command %q", name)
}

func subcommands(group string) []string {
	var out []string
	for _, c := range commands {
		if g, sub, ok := strings.Cut(c.name, " "); ok && g == group {
			out = append(out, sub)
		}
	}
	return out
}

// usageError is bad command-line input: exit code 2.
type usageError struct {
	cmd string // the command, "" for billingctl itself
	msg string
}

func (e *usageError) Error() string { return e.msg }

func usagef(cmd, format string, args ...any) error {
	return &usageError{cmd: cmd, msg: fmt.Sprintf(format, args...)}
}

// errHelp reports that help was printed: exit code 0.
var errHelp = errors.New("help printed")

// errAborted reports a declined confirmation: exit code 1.
var errAborted = errors.New("aborted")

// run runs billingctl with args (without the program name) and returns the
// exit code. It reads confirmations from stdin, writes results to stdout
// and errors, prompts and progress to stderr, and looks up environment
// variables with env.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, env func(string) string) int {
	if env == nil {
		env = func(string) string { return "" }
	}
	a := &app{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr, env: env}
	return a.exit(a.main(args))
}

// exit prints what went wrong, if anything, and returns the exit code of
// err, the result of main.
func (a *app) exit(err error) int {
	stderr := a.stderr
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, errHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "billingctl: %s\n", ue.msg)
		if ue.cmd != "" {
			fmt.Fprintf(stderr, "Run 'billingctl help %s' for usage.\n", ue.cmd)
		} else {
			fmt.Fprintln(stderr, "Run 'billingctl help' for usage.")
		}
		return exitUsage
	default:
		fmt.Fprintf(stderr, "billingctl: %s\n", a.explain(err))
		return exitFail
	}
}

func (a *app) main(args []string) error {
	fs := flag.NewFlagSet("billingctl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	a.g.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			a.printUsage(a.stdout)
			return errHelp
		}
		return usagef("", "%v", err)
	}
	args = fs.Args()
	if len(args) > 0 && args[0] == "help" {
		return a.help(args[1:])
	}
	if len(args) == 0 {
		a.printUsage(a.stderr)
		return usagef("", "no command given")
	}
	c, rest, err := lookup(args)
	if err != nil {
		return err
	}
	return c.run(a, c, rest)
}

// help prints the usage of billingctl or of a command.
func (a *app) help(args []string) error {
	if len(args) == 0 {
		a.printUsage(a.stdout)
		return errHelp
	}
	c, rest, err := lookup(args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("", "help takes one command, got extra %q", strings.Join(rest, " "))
	}
	// Every command prints its usage, flags included, on -h.
	return c.run(a, c, []string{"-h"})
}

func (a *app) printUsage(w io.Writer) {
	fmt.Fprint(w, "billingctl inspects and operates dynabill's subscription billing tables.\n\n")
	fmt.Fprint(w, "Usage: billingctl [global flags] COMMAND [arguments] [flags]\n\nCommands:\n")
	tw := newTable(w)
	for _, c := range commands {
		line := c.name
		if args := positional(c.synopsis); args != "" {
			line += " " + args
		}
		summary, _, _ := strings.Cut(c.doc, "\n")
		fmt.Fprintf(tw, "  %s\t%s\n", line, summary)
	}
	fmt.Fprintf(tw, "  help [COMMAND]\tusage of billingctl or of a command\n")
	tw.Flush()
	fmt.Fprint(w, "\nGlobal flags (before or after the command):\n")
	gfs := flag.NewFlagSet("billingctl", flag.ContinueOnError)
	var g globals
	g.register(gfs)
	printFlags(w, gfs, nil)
	fmt.Fprint(w, "\nExit codes: 0 ok, 1 the operation failed (unknown ID, conflict, locked, aborted,\n"+
		"a DynamoDB error, tables that differ), 2 usage (bad command, flag or argument).\n")
}

// positional returns the arguments of a synopsis, without its flags:
// "SUBSCRIPTION_ID" of "SUBSCRIPTION_ID --months N".
func positional(synopsis string) string {
	var out []string
	for _, f := range strings.Fields(synopsis) {
		if strings.HasPrefix(f, "-") || strings.HasPrefix(f, "[") || f == "|" {
			break
		}
		out = append(out, f)
	}
	return strings.Join(out, " ")
}

// printFlags prints the flags of fs, but not those skip names, as
// "  --name value" lines each followed by its indented usage.
func printFlags(w io.Writer, fs *flag.FlagSet, skip []string) {
	fs.VisitAll(func(f *flag.Flag) {
		if slices.Contains(skip, f.Name) {
			return
		}
		name, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if len(f.Name) == 1 {
			line = "  -" + f.Name // -o, as Unix tools spell it
		}
		if name != "" {
			line += " " + name
		}
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(w, "%s\n      %s\n", line, strings.ReplaceAll(usage, "\n", "\n      "))
	})
}
