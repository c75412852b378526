package render

// FormatAmount writes amount minor units of code as r writes it on an
// HTML page and on a PDF in the built-in font.
func FormatAmount(r *Renderer, code string, amount int64) (html, pdf string) {
	return r.money(code, false).format(amount, false), r.money(code, true).format(amount, false)
}
