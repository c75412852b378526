package billingtest

import (
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/memory"
)

// prorationLines returns the lines a plan change from Basic ($10) to Plus
// ($20) at change, during the paid period paid ending at end, adds to the
// next charge: a credit and a charge, of the 16 days left of a 31-day
// period. The change's instant is given in another zone than UTC; a store
// reads it back as the same instant.
func prorationLines(paid, request string, change, end time.Time) []billing.Adjustment {
	const length = 31 * 24 * 3600
	return []billing.Adjustment{
		{Request: request, Description: "Unused time on Basic", Tier: "Basic:v1", PeriodID: paid,
			Start: change.In(time.FixedZone("CEST", 2*3600)), End: end, Length: length,
			Price: billing.Cents(1000), Amount: billing.Cents(516), Credit: true, Fraction: "1000*1382400/2678400"},
		{Request: request, Description: "Remaining time on Plus", Tier: "Plus:v2", PeriodID: paid,
			Start: change, End: end, Length: length,
			Price: billing.Cents(2000), Amount: billing.Cents(1032), Fraction: "2000*1382400/2678400"},
	}
}

// requireProration checks that got carries want's adjustments and balance,
// field by field, times compared with Equal: what a store read back, not
// only what encodes alike (diffStored compares encodings, which a codec
// that dropped the attributes would make equal).
func requireProration(t testing.TB, what string, got, want *billing.Period) {
	t.Helper()
	if got.Balance != want.Balance {
		t.Fatalf("%s: balance %s, want %s", what, got.Balance, want.Balance)
	}
	if len(got.Adjustments) != len(want.Adjustments) || (got.Adjustments == nil) != (want.Adjustments == nil) {
		t.Fatalf("%s: %d adjustments (nil %v), want %d (nil %v): %+v", what, len(got.Adjustments), got.Adjustments == nil,
			len(want.Adjustments), want.Adjustments == nil, got.Adjustments)
	}
	for i := range want.Adjustments {
		g, w := got.Adjustments[i], want.Adjustments[i]
		if !g.Start.Equal(w.Start) || !g.End.Equal(w.End) {
			t.Fatalf("%s: adjustment %d runs %v to %v, want %v to %v", what, i, g.Start, g.End, w.Start, w.End)
		}
		g.Start, g.End, w.Start, w.End = time.Time{}, time.Time{}, time.Time{}, time.Time{}
		if g != w {
			t.Fatalf("%s: adjustment %d is %+v, want %+v", what, i, g, w)
		}
	}
}

// newestRow returns the newest history row of the subscription among the
// user's rows.
func (e *repoEnv) newestRow(userID, subscriptionID string) billing.Period {
	e.t.Helper()
	var row billing.Period
	found := false
	for _, r := range e.historyRows(userID) {
		if r.SubscriptionID == subscriptionID && (!found || r.LastRunDate.After(row.LastRunDate)) {
			row, found = r, true
		}
	}
	if !found {
		e.t.Fatalf("no history row of subscription %s of user %s", subscriptionID, userID)
	}
	return row
}

// prorationCases cover a period's proration lines (billing_adjustments)
// and customer balance (billing_balance): kept on the record and its
// history rows by every write that carries them (Add, Update and the
// record it creates, AdminUpdate, AddAll), changed or removed by an
// update, and absent on a record without them.
func (s *repoSuite) prorationCases() []repoCase {
	ids := s.ids
	// prorated returns a SCHEDULED record of user on day n carrying the
	// lines of a change in the period before it, and a balance.
	prorated := func(user string, n int, balance billing.Amount) billing.Period {
		r := ids.record(user, day(n), billing.StatusScheduled)
		end := day(n)
		r.Amount, r.Adjustments, r.Balance = billing.Cents(2000), prorationLines(ids.subID(), "req-"+ids.subID(), end.AddDate(0, 0, -16), end), balance
		return r
	}
	return []repoCase{
		{"Writes", func(t *testing.T) {
			e := s.env(t, memory.Options{})
			u := ids.user()
			r := prorated(u, 0, billing.Cents(350))
			e.add(r)
			got := e.get(u, r.BillingDate)
			requireProration(t, "Get after Add", &got, &r)
			if d := diffStored(&got, &r); d != "" {
				t.Fatalf("record differs after the round trip: %s", d)
			}
			byID, err := e.repo.GetByID(e.ctx(), r.SubscriptionID)
			if err != nil {
				t.Fatalf("GetByID: %v", err)
			}
			requireProration(t, "GetByID after Add", &byID, &r)
			recs := e.list(u)
			if len(recs) != 1 {
				t.Fatalf("user has %d records, want 1", len(recs))
			}
			requireProration(t, "ListByUser after Add", &recs[0], &r)
			row := e.newestRow(u, r.SubscriptionID)
			requireProration(t, "history row of the Add", &row, &r)
			e.requireLastHistoryRow(r)

			// The collector records the charge (the record keeps its lines:
			// what it was charged for) and opens the next period, carrying
			// the lines of another change and what is left of the balance.
			charged := ids.next(got, billing.StatusACHSent)
			charged.Attempt = 1
			following := prorated(u, 31, billing.Cents(125))
			following.Adjustments = following.Adjustments[1:]
			if err := e.repo.Update(e.ctx(), &got, &charged, &following); err != nil {
				t.Fatalf("Update with a record to create: %v", err)
			}
			for _, w := range []billing.Period{charged, following} {
				got := e.get(u, w.BillingDate)
				requireProration(t, "Get after Update of "+string(w.Status), &got, &w)
				row := e.newestRow(u, w.SubscriptionID)
				requireProration(t, "history row after Update of "+string(w.Status), &row, &w)
			}

			// An update changes them (another change: a line more, the
			// balance spent) and removes them.
			stored := e.get(u, following.BillingDate)
			changed := ids.next(stored, billing.StatusScheduled)
			changed.Adjustments = append(prorationLines(ids.subID(), "req-2", day(20), day(31)), stored.Adjustments...)
			changed.Balance = 0
			e.update(stored, changed)
			got = e.get(u, following.BillingDate)
			requireProration(t, "Get after an Update changing them", &got, &changed)
			row = e.newestRow(u, changed.SubscriptionID)
			requireProration(t, "history row of an Update changing them", &row, &changed)

			cleared := ids.next(got, billing.StatusScheduled)
			cleared.Adjustments, cleared.Balance = nil, 0
			e.update(got, cleared)
			got = e.get(u, following.BillingDate)
			requireProration(t, "Get after an Update removing them", &got, &cleared)
			row = e.newestRow(u, cleared.SubscriptionID)
			requireProration(t, "history row of an Update removing them", &row, &cleared)
			RequireHistoryMatchesPrimary(t, e.repo, e.hist, u)

			// A date move writes them at the new key.
			moved := ids.next(got, billing.StatusScheduled)
			moved.BillingDate, moved.BillingPeriod = day(40), billing.BillingPeriod(day(40))
			moved.Adjustments, moved.Balance = changed.Adjustments, billing.Cents(1)
			if err := e.repo.AdminUpdate(e.ctx(), &got, &moved); err != nil {
				t.Fatalf("AdminUpdate: %v", err)
			}
			e.requireAbsent(u, day(31))
			got = e.get(u, day(40))
			requireProration(t, "Get after AdminUpdate", &got, &moved)
			row = e.newestRow(u, moved.SubscriptionID)
			requireProration(t, "history row of AdminUpdate", &row, &moved)

			// A record without them reads none.
			plain := ids.record(ids.user(), day(0), billing.StatusScheduled)
			e.add(plain)
			got = e.get(plain.UserID, day(0))
			requireProration(t, "a record without them", &got, &plain)
		}},
		{"AddAll", func(t *testing.T) {
			e := s.env(t, memory.Options{})
			u1, u2 := ids.user(), ids.user()
			// A record stored without them, that a batch replaces with
			// one carrying them; and new records, with and without.
			before := ids.record(u2, day(0), billing.StatusScheduled)
			e.addAll([]billing.Period{before})
			replaced := prorated(u2, 0, billing.Cents(999))
			replaced.SubscriptionID = before.SubscriptionID
			recs := []billing.Period{prorated(u1, 0, billing.Cents(350)), ids.record(u1, day(-31), billing.StatusCompleted), replaced}
			recs[1].Balance = billing.Cents(50)
			written := e.addAll(recs)
			e.requireAllStored(written)
			for i := range recs {
				got := e.get(recs[i].UserID, recs[i].BillingDate)
				requireProration(t, "Get after AddAll", &got, &recs[i])
				requireProration(t, "AddAll's returned record", &written[i], &recs[i])
				row := e.newestRow(recs[i].UserID, recs[i].SubscriptionID)
				requireProration(t, "history row of AddAll", &row, &recs[i])
			}
			for _, u := range []string{u1, u2} {
				RequireHistoryMatchesPrimary(t, e.repo, e.hist, u)
			}
		}},
	}
}
