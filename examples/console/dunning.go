package main

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/dynabill/billing"
)

// This file is the example's part of dunning (billing.Config.Dunning): a
// declined period is retried on the default schedule (seven retries
// within two weeks of the first decline), its customer is told through
// a Notifier, and on day 14 the subscription is cancelled. The console
// shows each owed period's schedule and the notices sent, and Attention
// the customers whose dunning ends within three days.

// updatePaymentURL is the host's page where a customer updates the
// payment method, sent in the notices.
const updatePaymentURL = "https://example.com/account/payment-method"

// dunningPolicy is the example's dunning: the default schedule and final
// action, notices kept by notices, sent to the emails of demoUsers.
func dunningPolicy(notices *noticeLog) *billing.DunningPolicy {
	return &billing.DunningPolicy{Notifier: notices, Users: demoUsers{}, UpdatePaymentURL: updatePaymentURL}
}

// demoUsers is the host's user service: every simulated user is active,
// at an address of example.com.
type demoUsers struct{}

func (demoUsers) GetUser(_ context.Context, id string) (billing.User, error) {
	return billing.User{ID: id, Email: id + "@example.com", Status: billing.UserStatusActive}, nil
}

// noticeLog is the example's Notifier: it keeps the notices instead of
// mailing them (a host sends an email).
type noticeLog struct {
	mu   sync.Mutex
	sent []sentNotice
}

// sentNotice is a notice and the address it went to.
type sentNotice struct {
	Email  string
	Notice billing.RenewalNotice
}

var (
	_ billing.Notifier      = (*noticeLog)(nil)
	_ billing.UserDirectory = demoUsers{}
)

// Send implements billing.Notifier.
func (l *noticeLog) Send(ctx context.Context, email string, n billing.RenewalNotice) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sent = append(l.sent, sentNotice{Email: email, Notice: n})
	return nil
}

// Sent returns the notices kept, in the order sent.
func (l *noticeLog) Sent() []sentNotice {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.sent)
}

// summary counts the notices kept by kind, for the command's output.
func (l *noticeLog) summary() string {
	counts := map[string]int{}
	var kinds []string
	for _, s := range l.Sent() {
		k := s.Notice.EventType
		if counts[k] == 0 {
			kinds = append(kinds, k)
		}
		counts[k]++
	}
	slices.Sort(kinds)
	out := fmt.Sprintf("%d dunning notices kept (not mailed)", len(l.Sent()))
	for i, k := range kinds {
		sep := ", "
		if i == 0 {
			sep = ": "
		}
		out += fmt.Sprintf("%s%d %s", sep, counts[k], k)
	}
	return out
}
