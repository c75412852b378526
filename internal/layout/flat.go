package layout

import (
	"reflect"
	"strconv"
	"sync"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/av"
	"github.com/dynabill/billing/internal/timefmt"
)

// The codec of the legacy items works on a fixed table of the attributes
// it knows, numbered by attr, so that encoding, decoding and comparing a
// record allocate nothing per attribute: no lookup maps, no attribute
// values until an item is built, and one string for all the formatted
// text of an item.

// attr numbers the attributes of the legacy tables that the library
// knows, in the order encode writes them.
type attr uint8

const (
	aUserID attr = iota
	aBillingDate
	aBillingAmount
	aBillingStatus
	aTerm
	aSubscriptionID
	aBillingPeriod
	aTransactionID
	aPaymentError
	aReceiptAccountMask
	aReceiptTierName
	aReceiptPaymentType
	aPendingTier
	aAttemptKey
	aAttemptTier
	aProcess
	aUpdatedEvent
	aInitialRunDate
	aCompletionDate
	aLastRunDate
	aCreatedDate
	aAttemptStarted
	aAttemptPresented
	aBillingWeek
	aPauseDurationMonths
	aAnchorDay
	aInterval
	aAttempt
	aAttemptNumber
	aIsPendingDowngrade
	aNoRetry
	aAttemptAmount
	aAttemptProcess
	aPendingAmount
	aTrialEnd
	aTrialAmount
	aAfterTrial
	aAccessEnd
	aBalance
	aAdjustments
	aDiscounts
	aAttemptInvoice
	aAttemptInvoiceNumber
	aChargeOf
	aTax
	aTaxInclusive
	aTaxDescription
	aDunning
	numAttrs
)

// attrNames are the names of the known attributes, by attr.
var attrNames = [numAttrs]string{
	aUserID:               AttrUserID,
	aBillingDate:          AttrBillingDate,
	aBillingAmount:        AttrBillingAmount,
	aBillingStatus:        AttrBillingStatus,
	aTerm:                 AttrTerm,
	aSubscriptionID:       AttrSubscriptionID,
	aBillingPeriod:        AttrBillingPeriod,
	aTransactionID:        AttrTransactionID,
	aPaymentError:         AttrPaymentError,
	aReceiptAccountMask:   AttrReceiptAccountMask,
	aReceiptTierName:      AttrReceiptTierName,
	aReceiptPaymentType:   AttrReceiptPaymentType,
	aPendingTier:          AttrPendingTier,
	aAttemptKey:           AttrAttemptKey,
	aAttemptTier:          AttrAttemptTier,
	aProcess:              AttrProcess,
	aUpdatedEvent:         AttrUpdatedEvent,
	aInitialRunDate:       AttrInitialRunDate,
	aCompletionDate:       AttrCompletionDate,
	aLastRunDate:          AttrLastRunDate,
	aCreatedDate:          AttrCreatedDate,
	aAttemptStarted:       AttrAttemptStarted,
	aAttemptPresented:     AttrAttemptPresented,
	aBillingWeek:          AttrBillingWeek,
	aPauseDurationMonths:  AttrPauseDurationMonths,
	aAnchorDay:            AttrAnchorDay,
	aInterval:             AttrInterval,
	aAttempt:              AttrAttempt,
	aAttemptNumber:        AttrAttemptNumber,
	aIsPendingDowngrade:   AttrIsPendingDowngrade,
	aNoRetry:              AttrNoRetry,
	aAttemptAmount:        AttrAttemptAmount,
	aAttemptProcess:       AttrAttemptProcess,
	aPendingAmount:        AttrPendingAmount,
	aTrialEnd:             AttrTrialEnd,
	aTrialAmount:          AttrTrialAmount,
	aAfterTrial:           AttrAfterTrial,
	aAccessEnd:            AttrAccessEnd,
	aBalance:              AttrBalance,
	aAdjustments:          AttrAdjustments,
	aDiscounts:            AttrDiscounts,
	aAttemptInvoice:       AttrAttemptInvoice,
	aAttemptInvoiceNumber: AttrAttemptInvoiceNumber,
	aChargeOf:             AttrChargeOf,
	aTax:                  AttrTax,
	aTaxInclusive:         AttrTaxInclusive,
	aTaxDescription:       AttrTaxDescription,
	aDunning:              AttrDunning,
}

// attrOf returns the known attribute called name.
func attrOf(name string) (attr, bool) {
	switch name {
	case AttrUserID:
		return aUserID, true
	case AttrBillingDate:
		return aBillingDate, true
	case AttrBillingAmount:
		return aBillingAmount, true
	case AttrBillingStatus:
		return aBillingStatus, true
	case AttrTerm:
		return aTerm, true
	case AttrSubscriptionID:
		return aSubscriptionID, true
	case AttrBillingPeriod:
		return aBillingPeriod, true
	case AttrTransactionID:
		return aTransactionID, true
	case AttrPaymentError:
		return aPaymentError, true
	case AttrReceiptAccountMask:
		return aReceiptAccountMask, true
	case AttrReceiptTierName:
		return aReceiptTierName, true
	case AttrReceiptPaymentType:
		return aReceiptPaymentType, true
	case AttrPendingTier:
		return aPendingTier, true
	case AttrAttemptKey:
		return aAttemptKey, true
	case AttrAttemptTier:
		return aAttemptTier, true
	case AttrProcess:
		return aProcess, true
	case AttrUpdatedEvent:
		return aUpdatedEvent, true
	case AttrInitialRunDate:
		return aInitialRunDate, true
	case AttrCompletionDate:
		return aCompletionDate, true
	case AttrLastRunDate:
		return aLastRunDate, true
	case AttrCreatedDate:
		return aCreatedDate, true
	case AttrAttemptStarted:
		return aAttemptStarted, true
	case AttrAttemptPresented:
		return aAttemptPresented, true
	case AttrAttemptInvoice:
		return aAttemptInvoice, true
	case AttrAttemptInvoiceNumber:
		return aAttemptInvoiceNumber, true
	case AttrChargeOf:
		return aChargeOf, true
	case AttrBillingWeek:
		return aBillingWeek, true
	case AttrPauseDurationMonths:
		return aPauseDurationMonths, true
	case AttrAnchorDay:
		return aAnchorDay, true
	case AttrInterval:
		return aInterval, true
	case AttrAttempt:
		return aAttempt, true
	case AttrAttemptNumber:
		return aAttemptNumber, true
	case AttrIsPendingDowngrade:
		return aIsPendingDowngrade, true
	case AttrNoRetry:
		return aNoRetry, true
	case AttrAttemptAmount:
		return aAttemptAmount, true
	case AttrAttemptProcess:
		return aAttemptProcess, true
	case AttrPendingAmount:
		return aPendingAmount, true
	case AttrTrialEnd:
		return aTrialEnd, true
	case AttrTrialAmount:
		return aTrialAmount, true
	case AttrAfterTrial:
		return aAfterTrial, true
	case AttrAccessEnd:
		return aAccessEnd, true
	case AttrBalance:
		return aBalance, true
	case AttrAdjustments:
		return aAdjustments, true
	case AttrDiscounts:
		return aDiscounts, true
	case AttrTax:
		return aTax, true
	case AttrTaxInclusive:
		return aTaxInclusive, true
	case AttrTaxDescription:
		return aTaxDescription, true
	case AttrDunning:
		return aDunning, true
	}
	return 0, false
}

func isKnown(name string) bool {
	_, ok := attrOf(name)
	return ok
}

// stringField returns the plain string field of a, which is written when
// not empty, or nil when a is not one.
func stringField(s *billing.Period, a attr) *string {
	switch a {
	case aSubscriptionID:
		return &s.SubscriptionID
	case aBillingPeriod:
		return &s.BillingPeriod
	case aTransactionID:
		return &s.TransactionID
	case aPaymentError:
		return &s.PaymentError
	case aReceiptAccountMask:
		return &s.ReceiptAccountMask
	case aReceiptTierName:
		return &s.ReceiptTierName
	case aReceiptPaymentType:
		return &s.ReceiptPaymentType
	case aPendingTier:
		return &s.PendingTierName
	case aAttemptKey:
		return &s.LastAttempt.Key
	case aAttemptTier:
		return &s.LastAttempt.Tier
	case aAttemptInvoice:
		return &s.LastAttempt.Invoice
	case aAttemptInvoiceNumber:
		return &s.LastAttempt.InvoiceNumber
	case aChargeOf:
		return &s.ChargeOf
	}
	return nil
}

// timeField returns the timestamp field of a, written with a nine-digit
// fraction and omitted when zero, or nil when a is not one.
func timeField(s *billing.Period, a attr) *time.Time {
	switch a {
	case aInitialRunDate:
		return &s.InitialRunDate
	case aCompletionDate:
		return &s.CompletionDate
	case aLastRunDate:
		return &s.LastRunDate
	case aCreatedDate:
		return &s.CreatedDate
	case aAttemptStarted:
		return &s.LastAttempt.Started
	case aAttemptPresented:
		return &s.LastAttempt.Presented
	case aTrialEnd:
		return &s.TrialEnd
	case aAccessEnd:
		return &s.AccessEnd
	}
	return nil
}

// intField returns the optional number field of a and its inclusive
// bounds, or nil when a is not one.
func intField(s *billing.Period, a attr) (p *int, lo, hi int) {
	switch a {
	case aBillingWeek:
		return &s.BillingWeek, 0, 5
	case aPauseDurationMonths:
		return &s.PauseDurationMonths, 0, 1200
	case aAnchorDay:
		return &s.AnchorDay, 0, 31
	case aInterval:
		return &s.Interval, 0, billing.MaxInterval
	case aAttempt:
		return &s.Attempt, 0, 1 << 30
	case aAttemptNumber:
		return &s.LastAttempt.Number, 0, 1 << 30
	}
	return nil, 0, 0
}

// The attributes of each kind of field, in encode's order.
var (
	stringAttrs = []attr{aSubscriptionID, aBillingPeriod, aTransactionID, aPaymentError, aReceiptAccountMask,
		aReceiptTierName, aReceiptPaymentType, aPendingTier, aAttemptKey, aAttemptTier, aAttemptInvoice, aAttemptInvoiceNumber, aChargeOf}
	timeAttrs = []attr{aInitialRunDate, aCompletionDate, aLastRunDate, aCreatedDate, aAttemptStarted, aAttemptPresented, aTrialEnd, aAccessEnd}
	intAttrs  = [...]attr{aBillingWeek, aPauseDurationMonths, aAnchorDay, aInterval, aAttempt, aAttemptNumber}
)

// valKind is how an encoded attribute is written; vNone when it is not.
type valKind uint8

const (
	vNone    valKind = iota
	vS               // S: the string s
	vNanos           // S: t with a nine-digit fraction
	vSeconds         // S: t in whole seconds
	vAmount          // S: n as an amount ("4.99")
	vN               // N: n
	vBool            // BOOL true
)

// val is one encoded attribute, kept typed until an item is built: a
// timestamp is n Unix seconds and nsec nanoseconds.
type val struct {
	kind valKind
	nsec int32
	s    string
	n    int64
}

// timeVal is t written as kind (vNanos or vSeconds).
func timeVal(kind valKind, t time.Time) val {
	return val{kind: kind, n: t.Unix(), nsec: int32(t.Nanosecond())}
}

// time returns the instant of a timestamp value, in UTC.
func (v *val) time() time.Time { return time.Unix(v.n, int64(v.nsec)).UTC() }

// isS reports whether v is written as an S attribute.
func (v *val) isS() bool { return v.kind >= vS && v.kind <= vAmount }

// appendText appends the text of an S or N value.
func (v *val) appendText(b []byte) []byte {
	switch v.kind {
	case vS:
		return append(b, v.s...)
	case vNanos:
		b, _ = timefmt.AppendNanos(b, v.time()) // in range: encode checked it
		return b
	case vSeconds:
		b, _ = timefmt.AppendSeconds(b, v.time())
		return b
	case vAmount:
		return appendAmount(b, v.n)
	case vN:
		return strconv.AppendInt(b, v.n, 10)
	}
	return b
}

// equal reports whether v and w are written as the same attribute value.
func (v *val) equal(w *val) bool {
	if v.kind == w.kind {
		switch v.kind {
		case vNone, vBool:
			return true
		case vS:
			return v.s == w.s
		case vNanos:
			return v.n == w.n && v.nsec == w.nsec
		}
		return v.n == w.n
	}
	if !v.isS() || !w.isS() {
		return false
	}
	var a, b [64]byte
	return string(v.appendText(a[:0])) == string(w.appendText(b[:0]))
}

// appendAmount appends the text of [billing.Amount.String] for n >= 0.
func appendAmount(b []byte, n int64) []byte {
	u := uint64(n)
	b = strconv.AppendUint(b, u/100, 10)
	c := u % 100
	return append(b, '.', byte('0'+c/10), byte('0'+c%10))
}

// Flat is a record encoded as [EncodeItem] or [EncodeHistoryItem] encode
// it, without the map: the value of each known attribute, and the Extra
// and data_ attributes as the record holds them (not copied). Stores
// compare Flats and build items from them ([Flat.Item]) instead of
// comparing item maps. The zero Flat is an empty item.
type Flat struct {
	vals        [numAttrs]val
	extra, data map[string]av.AttributeValue
	// change is the history row's billing_change, "" for none.
	change string
	// request is the history row's billing_request, "" for none.
	request string
	// used is set by the Encode methods: f may hold an encoding, and is
	// emptied before the next one (or by NewFlat), not on Release.
	used bool
}

// A Flat is a kilobyte: kept off the stack of the goroutines that encode
// (each collection runs in one of its own, whose stack would grow to fit),
// and reused.
var flats = sync.Pool{New: func() any { return new(Flat) }}

// NewFlat returns an empty Flat, to give back with [Flat.Release] once
// nothing refers to it.
func NewFlat() *Flat {
	f := flats.Get().(*Flat)
	f.reset()
	return f
}

// reset empties f, if an Encode method filled it. A Flat is a kilobyte
// of pointers: emptying it once between two uses, not on Release and
// again on the next Encode, halves the clearing (and its write barriers
// while the GC runs).
func (f *Flat) reset() {
	if f.used {
		*f = Flat{}
	}
}

// Release gives f back for reuse; f must not be used after. What it
// holds is emptied when it is next taken.
func (f *Flat) Release() {
	flats.Put(f)
}

// Encode sets f to s encoded as [EncodeItem] does, with its data_
// attributes when history (checked as [EncodeHistoryItem] checks them,
// but without its last_run_date check). The errors are EncodeItem's.
func (f *Flat) Encode(s *billing.Period, history bool) error {
	f.reset()
	f.used = true
	return encodeFlat(f, s, history)
}

// EncodeHistory sets f to s encoded as [EncodeHistoryItem] does, with its
// errors.
func (f *Flat) EncodeHistory(s *billing.Period) error {
	f.reset()
	f.used = true
	if err := historyRowErr(s); err != nil {
		return err
	}
	return encodeFlat(f, s, true)
}

// EncodeRecord sets f to s encoded for both tables, with its data_
// attributes: the errors are those of [EncodeItem], then of
// [EncodeHistoryItem], as encoding both items in turn gives them.
func (f *Flat) EncodeRecord(s *billing.Period) error {
	f.reset()
	f.used = true
	if err := encodeFlat(f, s, false); err != nil {
		return err
	}
	if err := historyRowErr(s); err != nil {
		return err
	}
	return encodeData(f, s)
}

// Has reports whether the attribute called name is written.
func (f *Flat) Has(name string) bool {
	if a, ok := attrOf(name); ok {
		return f.vals[a].kind != vNone
	}
	if _, ok := f.extra[name]; ok {
		return true
	}
	if name == AttrChange {
		return f.change != ""
	}
	if name == AttrRequest {
		return f.request != ""
	}
	_, ok := f.data[name]
	return ok
}

// Item builds the item: EncodeItem's, or EncodeHistoryItem's when history
// (for a Flat encoded with its data_ attributes). Known attributes get new
// values that share one allocation per type and one string for their
// text; Extra and data_ values are the record's own, or clone's copies of
// them when clone is not nil.
func (f *Flat) Item(history bool, clone func(av.AttributeValue) av.AttributeValue) map[string]av.AttributeValue {
	item := make(map[string]av.AttributeValue, f.Len(history))
	var room []av.AttributeValueMemberS // change and request, with the known values
	if history {
		room = f.addKnown(item, allAttrs, 2)
	} else {
		f.addKnown(item, allAttrs, 0)
	}
	if clone == nil {
		clone = func(v av.AttributeValue) av.AttributeValue { return v }
	}
	for name, v := range f.extra {
		item[name] = clone(v)
	}
	if history {
		for name, v := range f.data {
			item[name] = clone(v)
		}
		if f.change != "" {
			room[0].Value = f.change
			item[AttrChange] = &room[0]
		}
		if f.request != "" {
			room[1].Value = f.request
			item[AttrRequest] = &room[1]
		}
	}
	return item
}

// Len returns the number of attributes of the item Item(history) builds.
func (f *Flat) Len(history bool) int {
	n := f.known() + len(f.extra)
	if history {
		n += len(f.data)
		if f.change != "" {
			n++
		}
		if f.request != "" {
			n++
		}
	}
	return n
}

// known returns the number of known attributes f writes.
func (f *Flat) known() int {
	n := 0
	for a := range numAttrs {
		if f.vals[a].kind != vNone {
			n++
		}
	}
	return n
}

// An item's new values are allocated together, in a block of a size that
// fits, instead of one allocation per type. N values are the numbers of
// intAttrs only.
type (
	fewValues struct {
		s [8 + 2]av.AttributeValueMemberS // 2 for a history row's change and request
		n [2]av.AttributeValueMemberN
		b [numBools]av.AttributeValueMemberBOOL
	}
	allValues struct {
		s [int(numAttrs) - len(intAttrs) - numBools + 2]av.AttributeValueMemberS // all but numbers and booleans, and 2 as in fewValues
		n [len(intAttrs)]av.AttributeValueMemberN
		b [numBools]av.AttributeValueMemberBOOL
	}
)

// numBools is the number of BOOL attributes: is_pending_downgrade,
// billing_no_retry, billing_after_trial and billing_tax_inclusive.
const numBools = 4

// newValues returns ns S, nn N and nb BOOL values to fill, allocated
// together.
func newValues(ns, nn, nb int) ([]av.AttributeValueMemberS, []av.AttributeValueMemberN, []av.AttributeValueMemberBOOL) {
	switch {
	case ns+nn+nb == 0:
		return nil, nil, nil
	case ns <= len(fewValues{}.s) && nn <= 2:
		v := new(fewValues)
		return v.s[:ns], v.n[:nn], v.b[:nb]
	}
	v := new(allValues)
	return v.s[:ns], v.n[:nn], v.b[:nb]
}

// attrSet is a set of known attributes, bit a for attribute a.
type attrSet uint64

const allAttrs = attrSet(1)<<numAttrs - 1

// addKnown puts the known attributes of f that are in set into item: new
// values (see values). It returns extra more S values (at most 2),
// allocated with them.
func (f *Flat) addKnown(item map[string]av.AttributeValue, set attrSet, extra int) []av.AttributeValueMemberS {
	var vals [numAttrs]av.AttributeValue
	room := f.values(set, &vals, extra)
	for a := range numAttrs {
		if vals[a] != nil {
			item[attrNames[a]] = vals[a]
		}
	}
	return room
}

// values makes new values for the known attributes of f in set that f
// writes, into vals: one allocation for the values (see newValues) and one
// string for all their formatted text. It returns extra more S values (at
// most 2), allocated with them, for the caller to fill.
func (f *Flat) values(set attrSet, vals *[numAttrs]av.AttributeValue, extra int) []av.AttributeValueMemberS {
	ns, nn, nb := 0, 0, 0
	var buf [512]byte // the text of every formatted value: at most 8 times, 6 amounts and 6 numbers (billing_adjustments, billing_discounts, billing_tax_description and billing_dunning are vS, not formatted here)
	text := buf[:0]
	type span struct{ from, to int }
	var spans [numAttrs]span
	for a := range numAttrs {
		v := &f.vals[a]
		if set&(1<<a) == 0 {
			continue
		}
		switch v.kind {
		case vNone:
			continue
		case vBool:
			nb++
			continue
		case vN:
			nn++
		default:
			ns++
			if v.kind == vS {
				continue
			}
		}
		from := len(text)
		text = v.appendText(text)
		spans[a] = span{from, len(text)}
	}
	ss, nv, bv := newValues(ns+extra, nn, nb)
	room := ss[ns:]
	ss = ss[:ns]
	all := string(text)
	for a := range numAttrs {
		v := &f.vals[a]
		if set&(1<<a) == 0 {
			continue
		}
		switch v.kind {
		case vNone:
		case vBool:
			bv[0].Value = true
			vals[a] = &bv[0]
			bv = bv[1:]
		case vN:
			nv[0].Value = all[spans[a].from:spans[a].to]
			vals[a] = &nv[0]
			nv = nv[1:]
		case vS:
			ss[0].Value = v.s
			vals[a] = &ss[0]
			ss = ss[1:]
		default:
			ss[0].Value = all[spans[a].from:spans[a].to]
			vals[a] = &ss[0]
			ss = ss[1:]
		}
	}
	return room
}

// equal reports whether f and g encode the same item, as
// reflect.DeepEqual compares the items.
func (f *Flat) equal(g *Flat) bool {
	for a := range numAttrs {
		if !f.vals[a].equal(&g.vals[a]) {
			return false
		}
	}
	return sameItems(f.extra, g.extra) && sameItems(f.data, g.data) && f.change == g.change && f.request == g.request
}

// SameExceptAttempt reports whether f and g encode the same item but for
// the attempt attributes (billing_attempt and the in-flight attempt's).
func (f *Flat) SameExceptAttempt(g *Flat) bool {
	for a := range numAttrs {
		switch a {
		case aAttempt, aAttemptNumber, aAttemptKey, aAttemptAmount, aAttemptTier, aAttemptProcess, aAttemptStarted, aAttemptPresented,
			aAttemptInvoice, aAttemptInvoiceNumber:
			continue
		}
		if !f.vals[a].equal(&g.vals[a]) {
			return false
		}
	}
	return sameItems(f.extra, g.extra) && sameItems(f.data, g.data) && f.change == g.change && f.request == g.request
}

// sameItems compares two attribute maps as reflect.DeepEqual compares
// items, an absent map being an empty one.
func sameItems(a, b map[string]av.AttributeValue) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}

// Diff is DynamoDB's write-back update from prev to next, two encodings of
// a record for the primary table, computed apart from the stored item so
// that a store makes it (and its new values) before it locks the item and
// only applies it under the lock. Applied to the stored item of prev: an
// attribute whose encodings are equal keeps its stored value, a changed one
// takes next's, one only prev has is removed, and attributes in neither
// (unknown ones) stay. The key attributes (user_id, billing_date) are never
// written.
type Diff struct {
	set, remove attrSet
	vals        [numAttrs]av.AttributeValue // of set
	extraSet    map[string]av.AttributeValue
	extraRemove []string
}

// Make sets d to the write-back from prev to next. last_run_date is written
// even when unchanged if writeRunDate (Update's write-back always sets it).
// A value next writes is taken from src when it holds the attribute (the
// history row built from next, whose values may then be shared), else
// made anew; clone, when not nil, copies the Extra values.
func (d *Diff) Make(prev, next *Flat, src *Row, clone func(av.AttributeValue) av.AttributeValue, writeRunDate bool) {
	*d = Diff{}
	if clone == nil {
		clone = func(v av.AttributeValue) av.AttributeValue { return v }
	}
	var fresh attrSet // next's values to make
	for a := range numAttrs {
		if a == aUserID || a == aBillingDate {
			continue
		}
		p, n := &prev.vals[a], &next.vals[a]
		switch {
		case n.kind == vNone:
			if p.kind != vNone {
				d.remove |= 1 << a
			}
		case p.kind == vNone || writeRunDate && a == aLastRunDate || !p.equal(n):
			d.set |= 1 << a
			if v, ok := src.known(a); ok {
				d.vals[a] = v
			} else {
				fresh |= 1 << a
			}
		}
	}
	if fresh != 0 {
		next.values(fresh, &d.vals, 0)
	}
	for name, n := range next.extra {
		if p, ok := prev.extra[name]; !ok || !reflect.DeepEqual(p, n) {
			if d.extraSet == nil {
				d.extraSet = map[string]av.AttributeValue{}
			}
			d.extraSet[name] = clone(n)
		}
	}
	for name := range prev.extra {
		if _, ok := next.extra[name]; !ok {
			d.extraRemove = append(d.extraRemove, name)
		}
	}
}

// Apply makes the write-back on cur: assignments and deletions only.
func (d *Diff) Apply(cur map[string]av.AttributeValue) {
	for a := range numAttrs {
		switch {
		case d.set&(1<<a) != 0:
			cur[attrNames[a]] = d.vals[a]
		case d.remove&(1<<a) != 0:
			delete(cur, attrNames[a])
		}
	}
	for name, v := range d.extraSet {
		cur[name] = v
	}
	for _, name := range d.extraRemove {
		delete(cur, name)
	}
}
