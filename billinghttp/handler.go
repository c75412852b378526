package billinghttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dynabill/billing"
)

// DefaultMaxBodyBytes is the request body limit when Config.MaxBodyBytes
// is 0: 64 KiB, far more than any request of this API needs.
const DefaultMaxBodyBytes = 64 << 10

// Config configures a [Handler]. Repository, History, Collector and
// Authorize are required; the other fields have defaults.
type Config struct {
	// Repository reads the records. It must be the collector's.
	Repository billing.Repository
	// History reads the audit trail of a record.
	History billing.History
	// Collector makes the manual repayments and admin changes.
	Collector *billing.Collector
	// Authorize decides every request before anything else is done (see
	// [Authorizer]). Required: there is no open default.
	Authorize Authorizer
	// Logger receives one record per failed request: 5xx at error level
	// with the real error (which the response never contains), 401/403 at
	// info level, other 4xx at debug level. Defaults to discarding them.
	Logger *slog.Logger
	// MaxBodyBytes limits request bodies; a larger one is answered 413.
	// Defaults to DefaultMaxBodyBytes (64 KiB).
	MaxBodyBytes int64
	// Challenge is the WWW-Authenticate header of 401 responses, e.g.
	// `Bearer realm="billing"`. Defaults to none.
	Challenge string
	// CrossOrigin refuses cross-origin browser requests that change
	// records (POST), so that an Authorizer relying on cookies is not open
	// to cross-site request forgery; non-browser clients are not affected.
	// Defaults to http.NewCrossOriginProtection(), which trusts no other
	// origin; pass your own to add trusted origins.
	CrossOrigin *http.CrossOriginProtection
}

// Handler is the admin API: an [http.Handler] serving JSON. It is safe
// for concurrent use. Build it with [New].
type Handler struct {
	cfg  Config
	log  *slog.Logger
	mux  *http.ServeMux
	csrf *http.CrossOriginProtection
}

var _ http.Handler = (*Handler)(nil)

// New checks cfg, fills its defaults and returns the handler. It fails,
// naming the field, when Repository, History, Collector or Authorize is
// nil or MaxBodyBytes is negative.
func New(cfg Config) (*Handler, error) {
	switch {
	case cfg.Authorize == nil:
		return nil, errors.New("billinghttp: Config.Authorize is required (there is no open default)")
	case cfg.Repository == nil:
		return nil, errors.New("billinghttp: Config.Repository is required")
	case cfg.History == nil:
		return nil, errors.New("billinghttp: Config.History is required")
	case cfg.Collector == nil:
		return nil, errors.New("billinghttp: Config.Collector is required")
	case cfg.MaxBodyBytes < 0:
		return nil, fmt.Errorf("billinghttp: Config.MaxBodyBytes: negative %d", cfg.MaxBodyBytes)
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	// The defaults go into cfg itself, so that no use of h.cfg can meet
	// a nil field the documentation promises a default for.
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.CrossOrigin == nil {
		cfg.CrossOrigin = http.NewCrossOriginProtection()
	}
	h := &Handler{cfg: cfg, log: cfg.Logger, mux: http.NewServeMux(), csrf: cfg.CrossOrigin}
	h.routes()
	return h, nil
}

// ServeHTTP implements [http.Handler].
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := h.csrf.Check(r); err != nil {
		h.fail(w, r, Action{}, &apiError{status: http.StatusForbidden, code: CodeForbidden, message: "cross-origin request refused", cause: err})
		return
	}
	if p := r.URL.EscapedPath(); p == "" || path.Clean(p) != p {
		// http.ServeMux would answer a path with "..", "." or "//"
		// segments with an HTML redirect to the cleaned path, whose
		// Location loses the prefix http.StripPrefix removed. A client of
		// this API has no reason to send one: it is no route.
		h.fail(w, r, Action{}, errNoRoute)
		return
	}
	h.mux.ServeHTTP(w, r)
}

// errNoRoute answers a path that is no route of the API.
var errNoRoute = &apiError{status: http.StatusNotFound, code: CodeNotFound, message: "no such route"}

// maxIDBytes bounds the user and subscription IDs of a path. It is the
// longest user ID billing.Collector.Subscribe accepts (1024 bytes; the
// engine keeps that limit unexported), so that every user the engine
// subscribes can reach its records here; keep the two equal. It is well
// under DynamoDB's key limits, so a longer ID never reaches storage as a
// failing query. Subscription IDs the collector makes are far shorter.
const maxIDBytes = 1024

// validID reports whether id may be a user or subscription ID: 1 to
// maxIDBytes bytes of valid UTF-8 without control characters. Any other
// is no route (404) and reaches neither the Authorizer nor storage.
func validID(id string) bool {
	if id == "" || len(id) > maxIDBytes || !utf8.ValidString(id) {
		return false
	}
	return !strings.ContainsFunc(id, unicode.IsControl)
}

// route is one operation of the API.
type route struct {
	method, path, action string
	// operator marks an operator's action (see Action.Operator).
	operator bool
	// serve does the work after authorization and returns the status and
	// body of the success response.
	serve func(ctx context.Context, r *http.Request, a Action) (int, any, error)
}

// routes registers every route, a JSON 405 for each route path with
// another method and a JSON 404 for everything else.
func (h *Handler) routes() {
	const (
		user = "/{user_id}"
		subs = user + "/subscriptions"
		sub  = subs + "/{subscription_id}"
	)
	const endUser, operator = false, true
	table := []route{
		{http.MethodGet, subs, ActionListSubscriptions, endUser, h.list},
		{http.MethodGet, sub, ActionGetSubscription, endUser, h.get},
		{http.MethodGet, sub + "/history", ActionHistory, endUser, h.history},
		{http.MethodPost, sub + "/pay", ActionPay, endUser, h.pay},
		{http.MethodPost, sub + "/waive", ActionWaive, operator, h.simpleChange(h.cfg.Collector.Periods().WaiveByID)},
		{http.MethodPost, sub + "/cancel", ActionCancel, endUser, h.cancel},
		{http.MethodPost, sub + "/pause", ActionPause, endUser, h.pause},
		{http.MethodPost, sub + "/resume", ActionResume, endUser, h.simpleChange(h.cfg.Collector.Periods().Resume)},
		{http.MethodPost, sub + "/billing-date", ActionChangeBillingDate, operator, h.billingDate},
		{http.MethodPost, sub + "/tier", ActionChangeTier, operator, h.tier},
		{http.MethodPost, user + "/reactivate", ActionReactivate, operator, h.reactivate},
	}
	allowed := map[string][]string{}
	for _, rt := range table {
		h.mux.Handle(rt.method+" "+rt.path, h.wrap(rt))
		allowed[rt.path] = append(allowed[rt.path], rt.method)
	}
	for path, methods := range allowed {
		if slices.Contains(methods, http.MethodGet) {
			methods = append(methods, http.MethodHead)
		}
		allow := strings.Join(methods, ", ")
		h.mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			h.writeError(w, &apiError{status: http.StatusMethodNotAllowed, code: CodeMethodNotAllowed, message: "method not allowed; use " + allow})
		})
	}
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h.writeError(w, &apiError{status: http.StatusNotFound, code: CodeNotFound, message: "no such route"})
	})
}

// wrap runs a route: authorize, limit the body, serve, answer.
func (h *Handler) wrap(rt route) http.Handler {
	write := rt.method != http.MethodGet
	hasSub := strings.Contains(rt.path, "{subscription_id}")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := Action{Name: rt.action, UserID: r.PathValue("user_id"), SubscriptionID: r.PathValue("subscription_id"),
			Write: write, Operator: rt.operator}
		if !validID(a.UserID) || (hasSub && !validID(a.SubscriptionID)) {
			h.fail(w, r, Action{Name: a.Name}, errNoRoute)
			return
		}
		if err := h.cfg.Authorize(r, a); err != nil {
			h.fail(w, r, a, refusal(err))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, h.cfg.MaxBodyBytes)
		// A stored item that does not decode is left out of what the
		// request reads (the user's other records are served) and logged.
		ctx := billing.WithInvalidItems(r.Context(), func(ctx context.Context, err error) {
			h.log.WarnContext(ctx, "billinghttp: skipped an undecodable record", "action", a.Name, "error", err)
		})
		status, body, err := rt.serve(ctx, r, a)
		if err != nil {
			h.fail(w, r, a, err)
			return
		}
		writeJSON(w, status, body)
	})
}

// refusal maps an Authorizer's error: ErrUnauthenticated is 401, anything
// else 403. The Authorizer's text is logged, never sent.
func refusal(err error) *apiError {
	if errors.Is(err, ErrUnauthenticated) {
		return &apiError{status: http.StatusUnauthorized, code: CodeUnauthenticated, message: "authentication required", cause: err}
	}
	return &apiError{status: http.StatusForbidden, code: CodeForbidden, message: "forbidden", cause: err}
}

// writeJSON writes v with status. The body is encoded before the header
// is written, so an encoding failure is still a clean 500.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"error":{"code":"internal","message":"internal error"}}` + "\n")
	}
	hd := w.Header()
	hd.Set("Content-Type", "application/json; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}
