package notice_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/storetest"
	"github.com/dynabill/billing/memory"
	"github.com/dynabill/billing/notice"
	"github.com/stretchr/testify/require"
)

// The paging acceptance: 2,500 due records read 358 per page are 7 pages;
// with 3 pages per invocation that is exactly 3 invocations (3 + 3 + 1
// pages), and every record is enqueued exactly once.
const (
	notifDueCount = 2500
	notifPageSize = 358
)

// notifNow is the clock of the first invocation: the window is 2024-03-14.
var notifNow = time.Date(2024, 3, 10, 12, 0, 0, 0, time.UTC)

// notifRecords returns the due records of the window starting at start and
// decoys the scheduler must not enqueue: SCHEDULED records the day before
// and the day after, and COMPLETED records inside the window. There are 5
// SCHEDULED decoys, so that in the legacy index mode (which reads every
// SCHEDULED record and filters on billing_date) the status holds 2,505
// records: still 7 pages of 358, the last one short.
func notifRecords(start time.Time) (due, decoys []billing.Period) {
	rec := func(user, id string, bd time.Time, st billing.Status) billing.Period {
		return billing.Period{
			UserID: user, SubscriptionID: id, BillingDate: bd, Status: st,
			Amount: billing.Cents(499), BillingPeriod: billing.BillingPeriod(bd), Term: billing.TermMonthly,
			ReceiptTierName: "Plus:v2", Process: billing.ProcessInitial,
			CreatedDate: bd.AddDate(0, -1, 0), LastRunDate: bd.AddDate(0, -1, 0),
		}
	}
	for i := range notifDueCount {
		// Spread over the whole day, including its first and last second.
		bd := start.Add(time.Duration(i) * (24*time.Hour - time.Second) / (notifDueCount - 1)).Truncate(time.Second)
		due = append(due, rec(fmt.Sprintf("user-%04d", i), fmt.Sprintf("sub-%04d", i), bd, billing.StatusScheduled))
	}
	for i, bd := range []time.Time{
		start.Add(-time.Second), start.Add(-time.Hour),
		start.Add(24 * time.Hour), start.Add(25 * time.Hour), start.Add(47 * time.Hour),
	} {
		decoys = append(decoys, rec(fmt.Sprintf("decoy-s-%d", i), fmt.Sprintf("decoy-sched-%d", i), bd, billing.StatusScheduled))
	}
	for i := range 10 {
		bd := start.Add(time.Duration(i) * time.Hour)
		decoys = append(decoys, rec(fmt.Sprintf("decoy-c-%d", i), fmt.Sprintf("decoy-done-%d", i), bd, billing.StatusCompleted))
	}
	return due, decoys
}

// testNotifierPaging seeds a repository (open returns it with the
// records written) and drives the scheduler like its Lambda:
// one invocation from the daily trigger's detail, then one per continuation
// message, each continuation serialized to JSON and back through the
// scheduler queue's handler. The clock passes midnight UTC between
// invocations, which must not move the window.
func testNotifierPaging(t *testing.T, open func(seed []billing.Period) billing.Repository) {
	ctx := context.Background()
	start := time.Date(2024, 3, 14, 0, 0, 0, 0, time.UTC)
	due, decoys := notifRecords(start)
	began := time.Now()
	repo := open(append(slices.Clone(due), decoys...))
	t.Logf("seeded %d records in %v", len(due)+len(decoys), time.Since(began).Round(time.Millisecond))

	clock := billingtest.NewClock(notifNow)
	queue := &billingtest.RecordingEnqueuer{}
	sched, err := notice.NewScheduler(notice.SchedulerConfig{
		Repository: repo, Enqueuer: queue, Clock: clock, PagesPerInvocation: 3,
	})
	require.NoError(t, err)

	began = time.Now()
	trigger, err := notice.ParseEvent([]byte(`{"status": "SCHEDULED"}`))
	require.NoError(t, err)
	res, err := sched.Run(ctx, trigger)
	require.NoError(t, err)
	pages := []int{res.Pages}
	enqueued := res.Enqueued
	for res.Continuation != nil {
		if len(pages) >= 10 {
			t.Fatalf("runaway: %d invocations", len(pages))
		}
		body, err := json.Marshal(res.Continuation)
		require.NoError(t, err)
		var fields map[string]any
		require.NoError(t, json.Unmarshal(body, &fields))
		if len(fields) != 3 || fields["date"] != "20240314" || fields["status"] != "SCHEDULED" ||
			fields["start_key"] == "" || fields["start_key"] == nil {
			t.Fatalf("continuation %d: want {date: 20240314, status: SCHEDULED, start_key: token}, got %s", len(pages), body)
		}
		clock.Advance(13 * time.Hour) // crosses midnight UTC
		res, err = sched.RunBatch(ctx, []string{string(body)})
		require.NoError(t, err)
		pages = append(pages, res.Pages)
		enqueued += res.Enqueued
	}
	t.Logf("3 invocations, pages %v, in %v", pages, time.Since(began).Round(time.Millisecond))

	if !slices.Equal(pages, []int{3, 3, 1}) {
		t.Fatalf("pages per invocation: got %v, want [3 3 1] (exactly 3 invocations)", pages)
	}
	if enqueued != notifDueCount {
		t.Errorf("Enqueued: got %d, want %d", enqueued, notifDueCount)
	}
	for i, b := range queue.Batches() {
		if len(b) < 1 || len(b) > 10 {
			t.Fatalf("batch %d has %d messages", i, len(b))
		}
	}
	seen := map[string]int{}
	for _, m := range queue.Messages(t) {
		seen[m.SubscriptionID]++
		if !m.BillingDate.Before(start.AddDate(0, 0, 1)) || m.BillingDate.Before(start) {
			t.Errorf("%s: billing date %v outside the window", m.SubscriptionID, m.BillingDate)
		}
	}
	for _, sub := range due {
		if n := seen[sub.SubscriptionID]; n != 1 {
			t.Errorf("%s enqueued %d times, want once", sub.SubscriptionID, n)
		}
	}
	for _, sub := range decoys {
		if n := seen[sub.SubscriptionID]; n != 0 {
			t.Errorf("decoy %s enqueued %d times", sub.SubscriptionID, n)
		}
	}
	if len(seen) != notifDueCount {
		t.Errorf("distinct records enqueued: got %d, want %d", len(seen), notifDueCount)
	}
}

func TestSchedulerPagingMemory(t *testing.T) {
	for _, mode := range []dynamostore.StatusIndexMode{dynamostore.StatusIndexLegacy, dynamostore.StatusIndexSorted} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			testNotifierPaging(t, func(seed []billing.Period) billing.Repository {
				repo := billingtest.NewMemoryStore(t, memory.Options{PageSize: notifPageSize, StatusIndexMode: mode}).Repository()
				_, err := repo.AddAll(context.Background(), seed)
				require.NoError(t, err)
				return repo
			})
		})
	}
}

func TestSchedulerPagingDynamoDB(t *testing.T) {
	for _, mode := range []dynamostore.StatusIndexMode{dynamostore.StatusIndexLegacy, dynamostore.StatusIndexSorted} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			testNotifierPaging(t, func(seed []billing.Period) billing.Repository {
				repo, _ := storetest.DynamoStoresSeeded(t, memory.Options{PageSize: notifPageSize, StatusIndexMode: mode}, seed)
				return repo
			})
		})
	}
}
