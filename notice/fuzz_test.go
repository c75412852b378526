package notice_test

import (
	"encoding/json"
	"testing"

	"github.com/dynabill/billing/notice"
	"github.com/stretchr/testify/require"
)

// FuzzParseEvent: ParseEvent never panics, fails only with
// ErrInvalidEvent, and what it accepts re-encodes to JSON that parses back
// to the same event.
func FuzzParseEvent(f *testing.F) {
	for _, s := range []string{
		``, `null`, `{}`, `{"status": "SCHEDULED"}`,
		`{"date":"20240314","status":"SCHEDULED","start_key":"AQ-_x"}`,
		`{"date":"","status":"ERROR","start_key":null}`,
		`{"start_key":{"user_id":{"S":"u1"}}}`, `{"date":"20240230"}`, `{"status":"INACTIVE"}`,
		`{"DATE":"20240314","Status":"PAUSED"}`, `[1]`, `{"start_key":"\u00ff\ud800"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ev, err := notice.ParseEvent(data)
		if err != nil {
			require.ErrorIs(t, err, notice.ErrInvalidEvent, "error without ErrInvalidEvent: %v", err)
			return
		}
		b, err := json.Marshal(ev)
		require.NoError(t, err, "accepted %q but cannot encode %+v", data, ev)
		back, err := notice.ParseEvent(b)
		require.NoError(t, err, "re-encoded %s does not parse", b)
		if back != ev {
			t.Fatalf("round trip changed %+v to %+v", ev, back)
		}
	})
}

// FuzzParseMessage: ParseMessage never panics, fails only with
// ErrInvalidMessage, and what it accepts re-encodes to a body that parses
// back to the same message.
func FuzzParseMessage(f *testing.F) {
	for _, s := range []string{
		`{"event_type":"three_day_notification","user_id":"u1","subscription_id":"s","billing_date":"2024-03-14T15:00:00Z",` +
			`"billing_amount":"4.99","billing_status":"SCHEDULED","receipt_tier_name":"Plus:v2","updated_event":"PENDING_CANCELLATION"}`,
		`{"event_type":"three_day_notification","user_id":"u1","billing_date":"2024-03-14T15:00:00.5+05:30","billing_amount":"05"}`,
		`{"event_type":"three_day_notification","user_id":"u1","billing_date":"9999-12-31T23:59:59-01:00","billing_amount":"0"}`,
		`{"event_type":"three_day_notification","user_id":"\xff","billing_date":"0001-01-01T00:00:01Z","billing_amount":"1.5"}`,
		`{"user_id": 5}`, `hello`, `[]`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := notice.ParseMessage(data)
		if err != nil {
			require.ErrorIs(t, err, notice.ErrInvalidMessage, "error without ErrInvalidMessage: %v", err)
			return
		}
		b, err := json.Marshal(m)
		require.NoError(t, err, "accepted %q but cannot encode %+v", data, m)
		back, err := notice.ParseMessage(b)
		require.NoError(t, err, "re-encoded %s does not parse", b)
		if back != m {
			t.Fatalf("round trip changed %+v to %+v", m, back)
		}
	})
}
