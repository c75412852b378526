package memory

import (
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/av"
	"github.com/dynabill/billing/internal/layout"
)

// RawRecord returns a copy of the primary item at userID and
// billingDateKey as stored, nil when there is none.
func (s *Store) RawRecord(userID, billingDateKey string) map[string]av.AttributeValue {
	user := s.locks.of(userID)
	s.locks.rlock(user)
	defer s.locks.runlock(user)
	item, _ := s.primary.get(tableKey{userID, billingDateKey})
	return cloneItem(item)
}

// RawPeriod returns a copy of the period item at userID and
// billingDateKey as stored, nil when there is none.
func (s *SingleTable) RawPeriod(userID, billingDateKey string) map[string]av.AttributeValue {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.periods.RawRecord(userID, billingDateKey)
}

// RawSubscription returns a copy of the subscription item of ref as
// stored, nil when there is none.
func (s *SingleTable) RawSubscription(ref layout.SubscriptionRef) map[string]av.AttributeValue {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pay.mu.Lock()
	defer s.pay.mu.Unlock()
	return cloneItem(s.pay.items[s.subItemKey(ref)])
}

// StopHeartbeat stalls a lease of l as a frozen holder would, for the
// locker tests.
func (l *Locker) StopHeartbeat(lease billing.Lease) { l.l.StopHeartbeat(lease) }
