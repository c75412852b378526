package billing_test

import (
	"testing"

	"github.com/dynabill/billing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSubscribeTierNameRule: Subscribe, as any caller of the engine (a
// CLI or a Lambda, not only the HTTP adapter), refuses a tier name with
// control characters or bytes that are not UTF-8, and writes nothing; such
// a name would be stored on the record and printed on receipts.
func TestSubscribeTierNameRule(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		tier   string
		refuse bool
	}{
		{name: "plain", tier: "Plus:v2"},
		{name: "non-ASCII letters", tier: "Plus ünlimited:v2"},
		{name: "NUL", tier: "Plus\x00:v2", refuse: true},
		{name: "newline", tier: "Plus:v2\nRefunded", refuse: true},
		{name: "carriage return", tier: "Plus:v2\r", refuse: true},
		{name: "escape sequence", tier: "\x1b[31mPlus:v2", refuse: true},
		{name: "DEL", tier: "Plus\x7f:v2", refuse: true},
		{name: "C1 control", tier: "Plus\u0085:v2", refuse: true},
		{name: "not UTF-8", tier: "Plus\xff:v2", refuse: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newCollectorEnv(t)
			req := billing.SubscribeRequest{RequestKey: "order-1", UserID: "u1", Tier: tc.tier, Amount: billing.MustParseAmount("4.99")}
			got, err := e.c.Subscribe(t.Context(), req)
			if !tc.refuse {
				require.NoError(t, err)
				assert.Equal(t, tc.tier, got.Subscription.ReceiptTierName)
				require.Len(t, e.records("u1"), 1)
				assert.Equal(t, tc.tier, e.records("u1")[0].ReceiptTierName)
				return
			}
			require.ErrorIs(t, err, billing.ErrUnknownTier)
			var fe *billing.FieldError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, "tier", fe.Field)
			assert.Empty(t, e.records("u1"), "nothing written")
		})
	}
}

// TestSubscribeUserIDRule: a user ID with control characters is refused
// by the engine, as the HTTP adapter refuses it in a path: a user who
// could subscribe but never reach their records is not created.
func TestSubscribeUserIDRule(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"u1\n", "u\x001", "\x1b[31mu1", "u1\u0085"} {
		e := newCollectorEnv(t)
		_, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "order-1", UserID: id, Tier: "Plus:v2", Amount: billing.MustParseAmount("4.99")})
		require.ErrorIs(t, err, billing.ErrInvalidRequest, "%q", id)
		var fe *billing.FieldError
		require.ErrorAs(t, err, &fe)
		assert.Equal(t, "UserID", fe.Field)
		assert.Empty(t, e.records(id), "%q: written", id)
	}
}
