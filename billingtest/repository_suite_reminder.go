package billingtest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/memory"
	"github.com/dynabill/billing/notice"
)

// reminderCases are the cases of [notice.ReminderClaimer], for a
// repository that implements it (the others skip them): a claim is once
// per record and billing date, concurrent claims make one winner, a claim
// is refused on a record gone or in another status or subscription, a
// release undoes only its own claim, a claim survives updates of the
// record and does not stop a moved record from being reminded for its new
// date, and a claim or release changes nothing the record's codec reads.
func (s *repoSuite) reminderCases() []repoCase {
	return []repoCase{
		{"ClaimOnce", s.reminderClaimOnce},
		{"ConcurrentClaimsOneWinner", s.reminderConcurrent},
		{"RefusedOnChangedRecord", s.reminderRefused},
		{"ReleaseOnlyOwnClaim", s.reminderRelease},
		{"ClaimSurvivesUpdates", s.reminderSurvivesUpdate},
		{"MovedRecordRemindedForNewDate", s.reminderMoved},
	}
}

// reminderAt is the claim time of the cases: the morning of the
// notification day of billingBase.
var reminderAt = billingBase.AddDate(0, 0, -billing.NoticeLeadDays).Add(12*time.Hour + 250*time.Millisecond)

func (e *repoEnv) claimer() notice.ReminderClaimer {
	e.t.Helper()
	rc, ok := e.repo.(notice.ReminderClaimer)
	if !ok {
		e.t.Skip("the repository does not implement notice.ReminderClaimer")
	}
	return rc
}

func recordReminder(rec *billing.Period) notice.Reminder {
	return notice.Reminder{UserID: rec.UserID, BillingDate: rec.BillingDate, SubscriptionID: rec.SubscriptionID, Status: rec.Status}
}

func (e *repoEnv) claim(rem notice.Reminder, at time.Time) notice.ReminderClaim {
	e.t.Helper()
	c, err := e.claimer().ClaimReminder(e.ctx(), rem, at)
	if err != nil {
		e.t.Fatalf("ClaimReminder(%s): %v", rem.Key(), err)
	}
	if c.Reminder != rem || !c.At.Equal(at) || c.Token == "" {
		e.t.Fatalf("ClaimReminder(%s) = %+v, want the reminder, At %v and a token", rem.Key(), c, at)
	}
	return c
}

// requireClaimed checks that a claim of rem is refused as a duplicate.
func (e *repoEnv) requireClaimed(rem notice.Reminder) {
	e.t.Helper()
	_, err := e.claimer().ClaimReminder(e.ctx(), rem, reminderAt.Add(time.Minute))
	if !errors.Is(err, billing.ErrReminderClaimed) || errors.Is(err, billing.ErrConflict) {
		e.t.Fatalf("ClaimReminder(%s) again: error %v, want one wrapping ErrReminderClaimed (and not ErrConflict)", rem.Key(), err)
	}
}

func (s *repoSuite) reminderClaimOnce(t *testing.T) {
	e := s.env(t, memory.Options{})
	rec := s.ids.record(s.ids.user(), day(0), billing.StatusScheduled)
	e.add(rec)
	e.claim(recordReminder(&rec), reminderAt)
	e.requireClaimed(recordReminder(&rec))
	// Without the optional checks it is the same reminder.
	e.requireClaimed(notice.Reminder{UserID: rec.UserID, BillingDate: rec.BillingDate})
	e.requireStored(rec)
	e.requireHistoryCount(rec.UserID, 1)

	if _, err := e.claimer().ClaimReminder(e.ctx(), notice.Reminder{BillingDate: rec.BillingDate}, reminderAt); err == nil || billing.IsConflict(err) {
		t.Fatalf("ClaimReminder without a user ID: error %v, want a validation error", err)
	}
}

func (s *repoSuite) reminderConcurrent(t *testing.T) {
	e := s.env(t, memory.Options{})
	rec := s.ids.record(s.ids.user(), day(1), billing.StatusScheduled)
	e.add(rec)
	const n = 6
	var wg sync.WaitGroup
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			_, errs[i] = e.claimer().ClaimReminder(e.ctx(), recordReminder(&rec), reminderAt.Add(time.Duration(i)*time.Millisecond))
		})
	}
	close(start)
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, billing.ErrReminderClaimed):
			t.Fatalf("claim %d: error %v, want nil or one wrapping ErrReminderClaimed", i, err)
		}
	}
	if won != 1 {
		t.Fatalf("%d of %d concurrent claims won, want exactly 1", won, n)
	}
	e.requireStored(rec)
}

func (s *repoSuite) reminderRefused(t *testing.T) {
	e := s.env(t, memory.Options{})
	rec := s.ids.record(s.ids.user(), day(2), billing.StatusScheduled)
	e.add(rec)
	refused := func(name string, rem notice.Reminder) {
		t.Helper()
		_, err := e.claimer().ClaimReminder(e.ctx(), rem, reminderAt)
		requireConflict(t, err, billing.ErrConflict, "claim reminder", rec.UserID)
		if errors.Is(err, billing.ErrReminderClaimed) {
			t.Fatalf("%s: error %v also wraps ErrReminderClaimed", name, err)
		}
	}
	gone := recordReminder(&rec)
	gone.BillingDate = day(3)
	refused("no record at the date", gone)
	other := recordReminder(&rec)
	other.Status = billing.StatusCompleted
	refused("another status", other)
	other = recordReminder(&rec)
	other.SubscriptionID = s.ids.subID()
	refused("another subscription_id", other)
	e.requireStored(rec)
	// Nothing was written: the reminder is still free.
	e.claim(recordReminder(&rec), reminderAt)

	// A record collected since the message was built is not reminded.
	done := s.ids.record(s.ids.user(), day(2), billing.StatusScheduled)
	e.add(done)
	next := s.ids.next(done, billing.StatusCompleted)
	e.update(done, next)
	_, err := e.claimer().ClaimReminder(e.ctx(), recordReminder(&done), reminderAt)
	requireConflict(t, err, billing.ErrConflict, "claim reminder", done.UserID)
}

func (s *repoSuite) reminderRelease(t *testing.T) {
	e := s.env(t, memory.Options{})
	rec := s.ids.record(s.ids.user(), day(4), billing.StatusScheduled)
	e.add(rec)
	rc := e.claimer()
	first := e.claim(recordReminder(&rec), reminderAt)
	if err := rc.ReleaseReminder(e.ctx(), first); err != nil {
		t.Fatalf("ReleaseReminder: %v", err)
	}
	e.requireStored(rec)
	requireConflict(t, rc.ReleaseReminder(e.ctx(), first), billing.ErrConflict, "release reminder", rec.UserID)

	second := e.claim(recordReminder(&rec), reminderAt.Add(time.Hour))
	if second.Token == first.Token {
		t.Fatalf("two claims share the token %q", first.Token)
	}
	// A stale release leaves the claim that holds the record.
	requireConflict(t, rc.ReleaseReminder(e.ctx(), first), billing.ErrConflict, "release reminder", rec.UserID)
	e.requireClaimed(recordReminder(&rec))
	if err := rc.ReleaseReminder(e.ctx(), second); err != nil {
		t.Fatalf("ReleaseReminder(second): %v", err)
	}
	e.claim(recordReminder(&rec), reminderAt.Add(2*time.Hour))

	// A release of a record that is gone is a conflict too.
	gone := second
	gone.BillingDate = day(5)
	requireConflict(t, rc.ReleaseReminder(e.ctx(), gone), billing.ErrConflict, "release reminder", rec.UserID)
}

func (s *repoSuite) reminderSurvivesUpdate(t *testing.T) {
	e := s.env(t, memory.Options{})
	rec := s.ids.record(s.ids.user(), day(6), billing.StatusScheduled)
	e.add(rec)
	readBefore := e.get(rec.UserID, rec.BillingDate)
	e.claim(recordReminder(&rec), reminderAt)
	// An update built from a read made before the claim.
	next := s.ids.next(readBefore, billing.StatusScheduled)
	e.update(readBefore, next)
	e.requireClaimed(recordReminder(&next))
	// One built from a read made after it.
	readAfter := e.get(rec.UserID, rec.BillingDate)
	again := s.ids.next(readAfter, billing.StatusError)
	e.update(readAfter, again)
	e.requireClaimed(recordReminder(&again))
	e.requireStored(again)
}

func (s *repoSuite) reminderMoved(t *testing.T) {
	e := s.env(t, memory.Options{})
	rec := s.ids.record(s.ids.user(), day(8), billing.StatusScheduled)
	e.add(rec)
	e.claim(recordReminder(&rec), reminderAt)
	prev := e.get(rec.UserID, rec.BillingDate) // carries the claim along
	next := s.ids.next(prev, billing.StatusScheduled)
	next.BillingDate = day(9)
	if err := e.repo.AdminUpdate(e.ctx(), &prev, &next); err != nil {
		t.Fatalf("AdminUpdate to %s: %v", next.Key(), err)
	}
	_, err := e.claimer().ClaimReminder(e.ctx(), recordReminder(&rec), reminderAt)
	requireConflict(t, err, billing.ErrConflict, "claim reminder", rec.UserID)
	e.claim(recordReminder(&next), reminderAt)
	e.requireClaimed(recordReminder(&next))
}
