package render_test

import (
	"bytes"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// screenshot is the README's picture of a PDF: the first page of the
// sample USD invoice at 60 dpi.
var screenshot = filepath.Join("..", "docs", "invoice.png")

// TestScreenshot checks that docs/invoice.png is a PNG of about a page
// at 60 dpi (A4 is 496×702 pixels); with UPDATE_SCREENSHOTS=1 it first
// writes it again with pdftoppm (poppler-utils).
func TestScreenshot(t *testing.T) {
	t.Parallel()
	if os.Getenv("UPDATE_SCREENSHOTS") == "1" {
		tool := poppler(t, "pdftoppm")
		var pdf bytes.Buffer
		require.NoError(t, newRenderer(t).PDF(&pdf, sampleUSD()))
		dir := t.TempDir()
		in := filepath.Join(dir, "invoice.pdf")
		require.NoError(t, os.WriteFile(in, pdf.Bytes(), 0o644))
		out, err := exec.Command(tool, "-png", "-r", "60", "-singlefile", in, filepath.Join(dir, "invoice")).CombinedOutput()
		require.NoError(t, err, "pdftoppm: %s", out)
		b, err := os.ReadFile(filepath.Join(dir, "invoice.png"))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(screenshot, b, 0o644))
	}
	b, err := os.ReadFile(screenshot)
	require.NoError(t, err, "run with UPDATE_SCREENSHOTS=1 to write it")
	assert.Less(t, len(b), 200<<10, "a screenshot of one page at 60 dpi is tens of kilobytes")
	cfg, err := png.DecodeConfig(bytes.NewReader(b))
	require.NoError(t, err, "%s is not a PNG", screenshot)
	assert.InDelta(t, 496, cfg.Width, 30, "width of a page at 60 dpi")
	assert.InDelta(t, 702, cfg.Height, 40, "height of a page at 60 dpi")
}
