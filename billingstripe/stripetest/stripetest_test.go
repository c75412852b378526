package stripetest_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dynabill/billing/billingstripe/stripetest"
	"github.com/dynabill/billing/billingtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v85"
)

func create(t *testing.T, c *stripe.Client, key string, amount int64) (*stripe.PaymentIntent, error) {
	t.Helper()
	p := &stripe.PaymentIntentCreateParams{
		Amount: stripe.Int64(amount), Currency: stripe.String("usd"), Customer: stripe.String("cus_1"),
		PaymentMethod: stripe.String("pm_1"), Confirm: stripe.Bool(true), OffSession: stripe.Bool(true),
		Metadata: map[string]string{"k": key},
	}
	if key != "" {
		p.SetIdempotencyKey(key)
	}
	return c.V1PaymentIntents.Create(t.Context(), p)
}

func newServer(t *testing.T) (*stripetest.Server, *billingtest.Clock, *stripe.Client) {
	t.Helper()
	clock := billingtest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := stripetest.New(stripetest.Options{Clock: clock.Now})
	t.Cleanup(s.Close)
	s.AddCustomer("cus_1", stripetest.PaymentMethod{ID: "pm_1", Type: "card", Last4: "4242"})
	s.AddCustomer("cus_2", stripetest.PaymentMethod{ID: "pm_2", Type: "card", Last4: "1881"})
	return s, clock, s.Client(stripetest.ClientOptions{})
}

func stripeErr(t *testing.T, err error) *stripe.Error {
	t.Helper()
	var se *stripe.Error
	require.True(t, errors.As(err, &se), "a Stripe error: %v", err)
	return se
}

func TestRetrieveAndList(t *testing.T) {
	s, clock, c := newServer(t)
	var ids []string
	for i := range 5 {
		pi, err := create(t, c, "", 100+int64(i))
		require.NoError(t, err)
		ids = append(ids, pi.ID)
		clock.Advance(time.Minute)
	}
	got, err := c.V1PaymentIntents.Retrieve(t.Context(), ids[2], nil)
	require.NoError(t, err)
	assert.Equal(t, int64(102), got.Amount)
	assert.Equal(t, stripe.PaymentIntentStatusSucceeded, got.Status)
	_, err = c.V1PaymentIntents.Retrieve(t.Context(), "pi_nope", nil)
	assert.Equal(t, 404, stripeErr(t, err).HTTPStatusCode)

	params := &stripe.PaymentIntentListParams{Customer: stripe.String("cus_1"),
		CreatedRange: &stripe.RangeQueryParams{GreaterThanOrEqual: time.Date(2026, 3, 1, 12, 1, 0, 0, time.UTC).Unix()}}
	params.Limit = stripe.Int64(2)
	var listed []string
	for pi, err := range c.V1PaymentIntents.List(t.Context(), params).All(t.Context()) {
		require.NoError(t, err)
		listed = append(listed, pi.ID)
	}
	assert.Equal(t, []string{ids[4], ids[3], ids[2], ids[1]}, listed, "newest first, paged, created[gte] applied")
	params.Customer = stripe.String("cus_2")
	for _, err := range c.V1PaymentIntents.List(t.Context(), params).All(t.Context()) {
		require.NoError(t, err)
		t.Fatal("another customer's list is empty")
	}
	assert.Len(t, s.Intents(), 5)
}

func TestIdempotency(t *testing.T) {
	t.Run("replay, other parameters, pruning", func(t *testing.T) {
		s, clock, c := newServer(t)
		first, err := create(t, c, "key-1", 500)
		require.NoError(t, err)
		again, err := create(t, c, "key-1", 500)
		require.NoError(t, err)
		assert.Equal(t, first.ID, again.ID)
		assert.Equal(t, "true", again.LastResponse.Header.Get("Idempotent-Replayed"))
		_, err = create(t, c, "key-1", 600)
		se := stripeErr(t, err)
		assert.Equal(t, 400, se.HTTPStatusCode)
		assert.Equal(t, stripe.ErrorTypeIdempotency, se.Type)
		clock.Advance(stripetest.KeyLifetime)
		later, err := create(t, c, "key-1", 600)
		require.NoError(t, err)
		assert.NotEqual(t, first.ID, later.ID, "a pruned key is new")
		assert.Len(t, s.Intents(), 2)
	})
	t.Run("a concurrent request with the key is refused with 409", func(t *testing.T) {
		s, _, _ := newServer(t)
		slow := s.Client(stripetest.ClientOptions{Timeout: 2 * time.Second})
		s.InjectFault("key-2", stripetest.Running())
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = create(t, slow, "key-2", 500) // runs until the client gives up
		}()
		require.Eventually(t, func() bool { return s.CreateRequests() == 1 }, 5*time.Second, 5*time.Millisecond, "the first request is running")
		c := s.Client(stripetest.ClientOptions{})
		require.Eventually(t, func() bool {
			_, err := create(t, c, "key-2", 500)
			var se *stripe.Error
			return errors.As(err, &se) && se.HTTPStatusCode == 409 && se.Code == stripe.ErrorCodeIdempotencyKeyInUse
		}, 5*time.Second, 20*time.Millisecond)
		wg.Wait()
		assert.Empty(t, s.Intents(), "nothing until Stripe finishes")
		require.Equal(t, 1, s.CompleteRunning())
		pi, err := create(t, c, "key-2", 500)
		require.NoError(t, err)
		assert.Equal(t, s.Intents()[0].ID, pi.ID, "the replay gets the finished request's answer")
	})
	t.Run("refusals before acting are not saved", func(t *testing.T) {
		s, _, c := newServer(t)
		s.InjectFault("key-3", stripetest.RateLimited(2*time.Second))
		_, err := create(t, c, "key-3", 500)
		se := stripeErr(t, err)
		assert.Equal(t, 429, se.HTTPStatusCode)
		assert.Equal(t, "2", se.LastResponse.Header.Get("Retry-After"))
		_, err = create(t, c, "key-3", 10) // below Stripe's minimum
		assert.Equal(t, 400, stripeErr(t, err).HTTPStatusCode)
		pi, err := create(t, c, "key-3", 500)
		require.NoError(t, err, "the key is still free")
		assert.Equal(t, stripe.PaymentIntentStatusSucceeded, pi.Status)
	})
	t.Run("a saved 500 is replayed", func(t *testing.T) {
		s, _, c := newServer(t)
		s.InjectFault("key-4", stripetest.ServerError())
		for range 2 {
			_, err := create(t, c, "key-4", 500)
			assert.Equal(t, 500, stripeErr(t, err).HTTPStatusCode)
		}
		assert.Empty(t, s.Intents())
	})
}

func TestScriptedDecline(t *testing.T) {
	s, _, c := newServer(t)
	s.Script("cus_1", stripetest.Decline("insufficient_funds"), stripetest.Succeed())
	_, err := create(t, c, "k1", 500)
	se := stripeErr(t, err)
	assert.Equal(t, 402, se.HTTPStatusCode)
	assert.Equal(t, stripe.ErrorTypeCard, se.Type)
	assert.Equal(t, stripe.DeclineCode("insufficient_funds"), se.DeclineCode)
	require.NotNil(t, se.PaymentIntent)
	assert.Equal(t, stripe.PaymentIntentStatusRequiresPaymentMethod, se.PaymentIntent.Status)
	require.NotNil(t, se.PaymentMethod)
	assert.Equal(t, "4242", se.PaymentMethod.Card.Last4)
	pi, err := create(t, c, "k2", 500)
	require.NoError(t, err)
	assert.Equal(t, stripe.PaymentIntentStatusSucceeded, pi.Status)
}
