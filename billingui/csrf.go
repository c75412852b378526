package billingui

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
)

// csrfCookie holds the browser's random value; the forms carry its HMAC
// under Config.CSRFKey, which a cross-site page can neither read nor make.
const csrfCookie = "billingui_csrf"

// csrfToken returns the token for the forms of this response, setting the
// cookie when the browser has none.
func (h *Handler) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && validSeed(c.Value) {
		return h.sign(c.Value)
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand panics rather)
	seed := base64.RawURLEncoding.EncodeToString(b)
	http.SetCookie(w, &http.Cookie{
		Name: csrfCookie, Value: seed, HttpOnly: true, Secure: r.TLS != nil,
		SameSite: http.SameSiteStrictMode,
	})
	return h.sign(seed)
}

// checkCSRF reports whether the form's token is the cookie's.
func (h *Handler) checkCSRF(r *http.Request) bool {
	c, err := r.Cookie(csrfCookie)
	if err != nil || !validSeed(c.Value) {
		return false
	}
	got := r.PostFormValue("csrf")
	return hmac.Equal([]byte(got), []byte(h.sign(c.Value)))
}

func (h *Handler) sign(seed string) string {
	m := hmac.New(sha256.New, h.cfg.CSRFKey)
	m.Write([]byte("billingui-csrf\x00" + seed))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func validSeed(s string) bool {
	b, err := base64.RawURLEncoding.DecodeString(s)
	return err == nil && len(b) == 32
}
