package billing_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/memory"
)

var (
	cursorKeyA = bytes.Repeat([]byte("a"), billing.MinRunCursorKeyLen)
	cursorKeyB = bytes.Repeat([]byte("b"), billing.MinRunCursorKeyLen)
)

// newCursorEnv is a sharded in-memory store with due records of 24 users,
// read 2 pages of 3 at a time: a run takes several invocations.
func newCursorEnv(t *testing.T) *shardEnv {
	t.Helper()
	opts := memory.Options{PageSize: 3, StatusIndexMode: dynamostore.StatusIndexDue, DueShards: shardTestShards}
	return newShardEnv(t, billingtest.NewMemoryStore(t, opts).Repository(), 24)
}

// keyed is a collector of e signing run cursors with keys, as one Lambda
// invocation would make it.
func (e *shardEnv) keyed(t *testing.T, keys ...[]byte) *billing.Collector {
	t.Helper()
	return e.collector(t, func(cfg *billing.Config) { cfg.RunCursorKeys = keys })
}

// stateOf is the JSON state of a run cursor, as anyone reading the queue
// can split it from its check bytes.
func stateOf(t *testing.T, cursor string) []byte {
	t.Helper()
	tail, rest := sha256.Size, strings.TrimPrefix(cursor, "run2.")
	if r, ok := strings.CutPrefix(cursor, "run1."); ok {
		tail, rest = 8, r
	}
	raw, err := base64.RawURLEncoding.DecodeString(rest)
	require.NoError(t, err)
	require.Greater(t, len(raw), tail)
	js := raw[:len(raw)-tail]
	require.True(t, json.Valid(js), "the state is JSON")
	return js
}

// withAt is the state js with its instant moved.
func withAt(t *testing.T, js []byte, at time.Time) []byte {
	t.Helper()
	var st map[string]any
	require.NoError(t, json.Unmarshal(js, &st))
	require.Contains(t, st, "at")
	st["at"] = at.Format(time.RFC3339Nano)
	out, err := json.Marshal(st)
	require.NoError(t, err)
	return out
}

// TestRunCursorSignedContinuesAcrossCollectors: with RunCursorKeys, a run
// continued invocation after invocation, each on a Collector made afresh
// with the same key (as Lambda invocations on other containers are),
// collects every due record exactly once; its cursors are not unsigned
// ones, and a collector without the key refuses them.
func TestRunCursorSignedContinuesAcrossCollectors(t *testing.T) {
	e := newCursorEnv(t)
	req := billing.RunRequest{Kind: billing.RunScheduled}
	collected, invocations := 0, 0
	for {
		rep, err := e.keyed(t, bytes.Clone(cursorKeyA)).Run(t.Context(), req)
		require.NoError(t, err, "invocation %d", invocations+1)
		invocations++
		collected += rep.Collected
		if rep.Next == "" {
			break
		}
		require.False(t, strings.HasPrefix(rep.Next, "run1."), "a keyed collector's cursor is signed")
		if invocations == 1 {
			_, err := e.collector(t, nil).Run(t.Context(), billing.RunRequest{Kind: billing.RunScheduled, Cursor: rep.Next})
			require.ErrorIs(t, err, billing.ErrInvalidCursor, "a collector without the key cannot verify a signed cursor")
		}
		req.Cursor = rep.Next
	}
	assert.Greater(t, invocations, 2, "the run continues over several invocations")
	assert.Equal(t, len(e.due), collected)
	e.requireCollectedOnce(t)
}

// TestRunCursorForgedRefused: with RunCursorKeys set, a cursor whose
// instant was edited and whose check bytes were recomputed without the
// key — as the unkeyed checksum, or as a plain SHA-256 in the signed
// form — is refused, and so is one signed with another key or with a
// flipped byte; a refused invocation reads and charges nothing.
func TestRunCursorForgedRefused(t *testing.T) {
	e := newCursorEnv(t)
	c := e.keyed(t, cursorKeyA)
	rep, err := c.Run(t.Context(), billing.RunRequest{Kind: billing.RunScheduled})
	require.NoError(t, err)
	require.NotEmpty(t, rep.Next)
	charged := len(e.pay.Charges())
	require.Positive(t, charged)

	js := stateOf(t, rep.Next)
	edited := withAt(t, js, e.clock.Now().AddDate(1, 0, 0))
	sum := sha256.Sum256(edited)
	unkeyed := "run1." + base64.RawURLEncoding.EncodeToString(append(bytes.Clone(edited), sum[:8]...))
	hashed := "run2." + base64.RawURLEncoding.EncodeToString(append(bytes.Clone(edited), sum[:]...))
	// A real cursor of the same store and shards, from a collector with
	// another key.
	other := newCursorEnv(t)
	otherRep, err := other.keyed(t, cursorKeyB).Run(t.Context(), billing.RunRequest{Kind: billing.RunScheduled})
	require.NoError(t, err)
	require.NotEmpty(t, otherRep.Next)
	flipped := []byte(rep.Next)
	flipped[len(flipped)/2] ^= 1
	// Without keys the unkeyed forgery is read: the key is what stops it.
	_, err = e.collector(t, func(cfg *billing.Config) { cfg.PagesPerInvocation = 1 }).Run(t.Context(),
		billing.RunRequest{Kind: billing.RunScheduled, Cursor: unkeyed})
	require.NoError(t, err, "the forgery is a well-formed unkeyed cursor")
	charged = len(e.pay.Charges())

	for name, cursor := range map[string]string{
		"unkeyed checksum recomputed": unkeyed,
		"SHA-256 in the signed form":  hashed,
		"signed with another key":     otherRep.Next,
		"a byte flipped":              string(flipped),
		"the signature cut off":       rep.Next[:len(rep.Next)-10],
	} {
		t.Run(name, func(t *testing.T) {
			rep, err := c.Run(t.Context(), billing.RunRequest{Kind: billing.RunScheduled, Cursor: cursor})
			require.ErrorIs(t, err, billing.ErrInvalidCursor)
			assert.Zero(t, rep.Pages, "a refused cursor reads nothing")
			assert.Empty(t, rep.Next)
			assert.Len(t, e.pay.Charges(), charged, "a refused cursor charges nothing")
		})
	}
}

// TestRunCursorKeyRotation: a key is rotated by putting the new one first
// and keeping the old one after it: such a collector continues a run whose
// cursor the old key signed, and signs the continuation with the new key,
// which a collector with only the old key refuses and one with only the
// new key continues to the end. Every due record is collected once.
func TestRunCursorKeyRotation(t *testing.T) {
	e := newCursorEnv(t)
	req := billing.RunRequest{Kind: billing.RunScheduled}
	rep, err := e.keyed(t, cursorKeyA).Run(t.Context(), req)
	require.NoError(t, err)
	collected := rep.Collected
	req.Cursor = rep.Next
	require.NotEmpty(t, req.Cursor)

	_, err = e.keyed(t, cursorKeyB).Run(t.Context(), req)
	require.ErrorIs(t, err, billing.ErrInvalidCursor, "the old key's cursor, once the old key is dropped")

	rep, err = e.keyed(t, cursorKeyB, cursorKeyA).Run(t.Context(), req)
	require.NoError(t, err, "the old key verifies during the rotation")
	collected += rep.Collected
	req.Cursor = rep.Next
	require.NotEmpty(t, req.Cursor)
	_, err = e.keyed(t, cursorKeyA).Run(t.Context(), req)
	require.ErrorIs(t, err, billing.ErrInvalidCursor, "the continuation is signed with the new key")

	for req.Cursor != "" {
		rep, err = e.keyed(t, cursorKeyB).Run(t.Context(), req)
		require.NoError(t, err)
		collected += rep.Collected
		req.Cursor = rep.Next
	}
	assert.Equal(t, len(e.due), collected)
	e.requireCollectedOnce(t)
}

// TestRunCursorKeysConfig: a key shorter than MinRunCursorKeyLen is
// refused naming its place in the field; the collector keeps its own copy
// of the keys, so a host reusing the buffer does not break verification.
func TestRunCursorKeysConfig(t *testing.T) {
	e := newCursorEnv(t)
	for _, keys := range [][][]byte{{cursorKeyA, cursorKeyB[:billing.MinRunCursorKeyLen-1]}, {cursorKeyA, nil}} {
		_, err := billing.NewCollector(billing.Config{Repository: e.repo, Locker: e.lock, Provider: e.pay, RunCursorKeys: keys})
		require.ErrorContains(t, err, "Config.RunCursorKeys[1]")
	}
	key := bytes.Clone(cursorKeyA)
	c := e.keyed(t, key)
	clear(key)
	rep, err := c.Run(t.Context(), billing.RunRequest{Kind: billing.RunScheduled})
	require.NoError(t, err)
	require.NotEmpty(t, rep.Next)
	rep, err = e.keyed(t, cursorKeyA).Run(t.Context(), billing.RunRequest{Kind: billing.RunScheduled, Cursor: rep.Next})
	require.NoError(t, err, "signed with the key as configured, not as the buffer holds it now")
	assert.Positive(t, rep.Pages)
}
