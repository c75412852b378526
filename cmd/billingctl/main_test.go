package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/dynamotest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

// result is what one billingctl invocation did.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout:\n%s--- stderr:\n%s", r.code, r.stdout, r.stderr)
}

// noEnv is an empty environment: no AWS variables, no TERM.
func noEnv(string) string { return "" }

// runCLI runs billingctl with args and stdin. Its deadline leaves room
// for pacing's models under -race on loaded cores (TestPacingJSON took
// over 60 s there).
func runCLI(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	code := run(ctx, args, strings.NewReader(stdin), &out, &errb, noEnv)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// want checks the exit code and that stdout (for code 0) or stderr (else)
// contains every string of contains.
func (r result) want(t *testing.T, code int, contains ...string) {
	t.Helper()
	require.Equal(t, code, r.code, "want exit %d, got %s", code, r)
	where := r.stdout
	if code != 0 {
		where = r.stderr
	}
	where = squeeze(where)
	for _, s := range contains {
		assert.Contains(t, where, squeeze(s), "output lacks %q:\n%s", s, r)
	}
}

// squeeze collapses runs of spaces and tabs, so that checks need not
// know how a table's columns were padded.
func squeeze(s string) string {
	return spaces.ReplaceAllString(s, " ")
}

var spaces = regexp.MustCompile(`[ \t]+`)

// decode parses stdout as JSON into v.
func (r result) decode(t *testing.T, v any) {
	t.Helper()
	require.NoError(t, json.Unmarshal([]byte(r.stdout), v), "stdout is not the JSON expected:\n%s", r)
}

// testEnv is a set of tables on the local server, created through
// billingctl, and a repository on them for seeding.
type testEnv struct {
	t        *testing.T
	endpoint string
	client   *dynamodb.Client
	tables   dynamostore.TableConfig
	mode     string
	repo     *dynamostore.Repository
	// now, when set, is the app's clock in run: the admin changes' "now".
	now time.Time
}

// newEnv creates unique tables with "billingctl tables create" in the
// status index mode ("legacy" or "sorted") and deletes them after the test.
func newEnv(t *testing.T, mode string) *testEnv {
	t.Helper()
	e := &testEnv{t: t, endpoint: dynamotest.Endpoint(t), client: dynamotest.Client(t), mode: mode}
	e.tables = dynamostore.TableConfig{
		Subscriptions: dynamotest.TableName(t, "billing-activity"),
		History:       dynamotest.TableName(t, "billing-activity-history"),
		Locks:         dynamotest.TableName(t, "locks"),
		Invoices:      dynamotest.TableName(t, "billing-invoices"),
	}
	if mode == "sorted" {
		e.tables.StatusIndexMode = dynamostore.StatusIndexSorted
	}
	e.tables = e.tables.WithDefaults()
	dropTables(t, e.client, e.tables.Subscriptions, e.tables.History, e.tables.Locks, e.tables.Invoices)
	e.run("", "tables", "create").want(t, 0, "created")
	repo, err := dynamostore.NewRepository(dynamostore.Config{Client: e.client, Tables: e.tables})
	require.NoError(t, err)
	e.repo = repo
	return e
}

// dropTables deletes the named tables, which billingctl creates, when
// the test ends.
func dropTables(t *testing.T, client *dynamodb.Client, names ...string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, name := range names {
			_, _ = client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
		}
	})
}

// cliWith returns a runner of billingctl with the global flags first.
func cliWith(t *testing.T, global ...string) func(args ...string) result {
	return func(args ...string) result {
		t.Helper()
		return runCLI(t, "", append(slices.Clone(global), args...)...)
	}
}

// flags are the global flags pointing billingctl at the env's tables.
func (e *testEnv) flags() []string {
	return []string{"--endpoint", e.endpoint, "--table", e.tables.Subscriptions, "--history-table", e.tables.History,
		"--lock-table", e.tables.Locks, "--invoices-table", e.tables.Invoices, "--status-index", e.mode}
}

// run runs billingctl on the env's tables; the global flags come first,
// so args may add their own.
func (e *testEnv) run(stdin string, args ...string) result {
	e.t.Helper()
	if e.now.IsZero() {
		return runCLI(e.t, stdin, append(e.flags(), args...)...)
	}
	return runClocked(e.t, e.now, stdin, append(e.flags(), args...)...)
}

// runClocked is runCLI with the app's clock stopped at now.
func runClocked(t *testing.T, now time.Time, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	a := &app{ctx: ctx, stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb, env: noEnv}
	(&fakeClock{now: now}).hook(a)
	code := a.exit(a.main(args))
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// runAt is run with the app's clock stopped at now.
func (e *testEnv) runAt(now time.Time, args ...string) result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), 60*time.Second)
	defer cancel()
	return runApp(e.t, ctx, (&fakeClock{now: now}).hook, append(e.flags(), args...)...)
}

// seed adds records through the library.
func (e *testEnv) seed(subs ...billing.Period) {
	e.t.Helper()
	for i := range subs {
		require.NoError(e.t, e.repo.Add(e.t.Context(), &subs[i]), "seeding %s", subs[i].SubscriptionID)
	}
}

// get reads a record back through the library.
func (e *testEnv) get(id string) billing.Period {
	e.t.Helper()
	s, err := e.repo.GetByID(e.t.Context(), id)
	require.NoError(e.t, err, "reading %s back", id)
	return s
}

// rec builds a record of user billed at date; written three days before.
func rec(user, id, date string, status billing.Status, amount string) billing.Period {
	d, err := time.Parse(time.RFC3339, date)
	if err != nil {
		panic(err)
	}
	written := d.Add(-72 * time.Hour)
	return billing.Period{
		UserID: user, SubscriptionID: id, BillingDate: d, Amount: billing.MustParseAmount(amount), Status: status,
		BillingPeriod: billing.BillingPeriod(d), Term: billing.TermMonthly, ReceiptTierName: "Plus:v2",
		Process: billing.ProcessNotIdentified, AnchorDay: d.Day(), CreatedDate: written, LastRunDate: written,
	}
}

func TestUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no command", nil, "no command given"},
		{"unknown command", []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"group without subcommand", []string{"subs"}, `"subs" needs a subcommand: list, get`},
		{"unknown subcommand", []string{"tables", "drop"}, `unknown command "tables drop"`},
		{"unknown flag", []string{"due", "--bogus"}, "flag provided but not defined: -bogus"},
		{"unknown global flag", []string{"--bogus", "due"}, "flag provided but not defined: -bogus"},
		{"missing ID", []string{"subs", "get"}, "want one SUBSCRIPTION_ID argument, got 0"},
		{"extra argument", []string{"subs", "get", "a", "b"}, "want one SUBSCRIPTION_ID argument, got 2"},
		{"missing user", []string{"subs", "list"}, "want one USER argument, got 0"},
		{"history ID and user", []string{"history", "id1", "--user", "u1"}, "not both"},
		{"bad status index", []string{"due", "--status-index", "fancy"}, `--status-index "fancy": want legacy, sorted or due`},
		{"bad endpoint", []string{"due", "--endpoint", "localhost:8000"}, "--endpoint"},
		{"malformed due date", []string{"due", "--date", "2024-13-01"}, `--date "2024-13-01": want YYYY-MM-DD`},
		{"due date and at", []string{"due", "--date", "2024-03-01", "--at", "2024-03-01T12:00:00Z"}, "not both"},
		{"malformed at", []string{"due", "--at", "noon"}, `--at "noon"`},
		{"due time without date", []string{"due", "--time", "12:00"}, "--time needs --date"},
		{"malformed due time", []string{"due", "--date", "2024-03-01", "--time", "noon"}, `--time "noon": want HH:MM`},
		{"bad run", []string{"due", "--run", "settle"}, `--run "settle"`},
		{"malformed notify date", []string{"notify", "preview", "--date", "20240230"}, `--date "20240230": want YYYYMMDD`},
		{"dashed notify date", []string{"notify", "preview", "--date", "2024-03-14"}, `--date "2024-03-14"`},
		{"bad notify status", []string{"notify", "preview", "--status", "INACTIVE"}, `--status "INACTIVE"`},
		{"pause without months", []string{"pause", "id1"}, "--months is required"},
		{"pause months zero", []string{"pause", "id1", "--months", "0"}, "--months 0: want 1 to 120"},
		{"pause months not a number", []string{"pause", "id1", "--months", "two"}, `invalid value "two" for flag -months`},
		{"pause too long", []string{"pause", "id1", "--months", "121"}, "--months 121"},
		{"change-date without date", []string{"change-date", "id1"}, "--date is required"},
		{"malformed change date", []string{"change-date", "id1", "--date", "14/03/2024"}, `--date "14/03/2024"`},
		{"malformed amount", []string{"change-tier", "id1", "--tier", "Plus:v2", "--amount", "4.999"}, "--amount: billing: invalid amount"},
		{"negative amount", []string{"change-tier", "id1", "--tier", "Plus:v2", "--amount=-1"}, "--amount"},
		{"change-tier without tier", []string{"change-tier", "id1", "--amount", "4.99"}, "--tier is required"},
		{"admin without ID", []string{"cancel"}, "want one SUBSCRIPTION_ID argument, got 0"},
		{"simulate no users", []string{"simulate", "--users", "0"}, "--users 0"},
		{"simulate bad rate", []string{"simulate", "--decline-rate", "1.5"}, "--decline-rate 1.5"},
		{"simulate rates above 1", []string{"simulate", "--decline-rate", "0.6", "--pending-rate", "0.6"}, "must sum to at most 1"},
		{"help of unknown command", []string{"help", "frobnicate"}, `unknown command "frobnicate"`},
		{"invoices without subcommand", []string{"invoices"}, `"invoices" needs a subcommand: list, show, pdf`},
		{"invoices list without user", []string{"invoices", "list"}, "--user is required"},
		{"invoices list limit", []string{"invoices", "list", "--user", "u1", "--limit", "0"}, "--limit 0"},
		{"invoices show nothing", []string{"invoices", "show"}, "want one ID argument (or --number N --user USER), got 0"},
		{"invoices show number without user", []string{"invoices", "show", "--number", "A-0001"}, "--number needs --user"},
		{"invoices show ID and number", []string{"invoices", "show", "in_x", "--number", "A-0001", "--user", "u"}, "not both"},
		{"invoices pdf without file", []string{"invoices", "pdf", "in_x", "--seller", "S"}, "-o is required"},
		{"invoices pdf without seller", []string{"invoices", "pdf", "in_x", "-o", "x.pdf"}, "--seller is required"},
		{"invoices pdf bad page", []string{"invoices", "pdf", "in_x", "-o", "x.pdf", "--seller", "S", "--page-size", "A3"}, "PageSize"},
		{"invoices pdf missing logo", []string{"invoices", "pdf", "in_x", "-o", "x.pdf", "--seller", "S", "--logo", "/no/such.png"}, "--logo"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, "", tc.args...)
			r.want(t, exitUsage, tc.want, "Run 'billingctl help")
			assert.Equal(t, "", r.stdout, "usage error printed on stdout: %s", r)
		})
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "", "help")
	r.want(t, exitOK, "Usage: billingctl [global flags] COMMAND", "--endpoint URL", "--status-index mode", "Exit codes")
	for _, c := range commands {
		assert.Contains(t, r.stdout, "  "+c.name, "help lacks %q", c.name)
		h := runCLI(t, "", "help", c.name)
		h.want(t, exitOK, "Usage: billingctl "+c.name)
		h2 := runCLI(t, "", append(strings.Fields(c.name), "-h")...)
		assert.Equal(t, h.stdout, h2.stdout, "%s -h differs from help %s:\n%s", c.name, c.name, h2)
		assert.Equal(t, exitOK, h2.code, "%s -h differs from help %s:\n%s", c.name, c.name, h2)
	}
	runCLI(t, "", "--help").want(t, exitOK, "Commands:")
	runCLI(t, "", "pause", "-h").want(t, exitOK, "--months months")
}

// TestDocListsCommands keeps the package documentation's usage in step
// with the commands.
func TestDocListsCommands(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("main.go")
	require.NoError(t, err)
	src := string(b)
	for _, c := range commands {
		assert.Contains(t, src, "//\t"+c.name+" ", "the package doc's usage does not list %q", c.name)
	}
}

func TestLocalEndpoint(t *testing.T) {
	t.Parallel()
	for ep, want := range map[string]bool{
		"http://localhost:8000":                     true,
		"http://127.0.0.1:8000":                     true,
		"http://[::1]:8000":                         true,
		"http://dynamodb-local:8000":                true,
		"https://dynamodb.us-east-1.amazonaws.com":  false,
		"https://vpce-123.dynamodb.eu-west-1.vpce":  false,
		"http://10.0.0.5:8000":                      false,
		"https://dynamodb.example.com":              false,
		"http://db.localhost:8000":                  true,
		"https://dynamodb.us-gov-west-1.amazonaws.": false,
	} {
		assert.Equal(t, want, localEndpoint(ep), "localEndpoint(%q)", ep)
	}
}

// TestMissingEndpointIsARuntimeError: with neither an endpoint nor AWS
// credentials, billingctl fails at once with exit status 1 and says what
// to set (the flag, the variable, credentials); it is not a usage error.
func TestMissingEndpointIsARuntimeError(t *testing.T) {
	empty := t.TempDir()
	t.Setenv("HOME", empty)
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(empty, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(empty, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	for _, v := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
		"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "DYNAMODB_ENDPOINT"} {
		t.Setenv(v, "")
	}
	r := runCLI(t, "", "subs", "list", "u1")
	r.want(t, 1, "--endpoint", "DYNAMODB_ENDPOINT", "AWS_PROFILE", "credentials")
	assert.NotContains(t, r.stderr, "for usage", "a runtime error, not a usage error")
}

// TestEndpointFromEnvironment: DYNAMODB_ENDPOINT stands in for --endpoint,
// and a bad value is named by the variable.
func TestEndpointFromEnvironment(t *testing.T) {
	var out, errb bytes.Buffer
	env := func(k string) string {
		if k == "DYNAMODB_ENDPOINT" {
			return "not a url"
		}
		return ""
	}
	code := run(t.Context(), []string{"subs", "list", "u1"}, strings.NewReader(""), &out, &errb, env)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errb.String(), `DYNAMODB_ENDPOINT "not a url"`)
}

// TestRequiredFlagsAreNamed: every flag a command's help marks
// "(required)" is named when it is missing, before anything is read.
func TestRequiredFlagsAreNamed(t *testing.T) {
	t.Parallel()
	sample := map[string]string{"months": "2", "date": "2024-03-20", "tier": "Plus:v2", "amount": "4.99"}
	flagLine := regexp.MustCompile(`(?m)^  --(\S+).*\n\s+.*\(required\)`)
	seen := 0
	for _, c := range commands {
		h := runCLI(t, "", "help", c.name)
		var required []string
		for _, m := range flagLine.FindAllStringSubmatch(h.stdout, -1) {
			required = append(required, m[1])
		}
		for _, missing := range required {
			seen++
			args := strings.Fields(c.name)
			for range strings.Fields(positional(c.synopsis)) {
				args = append(args, "x1")
			}
			for _, other := range required {
				if other != missing {
					v, ok := sample[other]
					require.True(t, ok, "no sample value for --%s", other)
					args = append(args, "--"+other, v)
				}
			}
			args = append(args, "--yes")
			r := runCLI(t, "", args...)
			r.want(t, exitUsage, "billingctl: --"+missing+" is required")
			assert.Equal(t, "", r.stdout, "%v printed something:\n%s", args, r)
		}
	}
	// pause, change-date, change-tier (two), subscribe (two), reactivate,
	// invoices list and pdf (its -o is not spelled --).
	assert.Equal(t, 9, seen, "required flags found in the commands' help")
}

// TestUnreachableServerIsOneLine: with no server at the endpoint, every
// command that talks to DynamoDB says so in one line naming the endpoint,
// not the SDK's chain of operation, attempts and request.
func TestUnreachableServerIsOneLine(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	endpoint := "http://" + l.Addr().String()
	require.NoError(t, l.Close()) // nothing listens there now
	for _, args := range [][]string{
		{"tables", "create"}, {"tables", "describe"}, {"subs", "list", "u1"}, {"subs", "get", "s1"},
		{"history", "s1"}, {"due"}, {"notify", "preview"}, {"seed"},
		{"subscribe", "u1", "--tier", "Plus:v2", "--amount", "4.99"}, {"waive", "s1"}, {"cancel", "s1"},
		{"pause", "s1", "--months", "1"}, {"resume", "s1"}, {"change-date", "s1", "--date", "2024-03-20"},
		{"change-tier", "s1", "--tier", "Plus:v2", "--amount", "4.99"}, {"reactivate", "u1", "--date", "2024-03-20"},
		{"--due-shards", "2", "index", "backfill"},
		{"invoices", "list", "--user", "u1"}, {"invoices", "show", wellFormedInvoiceID}, {"invoices", "pdf", wellFormedInvoiceID, "-o", "-", "--seller", "S"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, "y\n", append([]string{"--endpoint", endpoint, "--yes"}, args...)...)
			assert.Equal(t, exitFail, r.code, "%s", r)
			assert.Equal(t, "billingctl: cannot reach DynamoDB at "+endpoint+": connection refused\n", r.stderr, "%s", r)
			assert.Empty(t, r.stdout, "%s", r)
		})
	}
}

// TestNoInstanceMetadataWarning: without credentials, off EC2, no
// command prints the AWS SDK's instance metadata (IMDS) warnings, on
// stderr or anywhere else: billingctl says in one line what to set.
func TestNoInstanceMetadataWarning(t *testing.T) {
	// A metadata service that is there but refuses, as on a laptop behind
	// some proxies: the SDK warns "falling back to IMDSv1".
	imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusForbidden)
	}))
	defer imds.Close()
	empty := t.TempDir()
	t.Setenv("HOME", empty)
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(empty, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(empty, "credentials"))
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.URL)
	for _, v := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_EC2_METADATA_DISABLED",
		"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "DYNAMODB_ENDPOINT"} {
		t.Setenv(v, "")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := "http://" + l.Addr().String()
	require.NoError(t, l.Close())

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no endpoint", []string{"subs", "list", "u1"}, "billingctl: no DynamoDB to talk to: pass --endpoint URL"},
		{"a remote endpoint", []string{"--endpoint", "http://dynamodb.internal.example:8000", "subs", "list", "u1"},
			"billingctl: no AWS credentials for the endpoint http://dynamodb.internal.example:8000: configure them"},
		{"a local endpoint", []string{"--endpoint", closed, "subs", "list", "u1"}, "billingctl: cannot reach DynamoDB at " + closed + ": connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r result
			sdk := captureStderr(t, func() { r = runCLI(t, "", tc.args...) })
			assert.Equal(t, exitFail, r.code, "%s", r)
			assert.True(t, strings.HasPrefix(r.stderr, tc.want), "want %q first:\n%s", tc.want, r)
			assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "more than one line:\n%s", r)
			assert.NotContains(t, r.stderr, "falling back", "%s", r)
			assert.Empty(t, sdk, "printed on the process's stderr")
		})
	}
}

// captureStderr returns what fn writes to the process's stderr (where
// the AWS SDK's default logger writes).
func captureStderr(t *testing.T, fn func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	saved := os.Stderr
	os.Stderr = w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	defer func() {
		os.Stderr = saved
	}()
	fn()
	os.Stderr = saved
	require.NoError(t, w.Close())
	return <-done
}

// wellFormedInvoiceID is an invoice ID of user u1 that no table holds:
// the store reads it (a malformed one is not found without a call).
const wellFormedInvoiceID = "in_dTE.20250314T000000.000000000Z_abcdef123456"
