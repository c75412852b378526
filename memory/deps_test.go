package memory_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLinksNoAWSPackage: the in-memory store is the embedded default, so a
// host on it must not link the AWS SDK, smithy-go or dynamolock. Its
// imports (not its tests', which compare it with the DynamoDB store) are
// listed with the go tool; the test is skipped only where there is none.
func TestLinksNoAWSPackage(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH:", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").CombinedOutput()
	require.NoError(t, err, "go list: %s", out)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/dynabill/billing/memory", "the listing is of this package")
	var sdk []string
	for _, p := range deps {
		if strings.HasPrefix(p, "github.com/aws/") || strings.Contains(p, "smithy-go") || strings.Contains(p, "dynamolock") ||
			p == "github.com/dynabill/billing/dynamostore" || p == "github.com/dynabill/billing/internal/sdkav" {
			sdk = append(sdk, p)
		}
	}
	assert.Empty(t, sdk, "memory links the DynamoDB side; move shared code below both stores (internal/av, internal/storeconf)")
}
