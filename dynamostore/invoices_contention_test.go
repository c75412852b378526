package dynamostore_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/internal/dynamotest"
	"github.com/dynabill/billing/internal/storetest"
)

// TestInvoicesContention has 8 finalizers, each with a store value (and
// client) of its own as 8 collectors would, finalize the drafts of several
// accounts at once: in one host-wide sequence, then in each account's own.
// Each draft is finalized by two of them at once. The numbers must be
// exactly 1..N per sequence, none twice. It reports the calls and WCU per
// finalization (two Finalize calls of each draft). The test command finalizes 24 invoices;
// the long step 500 (about a minute each on the local server).
func TestInvoicesContention(t *testing.T) {
	n := 24
	if dynamotest.LongTests() {
		n = 500
	}
	const finalizers, accounts = 8, 10
	for _, layout := range []struct {
		name   string
		legacy bool
	}{{"SingleTable", false}, {"Legacy", true}} {
		for _, shared := range []bool{true, false} {
			name := layout.name + map[bool]string{true: "/HostSequence", false: "/AccountSequences"}[shared]
			t.Run(name, func(t *testing.T) {
				client, newStore := storetest.InvoiceTables(t, layout.legacy)
				seed, _ := newStore(t, client)
				users := make([]string, accounts)
				for i := range users {
					users[i] = fmt.Sprintf("acct%02d", i)
				}
				ids := make([]string, n)
				for i := range n {
					inv := billingtest.NewTestInvoice(users[i%accounts], fmt.Sprintf("p%04d", i), i)
					if shared {
						inv.Sequence = "HOST"
					}
					d, err := seed.CreateDraft(t.Context(), inv)
					require.NoError(t, err)
					ids[i] = d.ID
				}
				var wg sync.WaitGroup
				errs := make([]error, finalizers)
				calls, wcu := 0, 0.0
				var mu sync.Mutex
				start := time.Now()
				for g := range finalizers {
					s, w := newStore(t, client)
					wg.Go(func() {
						// Finalizer g takes every finalizers-th draft, and so
						// does finalizer g+1 one step behind: at any moment
						// the 8 hold drafts of the same sequences, and each
						// draft is finalized twice at once (a repeat racing
						// the first, as a rerun may).
						for i := g; i < n; i += finalizers {
							for _, j := range []int{i, i - 1} {
								if j < 0 || j/finalizers != i/finalizers {
									continue // g's partner is finalizer g-1 in g's own round
								}
								if _, err := s.Finalize(t.Context(), ids[j], time.Now()); err != nil {
									errs[g] = err
									return
								}
							}
						}
						mu.Lock()
						calls, wcu = calls+w.TotalCalls(), wcu+w.WriteCapacity()
						mu.Unlock()
					})
				}
				wg.Wait()
				for _, err := range errs {
					require.NoError(t, err)
				}
				took := time.Since(start)
				if shared {
					billingtest.RequireGaplessInvoices(t, seed, users, "HOST", n)
				} else {
					for _, u := range users {
						billingtest.RequireGaplessInvoices(t, seed, []string{u}, "", n/accounts+map[bool]int{true: 1}[slicesIndex(users, u) < n%accounts])
					}
				}
				t.Logf("%d finalizations by %d finalizers in %v (%.0f/s on the local server): %.2f calls, %.2f WCU each",
					n, finalizers, took.Round(time.Millisecond), float64(n)/took.Seconds(), float64(calls)/float64(n), wcu/float64(n))
			})
		}
	}
}

func slicesIndex(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}
