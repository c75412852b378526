package layout

import (
	"fmt"
	"strconv"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/timefmt"
)

// CollisionPolicy makes the keys of a batch of records distinct before a
// batch write, which cannot hold two writes of one key. It returns the
// records to write (copies; the input is not modified) or an error when the
// collisions cannot be resolved.
//
// The stores default to the legacy rule, made deterministic: of the records
// of one user sharing a billing_date, the SCHEDULED one (else the first)
// keeps the date and every other moves to billing_date + N hours for the
// smallest free N >= 1 (two SCHEDULED records with one date are an error
// wrapping [billing.ErrAlreadyExists]); records of one user sharing a last_run_date
// get + N nanoseconds the same way.
//
// The policy sees only the batch. Keys already taken in the store are the
// store's to resolve: a record onto a stored record's key replaces it
// (see [billing.Repository.AddAll]), but a history row is never replaced: a
// record whose last_run_date another stored row holds moves on to a free
// one.
type CollisionPolicy = func(subs []billing.Period) ([]billing.Period, error)

// DefaultCollisionPolicy is the legacy service's SK collision rule for
// upgrade and downgrade batches, made deterministic:
//
//   - Records of one user sharing a billing_date form a group. The SCHEDULED
//     record of the group keeps the date (or, when none is SCHEDULED, the
//     first in input order does). Every other record, in input order, gets
//     billing_date + N hours for the smallest N >= 1 that is free in the
//     batch. Two SCHEDULED records with one date are an error wrapping
//     [billing.ErrAlreadyExists]: there is no rule for which one to move.
//   - Records of one user sharing a last_run_date (the history key) get
//     +N nanoseconds, in input order, for the smallest N >= 1 that is free.
//
// Every record must be encodable ([EncodeHistoryItem]); the first that is
// not is returned as the error, before anything is resolved. Rows stored
// already are not the policy's: the stores then place the history rows
// over them ([PlanHistoryRows]), never replacing one.
func DefaultCollisionPolicy(subs []billing.Period) ([]billing.Period, error) {
	out := make([]billing.Period, len(subs))
	for i := range subs {
		out[i] = subs[i].Clone()
		if err := checkHistoryItem(&out[i]); err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
	}
	// Sort keys: keep the SCHEDULED record of each group, move the others.
	taken := map[string]bool{}
	keeper := map[string]int{}
	for i := range out {
		k := out[i].UserID + "\x00" + BillingDateKey(&out[i])
		j, seen := keeper[k]
		switch {
		case !seen:
			keeper[k] = i
		case out[i].Status == billing.StatusScheduled && out[j].Status == billing.StatusScheduled:
			return nil, fmt.Errorf("%w: two SCHEDULED records for %s", billing.ErrAlreadyExists, out[i].Key())
		case out[i].Status == billing.StatusScheduled:
			keeper[k] = i
		}
		taken[k] = true
	}
	for i := range out {
		k := out[i].UserID + "\x00" + BillingDateKey(&out[i])
		if keeper[k] == i {
			continue
		}
		base := out[i].BillingDate.Truncate(time.Second)
		for n := 1; ; n++ {
			d := base.Add(time.Duration(n) * time.Hour)
			nk := out[i].UserID + "\x00" + d.UTC().Format(timefmt.SecondsLayout)
			if !taken[nk] {
				taken[nk] = true
				out[i].BillingDate = d.UTC()
				out[i].BillingPeriod = billing.BillingPeriod(d)
				break
			}
		}
	}
	// History keys.
	seen := map[string]bool{}
	for i := range out {
		seen[out[i].UserID+"\x00"+LastRunDateKey(&out[i])] = true
	}
	used := map[string]bool{}
	for i := range out {
		k := out[i].UserID + "\x00" + LastRunDateKey(&out[i])
		if !used[k] {
			used[k] = true
			continue
		}
		base := out[i].LastRunDate
		for n := 1; ; n++ {
			out[i].LastRunDate = base.Add(time.Duration(n))
			nk := out[i].UserID + "\x00" + LastRunDateKey(&out[i])
			if !used[nk] && !seen[nk] {
				used[nk] = true
				break
			}
		}
	}
	return out, nil
}

// ValidateUpdate checks that next may replace prev as [billing.Repository.Update]
// (dateChange false) or [billing.Repository.AdminUpdate] (dateChange true) require:
// the same user, the same subscription ID (a reopened cancelled period
// may take a new one), the same billing_date unless dateChange, a change
// [billing.CheckTransition] allows, and a later last_run_date.
// Storage implementations call it before writing; the error wraps
// [billing.ErrIllegalTransition] or [billing.ErrInvalidItem].
func ValidateUpdate(prev, next *billing.Period, dateChange bool) error {
	bad := func(field, value, why string) error {
		return &billing.FieldError{Field: field, Value: value, Key: prev.Key(), Err: fmt.Errorf("%w: %s", billing.ErrInvalidItem, why)}
	}
	if next.UserID != prev.UserID {
		return bad(AttrUserID, next.UserID, "an update cannot change user_id")
	}
	if !dateChange && BillingDateKey(next) != BillingDateKey(prev) {
		return bad(AttrBillingDate, BillingDateKey(next), "billing_date changed: use AdminUpdate")
	}
	if err := billing.CheckTransition(prev, next); err != nil {
		return fmt.Errorf("%s: %w", prev.Key(), err)
	}
	// A CANCELLED record changes only by being reopened (the check
	// above), as the first period of another request, maybe.
	if next.SubscriptionID != prev.SubscriptionID && (prev.Status != billing.StatusCancelled || dateChange) {
		return bad(AttrSubscriptionID, next.SubscriptionID, "an update cannot change subscription_id")
	}
	if !next.LastRunDate.After(prev.LastRunDate) {
		return bad(AttrLastRunDate, LastRunDateKey(next), "last_run_date must advance past "+LastRunDateKey(prev))
	}
	return checkHistoryItem(next)
}

// checkHistoryItem returns the error of EncodeHistoryItem(s), building no
// item.
func checkHistoryItem(s *billing.Period) error {
	f := NewFlat()
	defer f.Release()
	return f.EncodeHistory(s)
}

// ValidateAttemptUpdate checks a [billing.Repository.SetAttempt] of prev to next,
// as every store does before writing: next differs from prev in
// LastAttempt and Attempt only, neither goes backwards, an attempt to make
// durable has its key and start time, and next encodes. The tax
// ([billing.Period.Tax]) may change too, with the attempt it is fixed for:
// set on a record without one by a new attempt made durable, and taken
// off again by the withdrawal of that attempt.
func ValidateAttemptUpdate(prev, next *billing.Period) error {
	a, b := NewFlat(), NewFlat()
	defer a.Release()
	defer b.Release()
	return EncodeAttemptUpdate(prev, next, a, b)
}

// EncodeAttemptUpdate is [ValidateAttemptUpdate] leaving prev encoded in
// before and next in after (as Encode(s, false)) when it answers nil: the
// encodings a store writes the attempt back from, made once.
func EncodeAttemptUpdate(prev, next *billing.Period, before, after *Flat) error {
	bad := func(field, value, why string) error {
		return &billing.FieldError{Field: field, Value: value, Key: prev.Key(), Err: fmt.Errorf("%w: %s", billing.ErrInvalidItem, why)}
	}
	same := *next // encoded only, which reads its maps and never keeps it
	same.LastAttempt, same.Attempt = prev.LastAttempt, prev.Attempt
	// An attempt in flight that the processor refused before acting on it
	// is withdrawn: the record gets back the attempt it had before.
	withdrawn := prev.InFlight() && !next.InFlight() && next.Attempt == prev.Attempt
	started := next.InFlight() && next.LastAttempt.Number > prev.LastAttempt.Number
	if started && !prev.Tax.Fixed() || withdrawn && !next.Tax.Fixed() {
		same.Tax = prev.Tax // fixed for the attempt made, or off with the one withdrawn
	}
	_ = before.Encode(prev, false)
	if err := after.Encode(&same, false); err != nil {
		return err
	}
	if !before.equal(after) {
		return bad(AttrAttemptNumber, strconv.Itoa(next.LastAttempt.Number), "an attempt update changes nothing but the attempt (and the tax fixed for it)")
	}
	switch {
	case next.LastAttempt == prev.LastAttempt && next.Attempt == prev.Attempt:
		return bad(AttrAttemptNumber, strconv.Itoa(next.LastAttempt.Number), "an attempt update changes nothing")
	case next.Attempt < prev.Attempt || (next.LastAttempt.Number < prev.LastAttempt.Number && !withdrawn):
		return bad(AttrAttemptNumber, strconv.Itoa(next.LastAttempt.Number), "attempt numbers never go back")
	case next.Attempt > next.LastAttempt.Number && next.Attempt != prev.Attempt:
		return bad(AttrAttempt, strconv.Itoa(next.Attempt), "attempts are settled only up to the last attempt made")
	case next.InFlight() && (next.LastAttempt.Key == "" || next.LastAttempt.Started.IsZero()):
		return bad(AttrAttemptKey, next.LastAttempt.Key, "an attempt in flight needs its key and start time")
	}
	return after.Encode(next, false)
}

// ValidateCreates validates the records an update of prev to next
// creates ([billing.Repository.Update]), as the DynamoDB stores do before their
// transaction: each storable, and no two actions of the transaction on one
// item (DynamoDB rejects that), so records of prev's user must not share a
// key with prev, next or each other (a [*billing.ConflictError] wrapping
// [billing.ErrAlreadyExists]).
func ValidateCreates(prev, next *billing.Period, create []*billing.Period) error {
	usedP := map[string]bool{BillingDateKey(prev): true}
	usedH := map[string]bool{LastRunDateKey(next): true}
	for _, c := range create {
		if err := checkHistoryItem(c); err != nil {
			return err
		}
		if c.UserID == prev.UserID && (usedP[BillingDateKey(c)] || usedH[LastRunDateKey(c)]) {
			return &billing.ConflictError{Op: "update", Key: c.Key(), Reason: "two records of one update share a key", Err: billing.ErrAlreadyExists}
		}
		if c.UserID == prev.UserID {
			usedP[BillingDateKey(c)], usedH[LastRunDateKey(c)] = true, true
		}
	}
	return nil
}
