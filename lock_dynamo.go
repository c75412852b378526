package billing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"cirello.io/dynamolock/v2"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// maxObservations bounds the memory a DynamoLocker spends on remembering
// other holders' record versions (see [DynamoLocker]).
const maxObservations = 4096

// DynamoLocker is the [Locker] on a dynamolock (cirello.io/dynamolock/v2)
// table, compatible with the legacy service's locks: key [LockKey], data the
// acquisition time, lease 60 s renewed every second, fail-if-locked,
// replace-data. Release marks the lock item released rather than deleting it.
//
// Each lease has one goroutine that sends its heartbeats and closes
// [Lease.Lost] when a heartbeat finds the lock taken over, or when no
// heartbeat has succeeded for a lease duration (with heartbeats disabled:
// when the lease duration has passed). The goroutine ends on Release or
// [DynamoLocker.Close]; dynamolock's own heartbeat loop is not used.
//
// An expired lease is taken over the way dynamolock judges expiry, without
// trusting any clock but its own: a locker that finds the lock held
// remembers the lock's record version, and once it sees the same version
// again after the holder's lease duration has passed on its own clock, it
// removes that version (conditionally) and takes the lock. Lock never waits
// for that: a lock whose holder vanished is reported as [ErrAlreadyLocked]
// until a Lock call on the same DynamoLocker comes at least one lease
// duration after an earlier one saw it. (The legacy service never took over
// at all.)
//
// Lock items carry the attributes dynamolock v2.1.0 writes: PartitionKey,
// data, ownerName, leaseDuration (e.g. "1m0s"), recordVersionNumber, and
// isReleased once released; no TTL attribute. Costs: a Lock of a held user
// is one consistent GetItem, of a free one a GetItem and a conditional
// PutItem; each held lease writes one UpdateItem per heartbeat period.
// Locks are not reentrant: a second Lock of the same user fails.
//
// A DynamoLocker is safe for concurrent use. Close it to stop heartbeats.
type DynamoLocker struct {
	cfg    lockerConfig
	client DynamoDBAPI
	dl     *dynamolock.Client

	mu       sync.Mutex
	closed   bool
	inflight sync.WaitGroup
	leases   map[*dynamoLease]struct{}
	seen     map[string]observation // lock key → record version seen held
}

var _ Locker = (*DynamoLocker)(nil)

type observation struct {
	rvn string
	at  time.Time // when the version was first seen, monotonic
}

// errLockerClosed is returned by Lock after Close.
var errLockerClosed = errors.New("billing: locker closed")

// NewDynamoLocker returns a locker on the lock table reached through client.
// It validates the options and returns an error naming the bad one.
func NewDynamoLocker(client DynamoDBAPI, opts ...LockerOption) (*DynamoLocker, error) {
	cfg := lockerConfig{
		table:     DefaultLockTable,
		lease:     DefaultLeaseDuration,
		heartbeat: DefaultHeartbeatPeriod,
		clock:     SystemClock{},
	}
	for _, o := range opts {
		o(&cfg)
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
		dynamolock.DisableHeartbeat(), // each lease heartbeats itself, see DynamoLocker
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
	return &DynamoLocker{
		cfg:    cfg,
		client: client,
		dl:     dl,
		leases: make(map[*dynamoLease]struct{}),
		seen:   make(map[string]observation),
	}, nil
}

// Lock implements [Locker]. See [DynamoLocker] for when an expired lease of
// another holder is taken over.
func (l *DynamoLocker) Lock(ctx context.Context, userID string) (Lease, error) {
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
	key := LockKey(userID)
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
		if errors.Is(err, errLostRace) {
			return nil, fmt.Errorf("billing: locking user %q: %w", userID, ErrAlreadyLocked)
		}
		if !errors.As(err, new(*dynamolock.LockNotGrantedError)) {
			return nil, fmt.Errorf("billing: locking user %q: %w", userID, err)
		}
		if attempt > 0 {
			return nil, fmt.Errorf("billing: locking user %q: %w", userID, ErrAlreadyLocked)
		}
		retry, err := l.takeOverExpired(ctx, userID, key, read)
		if err != nil {
			return nil, fmt.Errorf("billing: locking user %q: %w", userID, err)
		}
		if !retry {
			return nil, fmt.Errorf("billing: locking user %q: %w", userID, ErrAlreadyLocked)
		}
	}
}

// lockRead is what dynamolock's last read of a lock item said; captureClient
// records it for a Lock call, so that Lock need not read the item again.
type lockRead struct {
	done     bool // a read succeeded
	found    bool
	released bool
	rvn      string
	lease    string
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
//     to report it locked.
type captureClient struct{ DynamoDBAPI }

// errLostRace must not wrap the ConditionalCheckFailedException, or
// dynamolock would recognise it and retry.
var errLostRace = errors.New("lost the race for a free lock")

func (c captureClient) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	out, err := c.DynamoDBAPI.PutItem(ctx, in, optFns...)
	if _, ok := ctx.Value(lockReadKey{}).(*lockRead); ok && errors.As(err, new(*types.ConditionalCheckFailedException)) {
		return out, errLostRace
	}
	return out, err
}

func (c captureClient) GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	out, err := c.DynamoDBAPI.GetItem(ctx, in, optFns...)
	if r, ok := ctx.Value(lockReadKey{}).(*lockRead); ok && err == nil {
		_, released := out.Item[lockAttrIsReleased]
		*r = lockRead{
			done:     true,
			found:    out.Item != nil,
			released: released,
			rvn:      stringAttr(out.Item[lockAttrRVN]),
			lease:    stringAttr(out.Item[lockAttrLeaseDuration]),
		}
	}
	return out, err
}

// takeOverExpired decides what to do about a held lock, given dynamolock's
// last read of its item (read again if there was none). It reports true
// when the lock can be tried again: the item is gone or released, or its
// record version is the one this locker saw at least the holder's lease
// duration ago, which it has then deleted (on the condition that the version
// is still the same).
func (l *DynamoLocker) takeOverExpired(ctx context.Context, userID, key string, read lockRead) (bool, error) {
	itemKey := map[string]types.AttributeValue{lockAttrPartitionKey: &types.AttributeValueMemberS{Value: key}}
	if !read.done {
		// No captured read (dynamolock did not get to read): read it here.
		cc := captureClient{l.client}
		_, err := cc.GetItem(context.WithValue(ctx, lockReadKey{}, &read), &dynamodb.GetItemInput{
			TableName:      aws.String(l.cfg.table),
			Key:            itemKey,
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
	_, err = l.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 aws.String(l.cfg.table),
		Key:                       itemKey,
		ConditionExpression:       aws.String("#rvn = :rvn"),
		ExpressionAttributeNames:  map[string]string{"#rvn": lockAttrRVN},
		ExpressionAttributeValues: map[string]types.AttributeValue{":rvn": &types.AttributeValueMemberS{Value: read.rvn}},
	})
	if errors.As(err, new(*types.ConditionalCheckFailedException)) {
		return false, nil // renewed or taken meanwhile
	}
	if err != nil {
		return false, err
	}
	l.mu.Lock()
	delete(l.seen, key)
	l.mu.Unlock()
	l.log(slog.LevelWarn, "billing: took over an expired billing lock", userID,
		slog.String("record_version", read.rvn), slog.Duration("lease", lease))
	return true, nil
}

// observe records o; l.mu is held. When the map is full it forgets the
// versions seen more than two lease durations ago (only liveness suffers),
// and everything if that is not enough.
func (l *DynamoLocker) observe(key string, o observation) {
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

func (l *DynamoLocker) startLease(userID, key string, lock *dynamolock.Lock, start time.Time) *dynamoLease {
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
	go s.heartbeat(start.Add(l.cfg.lease))
	return s
}

// Close stops the heartbeats and releases every lease still held; their
// holders see [Lease.Lost] closed, and their Release returns
// [ErrLeaseLost]. Lock fails after Close. Close waits for Lock calls in
// progress; calling it again does nothing.
func (l *DynamoLocker) Close(ctx context.Context) error {
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

func (l *DynamoLocker) log(level slog.Level, msg, userID string, attrs ...slog.Attr) {
	if l.cfg.logger == nil {
		return
	}
	attrs = append(attrs, slog.String("user_id", userID), slog.String("table", l.cfg.table))
	l.cfg.logger.LogAttrs(context.Background(), level, msg, attrs...)
}

// dynamoLease is a lease of a DynamoLocker.
type dynamoLease struct {
	locker *DynamoLocker
	lock   *dynamolock.Lock
	userID string

	lost     chan struct{}
	lostOnce sync.Once
	stop     chan struct{} // closed to end the heartbeat goroutine
	stopOnce sync.Once
	done     chan struct{} // closed by the heartbeat goroutine when it ends

	mu       sync.Mutex // serialises Release and Close
	tried    bool       // a release was attempted: dynamolock now calls the lock expired
	released bool
}

var _ Lease = (*dynamoLease)(nil)

func (s *dynamoLease) UserID() string        { return s.userID }
func (s *dynamoLease) Lost() <-chan struct{} { return s.lost }

func (s *dynamoLease) markLost(reason string, err error) {
	s.lostOnce.Do(func() {
		close(s.lost)
		attrs := []slog.Attr{slog.String("reason", reason)}
		if err != nil {
			attrs = append(attrs, slog.String("error", err.Error()))
		}
		s.locker.log(slog.LevelWarn, "billing: billing lock lease lost", s.userID, attrs...)
	})
}

func (s *dynamoLease) isLost() bool {
	select {
	case <-s.lost:
		return true
	default:
		return false
	}
}

// heartbeat renews the lease every heartbeat period until stopped, and
// closes lost when the lease cannot be kept. With heartbeats disabled it
// only closes lost at expires.
func (s *dynamoLease) heartbeat(expires time.Time) {
	defer close(s.done)
	period, lease := s.locker.cfg.heartbeat, s.locker.cfg.lease
	if period <= 0 {
		t := time.NewTimer(time.Until(expires))
		defer t.Stop()
		select {
		case <-s.stop:
		case <-t.C:
			s.markLost("lease expired (heartbeats disabled)", nil)
		}
		return
	}
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
		// Not cancelled by Release: a heartbeat aborted after DynamoDB applied
		// it would leave a stale record version here and make Release fail.
		// Release waits for it instead.
		ctx, cancel := context.WithTimeout(context.Background(), lease/2)
		err := s.locker.dl.SendHeartbeatWithContext(ctx, s.lock)
		cancel()
		switch {
		case err == nil:
		case errors.As(err, new(*dynamolock.LockNotGrantedError)):
			s.markLost("lock taken over or expired", err)
			return
		case s.lock.IsExpired():
			s.markLost("no heartbeat succeeded for a lease duration", err)
			return
		default:
			s.locker.log(slog.LevelWarn, "billing: billing lock heartbeat failed", s.userID, slog.String("error", err.Error()))
		}
	}
}

// stopHeartbeat ends the heartbeat goroutine and waits for it (and for a
// heartbeat in flight) or for ctx.
func (s *dynamoLease) stopHeartbeat(ctx context.Context) error {
	s.stopOnce.Do(func() { close(s.stop) })
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Release implements [Lease].
func (s *dynamoLease) Release(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.released {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("billing: releasing lock of user %q: %w", s.userID, err)
		}
		if err := s.release(ctx); err != nil {
			return fmt.Errorf("billing: releasing lock of user %q: %w", s.userID, err)
		}
	}
	if s.isLost() {
		return fmt.Errorf("billing: releasing lock of user %q: %w", s.userID, ErrLeaseLost)
	}
	return nil
}

// release gives the lock item back; s.mu is held. A lease that had expired
// is marked lost, but its item is still released if nobody took it.
func (s *dynamoLease) release(ctx context.Context) error {
	if err := s.stopHeartbeat(ctx); err != nil {
		return err
	}
	if !s.tried && s.lock.IsExpired() {
		s.markLost("lease expired before release", nil)
	}
	s.tried = true
	_, err := s.locker.dl.ReleaseLockWithContext(ctx, s.lock)
	switch {
	case err == nil:
	case errors.As(err, new(*types.ConditionalCheckFailedException)):
		s.markLost("lock taken over before release", nil)
	case errors.Is(err, dynamolock.ErrClientClosed):
		s.markLost("locker closed", nil)
	default:
		return err
	}
	s.released = true
	s.locker.mu.Lock()
	delete(s.locker.leases, s)
	s.locker.mu.Unlock()
	return nil
}

// closeLease is Close's part: the lease is lost to its holder, and released.
func (s *dynamoLease) closeLease(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released {
		return nil
	}
	s.markLost("locker closed", nil)
	if err := s.release(ctx); err != nil {
		return fmt.Errorf("releasing lock of user %q: %w", s.userID, err)
	}
	return nil
}

func stringAttr(v types.AttributeValue) string {
	if s, ok := v.(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

// slogAdapter sends dynamolock's log lines to a slog.Logger at debug level.
type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Println(ctx context.Context, v ...any) {
	a.l.DebugContext(ctx, "dynamolock: "+fmt.Sprint(v...))
}
