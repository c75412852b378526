package billingtest

import (
	"slices"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/memory"
)

// suiteDunning returns the dunning of a period first declined at since
// for lack of funds, on its attempt 1, retried once and declined again
// asking the customer to confirm, with the two notices claimed. Its times
// are given in another zone than UTC, with fractions; a store reads them
// back as the same instants.
func suiteDunning(since time.Time) billing.Dunning {
	zone := time.FixedZone("EDT", -4*3600)
	return billing.Dunning{
		Since: since.In(zone), Attempt: 1, Kind: billing.DeclineAuthenticationRequired, Retries: 1,
		ActionURL: "https://pay.example/confirm?pi=pi_1&s=a",
		Notices: []billing.DunningNotice{
			{Kind: billing.PaymentFailedNoticeEvent, Attempt: 1, At: since.Add(1500 * time.Millisecond)},
			{Kind: billing.PaymentActionRequiredNoticeEvent, Attempt: 2, At: since.Add(24*time.Hour + 7).In(zone)},
		},
	}
}

// requireDunning checks that got carries want's dunning, field by field,
// times compared with Equal: what a store read back, not only what
// encodes alike (diffStored compares encodings, which a codec that
// dropped the attribute would make equal).
func requireDunning(t testing.TB, what string, got, want *billing.Period) {
	t.Helper()
	g, w := got.Dunning, want.Dunning
	if !g.Since.Equal(w.Since) || !g.Ended.Equal(w.Ended) {
		t.Fatalf("%s: dunning since %v ended %v, want since %v ended %v", what, g.Since, g.Ended, w.Since, w.Ended)
	}
	if len(g.Notices) != len(w.Notices) {
		t.Fatalf("%s: %d notices, want %d: %+v", what, len(g.Notices), len(w.Notices), g.Notices)
	}
	for i := range w.Notices {
		gn, wn := g.Notices[i], w.Notices[i]
		if !gn.At.Equal(wn.At) || gn.Kind != wn.Kind || gn.Attempt != wn.Attempt {
			t.Fatalf("%s: notice %d is %+v, want %+v", what, i, gn, wn)
		}
	}
	if g.Attempt != w.Attempt || g.Kind != w.Kind || g.Retries != w.Retries || g.ActionURL != w.ActionURL || g.End != w.End {
		t.Fatalf("%s: dunning %+v, want %+v", what, g, w)
	}
}

// dunningCases cover a period's dunning (billing_dunning): kept on the
// record and its history rows by every write that carries it (Add,
// Update and the record it creates, AdminUpdate, AddAll), changed,
// ended and removed by an update, absent (the zero Dunning) on a record
// without it, and kept by a host's batch written from what it knows,
// whatever else that batch carries.
func (s *repoSuite) dunningCases() []repoCase {
	ids := s.ids
	// declined returns an ERROR record of user on day n, declined on its
	// first attempt and in dunning.
	declined := func(user string, n int) billing.Period {
		r := ids.record(user, day(n), billing.StatusError)
		r.Amount, r.Attempt, r.PaymentError, r.Process = billing.Cents(2000), 1, "insufficient funds", billing.ProcessInitial
		r.Dunning = suiteDunning(day(n).Add(8*time.Hour + 250*time.Millisecond))
		return r
	}
	return []repoCase{
		{"Writes", func(t *testing.T) {
			e := s.env(t, memory.Options{})
			u := ids.user()
			r := declined(u, 0)
			e.add(r)
			got := e.get(u, r.BillingDate)
			requireDunning(t, "Get after Add", &got, &r)
			if d := diffStored(&got, &r); d != "" {
				t.Fatalf("record differs after the round trip: %s", d)
			}
			byID, err := e.repo.GetByID(e.ctx(), r.SubscriptionID)
			if err != nil {
				t.Fatalf("GetByID: %v", err)
			}
			requireDunning(t, "GetByID after Add", &byID, &r)
			recs := e.list(u)
			if len(recs) != 1 {
				t.Fatalf("user has %d records, want 1", len(recs))
			}
			requireDunning(t, "ListByUser after Add", &recs[0], &r)
			row := e.newestRow(u, r.SubscriptionID)
			requireDunning(t, "history row of the Add", &row, &r)
			e.requireLastHistoryRow(r)

			// The retry run records another decline (a retry more, a
			// notice more) and opens the next period, without a dunning.
			again := ids.next(got, billing.StatusError)
			again.Attempt, again.Process = 2, billing.ProcessRetry
			again.Dunning.Retries = 2
			again.Dunning.Notices = append(slices.Clone(got.Dunning.Notices),
				billing.DunningNotice{Kind: billing.PaymentFinalNoticeEvent, Attempt: 2, At: got.Dunning.Since.Add(49 * time.Hour)})
			following := ids.record(u, day(31), billing.StatusScheduled)
			following.SubscriptionID = ids.subID()
			if err := e.repo.Update(e.ctx(), &got, &again, &following); err != nil {
				t.Fatalf("Update with a record to create: %v", err)
			}
			for _, w := range []billing.Period{again, following} {
				got := e.get(u, w.BillingDate)
				requireDunning(t, "Get after Update of "+string(w.Status), &got, &w)
				row := e.newestRow(u, w.SubscriptionID)
				requireDunning(t, "history row after Update of "+string(w.Status), &row, &w)
			}
			if got := e.get(u, following.BillingDate); got.Dunning.Started() {
				t.Fatalf("a record written without a dunning reads one: %+v", got.Dunning)
			}

			// A date move writes it at the new key.
			got = e.get(u, r.BillingDate)
			moved := ids.next(got, billing.StatusError)
			moved.BillingDate, moved.BillingPeriod = day(5), billing.BillingPeriod(day(5))
			if err := e.repo.AdminUpdate(e.ctx(), &got, &moved); err != nil {
				t.Fatalf("AdminUpdate: %v", err)
			}
			e.requireAbsent(u, r.BillingDate)
			got = e.get(u, day(5))
			requireDunning(t, "Get after AdminUpdate", &got, &moved)
			row = e.newestRow(u, moved.SubscriptionID)
			requireDunning(t, "history row of AdminUpdate", &row, &moved)

			// A payment ends it (recovered), and an update removes it.
			paid := ids.next(got, billing.StatusACHSent)
			paid.Attempt = 3
			paid.Dunning.Ended, paid.Dunning.End = paid.Dunning.Since.Add(50*time.Hour+3).In(time.FixedZone("X", 3600)), billing.DunningRecovered
			e.update(got, paid)
			got = e.get(u, day(5))
			requireDunning(t, "Get after an Update ending it", &got, &paid)
			row = e.newestRow(u, paid.SubscriptionID)
			requireDunning(t, "history row of an Update ending it", &row, &paid)

			cleared := ids.next(got, billing.StatusCompleted)
			cleared.Dunning = billing.Dunning{}
			e.update(got, cleared)
			got = e.get(u, day(5))
			requireDunning(t, "Get after an Update removing it", &got, &cleared)
			row = e.newestRow(u, cleared.SubscriptionID)
			requireDunning(t, "history row of an Update removing it", &row, &cleared)
			RequireHistoryMatchesPrimary(t, e.repo, e.hist, u)
		}},
		{"AddAll", func(t *testing.T) {
			e := s.env(t, memory.Options{})
			u1, u2 := ids.user(), ids.user()
			// A record stored without one, that a batch replaces with one
			// carrying it; and new records, with and without.
			before := ids.record(u2, day(0), billing.StatusError)
			before.Attempt = 1
			e.addAll([]billing.Period{before})
			replaced := declined(u2, 0)
			replaced.SubscriptionID = before.SubscriptionID
			ended := declined(u1, -31)
			ended.Status = billing.StatusCompleted
			ended.Dunning.Ended, ended.Dunning.End = day(-20), billing.DunningRecovered
			recs := []billing.Period{declined(u1, 0), ended, replaced, ids.record(u1, day(31), billing.StatusScheduled)}
			written := e.addAll(recs)
			e.requireAllStored(written)
			for i := range recs {
				got := e.get(recs[i].UserID, recs[i].BillingDate)
				requireDunning(t, "Get after AddAll", &got, &recs[i])
				requireDunning(t, "AddAll's returned record", &written[i], &recs[i])
				row := e.newestRow(recs[i].UserID, recs[i].SubscriptionID)
				requireDunning(t, "history row of AddAll", &row, &recs[i])
			}
			for _, u := range []string{u1, u2} {
				RequireHistoryMatchesPrimary(t, e.repo, e.hist, u)
			}
		}},
		{"AddAllFromScratch", func(t *testing.T) {
			// A host's batch that writes a record from what it knows (a
			// reprice) over one in dunning keeps the dunning, on the
			// record and its history row, also when the batch record
			// carries proration lines and discounts of its own (the
			// dunning is carried apart from them); a batch record carrying
			// its own dunning writes that.
			e := s.env(t, memory.Options{})
			u := ids.user()
			stored := declined(u, 0)
			e.add(stored)
			scratch := ids.record(u, day(0), billing.StatusError)
			scratch.SubscriptionID, scratch.Amount, scratch.Attempt = stored.SubscriptionID, billing.Cents(2500), 1
			e.addAll([]billing.Period{scratch})
			got := e.get(u, day(0))
			if got.Amount != billing.Cents(2500) {
				t.Fatalf("the batch's amount was not written: %s", got.Amount)
			}
			requireDunning(t, "Get after AddAll from scratch", &got, &stored)
			row := e.newestRow(u, stored.SubscriptionID)
			requireDunning(t, "history row of AddAll from scratch", &row, &stored)
			RequireHistoryMatchesPrimary(t, e.repo, e.hist, u)
			// The identical batch again (a retry) finds its row stored,
			// with the dunning carried: it writes nothing.
			recs, hist := e.snapshot(u)
			e.addAll([]billing.Period{scratch})
			e.requireUnchanged(u, recs, hist)

			lines := ids.record(u, day(0), billing.StatusError)
			lines.SubscriptionID, lines.Amount, lines.Attempt = stored.SubscriptionID, billing.Cents(2000), 1
			lines.Adjustments = prorationLines(ids.subID(), "req-"+ids.subID(), day(-15), day(0))
			lines.Discounts = suiteDiscounts("req-"+ids.subID(), 1)
			e.addAll([]billing.Period{lines})
			got = e.get(u, day(0))
			requireProration(t, "Get after AddAll with its own lines", &got, &lines)
			requireDiscounts(t, "Get after AddAll with its own lines", &got, &lines)
			requireDunning(t, "Get after AddAll with its own lines", &got, &stored)
			row = e.newestRow(u, stored.SubscriptionID)
			requireDunning(t, "history row of AddAll with its own lines", &row, &stored)

			own := got
			own.Dunning = suiteDunning(day(0).Add(9 * time.Hour))
			own.Dunning.Notices = own.Dunning.Notices[:1]
			own.LastRunDate = own.LastRunDate.Add(time.Second)
			e.addAll([]billing.Period{own})
			got = e.get(u, day(0))
			requireDunning(t, "Get after AddAll with its own dunning", &got, &own)
			row = e.newestRow(u, stored.SubscriptionID)
			requireDunning(t, "history row of AddAll with its own dunning", &row, &own)
			RequireHistoryMatchesPrimary(t, e.repo, e.hist, u)
		}},
	}
}
