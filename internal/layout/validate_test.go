package layout

import (
	"errors"
	"testing"
	"time"

	"github.com/dynabill/billing"
)

func TestDefaultCollisionPolicy(t *testing.T) {
	d := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	lr := time.Date(2024, 2, 20, 8, 0, 0, 0, time.UTC)
	rec := func(user, id string, st billing.Status, bd time.Time) billing.Period {
		return billing.Period{UserID: user, SubscriptionID: id, Status: st, Amount: billing.Cents(499),
			BillingDate: bd, LastRunDate: lr, BillingPeriod: billing.BillingPeriod(bd)}
	}
	tests := []struct {
		name      string
		in        []billing.Period
		wantDates []time.Time
		wantErr   error
	}{
		{"no collision", []billing.Period{rec("u", "a", billing.StatusScheduled, d), rec("u", "b", billing.StatusCancelled, d.AddDate(0, 1, 0))},
			[]time.Time{d, d.AddDate(0, 1, 0)}, nil},
		{"cancelled before scheduled moves", []billing.Period{rec("u", "a", billing.StatusCancelled, d), rec("u", "b", billing.StatusScheduled, d)},
			[]time.Time{d.Add(time.Hour), d}, nil},
		{"three way", []billing.Period{rec("u", "a", billing.StatusCancelled, d), rec("u", "b", billing.StatusScheduled, d), rec("u", "c", billing.StatusWaived, d)},
			[]time.Time{d.Add(time.Hour), d, d.Add(2 * time.Hour)}, nil},
		{"shift skips a taken hour", []billing.Period{rec("u", "a", billing.StatusScheduled, d), rec("u", "b", billing.StatusCancelled, d.Add(time.Hour)), rec("u", "c", billing.StatusCancelled, d)},
			[]time.Time{d, d.Add(time.Hour), d.Add(2 * time.Hour)}, nil},
		{"none scheduled: first keeps", []billing.Period{rec("u", "a", billing.StatusCancelled, d), rec("u", "b", billing.StatusCompleted, d)},
			[]time.Time{d, d.Add(time.Hour)}, nil},
		{"other users untouched", []billing.Period{rec("u", "a", billing.StatusScheduled, d), rec("v", "b", billing.StatusCancelled, d)},
			[]time.Time{d, d}, nil},
		{"two scheduled", []billing.Period{rec("u", "a", billing.StatusScheduled, d), rec("u", "b", billing.StatusScheduled, d)}, nil, billing.ErrAlreadyExists},
		{"unencodable", []billing.Period{rec("u", "", billing.StatusScheduled, d)}, nil, billing.ErrInvalidItem},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := make([]billing.Period, len(tt.in))
			copy(in, tt.in)
			out, err := DefaultCollisionPolicy(in)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			keys := map[string]bool{}
			hist := map[string]bool{}
			for i, s := range out {
				if !s.BillingDate.Equal(tt.wantDates[i]) {
					t.Errorf("record %d: billing_date %v, want %v", i, s.BillingDate, tt.wantDates[i])
				}
				if s.BillingPeriod != billing.BillingPeriod(s.BillingDate) {
					t.Errorf("record %d: period %s", i, s.BillingPeriod)
				}
				if !in[i].BillingDate.Equal(tt.in[i].BillingDate) {
					t.Errorf("input %d modified", i)
				}
				k := s.UserID + BillingDateKey(&s)
				h := s.UserID + LastRunDateKey(&s)
				if keys[k] || hist[h] {
					t.Errorf("record %d: duplicate key after resolution", i)
				}
				keys[k], hist[h] = true, true
			}
			// Deterministic.
			again, _ := DefaultCollisionPolicy(tt.in)
			for i := range out {
				if !again[i].BillingDate.Equal(out[i].BillingDate) || !again[i].LastRunDate.Equal(out[i].LastRunDate) {
					t.Errorf("record %d: not deterministic", i)
				}
			}
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	prev := billing.Period{UserID: "u", SubscriptionID: "s", Status: billing.StatusScheduled, Amount: billing.Cents(499),
		BillingDate: time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC), LastRunDate: time.Date(2024, 2, 1, 0, 0, 0, 0, time.UTC)}
	ok := prev.Clone()
	ok.Status = billing.StatusACHSent
	ok.LastRunDate = prev.LastRunDate.Add(time.Second)
	if err := ValidateUpdate(&prev, &ok, false); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		mut  func(*billing.Period)
		date bool
		want error
	}{
		{"user", func(s *billing.Period) { s.UserID = "x" }, false, billing.ErrInvalidItem},
		{"id", func(s *billing.Period) { s.SubscriptionID = "x" }, false, billing.ErrInvalidItem},
		{"date without admin", func(s *billing.Period) { s.BillingDate = s.BillingDate.Add(time.Hour) }, false, billing.ErrInvalidItem},
		{"illegal", func(s *billing.Period) { s.Status = billing.StatusRefunded }, false, billing.ErrIllegalTransition},
		{"same last run", func(s *billing.Period) { s.LastRunDate = prev.LastRunDate }, false, billing.ErrInvalidItem},
		{"inactive", func(s *billing.Period) { s.Status = billing.StatusInactive }, false, billing.ErrIllegalTransition},
	}
	for _, tt := range tests {
		n := ok.Clone()
		tt.mut(&n)
		if err := ValidateUpdate(&prev, &n, tt.date); !errors.Is(err, tt.want) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.want)
		}
	}
	moved := ok.Clone()
	moved.BillingDate = moved.BillingDate.AddDate(0, 0, 3)
	if err := ValidateUpdate(&prev, &moved, true); err != nil {
		t.Errorf("admin date change: %v", err)
	}
}

// TestValidateUpdateReopen: a CANCELLED record never attempted may be
// reopened as SCHEDULED, with a new subscription_id too (a come-back by
// a new subscribe request); an attempted one may not, and no other
// update changes the ID.
func TestValidateUpdateReopen(t *testing.T) {
	prev := billing.Period{UserID: "u", SubscriptionID: "s", Status: billing.StatusCancelled, Amount: billing.Cents(499),
		BillingDate: time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC), LastRunDate: time.Date(2024, 2, 1, 0, 0, 0, 0, time.UTC)}
	next := prev.Clone()
	next.Status, next.SubscriptionID = billing.StatusScheduled, "s2"
	next.LastRunDate = prev.LastRunDate.Add(time.Second)
	if err := ValidateUpdate(&prev, &next, false); err != nil {
		t.Fatalf("reopen with a new ID: %v", err)
	}
	attempted := prev.Clone()
	attempted.InitialRunDate, attempted.Attempt = prev.LastRunDate, 1
	if err := ValidateUpdate(&attempted, &next, false); !errors.Is(err, billing.ErrIllegalTransition) {
		t.Errorf("reopen of an attempted record: err = %v, want ErrIllegalTransition", err)
	}
	moved := next.Clone()
	moved.BillingDate = moved.BillingDate.AddDate(0, 0, 1)
	if err := ValidateUpdate(&prev, &moved, true); !errors.Is(err, billing.ErrInvalidItem) {
		t.Errorf("reopen with a new ID and date: err = %v, want ErrInvalidItem", err)
	}
}
