package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"github.com/dynabill/billing/internal/storeconf"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"cirello.io/dynamolock/v2"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
)

// DefaultLockTable is the name of the lock table of the legacy layout.
const DefaultLockTable = "locks"

// DefaultLeaseDuration is the lease of [NewLocker] unless configured, as
// the legacy service ran it. Heartbeats default to a third of the lease
// (see [WithHeartbeatPeriod]).
const DefaultLeaseDuration = storeconf.DefaultLeaseDuration

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

// lockKey returns the key of userID's billing lock in the lock table:
// "subscription-billing:user_id:" followed by the user ID, as the legacy
// service wrote it, so both take the same lock.
func lockKey(userID string) string { return lockKeyPrefix + userID }

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

// LockerOption configures [NewLocker].
type LockerOption func(*lockerConfig)

type lockerConfig struct {
	table     string
	lease     time.Duration
	heartbeat time.Duration
	beatSet   bool // heartbeat set by WithHeartbeatPeriod
	owner     string
	logger    *slog.Logger
	clock     billing.Clock
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
// lost at its [billing.Lease.Deadline], a little less than one lease duration after
// it was taken (for work bounded by the lease, and for tests that simulate a
// stalled holder). Defaults to a third of the lease duration (20 s at the
// default lease): a lease then survives a failed heartbeat, and a held
// lock costs one write per third of a lease rather than one a second (the
// legacy service's rate; other holders of the same table read no
// heartbeat rate from the items, only their record versions).
func WithHeartbeatPeriod(d time.Duration) LockerOption {
	return func(c *lockerConfig) { c.heartbeat, c.beatSet = d, true }
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
// [Locker]); neither reads the data. Defaults to [billing.SystemClock].
func WithLockClock(clk billing.Clock) LockerOption { return func(c *lockerConfig) { c.clock = clk } }

// maxObservations bounds the memory a Locker spends on remembering
// other holders' record versions (see [Locker]).
const maxObservations = 4096

// Locker is the [Locker] on a dynamolock (cirello.io/dynamolock/v2)
// table, compatible with the legacy service's locks: key
// "subscription-billing:user_id:" and the user ID, data the acquisition time, lease 60 s (renewed every 20 s by default),
// fail-if-locked, replace-data. Release marks the lock item released
// rather than deleting it.
//
// Each lease has one goroutine that sends its heartbeats and closes
// [billing.Lease.Lost] when a heartbeat finds the lock taken over, and a timer that
// closes it at [billing.Lease.Deadline]: the start of the last successful heartbeat
// (or of the acquisition) plus nine tenths of the lease duration. The
// goroutine ends on Release or [Locker.Close]; dynamolock's own
// heartbeat loop is not used.
//
// # Taking over an abandoned lock
//
// Lock never waits: it takes a free or released lock, takes over an
// expired one, and otherwise returns [billing.ErrAlreadyLocked] at once. A lock is
// expired when either of two things shows that its holder stopped
// heartbeating:
//
//   - Its heartbeat time is older than its lease duration plus a quarter of
//     it. Every write dynamolock v2.1.0 makes to a lock item (the
//     acquisition and each heartbeat) gives it a new record version made of
//     the writer's wall-clock time in Unix nanoseconds, a colon and random
//     letters; that time is the holder's last heartbeat, readable by any
//     process from the one read Lock makes anyway. So any Locker, a
//     fresh one too, takes over the lock at its first Lock call from 1.25
//     lease durations after the holder's last heartbeat on.
//   - This Locker saw the same record version at least the holder's
//     lease duration ago on its own monotonic clock (dynamolock's own rule,
//     which trusts no other clock). It is the only rule for record versions
//     without a time (written by dynamolock before v2.1.0), which are
//     therefore taken over only by a long-lived locker that sees them twice.
//
// The heartbeat time is not taken from the item's data: the data is the
// acquisition time, which no holder (the legacy service, this locker)
// rewrites on heartbeats, so a live holder would look abandoned a lease
// after it took the lock.
//
// The first rule assumes that the wall clocks of all processes sharing the
// lock table (NTP-synchronised hosts, Lambda) differ by less than a quarter
// of the lease duration (15 s at the default 60 s lease). The old holder's
// [billing.Lease.Deadline] comes 0.9 lease durations after the start of its last
// heartbeat, so with clocks in step it has 0.35 lease durations (21 s by
// default) between its Deadline and the earliest takeover, and still a
// tenth of a lease with the largest tolerated skew. A taker whose clock runs
// ahead by more than the margin can take a lock whose holder is alive; the
// conditional billing writes (see [Locker]) still keep that from doing harm.
// The second rule needs no clock but the taker's own: the holder's Deadline
// is at least a tenth of a lease before it.
//
// Either way the takeover is a conditional delete of the expired record
// version followed by an ordinary acquisition, so of several lockers that
// judge the same lock expired only one gets it, and a holder whose heartbeat
// lands first keeps it.
//
// # Failures
//
// An acquisition write that fails with an outcome the locker cannot know
// (a timeout after DynamoDB applied it) is undone at once: the locker
// deletes the item on the condition that it still has the record version
// and owner name that write carried. If that fails too, the item is an
// abandoned lock like a crashed holder's and is taken over as above. A
// lease whose heartbeats or whose Release fail is not renewed; see
// [billing.Lease.Release].
//
// # Wire format and costs
//
// Lock items carry the attributes dynamolock v2.1.0 writes: PartitionKey,
// data, ownerName, leaseDuration (e.g. "1m0s"), recordVersionNumber, and
// isReleased once released; no TTL attribute. Costs: a Lock of a held user
// is one consistent GetItem, of a free one a GetItem and a conditional
// PutItem, a takeover adds a conditional DeleteItem, a GetItem and a
// PutItem; each held lease writes one UpdateItem per heartbeat period.
// Locks are not reentrant: a second Lock of the same user fails.
//
// A Locker is safe for concurrent use. Close it to stop heartbeats.
type Locker struct {
	cfg    lockerConfig
	client API
	dl     *dynamolock.Client

	mu       sync.Mutex
	closed   bool
	inflight sync.WaitGroup
	leases   map[*dynamoLease]struct{}
	seen     map[string]observation // lock key → record version seen held
}

var _ billing.Locker = (*Locker)(nil)

type observation struct {
	rvn string
	at  time.Time // when the version was first seen, monotonic
}

// errLockerClosed is returned by Lock after Close.
var errLockerClosed = errors.New("billing: locker closed")

// NewLocker returns a locker on the lock table reached through client.
// It validates the options and returns an error naming the bad one.
func NewLocker(client API, opts ...LockerOption) (*Locker, error) {
	cfg := lockerConfig{
		table: DefaultLockTable,
		lease: DefaultLeaseDuration,
		clock: billing.SystemClock{},
	}
	for _, o := range opts {
		o(&cfg)
	}
	if !cfg.beatSet {
		cfg.heartbeat = cfg.lease / 3
	}
	switch {
	case client == nil:
		return nil, errors.New("billing: NewDynamoLocker: client is nil")
	case cfg.table == "":
		return nil, errors.New("billing: NewDynamoLocker: WithLockTable: empty table name")
	case cfg.lease <= 0:
		return nil, fmt.Errorf("billing: NewDynamoLocker: WithLeaseDuration(%v): must be positive", cfg.lease)
	case cfg.heartbeat < 0 || cfg.heartbeat > cfg.lease/2:
		return nil, fmt.Errorf("billing: NewDynamoLocker: WithHeartbeatPeriod(%v): must be between 0 and half the lease duration (%v)", cfg.heartbeat, cfg.lease)
	case cfg.clock == nil:
		return nil, errors.New("billing: NewDynamoLocker: WithLockClock: nil clock")
	}
	dlOpts := []dynamolock.ClientOption{
		dynamolock.WithPartitionKeyName(lockAttrPartitionKey),
		dynamolock.WithLeaseDuration(cfg.lease),
		dynamolock.DisableHeartbeat(), // each lease heartbeats itself, see Locker
	}
	if cfg.owner != "" {
		dlOpts = append(dlOpts, dynamolock.WithOwnerName(cfg.owner))
	}
	if cfg.logger != nil {
		dlOpts = append(dlOpts, dynamolock.WithContextLogger(slogAdapter{cfg.logger}))
	}
	dl, err := dynamolock.New(captureClient{client}, cfg.table, dlOpts...)
	if err != nil {
		return nil, fmt.Errorf("billing: NewDynamoLocker: %w", err)
	}
	return &Locker{
		cfg:    cfg,
		client: client,
		dl:     dl,
		leases: make(map[*dynamoLease]struct{}),
		seen:   make(map[string]observation),
	}, nil
}

// Lock implements [Locker]. See [Locker] for when an expired lease of
// another holder is taken over.
func (l *Locker) Lock(ctx context.Context, userID string) (billing.Lease, error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, fmt.Errorf("billing: locking user %q: %w", userID, errLockerClosed)
	}
	l.inflight.Add(1)
	l.mu.Unlock()
	defer l.inflight.Done()

	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("billing: locking user %q: %w", userID, err)
	}
	key := lockKey(userID)
	for attempt := 0; ; attempt++ {
		var read lockRead
		start := time.Now()
		lock, err := l.dl.AcquireLockWithContext(context.WithValue(ctx, lockReadKey{}, &read), key,
			dynamolock.WithData(lockData(l.cfg.clock.Now())),
			dynamolock.ReplaceData(),
			dynamolock.FailIfLocked(),
		)
		if err == nil {
			return l.startLease(userID, key, lock, start), nil
		}
		if read.putFailed {
			l.undoAcquire(ctx, userID, key, read.putRVN, read.putOwner)
		}
		if errors.Is(err, errLostRace) {
			return nil, fmt.Errorf("billing: locking user %q: %w", userID, billing.ErrAlreadyLocked)
		}
		if !errors.As(err, new(*dynamolock.LockNotGrantedError)) {
			return nil, fmt.Errorf("billing: locking user %q: %w", userID, err)
		}
		if attempt > 0 {
			return nil, fmt.Errorf("billing: locking user %q: %w", userID, billing.ErrAlreadyLocked)
		}
		retry, err := l.takeOverExpired(ctx, userID, key, read)
		if err != nil {
			return nil, fmt.Errorf("billing: locking user %q: %w", userID, err)
		}
		if !retry {
			return nil, fmt.Errorf("billing: locking user %q: %w", userID, billing.ErrAlreadyLocked)
		}
	}
}

// undoAcquire deletes the lock item that the acquisition write of a failed
// Lock may have stored although it returned an error, on the condition that
// the item still has the record version and owner name of that write: it
// removes nothing else, and nothing if the write was not applied. It runs
// even when ctx is done (a timeout is the typical ambiguous outcome). When it
// fails, the item is left to be taken over like an abandoned lock.
func (l *Locker) undoAcquire(ctx context.Context, userID, key, rvn, owner string) {
	if rvn == "" || owner == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.lease/2)
	defer cancel()
	err := l.deleteLockItem(ctx, key, expression.And(
		expression.Name(lockAttrRVN).Equal(exprValue(rvn)),
		expression.Name(lockAttrOwnerName).Equal(exprValue(owner)),
	))
	switch {
	case err == nil:
		l.log(slog.LevelWarn, "billing: undid a failed billing lock acquisition", userID,
			slog.String("record_version", rvn))
	case errors.As(err, new(*types.ConditionalCheckFailedException)):
		// The write was not applied, or someone took the lock since.
	default:
		l.log(slog.LevelWarn, "billing: could not undo a failed billing lock acquisition; it expires with its lease", userID,
			slog.String("record_version", rvn), slog.String("error", err.Error()))
	}
}

// deleteLockItem deletes key's lock item on cond.
func (l *Locker) deleteLockItem(ctx context.Context, key string, cond expression.ConditionBuilder) error {
	expr, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return err
	}
	_, err = l.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 aws.String(l.cfg.table),
		Key:                       map[string]types.AttributeValue{lockAttrPartitionKey: &types.AttributeValueMemberS{Value: key}},
		ConditionExpression:       expr.Condition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	})
	return err
}

// lockRead is what dynamolock's last read of a lock item said; captureClient
// records it for a Lock call, so that Lock need not read the item again.
type lockRead struct {
	done     bool // a read succeeded
	found    bool
	released bool
	rvn      string
	lease    string

	// The acquisition write: the record version and owner name of the item
	// it tried to store, and whether it failed other than on its condition
	// (so it may or may not have been applied).
	putRVN    string
	putOwner  string
	putFailed bool
}

type lockReadKey struct{}

// captureClient is the client handed to dynamolock. For the calls of a
// Lock, whose context carries a *lockRead (heartbeats and releases do not):
//
//   - GetItem records the item's lock attributes there. dynamolock modifies
//     the item map afterwards, so the values are copied out at once.
//   - A PutItem (the conditional write that takes the lock) that fails its
//     condition returns errLostRace: another holder took the lock since it
//     was read. dynamolock would instead sleep and read the item again only
//     to report it locked. A PutItem that fails otherwise is recorded, so
//     that Lock can undo it.
type captureClient struct{ API }

// errLostRace must not wrap the ConditionalCheckFailedException, or
// dynamolock would recognise it and retry.
var errLostRace = errors.New("lost the race for a free lock")

func (c captureClient) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	out, err := c.API.PutItem(ctx, in, optFns...)
	r, ok := ctx.Value(lockReadKey{}).(*lockRead)
	switch {
	case !ok || err == nil:
	case errors.As(err, new(*types.ConditionalCheckFailedException)):
		return out, errLostRace
	default:
		r.putRVN = stringOf(in.Item[lockAttrRVN])
		r.putOwner = stringOf(in.Item[lockAttrOwnerName])
		r.putFailed = true
	}
	return out, err
}

func (c captureClient) GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	out, err := c.API.GetItem(ctx, in, optFns...)
	if r, ok := ctx.Value(lockReadKey{}).(*lockRead); ok && err == nil {
		_, released := out.Item[lockAttrIsReleased]
		r.done = true
		r.found = out.Item != nil
		r.released = released
		r.rvn = stringOf(out.Item[lockAttrRVN])
		r.lease = stringOf(out.Item[lockAttrLeaseDuration])
	}
	return out, err
}

// takeOverExpired decides what to do about a held lock, given dynamolock's
// last read of its item (read again if there was none). It reports true
// when the lock can be tried again: the item is gone or released, or it is
// expired (see [Locker]) and this locker has deleted it on the
// condition that its record version is still the same.
func (l *Locker) takeOverExpired(ctx context.Context, userID, key string, read lockRead) (bool, error) {
	if !read.done {
		// No captured read (dynamolock did not get to read): read it here.
		cc := captureClient{l.client}
		_, err := cc.GetItem(context.WithValue(ctx, lockReadKey{}, &read), &dynamodb.GetItemInput{
			TableName:      aws.String(l.cfg.table),
			Key:            map[string]types.AttributeValue{lockAttrPartitionKey: &types.AttributeValueMemberS{Value: key}},
			ConsistentRead: aws.Bool(true),
		})
		if err != nil {
			return false, err
		}
	}
	if !read.found || read.released {
		return true, nil
	}
	lease, err := time.ParseDuration(read.lease)
	if err != nil || lease <= 0 {
		lease = l.cfg.lease
	}
	now := time.Now()
	beat, stamped := heartbeatTime(read.rvn)
	rule := "heartbeat time"
	if !stamped || !now.After(beat.Add(lease+skewMargin(lease))) {
		rule = "seen unchanged for a lease"
		l.mu.Lock()
		seen, ok := l.seen[key]
		if !ok || seen.rvn != read.rvn {
			l.observe(key, observation{rvn: read.rvn, at: now})
			l.mu.Unlock()
			return false, nil
		}
		l.mu.Unlock()
		if now.Sub(seen.at) <= lease {
			return false, nil
		}
	}
	err = l.deleteLockItem(ctx, key, expression.Name(lockAttrRVN).Equal(exprValue(read.rvn)))
	if errors.As(err, new(*types.ConditionalCheckFailedException)) {
		return false, nil // renewed or taken meanwhile
	}
	if err != nil {
		return false, err
	}
	l.mu.Lock()
	delete(l.seen, key)
	l.mu.Unlock()
	attrs := []slog.Attr{slog.String("record_version", read.rvn), slog.Duration("lease", lease), slog.String("rule", rule)}
	if stamped {
		attrs = append(attrs, slog.Duration("since_heartbeat", now.Sub(beat)))
	}
	l.log(slog.LevelWarn, "billing: took over an expired billing lock", userID, attrs...)
	return true, nil
}

// skewMargin is how much later than the lease duration after a lock's
// heartbeat time a locker takes it over: the largest difference between the
// wall clocks of two lockers that [Locker] tolerates.
func skewMargin(lease time.Duration) time.Duration { return lease / 4 }

// heartbeatTime returns the wall-clock time a lock's record version was
// made at: dynamolock v2.1.0 makes them of the writer's time in Unix
// nanoseconds in decimal, a colon and random letters. ok is false for record
// versions of any other form (dynamolock before v2.1.0 used random letters
// alone).
func heartbeatTime(rvn string) (t time.Time, ok bool) {
	digits, rest, found := strings.Cut(rvn, ":")
	if !found || rest == "" || digits == "" || strings.Trim(digits, "0123456789") != "" {
		return time.Time{}, false
	}
	ns, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || ns <= 0 {
		return time.Time{}, false
	}
	return time.Unix(0, ns), true
}

// observe records o; l.mu is held. When the map is full it forgets the
// versions seen more than two lease durations ago (only liveness suffers),
// and everything if that is not enough.
func (l *Locker) observe(key string, o observation) {
	if len(l.seen) >= maxObservations {
		for k, v := range l.seen {
			if o.at.Sub(v.at) > 2*l.cfg.lease {
				delete(l.seen, k)
			}
		}
		if len(l.seen) >= maxObservations {
			clear(l.seen)
		}
	}
	l.seen[key] = o
}

func (l *Locker) startLease(userID, key string, lock *dynamolock.Lock, start time.Time) *dynamoLease {
	s := &dynamoLease{
		locker: l,
		lock:   lock,
		userID: userID,
		lost:   make(chan struct{}),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	l.mu.Lock()
	delete(l.seen, key)
	l.leases[s] = struct{}{}
	l.mu.Unlock()
	s.startExpiry(start)
	if l.cfg.heartbeat > 0 {
		go s.heartbeat()
	} else {
		close(s.done)
	}
	return s
}

// Close stops the heartbeats and releases every lease still held; their
// holders see [billing.Lease.Lost] closed, and their Release returns
// [billing.ErrLeaseLost]. Lock fails after Close. Close waits for Lock calls in
// progress; calling it again does nothing.
func (l *Locker) Close(ctx context.Context) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	l.inflight.Wait()

	l.mu.Lock()
	leases := make([]*dynamoLease, 0, len(l.leases))
	for s := range l.leases {
		leases = append(leases, s)
	}
	l.mu.Unlock()
	var errs []error
	for _, s := range leases {
		if err := s.closeLease(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := l.dl.CloseWithContext(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("billing: closing locker: %w", err)
	}
	return nil
}

func (l *Locker) log(level slog.Level, msg, userID string, attrs ...slog.Attr) {
	if l.cfg.logger == nil {
		return
	}
	attrs = append(attrs, slog.String("user_id", userID), slog.String("table", l.cfg.table))
	l.cfg.logger.LogAttrs(context.Background(), level, msg, attrs...)
}

// slogAdapter sends dynamolock's log lines to a slog.Logger at debug level.
type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Println(ctx context.Context, v ...any) {
	a.l.DebugContext(ctx, "dynamolock: "+fmt.Sprint(v...))
}
