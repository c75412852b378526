package main

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRoles checks the example's wiring: the demo user may perform the end
// user's actions on their own records only, and the operator token, and
// nothing else, unlocks the operator's actions.
func TestRoles(t *testing.T) {
	const operator = "op-0123456789abcdef"
	h, err := newServer(t.Context(), time.Now().UTC(), operator, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	const next = "/billing/demo-user/subscriptions/sub-next"
	for _, tc := range []struct {
		name, method, path, token, body string
		status                          int
	}{
		{"no token", "GET", "/billing/demo-user/subscriptions", "", "", 401},
		{"another user", "GET", "/billing/demo-user/subscriptions", "someone-else", "", 403},
		{"the user reads", "GET", "/billing/demo-user/subscriptions", "demo-user", "", 200},
		{"the user changes a tier", "POST", next + "/tier", "demo-user", `{"tier": "Lite:v1"}`, 403},
		{"the user waives", "POST", next + "/waive", "demo-user", "", 403},
		{"the user moves the billing date", "POST", next + "/billing-date", "demo-user", `{"billing_date": "2099-01-01"}`, 403},
		{"the user reactivates", "POST", "/billing/demo-user/reactivate", "demo-user", `{"billing_date": "2099-01-01"}`, 403},
		{"a token one byte off the operator's", "POST", next + "/tier", operator[:len(operator)-1] + "0", `{"tier": "Lite:v1"}`, 403},
		{"the operator token as a prefix", "POST", next + "/tier", operator + "x", `{"tier": "Lite:v1"}`, 403},
		{"the operator changes a tier at the list's price", "POST", next + "/tier", operator, `{"tier": "Max:v1"}`, 200},
		{"the operator reads anyone's", "GET", "/billing/someone-else/subscriptions", operator, "", 200},
		{"the user pauses", "POST", next + "/pause", "demo-user", `{"months": 1}`, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			if tc.token != "" {
				r.Header.Set("Authorization", "Bearer "+tc.token)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.status, w.Body)
			}
			if tc.name == "the operator changes a tier at the list's price" {
				var c struct {
					After struct {
						Amount string `json:"billing_amount"`
					} `json:"after"`
				}
				if err := json.Unmarshal(w.Body.Bytes(), &c); err != nil || c.After.Amount != "9.99" {
					t.Errorf("amount after = %q (%v), want the list's 9.99", c.After.Amount, err)
				}
			}
		})
	}
}

// TestOperatorTokenRequired: the example never runs without an operator
// token, which would otherwise make "" the operator's credential.
func TestOperatorTokenRequired(t *testing.T) {
	if _, err := newServer(t.Context(), time.Now().UTC(), "", slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("newServer without an operator token: no error")
	}
}

// TestAddrInUseNamesTheFlag: an address in use refuses the server with an
// error that names the address and says to pass -addr.
func TestAddrInUseNamesTheFlag(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	err = run(t.Context(), taken.Addr().String(), "op-0123456789abcdef")
	if !errors.Is(err, syscall.EADDRINUSE) || !strings.Contains(err.Error(), taken.Addr().String()) ||
		!strings.Contains(err.Error(), "pass -addr with a free address") {
		t.Fatalf("run on a taken address: %v; want EADDRINUSE naming the address and -addr", err)
	}
}
