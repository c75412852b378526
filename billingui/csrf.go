package billingui

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
)

// csrfCookie holds the browser's random value; the forms carry a token
// made of it under Config.CSRFKey, which a cross-site page can neither
// read nor make.
const csrfCookie = "billingui_csrf"

// A form's token is "expiry.mac": expiry the Unix second after which it is
// refused (Config.CSRFTokenTTL after the page was rendered), mac the HMAC
// under Config.CSRFKey of the browser's cookie, the operator's session
// (Config.Session's, "" without one) and the expiry. A token thus works
// only in the browser that holds the cookie, in the session it was
// rendered for, and until it expires.

// csrfToken returns the token for the forms of this response, setting the
// cookie when the browser has none.
func (h *Handler) csrfToken(w http.ResponseWriter, r *http.Request) string {
	seed := ""
	if c, err := r.Cookie(csrfCookie); err == nil && validSeed(c.Value) {
		seed = c.Value
	} else {
		b := make([]byte, 32)
		_, _ = rand.Read(b) // never fails (crypto/rand panics rather)
		seed = base64.RawURLEncoding.EncodeToString(b)
		http.SetCookie(w, &http.Cookie{
			Name: csrfCookie, Value: seed, HttpOnly: true, Secure: h.cfg.SecureCookies || r.TLS != nil,
			SameSite: http.SameSiteStrictMode,
		})
	}
	exp := strconv.FormatInt(h.now().Add(h.cfg.CSRFTokenTTL).Unix(), 10)
	return exp + "." + h.sign(seed, h.session(r), exp)
}

// checkCSRF reports whether the form's token is one of the cookie's, for
// this session, not expired.
func (h *Handler) checkCSRF(r *http.Request) bool {
	c, err := r.Cookie(csrfCookie)
	if err != nil || !validSeed(c.Value) {
		return false
	}
	exp, mac, ok := strings.Cut(r.PostFormValue("csrf"), ".")
	if !ok || !hmac.Equal([]byte(mac), []byte(h.sign(c.Value, h.session(r), exp))) {
		return false
	}
	sec, err := strconv.ParseInt(exp, 10, 64)
	return err == nil && h.now().Unix() <= sec
}

func (h *Handler) session(r *http.Request) string {
	if h.cfg.Session == nil {
		return ""
	}
	return h.cfg.Session(r)
}

func (h *Handler) sign(seed, session, exp string) string {
	m := hmac.New(sha256.New, h.cfg.CSRFKey)
	// Lengths first: no two (seed, session, expiry) make the same input.
	for _, part := range []string{"billingui-csrf-v2", seed, session, exp} {
		m.Write([]byte(strconv.Itoa(len(part)) + ":" + part))
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func validSeed(s string) bool {
	b, err := base64.RawURLEncoding.DecodeString(s)
	return err == nil && len(b) == 32
}
