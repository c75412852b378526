package dynamostore_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/dynamotest"
	"github.com/stretchr/testify/require"
)

// tokenCostSpan is how long TestTokensCost draws for each fleet size.
const tokenCostSpan = 3 * time.Second

// TestTokensCost measures what the shared processor budget costs in
// DynamoDB. K processes (1, 4 and 16), each its own Tokens on the
// machine's clock, take batches of 10 (the Collector's SharedBatch
// default) from a budget of 100 calls a second for tokenCostSpan, and
// with BILLING_LONG_TESTS set from one of 1,000 a second too. Each
// spends a batch at once and asks again as soon as it may (at its grant's
// start, or at the start the budget names when it answers N == 0): the
// most a process can ask, so lost races are as many as they get.
//
// It logs, per granted Take and per collection (one token: one processor
// call), the DynamoDB calls, the WCU and the RCU. moto reports a constant
// ConsumedCapacity, so units are computed from item sizes by DynamoDB's
// rules: dynamotest's wrapper counts the writes that applied, and
// tokenCalls adds the failed conditions, which DynamoDB charges like
// writes. Against DYNAMODB_ENDPOINT it also logs the WCU
// the server reported for the writes that applied.
//
//	CI=true go test -count=1 -v -run TestTokensCost ./dynamostore
//	BILLING_LONG_TESTS=1 CI=true go test -count=1 -v -run TestTokensCost ./dynamostore
func TestTokensCost(t *testing.T) {
	if testing.Short() {
		t.Skip("draws on the machine's clock for a few seconds")
	}
	c := dynamotest.Client(t)
	limits := []int{100}
	if dynamotest.LongTests() {
		limits = append(limits, 1000)
	}
	for _, limit := range limits {
		t.Run(fmt.Sprintf("limit=%d", limit), func(t *testing.T) { tokensCost(t, c, limit) })
	}
}

func tokensCost(t *testing.T, c *dynamodb.Client, limit int) {
	const batch = 10
	for _, k := range []int{1, 4, 16} {
		t.Run(fmt.Sprintf("K=%d", k), func(t *testing.T) {
			table := dynamotest.TableName(t, fmt.Sprintf("tokcost%d", k))
			dynamotest.CreateTable(t, c, dynamostore.LockTableDefinition(table))
			w := dynamotest.Wrap(c)
			tc := &tokenCalls{API: w}
			var mu sync.Mutex
			perWindow := map[int64]int{}
			takes, tokens, zero := 0, 0, 0
			ctx := context.Background()
			deadline := time.Now().Add(tokenCostSpan)
			var wg sync.WaitGroup
			for range k {
				tok, err := dynamostore.NewTokens(tc, table, "", limit, nil)
				require.NoError(t, err)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for time.Now().Before(deadline) {
						g, err := tok.Take(ctx, batch)
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						if g.N > 0 {
							takes++
							tokens += g.N
							perWindow[g.Start.Unix()] += g.N
						} else {
							zero++
						}
						mu.Unlock()
						time.Sleep(time.Until(g.Start))
					}
				}()
			}
			wg.Wait()
			for win, n := range perWindow {
				require.LessOrEqual(t, n, limit, "window %d", win)
			}
			updates, failed := tc.counts()
			gets := w.Calls("GetItem")
			calls := w.TotalCalls()
			wcu := w.WriteCapacity() + tc.failedWCU
			rcu := w.ReadCapacity()
			line := fmt.Sprintf("limit %d K=%-2d takes %3d (N=0 %3d) tokens %4d windows %d | calls %3d (failed %3d) WCU %5.1f RCU %.1f"+
				" | per Take: calls %.2f WCU %.2f RCU %.2f | per collection: calls %.3f WCU %.3f RCU %.3f",
				limit, k, takes, zero, tokens, len(perWindow), calls, failed, wcu, rcu,
				float64(calls)/float64(takes), wcu/float64(takes), rcu/float64(takes),
				float64(calls)/float64(tokens), wcu/float64(tokens), rcu/float64(tokens))
			if tc.serverReported && os.Getenv(dynamotest.EnvEndpoint) != "" {
				line += fmt.Sprintf(" | server-WCU (applied writes) %.1f", tc.serverWCU)
			}
			t.Log(line)
			require.Positive(t, takes)
			require.Zero(t, gets, "no read: failed conditions bring the item back")
			require.Equal(t, updates, calls)
			if k == 1 {
				require.Equal(t, takes, updates, "alone, every granted Take is one call")
				require.Zero(t, failed)
			}
		})
	}
}
