package layout

import (
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/av"
	"github.com/stretchr/testify/require"
)

// prorationRecord is the record of testdata/items/proration_next_charge.json:
// the period after a paid March (2024-03-01 to 04-01, 31 days) in which the
// plan changed from Basic ($10) to Plus ($20) on the 16th, carrying the
// credit and the charge of that change, and a customer balance. The
// credit's start is given in another zone than UTC: it is written in UTC.
func prorationRecord() billing.Period {
	paid := "5d4c3b2a-1f0e-4d9c-8b7a-6f5e4d3c2b1a"
	change := time.Date(2024, 3, 16, 0, 0, 0, 0, time.UTC)
	end := time.Date(2024, 4, 1, 0, 0, 0, 0, time.UTC)
	return billing.Period{
		UserID: "user-4004", SubscriptionID: "0e1d2c3b-4a59-4687-9a6b-5c4d3e2f1a0b",
		BillingDate: end, BillingPeriod: "04/2024", Status: billing.StatusScheduled,
		Amount: billing.Cents(2000), Term: billing.TermMonthly, ReceiptTierName: "Plus:v2",
		Process:     billing.ProcessInitial,
		CreatedDate: time.Date(2024, 3, 1, 0, 0, 2, 0, time.UTC),
		LastRunDate: change.Add(250 * time.Millisecond),
		Adjustments: []billing.Adjustment{
			{Request: "req-plan-1", Description: "Unused time on Basic", Tier: "Basic:v1", PeriodID: paid,
				Start: change.In(time.FixedZone("CEST", 2*3600)), End: end, Length: 2678400,
				Price: billing.Cents(1000), Amount: billing.Cents(516), Credit: true, Fraction: "1000*1382400/2678400"},
			{Request: "req-plan-1", Description: "Remaining time on Plus", Tier: "Plus:v2", PeriodID: paid,
				Start: change, End: end, Length: 2678400,
				Price: billing.Cents(2000), Amount: billing.Cents(1032), Fraction: "2000*1382400/2678400"},
		},
		Balance: billing.Cents(350),
	}
}

// goldenAdjustments is billing_adjustments of prorationRecord, byte for
// byte: the lines in order, encoding/json's field order and omissions
// (no "credit" on the charge), amounts as strings, times RFC 3339 UTC.
const goldenAdjustments = `[` +
	`{"request":"req-plan-1","description":"Unused time on Basic","tier":"Basic:v1","period":"5d4c3b2a-1f0e-4d9c-8b7a-6f5e4d3c2b1a",` +
	`"start":"2024-03-16T00:00:00Z","end":"2024-04-01T00:00:00Z","length":2678400,"price":"10.00","amount":"5.16","credit":true,` +
	`"fraction":"1000*1382400/2678400"},` +
	`{"request":"req-plan-1","description":"Remaining time on Plus","tier":"Plus:v2","period":"5d4c3b2a-1f0e-4d9c-8b7a-6f5e4d3c2b1a",` +
	`"start":"2024-03-16T00:00:00Z","end":"2024-04-01T00:00:00Z","length":2678400,"price":"20.00","amount":"10.32",` +
	`"fraction":"2000*1382400/2678400"}]`

// requireSameAdjustments checks got against want field by field, times
// with Equal.
func requireSameAdjustments(t *testing.T, want, got []billing.Adjustment) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		w, g := want[i], got[i]
		require.True(t, w.Start.Equal(g.Start), "line %d start %v, want %v", i, g.Start, w.Start)
		require.True(t, w.End.Equal(g.End), "line %d end %v, want %v", i, g.End, w.End)
		require.Equal(t, time.UTC, g.Start.Location(), "line %d start read in UTC", i)
		w.Start, w.End, g.Start, g.End = time.Time{}, time.Time{}, time.Time{}, time.Time{}
		require.Equal(t, w, g, "line %d", i)
	}
}

// TestAdjustmentsRoundTrip: a period's lines (a credit and a charge) and
// balance are written as the two attributes, byte for byte as the
// fixture holds them, and read back equal; the item read back encodes to
// the same item, on the primary table and history.
func TestAdjustmentsRoundTrip(t *testing.T) {
	rec := prorationRecord()
	item, err := EncodeHistoryItem(&rec)
	require.NoError(t, err)
	require.Equal(t, &av.AttributeValueMemberS{Value: goldenAdjustments}, item[AttrAdjustments])
	require.Equal(t, &av.AttributeValueMemberS{Value: "3.50"}, item[AttrBalance])
	require.Equal(t, loadItem(t, "../../testdata/items/proration_next_charge.json"), item, "the fixture is this record")
	primary, err := EncodeItem(&rec)
	require.NoError(t, err)
	require.Equal(t, item[AttrAdjustments], primary[AttrAdjustments])
	require.Equal(t, item[AttrBalance], primary[AttrBalance])

	back, err := DecodeItem(item)
	require.NoError(t, err)
	require.Equal(t, billing.Cents(350), back.Balance)
	requireSameAdjustments(t, rec.Adjustments, back.Adjustments)
	require.Empty(t, ExtraAttributes(&back), "known attributes, not unknown ones")
	again, err := EncodeHistoryItem(&back)
	require.NoError(t, err)
	require.Equal(t, item, again)

	// A time written with an offset (by another writer) reads in UTC, and
	// is written back in UTC.
	offset := maps.Clone(item)
	offset[AttrAdjustments] = &av.AttributeValueMemberS{Value: strings.Replace(goldenAdjustments,
		`"start":"2024-03-16T00:00:00Z"`, `"start":"2024-03-16T02:00:00+02:00"`, 1)}
	require.NotEqual(t, item[AttrAdjustments], offset[AttrAdjustments])
	fromOffset, err := DecodeItem(offset)
	require.NoError(t, err)
	requireSameAdjustments(t, rec.Adjustments, fromOffset.Adjustments)
	again, err = EncodeHistoryItem(&fromOffset)
	require.NoError(t, err)
	require.Equal(t, item, again)

	// The charge Due computes is the same on the record read back.
	due, applied, left := back.Due()
	require.Equal(t, []billing.Amount{billing.Cents(2000 - 516 + 1032 - 350), billing.Cents(350), 0}, []billing.Amount{due, applied, left})
}

// TestAdjustmentsDeterministic: the same lines give the same bytes, in
// whatever zone their times are held, so stores comparing encodings
// (Flat.equal, a write-back's Diff) see no change; another amount is one.
func TestAdjustmentsDeterministic(t *testing.T) {
	a, b := prorationRecord(), prorationRecord()
	zone := time.FixedZone("EST", -5*3600)
	b.Adjustments = append([]billing.Adjustment(nil), b.Adjustments...)
	for i := range b.Adjustments {
		b.Adjustments[i].Start, b.Adjustments[i].End = b.Adjustments[i].Start.In(zone), b.Adjustments[i].End.In(zone)
	}
	var fa, fb Flat
	require.NoError(t, fa.Encode(&a, false))
	require.NoError(t, fb.Encode(&b, false))
	require.True(t, fa.equal(&fb))
	ia, _ := EncodeItem(&a)
	ib, _ := EncodeItem(&b)
	require.Equal(t, ia, ib)

	var d Diff
	d.Make(&fa, &fb, nil, nil, false)
	require.Zero(t, d.set&(1<<aAdjustments|1<<aBalance), "an unchanged encoding is not written back")

	c := prorationRecord()
	c.Adjustments = append([]billing.Adjustment(nil), c.Adjustments...)
	c.Adjustments[1].Amount++
	c.Balance = 0
	var fc Flat
	require.NoError(t, fc.Encode(&c, false))
	require.False(t, fa.equal(&fc))
	d.Make(&fa, &fc, nil, nil, false)
	require.Equal(t, attrSet(1<<aAdjustments), d.set&(1<<aAdjustments|1<<aBalance), "a changed line is written back")
	require.Equal(t, attrSet(1<<aBalance), d.remove, "a balance gone to zero is removed")
}

// TestAdjustmentsAbsent: items without the attributes (every item before
// them), or with them NULL, empty or an empty array, read as no lines and
// a zero balance; a record without them, or with an empty slice, writes
// neither.
func TestAdjustmentsAbsent(t *testing.T) {
	base := loadItem(t, "../../testdata/items/monthly_completed.json")
	require.NotContains(t, base, AttrAdjustments)
	require.NotContains(t, base, AttrBalance)
	s, err := DecodeItem(base)
	require.NoError(t, err)
	require.Nil(t, s.Adjustments)
	require.Zero(t, s.Balance)

	for _, v := range []struct {
		adj, bal av.AttributeValue
	}{
		{&av.AttributeValueMemberNULL{Value: true}, &av.AttributeValueMemberNULL{Value: true}},
		{&av.AttributeValueMemberS{Value: ""}, &av.AttributeValueMemberS{Value: ""}},
		{&av.AttributeValueMemberS{Value: "[]"}, &av.AttributeValueMemberS{Value: "0.00"}},
	} {
		item := loadItem(t, "../../testdata/items/monthly_completed.json")
		item[AttrAdjustments], item[AttrBalance] = v.adj, v.bal
		s, err := DecodeItem(item)
		require.NoError(t, err, "%v %v", v.adj, v.bal)
		require.Nil(t, s.Adjustments, "%v", v.adj)
		require.Zero(t, s.Balance, "%v", v.bal)
		again, err := EncodeHistoryItem(&s)
		require.NoError(t, err)
		require.Equal(t, base, again, "written without them")
	}

	s.Adjustments = []billing.Adjustment{}
	item, err := EncodeHistoryItem(&s)
	require.NoError(t, err)
	require.Equal(t, base, item, "an empty slice is no lines")
}

// TestAdjustmentsRefused: a bad billing_adjustments or billing_balance,
// read or written, is a FieldError naming it and wrapping ErrInvalidItem
// and its cause: malformed JSON on read; a negative balance, amount or
// price, more than 64 lines, a time past 9999 or a sum that overflows
// either way.
func TestAdjustmentsRefused(t *testing.T) {
	requireRefused := func(t *testing.T, err error, field string, cause error, what string) {
		t.Helper()
		var fe *billing.FieldError
		require.True(t, errors.As(err, &fe), "%s: err = %v, want a FieldError", what, err)
		require.Equal(t, field, fe.Field, "%s: %v", what, err)
		require.ErrorIs(t, err, billing.ErrInvalidItem, what)
		if cause != nil {
			require.ErrorIs(t, err, cause, what)
		}
	}
	line := `{"period":"p","start":"2024-03-16T00:00:00Z","end":"2024-04-01T00:00:00Z","length":1,"price":"1.00","amount":"1.00","fraction":"1*1/1"}`
	lines := func(n int) string { return "[" + strings.Repeat(line+",", n-1) + line + "]" }
	s := func(v string) av.AttributeValue { return &av.AttributeValueMemberS{Value: v} }
	for _, tt := range []struct {
		what  string
		attr  string
		value av.AttributeValue
		cause error
	}{
		{"not JSON", AttrAdjustments, s("[{"), nil},
		{"trailing text", AttrAdjustments, s(lines(1) + "x"), nil},
		{"an object", AttrAdjustments, s(line), nil},
		{"null", AttrAdjustments, s("null"), nil},
		{"an amount as a number", AttrAdjustments, s(`[{"amount":5.16}]`), billing.ErrInvalidAmount},
		{"a negative amount", AttrAdjustments, s(`[{"amount":"-5.16"}]`), billing.ErrInvalidAmount},
		{"a time not RFC 3339", AttrAdjustments, s(`[{"start":"2024-03-16"}]`), nil},
		{"a time past 9999 in UTC", AttrAdjustments, s(`[{"end":"9999-12-31T23:00:00-05:00"}]`), billing.ErrInvalidDate},
		{"65 lines", AttrAdjustments, s(lines(65)), billing.ErrInvalidAmount},
		{"a number", AttrAdjustments, &av.AttributeValueMemberN{Value: "1"}, nil},
		{"a negative balance", AttrBalance, s("-1.00"), billing.ErrInvalidAmount},
		{"a balance of three decimals", AttrBalance, s("1.005"), billing.ErrInvalidAmount},
		{"a balance as a number", AttrBalance, &av.AttributeValueMemberN{Value: "1.00"}, nil},
		{"a balance that overflows with billing_amount", AttrBalance, s(billing.MaxAmount.String()), billing.ErrInvalidAmount},
	} {
		item := loadItem(t, "../../testdata/items/monthly_completed.json")
		item[tt.attr] = tt.value
		_, err := DecodeItem(item)
		requireRefused(t, err, tt.attr, tt.cause, "read "+tt.what)
		require.ErrorContains(t, err, "user-1001", "read %s: the error names the item", tt.what)
	}
	// 64 lines are allowed.
	item := loadItem(t, "../../testdata/items/monthly_completed.json")
	item[AttrAdjustments] = s(lines(64))
	got, err := DecodeItem(item)
	require.NoError(t, err)
	require.Len(t, got.Adjustments, 64)

	for _, tt := range []struct {
		what  string
		field string
		mut   func(*billing.Period)
		cause error
	}{
		{"a negative balance", AttrBalance, func(p *billing.Period) { p.Balance = -1 }, billing.ErrInvalidAmount},
		{"a negative amount", AttrAdjustments, func(p *billing.Period) { p.Adjustments[0].Amount = -1 }, billing.ErrInvalidAmount},
		{"a negative price", AttrAdjustments, func(p *billing.Period) { p.Adjustments[1].Price = -1 }, billing.ErrInvalidAmount},
		{"65 lines", AttrAdjustments, func(p *billing.Period) {
			for len(p.Adjustments) < 65 {
				p.Adjustments = append(p.Adjustments, p.Adjustments[0])
			}
		}, billing.ErrInvalidAmount},
		{"a time past 9999", AttrAdjustments, func(p *billing.Period) {
			p.Adjustments[1].End = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
		}, billing.ErrInvalidDate},
		{"lines that overflow", AttrAdjustments, func(p *billing.Period) {
			p.Amount, p.Adjustments[0].Credit = billing.MaxAmount, false
		}, billing.ErrInvalidAmount},
		{"a balance that overflows", AttrBalance, func(p *billing.Period) {
			p.Adjustments, p.Amount, p.Balance = nil, billing.MaxAmount, 1
		}, billing.ErrInvalidAmount},
	} {
		rec := prorationRecord()
		rec.Adjustments = append([]billing.Adjustment(nil), rec.Adjustments...)
		tt.mut(&rec)
		_, err := EncodeItem(&rec)
		requireRefused(t, err, tt.field, tt.cause, "write "+tt.what)
		_, err = EncodeHistoryItem(&rec)
		requireRefused(t, err, tt.field, tt.cause, "write history "+tt.what)
		var f Flat
		requireRefused(t, f.EncodeRecord(&rec), tt.field, tt.cause, "encode "+tt.what)
	}
	// The largest sum that fits is stored.
	rec := prorationRecord()
	rec.Amount, rec.Balance = billing.MaxAmount-billing.Cents(1032-516), 0
	_, err = EncodeItem(&rec)
	require.NoError(t, err)
}

// TestChargeOfRoundTrip: a one-off charge's billing_charge_of is written
// as a string on the record and its history row, read back, and changes
// nothing else; a record without it (every period) writes none.
func TestChargeOfRoundTrip(t *testing.T) {
	rec := prorationRecord()
	plain, err := EncodeHistoryItem(&rec)
	require.NoError(t, err)
	require.NotContains(t, plain, AttrChargeOf)

	rec.ChargeOf = "2f0c5b1e-8d7a-4c3b-9e6f-1a2b3c4d5e6f"
	item, err := EncodeHistoryItem(&rec)
	require.NoError(t, err)
	require.Equal(t, &av.AttributeValueMemberS{Value: rec.ChargeOf}, item[AttrChargeOf])
	delete(item, AttrChargeOf)
	require.Equal(t, plain, item, "nothing else changes")
	primary, err := EncodeItem(&rec)
	require.NoError(t, err)
	require.Equal(t, &av.AttributeValueMemberS{Value: rec.ChargeOf}, primary[AttrChargeOf])

	back, err := DecodeItem(primary)
	require.NoError(t, err)
	require.Equal(t, rec.ChargeOf, back.ChargeOf)
	require.True(t, back.IsOneOff())
	require.Empty(t, ExtraAttributes(&back), "a known attribute, not an unknown one")
}
