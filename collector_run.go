package billing

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// A run owns its instant. Its kind, its "now" (the instant its status
// queries are bounded by), the store and shards it reads and how far it
// got travel in its cursor (Report.Next), so that an invocation that
// continues the run later — a second or a day later, on another host —
// reads exactly the ranges the first one started, and resumes where it
// stopped. A cursor of another kind, store or shard set is refused; an old
// one never is. With Config.RunCursorKeys the cursor is signed (HMAC-SHA256
// over its state), so only a cursor the engine made is read; without, it
// carries a checksum that catches corruption, not a forgery.
//
// A run reads its shards as chains of pages: one chain over all its
// shards when it works them one after the other (the store walks them in
// order), or one chain per shard when it works them at once
// ([Config.ShardConcurrency]). A fresh run starts at a shard that moves
// with the day (see firstShard), so a host that drops a run's continuation
// leaves different shards unread each day rather than the same ones for
// ever: with n shards, every shard is the first one read at least once in
// any n days in a row.

// runState is a run's cursor, decoded.
type runState struct {
	Kind   RunKind   `json:"kind"`
	At     time.Time `json:"at"`
	Store  string    `json:"store"`
	Shards []int     `json:"shards"`
	// Left are the chains not finished, in the order the run works them.
	Left []chain `json:"left"`
}

// chain is a sequence of pages of the run's queries over some shards: the
// query it is at (Phase, an index into runQueries) and the store's cursor
// in it ("" at its top).
type chain struct {
	Shards []int  `json:"shards"`
	Phase  int    `json:"phase,omitempty"`
	Cursor string `json:"cursor,omitempty"`
}

// Run cursor prefixes: an unkeyed cursor (its state and a checksum), and
// one signed with Config.RunCursorKeys.
const (
	runCursorPrefix       = "run1."
	signedRunCursorPrefix = "run2."
)

// runCursorMACLabel starts every signed message, so that a key a host
// also uses elsewhere cannot be made to sign a run cursor by another
// party's message (or the reverse).
const runCursorMACLabel = "dynabill run cursor v2\x00"

// runCursorKeys checks and copies Config.RunCursorKeys.
func runCursorKeys(keys [][]byte) ([][]byte, error) {
	var out [][]byte
	for i, k := range keys {
		if len(k) < MinRunCursorKeyLen {
			return nil, fmt.Errorf("billing: Config.RunCursorKeys[%d]: %d bytes, want at least %d", i, len(k), MinRunCursorKeyLen)
		}
		out = append(out, bytes.Clone(k))
	}
	return out, nil
}

// runCursorMAC is the HMAC-SHA256 of a cursor's state under key.
func runCursorMAC(key, js []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(runCursorMACLabel))
	m.Write(js)
	return m.Sum(nil)
}

func (c *Collector) run(ctx context.Context, req RunRequest) (*Report, error) {
	now := c.cfg.Clock.Now()
	rep := &Report{Kind: string(req.Kind), Started: now}
	defer func() { rep.Finished = c.cfg.Clock.Now() }()
	k := shardsOf(c.cfg.Repository)
	shards, err := shardList(req.Shards, k)
	if err != nil {
		return rep, err
	}
	st, err := c.runState(req, now, shards, k)
	if err != nil {
		return rep, err
	}
	queries, err := c.runQueries(req.Kind, st.At)
	if err != nil {
		return rep, err
	}
	for _, ch := range st.Left {
		if ch.Phase >= len(queries) {
			return rep, fmt.Errorf("%w: a chain at query %d of a %s run", ErrInvalidCursor, ch.Phase, req.Kind)
		}
	}
	if len(st.Left) > 1 && c.cfg.ShardConcurrency > 1 {
		err = c.runChainsAtOnce(ctx, st, queries, k, rep)
	} else {
		err = c.runChainsInTurn(ctx, st, queries, k, rep)
	}
	return rep, err
}

// runState decodes the run req continues, or starts a run at now over
// shards of a store with k shards.
func (c *Collector) runState(req RunRequest, now time.Time, shards []int, k int) (runState, error) {
	store := fmt.Sprintf("%T/%d", c.cfg.Repository, k)
	if req.Cursor != "" {
		return decodeRunCursor(req.Cursor, c.cfg.RunCursorKeys, req.Kind, store, shards)
	}
	st := runState{Kind: req.Kind, At: now.UTC(), Store: store, Shards: shards}
	first := firstShard(now, len(shards), c.cfg.PagesPerInvocation)
	order := append(slices.Clone(shards[first:]), shards[:first]...)
	if c.cfg.ShardConcurrency > 1 {
		for _, s := range order {
			st.Left = append(st.Left, chain{Shards: []int{s}})
		}
		return st, nil
	}
	// In turn: the store walks a chain's shards in ascending order, so the
	// rotated order is two ascending chains.
	for _, part := range [][]int{shards[first:], shards[:first]} {
		if len(part) > 0 {
			st.Left = append(st.Left, chain{Shards: slices.Clone(part)})
		}
	}
	return st, nil
}

// firstShard is the index, among a run's n shards, of the one a fresh run
// at now reads first: the day's number times rotationStep(pages, n),
// modulo n. The step is a unit modulo n (coprime with it), so any n days
// in a row start on n different shards: however large a backlog, a run
// that is never continued still reads every shard within n days.
func firstShard(now time.Time, n, pages int) int {
	if n <= 1 {
		return 0
	}
	day := now.Unix() / 86400
	if now.Unix() < 0 && now.Unix()%86400 != 0 {
		day-- // floor, for clocks before 1970
	}
	d := int(((day % int64(n)) + int64(n)) % int64(n))
	return d * rotationStep(pages, n) % n
}

// rotationSteps caches rotationStep by {pages, n}.
var rotationSteps sync.Map

// rotationStep is the step of firstShard for a run of pages pages over n
// shards (n at least 2): of the units modulo n, the one with which days
// that each read pages shards from their first one (a run that finds at
// most a page in each) read every shard soonest, the smallest on a tie.
// That is within a few days of ceil(n/pages) — the pace a step of pages
// itself keeps, which is no unit when pages and n share a factor (with
// 32 shards and 10 pages it would start only on even shards).
func rotationStep(pages, n int) int {
	if pages >= n {
		return 1
	}
	key := [2]int{pages, n}
	if s, ok := rotationSteps.Load(key); ok {
		return s.(int)
	}
	best, step := n+1, 1
	seen := make([]bool, n)
	for s := 1; s < n; s++ {
		if gcd(s, n) != 1 {
			continue
		}
		clear(seen)
		left, days := n, 0
		for ; left > 0 && days < best; days++ {
			for j := range pages {
				if i := (days*s + j) % n; !seen[i] {
					seen[i] = true
					left--
				}
			}
		}
		if left == 0 && days < best {
			best, step = days, s
		}
	}
	rotationSteps.Store(key, step)
	return step
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// runQueries returns the status queries a run of kind at reads, one after
// the other: its records (see runQuery); for the retry run also
// ACH debits past their settlement deadline, and ERROR records older than
// its window — only records whose attempt is in flight (they cannot be
// closed before it is resolved) or that missed being marked STALE are
// there, and the run resolves or closes them.
func (c *Collector) runQueries(kind RunKind, at time.Time) ([]StatusQuery, error) {
	q, err := c.runQuery(kind, at)
	if err != nil {
		return nil, err
	}
	if kind != RunRetry {
		return []StatusQuery{q}, nil
	}
	return []StatusQuery{q,
		{Status: StatusACHSent, Before: at.Add(-c.cfg.ACHSettlementDeadline)},
		{Status: StatusError, Before: q.After.Truncate(time.Second).Add(time.Second)},
	}, nil
}

// runChainsInTurn works the chains of st one after the other, reading at
// most PagesPerInvocation pages in all.
func (c *Collector) runChainsInTurn(ctx context.Context, st runState, queries []StatusQuery, k int, rep *Report) error {
	pages := c.cfg.PagesPerInvocation
	for len(st.Left) > 0 && pages > 0 && ctx.Err() == nil {
		ch := &st.Left[0]
		done, err := c.runChain(ctx, st.Kind, ch, queries, k, &pages, rep)
		if err != nil {
			rep.Next = st.encode(c.cfg.RunCursorKeys)
			return err
		}
		if done {
			st.Left = st.Left[1:]
		}
	}
	if len(st.Left) > 0 {
		rep.Next = st.encode(c.cfg.RunCursorKeys)
	}
	return ctx.Err()
}

// runChainsAtOnce works the chains of st ShardConcurrency at a time, each
// for up to PagesPerInvocation pages, with its own share of the report.
func (c *Collector) runChainsAtOnce(ctx context.Context, st runState, queries []StatusQuery, k int, rep *Report) error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		work = make(chan int)
		left = make([]bool, len(st.Left))
	)
	for range min(c.cfg.ShardConcurrency, len(st.Left)) {
		wg.Go(func() {
			for i := range work {
				sub := &Report{Kind: rep.Kind}
				pages := c.cfg.PagesPerInvocation
				done, err := c.runChain(ctx, st.Kind, &st.Left[i], queries, k, &pages, sub)
				rep.add(sub)
				mu.Lock()
				left[i] = !done || err != nil
				if err != nil {
					errs = append(errs, fmt.Errorf("shards %v: %w", st.Left[i].Shards, err))
				}
				mu.Unlock()
			}
		})
	}
	for i := range st.Left {
		if ctx.Err() != nil {
			for j := i; j < len(st.Left); j++ {
				left[j] = true
			}
			break
		}
		work <- i
	}
	close(work)
	wg.Wait()
	var rest []chain
	for i, ch := range st.Left {
		if left[i] {
			rest = append(rest, ch)
		}
	}
	if st.Left = rest; len(rest) > 0 {
		rep.Next = st.encode(c.cfg.RunCursorKeys)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return ctx.Err()
}

// runChain reads ch's pages, while *pages allows, and handles their
// records; ch is left where the next page starts. done reports that the
// chain has no page left. After a failed page read, or a page whose
// handling ctx cut short, ch is where it was before that page.
func (c *Collector) runChain(ctx context.Context, kind RunKind, ch *chain, queries []StatusQuery, k int, pages *int, rep *Report) (done bool, err error) {
	for *pages > 0 {
		q := queries[ch.Phase]
		if len(ch.Shards) < k {
			q.Shards = ch.Shards // a chain over every shard reads them as the store's own query
		}
		q.Cursor = ch.Cursor
		p, err := c.cfg.Repository.QueryStatus(ctx, q)
		if err != nil {
			return false, fmt.Errorf("billing: %s run: page %d: %w", kind, rep.Pages+1, err)
		}
		*pages--
		rep.Pages++
		rep.Scanned += p.Scanned
		rep.Invalid += len(p.Invalid)
		for _, bad := range p.Invalid {
			c.invalidRecord(ctx, string(kind), "", bad)
		}
		c.handlePage(ctx, kind, p.Items, rep)
		if ctx.Err() != nil {
			// The page may be half handled: the continuation reads it
			// again (its handled records are no longer eligible), even
			// when it was the chain's last.
			return false, nil
		}
		if ch.Cursor = p.Next; ch.Cursor == "" {
			if ch.Phase++; ch.Phase == len(queries) {
				return true, nil
			}
		}
	}
	return false, nil
}

// encode is the run's cursor: its state as JSON, base64url, with an
// HMAC-SHA256 under keys[0] when there are keys, else with a checksum.
func (st runState) encode(keys [][]byte) string {
	js, _ := json.Marshal(st) // plain fields always marshal
	if len(keys) > 0 {
		return signedRunCursorPrefix + base64.RawURLEncoding.EncodeToString(append(js, runCursorMAC(keys[0], js)...))
	}
	sum := sha256.Sum256(js)
	return runCursorPrefix + base64.RawURLEncoding.EncodeToString(append(js, sum[:8]...))
}

// maxRunCursor bounds the cursors decodeRunCursor reads.
const maxRunCursor = 64 << 10

// decodeRunCursor decodes the cursor of a run of kind over shards of store,
// refusing one of another run as [ErrInvalidCursor]. With keys, only a
// cursor signed by one of them is read; without, only an unkeyed one.
func decodeRunCursor(token string, keys [][]byte, kind RunKind, store string, shards []int) (runState, error) {
	bad := func(why string, args ...any) (runState, error) {
		return runState{}, fmt.Errorf("%w: %s", ErrInvalidCursor, fmt.Sprintf(why, args...))
	}
	if len(token) > maxRunCursor {
		return bad("not the cursor of a run (Report.Next)")
	}
	var js []byte
	switch unkeyed, signed := strings.HasPrefix(token, runCursorPrefix), strings.HasPrefix(token, signedRunCursorPrefix); {
	case unkeyed && len(keys) > 0:
		return bad("an unsigned cursor, and Config.RunCursorKeys is set (forged, or of a run started before the keys were)")
	case signed && len(keys) == 0:
		return bad("a signed cursor, and Config.RunCursorKeys is not set")
	case unkeyed:
		raw, err := base64.RawURLEncoding.DecodeString(token[len(runCursorPrefix):])
		if err != nil || len(raw) < 8 {
			return bad("not base64url")
		}
		var sum []byte
		js, sum = raw[:len(raw)-8], raw[len(raw)-8:]
		if want := sha256.Sum256(js); !bytes.Equal(sum, want[:8]) {
			return bad("checksum mismatch (corrupted or edited)")
		}
	case signed:
		raw, err := base64.RawURLEncoding.DecodeString(token[len(signedRunCursorPrefix):])
		if err != nil || len(raw) < sha256.Size {
			return bad("not base64url")
		}
		var mac []byte
		js, mac = raw[:len(raw)-sha256.Size], raw[len(raw)-sha256.Size:]
		if !slices.ContainsFunc(keys, func(k []byte) bool { return hmac.Equal(mac, runCursorMAC(k, js)) }) {
			return bad("signature mismatch (edited, corrupted, or signed with a key not in Config.RunCursorKeys)")
		}
	default:
		return bad("not the cursor of a run (Report.Next)")
	}
	var st runState
	if err := json.Unmarshal(js, &st); err != nil {
		return bad("%v", err)
	}
	switch {
	case st.Kind != kind:
		return bad("a %s run's cursor given to a %s run", st.Kind, kind)
	case st.Store != store:
		return bad("a cursor of store %s given to store %s", st.Store, store)
	case !slices.Equal(st.Shards, shards):
		return bad("a cursor of a run over shards %v given to a run over shards %v", st.Shards, shards)
	case st.At.IsZero():
		return bad("no instant")
	}
	for _, ch := range st.Left {
		if len(ch.Shards) == 0 || ch.Phase < 0 || ch.Phase > 2 {
			return bad("a chain of shards %v at query %d", ch.Shards, ch.Phase)
		}
		for _, s := range ch.Shards {
			if !slices.Contains(shards, s) {
				return bad("shard %d is not one of the run's %v", s, shards)
			}
		}
	}
	return st, nil
}
