package billingtest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/av"
	"github.com/dynabill/billing/internal/layout"
	"github.com/dynabill/billing/memory"
)

// fullRecord returns a record with every field set, data_ and unknown
// attributes included.
func (ids *suiteIDs) fullRecord(user string) billing.Period {
	r := ids.record(user, day(0), billing.StatusError)
	r.Amount = billing.Cents(3999)
	r.Term = billing.TermYearly
	r.TransactionID = "txn-123"
	r.PaymentError = "R01 insufficient funds"
	r.InitialRunDate = r.LastRunDate.Add(-48*time.Hour + 123456789)
	r.CompletionDate = time.Time{}
	r.Process = billing.ProcessRetry
	r.UpdatedEvent = billing.UpdatedUserReactivated
	r.ReceiptAccountMask = "6789"
	r.ReceiptTierName = "Premium:v3"
	r.ReceiptPaymentType = "ACH"
	r.BillingWeek = 3
	r.PauseDurationMonths = 2
	r.IsPendingDowngrade = true
	r.AnchorDay = 31
	r.Attempt = 2
	layout.SetExtraAttributes(&r, map[string]av.AttributeValue{
		"legacy_flag":  &av.AttributeValueMemberS{Value: "kept"},
		"legacy_count": &av.AttributeValueMemberN{Value: "7"},
	})
	layout.SetDataAttributes(&r, map[string]av.AttributeValue{
		"data_note": &av.AttributeValueMemberS{Value: "history only"},
		"data_payload": &av.AttributeValueMemberM{Value: map[string]av.AttributeValue{
			"source": &av.AttributeValueMemberS{Value: "webhook"},
			"tries":  &av.AttributeValueMemberN{Value: "2"},
		}},
	})
	return r
}

func (s *repoSuite) addCases() []repoCase {
	ids := s.ids
	return []repoCase{
		{"StoresRecordAndHistoryRow", func(t *testing.T) {
			e := s.env(t, memory.Options{})
			u := ids.user()
			r := ids.record(u, day(0), billing.StatusScheduled)
			e.add(r)
			e.requireStored(r)
			byID, err := e.repo.GetByID(e.ctx(), r.SubscriptionID)
			if err != nil {
				t.Fatalf("GetByID after Add: %v", err)
			}
			if d := diffStored(&byID, &r); d != "" {
				t.Fatalf("GetByID after Add differs: %s", d)
			}
			e.requireHistoryCount(u, 1)
			e.requireLastHistoryRow(r)
			rows, err := e.hist.ListBySubscription(e.ctx(), r.SubscriptionID)
			if err != nil || len(rows) != 1 {
				t.Fatalf("History.ListBySubscription after Add = %d rows, %v; want 1", len(rows), err)
			}
		}},
		{"RoundTripsEveryField", func(t *testing.T) {
			e := s.env(t, memory.Options{})
			r := ids.fullRecord(ids.user())
			e.add(r)
			got := e.get(r.UserID, r.BillingDate)
			if d := diffStored(&got, &r); d != "" {
				t.Fatalf("record differs after the round trip: %s", d)
			}
			if got.Amount != r.Amount || got.Status != billing.StatusError || got.Term != billing.TermYearly ||
				got.BillingWeek != 3 || got.PauseDurationMonths != 2 || !got.IsPendingDowngrade ||
				got.AnchorDay != 31 || got.Attempt != 2 || !got.InitialRunDate.Equal(r.InitialRunDate) ||
				!got.LastRunDate.Equal(r.LastRunDate) {
				t.Fatalf("fields lost in the round trip: got %+v", got)
			}
			if len(layout.ExtraAttributes(&got)) != 2 {
				t.Fatalf("unknown attributes not kept: Extra = %v", layout.ExtraAttributes(&got))
			}
			if len(layout.DataAttributes(&got)) != 0 {
				t.Fatalf("data_ attributes stored in the primary table: %v", layout.DataAttributes(&got))
			}
			e.requireLastHistoryRow(r) // with its data_ attributes
		}},
		{"RoundTripsTrial", func(t *testing.T) {
			// A trial's end and paid amount are kept on the record and its
			// history rows, and change with an update (an extension); a
			// record without them reads none.
			e := s.env(t, memory.Options{})
			u := ids.user()
			start := time.Date(2025, 2, 3, 9, 0, 0, 0, time.UTC)
			r := ids.record(u, start, billing.StatusScheduled)
			r.Amount, r.TrialEnd, r.TrialAmount = 0, start.AddDate(0, 0, 14), billing.MustParseAmount("9.99")
			e.add(r)
			got := e.get(u, start)
			if !got.IsTrial() || !got.TrialEnd.Equal(r.TrialEnd) || got.TrialAmount != r.TrialAmount || got.Amount != 0 {
				t.Fatalf("trial lost in the round trip: got end %v amount %s paid %s", got.TrialEnd, got.Amount, got.TrialAmount)
			}
			e.requireLastHistoryRow(r)
			next := got.Clone()
			next.TrialEnd, next.LastRunDate = start.AddDate(0, 0, 21), got.LastRunDate.Add(time.Second)
			e.update(got, next)
			if got := e.get(u, start); !got.TrialEnd.Equal(next.TrialEnd) || got.TrialAmount != r.TrialAmount {
				t.Fatalf("trial end not updated: got %v", got.TrialEnd)
			}
			plain := ids.record(ids.user(), start, billing.StatusScheduled)
			e.add(plain)
			if got := e.get(plain.UserID, start); got.IsTrial() || got.TrialAmount != 0 || got.AfterTrial {
				t.Fatalf("a record without a trial reads one: %v %s after %v", got.TrialEnd, got.TrialAmount, got.AfterTrial)
			}

			// The first paid period after a trial keeps its marker
			// (billing_after_trial) on the record and its history rows
			// through an update that replaces updated_event (a pause), and
			// loses it only when an update clears it.
			pu := ids.user()
			paid := ids.record(pu, start.AddDate(0, 0, 14), billing.StatusScheduled)
			paid.AfterTrial, paid.UpdatedEvent = true, "trial-converted"
			e.add(paid)
			got = e.get(pu, paid.BillingDate)
			if !got.AfterTrial {
				t.Fatalf("billing_after_trial lost in the round trip: %+v", got)
			}
			e.requireLastHistoryRow(paid)
			paused := got.Clone()
			paused.Status, paused.UpdatedEvent, paused.PauseDurationMonths = billing.StatusPaused, billing.UpdatedPausePendingResume, 1
			paused.LastRunDate = got.LastRunDate.Add(time.Second)
			e.update(got, paused)
			got = e.get(pu, paid.BillingDate)
			if !got.AfterTrial || got.UpdatedEvent != billing.UpdatedPausePendingResume {
				t.Fatalf("billing_after_trial lost in an update of updated_event: %+v", got)
			}
			e.requireLastHistoryRow(paused)
			cleared := got.Clone()
			cleared.AfterTrial, cleared.LastRunDate = false, got.LastRunDate.Add(time.Second)
			e.update(got, cleared)
			if got := e.get(pu, paid.BillingDate); got.AfterTrial {
				t.Fatalf("billing_after_trial not removed by an update: %+v", got)
			}
		}},
		{"BillingDateStoredInWholeSecondsUTC", func(t *testing.T) {
			e := s.env(t, memory.Options{})
			u := ids.user()
			r := ids.record(u, time.Date(2024, 2, 10, 12, 30, 45, 750_000_000, time.FixedZone("EET", 2*3600)), billing.StatusScheduled)
			e.add(r)
			want := time.Date(2024, 2, 10, 10, 30, 45, 0, time.UTC)
			got := e.get(u, want)
			if !got.BillingDate.Equal(want) || layout.BillingDateKey(&got) != "2024-02-10T10:30:45Z" {
				t.Fatalf("billing_date stored as %q (%v), want 2024-02-10T10:30:45Z", layout.BillingDateKey(&got), got.BillingDate)
			}
			if again := e.get(u, r.BillingDate); again.SubscriptionID != r.SubscriptionID {
				t.Fatalf("Get with the original zoned time found %s", again.SubscriptionID)
			}
		}},
		{"DuplicateKey", func(t *testing.T) {
			e := s.env(t, memory.Options{})
			u := ids.user()
			first := ids.record(u, day(0), billing.StatusScheduled)
			e.add(first)
			dup := ids.record(u, day(0), billing.StatusScheduled)
			dup.Amount = billing.Cents(999)
			requireConflict(t, e.repo.Add(e.ctx(), &dup), billing.ErrAlreadyExists, "add", u)
			e.requireStored(first)
			e.requireHistoryCount(u, 1)
			if _, err := e.repo.GetByID(e.ctx(), dup.SubscriptionID); !errors.Is(err, billing.ErrNotFound) {
				t.Fatalf("GetByID of the rejected record = %v, want ErrNotFound", err)
			}
		}},
		{"HistoryKeyTaken", func(t *testing.T) {
			e := s.env(t, memory.Options{})
			u := ids.user()
			first := ids.record(u, day(0), billing.StatusScheduled)
			e.add(first)
			second := ids.record(u, day(31), billing.StatusCompleted)
			second.LastRunDate = first.LastRunDate
			requireConflict(t, e.repo.Add(e.ctx(), &second), billing.ErrAlreadyExists, "add", u)
			e.requireAbsent(u, day(31))
			e.requireHistoryCount(u, 1)
			e.requireLastHistoryRow(first)
		}},
		{"SameKeysOfOtherUsers", func(t *testing.T) {
			e := s.env(t, memory.Options{})
			a, b := ids.record(ids.user(), day(0), billing.StatusScheduled), ids.record(ids.user(), day(0), billing.StatusScheduled)
			b.LastRunDate = a.LastRunDate
			e.add(a, b)
			e.requireStored(a)
			e.requireStored(b)
			e.requireHistoryCount(a.UserID, 1)
			e.requireHistoryCount(b.UserID, 1)
		}},
		{"SecondOpenRecordRefused", func(t *testing.T) {
			// The legacy layout holds one subscription a user: a plan
			// billed on another day beside an open one would be taken by
			// the collector for the first plan's next period.
			if s.severalOpen {
				t.Skip("the store keeps several open records of a user (SuiteOptions.SeveralOpen)")
			}
			e := s.env(t, memory.Options{})
			requireRefused := func(err error, rec, open billing.Period) {
				t.Helper()
				var oe *billing.OpenSubscriptionError
				switch {
				case !errors.As(err, &oe) || !errors.Is(err, billing.ErrOpenSubscription):
					t.Fatalf("Add(%s %s) beside the open %s: %v, want an *OpenSubscriptionError wrapping ErrOpenSubscription", rec.Key(), rec.Status, open.Key(), err)
				case oe.UserID != rec.UserID || oe.New != rec.Key() || oe.Open != open.Key() || oe.Status != open.Status:
					t.Fatalf("OpenSubscriptionError = %+v, want user %s, new %s, open %s (%s)", oe, rec.UserID, rec.Key(), open.Key(), open.Status)
				case errors.Is(err, billing.ErrAlreadyExists) || errors.Is(err, billing.ErrConflict):
					t.Fatalf("OpenSubscriptionError %v also wraps a conflict", err)
				}
				e.requireAbsent(rec.UserID, rec.BillingDate)
			}
			u := ids.user()
			open := ids.record(u, day(0), billing.StatusScheduled)
			e.add(open)
			for _, st := range []billing.Status{billing.StatusScheduled, billing.StatusPaused} {
				second := ids.record(u, day(-10), st)
				requireRefused(e.repo.Add(e.ctx(), &second), second, open)
			}
			e.requireHistoryCount(u, 1)
			// A record at the open record's key is a taken key, as ever.
			dup := ids.record(u, day(0), billing.StatusScheduled)
			requireConflict(t, e.repo.Add(e.ctx(), &dup), billing.ErrAlreadyExists, "add", u)
			// Closed periods and history imports are added beside it.
			for i, st := range []billing.Status{billing.StatusCompleted, billing.StatusCancelled, billing.StatusError} {
				e.add(ids.record(u, day(-31*(i+1)), st))
			}
			e.requireHistoryCount(u, 4)
			e.requireStored(open)

			// A PAUSED record is an open subscription too.
			v := ids.user()
			paused := ids.record(v, day(0), billing.StatusPaused)
			e.add(paused)
			next := ids.record(v, day(31), billing.StatusScheduled)
			requireRefused(e.repo.Add(e.ctx(), &next), next, paused)

			// Once the open record is closed, the user's next subscription
			// is added.
			done := ids.next(open, billing.StatusCancelled)
			e.update(open, done)
			again := ids.record(u, day(31), billing.StatusScheduled)
			e.add(again)
			e.requireStored(again)
		}},
		{"MissingLastRunDate", func(t *testing.T) {
			e := s.env(t, memory.Options{})
			u := ids.user()
			r := ids.record(u, day(0), billing.StatusScheduled)
			r.LastRunDate = time.Time{}
			requireRejected(t, e.repo.Add(e.ctx(), &r), billing.ErrInvalidItem)
			e.requireAbsent(u, day(0))
			e.requireHistoryCount(u, 0)
		}},
		{"InactiveStatusRejected", func(t *testing.T) {
			e := s.env(t, memory.Options{})
			u := ids.user()
			r := ids.record(u, day(0), billing.StatusInactive)
			requireRejected(t, e.repo.Add(e.ctx(), &r), billing.ErrInvalidItem)
			e.requireAbsent(u, day(0))
			e.requireHistoryCount(u, 0)
		}},
		{"CanceledContext", func(t *testing.T) {
			e := s.env(t, memory.Options{})
			u := ids.user()
			r := ids.record(u, day(0), billing.StatusScheduled)
			ctx, cancel := context.WithCancel(e.ctx())
			cancel()
			if err := e.repo.Add(ctx, &r); !errors.Is(err, context.Canceled) {
				t.Fatalf("Add with a cancelled context = %v, want an error wrapping context.Canceled", err)
			}
			e.requireAbsent(u, day(0))
			e.requireHistoryCount(u, 0)
		}},
	}
}

func (s *repoSuite) readCases() []repoCase {
	ids := s.ids
	return []repoCase{
		{"GetNotFound", func(t *testing.T) {
			e := s.env(t, memory.Options{})
			u := ids.user()
			e.requireAbsent(u, day(0))
			e.add(ids.record(u, day(0), billing.StatusScheduled))
			e.requireAbsent(u, day(1))
			e.requireAbsent(u, day(0).Add(time.Second))
			e.requireAbsent(ids.user(), day(0))
		}},
		{"GetByIDNotFound", func(t *testing.T) {
			e := s.env(t, memory.Options{})
			e.add(ids.record(ids.user(), day(0), billing.StatusScheduled))
			if got, err := e.repo.GetByID(e.ctx(), ids.subID()); !errors.Is(err, billing.ErrNotFound) {
				t.Fatalf("GetByID of an unknown ID = %s, %v; want ErrNotFound", got.Key(), err)
			}
		}},
		{"GetByIDFindsRecord", func(t *testing.T) {
			e := s.env(t, memory.Options{})
			u := ids.user()
			recs := []billing.Period{
				ids.record(u, day(-31), billing.StatusCompleted),
				ids.record(u, day(0), billing.StatusScheduled),
				ids.record(u, day(31), billing.StatusCancelled),
			}
			e.add(recs...)
			for _, r := range recs {
				got, err := e.repo.GetByID(e.ctx(), r.SubscriptionID)
				if err != nil {
					t.Fatalf("GetByID(%s): %v", r.SubscriptionID, err)
				}
				if d := diffStored(&got, &r); d != "" {
					t.Fatalf("GetByID(%s) differs: %s", r.SubscriptionID, d)
				}
			}
			next := ids.next(recs[1], billing.StatusError)
			e.update(recs[1], next)
			got, err := e.repo.GetByID(e.ctx(), next.SubscriptionID)
			if err != nil || got.Status != billing.StatusError || !got.LastRunDate.Equal(next.LastRunDate) {
				t.Fatalf("GetByID after Update = %s %s, %v; want the updated ERROR record", got.Key(), got.Status, err)
			}
		}},
		{"ListByUserAscending", func(t *testing.T) {
			e := s.env(t, memory.Options{})
			u, other := ids.user(), ids.user()
			const n = 30
			want := make([]billing.Period, n)
			for i := range n {
				want[i] = ids.record(u, billingBase.AddDate(0, i-12, 0), billing.StatusCompleted)
			}
			for i := range n { // months out of order: 0, 7, 14, …
				e.add(want[i*7%n])
			}
			e.add(ids.record(other, day(0), billing.StatusScheduled), ids.record(other, day(-400), billing.StatusCompleted))
			got := e.list(u)
			if !slices.Equal(subIDs(got), subIDs(want)) {
				t.Fatalf("ListByUser returned %d records in order %v, want %d ascending by billing_date %v", len(got), subIDs(got), n, subIDs(want))
			}
			for i := range got {
				if d := diffStored(&got[i], &want[i]); d != "" {
					t.Fatalf("record %d differs: %s", i, d)
				}
			}
		}},
		{"ListByUserUnknown", func(t *testing.T) {
			e := s.env(t, memory.Options{})
			e.add(ids.record(ids.user(), day(0), billing.StatusScheduled))
			if got := e.list(ids.user()); len(got) != 0 {
				t.Fatalf("ListByUser of a user without records = %d records", len(got))
			}
		}},
		{"RecentMostRecentFirst", func(t *testing.T) {
			e := s.env(t, memory.Options{})
			u := ids.user()
			var asc []billing.Period
			for i := range 15 {
				asc = append(asc, ids.record(u, billingBase.AddDate(0, i, 0), billing.StatusCompleted))
			}
			for i := range asc {
				e.add(asc[(i*4)%15])
			}
			e.add(ids.record(ids.user(), billingBase.AddDate(5, 0, 0), billing.StatusScheduled))
			desc := slices.Clone(asc)
			slices.Reverse(desc)
			for _, c := range []struct{ limit, want int }{{5, 5}, {1, 1}, {15, 15}, {100, 15}} {
				got, err := e.repo.Recent(e.ctx(), u, c.limit)
				if err != nil {
					t.Fatalf("Recent(%d): %v", c.limit, err)
				}
				if !slices.Equal(subIDs(got), subIDs(desc[:c.want])) {
					t.Fatalf("Recent(%d) = %v, want the %d most recent, newest first: %v", c.limit, subIDs(got), c.want, subIDs(desc[:c.want]))
				}
			}
		}},
		{"RecentDefaultLimit", func(t *testing.T) {
			e := s.env(t, memory.Options{})
			u := ids.user()
			var asc []billing.Period
			for i := range 14 {
				asc = append(asc, ids.record(u, billingBase.AddDate(0, 0, 7*i), billing.StatusCompleted))
			}
			e.add(asc...)
			desc := slices.Clone(asc)
			slices.Reverse(desc)
			for _, limit := range []int{0, -3} {
				got, err := e.repo.Recent(e.ctx(), u, limit)
				if err != nil || !slices.Equal(subIDs(got), subIDs(desc[:10])) {
					t.Fatalf("Recent(%d) = %v, %v; want the 10 most recent %v", limit, subIDs(got), err, subIDs(desc[:10]))
				}
			}
		}},
		{"RecentUnknownUser", func(t *testing.T) {
			e := s.env(t, memory.Options{})
			got, err := e.repo.Recent(e.ctx(), ids.user(), 5)
			if err != nil || len(got) != 0 {
				t.Fatalf("Recent of a user without records = %d records, %v", len(got), err)
			}
		}},
	}
}
