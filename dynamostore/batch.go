package dynamostore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// maxBatchWrite is DynamoDB's limit of requests in one BatchWriteItem.
const maxBatchWrite = 25

// batchPut is one put of a batch, tagged with the record it belongs to.
type batchPut struct {
	table  string
	item   map[string]types.AttributeValue
	record int    // index of the record in the caller's slice
	key    string // record key for error messages
}

// batchWriter writes puts with BatchWriteItem: chunks of at most 25,
// UnprocessedItems retried with capped exponential backoff and full jitter.
type batchWriter struct {
	client    API
	retries   int
	baseDelay time.Duration
	maxDelay  time.Duration
	keyAttrs  map[string][2]string // table → hash and range attribute names
}

// write writes every put. It returns the indexes of the records some put of
// which was not written, and the last error. Puts of one record are kept in
// one chunk where they fit.
func (w *batchWriter) write(ctx context.Context, puts []batchPut, perChunk int) (unwritten map[int]bool, lastErr error) {
	unwritten = map[int]bool{}
	for start := 0; start < len(puts); start += perChunk {
		chunk := puts[start:min(start+perChunk, len(puts))]
		if ctx.Err() != nil {
			lastErr = ctx.Err()
			for _, p := range chunk {
				unwritten[p.record] = true
			}
			continue
		}
		left, err := w.writeChunk(ctx, chunk)
		if err != nil {
			lastErr = err
		}
		for _, p := range left {
			unwritten[p.record] = true
		}
	}
	return unwritten, lastErr
}

// writeChunk writes one chunk (<= 25 puts) and returns the puts that were not
// written.
func (w *batchWriter) writeChunk(ctx context.Context, chunk []batchPut) ([]batchPut, error) {
	pending := chunk
	var lastErr error
	for attempt := 0; ; attempt++ {
		req := map[string][]types.WriteRequest{}
		for _, p := range pending {
			req[p.table] = append(req[p.table], types.WriteRequest{PutRequest: &types.PutRequest{Item: p.item}})
		}
		out, err := w.client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: req})
		if err != nil {
			// The whole request failed (throttled, timed out): nothing in it
			// is known to be written. Puts are idempotent, so retry it all.
			lastErr = err
		} else {
			pending = w.unprocessed(pending, out.UnprocessedItems)
			if len(pending) == 0 {
				return nil, nil
			}
			lastErr = fmt.Errorf("%d unprocessed item(s)", len(pending))
		}
		if attempt >= w.retries {
			return pending, fmt.Errorf("billing: batch write: gave up after %d attempts: %w", attempt+1, lastErr)
		}
		if err := w.sleep(ctx, attempt); err != nil {
			return pending, err
		}
	}
}

// unprocessed maps UnprocessedItems back to the puts they came from.
func (w *batchWriter) unprocessed(pending []batchPut, un map[string][]types.WriteRequest) []batchPut {
	if len(un) == 0 {
		return nil
	}
	left := map[string]bool{}
	for table, reqs := range un {
		for _, r := range reqs {
			if r.PutRequest != nil {
				left[table+"\x00"+w.itemKey(table, r.PutRequest.Item)] = true
			}
		}
	}
	var out []batchPut
	for _, p := range pending {
		if left[p.table+"\x00"+w.itemKey(p.table, p.item)] {
			out = append(out, p)
		}
	}
	return out
}

func (w *batchWriter) itemKey(table string, item map[string]types.AttributeValue) string {
	names := w.keyAttrs[table]
	return stringOf(item[names[0]]) + "\x00" + stringOf(item[names[1]])
}

func (w *batchWriter) sleep(ctx context.Context, attempt int) error {
	d := w.baseDelay << min(attempt, 20)
	if d <= 0 || d > w.maxDelay {
		d = w.maxDelay
	}
	d = time.Duration(rand.Int64N(int64(d) + 1)) // full jitter
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
