package billing

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"
)

// RequestKeyError reports a request key used before, by the same user, for
// a request with other parameters. It matches [ErrRequestKeyReused].
type RequestKeyError struct {
	// UserID and RequestKey name the request.
	UserID, RequestKey string
	// Op is the operation the key was first used for ("subscribe",
	// "cancel", "pause", "resume", "change plan", "move billing date").
	Op string
	// Fields are the request's fields whose values differ from the first
	// request's, sorted ("Op" when the key was used for another operation).
	Fields []string
}

// Error implements error.
func (e *RequestKeyError) Error() string {
	return fmt.Sprintf("%s: user %s key %q was used for a %s request; differing fields: %s",
		ErrRequestKeyReused, e.UserID, e.RequestKey, e.Op, strings.Join(e.Fields, ", "))
}

// Unwrap returns [ErrRequestKeyReused].
func (e *RequestKeyError) Unwrap() error { return ErrRequestKeyReused }

// keyedRequest is what a keyed request asked, as recorded on the history
// rows it writes (billing_request): URL query text whose names starting
// with an upper-case letter are the request's fields (Op among them), and
// whose lower-case names say which request it is (key) and what the first
// call decided (periods, refund, ...). Two requests are the same when
// their fields are.
type keyedRequest struct{ v url.Values }

// newKeyedRequest starts the record of request key key of operation op.
func newKeyedRequest(op, key string) keyedRequest {
	return keyedRequest{v: url.Values{"Op": {op}, "key": {key}}}
}

// field records a field of the request; a zero value (as its text) is
// left out, so that a default and its absence are the same request.
func (r keyedRequest) field(name, value string) keyedRequest {
	if value != "" && value != "0" && value != "false" {
		r.v.Set(name, value)
	}
	return r
}

// time records a time field, as UTC text with its fraction.
func (r keyedRequest) time(name string, t time.Time) keyedRequest {
	if t.IsZero() {
		return r
	}
	return r.field(name, t.UTC().Format(time.RFC3339Nano))
}

// set records what the first call decided (a lower-case name).
func (r keyedRequest) set(name string, values ...string) keyedRequest {
	r.v[name] = values
	return r
}

func (r keyedRequest) op() string             { return r.v.Get("Op") }
func (r keyedRequest) key() string            { return r.v.Get("key") }
func (r keyedRequest) encode() string         { return r.v.Encode() }
func (r keyedRequest) get(name string) string { return r.v.Get(name) }

// parseKeyedRequest reads a history row's billing_request; ok is false for
// a row without one (or with text this library did not write).
func parseKeyedRequest(s string) (keyedRequest, bool) {
	if s == "" {
		return keyedRequest{}, false
	}
	v, err := url.ParseQuery(s)
	if err != nil || v.Get("key") == "" || v.Get("Op") == "" {
		return keyedRequest{}, false
	}
	return keyedRequest{v: v}, true
}

// differs returns the fields of r whose values differ from first's, sorted.
func (r keyedRequest) differs(first keyedRequest) []string {
	var out []string
	seen := map[string]bool{}
	for _, v := range []url.Values{r.v, first.v} {
		for name := range v {
			if seen[name] || !isField(name) {
				continue
			}
			seen[name] = true
			if !slices.Equal(r.v[name], first.v[name]) {
				out = append(out, name)
			}
		}
	}
	slices.Sort(out)
	return out
}

func isField(name string) bool {
	return name != "" && unicode.IsUpper(rune(name[0]))
}

// reused returns the [*RequestKeyError] of r given again after first, or
// nil when r is the same request.
func (r keyedRequest) reused(userID string, first keyedRequest) error {
	if d := r.differs(first); len(d) > 0 {
		return &RequestKeyError{UserID: userID, RequestKey: r.key(), Op: first.op(), Fields: d}
	}
	return nil
}

// subscribeRequest is what req asked, its defaults applied.
func subscribeRequest(req SubscribeRequest) keyedRequest {
	term := req.Term
	if term == "" {
		term = TermMonthly
	}
	r := newKeyedRequest("subscribe", req.RequestKey).
		field("Tier", req.Tier).field("Term", string(term)).
		field("Interval", fmt.Sprint(max(req.Interval, 1))).
		time("FirstBillingDate", req.FirstBillingDate).
		field("AnchorDay", fmt.Sprint(req.AnchorDay)).
		field("FridayBilling", fmt.Sprint(req.FridayBilling)).
		field("FridayWeek", fmt.Sprint(req.FridayWeek)).
		field("PauseMonths", fmt.Sprint(req.PauseMonths))
	if req.Amount != 0 && req.Amount != ListPrice { // both mean the list price
		r = r.field("Amount", req.Amount.String())
	}
	if req.TrialDays != 0 || !req.TrialEnd.IsZero() { // absent on requests without, as before
		r = r.field("TrialDays", fmt.Sprint(req.TrialDays)).time("TrialEnd", req.TrialEnd).
			field("AllowRepeatTrial", fmt.Sprint(req.AllowRepeatTrial))
	}
	return r
}

// checkSubscribeRepeat refuses req, a repeat of the request that created
// the period id, when that request asked for something else: it reads the
// user's history rows and compares req with the request recorded on the
// period's first row. A first row without one (written before the library
// recorded requests), no row at all, or no [Config.History] to read them
// from: the repeat is answered, as it always was.
func (c *Collector) checkSubscribeRepeat(ctx context.Context, req SubscribeRequest, id string) error {
	if c.cfg.History == nil {
		return nil
	}
	rows, err := c.cfg.History.ListByUser(ctx, req.UserID)
	if err != nil {
		return fmt.Errorf("read the history of user %s: %w", req.UserID, err)
	}
	for _, r := range rows {
		if r.SubscriptionID != id {
			continue
		}
		first, ok := parseKeyedRequest(r.Request)
		if !ok {
			return nil
		}
		return subscribeRequest(req).reused(req.UserID, first)
	}
	return nil
}
