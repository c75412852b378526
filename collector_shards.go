package billing

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// shardCursorPrefix marks the cursor of a run that works its shards at
// once: one cursor per shard still to do.
const shardCursorPrefix = "shards:"

// runShards works shards at once, ShardConcurrency at a time, each as a
// run of its own (up to PagesPerInvocation pages), and adds their reports
// into rep. rep.Next holds the cursor of every shard not finished: its own
// Next, or "" for a shard not started.
func (c *Collector) runShards(ctx context.Context, req RunRequest, shards []int, now time.Time, rep *Report) error {
	todo, err := decodeShardCursor(req.Cursor, shards)
	if err != nil {
		return err
	}
	order := make([]int, 0, len(todo))
	for s := range todo {
		order = append(order, s)
	}
	slices.Sort(order)

	var (
		mu   sync.Mutex
		left = map[int]string{}
		errs []error
		wg   sync.WaitGroup
		work = make(chan int)
	)
	for range min(c.cfg.ShardConcurrency, len(order)) {
		wg.Go(func() {
			for s := range work {
				sub := &Report{Kind: rep.Kind}
				err := c.runPages(ctx, RunRequest{Kind: req.Kind, Cursor: todo[s], Shards: []int{s}}, now, sub)
				rep.add(sub)
				mu.Lock()
				if sub.Next != "" || err != nil {
					left[s] = sub.Next
				}
				if err != nil {
					errs = append(errs, fmt.Errorf("shard %d: %w", s, err))
				}
				mu.Unlock()
			}
		})
	}
	for i, s := range order {
		if ctx.Err() != nil {
			mu.Lock()
			for _, t := range order[i:] {
				left[t] = todo[t]
			}
			mu.Unlock()
			break
		}
		work <- s
	}
	close(work)
	wg.Wait()
	if len(left) > 0 {
		rep.Next = encodeShardCursor(left)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return ctx.Err()
}

// encodeShardCursor is the cursor of a shard run: the shards still to do
// with their cursors.
func encodeShardCursor(left map[int]string) string {
	m := make(map[string]string, len(left))
	for s, cur := range left {
		m[strconv.Itoa(s)] = cur
	}
	b, _ := json.Marshal(m) // a map of strings always marshals
	return shardCursorPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// decodeShardCursor returns the shards a shard run has still to do, with
// their cursors: all of shards from their top for "". A cursor naming a
// shard outside shards is [ErrInvalidCursor].
func decodeShardCursor(token string, shards []int) (map[int]string, error) {
	todo := make(map[int]string, len(shards))
	if token == "" {
		for _, s := range shards {
			todo[s] = ""
		}
		return todo, nil
	}
	rest, ok := strings.CutPrefix(token, shardCursorPrefix)
	if !ok {
		return nil, fmt.Errorf("%w: not the cursor of a run over shards %v", ErrInvalidCursor, shards)
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	var m map[string]string
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: shard cursor: %v", ErrInvalidCursor, err)
	}
	for k, cur := range m {
		s, err := strconv.Atoi(k)
		if err != nil || !slices.Contains(shards, s) {
			return nil, fmt.Errorf("%w: shard %q is not one of %v", ErrInvalidCursor, k, shards)
		}
		todo[s] = cur
	}
	return todo, nil
}
