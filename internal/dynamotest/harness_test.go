package dynamotest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// helperEnv switches the test binary into a helper role for the subprocess
// tests below.
const helperEnv = "DYNAMOTEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "moto-orphan" {
		orphanHelper()
		return
	}
	Main(m)
}

// billingActivity is the shape of the legacy billing-activity table.
func billingActivity(t testing.TB) *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{
		TableName: aws.String(TableName(t, "billing-activity")),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("user_id"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("billing_date"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("billing_status"), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("user_id"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("billing_date"), KeyType: types.KeyTypeRange},
		},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName:  aws.String("billing_status-index"),
			KeySchema:  []types.KeySchemaElement{{AttributeName: aws.String("billing_status"), KeyType: types.KeyTypeHash}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
		}},
		BillingMode: types.BillingModePayPerRequest,
	}
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func TestHarnessRoundTrip(t *testing.T) {
	t.Parallel()
	c := Client(t)
	in := billingActivity(t)
	CreateTable(t, c, in)
	table := in.TableName
	ctx := t.Context()

	item := map[string]types.AttributeValue{
		"user_id":        s("u1"),
		"billing_date":   s("2024-01-31T00:00:00Z"),
		"billing_status": s("PENDING"),
		"billing_amount": s("4.99"),
		"billing_week":   &types.AttributeValueMemberN{Value: "3"},
	}
	_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: table, Item: item})
	require.NoError(t, err)
	got, err := c.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      table,
		Key:            map[string]types.AttributeValue{"user_id": s("u1"), "billing_date": s("2024-01-31T00:00:00Z")},
		ConsistentRead: aws.Bool(true),
	})
	require.NoError(t, err)
	want, have := fmt.Sprint(item), fmt.Sprint(got.Item)
	require.Len(t, got.Item, len(item), "GetItem round trip: got %s, want %s", have, want)
	require.Equal(t, fmt.Sprint(item["billing_week"]), fmt.Sprint(got.Item["billing_week"]), "GetItem round trip: got %s, want %s", have, want)
	require.Equal(t, "4.99", got.Item["billing_amount"].(*types.AttributeValueMemberS).Value, "billing_amount")

	// The GSI is eventually consistent in DynamoDB; poll briefly.
	deadline := time.Now().Add(5 * time.Second)
	for {
		q, err := c.Query(ctx, &dynamodb.QueryInput{
			TableName:                 table,
			IndexName:                 aws.String("billing_status-index"),
			KeyConditionExpression:    aws.String("billing_status = :s"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":s": s("PENDING")},
		})
		require.NoError(t, err)
		if len(q.Items) == 1 && q.Items[0]["user_id"].(*types.AttributeValueMemberS).Value == "u1" {
			break
		}
		require.False(t, time.Now().After(deadline), "GSI query found %d items, want u1", len(q.Items))
		time.Sleep(50 * time.Millisecond)
	}
}

func TestTableName(t *testing.T) {
	t.Parallel()
	valid := regexp.MustCompile(`^[a-zA-Z0-9_.-]{3,255}$`)
	seen := map[string]bool{}
	for _, base := range []string{"billing-activity", "", "a", "we!rd/name with spaces", strings.Repeat("x", 300)} {
		for range 3 {
			n := TableName(t, base)
			assert.Regexp(t, valid, n, "TableName(%q) = %q: not a valid DynamoDB table name", base, n)
			assert.False(t, seen[n], "TableName(%q) = %q twice", base, n)
			seen[n] = true
		}
	}
	n := TableName(t, "billing-activity")
	assert.True(t, strings.HasPrefix(n, "billing-activity-"), "TableName kept no base: %q", n)
}

func TestResolve(t *testing.T) {
	t.Parallel()
	found := func(string) (string, error) { return "/opt/bin/moto_server", nil }
	missing := func(string) (string, error) { return "", exec.ErrNotFound }
	vars := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	tests := []struct {
		name string
		e    env
		want source
		ci   bool
	}{
		{"endpoint wins", env{vars(EnvEndpoint, "http://localhost:8000/"), found}, source{endpoint: "http://localhost:8000"}, false},
		{"moto on PATH", env{vars(), found}, source{motoPath: "/opt/bin/moto_server"}, false},
		{"nothing", env{vars(), missing}, source{unavailable: "x"}, false},
		{"nothing in CI", env{vars("CI", "true"), missing}, source{unavailable: "x"}, true},
		{"CI=false", env{vars("CI", "false"), missing}, source{unavailable: "x"}, false},
	}
	for _, tt := range tests {
		got := tt.e.resolve()
		assert.Equal(t, tt.want.endpoint, got.endpoint, "%s: resolve() = %+v, want %+v", tt.name, got, tt.want)
		assert.Equal(t, tt.want.motoPath, got.motoPath, "%s: resolve() = %+v, want %+v", tt.name, got, tt.want)
		assert.Equal(t, tt.want.unavailable == "", got.unavailable == "", "%s: resolve() = %+v, want %+v", tt.name, got, tt.want)
		if got.unavailable != "" {
			assert.Contains(t, got.unavailable, `pip install "moto[server]"`, "%s: message does not say how to get a server", tt.name)
			assert.Contains(t, got.unavailable, "amazon/dynamodb-local", "%s: message does not say how to get a server", tt.name)
		}
		assert.Equal(t, tt.ci, tt.e.ci(), "%s: ci()", tt.name)
	}
}

// recordingTB captures Skip/Fatal instead of stopping the goroutine.
type recordingTB struct {
	testing.TB
	skipped, failed string
	errors          []string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recordingTB) Helper()                          {}
func (r *recordingTB) Skipf(format string, args ...any) { r.skipped = fmt.Sprintf(format, args...) }
func (r *recordingTB) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
}

func TestUnavailableSkipsOrFails(t *testing.T) {
	t.Parallel()
	for _, ci := range []string{"", "true"} {
		r := &recordingTB{TB: t}
		unavailable(r, env{getenv: func(k string) string {
			if k == "CI" {
				return ci
			}
			return ""
		}}, "no server")
		if ci == "true" {
			assert.NotEmpty(t, r.failed, "CI=%q: skipped=%q failed=%q", ci, r.skipped, r.failed)
			assert.Empty(t, r.skipped, "CI=%q: skipped=%q failed=%q", ci, r.skipped, r.failed)
		} else {
			assert.NotEmpty(t, r.skipped, "CI=%q: skipped=%q failed=%q", ci, r.skipped, r.failed)
			assert.Empty(t, r.failed, "CI=%q: skipped=%q failed=%q", ci, r.skipped, r.failed)
		}
	}
}

// subprocessEnv is the current environment without the variables the
// harness reads, plus extra.
func subprocessEnv(extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k != EnvEndpoint && k != "CI" && k != "PATH" && k != helperEnv {
			out = append(out, kv)
		}
	}
	return append(out, extra...)
}

// TestNoServer runs the round-trip test in a copy of this binary whose PATH
// has no moto_server and whose environment has no DYNAMODB_ENDPOINT: it must
// skip with instructions, and fail under CI=true.
func TestNoServer(t *testing.T) {
	t.Parallel()
	empty := t.TempDir()
	for _, ci := range []string{"", "true"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHarnessRoundTrip$", "-test.v", "-test.count=1")
		cmd.Env = subprocessEnv("PATH="+empty, "CI="+ci)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		switch {
		case ci == "" && err != nil:
			t.Errorf("CI unset: want success (skip), got %v\n%s", err, out)
		case ci == "" && !strings.Contains(string(out), "--- SKIP: TestHarnessRoundTrip"):
			t.Errorf("CI unset: want a skip\n%s", out)
		case ci == "true" && !errors.As(err, &exit):
			t.Errorf("CI=true: want a failing exit, got %v\n%s", err, out)
		case ci == "true" && !strings.Contains(string(out), "--- FAIL: TestHarnessRoundTrip"):
			t.Errorf("CI=true: want a failure\n%s", out)
		}
		assert.Contains(t, string(out), `pip install "moto[server]"`, "CI=%q: output does not say how to get a server", ci)
	}
}

// orphanHelper runs in a subprocess: it starts moto, reports its pid and
// waits to be killed.
func orphanHelper() {
	path, err := exec.LookPath(motoCommand)
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(2)
	}
	srv, err := startMoto(path)
	if err != nil {
		fmt.Println("ERR", strings.ReplaceAll(err.Error(), "\n", " | "))
		os.Exit(2)
	}
	fmt.Println("PID", srv.pid, srv.endpoint)
	time.Sleep(time.Minute)
	os.Exit(3)
}

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) S ...: the state follows the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}

// TestMotoDiesWithBinary SIGKILLs a test binary that started moto (so no
// cleanup code runs) and checks that the kernel killed moto too.
func TestMotoDiesWithBinary(t *testing.T) {
	if _, err := exec.LookPath(motoCommand); err != nil {
		t.Skipf("%s not on PATH", motoCommand)
	}
	t.Parallel()
	cmd := exec.Command(os.Args[0])
	cmd.Env = subprocessEnv("PATH="+os.Getenv("PATH"), helperEnv+"=moto-orphan")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()

	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "helper said nothing")
	var pid int
	var endpoint string
	_, err = fmt.Sscanf(line, "PID %d %s", &pid, &endpoint)
	require.NoError(t, err, "helper: %s", line)
	require.True(t, alive(pid), "moto pid %d not running while the helper lives", pid)
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("moto pid %d survived its test binary", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	_, err = newClient(endpoint).ListTables(ctx, &dynamodb.ListTablesInput{})
	require.Error(t, err, "%s still answers after its moto was killed", endpoint)
}

func TestTailBuffer(t *testing.T) {
	t.Parallel()
	b := &tailBuffer{max: 16}
	fmt.Fprint(b, "one\ntwo\nthree\nfour\nfive\nsix\n")
	assert.Equal(t, "five\nsix", b.tail(2), "tail(2)")
	assert.Equal(t, "(no output)", (&tailBuffer{max: 16}).tail(3), "empty tail")
}
