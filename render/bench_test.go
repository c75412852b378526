package render_test

import (
	"io"
	"testing"
)

// BenchmarkPDF and BenchmarkHTML: the cost of one document, the sample
// USD invoice (six lines, a logo) in the built-in font.
func BenchmarkPDF(b *testing.B) {
	r, inv := newRenderer(b), sampleUSD()
	b.ReportAllocs()
	for b.Loop() {
		if err := r.PDF(io.Discard, inv); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHTML(b *testing.B) {
	r, inv := newRenderer(b), sampleUSD()
	b.ReportAllocs()
	for b.Loop() {
		if err := r.HTML(io.Discard, inv); err != nil {
			b.Fatal(err)
		}
	}
}
