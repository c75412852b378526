package dynamostore_test

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/entitlement"
	"github.com/dynabill/billing/internal/dynamotest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// creditCall is one of the balance changes that carry a request ID.
type creditCall struct {
	name string
	code string // the marker's op attribute
	sign int64  // +1 adds n, -1 takes n
	call func(entitlement.Accounts, context.Context, string, int64, string) (entitlement.Credits, error)
}

var creditCalls = []creditCall{
	{"Grant", "GRANT", 1, entitlement.Accounts.Grant},
	{"TopUp", "TOP_UP", 1, entitlement.Accounts.TopUp},
	{"Consume", "CONSUME", -1, entitlement.Accounts.Consume},
}

// seedCredits grants n to a user under a request ID of its own.
func seedCredits(t *testing.T, e *acctEnv, user string, n int64) {
	t.Helper()
	_, err := e.accounts.Grant(t.Context(), user, n, "seed-"+user)
	require.NoError(t, err, "seed %s", user)
}

// requireRequestMarker checks the marker of a request (DynamoDB only).
func requireRequestMarker(t *testing.T, e *acctEnv, user, requestID, op string, n int64, created time.Time, retention time.Duration) {
	t.Helper()
	m := e.raw(t, "USER#"+user, "CREDITS#REQUEST#"+requestID)
	require.NotNil(t, m, "no marker for request %s of %s", requestID, user)
	assert.Equal(t, "CreditRequest", acctText(m["type"]), "marker %v", m)
	assert.Equal(t, op, acctText(m["op"]), "marker %v", m)
	assert.Equal(t, strconv.FormatInt(n, 10), acctText(m["amount"]), "marker %v", m)
	assert.Equal(t, created.UTC().Format(time.RFC3339), acctText(m["createdAt"]), "marker %v", m)
	assert.Equal(t, strconv.FormatInt(created.Add(retention).Unix(), 10), acctText(m["expiresAt"]), "marker TTL %v", m)
}

const defaultRequestRetention = 30 * 24 * time.Hour

// TestCreditsRequestRetriedChangesOnce calls each operation twice with
// one request ID: the second call writes nothing and reports the
// balance with Repeated.
func TestCreditsRequestRetriedChangesOnce(t *testing.T) {
	forEachAccounts(t, acctOpts{}, func(t *testing.T, e *acctEnv) {
		ctx := t.Context()
		for _, op := range creditCalls {
			user := "u-" + op.name
			seedCredits(t, e, user, 100)
			want, at := 100+op.sign*7, e.clock.Now()
			first, err := op.call(e.accounts, ctx, user, 7, "req-1")
			require.NoError(t, err, "%s", op.name)
			require.Equal(t, want, first.Balance, "%s: %+v", op.name, first)
			require.False(t, first.Repeated, "%s: first call repeated: %+v", op.name, first)
			stored := acctBalance(t, e, user, want)

			e.clock.Advance(time.Hour)
			if e.db != nil {
				e.db.Reset()
			}
			again, err := op.call(e.accounts, ctx, user, 7, "req-1")
			require.NoError(t, err, "%s again", op.name)
			require.True(t, again.Repeated, "%s again: %+v", op.name, again)
			require.Equal(t, want, again.Balance, "%s again: %+v", op.name, again)
			if e.db != nil {
				require.Zero(t, e.db.ItemsWritten(), "%s again wrote: %v", op.name, e.db.Log())
			}
			after := acctBalance(t, e, user, want)
			require.False(t, after.Repeated, "Balance reports Repeated: %+v", after)
			require.True(t, after.UpdatedAt.Equal(stored.UpdatedAt), "%s again changed the record: %+v, was %+v", op.name, after, stored)
			require.True(t, after.LastTopUp.Equal(stored.LastTopUp), "%s again changed the record: %+v, was %+v", op.name, after, stored)
			if e.db != nil {
				requireRequestMarker(t, e, user, "req-1", op.code, 7, at, defaultRequestRetention)
			}
		}
	})
}

// TestCreditsRequestAnswerLost applies each operation and loses the
// answer, as a timeout after DynamoDB committed would: the caller's retry
// with the same request ID does not apply it again.
func TestCreditsRequestAnswerLost(t *testing.T) {
	t.Parallel()
	e := newDynamoAccountsEnv(t, acctOpts{})
	ctx := t.Context()
	for _, op := range creditCalls {
		user := "u-" + op.name
		seedCredits(t, e, user, 100)
		want := 100 + op.sign*7
		e.db.FailAfterInner("TransactWriteItems", 1, nil)
		_, err := op.call(e.accounts, ctx, user, 7, "req-lost")
		require.ErrorIs(t, err, dynamotest.ErrInjected, "%s", op.name)
		acctBalance(t, e, user, want) // applied, answer lost
		for i := range 2 {
			c, err := op.call(e.accounts, ctx, user, 7, "req-lost")
			require.NoError(t, err, "%s retry %d", op.name, i)
			require.True(t, c.Repeated, "%s retry %d: %+v", op.name, i, c)
			require.Equal(t, want, c.Balance, "%s retry %d: %+v", op.name, i, c)
		}
		acctBalance(t, e, user, want)
		requireRequestMarker(t, e, user, "req-lost", op.code, 7, acctStart, defaultRequestRetention)
	}
}

// loseAnswers is an HTTP client that sends every request and, while armed,
// replaces the answer to a write with a 500 error, so that the SDK's
// retryer sends the write again: the retry the caller cannot see.
type loseAnswers struct {
	inner dynamodb.HTTPClient
	mu    sync.Mutex
	armed int // answers still to lose
	lost  int // answers lost
}

func (l *loseAnswers) arm(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.armed = n
}

func (l *loseAnswers) lostAnswers() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

func (l *loseAnswers) Do(req *http.Request) (*http.Response, error) {
	resp, err := l.inner.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	switch strings.TrimPrefix(req.Header.Get("X-Amz-Target"), "DynamoDB_20120810.") {
	case "UpdateItem", "PutItem", "TransactWriteItems":
	default:
		return resp, nil
	}
	l.mu.Lock()
	lose := l.armed > 0
	if lose {
		l.armed--
		l.lost++
	}
	l.mu.Unlock()
	if !lose {
		return resp, nil
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	body := `{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"answer lost (test)"}`
	return &http.Response{
		Status: "500 Internal Server Error", StatusCode: http.StatusInternalServerError,
		Proto: resp.Proto, ProtoMajor: resp.ProtoMajor, ProtoMinor: resp.ProtoMinor,
		Header:        http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)), Request: req,
	}, nil
}

// TestCreditsRequestSDKRetry loses the answer to each operation's write
// below the SDK, whose retryer sends it again: the change is applied once.
func TestCreditsRequestSDKRetry(t *testing.T) {
	t.Parallel()
	base := dynamotest.Client(t)
	cfg := dynamostore.SingleTableConfig{Table: dynamotest.TableName(t, "billing")}.WithDefaults()
	dynamotest.CreateTable(t, base, dynamostore.SingleTableDefinition(cfg))
	opts := base.Options()
	lossy := &loseAnswers{inner: opts.HTTPClient}
	opts.HTTPClient = lossy
	opts.APIOptions = append(slices.Clone(opts.APIOptions), countSDKSends)
	w := dynamotest.Wrap(dynamodb.New(opts))
	clock := billingtest.NewClock(acctStart)
	a, err := dynamostore.NewAccounts(dynamostore.AccountsConfig{Client: w, Table: cfg, Clock: clock})
	require.NoError(t, err)
	e := &acctEnv{accounts: a, clock: clock, db: w, table: cfg}
	for _, op := range creditCalls {
		ctx, sends := withSDKSends(t.Context())
		user := "u-" + op.name
		seedCredits(t, e, user, 100)
		want := 100 + op.sign*7
		lossy.arm(1)
		before := lossy.lostAnswers()
		c, err := op.call(e.accounts, ctx, user, 7, "req-sdk")
		require.NoError(t, err, "%s", op.name)
		require.Equal(t, before+1, lossy.lostAnswers(), "%s: no answer was lost", op.name)
		require.True(t, sends.resent(), "%s: the resend was not counted", op.name)
		require.Equal(t, want, c.Balance, "%s: %+v", op.name, c)
		acctBalance(t, e, user, want)
	}
	w.AssertNoViolations(t)
}

// TestCreditsRequestIDReused reuses a request ID with another amount or
// operation: refused with ErrRequestIDReused, nothing written.
func TestCreditsRequestIDReused(t *testing.T) {
	forEachAccounts(t, acctOpts{}, func(t *testing.T, e *acctEnv) {
		ctx := t.Context()
		_, err := e.accounts.Grant(ctx, "u1", 10, "r1")
		require.NoError(t, err)
		stored := acctBalance(t, e, "u1", 10)
		e.clock.Advance(time.Hour)
		for _, c := range []struct {
			op *creditCall
			n  int64
		}{{&creditCalls[0], 11}, {&creditCalls[0], 9}, {&creditCalls[1], 10}, {&creditCalls[2], 10}, {&creditCalls[2], 1}} {
			if e.db != nil {
				e.db.Reset()
			}
			got, err := c.op.call(e.accounts, ctx, "u1", c.n, "r1")
			require.ErrorIs(t, err, entitlement.ErrRequestIDReused, "%s %d", c.op.name, c.n)
			require.ErrorContains(t, err, "r1", "%s %d: the error names the request", c.op.name, c.n)
			require.Equal(t, entitlement.Credits{}, got, "%s %d", c.op.name, c.n)
			if e.db != nil {
				require.Zero(t, e.db.ItemsWritten(), "%s %d wrote: %v", c.op.name, c.n, e.db.Log())
			}
		}
		after := acctBalance(t, e, "u1", 10)
		require.True(t, after.UpdatedAt.Equal(stored.UpdatedAt), "record changed: %+v, was %+v", after, stored)
		again, err := e.accounts.Grant(ctx, "u1", 10, "r1")
		require.NoError(t, err, "the original request still repeats")
		require.True(t, again.Repeated, "%+v", again)
		// Request IDs are per user.
		other, err := e.accounts.Grant(ctx, "u2", 5, "r1")
		require.NoError(t, err, "same request ID, other user")
		require.False(t, other.Repeated, "%+v", other)
		acctBalance(t, e, "u2", 5)
		if e.db != nil {
			requireRequestMarker(t, e, "u1", "r1", "GRANT", 10, acctStart, defaultRequestRetention)
		}
	})
}

// TestCreditsConsumeReplayAfterBalanceDropped repeats a consume once the
// balance no longer covers it: success (Repeated), not insufficient.
func TestCreditsConsumeReplayAfterBalanceDropped(t *testing.T) {
	forEachAccounts(t, acctOpts{}, func(t *testing.T, e *acctEnv) {
		ctx := t.Context()
		seedCredits(t, e, "u1", 10)
		c, err := e.accounts.Consume(ctx, "u1", 8, "render-1")
		require.NoError(t, err)
		require.Equal(t, int64(2), c.Balance, "%+v", c)
		c, err = e.accounts.Consume(ctx, "u1", 8, "render-1")
		require.NoError(t, err, "replay of an applied consume")
		require.True(t, c.Repeated, "%+v", c)
		require.Equal(t, int64(2), c.Balance, "%+v", c)
		_, err = e.accounts.Consume(ctx, "u1", 8, "render-2")
		var ie *entitlement.InsufficientCreditsError
		require.ErrorAs(t, err, &ie, "a new consume of 8")
		require.Equal(t, int64(2), ie.Balance, "%+v", ie)
		acctBalance(t, e, "u1", 2)
		if e.db != nil {
			require.Nil(t, e.raw(t, "USER#u1", "CREDITS#REQUEST#render-2"), "a refused consume left a marker")
		}
	})
}

// TestCreditsRequestConcurrentSameID sends one grant and one consume
// twenty times each at once: each changes the balance once, and one call
// reports it applied. The others report Repeated; so may the first when
// the SDK's own retryer resent its transaction after an answer the local
// server dropped (the server ignores the client's request token), and
// then none reports it applied, but the balance still moved once.
func TestCreditsRequestConcurrentSameID(t *testing.T) {
	forEachAccounts(t, acctOpts{}, func(t *testing.T, e *acctEnv) {
		for _, step := range []struct {
			op      creditCall
			balance int64
		}{{creditCalls[0], 7}, {creditCalls[2], 0}} {
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				applied int
				resent  int
				counted int64
				errs    []error
				start   = make(chan struct{})
			)
			for range 20 {
				wg.Go(func() {
					ctx, sends := withSDKSends(t.Context())
					<-start
					c, err := step.op.call(e.accounts, ctx, "u1", 7, "same-"+step.op.name)
					mu.Lock()
					defer mu.Unlock()
					counted += sends.ops.Load()
					switch {
					case err != nil:
						errs = append(errs, err)
					case !c.Repeated:
						applied++
					case sends.resent():
						resent++
					}
				})
			}
			close(start)
			wg.Wait()
			require.Empty(t, errs, "%s: applied %d times", step.op.name, applied)
			if e.db != nil {
				require.GreaterOrEqual(t, counted, int64(20), "%s: the SDK's sends were not counted", step.op.name)
			}
			if applied != 1 {
				require.Equal(t, 0, applied, "%s applied %d times", step.op.name, applied)
				require.Positive(t, resent, "%s: no call reports it applied, and the SDK resent none", step.op.name)
			}
			acctBalance(t, e, "u1", step.balance)
		}
	})
}

// TestCreditsRequestExpiredBalance: request IDs do not change expiry: a
// grant after the expiry starts from zero, a refused consume leaves its
// request ID unused, and a repeat reports the balance as it reads now.
func TestCreditsRequestExpiredBalance(t *testing.T) {
	forEachAccounts(t, acctOpts{expiry: time.Hour}, func(t *testing.T, e *acctEnv) {
		ctx := t.Context()
		_, err := e.accounts.Grant(ctx, "u1", 10, "g1")
		require.NoError(t, err)
		e.clock.Advance(time.Hour)
		_, err = e.accounts.Consume(ctx, "u1", 1, "c1")
		var ie *entitlement.InsufficientCreditsError
		require.ErrorAs(t, err, &ie, "consume of expired credits")
		require.Equal(t, int64(0), ie.Balance, "%+v", ie)
		c, err := e.accounts.Grant(ctx, "u1", 3, "g2")
		require.NoError(t, err, "grant after expiry")
		require.Equal(t, int64(3), c.Balance, "expired credits revived: %+v", c)
		require.False(t, c.Expired, "%+v", c)
		require.True(t, c.ExpiresAt.Equal(e.clock.Now().Add(time.Hour)), "%+v", c)
		c, err = e.accounts.Grant(ctx, "u1", 3, "g2")
		require.NoError(t, err)
		require.True(t, c.Repeated, "%+v", c)
		require.Equal(t, int64(3), c.Balance, "%+v", c)
		c, err = e.accounts.Consume(ctx, "u1", 1, "c1")
		require.NoError(t, err, "the refused consume's request ID is still free")
		require.Equal(t, int64(2), c.Balance, "%+v", c)
		e.clock.Advance(time.Hour)
		for _, op := range []creditCall{creditCalls[0], creditCalls[2]} {
			n, id := int64(3), "g2"
			if op.name == "Consume" {
				n, id = 1, "c1"
			}
			c, err = op.call(e.accounts, ctx, "u1", n, id)
			require.NoError(t, err, "%s repeated after expiry", op.name)
			require.True(t, c.Repeated, "%s: %+v", op.name, c)
			require.True(t, c.Expired, "%s: %+v", op.name, c)
			require.Equal(t, int64(0), c.Balance, "%s: %+v", op.name, c)
		}
		if e.db != nil {
			require.Equal(t, "2", acctText(e.raw(t, "USER#u1", "CREDITS#BALANCE")["balance"]), "stored balance")
		}
	})
}

func TestCreditsRequestIDInvalid(t *testing.T) {
	forEachAccounts(t, acctOpts{}, func(t *testing.T, e *acctEnv) {
		ctx := t.Context()
		seedCredits(t, e, "u1", 100)
		for _, op := range creditCalls {
			for _, id := range []string{"", strings.Repeat("x", entitlement.MaxRequestID+1), "bad\xffutf8"} {
				_, err := op.call(e.accounts, ctx, "u1", 1, id)
				require.ErrorIs(t, err, entitlement.ErrInvalidCredits, "%s %q", op.name, id)
				var fe *billing.FieldError
				require.ErrorAs(t, err, &fe, "%s %q", op.name, id)
				require.Equal(t, "request ID", fe.Field, "%s %q: %v", op.name, id, err)
			}
		}
		acctBalance(t, e, "u1", 100)
		for i, op := range creditCalls {
			for _, id := range []string{strings.Repeat(strconv.Itoa(i), entitlement.MaxRequestID), "é#" + op.name + "#/ ✓"} {
				c, err := op.call(e.accounts, ctx, "u1", 1, id)
				require.NoError(t, err, "%s %q", op.name, id)
				require.False(t, c.Repeated, "%s %q", op.name, id)
			}
		}
		acctBalance(t, e, "u1", 102)
	})
}

func TestCreditsRequestMarkerRetention(t *testing.T) {
	t.Parallel()
	_, err := dynamostore.NewAccounts(dynamostore.AccountsConfig{Client: dynamotest.Wrap(nil), RequestMarkerRetention: -time.Second})
	require.ErrorContains(t, err, "RequestMarkerRetention", "negative retention accepted")
	client := dynamotest.Client(t)
	cfg := dynamostore.SingleTableConfig{Table: dynamotest.TableName(t, "billing")}.WithDefaults()
	dynamotest.CreateTable(t, client, dynamostore.SingleTableDefinition(cfg))
	w := dynamotest.Wrap(client)
	clock := billingtest.NewClock(acctStart)
	a, err := dynamostore.NewAccounts(dynamostore.AccountsConfig{Client: w, Table: cfg, Clock: clock, RequestMarkerRetention: 2 * time.Hour})
	require.NoError(t, err)
	e := &acctEnv{accounts: a, clock: clock, db: w, table: cfg}
	_, err = e.accounts.TopUp(t.Context(), "u1", 5, "order-1")
	require.NoError(t, err)
	requireRequestMarker(t, e, "u1", "order-1", "TOP_UP", 5, acctStart, 2*time.Hour)
	w.AssertNoViolations(t)
}

// TestAccessResolveSkipsCreditItems: every grant, top-up and consume
// leaves a marker in the user's partition; resolving access does not read
// them (nor the balance and monthly grant markers).
func TestAccessResolveSkipsCreditItems(t *testing.T) {
	t.Parallel()
	e := newDynamoAccountsEnv(t, acctOpts{})
	ctx := t.Context()
	require.NoError(t, e.accounts.SetProfileTier(ctx, "u1", entitlement.TierInitiate))
	ev := provEvent("evt_1", 0, entitlement.ProviderActive)
	ev.Tier, ev.CurrentPeriodStart, ev.CurrentPeriodEnd = entitlement.TierJourneyman, acctStart, acctStart.Add(30*24*time.Hour)
	provApply(t, e, ev, true)
	_, err := e.accounts.MonthlyGrant(ctx, "u1", entitlement.TierJourneyman, "2025-01", "evt_1")
	require.NoError(t, err)
	for i := range 20 {
		_, err := e.accounts.TopUp(ctx, "u1", 2, "order-"+strconv.Itoa(i))
		require.NoError(t, err)
		_, err = e.accounts.Consume(ctx, "u1", 1, "render-"+strconv.Itoa(i))
		require.NoError(t, err)
	}
	e.db.Reset()
	got, err := e.accounts.ResolveAccess(ctx, "u1")
	require.NoError(t, err)
	require.Equal(t, entitlement.Access{Tier: entitlement.TierJourneyman, Reason: entitlement.ReasonActiveSubscription,
		Source: ev.SubscriptionID, Until: ev.CurrentPeriodEnd}, got)
	require.Equal(t, 2, e.db.ItemsRead(), "items read: want the subscription and the profile only (%v)", e.db)
	_, err = e.accounts.GrantFounderPass(ctx, "u1", entitlement.PassGuildBuilder, "pi_1", time.Time{})
	require.NoError(t, err)
	got, err = e.accounts.ResolveAccess(ctx, "u1")
	require.NoError(t, err)
	require.Equal(t, entitlement.ReasonFounderPass, got.Reason, "%+v", got)
}
