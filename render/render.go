package render

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	_ "image/jpeg" // the logo may be a JPEG
	_ "image/png"  // or a PNG
	"time"

	"github.com/bojanz/currency"
	"github.com/go-pdf/fpdf"
)

// Seller is who issues the documents, as it heads each one.
type Seller struct {
	// Name is the seller's legal name. Required.
	Name string
	// Address is the postal address, one line per entry.
	Address []string
	// TaxID is the seller's tax or VAT registration, shown as given
	// ("VAT DE123456789"). Defaults to "": none shown.
	TaxID string
	// Logo is a PNG or JPEG image drawn above the name, scaled to a
	// height of about 14 mm on a PDF and 56 px on a page. Defaults to nil:
	// no logo.
	Logo []byte
	// Footer is a line or two at the bottom of every document (payment
	// terms, a support address). Defaults to "": none.
	Footer string
}

// Config says how a [Renderer] lays out documents. Only Seller.Name is
// required.
type Config struct {
	// Seller heads every document.
	Seller Seller
	// Locale is the BCP 47 locale amounts are written in: the currency's
	// symbol, the grouping and the decimal separator ("en": $1,234.50,
	// "de": 1.234,50 $, "fr-CH": 1 234,50 $US). Labels are English
	// whatever the locale. Defaults to "en".
	Locale string
	// Location is the time zone dates are shown in. Defaults to UTC.
	Location *time.Location
	// PageSize is the PDF's paper: "A4" or "Letter". Defaults to "A4".
	PageSize string
	// Font is a TrueType font (the bytes of a .ttf file) for PDFs, and
	// BoldFont its bold face (defaults to Font). Without one, PDFs use the
	// built-in Helvetica, which shows Western European text only
	// (Windows-1252): a document with other text (Greek, Cyrillic, CJK)
	// is then an error wrapping [ErrUnsupportedText]. Amounts never are:
	// a symbol Helvetica lacks is written as the currency's code.
	// Defaults to nil.
	Font, BoldFont []byte
}

// Renderer writes invoices and credit notes as HTML pages and PDF files.
// Make one with [New] when the host starts; it holds no state between
// documents and may be used by many goroutines at once.
type Renderer struct {
	cfg    Config
	locale currency.Locale
	logo   logoInfo
}

// logoInfo is what New learned of the logo.
type logoInfo struct {
	mime, pdfType string // "image/png", "PNG"
	w, h          int    // pixels
}

// Errors wrapped by what New and the Renderer's methods return.
var (
	// ErrConfig is a Config New refuses; the error names the field.
	ErrConfig = errors.New("render: invalid config")
	// ErrUnsupportedText is a document whose text the PDF's font cannot
	// show; give Config.Font.
	ErrUnsupportedText = errors.New("render: text the PDF's font cannot show (give Config.Font)")
	// ErrWrongInvoice is a credit note rendered with an invoice it is not
	// against.
	ErrWrongInvoice = errors.New("render: the credit note is not against this invoice")
)

// New checks cfg and returns its Renderer. The logo must decode as a PNG
// or a JPEG the PDF writer reads, and the fonts must parse: a bad one is
// an error now, when the host starts, not when a customer downloads a
// document. Errors wrap [ErrConfig] and name the field.
func New(cfg Config) (*Renderer, error) {
	bad := func(field string, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrConfig, field, fmt.Sprintf(format, args...))
	}
	if cfg.Seller.Name == "" {
		return nil, bad("Seller.Name", "missing")
	}
	if cfg.Locale == "" {
		cfg.Locale = "en"
	}
	loc := currency.NewLocale(cfg.Locale)
	if loc.Language == "" {
		return nil, bad("Locale", "%q is not a BCP 47 locale", cfg.Locale)
	}
	if cfg.Location == nil {
		cfg.Location = time.UTC
	}
	switch cfg.PageSize {
	case "":
		cfg.PageSize = "A4"
	case "A4", "Letter":
	default:
		return nil, bad("PageSize", "%q: want A4 or Letter", cfg.PageSize)
	}
	if cfg.BoldFont == nil {
		cfg.BoldFont = cfg.Font
	}
	if cfg.Font == nil && cfg.BoldFont != nil {
		return nil, bad("BoldFont", "given without Font")
	}
	r := &Renderer{cfg: cfg, locale: loc}
	if len(cfg.Seller.Logo) > 0 {
		c, format, err := image.DecodeConfig(bytes.NewReader(cfg.Seller.Logo))
		if err != nil {
			return nil, bad("Seller.Logo", "not a PNG or JPEG image: %v", err)
		}
		switch format {
		case "png":
			r.logo = logoInfo{mime: "image/png", pdfType: "PNG"}
		case "jpeg":
			r.logo = logoInfo{mime: "image/jpeg", pdfType: "JPG"}
		default:
			return nil, bad("Seller.Logo", "a %s image: want PNG or JPEG", format)
		}
		r.logo.w, r.logo.h = c.Width, c.Height
		if c.Width == 0 || c.Height == 0 {
			return nil, bad("Seller.Logo", "an image of %d×%d pixels", c.Width, c.Height)
		}
	}
	// The PDF writer has its own decoders (no interlaced PNG, for one) and
	// font parser: try them once.
	pdf := fpdf.New("P", "mm", cfg.PageSize, "")
	if r.logo.mime != "" {
		pdf.RegisterImageOptionsReader("logo", fpdf.ImageOptions{ImageType: r.logo.pdfType}, bytes.NewReader(cfg.Seller.Logo))
		if err := pdf.Error(); err != nil {
			return nil, bad("Seller.Logo", "the PDF writer cannot read it: %v", err)
		}
	}
	for _, f := range []struct {
		field, style string
		ttf          []byte
	}{{"Font", "", cfg.Font}, {"BoldFont", "B", cfg.BoldFont}} {
		if f.ttf == nil {
			continue
		}
		// The PDF writer prints a font it cannot parse on stdout and goes
		// on without it: look at the header first, then ask for the font.
		if len(f.ttf) < 12 || (!bytes.HasPrefix(f.ttf, []byte{0, 1, 0, 0}) && !bytes.HasPrefix(f.ttf, []byte("true"))) {
			return nil, bad(f.field, "not a TrueType font (.ttf)")
		}
		pdf.AddUTF8FontFromBytes("body", f.style, f.ttf)
		pdf.SetFont("body", f.style, 10)
		if err := pdf.Error(); err != nil {
			return nil, bad(f.field, "not a TrueType font the PDF writer reads: %v", err)
		}
	}
	return r, nil
}

// WithLocale returns a copy of r that writes amounts in locale id (see
// [Config.Locale]; "" is "en"), for a host whose customers read different
// locales. It is cheap: nothing is checked again but the locale.
func (r *Renderer) WithLocale(id string) (*Renderer, error) {
	if id == "" {
		id = "en"
	}
	loc := currency.NewLocale(id)
	if loc.Language == "" {
		return nil, fmt.Errorf("%w: Locale: %q is not a BCP 47 locale", ErrConfig, id)
	}
	c := *r
	c.cfg.Locale, c.locale = id, loc
	return &c, nil
}

// Error is a document that could not be written: which one, in which
// format, and why (Err, for errors.Is and errors.As: an invoice that does
// not pass [billing.Invoice.Validate], [ErrUnsupportedText],
// [ErrWrongInvoice], or the writer's error).
type Error struct {
	// Doc is "invoice" or "credit note"; ID is its ID.
	Doc, ID string
	// Format is "html" or "pdf".
	Format string
	Err    error
}

func (e *Error) Error() string {
	return fmt.Sprintf("render: %s %s (%s): %v", e.Doc, e.ID, e.Format, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }
