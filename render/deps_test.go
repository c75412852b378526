package render_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHostsWithoutRenderLinkNoPDF: the root package and the stores do
// not link the PDF writer or the locale data; only this package does.
func TestHostsWithoutRenderLinkNoPDF(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH:", err)
	}
	pkgs := []string{"github.com/dynabill/billing", "github.com/dynabill/billing/memory", "github.com/dynabill/billing/dynamostore"}
	out, err := exec.Command(goTool, append([]string{"list", "-deps"}, pkgs...)...).CombinedOutput()
	require.NoError(t, err, "go list: %s", out)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/dynabill/billing/dynamostore", "the listing is of the stores")
	for _, p := range deps {
		assert.False(t, strings.HasPrefix(p, "github.com/go-pdf/") || strings.HasPrefix(p, "github.com/bojanz/") ||
			p == "github.com/dynabill/billing/render", "%s linked by a host that does not render", p)
	}
	out, err = exec.Command(goTool, "list", "-deps", ".").CombinedOutput()
	require.NoError(t, err, "go list: %s", out)
	assert.Contains(t, strings.Fields(string(out)), "github.com/go-pdf/fpdf", "the listing of render names its PDF writer")
}
