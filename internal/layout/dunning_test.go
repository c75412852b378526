package layout

import (
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/av"
	"github.com/stretchr/testify/require"
)

// dunningRecord is the record of testdata/items/dunning_declined.json: the
// June period of a Plus ($20) subscription, declined for lack of funds on
// its first attempt (the payment-failed notice claimed), retried once the
// next day and declined again, the bank asking the customer to confirm
// (the action-required notice claimed, with the processor's link); the
// dunning goes on.
func dunningRecord() billing.Period {
	since := time.Date(2024, 6, 1, 8, 0, 3, 250_000_000, time.UTC)
	return billing.Period{
		UserID: "user-4006", SubscriptionID: "8b7c6d5e-4f3a-4b2c-9d1e-0f1a2b3c4d5e",
		BillingDate: time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC), BillingPeriod: "06/2024", Status: billing.StatusError,
		Amount: billing.Cents(2000), Term: billing.TermMonthly, ReceiptTierName: "Plus:v2",
		Process: billing.ProcessRetry, Attempt: 2, PaymentError: "authentication required",
		CreatedDate:    time.Date(2024, 5, 1, 0, 0, 2, 0, time.UTC),
		InitialRunDate: since,
		LastRunDate:    time.Date(2024, 6, 2, 8, 0, 5, 0, time.UTC),
		Dunning: billing.Dunning{
			Since: since, Attempt: 1, Kind: billing.DeclineAuthenticationRequired, Retries: 1,
			ActionURL: "https://pay.example/confirm?pi=pi_123&s=abc",
			Notices: []billing.DunningNotice{
				{Kind: billing.PaymentFailedNoticeEvent, Attempt: 1, At: time.Date(2024, 6, 1, 8, 0, 4, 0, time.UTC)},
				{Kind: billing.PaymentActionRequiredNoticeEvent, Attempt: 2, At: time.Date(2024, 6, 2, 8, 0, 5, 500_000_000, time.UTC)},
			},
		},
	}
}

// goldenDunning is billing_dunning of dunningRecord, byte for byte:
// encoding/json's field order and omissions (no "ended" or "end" while it
// goes on), its escape of '&', and the times in last_run_date's
// nine-digit form (encoding/json would write "2024-06-01T08:00:04Z").
const goldenDunning = `{"since":"2024-06-01T08:00:03.250000000Z","attempt":1,"kind":"authentication_required","retries":1,` +
	`"action_url":"https://pay.example/confirm?pi=pi_123\u0026s=abc",` +
	`"notices":[{"kind":"payment_failed","attempt":1,"at":"2024-06-01T08:00:04.000000000Z"},` +
	`{"kind":"payment_action_required","attempt":2,"at":"2024-06-02T08:00:05.500000000Z"}]}`

// requireDunningEqual checks got against want field by field, times with
// Equal (a time read back is in UTC, whatever zone it was written from).
func requireDunningEqual(t *testing.T, want, got billing.Dunning, what string) {
	t.Helper()
	require.True(t, want.Since.Equal(got.Since), "%s: since %v, want %v", what, got.Since, want.Since)
	require.True(t, want.Ended.Equal(got.Ended), "%s: ended %v, want %v", what, got.Ended, want.Ended)
	require.Len(t, got.Notices, len(want.Notices), what)
	for i := range want.Notices {
		require.True(t, want.Notices[i].At.Equal(got.Notices[i].At), "%s: notice %d at %v, want %v", what, i, got.Notices[i].At, want.Notices[i].At)
		got.Notices[i].At = want.Notices[i].At
	}
	got.Since, got.Ended = want.Since, want.Ended
	require.Equal(t, want, got, what)
}

// TestDunningRoundTrip: a period's dunning is written as billing_dunning,
// byte for byte as the fixture holds it, on the primary table and
// history, and read back equal; the item read back encodes to the same
// item. An ended dunning writes its end; times in another zone are
// written in UTC and read back Equal. Another writer's text of the same
// dunning (other spacing and key order, times with offsets or without a
// fraction, an unknown field, a literal '&') reads the same and is written
// back in the library's form.
func TestDunningRoundTrip(t *testing.T) {
	rec := dunningRecord()
	item, err := EncodeHistoryItem(&rec)
	require.NoError(t, err)
	require.Equal(t, &av.AttributeValueMemberS{Value: goldenDunning}, item[AttrDunning])
	require.Equal(t, loadItem(t, "../../testdata/items/dunning_declined.json"), item, "the fixture is this record")
	primary, err := EncodeItem(&rec)
	require.NoError(t, err)
	require.Equal(t, item[AttrDunning], primary[AttrDunning])

	back, err := DecodeItem(item)
	require.NoError(t, err)
	require.Equal(t, rec.Dunning, back.Dunning)
	require.Empty(t, ExtraAttributes(&back), "a known attribute, not an unknown one")
	again, err := EncodeHistoryItem(&back)
	require.NoError(t, err)
	require.Equal(t, item, again)

	// Ended, recovered, with times in another zone.
	zone := time.FixedZone("EDT", -4*3600)
	ended := dunningRecord()
	ended.Dunning.Since = ended.Dunning.Since.In(zone)
	ended.Dunning.Notices = slices.Clone(ended.Dunning.Notices)
	ended.Dunning.Notices[1].At = ended.Dunning.Notices[1].At.In(zone)
	ended.Dunning.Ended, ended.Dunning.End = time.Date(2024, 6, 2, 12, 30, 0, 7, zone), billing.DunningRecovered
	item, err = EncodeHistoryItem(&ended)
	require.NoError(t, err)
	require.Equal(t, &av.AttributeValueMemberS{Value: strings.TrimSuffix(goldenDunning, "}") +
		`,"ended":"2024-06-02T16:30:00.000000007Z","end":"recovered"}`}, item[AttrDunning])
	back, err = DecodeItem(item)
	require.NoError(t, err)
	requireDunningEqual(t, ended.Dunning, back.Dunning, "ended")
	require.Equal(t, time.UTC, back.Dunning.Ended.Location())
	again, err = EncodeHistoryItem(&back)
	require.NoError(t, err)
	require.Equal(t, item, again)

	// Another writer's text.
	fixture := loadItem(t, "../../testdata/items/dunning_declined.json")
	other := maps.Clone(fixture)
	other[AttrDunning] = &av.AttributeValueMemberS{Value: ` { "notices": [ {"at": "2024-06-01T10:00:04+02:00", "attempt": 1, "kind": "payment_failed", "channel": "email"},` + "\n" +
		`{"kind":"payment_action_required","attempt":2,"at":"2024-06-02T08:00:05.5Z"} ], "retries": 1, "kind": "authentication_required",` +
		` "action_url": "https://pay.example/confirm?pi=pi_123&s=abc", "attempt": 1, "since": "2024-06-01T08:00:03.25Z", "next": 3 } `}
	fromOther, err := DecodeItem(other)
	require.NoError(t, err)
	require.Equal(t, rec.Dunning, fromOther.Dunning)
	again, err = EncodeHistoryItem(&fromOther)
	require.NoError(t, err)
	require.Equal(t, fixture, again)
}

// TestDunningWireMirrorsRoot: the codec's wire structs have the fields of
// billing.Dunning and DunningNotice, in order, with their JSON names and
// options, so a field added to the root's type fails here rather than
// being dropped from the stored item.
func TestDunningWireMirrorsRoot(t *testing.T) {
	same := func(root, wire reflect.Type) {
		t.Helper()
		require.Equal(t, root.NumField(), wire.NumField(), "%s and %s", root, wire)
		for i := range root.NumField() {
			r, w := root.Field(i), wire.Field(i)
			require.Equal(t, r.Name, w.Name, "%s field %d", root, i)
			require.Equal(t, r.Tag.Get("json"), w.Tag.Get("json"), "%s.%s", root, r.Name)
			if r.Type == reflect.TypeFor[time.Time]() {
				require.Equal(t, reflect.TypeFor[wireTime](), w.Type, "%s.%s", root, r.Name)
			} else if r.Type.Kind() != reflect.Slice {
				require.Equal(t, r.Type, w.Type, "%s.%s", root, r.Name)
			}
		}
	}
	same(reflect.TypeFor[billing.Dunning](), reflect.TypeFor[dunningWire]())
	same(reflect.TypeFor[billing.DunningNotice](), reflect.TypeFor[noticeWire]())
}

// TestDunningDeterministic: the same dunning gives the same bytes, so
// stores comparing encodings (Flat.equal, a write-back's Diff) see no
// change; a changed dunning is written back alone, and one gone (zero) is
// removed.
func TestDunningDeterministic(t *testing.T) {
	a, b := dunningRecord(), dunningRecord()
	b.Dunning.Since = b.Dunning.Since.In(time.FixedZone("X", 3600)) // the same instant
	var fa, fb Flat
	require.NoError(t, fa.Encode(&a, false))
	require.NoError(t, fb.Encode(&b, false))
	require.True(t, fa.equal(&fb))
	ia, _ := EncodeItem(&a)
	ib, _ := EncodeItem(&b)
	require.Equal(t, ia, ib)
	var d Diff
	d.Make(&fa, &fb, nil, nil, false)
	require.Zero(t, d.set&(1<<aDunning), "an unchanged encoding is not written back")

	c := dunningRecord()
	c.Dunning.Retries++
	var fc Flat
	require.NoError(t, fc.Encode(&c, false))
	require.False(t, fa.equal(&fc))
	d.Make(&fa, &fc, nil, nil, false)
	require.Equal(t, attrSet(1<<aDunning), d.set, "a changed dunning is written back, alone")
	cur := maps.Clone(ia)
	d.Apply(cur)
	ic, _ := EncodeItem(&c)
	require.Equal(t, ic, cur)

	c.Dunning = billing.Dunning{}
	require.NoError(t, fc.Encode(&c, false))
	d.Make(&fa, &fc, nil, nil, false)
	require.Zero(t, d.set)
	require.Equal(t, attrSet(1<<aDunning), d.remove, "a dunning gone is removed")
}

// TestDunningAbsent: items without billing_dunning (every item before
// it), or with it NULL, empty or an empty object, read as the zero
// Dunning; a zero Dunning (an empty Notices slice too) is not written.
func TestDunningAbsent(t *testing.T) {
	base := loadItem(t, "../../testdata/items/monthly_completed.json")
	require.NotContains(t, base, AttrDunning)
	s, err := DecodeItem(base)
	require.NoError(t, err)
	require.Zero(t, s.Dunning)
	require.False(t, s.Dunning.Started())

	for _, v := range []av.AttributeValue{
		&av.AttributeValueMemberNULL{Value: true},
		&av.AttributeValueMemberS{Value: ""},
		&av.AttributeValueMemberS{Value: "{}"},
		&av.AttributeValueMemberS{Value: ` { "notices": [ ] } `},
	} {
		item := loadItem(t, "../../testdata/items/monthly_completed.json")
		item[AttrDunning] = v
		s, err := DecodeItem(item)
		require.NoError(t, err, "%v", v)
		require.Zero(t, s.Dunning, "%v", v)
		again, err := EncodeHistoryItem(&s)
		require.NoError(t, err)
		require.Equal(t, base, again, "written without it")
	}

	s.Dunning = billing.Dunning{Notices: []billing.DunningNotice{}}
	item, err := EncodeHistoryItem(&s)
	require.NoError(t, err)
	require.Equal(t, base, item, "an empty slice is no notices")
}

// TestDunningRefused: a bad billing_dunning, read or written, is a
// FieldError naming it and wrapping ErrInvalidItem (and ErrInvalidDate for
// a time out of range), showing the value at fault: malformed JSON on
// read; no start, an attempt below 1, retries outside 0..400, an unknown
// kind, an action URL past 2048 bytes, more than 64 notices or one
// without a kind (or one past 64 bytes), with a negative attempt or
// without a time, an end without its time or the other way round, an end
// past 32 bytes, an end before the start, either way. The limits
// themselves are stored.
func TestDunningRefused(t *testing.T) {
	requireRefused := func(t *testing.T, err error, cause error, what string) {
		t.Helper()
		var fe *billing.FieldError
		require.True(t, errors.As(err, &fe), "%s: err = %v, want a FieldError", what, err)
		require.Equal(t, AttrDunning, fe.Field, "%s: %v", what, err)
		require.NotEmpty(t, fe.Value, "%s: the error shows the value at fault", what)
		require.ErrorIs(t, err, billing.ErrInvalidItem, what)
		if cause != nil {
			require.ErrorIs(t, err, cause, what)
		}
	}
	s := func(v string) av.AttributeValue { return &av.AttributeValueMemberS{Value: v} }
	const since = `"since":"2024-06-01T08:00:00.000000000Z"`
	notice := `{"kind":"payment_failed","attempt":1,"at":"2024-06-01T08:00:01.000000000Z"}`
	notices := func(n int) string { return `"notices":[` + strings.Repeat(notice+",", n-1) + notice + `]` }
	obj := func(fields ...string) string { return "{" + strings.Join(fields, ",") + "}" }
	long := strings.Repeat("x", 2049)
	for _, tt := range []struct {
		what  string
		value av.AttributeValue
		cause error
	}{
		{"not JSON", s("{"), nil},
		{"trailing text", s(obj(since, `"attempt":1`) + "x"), nil},
		{"an array", s("[]"), nil},
		{"null", s("null"), nil},
		{"a string", s(`"x"`), nil},
		{"a number", &av.AttributeValueMemberN{Value: "1"}, nil},
		{"a map", &av.AttributeValueMemberM{Value: map[string]av.AttributeValue{"since": s("2024-06-01T08:00:00Z")}}, nil},
		{"no since", s(obj(`"attempt":1`)), nil},
		{"a null since", s(obj(`"since":null`, `"attempt":1`)), nil},
		{"since not a time", s(obj(`"since":"yesterday"`, `"attempt":1`)), nil},
		{"since as a number", s(obj(`"since":1717228800`, `"attempt":1`)), nil},
		{"since in year 0", s(obj(`"since":"0000-06-01T08:00:00Z"`, `"attempt":1`)), billing.ErrInvalidDate},
		{"since in year 10000", s(obj(`"since":"9999-12-31T23:00:00-05:00"`, `"attempt":1`)), billing.ErrInvalidDate},
		{"no attempt", s(obj(since)), nil},
		{"attempt 0", s(obj(since, `"attempt":0`)), nil},
		{"attempt as a string", s(obj(since, `"attempt":"1"`)), nil},
		{"attempt past an int", s(obj(since, `"attempt":99999999999999999999`)), nil},
		{"attempt past 1<<30", s(obj(since, `"attempt":1073741825`)), nil},
		{"retries -1", s(obj(since, `"attempt":1`, `"retries":-1`)), nil},
		{"retries 401", s(obj(since, `"attempt":1`, `"retries":401`)), nil},
		{"an unknown kind", s(obj(since, `"attempt":1`, `"kind":"soft"`)), nil},
		{"an action URL of 2049 bytes", s(obj(since, `"attempt":1`, `"action_url":"`+long+`"`)), nil},
		{"65 notices", s(obj(since, `"attempt":1`, notices(65))), nil},
		{"notices as an object", s(obj(since, `"attempt":1`, `"notices":{}`)), nil},
		{"a null notice", s(obj(since, `"attempt":1`, `"notices":[null]`)), nil},
		{"a notice without a kind", s(obj(since, `"attempt":1`, `"notices":[{"attempt":1,"at":"2024-06-01T08:00:01Z"}]`)), nil},
		{"a notice kind of 65 bytes", s(obj(since, `"attempt":1`, `"notices":[{"kind":"`+long[:65]+`","attempt":1,"at":"2024-06-01T08:00:01Z"}]`)), nil},
		{"a notice attempt -1", s(obj(since, `"attempt":1`, `"notices":[{"kind":"k","attempt":-1,"at":"2024-06-01T08:00:01Z"}]`)), nil},
		{"a notice without a time", s(obj(since, `"attempt":1`, `"notices":[{"kind":"k","attempt":1}]`)), nil},
		{"a notice at the zero time", s(obj(since, `"attempt":1`, `"notices":[{"kind":"k","attempt":1,"at":"0001-01-01T00:00:00Z"}]`)), nil},
		{"ended without end", s(obj(since, `"attempt":1`, `"ended":"2024-06-03T00:00:00Z"`)), nil},
		{"end without ended", s(obj(since, `"attempt":1`, `"end":"recovered"`)), nil},
		{"an end of 33 bytes", s(obj(since, `"attempt":1`, `"ended":"2024-06-03T00:00:00Z"`, `"end":"`+long[:33]+`"`)), nil},
		{"ended before since", s(obj(since, `"attempt":1`, `"ended":"2024-06-01T07:59:59.999999999Z"`, `"end":"recovered"`)), nil},
		{"ended in year 10000", s(obj(since, `"attempt":1`, `"ended":"9999-12-31T23:00:00-05:00"`, `"end":"cancel"`)), billing.ErrInvalidDate},
	} {
		item := loadItem(t, "../../testdata/items/monthly_completed.json")
		item[AttrDunning] = tt.value
		_, err := DecodeItem(item)
		requireRefused(t, err, tt.cause, "read "+tt.what)
		require.ErrorContains(t, err, "user-1001", "read %s: the error names the item", tt.what)
	}
	// The limits are read.
	item := loadItem(t, "../../testdata/items/monthly_completed.json")
	item[AttrDunning] = s(obj(`"since":"0001-01-01T00:00:00.000000001Z"`, `"attempt":1073741824`, `"kind":"hard"`, `"retries":400`,
		`"action_url":"`+long[1:]+`"`, `"notices":[`+strings.Repeat(`{"kind":"`+long[:64]+`","attempt":0,"at":"9999-12-31T23:59:59.999999999Z"},`, 63)+notice+`]`,
		`"ended":"0001-01-01T00:00:00.000000001Z"`, `"end":"`+long[:32]+`"`))
	got, err := DecodeItem(item)
	require.NoError(t, err)
	require.Len(t, got.Dunning.Notices, 64)
	require.Equal(t, 400, got.Dunning.Retries)
	again, err := EncodeHistoryItem(&got)
	require.NoError(t, err)
	require.Equal(t, item, again, "the limits, written in the library's form, write back byte for byte")

	zone := time.FixedZone("M5", -5*3600)
	for _, tt := range []struct {
		what  string
		mut   func(*billing.Dunning)
		cause error
	}{
		{"no since", func(d *billing.Dunning) { d.Since = time.Time{} }, nil},
		{"only an attempt", func(d *billing.Dunning) { *d = billing.Dunning{Attempt: 1} }, nil},
		{"only notices", func(d *billing.Dunning) { *d = billing.Dunning{Notices: d.Notices} }, nil},
		{"since in year 0", func(d *billing.Dunning) { d.Since = time.Date(0, 12, 31, 0, 0, 0, 0, time.UTC) }, billing.ErrInvalidDate},
		{"since in year 10000 in UTC", func(d *billing.Dunning) { d.Since = time.Date(9999, 12, 31, 23, 0, 0, 0, zone) }, billing.ErrInvalidDate},
		{"attempt 0", func(d *billing.Dunning) { d.Attempt = 0 }, nil},
		{"attempt past 1<<30", func(d *billing.Dunning) { d.Attempt = 1<<30 + 1 }, nil},
		{"retries -1", func(d *billing.Dunning) { d.Retries = -1 }, nil},
		{"retries 401", func(d *billing.Dunning) { d.Retries = 401 }, nil},
		{"an unknown kind", func(d *billing.Dunning) { d.Kind = "soft" }, nil},
		{"an action URL of 2049 bytes", func(d *billing.Dunning) { d.ActionURL = long }, nil},
		{"an action URL not UTF-8", func(d *billing.Dunning) { d.ActionURL = "https://x/\xff" }, nil},
		{"65 notices", func(d *billing.Dunning) {
			for len(d.Notices) < 65 {
				d.Notices = append(d.Notices, d.Notices[0])
			}
		}, nil},
		{"a notice without a kind", func(d *billing.Dunning) { d.Notices[1].Kind = "" }, nil},
		{"a notice kind of 65 bytes", func(d *billing.Dunning) { d.Notices[0].Kind = long[:65] }, nil},
		{"a notice kind not UTF-8", func(d *billing.Dunning) { d.Notices[0].Kind = "\xff" }, nil},
		{"a notice attempt -1", func(d *billing.Dunning) { d.Notices[1].Attempt = -1 }, nil},
		{"a notice without a time", func(d *billing.Dunning) { d.Notices[1].At = time.Time{} }, nil},
		{"a notice in year 10000", func(d *billing.Dunning) { d.Notices[0].At = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, billing.ErrInvalidDate},
		{"ended without end", func(d *billing.Dunning) { d.Ended = d.Since.Add(time.Hour) }, nil},
		{"end without ended", func(d *billing.Dunning) { d.End = billing.DunningRecovered }, nil},
		{"an end of 33 bytes", func(d *billing.Dunning) { d.Ended, d.End = d.Since, billing.DunningEnd(long[:33]) }, nil},
		{"ended before since", func(d *billing.Dunning) { d.Ended, d.End = d.Since.Add(-time.Nanosecond), billing.DunningRecovered }, nil},
	} {
		rec := dunningRecord()
		rec.Dunning.Notices = slices.Clone(rec.Dunning.Notices)
		tt.mut(&rec.Dunning)
		_, err := EncodeItem(&rec)
		requireRefused(t, err, tt.cause, "write "+tt.what)
		_, err = EncodeHistoryItem(&rec)
		requireRefused(t, err, tt.cause, "write history "+tt.what)
		var f Flat
		requireRefused(t, f.EncodeRecord(&rec), tt.cause, "encode "+tt.what)
	}
	// The limits are written, and read back.
	rec := dunningRecord()
	d := &rec.Dunning
	d.Since, d.Attempt, d.Kind, d.Retries, d.ActionURL = time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC), 1<<30, billing.DeclineHard, 400, long[1:]
	d.Ended, d.End = time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC), billing.DunningEnd(long[:32])
	for len(d.Notices) < 64 {
		d.Notices = append(d.Notices, billing.DunningNotice{Kind: long[:64], At: d.Ended})
	}
	item, err = EncodeItem(&rec)
	require.NoError(t, err)
	got, err = DecodeItem(item)
	require.NoError(t, err)
	require.Equal(t, rec.Dunning, got.Dunning)
	rec.Dunning.Ended = rec.Dunning.Since // ended at its start
	_, err = EncodeItem(&rec)
	require.NoError(t, err)
}
