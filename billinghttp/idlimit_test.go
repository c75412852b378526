package billinghttp_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/dynabill/billing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLongUserIDsTheCollectorAccepts: a user ID as long as
// billing.Collector.Subscribe accepts (up to 1024 bytes) reaches the
// user's records through every kind of route; one byte more is refused by
// Subscribe and is no route here. Before, IDs over 512 bytes subscribed
// and then got 404 on every route.
func TestLongUserIDsTheCollectorAccepts(t *testing.T) {
	cases := []struct {
		name string
		user string
	}{
		{name: "600 bytes", user: strings.Repeat("u", 600)},
		{name: "1024 bytes", user: strings.Repeat("u", 1024)},
		{name: "1024 bytes, non-ASCII", user: strings.Repeat("ü", 512)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			got, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "order-1", UserID: tc.user,
				Tier: "Plus:v2", Amount: billing.MustParseAmount("4.99")})
			require.NoError(t, err)
			id := got.Subscription.SubscriptionID
			base := "/" + url.PathEscape(tc.user) + "/subscriptions"

			w := e.do("GET", base, tc.user, "")
			require.Equal(t, 200, w.Code, "list as the user: %s", w.Body)
			assert.Equal(t, []string{id}, ids(decode(t, w).Subscriptions))

			w = e.do("GET", base+"/"+id, "operator", "")
			require.Equal(t, 200, w.Code, "read as the operator: %s", w.Body)
			assert.Equal(t, id, decode(t, w).Subscription.SubscriptionID)

			w = e.do("POST", base+"/"+id+"/pause", tc.user, `{"months": 2}`)
			require.Equal(t, 200, w.Code, "pause as the user: %s", w.Body)
			assert.Equal(t, billing.StatusPaused, e.stored(id).Status)
		})
	}

	t.Run("1025 bytes", func(t *testing.T) {
		e := newEnv(t)
		user := strings.Repeat("u", 1025)
		_, err := e.c.Subscribe(t.Context(), billing.SubscribeRequest{RequestKey: "order-1", UserID: user,
			Tier: "Plus:v2", Amount: billing.MustParseAmount("4.99")})
		require.ErrorIs(t, err, billing.ErrInvalidRequest, "the collector refuses it")
		w := e.do("GET", "/"+user+"/subscriptions", "operator", "")
		assert.Equal(t, 404, w.Code, "no route")
		assert.Equal(t, "not_found", decode(t, w).Error.Code)
	})
}
