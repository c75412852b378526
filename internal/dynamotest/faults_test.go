package dynamotest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var errBoom = errors.New("boom")

func TestFaults(t *testing.T) {
	t.Parallel()
	db := Client(t)
	table := newTable(t, db)
	put := func(c API, user string) error {
		_, err := c.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: &table, Item: item(user, "1", "PENDING")})
		return err
	}
	get := func(c API, user string) error {
		_, err := c.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: &table, Key: key(user, "1")})
		return err
	}

	t.Run("FailNth", func(t *testing.T) {
		w := Wrap(db)
		w.FailNth("PutItem", 2, errBoom)
		require.NoError(t, get(w, "n1")) // other operations are not counted
		for i, want := range []error{nil, errBoom, nil} {
			err := put(w, fmt.Sprint("n", i))
			require.ErrorIs(t, err, want, "put %d: %v, want %v", i+1, err, want)
		}
		assert.False(t, exists(t, db, table, key("n1", "1")), "the failed put reached the server")
		assert.True(t, exists(t, db, table, key("n2", "1")), "the put after the failed one did not reach the server")
		assert.Equal(t, 3, w.Calls("PutItem"), "%v", w)
		assert.Equal(t, 2, w.ItemsWritten(), "%v", w)
	})

	t.Run("FailNth any op, nil error", func(t *testing.T) {
		w := Wrap(db)
		w.FailNth(AnyOp, 2, nil)
		require.NoError(t, get(w, "x"))
		require.ErrorIs(t, put(w, "any"), ErrInjected, "second call")
		require.NoError(t, put(w, "any"), "third call")
	})

	t.Run("FailAfterInner", func(t *testing.T) {
		w := Wrap(db)
		w.FailAfterInner("PutItem", 1, context.DeadlineExceeded)
		require.ErrorIs(t, put(w, "after"), context.DeadlineExceeded)
		assert.True(t, exists(t, db, table, key("after", "1")), "the write was not applied")
		assert.Equal(t, 1, w.ItemsWritten(), "usage not counted: %v", w)
		assert.Equal(t, float64(1), w.WriteCapacity(), "usage not counted: %v", w)
	})

	t.Run("Throttle", func(t *testing.T) {
		w := Wrap(db)
		w.Throttle("GetItem", 2)
		for i := range 2 {
			err := get(w, "x")
			var pte *types.ProvisionedThroughputExceededException
			var oe *smithy.OperationError
			require.ErrorAs(t, err, &pte, "call %d: %v, want a wrapped ProvisionedThroughputExceededException", i+1, err)
			require.ErrorAs(t, err, &oe, "call %d: %v, want a wrapped ProvisionedThroughputExceededException", i+1, err)
			require.Equal(t, "GetItem", oe.Operation(), "call %d: %v, want a wrapped ProvisionedThroughputExceededException", i+1, err)
		}
		require.NoError(t, get(w, "x"), "third call")
	})

	t.Run("Throttle transaction", func(t *testing.T) {
		w := Wrap(db)
		w.Throttle("TransactWriteItems", 1)
		_, err := w.TransactWriteItems(t.Context(), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: &table, Item: item("tx1", "1", "PENDING")}},
			{Put: &types.Put{TableName: &table, Item: item("tx2", "1", "PENDING")}},
		}})
		var tce *types.TransactionCanceledException
		require.ErrorAs(t, err, &tce, "got %v", err)
		require.Len(t, tce.CancellationReasons, 2, "got %v", err)
		require.Equal(t, "ThrottlingError", aws.ToString(tce.CancellationReasons[0].Code), "got %v", err)
		require.Equal(t, "None", aws.ToString(tce.CancellationReasons[1].Code), "got %v", err)
		assert.False(t, exists(t, db, table, key("tx1", "1")), "a throttled transaction was applied")
	})

	t.Run("Unprocessed", func(t *testing.T) {
		table, other := newTable(t, db), newTable(t, db) // empty tables
		server := Wrap(db)
		w := Wrap(server)
		w.Unprocessed(1, 10)
		in := map[string][]types.WriteRequest{table: puts("up", 15), other: puts("up", 10)}
		out := must[*dynamodb.BatchWriteItemOutput](t)(w.BatchWriteItem(t.Context(), &dynamodb.BatchWriteItemInput{RequestItems: in}))
		left := 0
		for tb, reqs := range out.UnprocessedItems {
			left += len(reqs)
			for _, r := range reqs {
				require.NotNil(t, r.PutRequest, "unprocessed request %+v returned under table %s", r, tb)
				require.NotEmpty(t, in[tb], "unprocessed request %+v returned under table %s", r, tb)
			}
		}
		require.Equal(t, 15, left, "%d unprocessed, %d+%d stored, %v", left, count(t, db, table), count(t, db, other), w)
		require.Equal(t, 10, count(t, db, table)+count(t, db, other), "%d unprocessed, %d+%d stored, %v", left, count(t, db, table), count(t, db, other), w)
		require.Equal(t, 10, w.ItemsWritten(), "%d unprocessed, %d+%d stored, %v", left, count(t, db, table), count(t, db, other), w)
		// The caller retries what is left; the rule is used up.
		out = must[*dynamodb.BatchWriteItemOutput](t)(w.BatchWriteItem(t.Context(), &dynamodb.BatchWriteItemInput{RequestItems: out.UnprocessedItems}))
		require.Empty(t, out.UnprocessedItems, "retry: %d tables left, %v", len(out.UnprocessedItems), w)
		require.GreaterOrEqual(t, count(t, db, table), 15, "retry: %v", w)
		require.Equal(t, 10, count(t, db, other), "retry: %v", w)
		require.Equal(t, 25, w.ItemsWritten(), "retry: %v", w)

		w.Unprocessed(1, 0)
		out = must[*dynamodb.BatchWriteItemOutput](t)(w.BatchWriteItem(t.Context(), &dynamodb.BatchWriteItemInput{RequestItems: in}))
		require.Len(t, out.UnprocessedItems[table], 15, "keep 0: unprocessed in %s", table)
		require.Len(t, out.UnprocessedItems[other], 10, "keep 0: unprocessed in %s", other)
		require.Equal(t, 2, server.Calls("BatchWriteItem"), "keep 0: server calls")
	})

	t.Run("Hang", func(t *testing.T) {
		w := Wrap(db)
		w.Hang("Query", 1)
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := w.Query(ctx, &dynamodb.QueryInput{
			TableName: &table, KeyConditionExpression: aws.String("user_id = :u"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":u": s("x")},
		})
		elapsed := time.Since(start)
		require.ErrorIs(t, err, context.DeadlineExceeded, "got %v after %v", err, elapsed)
		require.GreaterOrEqual(t, elapsed, 90*time.Millisecond, "got %v after %v", err, elapsed)
		_, err = w.Query(t.Context(), &dynamodb.QueryInput{
			TableName: &table, KeyConditionExpression: aws.String("user_id = :u"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":u": s("x")},
		})
		require.NoError(t, err, "second query")
	})

	t.Run("first rule set wins, ClearFaults", func(t *testing.T) {
		w := Wrap(db)
		w.FailNth("GetItem", 1, errBoom)
		w.Throttle("GetItem", 1)
		require.ErrorIs(t, get(w, "x"), errBoom)
		require.NoError(t, get(w, "x"), "both rules should be used up")
		w.FailNth("GetItem", 1, errBoom)
		w.Hang(AnyOp, 1)
		w.ClearFaults()
		require.NoError(t, get(w, "x"), "after ClearFaults")
	})
}

func TestSplitBatch(t *testing.T) {
	t.Parallel()
	in := map[string][]types.WriteRequest{"b": puts("b", 3), "a": puts("a", 2)}
	for _, tt := range []struct{ keep, fa, fb, ra, rb int }{{0, 0, 0, 2, 3}, {1, 1, 0, 1, 3}, {3, 2, 1, 0, 2}, {5, 2, 3, 0, 0}, {9, 2, 3, 0, 0}} {
		f, r := splitBatch(in, tt.keep)
		assert.Len(t, f["a"], tt.fa, "keep %d: forward a", tt.keep)
		assert.Len(t, f["b"], tt.fb, "keep %d: forward b", tt.keep)
		assert.Len(t, r["a"], tt.ra, "keep %d: rest a", tt.keep)
		assert.Len(t, r["b"], tt.rb, "keep %d: rest b", tt.keep)
		if tt.fa == 0 {
			assert.NotContains(t, f, "a", "keep %d: empty table forwarded", tt.keep)
		}
	}
}

// TestConcurrent exercises counters, rules and logs from many goroutines;
// run it with -race.
func TestConcurrent(t *testing.T) {
	t.Parallel()
	db := Client(t)
	table := newTable(t, db)
	w := Wrap(db)
	const workers, rounds = 8, 25
	var failedPuts, okPuts atomic.Int64
	var wg sync.WaitGroup
	// One rule set before the workers start is sure to fire (200 puts), so
	// the count of failures does not depend on scheduling; the goroutine
	// below adds rules while the workers run, for the race detector.
	w.FailNth("PutItem", 3, errBoom)
	for g := range workers {
		wg.Go(func() {
			for i := range rounds {
				k := item(fmt.Sprint("c", g), fmt.Sprint(i), "PENDING")
				if _, err := w.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: &table, Item: k}); err != nil {
					failedPuts.Add(1)
				} else {
					okPuts.Add(1)
				}
				_, _ = w.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: &table, Key: key(fmt.Sprint("c", g), fmt.Sprint(i)), ConsistentRead: aws.Bool(true)})
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			w.Throttle("GetItem", 2)
			w.FailNth("PutItem", 3, errBoom)
			_ = w.Log()
			_ = w.Violations()
			_ = w.String()
			time.Sleep(time.Millisecond)
		}
	})
	wg.Wait()
	assert.Equal(t, workers*rounds, w.Calls("PutItem"), "calls: %v", w)
	assert.Equal(t, workers*rounds, w.Calls("GetItem"), "calls: %v", w)
	assert.Equal(t, 2*workers*rounds, w.TotalCalls(), "calls: %v", w)
	assert.Len(t, w.Log(), 2*workers*rounds, "calls: %v", w)
	assert.Equal(t, okPuts.Load(), int64(w.ItemsWritten()), "written %d, ok puts %d, %v", w.ItemsWritten(), okPuts.Load(), w)
	assert.Equal(t, okPuts.Load(), int64(count(t, db, table)), "stored, ok puts %d, %v", okPuts.Load(), w)
	assert.Equal(t, float64(okPuts.Load()), w.WriteCapacity(), "write capacity, ok puts %d, %v", okPuts.Load(), w)
	assert.True(t, failedPuts.Load() >= 1 && failedPuts.Load() <= 21, "%d puts failed, want 1..21", failedPuts.Load())
	w.AssertNoViolations(t)
}
