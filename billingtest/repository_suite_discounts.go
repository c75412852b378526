package billingtest

import (
	"slices"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/memory"
)

// suiteDiscounts returns the discounts of a subscription that applied two
// coupons, in that order: 20 % off typed as a promotion code, with
// charges charges left, and $5 off for ever, applied by its ID.
func suiteDiscounts(request string, charges int) []billing.Discount {
	return []billing.Discount{
		{CouponID: "WELCOME20", Code: "welcome", Request: request + "-1", PercentOff: 2000, ChargesLeft: charges},
		{CouponID: "LOYAL5", Request: request + "-2", AmountOff: billing.Cents(500), ChargesLeft: -1},
	}
}

// requireDiscounts checks that got carries want's discounts, field by
// field and in order: what a store read back, not only what encodes alike
// (diffStored compares encodings, which a codec that dropped the
// attribute would make equal).
func requireDiscounts(t testing.TB, what string, got, want *billing.Period) {
	t.Helper()
	if len(got.Discounts) != len(want.Discounts) || (got.Discounts == nil) != (want.Discounts == nil) {
		t.Fatalf("%s: %d discounts (nil %v), want %d (nil %v): %+v", what, len(got.Discounts), got.Discounts == nil,
			len(want.Discounts), want.Discounts == nil, got.Discounts)
	}
	for i := range want.Discounts {
		if got.Discounts[i] != want.Discounts[i] {
			t.Fatalf("%s: discount %d is %+v, want %+v", what, i, got.Discounts[i], want.Discounts[i])
		}
	}
}

// discountCases cover a period's discounts (billing_discounts): kept on
// the record and its history rows by every write that carries them (Add,
// Update and the record it creates, AdminUpdate, AddAll), beside a
// period's proration lines and balance, changed or removed by an update,
// and absent on a record without them.
func (s *repoSuite) discountCases() []repoCase {
	ids := s.ids
	// discounted returns a SCHEDULED record of user on day n carrying
	// discounts, the first with charges charges left.
	discounted := func(user string, n, charges int) billing.Period {
		r := ids.record(user, day(n), billing.StatusScheduled)
		r.Amount, r.Discounts = billing.Cents(2000), suiteDiscounts("req-"+ids.subID(), charges)
		return r
	}
	return []repoCase{
		{"Writes", func(t *testing.T) {
			e := s.env(t, memory.Options{})
			u := ids.user()
			r := discounted(u, 0, 2)
			e.add(r)
			got := e.get(u, r.BillingDate)
			requireDiscounts(t, "Get after Add", &got, &r)
			if d := diffStored(&got, &r); d != "" {
				t.Fatalf("record differs after the round trip: %s", d)
			}
			byID, err := e.repo.GetByID(e.ctx(), r.SubscriptionID)
			if err != nil {
				t.Fatalf("GetByID: %v", err)
			}
			requireDiscounts(t, "GetByID after Add", &byID, &r)
			recs := e.list(u)
			if len(recs) != 1 {
				t.Fatalf("user has %d records, want 1", len(recs))
			}
			requireDiscounts(t, "ListByUser after Add", &recs[0], &r)
			row := e.newestRow(u, r.SubscriptionID)
			requireDiscounts(t, "history row of the Add", &row, &r)
			e.requireLastHistoryRow(r)

			// The collector records the charge (the record keeps its
			// discounts: what it was charged with) and opens the next
			// period, carrying the discounts with a charge less, beside
			// the lines of a plan change and a balance.
			charged := ids.next(got, billing.StatusACHSent)
			charged.Attempt = 1
			following := discounted(u, 31, 1)
			following.Adjustments = prorationLines(ids.subID(), "req-"+ids.subID(), day(15), day(31))
			following.Balance = billing.Cents(125)
			if err := e.repo.Update(e.ctx(), &got, &charged, &following); err != nil {
				t.Fatalf("Update with a record to create: %v", err)
			}
			for _, w := range []billing.Period{charged, following} {
				got := e.get(u, w.BillingDate)
				requireDiscounts(t, "Get after Update of "+string(w.Status), &got, &w)
				requireProration(t, "Get after Update of "+string(w.Status), &got, &w)
				row := e.newestRow(u, w.SubscriptionID)
				requireDiscounts(t, "history row after Update of "+string(w.Status), &row, &w)
				requireProration(t, "history row after Update of "+string(w.Status), &row, &w)
			}

			// An update changes them (the first used up, a coupon applied
			// later) and removes them, leaving the proration as it was.
			stored := e.get(u, following.BillingDate)
			changed := ids.next(stored, billing.StatusScheduled)
			changed.Discounts = append(slices.Clone(stored.Discounts[1:]),
				billing.Discount{CouponID: "SPRING", Request: "req-spring", PercentOff: 1, ChargesLeft: 0})
			e.update(stored, changed)
			got = e.get(u, following.BillingDate)
			requireDiscounts(t, "Get after an Update changing them", &got, &changed)
			requireProration(t, "Get after an Update changing discounts", &got, &following)
			row = e.newestRow(u, changed.SubscriptionID)
			requireDiscounts(t, "history row of an Update changing them", &row, &changed)

			cleared := ids.next(got, billing.StatusScheduled)
			cleared.Discounts = nil
			e.update(got, cleared)
			got = e.get(u, following.BillingDate)
			requireDiscounts(t, "Get after an Update removing them", &got, &cleared)
			requireProration(t, "Get after an Update removing discounts", &got, &following)
			row = e.newestRow(u, cleared.SubscriptionID)
			requireDiscounts(t, "history row of an Update removing them", &row, &cleared)
			RequireHistoryMatchesPrimary(t, e.repo, e.hist, u)

			// A date move writes them at the new key.
			moved := ids.next(got, billing.StatusScheduled)
			moved.BillingDate, moved.BillingPeriod = day(40), billing.BillingPeriod(day(40))
			moved.Discounts = changed.Discounts
			if err := e.repo.AdminUpdate(e.ctx(), &got, &moved); err != nil {
				t.Fatalf("AdminUpdate: %v", err)
			}
			e.requireAbsent(u, day(31))
			got = e.get(u, day(40))
			requireDiscounts(t, "Get after AdminUpdate", &got, &moved)
			row = e.newestRow(u, moved.SubscriptionID)
			requireDiscounts(t, "history row of AdminUpdate", &row, &moved)

			// A record without them reads none.
			plain := ids.record(ids.user(), day(0), billing.StatusScheduled)
			e.add(plain)
			got = e.get(plain.UserID, day(0))
			requireDiscounts(t, "a record without them", &got, &plain)
		}},
		{"AddAll", func(t *testing.T) {
			e := s.env(t, memory.Options{})
			u1, u2 := ids.user(), ids.user()
			// A record stored without them, that a batch replaces with
			// one carrying them; and new records, with and without.
			before := ids.record(u2, day(0), billing.StatusScheduled)
			e.addAll([]billing.Period{before})
			replaced := discounted(u2, 0, -1)
			replaced.SubscriptionID = before.SubscriptionID
			recs := []billing.Period{discounted(u1, 0, 3), ids.record(u1, day(-31), billing.StatusCompleted), replaced}
			recs[1].Discounts = suiteDiscounts("req-old", 0)[1:]
			written := e.addAll(recs)
			e.requireAllStored(written)
			for i := range recs {
				got := e.get(recs[i].UserID, recs[i].BillingDate)
				requireDiscounts(t, "Get after AddAll", &got, &recs[i])
				requireDiscounts(t, "AddAll's returned record", &written[i], &recs[i])
				row := e.newestRow(recs[i].UserID, recs[i].SubscriptionID)
				requireDiscounts(t, "history row of AddAll", &row, &recs[i])
			}
			for _, u := range []string{u1, u2} {
				RequireHistoryMatchesPrimary(t, e.repo, e.hist, u)
			}
		}},
		{"AddAllFromScratch", func(t *testing.T) {
			// A host's batch that writes a record from what it knows (a
			// reprice) over one carrying proration lines, a balance,
			// discounts and a one-off marker keeps them, on the record and
			// its history row; a batch record carrying its own keeps
			// those.
			e := s.env(t, memory.Options{})
			u := ids.user()
			stored := discounted(u, 0, 2)
			stored.Adjustments = prorationLines(ids.subID(), "req-"+ids.subID(), day(-15), day(0))
			stored.Balance = billing.Cents(350)
			stored.ChargeOf = ids.subID()
			e.addAll([]billing.Period{stored})
			scratch := ids.record(u, day(0), billing.StatusScheduled)
			scratch.SubscriptionID, scratch.Amount = stored.SubscriptionID, billing.Cents(2500)
			e.addAll([]billing.Period{scratch})
			got := e.get(u, day(0))
			if got.Amount != billing.Cents(2500) {
				t.Fatalf("the batch's amount was not written: %s", got.Amount)
			}
			requireDiscounts(t, "Get after AddAll from scratch", &got, &stored)
			if len(got.Adjustments) != len(stored.Adjustments) || got.Balance != stored.Balance || got.ChargeOf != stored.ChargeOf {
				t.Fatalf("AddAll from scratch dropped what the record carried: %d lines, balance %s, charge of %q; want %d, %s, %q",
					len(got.Adjustments), got.Balance, got.ChargeOf, len(stored.Adjustments), stored.Balance, stored.ChargeOf)
			}
			row := e.newestRow(u, stored.SubscriptionID)
			if len(row.Adjustments) != len(stored.Adjustments) || row.Balance != stored.Balance {
				t.Fatalf("the history row of AddAll from scratch dropped them: %d lines, balance %s", len(row.Adjustments), row.Balance)
			}
			RequireHistoryMatchesPrimary(t, e.repo, e.hist, u)

			own := got
			own.Adjustments, own.Discounts, own.Balance = nil, suiteDiscounts("req-own", 1)[:1], 0
			own.LastRunDate = own.LastRunDate.Add(time.Second)
			e.addAll([]billing.Period{own})
			got = e.get(u, day(0))
			requireDiscounts(t, "Get after AddAll with its own", &got, &own)
			if len(got.Adjustments) != 0 || got.Balance != 0 {
				t.Fatalf("a batch record carrying its own discounts took the stored lines too: %d lines, balance %s", len(got.Adjustments), got.Balance)
			}
		}},
	}
}
