package billing

import (
	"errors"
	"testing"
	"time"
)

func TestDefaultCollisionPolicy(t *testing.T) {
	d := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	lr := time.Date(2024, 2, 20, 8, 0, 0, 0, time.UTC)
	rec := func(user, id string, st Status, bd time.Time) Subscription {
		return Subscription{UserID: user, SubscriptionID: id, Status: st, Amount: Cents(499),
			BillingDate: bd, LastRunDate: lr, BillingPeriod: BillingPeriod(bd)}
	}
	tests := []struct {
		name      string
		in        []Subscription
		wantDates []time.Time
		wantErr   error
	}{
		{"no collision", []Subscription{rec("u", "a", StatusScheduled, d), rec("u", "b", StatusCancelled, d.AddDate(0, 1, 0))},
			[]time.Time{d, d.AddDate(0, 1, 0)}, nil},
		{"cancelled before scheduled moves", []Subscription{rec("u", "a", StatusCancelled, d), rec("u", "b", StatusScheduled, d)},
			[]time.Time{d.Add(time.Hour), d}, nil},
		{"three way", []Subscription{rec("u", "a", StatusCancelled, d), rec("u", "b", StatusScheduled, d), rec("u", "c", StatusWaived, d)},
			[]time.Time{d.Add(time.Hour), d, d.Add(2 * time.Hour)}, nil},
		{"shift skips a taken hour", []Subscription{rec("u", "a", StatusScheduled, d), rec("u", "b", StatusCancelled, d.Add(time.Hour)), rec("u", "c", StatusCancelled, d)},
			[]time.Time{d, d.Add(time.Hour), d.Add(2 * time.Hour)}, nil},
		{"none scheduled: first keeps", []Subscription{rec("u", "a", StatusCancelled, d), rec("u", "b", StatusCompleted, d)},
			[]time.Time{d, d.Add(time.Hour)}, nil},
		{"other users untouched", []Subscription{rec("u", "a", StatusScheduled, d), rec("v", "b", StatusCancelled, d)},
			[]time.Time{d, d}, nil},
		{"two scheduled", []Subscription{rec("u", "a", StatusScheduled, d), rec("u", "b", StatusScheduled, d)}, nil, ErrAlreadyExists},
		{"unencodable", []Subscription{rec("u", "", StatusScheduled, d)}, nil, ErrInvalidItem},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := make([]Subscription, len(tt.in))
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
				if s.BillingPeriod != BillingPeriod(s.BillingDate) {
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
	prev := Subscription{UserID: "u", SubscriptionID: "s", Status: StatusScheduled, Amount: Cents(499),
		BillingDate: time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC), LastRunDate: time.Date(2024, 2, 1, 0, 0, 0, 0, time.UTC)}
	ok := prev.Clone()
	ok.Status = StatusACHSent
	ok.LastRunDate = prev.LastRunDate.Add(time.Second)
	if err := ValidateUpdate(&prev, &ok, false); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		mut  func(*Subscription)
		date bool
		want error
	}{
		{"user", func(s *Subscription) { s.UserID = "x" }, false, ErrInvalidItem},
		{"id", func(s *Subscription) { s.SubscriptionID = "x" }, false, ErrInvalidItem},
		{"date without admin", func(s *Subscription) { s.BillingDate = s.BillingDate.Add(time.Hour) }, false, ErrInvalidItem},
		{"illegal", func(s *Subscription) { s.Status = StatusRefunded }, false, ErrIllegalTransition},
		{"same last run", func(s *Subscription) { s.LastRunDate = prev.LastRunDate }, false, ErrInvalidItem},
		{"inactive", func(s *Subscription) { s.Status = StatusInactive }, false, ErrIllegalTransition},
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
