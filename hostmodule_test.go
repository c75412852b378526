package billing_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHostModuleOutsideTheRepository builds ExampleCollector_Subscribe as
// a host would: a module of its own outside this repository, requiring
// the library (replaced by this checkout), with the example's body as its
// main. It must print the example's own output: subscribed, three months,
// three charges. It catches an example that only compiles inside the
// package (an unexported name, an internal/ import).
func TestHostModuleOutsideTheRepository(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module: skipped with -short")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	root, err := os.Getwd()
	require.NoError(t, err)
	src, err := os.ReadFile(filepath.Join(root, "subscribe_example_test.go"))
	require.NoError(t, err)
	text := string(src)
	const start = "func ExampleCollector_Subscribe() {"
	i, j := strings.Index(text, "import ("), strings.Index(text, start)
	k := strings.Index(text, "\t// Output:\n")
	require.True(t, i >= 0 && j > i && k > j, "the example's shape changed")
	imports := text[i : strings.Index(text[i:], ")\n")+i+2]
	for _, line := range strings.Split(imports, "\n") {
		require.NotContains(t, line, "/internal/", "a host cannot import internal packages")
	}
	var want strings.Builder
	for _, line := range strings.Split(strings.TrimSuffix(text[k+len("\t// Output:\n"):], "\n"), "\n") {
		if line == "}" {
			break
		}
		want.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "\t//"), " ") + "\n")
	}

	dir := t.TempDir()
	gomod := "module example.com/host\n\ngo 1.26\n\nrequire github.com/dynabill/billing v0.0.0\n\nreplace github.com/dynabill/billing => " + root + "\n"
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	require.NoError(t, err)
	main := "package main\n\n" + imports + "\nfunc main() {" + text[j+len(start):k] + "}\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(main), 0o644))
	cmd := exec.CommandContext(t.Context(), goBin, "run", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go run in the host module:\n%s", out)
	require.Equal(t, want.String(), string(out))
}
