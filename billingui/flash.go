package billingui

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dynabill/billing"
)

// The banner shown after an action comes from the server's own record of
// what the action did: a flash the action signs (an HMAC under
// Config.CSRFKey) and puts in the address it redirects to. It is bound to
// the user whose page it is for and lives flashTTL: a link edited by hand,
// made up, or opened on another customer's page shows no banner, and an
// old link shows none either.

// flashTTL is how long after the action its banner is shown.
const flashTTL = 2 * time.Minute

// flash is what an action did, for the banner of the page after it.
type flash struct {
	Op       string // the op's Name
	Outcome  string // a retry's (one of outcomes)
	Changed  int    // the periods a keyed action changed
	Repeated bool   // the form had been sent before
	User     string
	Expires  time.Time
}

// sealFlash returns f signed, as the flash parameter's text.
func (h *Handler) sealFlash(f flash) string {
	v := url.Values{"op": {f.Op}, "u": {f.User}, "exp": {strconv.FormatInt(f.Expires.Unix(), 10)}}
	if f.Outcome != "" {
		v.Set("outcome", f.Outcome)
	}
	if f.Changed > 0 {
		v.Set("changed", strconv.Itoa(f.Changed))
	}
	if f.Repeated {
		v.Set("repeated", "1")
	}
	payload := base64.RawURLEncoding.EncodeToString([]byte(v.Encode()))
	return payload + "." + h.flashMAC(payload)
}

// openFlash returns the flash text carries when its signature is the
// console's, it is for user, and it has not expired at now.
func (h *Handler) openFlash(text, user string, now time.Time) (flash, bool) {
	payload, mac, ok := strings.Cut(text, ".")
	if !ok || !hmac.Equal([]byte(mac), []byte(h.flashMAC(payload))) {
		return flash{}, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return flash{}, false
	}
	v, err := url.ParseQuery(string(raw))
	if err != nil {
		return flash{}, false
	}
	exp, err := strconv.ParseInt(v.Get("exp"), 10, 64)
	if err != nil || v.Get("u") != user || !now.Before(time.Unix(exp, 0)) {
		return flash{}, false
	}
	f := flash{Op: v.Get("op"), User: user, Expires: time.Unix(exp, 0), Repeated: v.Get("repeated") == "1"}
	if oc := v.Get("outcome"); slices.Contains(outcomes, oc) {
		f.Outcome = oc
	}
	f.Changed, _ = strconv.Atoi(v.Get("changed"))
	f.Changed = max(f.Changed, 0)
	return f, true
}

func (h *Handler) flashMAC(payload string) string {
	m := hmac.New(sha256.New, h.cfg.CSRFKey)
	m.Write([]byte("billingui-flash\x00" + payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// banner is the banner of a customer page, from its flash.
type banner struct {
	Done     string // the op's label
	Outcome  string
	Changed  int
	Repeated bool
	// Tone is the banner's class: "ok" for an action that did what it
	// asked (collected, pending, a change made), "err" when the money did
	// not come (declined, rate limited, stale, not charged).
	Tone string
}

// bannerOf returns the banner of the customer page of user for the
// request's flash, if it has a valid one.
func (h *Handler) bannerOf(r *http.Request, user string) (banner, bool) {
	f, ok := h.openFlash(r.URL.Query().Get("flash"), user, h.now())
	if !ok {
		return banner{}, false
	}
	o, ok := findOp(f.Op)
	if !ok {
		return banner{}, false
	}
	b := banner{Done: o.Label, Outcome: f.Outcome, Changed: f.Changed, Repeated: f.Repeated, Tone: "ok"}
	switch billing.RetryOutcome(f.Outcome) {
	case "", billing.RetryCollected, billing.RetryPending:
	default:
		b.Tone = "err"
	}
	return b, true
}
