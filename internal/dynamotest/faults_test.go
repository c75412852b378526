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
		if err := get(w, "n1"); err != nil { // other operations are not counted
			t.Fatal(err)
		}
		for i, want := range []error{nil, errBoom, nil} {
			if err := put(w, fmt.Sprint("n", i)); !errors.Is(err, want) {
				t.Fatalf("put %d: %v, want %v", i+1, err, want)
			}
		}
		if exists(t, db, table, key("n1", "1")) || !exists(t, db, table, key("n2", "1")) {
			t.Error("the failed put reached the server, or the next one did not")
		}
		if w.Calls("PutItem") != 3 || w.ItemsWritten() != 2 {
			t.Errorf("%v", w)
		}
	})

	t.Run("FailNth any op, nil error", func(t *testing.T) {
		w := Wrap(db)
		w.FailNth(AnyOp, 2, nil)
		if err := get(w, "x"); err != nil {
			t.Fatal(err)
		}
		if err := put(w, "any"); !errors.Is(err, ErrInjected) {
			t.Fatalf("second call: %v, want ErrInjected", err)
		}
		if err := put(w, "any"); err != nil {
			t.Fatalf("third call: %v", err)
		}
	})

	t.Run("FailAfterInner", func(t *testing.T) {
		w := Wrap(db)
		w.FailAfterInner("PutItem", 1, context.DeadlineExceeded)
		if err := put(w, "after"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v", err)
		}
		if !exists(t, db, table, key("after", "1")) {
			t.Error("the write was not applied")
		}
		if w.ItemsWritten() != 1 || w.WriteCapacity() != 1 {
			t.Errorf("usage not counted: %v", w)
		}
	})

	t.Run("Throttle", func(t *testing.T) {
		w := Wrap(db)
		w.Throttle("GetItem", 2)
		for i := range 2 {
			err := get(w, "x")
			var pte *types.ProvisionedThroughputExceededException
			var oe *smithy.OperationError
			if !errors.As(err, &pte) || !errors.As(err, &oe) || oe.Operation() != "GetItem" {
				t.Fatalf("call %d: %v, want a wrapped ProvisionedThroughputExceededException", i+1, err)
			}
		}
		if err := get(w, "x"); err != nil {
			t.Fatalf("third call: %v", err)
		}
	})

	t.Run("Throttle transaction", func(t *testing.T) {
		w := Wrap(db)
		w.Throttle("TransactWriteItems", 1)
		_, err := w.TransactWriteItems(t.Context(), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: &table, Item: item("tx1", "1", "PENDING")}},
			{Put: &types.Put{TableName: &table, Item: item("tx2", "1", "PENDING")}},
		}})
		var tce *types.TransactionCanceledException
		if !errors.As(err, &tce) || len(tce.CancellationReasons) != 2 || aws.ToString(tce.CancellationReasons[0].Code) != "ThrottlingError" ||
			aws.ToString(tce.CancellationReasons[1].Code) != "None" {
			t.Fatalf("got %v", err)
		}
		if exists(t, db, table, key("tx1", "1")) {
			t.Error("a throttled transaction was applied")
		}
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
				if r.PutRequest == nil || len(in[tb]) == 0 {
					t.Fatalf("unprocessed request %+v returned under table %s", r, tb)
				}
			}
		}
		if left != 15 || count(t, db, table)+count(t, db, other) != 10 || w.ItemsWritten() != 10 {
			t.Fatalf("%d unprocessed, %d+%d stored, %v", left, count(t, db, table), count(t, db, other), w)
		}
		// The caller retries what is left; the rule is used up.
		out = must[*dynamodb.BatchWriteItemOutput](t)(w.BatchWriteItem(t.Context(), &dynamodb.BatchWriteItemInput{RequestItems: out.UnprocessedItems}))
		if len(out.UnprocessedItems) != 0 || count(t, db, table) < 15 || count(t, db, other) != 10 || w.ItemsWritten() != 25 {
			t.Fatalf("retry: %d tables left, %v", len(out.UnprocessedItems), w)
		}

		w.Unprocessed(1, 0)
		out = must[*dynamodb.BatchWriteItemOutput](t)(w.BatchWriteItem(t.Context(), &dynamodb.BatchWriteItemInput{RequestItems: in}))
		if len(out.UnprocessedItems[table]) != 15 || len(out.UnprocessedItems[other]) != 10 || server.Calls("BatchWriteItem") != 2 {
			t.Fatalf("keep 0: %d+%d unprocessed, %d server calls", len(out.UnprocessedItems[table]), len(out.UnprocessedItems[other]), server.Calls("BatchWriteItem"))
		}
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
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) < 90*time.Millisecond {
			t.Fatalf("got %v after %v", err, time.Since(start))
		}
		if _, err := w.Query(t.Context(), &dynamodb.QueryInput{
			TableName: &table, KeyConditionExpression: aws.String("user_id = :u"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":u": s("x")},
		}); err != nil {
			t.Fatalf("second query: %v", err)
		}
	})

	t.Run("first rule set wins, ClearFaults", func(t *testing.T) {
		w := Wrap(db)
		w.FailNth("GetItem", 1, errBoom)
		w.Throttle("GetItem", 1)
		if err := get(w, "x"); !errors.Is(err, errBoom) {
			t.Fatalf("got %v, want boom", err)
		}
		if err := get(w, "x"); err != nil {
			t.Fatalf("both rules should be used up: %v", err)
		}
		w.FailNth("GetItem", 1, errBoom)
		w.Hang(AnyOp, 1)
		w.ClearFaults()
		if err := get(w, "x"); err != nil {
			t.Fatalf("after ClearFaults: %v", err)
		}
	})
}

func TestSplitBatch(t *testing.T) {
	t.Parallel()
	in := map[string][]types.WriteRequest{"b": puts("b", 3), "a": puts("a", 2)}
	for _, tt := range []struct{ keep, fa, fb, ra, rb int }{{0, 0, 0, 2, 3}, {1, 1, 0, 1, 3}, {3, 2, 1, 0, 2}, {5, 2, 3, 0, 0}, {9, 2, 3, 0, 0}} {
		f, r := splitBatch(in, tt.keep)
		if len(f["a"]) != tt.fa || len(f["b"]) != tt.fb || len(r["a"]) != tt.ra || len(r["b"]) != tt.rb {
			t.Errorf("keep %d: forward %d/%d rest %d/%d", tt.keep, len(f["a"]), len(f["b"]), len(r["a"]), len(r["b"]))
		}
		if _, ok := f["a"]; ok && tt.fa == 0 {
			t.Errorf("keep %d: empty table forwarded", tt.keep)
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
	if w.Calls("PutItem") != workers*rounds || w.Calls("GetItem") != workers*rounds || w.TotalCalls() != 2*workers*rounds || len(w.Log()) != 2*workers*rounds {
		t.Errorf("calls: %v", w)
	}
	if int64(w.ItemsWritten()) != okPuts.Load() || int64(count(t, db, table)) != okPuts.Load() || w.WriteCapacity() != float64(okPuts.Load()) {
		t.Errorf("written %d, ok puts %d, %v", w.ItemsWritten(), okPuts.Load(), w)
	}
	if failedPuts.Load() == 0 || failedPuts.Load() > 21 {
		t.Errorf("%d puts failed, want 1..21", failedPuts.Load())
	}
	w.AssertNoViolations(t)
}
