package notice_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/notice"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMessageJSON(t *testing.T) {
	sub := notifSub("u1", time.Date(2024, 3, 14, 15, 0, 0, 0, time.UTC))
	sub.ReceiptTierName = "Plus:v2"
	sub.UpdatedEvent = billing.UpdatedPendingCancellation
	m, err := notice.NewMessage(&sub)
	require.NoError(t, err)
	b, err := json.Marshal(m)
	require.NoError(t, err)
	want := `{"event_type":"three_day_notification","user_id":"u1","subscription_id":"sub-u1",` +
		`"billing_date":"2024-03-14T15:00:00Z","billing_amount":"4.99","billing_status":"SCHEDULED",` +
		`"receipt_tier_name":"Plus:v2","updated_event":"PENDING_CANCELLATION"}`
	require.Equal(t, want, string(b), "body\n got %s\nwant %s", b, want)
	back, err := notice.ParseMessage(b)
	require.NoError(t, err)
	if back != m || back.Tier() != "Plus" {
		t.Fatalf("round trip: %+v != %+v", back, m)
	}
	var viaJSON notice.Message
	if err := json.Unmarshal(b, &viaJSON); err != nil || viaJSON != m {
		t.Fatalf("json.Unmarshal: %+v, %v", viaJSON, err)
	}
}

func TestParseMessageErrors(t *testing.T) {
	const ok = `"event_type":"three_day_notification","user_id":"u1","billing_date":"2024-03-14T15:00:00Z","billing_amount":"4.99"`
	if _, err := notice.ParseMessage([]byte(`{` + ok + `}`)); err != nil {
		t.Fatalf("minimal message: %v", err)
	}
	// Parse errors: not a JSON object with string fields.
	for _, body := range []string{``, `hello`, `null`, `[]`, `"x"`, `{`, `{"user_id": 5}`, `{"billing_amount": 4.99}`} {
		_, err := notice.ParseMessage([]byte(body))
		var fe *billing.FieldError
		if !errors.Is(err, notice.ErrInvalidMessage) || errors.As(err, &fe) {
			t.Errorf("%s: want a parse error, got %v", body, err)
		}
	}
	// Decode errors: a FieldError naming the field.
	for _, tc := range []struct{ body, field string }{
		{`{"user_id":"u1","billing_date":"2024-03-14T15:00:00Z","billing_amount":"4.99"}`, "event_type"},
		{`{"date":"20240314","status":"SCHEDULED","start_key":"x"}`, "event_type"}, // a continuation on the wrong queue
		{`{` + ok + `,"user_id":""}`, "user_id"},
		{`{` + ok + `,"billing_date":"2024-03-14"}`, "billing_date"},
		{`{` + ok + `,"billing_date":"0001-01-01T00:00:00Z"}`, "billing_date"},
		{`{` + ok + `,"billing_date":"0000-01-01T00:30:00+01:00"}`, "billing_date"},
		{`{` + ok + `,"billing_amount":"4.999"}`, "billing_amount"},
		{`{` + ok + `,"billing_amount":"-1.00"}`, "billing_amount"},
		{`{` + ok + `,"billing_amount":""}`, "billing_amount"},
		{`{` + ok + `,"billing_status":"NOPE"}`, "billing_status"},
	} {
		_, err := notice.ParseMessage([]byte(tc.body))
		var fe *billing.FieldError
		if !errors.Is(err, notice.ErrInvalidMessage) || !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%s: want a decode error on %s, got %v", tc.body, tc.field, err)
		}
	}
}

func TestNewMessageErrors(t *testing.T) {
	bd := time.Date(2024, 3, 14, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		mut   func(*billing.Period)
		field string
	}{
		{func(s *billing.Period) { s.UserID = "" }, "user_id"},
		{func(s *billing.Period) { s.BillingDate = time.Time{} }, "billing_date"},
		{func(s *billing.Period) { s.Amount = -1 }, "billing_amount"},
		{func(s *billing.Period) { s.Status = "NOPE" }, "billing_status"},
	} {
		sub := notifSub("u1", bd)
		tc.mut(&sub)
		_, err := notice.NewMessage(&sub)
		var fe *billing.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || fe.Key == "" || !errors.Is(err, notice.ErrInvalidMessage) {
			t.Errorf("want an error on %s naming the record, got %v", tc.field, err)
		}
	}
	_, err := json.Marshal(notice.Message{UserID: "u1"})
	assert.ErrorIs(t, err, notice.ErrInvalidMessage, "marshal without billing date")
}
