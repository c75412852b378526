package billing

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Locker hands out per-user billing locks, so that only one process at a
// time collects a user's subscriptions (a scheduled run and a webhook may
// fire together). [NewDynamoLocker] is the DynamoDB implementation;
// billingtest.NewLocker is an in-memory one for tests.
//
// # Recovery
//
// A lock is never held for ever by a holder that is gone. Its lease lasts one
// lease duration past its holder's last heartbeat; a holder that crashed, was
// frozen, lost its network or failed to release stops heartbeating, and any
// process (a fresh one included: a new Lambda invocation, a restarted server)
// can take the lock over within two lease durations of the last heartbeat.
// See [DynamoLocker] for how, and for the clock assumption it makes.
//
// # What a lease lock cannot promise
//
// A lock held as a lease is only as good as the holder's sense of time. A
// process can pause (a GC pause, a frozen Lambda, a slow network call) for
// longer than the lease after it last checked that it still holds the lock;
// meanwhile the lease expires, another process takes the lock, and when the
// first one wakes up it carries on as if it were still the holder. No lock
// client can prevent that: [Lease.Lost], [Lease.Deadline] and the
// [ErrLeaseLost] returned by [Lease.Release] only narrow the window. A holder
// checks Lost and Deadline right before each step that must not run twice
// (a charge, the write that records it).
//
// So the lock is an optimisation, not the guarantee. It keeps two processes
// from doing the same work at the same time, and the library fences every
// billing write instead: each write is conditional on the state the writer
// read (the record's status and last_run_date or version), so a writer whose
// lease was lost, or who read a stale index, gets a failed condition instead
// of overwriting newer state. A charge carries an idempotency key that stays
// the same across reruns, so a second holder replays the first one's charge
// instead of charging again.
type Locker interface {
	// Lock takes the billing lock of userID. When another holder has it,
	// Lock returns an error wrapping [ErrAlreadyLocked] at once, without
	// waiting: the caller skips the user and leaves its records untouched.
	// Other errors (a cancelled ctx, a storage failure) are returned as they
	// are, wrapped with the user ID; the caller does not hold the lock then
	// either, and a failed Lock leaves the user lockable again within two
	// lease durations at most.
	Lock(ctx context.Context, userID string) (Lease, error)
}

// Lease is a held billing lock. The implementation keeps it alive (by
// heartbeats) until Release; the holder watches Lost and Deadline while it
// works.
type Lease interface {
	// UserID returns the user whose billing is locked.
	UserID() string

	// Lost is closed when the lease is lost while held: its Deadline passed
	// without a heartbeat renewing it, another holder took it, or the Locker
	// was closed. The holder should stop as soon as it can; its conditional
	// writes fail anyway once someone else has changed the records. Lost is
	// never closed by a successful Release.
	Lost() <-chan struct{}

	// Deadline returns the local instant (on this process's clock, to be
	// compared with time.Now) after which the holder must assume the lease
	// lost unless a heartbeat renews it first. It moves forward on each
	// successful heartbeat; another holder takes the lock only some time
	// after it (see [DynamoLocker] for the margin and the clock assumption
	// behind it). Once Lost is closed, Deadline is
	// not after the moment it closed. Deadline is cheap: it reads no storage,
	// so a holder can call it right before every step that must be done under
	// the lock, together with a non-blocking look at Lost.
	Deadline() time.Time

	// Release gives the lock back. It returns an error wrapping
	// [ErrLeaseLost] when the lease was lost before it was released (Lost is
	// closed then): the holder must assume that someone else may have acted
	// on the user meanwhile. Release is idempotent: calling it again returns
	// nil, or again ErrLeaseLost.
	//
	// Other errors (ctx, storage) leave the lease unreleased, and Release may
	// be retried; but the lease is no longer renewed from the first Release
	// call on, whatever its outcome. A lease whose release failed therefore
	// runs out: Lost is closed at its Deadline, and another holder can take
	// the lock within two lease durations, even if Release is never retried.
	Release(ctx context.Context) error
}

// The legacy lock table's wire format.

// DefaultLockTable is the name of the lock table of the legacy layout.
const DefaultLockTable = "locks"

// Lease timing of [NewDynamoLocker] unless configured, as the legacy
// service ran it.
const (
	DefaultLeaseDuration   = 60 * time.Second
	DefaultHeartbeatPeriod = time.Second
)

// Attributes of the lock table. dynamolock owns them; the locker reads
// them to decide whether another holder's lease has expired, and to undo
// its own failed acquisitions.
const (
	lockAttrPartitionKey  = "PartitionKey"
	lockAttrRVN           = "recordVersionNumber"
	lockAttrLeaseDuration = "leaseDuration"
	lockAttrIsReleased    = "isReleased"
	lockAttrOwnerName     = "ownerName"
)

// lockKeyPrefix is the wire format of lock keys in the legacy locks table.
const lockKeyPrefix = "subscription-billing:user_id:"

// LockKey returns the key of userID's billing lock in the lock table:
// "subscription-billing:user_id:" followed by the user ID, as the legacy
// service wrote it.
func LockKey(userID string) string { return lockKeyPrefix + userID }

// LockTableDefinition returns the definition of a lock table named
// tableName: string hash key PartitionKey, no sort key, on-demand billing.
func LockTableDefinition(tableName string) *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{
		TableName: aws.String(tableName),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(lockAttrPartitionKey), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(lockAttrPartitionKey), KeyType: types.KeyTypeHash},
		},
		BillingMode: types.BillingModePayPerRequest,
	}
}

// lockData is the lock item's data: the acquisition time in Unix
// nanoseconds as decimal ASCII digits (e.g. "1706659200000000000"), the
// form strconv.FormatInt gives, which is how the legacy Go service most
// plausibly wrote its "Unix nanosecond timestamp (as bytes)". The service
// never reads it back; it is there for people inspecting the table.
func lockData(t time.Time) []byte { return strconv.AppendInt(nil, t.UnixNano(), 10) }

// LockerOption configures [NewDynamoLocker].
type LockerOption func(*lockerConfig)

type lockerConfig struct {
	table     string
	lease     time.Duration
	heartbeat time.Duration
	owner     string
	logger    *slog.Logger
	clock     Clock
}

// WithLockTable sets the lock table's name. Defaults to [DefaultLockTable].
func WithLockTable(name string) LockerOption { return func(c *lockerConfig) { c.table = name } }

// WithLeaseDuration sets how long a lease lasts without a heartbeat.
// Defaults to [DefaultLeaseDuration].
func WithLeaseDuration(d time.Duration) LockerOption {
	return func(c *lockerConfig) { c.lease = d }
}

// WithHeartbeatPeriod sets how often a held lease is renewed; it must be at
// most half the lease duration. Zero disables heartbeats: every lease is then
// lost at its [Lease.Deadline], a little less than one lease duration after
// it was taken (for work bounded by the lease, and for tests that simulate a
// stalled holder). Defaults to [DefaultHeartbeatPeriod].
func WithHeartbeatPeriod(d time.Duration) LockerOption {
	return func(c *lockerConfig) { c.heartbeat = d }
}

// WithLockOwner sets the owner name written to the locks, which must be
// unique to this locker (e.g. the Lambda request ID). Defaults to a random
// name.
func WithLockOwner(name string) LockerOption { return func(c *lockerConfig) { c.owner = name } }

// WithLockLogger sets the logger for lost leases, heartbeat failures and
// takeovers (dynamolock's own chatter goes at debug level). Defaults to nil:
// quiet.
func WithLockLogger(l *slog.Logger) LockerOption { return func(c *lockerConfig) { c.logger = l } }

// WithLockClock sets the clock of the acquisition time stored in the lock's
// data. Lease timing always uses the process's monotonic clock, and the
// expiry of another holder's lease the process's wall clock (see
// [DynamoLocker]); neither reads the data. Defaults to [SystemClock].
func WithLockClock(clk Clock) LockerOption { return func(c *lockerConfig) { c.clock = clk } }
