package dynamostore_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/dynabill/billing/internal/sdkav"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/entitlement"
	"github.com/dynabill/billing/internal/dynamotest"
	"github.com/dynabill/billing/internal/layout"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// acctStart is the clock's start in the account tests.
var acctStart = time.Date(2025, 1, 15, 10, 30, 0, 0, time.UTC)

// acctOpts configures the stores of an account test.
type acctOpts struct {
	quotas entitlement.CreditQuotas
	expiry time.Duration
	table  dynamostore.SingleTableConfig // Table is set per test
}

// acctEnv is one implementation of billing.Accounts under test; db and
// table are set for DynamoDB only.
type acctEnv struct {
	accounts entitlement.Accounts
	clock    *billingtest.Clock
	db       *dynamotest.Wrapper
	table    dynamostore.SingleTableConfig
}

// forEachAccounts runs f against the in-memory twin and DynamoDB (a fresh
// table on the local server, behind the limit-checking wrapper), so the
// twin is held to the same behaviour.
func forEachAccounts(t *testing.T, opts acctOpts, f func(t *testing.T, e *acctEnv)) {
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		f(t, newMemoryAccountsEnv(t, opts))
	})
	t.Run("dynamo", func(t *testing.T) {
		t.Parallel()
		f(t, newDynamoAccountsEnv(t, opts))
	})
}

func newMemoryAccountsEnv(t *testing.T, opts acctOpts) *acctEnv {
	clock := billingtest.NewClock(acctStart)
	a, err := billingtest.NewAccounts(billingtest.AccountsOptions{Clock: clock, Quotas: opts.quotas, CreditExpiry: opts.expiry})
	require.NoError(t, err)
	return &acctEnv{accounts: a, clock: clock}
}

func newDynamoAccountsEnv(t *testing.T, opts acctOpts) *acctEnv {
	t.Helper()
	client := dynamodb.New(dynamotest.Client(t).Options(), func(o *dynamodb.Options) {
		o.APIOptions = append(slices.Clone(o.APIOptions), countSDKSends)
	})
	cfg := opts.table
	cfg.Table = dynamotest.TableName(t, "billing")
	cfg = cfg.WithDefaults()
	dynamotest.CreateTable(t, client, dynamostore.SingleTableDefinition(cfg))
	w := dynamotest.Wrap(client)
	t.Cleanup(func() { w.AssertNoViolations(t) })
	clock := billingtest.NewClock(acctStart)
	a, err := dynamostore.NewAccounts(dynamostore.AccountsConfig{
		Client: w, Table: cfg, Clock: clock, Quotas: opts.quotas, CreditExpiry: opts.expiry,
	})
	require.NoError(t, err)
	return &acctEnv{accounts: a, clock: clock, db: w, table: cfg}
}

// raw reads an item directly (DynamoDB only); nil when absent.
func (e *acctEnv) raw(t *testing.T, pk, sk string) map[string]types.AttributeValue {
	t.Helper()
	out, err := e.db.GetItem(t.Context(), &dynamodb.GetItemInput{
		TableName: aws.String(e.table.Table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"PK": acctS(pk), "SK": acctS(sk)},
	})
	require.NoError(t, err)
	return out.Item
}

// putRaw writes an item directly (DynamoDB only).
func (e *acctEnv) putRaw(t *testing.T, item map[string]types.AttributeValue) {
	t.Helper()
	_, err := e.db.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(e.table.Table), Item: item})
	require.NoError(t, err)
}

func acctS(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func acctN(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

// sdkSends counts, for the calls made with a context from withSDKSends,
// the operations started and the requests the SDK sent for them: more
// sends than operations means the SDK's own retryer resent a request,
// whose first try may have been applied without its answer arriving.
type sdkSends struct{ ops, sends atomic.Int64 }

type sdkSendsKey struct{}

// withSDKSends returns ctx counting its calls' sends in the result.
func withSDKSends(ctx context.Context) (context.Context, *sdkSends) {
	c := &sdkSends{}
	return context.WithValue(ctx, sdkSendsKey{}, c), c
}

// resent reports whether the SDK resent any request of the counted calls.
func (c *sdkSends) resent() bool { return c.sends.Load() > c.ops.Load() }

// countSDKSends adds to a client's stack the counting of [sdkSends]: once
// per operation before the retry loop, once per request after it.
func countSDKSends(stack *middleware.Stack) error {
	counter := func(ctx context.Context) *sdkSends {
		c, _ := ctx.Value(sdkSendsKey{}).(*sdkSends)
		return c
	}
	err := stack.Initialize.Add(middleware.InitializeMiddlewareFunc("CountOperations",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			if c := counter(ctx); c != nil {
				c.ops.Add(1)
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.Before)
	if err != nil {
		return err
	}
	return stack.Finalize.Insert(middleware.FinalizeMiddlewareFunc("CountSends",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			if c := counter(ctx); c != nil {
				c.sends.Add(1)
			}
			return next.HandleFinalize(ctx, in)
		}), "Retry", middleware.After)
}

func acctBalance(t *testing.T, e *acctEnv, user string, want int64) entitlement.Credits {
	t.Helper()
	c, err := e.accounts.Balance(t.Context(), user)
	require.NoError(t, err, "balance %s", user)
	require.Equal(t, want, c.Balance, "balance %s = %d, want %d (%+v)", user, c.Balance, want, c)
	return c
}

func TestCreditsBalanceGrantTopUpConsume(t *testing.T) {
	forEachAccounts(t, acctOpts{}, func(t *testing.T, e *acctEnv) {
		ctx := t.Context()
		none := acctBalance(t, e, "u1", 0)
		require.Equal(t, "u1", none.UserID, "no record: %+v", none)
		require.True(t, none.CreatedAt.IsZero(), "no record: %+v", none)
		c, err := e.accounts.Grant(ctx, "u1", 10, "grant-1")
		require.NoError(t, err, "grant")
		require.Equal(t, int64(10), c.Balance, "grant: %+v", c)
		require.True(t, c.CreatedAt.Equal(acctStart), "grant: %+v", c)
		require.True(t, c.LastTopUp.IsZero(), "grant: %+v", c)
		e.clock.Advance(time.Hour)
		c, err = e.accounts.TopUp(ctx, "u1", 5, "top-up-1")
		require.NoError(t, err, "top up")
		require.Equal(t, int64(15), c.Balance, "top up: %+v", c)
		require.True(t, c.LastTopUp.Equal(acctStart.Add(time.Hour)), "top up: %+v", c)
		c, err = e.accounts.Consume(ctx, "u1", 3, "consume-1")
		require.NoError(t, err, "consume")
		require.Equal(t, int64(12), c.Balance, "consume: %+v", c)
		c = acctBalance(t, e, "u1", 12)
		require.True(t, c.CreatedAt.Equal(acctStart), "stored: %+v", c)
		require.True(t, c.UpdatedAt.Equal(acctStart.Add(time.Hour)), "stored: %+v", c)
		require.Equal(t, "u1", c.UserID, "stored: %+v", c)
		require.True(t, c.ExpiresAt.IsZero(), "stored: %+v", c)
		acctBalance(t, e, "u2", 0)
	})
}

func TestCreditsConsumeInsufficient(t *testing.T) {
	forEachAccounts(t, acctOpts{}, func(t *testing.T, e *acctEnv) {
		ctx := t.Context()
		// A refused consume does not use up its request ID: check(1, 0)
		// runs twice with the same one.
		check := func(n, balance int64) {
			t.Helper()
			_, err := e.accounts.Consume(ctx, "u1", n, fmt.Sprint("short-", n))
			var ie *entitlement.InsufficientCreditsError
			require.ErrorIs(t, err, entitlement.ErrInsufficientCredits, "consume %d", n)
			require.ErrorAs(t, err, &ie, "consume %d", n)
			require.Equal(t, balance, ie.Balance, "consume %d: %+v", n, ie)
			require.Equal(t, n, ie.Requested, "consume %d: %+v", n, ie)
			require.Equal(t, "u1", ie.UserID, "consume %d: %+v", n, ie)
		}
		check(1, 0) // no record
		_, err := e.accounts.Grant(ctx, "u1", 5, "grant-1")
		require.NoError(t, err)
		if e.db != nil {
			e.db.Reset()
		}
		check(6, 5)
		if e.db != nil {
			require.Equal(t, 1, e.db.TotalCalls(), "the failed consume read the balance separately: %v", e.db.Log())
			require.Equal(t, 1, e.db.Calls("TransactWriteItems"), "the failed consume read the balance separately: %v", e.db.Log())
		}
		acctBalance(t, e, "u1", 5)
		c, err := e.accounts.Consume(ctx, "u1", 5, "consume-all")
		require.NoError(t, err, "consume all")
		require.Equal(t, int64(0), c.Balance, "consume all: %+v", c)
		check(1, 0)
		acctBalance(t, e, "u1", 0)
	})
}

func TestCreditsInvalidInput(t *testing.T) {
	forEachAccounts(t, acctOpts{}, func(t *testing.T, e *acctEnv) {
		ctx := t.Context()
		for _, n := range []int64{0, -1, entitlement.MaxCreditAmount + 1} {
			_, err := e.accounts.Grant(ctx, "u1", n, "req-1")
			assert.ErrorIs(t, err, entitlement.ErrInvalidCredits, "grant %d", n)
			_, err = e.accounts.TopUp(ctx, "u1", n, "req-1")
			assert.ErrorIs(t, err, entitlement.ErrInvalidCredits, "top up %d", n)
			_, err = e.accounts.Consume(ctx, "u1", n, "req-1")
			assert.ErrorIs(t, err, entitlement.ErrInvalidCredits, "consume %d", n)
		}
		_, err := e.accounts.Grant(ctx, "", 1, "req-1")
		assert.ErrorIs(t, err, entitlement.ErrInvalidAccount, "empty user")
		_, err = e.accounts.Balance(ctx, string(make([]byte, entitlement.MaxAccountID+1)))
		assert.ErrorIs(t, err, entitlement.ErrInvalidAccount, "long user")
		_, err = e.accounts.MonthlyGrant(ctx, "u1", "PLATINUM", "2025-01", "evt")
		assert.ErrorIs(t, err, entitlement.ErrInvalidTier, "bad tier")
		_, err = e.accounts.MonthlyGrant(ctx, "u1", entitlement.TierSage, "", "evt")
		assert.ErrorIs(t, err, entitlement.ErrInvalidCredits, "empty period")
		acctBalance(t, e, "u1", 0)
	})
}

// TestConsumeConcurrentAcceptance is the acceptance test of issue #7: 100
// concurrent consumes of 1 against a balance of 50 succeed exactly 50
// times and leave 0.
func TestConsumeConcurrentAcceptance(t *testing.T) {
	forEachAccounts(t, acctOpts{}, func(t *testing.T, e *acctEnv) {
		ctx := t.Context()
		_, err := e.accounts.Grant(ctx, "u1", 50, "seed")
		require.NoError(t, err)
		var (
			wg                  sync.WaitGroup
			mu                  sync.Mutex
			ok, short           int
			unexpected          []error
			start               = make(chan struct{})
			minSeen, maxSeenNew = int64(50), int64(-1)
		)
		for i := range 100 {
			wg.Go(func() {
				<-start
				c, err := e.accounts.Consume(ctx, "u1", 1, fmt.Sprint("consume-", i))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					ok++
					minSeen, maxSeenNew = min(minSeen, c.Balance), max(maxSeenNew, c.Balance)
				case errors.Is(err, entitlement.ErrInsufficientCredits):
					short++
				default:
					unexpected = append(unexpected, err)
				}
			})
		}
		close(start)
		wg.Wait()
		require.Empty(t, unexpected, "unexpected errors")
		require.Equal(t, 50, ok, "%d consumes succeeded and %d were refused, want 50 and 50", ok, short)
		require.Equal(t, 50, short, "%d consumes succeeded and %d were refused, want 50 and 50", ok, short)
		// DynamoDB reads the balance just after its transaction, so a
		// result may include concurrent consumes: each is within 0..49,
		// and the last one sees 0.
		require.Equal(t, int64(0), minSeen, "balances after successful consumes ranged %d..%d, want within 0..49", minSeen, maxSeenNew)
		require.LessOrEqual(t, maxSeenNew, int64(49), "balances after successful consumes ranged %d..%d, want within 0..49", minSeen, maxSeenNew)
		acctBalance(t, e, "u1", 0)
		if e.db != nil {
			t.Logf("%v", e.db)
		}
	})
}

func TestCreditsMonthlyGrantOncePerPeriod(t *testing.T) {
	forEachAccounts(t, acctOpts{}, func(t *testing.T, e *acctEnv) {
		ctx := t.Context()
		grant := func(tier entitlement.Tier, period, event string, applied bool, amount int64) {
			t.Helper()
			r, err := e.accounts.MonthlyGrant(ctx, "u1", tier, period, event)
			require.NoError(t, err, "grant %s %s %s", tier, period, event)
			require.Equal(t, applied, r.Applied, "grant %s %s %s: %+v", tier, period, event, r)
			require.Equal(t, amount, r.Amount, "grant %s %s %s: %+v", tier, period, event, r)
			require.Equal(t, period, r.Period, "grant %s %s %s: %+v", tier, period, event, r)
		}
		grant(entitlement.TierJourneyman, "2025-01", "evt_1", true, 5)
		grant(entitlement.TierJourneyman, "2025-01", "evt_1", false, 0) // redelivered
		grant(entitlement.TierSage, "2025-01", "evt_1b", false, 0)      // another event, same period
		c := acctBalance(t, e, "u1", 5)
		require.Equal(t, "2025-01", c.LastGrantPeriod, "after first grant: %+v", c)
		require.Equal(t, "evt_1", c.LastGrantEventID, "after first grant: %+v", c)
		require.True(t, c.LastReset.Equal(acctStart), "after first grant: %+v", c)
		e.clock.Advance(31 * 24 * time.Hour)
		grant("sage", "2025-02", "evt_2", true, 15)             // any case
		grant(entitlement.TierInitiate, "2024-12", "", true, 2) // a late older period still counts once
		grant(entitlement.TierInitiate, "2024-12", "", false, 0)
		c = acctBalance(t, e, "u1", 22)
		require.Equal(t, "2024-12", c.LastGrantPeriod, "after later grants: %+v", c)
		require.Equal(t, "evt_2", c.LastGrantEventID, "after later grants: %+v", c)
		require.True(t, c.LastReset.Equal(acctStart.Add(31*24*time.Hour)), "after later grants: %+v", c)
		// The free tier grants nothing and writes nothing.
		r, err := e.accounts.MonthlyGrant(ctx, "u2", "free", "2025-01", "evt_3")
		require.NoError(t, err, "free")
		require.False(t, r.Applied, "free: %+v", r)
		require.Equal(t, entitlement.TierFree, r.Tier, "free: %+v", r)
		free := acctBalance(t, e, "u2", 0)
		require.True(t, free.CreatedAt.IsZero(), "free tier wrote a record: %+v", free)
		if e.db != nil {
			m := e.raw(t, "USER#u1", "CREDITS#GRANT#2025-01")
			require.Equal(t, "evt_1", acctText(m["eventId"]), "marker: %v", m)
			require.Equal(t, "5", acctText(m["amount"]), "marker: %v", m)
			require.Equal(t, "JOURNEYMAN", acctText(m["tier"]), "marker: %v", m)
			require.Equal(t, "CreditGrant", acctText(m["type"]), "marker: %v", m)
			wantTTL := acctStart.Add(400 * 24 * time.Hour).Unix()
			require.Equal(t, strconv.FormatInt(wantTTL, 10), acctText(m["expiresAt"]), "marker expiry")
		}
	})
}

// TestCreditsMonthlyGrantConcurrentDuplicates delivers one payment event
// twenty times at once: the balance grows once, and one delivery reports
// it applied unless the SDK resent that delivery's transaction (see
// TestCreditsRequestConcurrentSameID).
func TestCreditsMonthlyGrantConcurrentDuplicates(t *testing.T) {
	forEachAccounts(t, acctOpts{}, func(t *testing.T, e *acctEnv) {
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			applied int
			resent  int
			errs    []error
		)
		for range 20 {
			wg.Go(func() {
				ctx, sends := withSDKSends(t.Context())
				r, err := e.accounts.MonthlyGrant(ctx, "u1", entitlement.TierGuildmaster, "2025-01-01T00:00:00Z", "evt_dup")
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					errs = append(errs, err)
				case r.Applied:
					applied++
				case sends.resent():
					resent++
				}
			})
		}
		wg.Wait()
		require.Empty(t, errs, "applied %d times", applied)
		if applied != 1 {
			require.Equal(t, 0, applied, "applied %d times", applied)
			require.Positive(t, resent, "no delivery reports the grant, and the SDK resent none")
		}
		acctBalance(t, e, "u1", 15)
	})
}

func TestCreditsMonthlyGrantQuotas(t *testing.T) {
	opts := acctOpts{quotas: entitlement.CreditQuotas{entitlement.TierSage: 20, entitlement.TierInitiate: 0}}
	forEachAccounts(t, opts, func(t *testing.T, e *acctEnv) {
		for _, c := range []struct {
			tier    entitlement.Tier
			applied bool
			amount  int64
		}{{entitlement.TierSage, true, 20}, {entitlement.TierInitiate, false, 0}, {entitlement.TierGuildmaster, true, 15}, {entitlement.TierJourneyman, true, 5}} {
			user := "u-" + string(c.tier)
			r, err := e.accounts.MonthlyGrant(t.Context(), user, c.tier, "2025-01", "evt")
			if assert.NoError(t, err, "%s", c.tier) {
				assert.Equal(t, c.applied, r.Applied, "%s: %+v", c.tier, r)
				assert.Equal(t, c.amount, r.Amount, "%s: %+v", c.tier, r)
			}
			acctBalance(t, e, user, c.amount)
		}
	})
}

func TestCreditQuotasDefaults(t *testing.T) {
	q, err := entitlement.CreditQuotas(nil).WithDefaults()
	require.NoError(t, err)
	want := map[entitlement.Tier]int64{"FREE": 0, "INITIATE": 2, "JOURNEYMAN": 5, "SAGE": 15, "GUILDMASTER": 15}
	for tier, n := range want {
		assert.Equal(t, n, q.Quota(tier), "%s", tier)
	}
	custom := entitlement.CreditQuotas{entitlement.TierSage: 30}
	q, _ = custom.WithDefaults()
	require.Equal(t, int64(30), q.Quota(entitlement.TierSage), "merged = %v", q)
	require.Equal(t, int64(15), q.Quota(entitlement.TierGuildmaster), "merged = %v", q)
	custom[entitlement.TierSage] = 1
	require.Equal(t, int64(30), q.Quota(entitlement.TierSage), "WithDefaults did not copy")
	for _, bad := range []entitlement.CreditQuotas{{"sage": 1}, {"PLATINUM": 1}, {entitlement.TierSage: -1}} {
		_, err := bad.WithDefaults()
		assert.Error(t, err, "%v accepted", bad)
		_, err = dynamostore.NewAccounts(dynamostore.AccountsConfig{Client: dynamotest.Wrap(nil), Quotas: bad})
		assert.Error(t, err, "NewDynamoAccounts accepted quotas %v", bad)
		_, err = billingtest.NewAccounts(billingtest.AccountsOptions{Quotas: bad})
		assert.Error(t, err, "NewAccounts accepted quotas %v", bad)
	}
	_, err = dynamostore.NewAccounts(dynamostore.AccountsConfig{})
	assert.Error(t, err, "no client accepted")
	_, err = dynamostore.NewAccounts(dynamostore.AccountsConfig{Client: dynamotest.Wrap(nil), CreditExpiry: -time.Second})
	assert.Error(t, err, "negative expiry accepted")
}

func TestCreditsExpiry(t *testing.T) {
	const month = 30 * 24 * time.Hour
	forEachAccounts(t, acctOpts{expiry: month}, func(t *testing.T, e *acctEnv) {
		ctx := t.Context()
		c, err := e.accounts.Grant(ctx, "u1", 10, "grant-1")
		require.NoError(t, err, "grant")
		require.True(t, c.ExpiresAt.Equal(acctStart.Add(month)), "grant: %+v", c)
		if e.db != nil {
			item := e.raw(t, "USER#u1", "CREDITS#BALANCE")
			require.Equal(t, strconv.FormatInt(acctStart.Add(month).Unix(), 10), acctText(item["expiresAt"]), "expiresAt")
		}
		e.clock.Advance(month - time.Second)
		acctBalance(t, e, "u1", 10)
		c, err = e.accounts.TopUp(ctx, "u1", 5, "top-up-1")
		require.NoError(t, err, "top up pushes the expiry")
		require.Equal(t, int64(15), c.Balance, "top up pushes the expiry: %+v", c)
		require.True(t, c.ExpiresAt.Equal(e.clock.Now().Add(month)), "top up pushes the expiry: %+v", c)
		e.clock.Advance(month) // exactly at the expiry
		c = acctBalance(t, e, "u1", 0)
		require.True(t, c.Expired, "expired balance: %+v", c)
		_, err = e.accounts.Consume(ctx, "u1", 1, "consume-1")
		require.ErrorIs(t, err, entitlement.ErrInsufficientCredits, "consume of expired credits")
		// A grant restarts from zero: expired credits are not revived.
		c, err = e.accounts.Grant(ctx, "u1", 3, "grant-2")
		require.NoError(t, err, "grant after expiry")
		require.Equal(t, int64(3), c.Balance, "grant after expiry: %+v", c)
		require.False(t, c.Expired, "grant after expiry: %+v", c)
		require.True(t, c.ExpiresAt.Equal(e.clock.Now().Add(month)), "grant after expiry: %+v", c)
		// So does a monthly grant (the transactional path).
		e.clock.Advance(month + time.Hour)
		r, err := e.accounts.MonthlyGrant(ctx, "u1", entitlement.TierJourneyman, "2025-04", "evt_4")
		require.NoError(t, err, "monthly grant after expiry")
		require.True(t, r.Applied, "monthly grant after expiry: %+v", r)
		c = acctBalance(t, e, "u1", 5)
		require.True(t, c.ExpiresAt.Equal(e.clock.Now().Add(month)), "after monthly grant: %+v", c)
	})
}

func TestCreditsWithoutExpiryWriteNoTTL(t *testing.T) {
	t.Parallel()
	e := newDynamoAccountsEnv(t, acctOpts{})
	_, err := e.accounts.TopUp(t.Context(), "abc123", 10, "order-1")
	require.NoError(t, err)
	item := e.raw(t, "USER#abc123", "CREDITS#BALANCE")
	want := map[string]string{"type": "Credits", "balance": "10", "lastTopUp": "2025-01-15T10:30:00Z",
		"createdAt": "2025-01-15T10:30:00Z", "updatedAt": "2025-01-15T10:30:00Z"}
	for k, v := range want {
		assert.Equal(t, v, acctText(item[k]), "%s = %v", k, item[k])
	}
	assert.NotContains(t, item, "expiresAt", "expiresAt written without CreditExpiry")
	assert.IsType(t, &types.AttributeValueMemberN{}, item["balance"], "balance is not a Number")
}

// TestCreditsDecodeDocumentExample decodes a credits item as an existing
// deployment stores it.
func TestCreditsDecodeDocumentExample(t *testing.T) {
	item := map[string]types.AttributeValue{
		"PK": acctS("USER#abc123"), "SK": acctS("CREDITS#BALANCE"), "type": acctS("Credits"), "balance": acctN(12),
		"lastTopUp": acctS("2025-01-15T10:00:00Z"), "lastReset": acctS("2025-01-01T00:00:00Z"), "expiresAt": acctN(1735689600),
		"createdAt": acctS("2025-01-01T00:00:00Z"), "updatedAt": acctS("2025-01-15T10:30:00Z"),
	}
	cfg := layout.SingleTableConfig{}
	c, err := cfg.DecodeCredits(sdkav.FromSDK(item), time.Unix(1735689600-1, 0))
	require.NoError(t, err)
	require.Equal(t, "abc123", c.UserID, "%+v", c)
	require.Equal(t, int64(12), c.Balance, "%+v", c)
	require.False(t, c.Expired, "%+v", c)
	require.True(t, c.ExpiresAt.Equal(time.Unix(1735689600, 0)), "%+v", c)
	require.True(t, c.LastTopUp.Equal(time.Date(2025, 1, 15, 10, 0, 0, 0, time.UTC)), "%+v", c)
	c, _ = cfg.DecodeCredits(sdkav.FromSDK(item), time.Unix(1735689600, 0))
	require.Equal(t, int64(0), c.Balance, "at expiry: %+v", c)
	require.True(t, c.Expired, "at expiry: %+v", c)
	item["balance"] = acctS("12")
	var fe *billing.FieldError
	_, err = cfg.DecodeCredits(sdkav.FromSDK(item), acctStart)
	require.ErrorAs(t, err, &fe, "string balance")
	require.Equal(t, "balance", fe.Field, "string balance: %v", err)
	require.Equal(t, "PK=USER#abc123 SK=CREDITS#BALANCE", fe.Key, "string balance: %v", err)
	item["balance"], item["PK"] = acctN(1), acctS("ACC#abc123")
	_, err = cfg.DecodeCredits(sdkav.FromSDK(item), acctStart)
	require.ErrorIs(t, err, billing.ErrInvalidItem, "foreign partition")
}

// acctText renders a string or number attribute as text ("" otherwise).
func acctText(v types.AttributeValue) string {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return v.Value
	case *types.AttributeValueMemberN:
		return v.Value
	case *types.AttributeValueMemberBOOL:
		return strconv.FormatBool(v.Value)
	}
	return ""
}
