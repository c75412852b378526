package layout

import (
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/av"
	"github.com/stretchr/testify/require"
)

// discountRecord is the record of testdata/items/discounts_next_charge.json:
// the May period of a Plus ($20) subscription carrying two coupons in the
// order applied: 20 % off for this charge and the next, typed as a
// promotion code, and $5 off for ever, applied by its ID.
func discountRecord() billing.Period {
	return billing.Period{
		UserID: "user-4005", SubscriptionID: "7a6b5c4d-3e2f-4a1b-8c9d-0e1f2a3b4c5d",
		BillingDate: time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC), BillingPeriod: "05/2024", Status: billing.StatusScheduled,
		Amount: billing.Cents(2000), Term: billing.TermMonthly, ReceiptTierName: "Plus:v2",
		Process:     billing.ProcessInitial,
		CreatedDate: time.Date(2024, 4, 1, 0, 0, 2, 0, time.UTC),
		LastRunDate: time.Date(2024, 4, 1, 0, 0, 2, 500_000_000, time.UTC),
		Discounts: []billing.Discount{
			{CouponID: "WELCOME20", Code: "welcome", Request: "req-coupon-1", PercentOff: 2000, ChargesLeft: 2},
			{CouponID: "LOYAL5", Request: "req-coupon-2", AmountOff: billing.Cents(500), ChargesLeft: -1},
		},
	}
}

// goldenDiscounts is billing_discounts of discountRecord, byte for byte:
// the discounts in order, encoding/json's field order and omissions (no
// "code" or "percent_off" on the second, no "amount_off" on the first),
// the amount off as a string, charges_left always written.
const goldenDiscounts = `[` +
	`{"coupon":"WELCOME20","code":"welcome","request":"req-coupon-1","percent_off":2000,"charges_left":2},` +
	`{"coupon":"LOYAL5","request":"req-coupon-2","amount_off":"5.00","charges_left":-1}]`

// TestDiscountsRoundTrip: a period's discounts are written as
// billing_discounts, byte for byte as the fixture holds them, on the
// primary table and history, and read back equal; the item read back
// encodes to the same item. Another writer's text of the same discounts
// (other spacing and key order, an unknown field, a literal '<') reads
// the same and is written back in the library's form.
func TestDiscountsRoundTrip(t *testing.T) {
	rec := discountRecord()
	item, err := EncodeHistoryItem(&rec)
	require.NoError(t, err)
	require.Equal(t, &av.AttributeValueMemberS{Value: goldenDiscounts}, item[AttrDiscounts])
	require.Equal(t, loadItem(t, "../../testdata/items/discounts_next_charge.json"), item, "the fixture is this record")
	primary, err := EncodeItem(&rec)
	require.NoError(t, err)
	require.Equal(t, item[AttrDiscounts], primary[AttrDiscounts])

	back, err := DecodeItem(item)
	require.NoError(t, err)
	require.Equal(t, rec.Discounts, back.Discounts)
	require.Empty(t, ExtraAttributes(&back), "a known attribute, not an unknown one")
	again, err := EncodeHistoryItem(&back)
	require.NoError(t, err)
	require.Equal(t, item, again)

	other := maps.Clone(item)
	other[AttrDiscounts] = &av.AttributeValueMemberS{Value: ` [ {"charges_left": 2, "percent_off": 2000, "request": "req-coupon-1", ` +
		`"code": "welcome", "coupon": "WELCOME20", "redeemed_at": "2024-04-01"},` + "\n" +
		`{"coupon":"LOYAL5","request":"req-coupon-2","amount_off":"5.00","charges_left":-1} ] `}
	fromOther, err := DecodeItem(other)
	require.NoError(t, err)
	require.Equal(t, rec.Discounts, fromOther.Discounts)
	again, err = EncodeHistoryItem(&fromOther)
	require.NoError(t, err)
	require.Equal(t, item, again)

	html := maps.Clone(item)
	html[AttrDiscounts] = &av.AttributeValueMemberS{Value: `[{"coupon":"A<B>&C","request":"r","percent_off":1,"charges_left":0}]`}
	fromHTML, err := DecodeItem(html)
	require.NoError(t, err)
	require.Equal(t, []billing.Discount{{CouponID: "A<B>&C", Request: "r", PercentOff: 1}}, fromHTML.Discounts)
	again, err = EncodeHistoryItem(&fromHTML)
	require.NoError(t, err)
	require.Equal(t, &av.AttributeValueMemberS{Value: `[{"coupon":"A\u003cB\u003e\u0026C","request":"r","percent_off":1,"charges_left":0}]`},
		again[AttrDiscounts], "encoding/json's escapes, whoever wrote it")
}

// TestDiscountsDeterministic: the same discounts give the same bytes, so
// stores comparing encodings (Flat.equal, a write-back's Diff) see no
// change; a changed discount is written back, and discounts gone are
// removed.
func TestDiscountsDeterministic(t *testing.T) {
	a, b := discountRecord(), discountRecord()
	var fa, fb Flat
	require.NoError(t, fa.Encode(&a, false))
	require.NoError(t, fb.Encode(&b, false))
	require.True(t, fa.equal(&fb))
	ia, _ := EncodeItem(&a)
	ib, _ := EncodeItem(&b)
	require.Equal(t, ia, ib)

	var d Diff
	d.Make(&fa, &fb, nil, nil, false)
	require.Zero(t, d.set&(1<<aDiscounts), "an unchanged encoding is not written back")

	c := discountRecord()
	c.Discounts = slices.Clone(c.Discounts)
	c.Discounts[0].ChargesLeft--
	var fc Flat
	require.NoError(t, fc.Encode(&c, false))
	require.False(t, fa.equal(&fc))
	d.Make(&fa, &fc, nil, nil, false)
	require.Equal(t, attrSet(1<<aDiscounts), d.set, "a changed discount is written back, alone")
	cur := maps.Clone(ia)
	d.Apply(cur)
	ic, _ := EncodeItem(&c)
	require.Equal(t, ic, cur)

	c.Discounts = nil
	require.NoError(t, fc.Encode(&c, false))
	d.Make(&fa, &fc, nil, nil, false)
	require.Zero(t, d.set)
	require.Equal(t, attrSet(1<<aDiscounts), d.remove, "discounts gone are removed")
}

// TestDiscountsAbsent: items without billing_discounts (every item before
// it), or with it NULL, empty or an empty array, read as no discounts; a
// record without them, or with an empty slice, does not write it.
func TestDiscountsAbsent(t *testing.T) {
	base := loadItem(t, "../../testdata/items/monthly_completed.json")
	require.NotContains(t, base, AttrDiscounts)
	s, err := DecodeItem(base)
	require.NoError(t, err)
	require.Nil(t, s.Discounts)

	for _, v := range []av.AttributeValue{
		&av.AttributeValueMemberNULL{Value: true},
		&av.AttributeValueMemberS{Value: ""},
		&av.AttributeValueMemberS{Value: "[]"},
		&av.AttributeValueMemberS{Value: " [ ] "},
	} {
		item := loadItem(t, "../../testdata/items/monthly_completed.json")
		item[AttrDiscounts] = v
		s, err := DecodeItem(item)
		require.NoError(t, err, "%v", v)
		require.Nil(t, s.Discounts, "%v", v)
		again, err := EncodeHistoryItem(&s)
		require.NoError(t, err)
		require.Equal(t, base, again, "written without it")
	}

	s.Discounts = []billing.Discount{}
	item, err := EncodeHistoryItem(&s)
	require.NoError(t, err)
	require.Equal(t, base, item, "an empty slice is no discounts")
}

// TestDiscountsRefused: a bad billing_discounts, read or written, is a
// FieldError naming it and wrapping ErrInvalidItem (and ErrInvalidAmount
// for an amount off): malformed JSON on read; more than 8 discounts, a
// coupon ID empty or longer than 64 bytes, none or both of a percent and
// an amount off, a percent outside 1..10000, a negative amount off,
// charges left below -1, either way, the error showing the value at
// fault. The limits themselves are stored.
func TestDiscountsRefused(t *testing.T) {
	requireRefused := func(t *testing.T, err error, cause error, what string) {
		t.Helper()
		var fe *billing.FieldError
		require.True(t, errors.As(err, &fe), "%s: err = %v, want a FieldError", what, err)
		require.Equal(t, AttrDiscounts, fe.Field, "%s: %v", what, err)
		require.NotEmpty(t, fe.Value, "%s: the error shows the value at fault", what)
		require.ErrorIs(t, err, billing.ErrInvalidItem, what)
		if cause != nil {
			require.ErrorIs(t, err, cause, what)
		} else {
			require.NotErrorIs(t, err, billing.ErrInvalidAmount, what)
		}
	}
	one := `{"coupon":"C","request":"r","percent_off":500,"charges_left":1}`
	many := func(n int) string { return "[" + strings.Repeat(one+",", n-1) + one + "]" }
	s := func(v string) av.AttributeValue { return &av.AttributeValueMemberS{Value: v} }
	long := strings.Repeat("x", 65)
	for _, tt := range []struct {
		what  string
		value av.AttributeValue
		cause error
	}{
		{"not JSON", s("[{"), nil},
		{"trailing text", s(many(1) + "x"), nil},
		{"an object", s(one), nil},
		{"null", s("null"), nil},
		{"an array of null", s("[null]"), nil},
		{"a number", &av.AttributeValueMemberN{Value: "1"}, nil},
		{"a list", &av.AttributeValueMemberL{Value: []av.AttributeValue{s(one)}}, nil},
		{"9 discounts", s(many(9)), nil},
		{"no coupon", s(`[{"request":"r","percent_off":500,"charges_left":1}]`), nil},
		{"an empty coupon", s(`[{"coupon":"","percent_off":500,"charges_left":1}]`), nil},
		{"a coupon of 65 bytes", s(`[{"coupon":"` + long + `","percent_off":500,"charges_left":1}]`), nil},
		{"neither a percent nor an amount", s(`[{"coupon":"C","charges_left":1}]`), nil},
		{"a zero amount only", s(`[{"coupon":"C","amount_off":"0.00","charges_left":1}]`), nil},
		{"both a percent and an amount", s(`[{"coupon":"C","percent_off":500,"amount_off":"1.00","charges_left":1}]`), nil},
		{"a percent of 10001", s(`[{"coupon":"C","percent_off":10001,"charges_left":1}]`), nil},
		{"a negative percent", s(`[{"coupon":"C","percent_off":-1,"charges_left":1}]`), nil},
		{"a percent as a string", s(`[{"coupon":"C","percent_off":"500","charges_left":1}]`), nil},
		{"a fractional percent", s(`[{"coupon":"C","percent_off":2.5,"charges_left":1}]`), nil},
		{"charges left -2", s(`[{"coupon":"C","percent_off":500,"charges_left":-2}]`), nil},
		{"charges left past an int", s(`[{"coupon":"C","percent_off":500,"charges_left":99999999999999999999}]`), nil},
		{"an amount as a number", s(`[{"coupon":"C","amount_off":5.16,"charges_left":1}]`), billing.ErrInvalidAmount},
		{"a negative amount", s(`[{"coupon":"C","amount_off":"-5.16","charges_left":1}]`), billing.ErrInvalidAmount},
		{"an amount of three decimals", s(`[{"coupon":"C","amount_off":"5.165","charges_left":1}]`), billing.ErrInvalidAmount},
	} {
		item := loadItem(t, "../../testdata/items/monthly_completed.json")
		item[AttrDiscounts] = tt.value
		_, err := DecodeItem(item)
		requireRefused(t, err, tt.cause, "read "+tt.what)
		require.ErrorContains(t, err, "user-1001", "read %s: the error names the item", tt.what)
	}
	// The limits are read.
	item := loadItem(t, "../../testdata/items/monthly_completed.json")
	item[AttrDiscounts] = s(many(8))
	got, err := DecodeItem(item)
	require.NoError(t, err)
	require.Len(t, got.Discounts, 8)
	item[AttrDiscounts] = s(`[{"coupon":"` + long[1:] + `","percent_off":1,"charges_left":0},` +
		`{"coupon":"C","percent_off":10000,"charges_left":-1},{"coupon":"C","amount_off":"0.01","charges_left":1}]`)
	got, err = DecodeItem(item)
	require.NoError(t, err)
	require.Equal(t, []billing.Discount{{CouponID: long[1:], PercentOff: 1}, {CouponID: "C", PercentOff: 10000, ChargesLeft: -1},
		{CouponID: "C", AmountOff: 1, ChargesLeft: 1}}, got.Discounts)

	for _, tt := range []struct {
		what  string
		mut   func(*billing.Period)
		cause error
	}{
		{"9 discounts", func(p *billing.Period) {
			for len(p.Discounts) < 9 {
				p.Discounts = append(p.Discounts, p.Discounts[0])
			}
		}, nil},
		{"an empty coupon", func(p *billing.Period) { p.Discounts[1].CouponID = "" }, nil},
		{"a coupon of 65 bytes", func(p *billing.Period) { p.Discounts[0].CouponID = long }, nil},
		{"neither a percent nor an amount", func(p *billing.Period) { p.Discounts[1].AmountOff = 0 }, nil},
		{"both a percent and an amount", func(p *billing.Period) { p.Discounts[0].AmountOff = 1 }, nil},
		{"a percent of 10001", func(p *billing.Period) { p.Discounts[0].PercentOff = 10001 }, nil},
		{"a negative percent", func(p *billing.Period) { p.Discounts[1].PercentOff, p.Discounts[1].AmountOff = -1, 0 }, nil},
		{"charges left -2", func(p *billing.Period) { p.Discounts[1].ChargesLeft = -2 }, nil},
		{"a negative amount", func(p *billing.Period) { p.Discounts[1].AmountOff = -1 }, billing.ErrInvalidAmount},
	} {
		rec := discountRecord()
		rec.Discounts = slices.Clone(rec.Discounts)
		tt.mut(&rec)
		_, err := EncodeItem(&rec)
		requireRefused(t, err, tt.cause, "write "+tt.what)
		_, err = EncodeHistoryItem(&rec)
		requireRefused(t, err, tt.cause, "write history "+tt.what)
		var f Flat
		requireRefused(t, f.EncodeRecord(&rec), tt.cause, "encode "+tt.what)
	}
	// The limits are written, and read back.
	rec := discountRecord()
	rec.Discounts = []billing.Discount{{CouponID: long[1:], PercentOff: 1}, {CouponID: "C", PercentOff: 10000, ChargesLeft: -1},
		{CouponID: "C", AmountOff: billing.MaxAmount}}
	for len(rec.Discounts) < 8 {
		rec.Discounts = append(rec.Discounts, billing.Discount{CouponID: "D" + strconv.Itoa(len(rec.Discounts)), AmountOff: 1})
	}
	item, err = EncodeItem(&rec)
	require.NoError(t, err)
	got, err = DecodeItem(item)
	require.NoError(t, err)
	require.Equal(t, rec.Discounts, got.Discounts)
}
