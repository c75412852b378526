// Package billingtest helps test code that uses package billing; hosts
// import it from their _test.go files. It has fakes for every port (a
// controllable [Clock], an in-memory [Locker], a scripted
// [Provider] implementing billing.PaymentProvider that honours idempotency
// keys like a real processor, a recording [EventRecorder] implementing
// billing.EventSink, recording fakes of the notifier's ports
// ([RecordingEnqueuer], [RecordingNotifier], [UserDirectory]; the legacy
// prenote step's are in package prenote/prenotetest), an
// in-memory [Accounts] twin of the single-table credits and access store,
// and [NewMemoryStore] and [NewMemorySingleTable], which fail the test on
// options package memory refuses)
// and the conformance suites every
// implementation of a port must pass ([TestRepository], [TestHistory],
// [TestLocker]; [TestRepositoryWith] and [TestHistoryWith] adapt the first
// two to a layout's user IDs, and [TestSingleTable] checks what the
// single-table layout adds).
//
// # Wiring
//
//	clock := billingtest.NewClock(time.Date(2024, 1, 31, 0, 0, 0, 0, time.UTC))
//	store := billingtest.NewMemoryStore(t, memory.Options{PageSize: 50}) // package memory
//	repo, hist := store.Repository(), store.History()
//	locker := billingtest.NewLocker(clock, time.Minute)
//	// hand them to the code under test, then
//	clock.Advance(24 * time.Hour)
//	billingtest.RequireHistoryMatchesPrimary(t, repo, hist, "user-1")
//
// # Months in a test
//
// A [TestClock] walks simulated days and runs the host's jobs on each, so
// a test of a year of billing needs no loop of its own:
//
//	clock := billingtest.NewTestClock(start)
//	collector, _ := billing.NewCollector(billing.Config{..., Clock: clock})
//	clock.RunCollector(collector) // scheduled, retry and pause runs, daily
//	clock.Daily("reminders", func(ctx context.Context, now time.Time) error { ... })
//	if err := clock.AdvanceMonths(ctx, 13); err != nil { ... }
//	got := clock.Totals(billing.RunScheduled).Collected
//
// # Conformance
//
// A storage implementation proves it behaves like DynamoDB by passing the
// suites with a factory that returns fresh, empty stores:
//
//	func TestMyRepository(t *testing.T) {
//		billingtest.TestRepository(t, func(t *testing.T, opts memory.Options) (billing.Repository, billing.History) {
//			return newMyStores(t, opts)
//		})
//	}
package billingtest
