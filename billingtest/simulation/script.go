package simulation

import (
	"encoding/binary"
	"hash/fnv"
	"sync"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/internal/seedhash"
)

// Decline reasons the scripted processor gives.
const (
	ReasonInsufficientFunds = "R01: insufficient funds"
	ReasonAccountClosed     = "R02: account closed"
)

// script decides the processor's answers and which ACH debits come back.
// Draws hash the seed with the user, the billing date and the attempt
// number, never the subscription ID (new records get random IDs) nor the
// order of the calls (runs are concurrent), so a seed always gives the same
// answers.
type script struct {
	seed                              int64
	declineRate, pendingRate, retRate float64
	users                             map[string]*User

	mu       sync.Mutex
	timedOut map[string]bool // keys whose first try timed out
	returns  map[string]bool // keys of pending debits, true when it will be returned
}

func newScript(seed int64, declineRate, pendingRate, returnRate float64, users []User) *script {
	s := &script{
		seed: seed, declineRate: declineRate, pendingRate: pendingRate, retRate: returnRate,
		users: make(map[string]*User, len(users)), timedOut: map[string]bool{}, returns: map[string]bool{},
	}
	for i := range users {
		s.users[users[i].ID] = &users[i]
	}
	return s
}

// step is the provider's Script: it is called once per request that is
// not a replay.
func (s *script) step(req billing.PaymentRequest) billingtest.Step {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.users[req.UserID]
	if u == nil {
		return s.random(req)
	}
	switch u.Behavior {
	case BehaviorAccountClosed:
		return billingtest.Declined(ReasonAccountClosed, false)
	case BehaviorInsolvent:
		return billingtest.Declined(ReasonInsufficientFunds, true)
	case BehaviorTimeoutBeforeCharge, BehaviorTimeoutAfterCharge:
		if req.SubscriptionID == u.FirstSubscriptionID && req.Attempt == 1 && !s.timedOut[req.IdempotencyKey] {
			s.timedOut[req.IdempotencyKey] = true
			if u.Behavior == BehaviorTimeoutBeforeCharge {
				return billingtest.UnknownBeforeCharge(nil)
			}
			return billingtest.UnknownAfterCharge(s.random(req), nil)
		}
	}
	return s.random(req)
}

// random draws an answer; s.mu is held.
func (s *script) random(req billing.PaymentRequest) billingtest.Step {
	switch x := unit(s.seed, "answer", req.UserID, req.BillingDate, req.Attempt); {
	case x < s.declineRate:
		return billingtest.Declined(ReasonInsufficientFunds, true)
	case x < s.declineRate+s.pendingRate:
		s.returns[req.IdempotencyKey] = unit(s.seed, "return", req.UserID, req.BillingDate, req.Attempt) < s.retRate
		return billingtest.Pending()
	}
	return billingtest.Succeeded()
}

// returned reports whether the pending debit of key comes back.
func (s *script) returned(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.returns[key]
}

// unit maps its arguments to a float in [0, 1).
func unit(seed int64, salt, userID string, billingDate time.Time, attempt int) float64 {
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(seed))
	h.Write(b[:])
	h.Write([]byte(salt))
	h.Write([]byte{0})
	h.Write([]byte(userID))
	h.Write([]byte{0})
	binary.LittleEndian.PutUint64(b[:], uint64(billingDate.Unix()))
	h.Write(b[:])
	binary.LittleEndian.PutUint64(b[:], uint64(attempt))
	h.Write(b[:])
	return seedhash.Unit(h.Sum64())
}
