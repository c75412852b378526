package dynamotest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// EnvEndpoint names the environment variable that points the tests at an
// already running DynamoDB-compatible server, e.g. http://localhost:8000.
const EnvEndpoint = "DYNAMODB_ENDPOINT"

const (
	motoCommand = "moto_server"
	// Region is the region every test client uses.
	Region = "us-east-1"
	// howTo is appended to every "no server" message.
	howTo = `install moto (pip install "moto[server]") so that moto_server is on PATH, ` +
		`or run DynamoDB Local (docker run -p 8000:8000 amazon/dynamodb-local) and set ` +
		EnvEndpoint + "=http://localhost:8000"
)

// env is the part of the process environment the harness depends on; tests
// replace it to check the decisions without touching the real environment.
type env struct {
	getenv   func(string) string
	lookPath func(string) (string, error)
}

var osEnv = env{getenv: os.Getenv, lookPath: exec.LookPath}

// ci reports whether missing infrastructure must fail the tests (CI=true)
// instead of skipping them.
func (e env) ci() bool {
	v, _ := strconv.ParseBool(e.getenv("CI"))
	return v
}

// source is where the server comes from: an explicit endpoint, a moto_server
// binary to start, or neither (unavailable is then the reason).
type source struct {
	endpoint    string
	motoPath    string
	unavailable string
}

func (e env) resolve() source {
	if ep := strings.TrimSpace(e.getenv(EnvEndpoint)); ep != "" {
		return source{endpoint: strings.TrimRight(ep, "/")}
	}
	if p, err := e.lookPath(motoCommand); err == nil {
		return source{motoPath: p}
	}
	return source{unavailable: "no DynamoDB-compatible server: " + EnvEndpoint +
		" is not set and " + motoCommand + " is not on PATH; " + howTo}
}

// unavailable skips the test, or fails it when CI=true.
func unavailable(t testing.TB, e env, reason string) {
	t.Helper()
	if e.ci() {
		t.Fatalf("dynamotest: %s\n(CI=true: integration tests must run, so this fails instead of skipping)", reason)
		return
	}
	t.Skipf("dynamotest: %s", reason)
}

// state is the per-binary server state. The server starts lazily, once.
var state struct {
	once     sync.Once
	endpoint string
	err      error
	client   *dynamodb.Client

	mu     sync.Mutex
	server *motoServer // nil when not started by us or already stopped
}

func setup() {
	src := osEnv.resolve()
	switch {
	case src.endpoint != "":
		state.endpoint = src.endpoint
	case src.motoPath != "":
		s, err := startMoto(src.motoPath)
		if err != nil {
			state.err = fmt.Errorf("%s did not start (to run these tests %s): %w", motoCommand, howTo, err)
			return
		}
		state.mu.Lock()
		state.server = s
		state.mu.Unlock()
		state.endpoint = s.endpoint
	default:
		state.err = errors.New(src.unavailable)
		return
	}
	state.client = newClient(state.endpoint)
}

// Main runs the tests of a package and then stops the moto_server the
// harness started, if any. Call it from TestMain:
//
//	func TestMain(m *testing.M) { dynamotest.Main(m) }
//
// When tests fail, the tail of moto's output is printed to stderr. Main is a
// courtesy, not a requirement: the server is also killed by the kernel when
// the test binary exits for any reason (see [Endpoint]).
func Main(m *testing.M) {
	code := m.Run()
	state.mu.Lock()
	s := state.server
	state.server = nil
	state.mu.Unlock()
	if s != nil {
		if code != 0 {
			fmt.Fprintf(os.Stderr, "dynamotest: moto_server output (tail):\n%s\n", s.out.tail(30))
		}
		s.stop()
	}
	os.Exit(code)
}

// Endpoint returns the base URL of the DynamoDB-compatible server for this
// test binary: $DYNAMODB_ENDPOINT when set, otherwise a moto_server that the
// first call starts on a free loopback port. The server lives until [Main]
// stops it or the test binary exits: it runs with Pdeathsig=SIGKILL in its
// own process group, so it cannot outlive the binary even when the binary is
// killed.
//
// When no server is available the test is skipped with a message saying how
// to get one, except when the environment has CI=true: then it fails.
func Endpoint(t testing.TB) string {
	t.Helper()
	state.once.Do(setup)
	if state.err != nil {
		unavailable(t, osEnv, state.err.Error())
	}
	return state.endpoint
}

// Client returns a DynamoDB client for [Endpoint] (region us-east-1, static
// credentials "test"/"test", short retry backoff). The client is shared by
// all tests of the binary and is safe for concurrent use. It skips or fails
// the test like [Endpoint].
func Client(t testing.TB) *dynamodb.Client {
	t.Helper()
	Endpoint(t)
	return state.client
}

func newClient(endpoint string) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:       Region,
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = 3
			o.MaxBackoff = 100 * time.Millisecond
			o.RateLimiter = ratelimit.None
		}),
	})
}

var (
	tableSeq atomic.Uint64
	runID    = func() string {
		b := make([]byte, 3)
		_, _ = rand.Read(b)
		return hex.EncodeToString(b)
	}()
)

// TableName returns a table name unique to this call, this test binary and
// (very likely) every other binary sharing the server: base, then a random
// per-binary tag and a counter, e.g. "billing-activity-3fa2c1-7". Characters
// DynamoDB does not allow in names are replaced by '-'; an empty base uses
// the test's name. The result is a valid name (3–255 chars of [a-zA-Z0-9_.-]).
func TableName(t testing.TB, base string) string {
	t.Helper()
	if base == "" {
		base = t.Name()
	}
	suffix := "-" + runID + "-" + strconv.FormatUint(tableSeq.Add(1), 10)
	b := []byte(base)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			b[i] = '-'
		}
	}
	if max := 255 - len(suffix); len(b) > max {
		b = b[:max]
	}
	return string(b) + suffix
}

// CreateTable creates the table described by in (TableName is required, see
// [TableName]), waits until it and its global secondary indexes are ACTIVE,
// and registers a cleanup that deletes it (errors ignored). It fails the
// test when the table cannot be created.
func CreateTable(t testing.TB, c *dynamodb.Client, in *dynamodb.CreateTableInput) {
	t.Helper()
	if in == nil || aws.ToString(in.TableName) == "" {
		t.Fatal("dynamotest.CreateTable: TableName is required (use dynamotest.TableName)")
		return
	}
	name := aws.ToString(in.TableName)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var inUse *types.ResourceInUseException
	if _, err := c.CreateTable(ctx, in); err != nil && !errors.As(err, &inUse) {
		t.Fatalf("dynamotest.CreateTable %s: %v", name, err)
		return
	}
	// "Already exists" for a name made for this call is this call's own
	// create applied once already: the SDK retried a request the busy
	// server answered too late. The table is waited for as any other.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = c.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	w := dynamodb.NewTableExistsWaiter(c, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay = 20 * time.Millisecond
		o.MaxDelay = 500 * time.Millisecond
		o.Retryable = tableActive
	})
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, 30*time.Second); err != nil {
		t.Fatalf("dynamotest.CreateTable %s: waiting for ACTIVE: %v", name, err)
	}
}

// tableActive is the waiter's retry decision: retry until the table and all
// its global secondary indexes are ACTIVE.
func tableActive(_ context.Context, _ *dynamodb.DescribeTableInput, out *dynamodb.DescribeTableOutput, err error) (bool, error) {
	if err != nil {
		var nf *types.ResourceNotFoundException
		if errors.As(err, &nf) {
			return true, nil
		}
		return false, err
	}
	if out.Table == nil || out.Table.TableStatus != types.TableStatusActive {
		return true, nil
	}
	for _, g := range out.Table.GlobalSecondaryIndexes {
		if g.IndexStatus != "" && g.IndexStatus != types.IndexStatusActive {
			return true, nil
		}
	}
	return false, nil
}

// LongEnv names the variable that turns on the long tests on the local
// server.
const LongEnv = "BILLING_LONG_TESTS"

// LongTests reports whether $BILLING_LONG_TESTS is set: CI's long step,
// where a test runs its full size instead of the README command's share.
func LongTests() bool { return os.Getenv(LongEnv) != "" }

// Long skips t unless $BILLING_LONG_TESTS is set: a test on the local
// DynamoDB server that CI runs in a step of its own, because the server
// answers one request at a time and the README's test command must stay
// within minutes. Those are the simulations of months on the server, and
// the engine's by-store tests on the single table on the server (the
// README's command runs them on both in-memory layouts and on the legacy
// tables on the server; dynamostore's own tests cover the single table on
// the server there). With the variable set they fail rather than skip.
func Long(t testing.TB) {
	t.Helper()
	if !LongTests() {
		t.Skipf("left to CI's long step on the local DynamoDB server: %s=1 runs it", LongEnv)
	}
}
