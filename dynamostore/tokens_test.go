package dynamostore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/dynamotest"
	"github.com/dynabill/billing/memory"
)

// TestTokensNeverOverLimitAcrossProcesses has several "processes" (each
// its own Tokens on the same item) draw at once; no window may be granted
// more than the limit, and they match memory.Tokens on a scripted sequence.
func TestTokensNeverOverLimitAcrossProcesses(t *testing.T) {
	c := dynamotest.Client(t)
	table := dynamotest.TableName(t, "tokens")
	dynamotest.CreateTable(t, c, dynamostore.LockTableDefinition(table))
	const limit = 7
	var mu sync.Mutex
	perWindow := map[int64]int{}
	var wg sync.WaitGroup
	for p := 0; p < 4; p++ {
		tok, err := dynamostore.NewTokens(c, table, "", limit, nil)
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 6; i++ {
				g, err := tok.Take(context.Background(), 3)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				perWindow[g.Start.Unix()] += g.N
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	total := 0
	for w, n := range perWindow {
		require.LessOrEqual(t, n, limit, "window %d", w)
		total += n
	}
	require.Positive(t, total)

	// Same decisions as memory.Tokens on a scripted clock.
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	d, err := dynamostore.NewTokens(c, table, "scripted", limit, clock)
	require.NoError(t, err)
	m, err := memory.NewTokens(limit, clock)
	require.NoError(t, err)
	steps := []struct {
		n    int
		slow bool
		adv  time.Duration
	}{{n: 5}, {n: 5}, {n: 5}, {slow: true}, {n: 3}, {adv: 2 * time.Second, n: 4}, {n: 9}, {adv: time.Second, n: 2}}
	for i, st := range steps {
		now = now.Add(st.adv)
		if st.slow {
			require.NoError(t, d.Slow(context.Background(), 0))
			require.NoError(t, m.Slow(context.Background(), 0))
			continue
		}
		gd, err := d.Take(context.Background(), st.n)
		require.NoError(t, err)
		gm, err := m.Take(context.Background(), st.n)
		require.NoError(t, err)
		require.Equal(t, gm, gd, "step %d", i)
	}
}

// TestTokensSlowSeenByAnotherClient: a Slow from one process pauses and
// halves the budget another process draws from.
func TestTokensSlowSeenByAnotherClient(t *testing.T) {
	c := dynamotest.Client(t)
	table := dynamotest.TableName(t, "tokslow")
	dynamotest.CreateTable(t, c, dynamostore.LockTableDefinition(table))
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	a, err := dynamostore.NewTokens(c, table, "", 10, clock)
	require.NoError(t, err)
	b, err := dynamostore.NewTokens(c, table, "", 10, clock)
	require.NoError(t, err)
	g, err := b.Take(context.Background(), 4)
	require.NoError(t, err)
	require.Equal(t, 4, g.N)
	require.NoError(t, a.Slow(context.Background(), 2*time.Second))
	g, err = b.Take(context.Background(), 10)
	require.NoError(t, err)
	require.Equal(t, now.Add(2*time.Second), g.Start, "paused until retryAfter")
	require.Equal(t, 9, g.N, "rate halved to 5, grown back by 2 (a quarter of 10) a window over the 2 paused windows")
}

// tokClock is a clock the test moves, shared by several Tokens.
type tokClock struct {
	mu sync.Mutex
	t  time.Time
}

func newTokClock() *tokClock { return &tokClock{t: time.Unix(1_800_000_000, 0)} }

func (c *tokClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *tokClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// tokenCalls counts the UpdateItem calls a Tokens makes, the failed
// conditions among them and the write units DynamoDB charges for those
// (a failed conditional write is charged like a write, by the larger of
// the stored and the new item; a token write is never larger than the
// item it checks), which dynamotest's wrapper does not count.
// It also sums the ConsumedCapacity the server reports.
type tokenCalls struct {
	dynamostore.API
	mu                sync.Mutex
	updates, failed   int
	failedWCU         float64
	serverWCU         float64
	serverReported    bool
	dropItemOnFailure bool // send no ReturnValuesOnConditionCheckFailure
}

func (tc *tokenCalls) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if tc.dropItemOnFailure {
		cp := *in
		cp.ReturnValuesOnConditionCheckFailure = ""
		in = &cp
	}
	out, err := tc.API.UpdateItem(ctx, in, optFns...)
	tc.mu.Lock()
	defer tc.mu.Unlock()
	tc.updates++
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		tc.failed++
		tc.failedWCU += dynamotest.WriteUnits(dynamotest.ItemSize(ccf.Item))
	}
	if err == nil && out.ConsumedCapacity != nil {
		tc.serverWCU += aws.ToFloat64(out.ConsumedCapacity.CapacityUnits)
		tc.serverReported = true
	}
	return out, err
}

func (tc *tokenCalls) counts() (updates, failed int) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return tc.updates, tc.failed
}

// tokenItem reads the token item under key as it is stored.
func tokenItem(t *testing.T, c dynamostore.API, table, key string) map[string]string {
	t.Helper()
	out, err := c.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"PartitionKey": &types.AttributeValueMemberS{Value: key}}})
	require.NoError(t, err)
	got := map[string]string{}
	for k, v := range out.Item {
		if n, ok := v.(*types.AttributeValueMemberN); ok {
			got[k] = n.Value
		}
	}
	return got
}

// TestTokensTakeIsOneCall: a Take is one UpdateItem and no read, also
// when another process drew on the window since (the grant adds to the
// count it never saw); a process that has not seen the item yet learns
// it from its failed create; a Slow is one call too, and the other
// process learns of it from its next Take's failed condition (two calls).
func TestTokensTakeIsOneCall(t *testing.T) {
	c := dynamotest.Client(t)
	table := dynamotest.TableName(t, "tokone")
	dynamotest.CreateTable(t, c, dynamostore.LockTableDefinition(table))
	clk := newTokClock()
	w := dynamotest.Wrap(c)
	ca, cb := &tokenCalls{API: w}, &tokenCalls{API: w}
	a, err := dynamostore.NewTokens(ca, table, "", 100, clk.now)
	require.NoError(t, err)
	b, err := dynamostore.NewTokens(cb, table, "", 100, clk.now)
	require.NoError(t, err)
	ctx := context.Background()
	sec := clk.now()

	take := func(tok *dynamostore.Tokens, tc *tokenCalls, wantUpdates, wantFailed int) {
		t.Helper()
		u0, f0 := tc.counts()
		g, err := tok.Take(ctx, 10)
		require.NoError(t, err)
		require.Equal(t, billing.TokenGrant{N: 10, Start: sec, End: sec.Add(time.Second)}, g)
		u1, f1 := tc.counts()
		require.Equal(t, wantUpdates, u1-u0, "UpdateItem calls")
		require.Equal(t, wantFailed, f1-f0, "failed conditions")
	}
	take(a, ca, 1, 0) // creates the item
	take(b, cb, 2, 1) // its create fails and brings the item back
	take(a, ca, 1, 0) // a saw 10 used, there are 20: adds 10 all the same
	take(b, cb, 1, 0)
	take(a, ca, 1, 0)
	require.Zero(t, w.Calls("GetItem"), "no read before a write")
	require.Equal(t, "50", tokenItem(t, c, table, dynamostore.TokensKey)["used"])

	require.NoError(t, a.Slow(ctx, 2*time.Second))
	u, f := ca.counts()
	require.Equal(t, 4, u, "three Takes and the Slow: one UpdateItem each")
	require.Equal(t, 0, f)
	g, err := b.Take(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, billing.TokenGrant{N: 10, Start: sec.Add(2 * time.Second), End: sec.Add(3 * time.Second)}, g,
		"b learns of the pause from its failed condition and draws after it")
	u, f = cb.counts()
	require.Equal(t, 5, u, "the failed grant and the one after the pause")
	require.Equal(t, 2, f)
	require.Zero(t, w.Calls("GetItem"))
}

// TestTokensStaleViewNeverOverRate: a process whose view of the window
// is stale asks for a grant the window has no room for any more: the
// condition fails, the item comes back, and the grant goes to the next
// window instead. A window seen spent answers N == 0 without a call.
func TestTokensStaleViewNeverOverRate(t *testing.T) {
	c := dynamotest.Client(t)
	table := dynamotest.TableName(t, "tokstale")
	dynamotest.CreateTable(t, c, dynamostore.LockTableDefinition(table))
	clk := newTokClock()
	ca, cb := &tokenCalls{API: c}, &tokenCalls{API: c}
	a, err := dynamostore.NewTokens(ca, table, "", 10, clk.now)
	require.NoError(t, err)
	b, err := dynamostore.NewTokens(cb, table, "", 10, clk.now)
	require.NoError(t, err)
	ctx := context.Background()
	sec := clk.now()
	perWindow := map[int64]int{}
	take := func(tok *dynamostore.Tokens, want int, wantStart time.Time) {
		t.Helper()
		g, err := tok.Take(ctx, 6)
		require.NoError(t, err)
		require.Equal(t, want, g.N)
		require.Equal(t, wantStart, g.Start)
		perWindow[g.Start.Unix()] += g.N
	}
	take(a, 6, sec)                  // a sees 6 used in sec
	take(b, 4, sec)                  // b fills sec
	take(a, 6, sec.Add(time.Second)) // a still sees 6 in sec: no room there
	take(b, 4, sec.Add(time.Second))
	require.Equal(t, map[int64]int{sec.Unix(): 10, sec.Unix() + 1: 10}, perWindow)

	u, _ := cb.counts()
	take(b, 0, sec.Add(2*time.Second))
	u2, _ := cb.counts()
	require.Equal(t, u, u2, "a window seen spent needs no call")
}

// TestTokensConditionFailedWithoutItemReadsOnce: a server that returns no
// item with a failed condition costs one consistent GetItem, after which
// the grant is decided on what it read.
func TestTokensConditionFailedWithoutItemReadsOnce(t *testing.T) {
	c := dynamotest.Client(t)
	table := dynamotest.TableName(t, "toknoitem")
	dynamotest.CreateTable(t, c, dynamostore.LockTableDefinition(table))
	clk := newTokClock()
	a, err := dynamostore.NewTokens(c, table, "", 10, clk.now)
	require.NoError(t, err)
	w := dynamotest.Wrap(c)
	b, err := dynamostore.NewTokens(&tokenCalls{API: w, dropItemOnFailure: true}, table, "", 10, clk.now)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g, err := a.Take(ctx, 6)
	require.NoError(t, err)
	require.Equal(t, 6, g.N)
	g, err = b.Take(ctx, 6)
	require.NoError(t, err)
	require.Equal(t, 4, g.N)
	require.Equal(t, clk.now(), g.Start)
	require.Equal(t, 1, w.Calls("GetItem"))
	require.Equal(t, 2, w.Calls("UpdateItem"))
	require.Equal(t, "10", tokenItem(t, c, table, dynamostore.TokensKey)["used"])
}

// TestTokensInvalidItemRefused: a token item missing an attribute is
// refused with ErrInvalidItem naming it, not read as zero.
func TestTokensInvalidItemRefused(t *testing.T) {
	c := dynamotest.Client(t)
	table := dynamotest.TableName(t, "tokbad")
	dynamotest.CreateTable(t, c, dynamostore.LockTableDefinition(table))
	_, err := c.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
		"PartitionKey": &types.AttributeValueMemberS{Value: dynamostore.TokensKey},
		"win":          &types.AttributeValueMemberN{Value: "1800000000"},
		"used":         &types.AttributeValueMemberN{Value: "3"},
	}})
	require.NoError(t, err)
	tok, err := dynamostore.NewTokens(c, table, "", 10, newTokClock().now)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = tok.Take(ctx, 5)
	require.ErrorIs(t, err, billing.ErrInvalidItem)
	var fe *billing.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "rate", fe.Field)
	require.Equal(t, map[string]string{"win": "1800000000", "used": "3"}, tokenItem(t, c, table, dynamostore.TokensKey), "nothing written")
}

// TestTokensDeadClientsTokensLapse: processes take tokens and die without
// spending them while others keep taking. No window is granted more than
// the limit, the dead processes' tokens stay theirs only in the windows
// they were granted for, and from the next window on the survivors get the
// whole rate between them.
func TestTokensDeadClientsTokensLapse(t *testing.T) {
	c := dynamotest.Client(t)
	table := dynamotest.TableName(t, "tokdead")
	dynamotest.CreateTable(t, c, dynamostore.LockTableDefinition(table))
	const limit, batch = 20, 5
	clk := newTokClock()
	start := clk.now().Unix()
	var mu sync.Mutex
	dead, alive := map[int64]int{}, map[int64]int{}
	// draw has every client take batches concurrently, each until the
	// budget answers N == 0 (or takes times when takes > 0), adding
	// what it was granted to into by window.
	draw := func(clients []*dynamostore.Tokens, takes int, into map[int64]int) {
		var wg sync.WaitGroup
		for _, tok := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; takes == 0 || i < takes; i++ {
					g, err := tok.Take(context.Background(), batch)
					if err != nil {
						t.Error(err)
						return
					}
					if g.N == 0 {
						return
					}
					mu.Lock()
					into[g.Start.Unix()] += g.N
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
	fleet := func(n int) []*dynamostore.Tokens {
		var out []*dynamostore.Tokens
		for range n {
			tok, err := dynamostore.NewTokens(c, table, "", limit, clk.now)
			require.NoError(t, err)
			out = append(out, tok)
		}
		return out
	}
	doomed, survivors := fleet(3), fleet(3)

	// Three processes take two batches each and die holding them: 30
	// tokens, the whole first window and half the next.
	draw(doomed, 2, dead)
	assert.Equal(t, map[int64]int{start: limit, start + 1: 10}, dead)
	// The survivors draw until the budget says wait, second after second.
	for range 6 {
		draw(survivors, 0, alive)
		clk.add(time.Second)
	}
	for w := start; w <= start+6; w++ {
		assert.Equal(t, limit, dead[w]+alive[w], "window %d granted exactly the limit", w)
	}
	require.Zero(t, alive[start], "the first window went to the dead")
	require.Equal(t, 10, alive[start+1], "what the dead left of the second")
	for w := start + 2; w <= start+6; w++ {
		assert.Equal(t, limit, alive[w], "window %d: the dead's tokens lapsed with their windows", w)
	}
	require.Len(t, alive, 6, "no window beyond the last second and the next")
}
