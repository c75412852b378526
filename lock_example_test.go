package billing_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
)

// A collector takes the user's lock, skips the user when someone else has
// it, checks right before each step that must not run twice that the lease
// is neither lost nor past its deadline, and reports a lost lease at
// release.
// In production the Locker is a [dynamostore.Locker]:
//
//	locker, err := billing.NewDynamoLocker(dynamodb.NewFromConfig(cfg))
//	...
//	defer locker.Close(ctx)
func ExampleLocker() {
	ctx := context.Background()
	clock := billingtest.NewClock(time.Date(2024, 1, 31, 0, 0, 0, 0, time.UTC))
	var locker billing.Locker = billingtest.NewLocker(clock, time.Minute)

	lease, err := locker.Lock(ctx, "u1")
	if err != nil {
		fmt.Println("lock:", err)
		return
	}
	// A webhook for the same user arrives meanwhile: it skips the user.
	if _, err := locker.Lock(ctx, "u1"); errors.Is(err, billing.ErrAlreadyLocked) {
		fmt.Println("webhook skips u1:", err)
	}

	select {
	case <-lease.Lost():
		fmt.Println("lease lost: stop before the next write")
	default:
		if time.Now().After(lease.Deadline()) {
			fmt.Println("lease ran out: stop before the next write")
			break
		}
		fmt.Println("collecting", lease.UserID()) // every write is conditional anyway
	}
	if err := lease.Release(ctx); errors.Is(err, billing.ErrLeaseLost) {
		fmt.Println("someone else may have acted on u1")
	} else if err != nil {
		fmt.Println("release:", err)
	}
	fmt.Println("released; next run may lock u1 again")
	// Output:
	// webhook skips u1: billing: locking user "u1": billing: user's billing is locked
	// collecting u1
	// released; next run may lock u1 again
}

// A holder that stops renewing its lease (here simulated with the in-memory
// locker's StopHeartbeat) loses it once the lease duration has passed: Lost
// is closed, another process can take the lock, and the old holder's
// Release reports ErrLeaseLost. Its conditional writes would fail too.
func ExampleLease_lost() {
	ctx := context.Background()
	clock := billingtest.NewClock(time.Date(2024, 1, 31, 0, 0, 0, 0, time.UTC))
	locker := billingtest.NewLocker(clock, time.Minute)

	lease, _ := locker.Lock(ctx, "u1")
	locker.StopHeartbeat(lease) // the holder pauses
	clock.Advance(time.Minute)

	next, err := locker.Lock(ctx, "u1")
	fmt.Println("another process takes u1:", err == nil)
	<-lease.Lost()
	fmt.Println("old holder notices: lease lost")
	fmt.Println(lease.Release(ctx))
	fmt.Println(next.Release(ctx))
	// Output:
	// another process takes u1: true
	// old holder notices: lease lost
	// billing: releasing lock of user "u1": billing: lock lease lost
	// <nil>
}
