package dynamostore_test

import (
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
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
	client := dynamotest.Client(t)
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
	if _, err := e.db.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(e.table.Table), Item: item}); err != nil {
		t.Fatal(err)
	}
}

func acctS(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func acctN(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
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
		if c := acctBalance(t, e, "u1", 0); c.UserID != "u1" || !c.CreatedAt.IsZero() {
			t.Fatalf("no record: %+v", c)
		}
		c, err := e.accounts.Grant(ctx, "u1", 10)
		if err != nil || c.Balance != 10 || !c.CreatedAt.Equal(acctStart) || !c.LastTopUp.IsZero() {
			t.Fatalf("grant: %+v %v", c, err)
		}
		e.clock.Advance(time.Hour)
		if c, err = e.accounts.TopUp(ctx, "u1", 5); err != nil || c.Balance != 15 || !c.LastTopUp.Equal(acctStart.Add(time.Hour)) {
			t.Fatalf("top up: %+v %v", c, err)
		}
		if c, err = e.accounts.Consume(ctx, "u1", 3); err != nil || c.Balance != 12 {
			t.Fatalf("consume: %+v %v", c, err)
		}
		c = acctBalance(t, e, "u1", 12)
		if !c.CreatedAt.Equal(acctStart) || !c.UpdatedAt.Equal(acctStart.Add(time.Hour)) || c.UserID != "u1" || !c.ExpiresAt.IsZero() {
			t.Fatalf("stored: %+v", c)
		}
		acctBalance(t, e, "u2", 0)
	})
}

func TestCreditsConsumeInsufficient(t *testing.T) {
	forEachAccounts(t, acctOpts{}, func(t *testing.T, e *acctEnv) {
		ctx := t.Context()
		check := func(n, balance int64) {
			t.Helper()
			_, err := e.accounts.Consume(ctx, "u1", n)
			var ie *entitlement.InsufficientCreditsError
			if !errors.Is(err, entitlement.ErrInsufficientCredits) || !errors.As(err, &ie) {
				t.Fatalf("consume %d: %v", n, err)
			}
			if ie.Balance != balance || ie.Requested != n || ie.UserID != "u1" {
				t.Fatalf("consume %d: %+v", n, ie)
			}
		}
		check(1, 0) // no record
		if _, err := e.accounts.Grant(ctx, "u1", 5); err != nil {
			t.Fatal(err)
		}
		if e.db != nil {
			e.db.Reset()
		}
		check(6, 5)
		if e.db != nil && (e.db.TotalCalls() != 1 || e.db.Calls("UpdateItem") != 1) {
			t.Fatalf("the failed consume read the balance separately: %v", e.db.Log())
		}
		acctBalance(t, e, "u1", 5)
		if c, err := e.accounts.Consume(ctx, "u1", 5); err != nil || c.Balance != 0 {
			t.Fatalf("consume all: %+v %v", c, err)
		}
		check(1, 0)
		acctBalance(t, e, "u1", 0)
	})
}

func TestCreditsInvalidInput(t *testing.T) {
	forEachAccounts(t, acctOpts{}, func(t *testing.T, e *acctEnv) {
		ctx := t.Context()
		for _, n := range []int64{0, -1, entitlement.MaxCreditAmount + 1} {
			if _, err := e.accounts.Grant(ctx, "u1", n); !errors.Is(err, entitlement.ErrInvalidCredits) {
				t.Errorf("grant %d: %v", n, err)
			}
			if _, err := e.accounts.TopUp(ctx, "u1", n); !errors.Is(err, entitlement.ErrInvalidCredits) {
				t.Errorf("top up %d: %v", n, err)
			}
			if _, err := e.accounts.Consume(ctx, "u1", n); !errors.Is(err, entitlement.ErrInvalidCredits) {
				t.Errorf("consume %d: %v", n, err)
			}
		}
		_, err := e.accounts.Grant(ctx, "", 1)
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
		if _, err := e.accounts.Grant(ctx, "u1", 50); err != nil {
			t.Fatal(err)
		}
		var (
			wg                  sync.WaitGroup
			mu                  sync.Mutex
			ok, short           int
			unexpected          []error
			start               = make(chan struct{})
			minSeen, maxSeenNew = int64(50), int64(-1)
		)
		for range 100 {
			wg.Go(func() {
				<-start
				c, err := e.accounts.Consume(ctx, "u1", 1)
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
		if len(unexpected) > 0 {
			t.Fatalf("unexpected errors: %v", unexpected)
		}
		if ok != 50 || short != 50 {
			t.Fatalf("%d consumes succeeded and %d were refused, want 50 and 50", ok, short)
		}
		if minSeen != 0 || maxSeenNew != 49 {
			t.Fatalf("balances after successful consumes ranged %d..%d, want 0..49", minSeen, maxSeenNew)
		}
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
			if err != nil || r.Applied != applied || r.Amount != amount || r.Period != period {
				t.Fatalf("grant %s %s %s: %+v %v, want applied %v amount %d", tier, period, event, r, err, applied, amount)
			}
		}
		grant(entitlement.TierJourneyman, "2025-01", "evt_1", true, 5)
		grant(entitlement.TierJourneyman, "2025-01", "evt_1", false, 0) // redelivered
		grant(entitlement.TierSage, "2025-01", "evt_1b", false, 0)      // another event, same period
		c := acctBalance(t, e, "u1", 5)
		if c.LastGrantPeriod != "2025-01" || c.LastGrantEventID != "evt_1" || !c.LastReset.Equal(acctStart) {
			t.Fatalf("after first grant: %+v", c)
		}
		e.clock.Advance(31 * 24 * time.Hour)
		grant("sage", "2025-02", "evt_2", true, 15)             // any case
		grant(entitlement.TierInitiate, "2024-12", "", true, 2) // a late older period still counts once
		grant(entitlement.TierInitiate, "2024-12", "", false, 0)
		c = acctBalance(t, e, "u1", 22)
		if c.LastGrantPeriod != "2024-12" || c.LastGrantEventID != "evt_2" || !c.LastReset.Equal(acctStart.Add(31*24*time.Hour)) {
			t.Fatalf("after later grants: %+v", c)
		}
		// The free tier grants nothing and writes nothing.
		if r, err := e.accounts.MonthlyGrant(ctx, "u2", "free", "2025-01", "evt_3"); err != nil || r.Applied || r.Tier != entitlement.TierFree {
			t.Fatalf("free: %+v %v", r, err)
		}
		if c := acctBalance(t, e, "u2", 0); !c.CreatedAt.IsZero() {
			t.Fatalf("free tier wrote a record: %+v", c)
		}
		if e.db != nil {
			m := e.raw(t, "USER#u1", "CREDITS#GRANT#2025-01")
			if acctText(m["eventId"]) != "evt_1" || acctText(m["amount"]) != "5" || acctText(m["tier"]) != "JOURNEYMAN" || acctText(m["type"]) != "CreditGrant" {
				t.Fatalf("marker: %v", m)
			}
			wantTTL := acctStart.Add(400 * 24 * time.Hour).Unix()
			if acctText(m["expiresAt"]) != strconv.FormatInt(wantTTL, 10) {
				t.Fatalf("marker expiry %v, want %d", m["expiresAt"], wantTTL)
			}
		}
	})
}

// TestCreditsMonthlyGrantConcurrentDuplicates delivers one payment event
// twenty times at once: exactly one delivery grants.
func TestCreditsMonthlyGrantConcurrentDuplicates(t *testing.T) {
	forEachAccounts(t, acctOpts{}, func(t *testing.T, e *acctEnv) {
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			applied int
			errs    []error
		)
		for range 20 {
			wg.Go(func() {
				r, err := e.accounts.MonthlyGrant(t.Context(), "u1", entitlement.TierGuildmaster, "2025-01-01T00:00:00Z", "evt_dup")
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
				}
				if r.Applied {
					applied++
				}
			})
		}
		wg.Wait()
		if len(errs) > 0 || applied != 1 {
			t.Fatalf("applied %d times, errors %v", applied, errs)
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
			if err != nil || r.Applied != c.applied || r.Amount != c.amount {
				t.Errorf("%s: %+v %v", c.tier, r, err)
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
		if q.Quota(tier) != n {
			t.Errorf("%s = %d, want %d", tier, q.Quota(tier), n)
		}
	}
	custom := entitlement.CreditQuotas{entitlement.TierSage: 30}
	q, _ = custom.WithDefaults()
	if q.Quota(entitlement.TierSage) != 30 || q.Quota(entitlement.TierGuildmaster) != 15 {
		t.Fatalf("merged = %v", q)
	}
	custom[entitlement.TierSage] = 1
	if q.Quota(entitlement.TierSage) != 30 {
		t.Fatal("WithDefaults did not copy")
	}
	for _, bad := range []entitlement.CreditQuotas{{"sage": 1}, {"PLATINUM": 1}, {entitlement.TierSage: -1}} {
		if _, err := bad.WithDefaults(); err == nil {
			t.Errorf("%v accepted", bad)
		}
		if _, err := dynamostore.NewAccounts(dynamostore.AccountsConfig{Client: dynamotest.Wrap(nil), Quotas: bad}); err == nil {
			t.Errorf("NewDynamoAccounts accepted quotas %v", bad)
		}
		if _, err := billingtest.NewAccounts(billingtest.AccountsOptions{Quotas: bad}); err == nil {
			t.Errorf("NewAccounts accepted quotas %v", bad)
		}
	}
	if _, err := dynamostore.NewAccounts(dynamostore.AccountsConfig{}); err == nil {
		t.Error("no client accepted")
	}
	if _, err := dynamostore.NewAccounts(dynamostore.AccountsConfig{Client: dynamotest.Wrap(nil), CreditExpiry: -time.Second}); err == nil {
		t.Error("negative expiry accepted")
	}
}

func TestCreditsExpiry(t *testing.T) {
	const month = 30 * 24 * time.Hour
	forEachAccounts(t, acctOpts{expiry: month}, func(t *testing.T, e *acctEnv) {
		ctx := t.Context()
		c, err := e.accounts.Grant(ctx, "u1", 10)
		if err != nil || !c.ExpiresAt.Equal(acctStart.Add(month)) {
			t.Fatalf("grant: %+v %v", c, err)
		}
		if e.db != nil {
			item := e.raw(t, "USER#u1", "CREDITS#BALANCE")
			if got, want := acctText(item["expiresAt"]), strconv.FormatInt(acctStart.Add(month).Unix(), 10); got != want {
				t.Fatalf("expiresAt = %q, want %s", got, want)
			}
		}
		e.clock.Advance(month - time.Second)
		acctBalance(t, e, "u1", 10)
		if c, err = e.accounts.TopUp(ctx, "u1", 5); err != nil || c.Balance != 15 || !c.ExpiresAt.Equal(e.clock.Now().Add(month)) {
			t.Fatalf("top up pushes the expiry: %+v %v", c, err)
		}
		e.clock.Advance(month) // exactly at the expiry
		if c = acctBalance(t, e, "u1", 0); !c.Expired {
			t.Fatalf("expired balance: %+v", c)
		}
		_, err = e.accounts.Consume(ctx, "u1", 1)
		require.ErrorIs(t, err, entitlement.ErrInsufficientCredits, "consume of expired credits")
		// A grant restarts from zero: expired credits are not revived.
		if c, err = e.accounts.Grant(ctx, "u1", 3); err != nil || c.Balance != 3 || c.Expired || !c.ExpiresAt.Equal(e.clock.Now().Add(month)) {
			t.Fatalf("grant after expiry: %+v %v", c, err)
		}
		// So does a monthly grant (the transactional path).
		e.clock.Advance(month + time.Hour)
		r, err := e.accounts.MonthlyGrant(ctx, "u1", entitlement.TierJourneyman, "2025-04", "evt_4")
		if err != nil || !r.Applied {
			t.Fatalf("monthly grant after expiry: %+v %v", r, err)
		}
		if c = acctBalance(t, e, "u1", 5); !c.ExpiresAt.Equal(e.clock.Now().Add(month)) {
			t.Fatalf("after monthly grant: %+v", c)
		}
	})
}

func TestCreditsWithoutExpiryWriteNoTTL(t *testing.T) {
	t.Parallel()
	e := newDynamoAccountsEnv(t, acctOpts{})
	if _, err := e.accounts.TopUp(t.Context(), "abc123", 10); err != nil {
		t.Fatal(err)
	}
	item := e.raw(t, "USER#abc123", "CREDITS#BALANCE")
	want := map[string]string{"type": "Credits", "balance": "10", "lastTopUp": "2025-01-15T10:30:00Z",
		"createdAt": "2025-01-15T10:30:00Z", "updatedAt": "2025-01-15T10:30:00Z"}
	for k, v := range want {
		if acctText(item[k]) != v {
			t.Errorf("%s = %v, want %s", k, item[k], v)
		}
	}
	if _, ok := item["expiresAt"]; ok {
		t.Errorf("expiresAt written without CreditExpiry: %v", item)
	}
	if _, ok := item["balance"].(*types.AttributeValueMemberN); !ok {
		t.Errorf("balance is not a Number: %T", item["balance"])
	}
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
	c, err := cfg.DecodeCredits(item, time.Unix(1735689600-1, 0))
	if err != nil || c.UserID != "abc123" || c.Balance != 12 || c.Expired || !c.ExpiresAt.Equal(time.Unix(1735689600, 0)) ||
		!c.LastTopUp.Equal(time.Date(2025, 1, 15, 10, 0, 0, 0, time.UTC)) {
		t.Fatalf("%+v %v", c, err)
	}
	if c, _ = cfg.DecodeCredits(item, time.Unix(1735689600, 0)); c.Balance != 0 || !c.Expired {
		t.Fatalf("at expiry: %+v", c)
	}
	item["balance"] = acctS("12")
	var fe *billing.FieldError
	if _, err := cfg.DecodeCredits(item, acctStart); !errors.As(err, &fe) || fe.Field != "balance" || fe.Key != "PK=USER#abc123 SK=CREDITS#BALANCE" {
		t.Fatalf("string balance: %v", err)
	}
	item["balance"], item["PK"] = acctN(1), acctS("ACC#abc123")
	_, err = cfg.DecodeCredits(item, acctStart)
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
