package layout

import (
	"strconv"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/av"
)

// ItemInFlight reports whether a stored record's item carries an attempt
// whose outcome is not recorded ([billing.Period.InFlight]): an
// attempt number above the attempt count. It reads the two numbers
// only, so it answers for items that do not decode too.
func ItemInFlight(item map[string]av.AttributeValue) bool {
	num := func(name string) int {
		if v, ok := item[name].(*av.AttributeValueMemberN); ok {
			n, _ := strconv.Atoi(v.Value)
			return n
		}
		return 0
	}
	return num(AttrAttemptNumber) > num(AttrAttempt)
}

// AttemptAttributes are the attributes of a record's attempt count and
// latest attempt ([billing.Period.Attempt] and LastAttempt).
func AttemptAttributes() []string {
	return []string{AttrAttempt, AttrAttemptNumber, AttrAttemptKey, AttrAttemptAmount, AttrAttemptTier,
		AttrAttemptProcess, AttrAttemptStarted, AttrAttemptPresented, AttrAttemptInvoice, AttrAttemptInvoiceNumber}
}

// CarryOwned carries the library's own attributes of stored, the item a
// record replaces at its key (nil: none), onto prim and hist, the new
// record's item and history row, where the new record does not set them
// itself:
//   - the attempt (AttemptAttributes), onto both, unless prim has any of
//     them: a record's attempt count and latest attempt are part of its
//     state, and dropping them would let the next collection of the
//     period present an idempotency key it presented already;
//   - the reminder's claim (ReminderAttributes), onto prim only, unless
//     prim has any of them: a rewritten record is not reminded again for
//     a billing date it was reminded for;
//   - the due key (AttrDue), onto prim only, for the store's withDue to
//     recompute for the new record (or keep, as it keeps an existing
//     key when the table has no due shards).
//
// Each group is carried whole or not at all, so that an attempt count
// and number always come from one writer. The values are shared with
// stored.
func CarryOwned(prim, hist, stored map[string]av.AttributeValue) {
	if len(stored) == 0 {
		return
	}
	carry := func(group []string, items ...map[string]av.AttributeValue) {
		for _, name := range group {
			if _, ok := prim[name]; ok {
				return
			}
		}
		for _, name := range group {
			if v, ok := stored[name]; ok {
				for _, item := range items {
					if item != nil {
						item[name] = v
					}
				}
			}
		}
	}
	// The tax is fixed with the attempt ([billing.Period.Tax]): what the
	// attempt asked for includes it, so it goes with the attempt.
	carry(append(AttemptAttributes(), TaxAttributes()...), prim, hist)
	carry(ReminderAttributes(), prim)
	carry([]string{AttrDue}, prim)
}

// TaxAttributes are the attributes of a period's tax ([billing.Period.Tax]).
func TaxAttributes() []string { return []string{AttrTax, AttrTaxInclusive, AttrTaxDescription} }

// ProrationAttributes are the attributes of what a period charges besides
// its plan, which only the library writes: its proration lines, the
// customer's balance, its discounts, and the paid period a one-off charge
// charges a change of.
func ProrationAttributes() []string {
	return []string{AttrAdjustments, AttrBalance, AttrDiscounts, AttrChargeOf}
}

// CarryProration carries the proration attributes of stored, the item a
// host's batch (AddAll) replaces at its key (nil: none), onto prim and
// hist, the batch's item and history row, unless prim has any of them: a
// host that writes the record from what it knows (a reprice) does not
// know them, and dropping them would lose a customer's credit or balance,
// a coupon, or a charge's lines. A batch of records as read carries them
// itself.
func CarryProration(prim, hist, stored map[string]av.AttributeValue) {
	if len(stored) == 0 {
		return
	}
	group := ProrationAttributes()
	for _, name := range group {
		if _, ok := prim[name]; ok {
			return
		}
	}
	for _, name := range group {
		if v, ok := stored[name]; ok {
			prim[name] = v
			if hist != nil {
				hist[name] = v
			}
		}
	}
}

// CarryDunning carries billing_dunning of stored, the item a host's batch
// (AddAll) replaces at its key (nil: none), onto prim and hist, the
// batch's item and history row, unless prim has its own: a period's
// dunning ([billing.Period.Dunning]) is the library's own state, which a
// host writing the record from what it knows does not know, and dropping
// it would restart a schedule, send its notices again or forget a final
// action applied. It is carried on its own, not with the proration
// attributes (CarryProration), so that a batch record carrying its own
// lines or discounts still keeps it; a batch record carrying a dunning
// (a record as read) writes its own.
func CarryDunning(prim, hist, stored map[string]av.AttributeValue) {
	if _, ok := prim[AttrDunning]; ok {
		return
	}
	if v, ok := stored[AttrDunning]; ok {
		prim[AttrDunning] = v
		if hist != nil {
			hist[AttrDunning] = v
		}
	}
}

// OpenStatus reports whether a record in st is a user's open
// subscription on the legacy layout, which allows one a user: SCHEDULED
// or PAUSED, the statuses an active subscription's record always has one
// of (see [billing.ErrOpenSubscription]).
func OpenStatus(st billing.Status) bool {
	return st == billing.StatusScheduled || st == billing.StatusPaused
}
