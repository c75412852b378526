package billingui

import (
	"bytes"
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billinghttp"
)

// ActionOverview is the Authorizer's action for the pages over every user
// (Today, Attention, Search): a read (Write false) with Operator true and
// UserID "*".
const ActionOverview = "console.overview"

// Defaults of [Config].
const (
	DefaultPageSize     = 50
	DefaultMaxPages     = 4
	DefaultHistoryPage  = 50
	DefaultRecentPeriod = 24
	MinCSRFKeyLen       = 32
	DefaultCSRFTokenTTL = 12 * time.Hour
)

// Config configures the console. Collector, Repository, History and
// Authorizer are required.
type Config struct {
	// Collector performs the actions and reads a user's subscription view;
	// its Clock is the console's.
	Collector *billing.Collector
	// Repository is the store the collector was built on: status-index
	// pages, GetByID and Recent.
	Repository billing.Repository
	// History is the collector's history, read for a user's timeline.
	History billing.History
	// Authorizer decides each page and action (see the package
	// documentation). No default: New fails without one.
	Authorizer billinghttp.Authorizer
	// Operator names the signed-in operator of a request, recorded with
	// who made each action (the history row's data_operator) and shown in
	// the timeline; the Authorizer decides what they may do. Defaults to
	// DefaultOperator: the basic-auth user name, else "console".
	Operator func(*http.Request) string
	// CSRFKey signs the forms' tokens; at least 32 bytes. Defaults to a
	// random key made by New (forms then do not survive a restart, and
	// several instances behind one load balancer need the same key).
	CSRFKey []byte
	// Invoices is the store of the invoices the collector issues
	// (billing.Config.Invoices): the customer page lists the user's,
	// newest first, with their credit notes. Defaults to none: the page
	// shows no invoice section.
	Invoices billing.Invoices
	// Documents writes the PDF and HTML of an invoice and the PDF of a
	// credit note, which the invoice section links to (a
	// *render.Renderer is one). Defaults to none: invoices are listed
	// without links to documents.
	Documents Documents
	// Runs holds the reports of recent runs for the Today page. Defaults to
	// none: Today then shows only what the status index tells.
	Runs *RunLog
	// PageSize is the number of records a status-index page reads.
	// Defaults to 50.
	PageSize int
	// MaxPages bounds the status-index pages one view reads; a link
	// continues from the cursor. Defaults to 4.
	MaxPages int
	// RequestTimeout is how long an attempt may still be running at the
	// processor; an attempt in flight for longer is listed on Attention.
	// Defaults to billing.DefaultRequestTimeout.
	RequestTimeout time.Duration
	// ACHSettlementDeadline is how long an ACH debit waits for its
	// settlement before Attention lists it. Defaults to
	// billing.DefaultACHSettlementDeadline.
	ACHSettlementDeadline time.Duration
	// Logger receives the errors the pages do not show (storage failures).
	// Defaults to none (quiet).
	Logger *slog.Logger
	// Currency is the ISO 4217 code of the amounts (a billing.Amount
	// counts its minor units): they are shown with its symbol, a comma
	// between thousands and its minor unit's decimals ("$1,408.45",
	// "¥1,408"). Defaults to USD.
	Currency string
	// Location is the time zone the pages show times in, each with its
	// zone's abbreviation. Defaults to UTC.
	Location *time.Location
	// SecureCookies marks the console's cookie Secure (sent over HTTPS
	// only) on every response: set it behind a proxy that terminates TLS,
	// where the handler sees plain HTTP. Defaults to false: the cookie is
	// Secure when the request reached the handler over TLS.
	SecureCookies bool
	// CSRFTokenTTL is how long a form's token is accepted after the page
	// was rendered; an older form is refused and asks for a reload.
	// Defaults to 12 hours.
	CSRFTokenTTL time.Duration
	// Session returns what identifies the signed-in operator's session
	// (a session ID, the operator's name and sign-in time, "" when
	// none): each form's token is bound to it, so a token rendered for
	// one operator's session is refused in another's, in the same browser
	// too. Defaults to none: a token is bound to the browser's cookie
	// only.
	Session func(*http.Request) string
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// Handler is the console; see [New].
type Handler struct {
	cfg   Config
	mux   *http.ServeMux
	pages map[string]*template.Template
	cop   *http.CrossOriginProtection
	log   *slog.Logger
	// currency is Config.Currency's.
	currency currency
	// dunning reports that the collector has a dunning policy
	// (billing.Config.Dunning): the pages show the schedules.
	dunning bool
}

var _ http.Handler = (*Handler)(nil)

// New returns the console handler. Mount it under a prefix with
// [http.StripPrefix]; its links are relative, so any prefix works.
func New(cfg Config) (*Handler, error) {
	switch {
	case cfg.Collector == nil:
		return nil, errors.New("billingui: Config.Collector is required")
	case cfg.Repository == nil:
		return nil, errors.New("billingui: Config.Repository is required")
	case cfg.History == nil:
		return nil, errors.New("billingui: Config.History is required")
	case cfg.Authorizer == nil:
		return nil, errors.New("billingui: Config.Authorizer is required")
	case cfg.CSRFKey != nil && len(cfg.CSRFKey) < MinCSRFKeyLen:
		return nil, fmt.Errorf("billingui: Config.CSRFKey has %d bytes, want at least %d", len(cfg.CSRFKey), MinCSRFKeyLen)
	case cfg.PageSize < 0 || cfg.MaxPages < 0 || cfg.RequestTimeout < 0 || cfg.ACHSettlementDeadline < 0 || cfg.CSRFTokenTTL < 0:
		return nil, errors.New("billingui: Config.PageSize, MaxPages, RequestTimeout, ACHSettlementDeadline and CSRFTokenTTL must not be negative")
	}
	cur, err := currencyOf(cfg.Currency)
	if err != nil {
		return nil, err
	}
	if cfg.Location == nil {
		cfg.Location = time.UTC
	}
	if cfg.CSRFTokenTTL == 0 {
		cfg.CSRFTokenTTL = DefaultCSRFTokenTTL
	}
	if cfg.CSRFKey == nil {
		cfg.CSRFKey = make([]byte, MinCSRFKeyLen)
		if _, err := rand.Read(cfg.CSRFKey); err != nil {
			return nil, fmt.Errorf("billingui: CSRF key: %w", err)
		}
	}
	if cfg.Operator == nil {
		cfg.Operator = DefaultOperator
	}
	if cfg.PageSize == 0 {
		cfg.PageSize = DefaultPageSize
	}
	if cfg.MaxPages == 0 {
		cfg.MaxPages = DefaultMaxPages
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = billing.DefaultRequestTimeout
	}
	if cfg.ACHSettlementDeadline == 0 {
		cfg.ACHSettlementDeadline = billing.DefaultACHSettlementDeadline
	}
	h := &Handler{cfg: cfg, mux: http.NewServeMux(), pages: map[string]*template.Template{}, log: cfg.Logger, currency: cur,
		dunning: hasDunning(cfg.Collector)}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	for _, name := range []string{"today", "attention", "customer", "search", "confirm", "error"} {
		t, err := template.New("layout.html").Funcs(h.funcs()).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("billingui: template %s: %w", name, err)
		}
		h.pages[name] = t
	}
	h.cop = http.NewCrossOriginProtection()
	h.cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.fail(w, r, http.StatusForbidden, "cross-origin request refused")
	}))
	assets, _ := fs.Sub(assetFS, "assets")
	h.mux.Handle("GET /assets/", http.StripPrefix("/assets/", h.files(assets)))
	h.mux.HandleFunc("GET /{$}", h.today)
	h.mux.HandleFunc("GET /attention", h.attention)
	h.mux.HandleFunc("GET /search", h.search)
	h.mux.HandleFunc("GET /customer", h.customer)
	h.mux.HandleFunc("GET /confirm", h.confirm)
	h.mux.HandleFunc("POST /action", h.action)
	h.mux.HandleFunc("GET /invoice.pdf", h.invoicePDF)
	h.mux.HandleFunc("GET /invoice.html", h.invoiceHTML)
	h.mux.HandleFunc("GET /credit-note.pdf", h.creditNotePDF)
	return h, nil
}

// ServeHTTP serves the console. Every response forbids framing and
// scripts from elsewhere; every POST passes the cross-origin check first.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
	h.cop.Handler(h.mux).ServeHTTP(w, r)
}

// files serves the files of fsys; a directory (the listing FileServer
// would write) is not found.
func (h *Handler) files(fsys fs.FS) http.Handler {
	srv := http.FileServerFS(fsys)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimSuffix(r.URL.Path, "/")
		if name == "" || !fs.ValidPath(name) {
			h.fail(w, r, http.StatusNotFound, "no such file")
			return
		}
		if st, err := fs.Stat(fsys, name); err != nil || st.IsDir() {
			h.fail(w, r, http.StatusNotFound, "no such file")
			return
		}
		srv.ServeHTTP(w, r)
	})
}

// authorize asks the host's Authorizer and answers a refusal; it reports
// whether the request may go on.
func (h *Handler) authorize(w http.ResponseWriter, r *http.Request, a billinghttp.Action) bool {
	err := h.cfg.Authorizer(r, a)
	if err == nil {
		return true
	}
	if errors.Is(err, billinghttp.ErrUnauthenticated) {
		h.fail(w, r, http.StatusUnauthorized, "not signed in")
		return false
	}
	h.log.InfoContext(r.Context(), "billingui: refused", "action", a.Name, "user_id", a.UserID, "error", err)
	h.fail(w, r, http.StatusForbidden, "your role may not do this ("+a.Name+")")
	return false
}

// allowed asks the Authorizer without answering: for the buttons shown.
func (h *Handler) allowed(r *http.Request, a billinghttp.Action) bool {
	return h.cfg.Authorizer(r, a) == nil
}

func overview() billinghttp.Action {
	return billinghttp.Action{Name: ActionOverview, UserID: "*", Operator: true}
}

// page is what every template gets.
type page struct {
	Title string
	Nav   string
	Now   time.Time
	Error string
	Data  any
}

func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	p.Now = h.now()
	var buf bytes.Buffer
	if err := h.pages[name].Execute(&buf, p); err != nil {
		h.log.ErrorContext(r.Context(), "billingui: render", "page", name, "error", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

func (h *Handler) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	h.render(w, r, status, "error", page{Title: http.StatusText(status), Error: msg})
}

// internal logs err and answers 500 without its text.
func (h *Handler) internal(w http.ResponseWriter, r *http.Request, what string, err error) {
	h.log.ErrorContext(r.Context(), "billingui: "+what, "error", err)
	h.fail(w, r, http.StatusInternalServerError, what+" failed; the error is in the host's log")
}

func (h *Handler) now() time.Time { return h.cfg.Collector.Clock().Now().UTC() }
