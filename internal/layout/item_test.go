package layout

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/av"
	"github.com/dynabill/billing/internal/ddbjson"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/legacy")

func loadItem(t testing.TB, path string) map[string]av.AttributeValue {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	item, err := ddbjson.UnmarshalItem(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return item
}

// TestGoldenRoundTrip: every canonical fixture decodes and encodes back to
// exactly the same item (history form, so data_ attributes included).
func TestGoldenRoundTrip(t *testing.T) {
	files, _ := filepath.Glob("../../testdata/items/*.json")
	if len(files) < 5 {
		t.Fatalf("found %d fixtures", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			item := loadItem(t, f)
			s, err := DecodeItem(item)
			if err != nil {
				t.Fatal(err)
			}
			back, err := EncodeHistoryItem(&s)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(item, back) {
				a, _ := ddbjson.MarshalItem(item)
				b, _ := ddbjson.MarshalItem(back)
				t.Fatalf("round trip differs:\nfixture:\n%s\nencoded:\n%s", a, b)
			}
			primary, err := EncodeItem(&s)
			if err != nil {
				t.Fatal(err)
			}
			for name := range item {
				_, inPrimary := primary[name]
				if strings.HasPrefix(name, DataPrefix) == inPrimary {
					t.Errorf("attribute %s: in primary item = %v", name, inPrimary)
				}
			}
		})
	}
}

// TestIntervalRoundTrip: items without billing_interval decode with
// Interval 0 and keep their bytes (TestGoldenRoundTrip covers that for
// every fixture); one with it decodes its value and encodes it back.
func TestIntervalRoundTrip(t *testing.T) {
	files, _ := filepath.Glob("../../testdata/items/*.json")
	require.NotEmpty(t, files)
	item := loadItem(t, files[0])
	require.NotContains(t, item, AttrInterval)
	s, err := DecodeItem(item)
	require.NoError(t, err)
	require.Zero(t, s.Interval)

	item[AttrInterval] = &av.AttributeValueMemberN{Value: "3"}
	s, err = DecodeItem(item)
	require.NoError(t, err)
	require.Equal(t, 3, s.Interval)
	back, err := EncodeHistoryItem(&s)
	require.NoError(t, err)
	require.Equal(t, item, back)
}

// TestChangeIsHistoryOnly: billing_change is written to history rows only,
// read back from them, optional, and never carried as an unknown attribute.
func TestChangeIsHistoryOnly(t *testing.T) {
	files, _ := filepath.Glob("../../testdata/items/*.json")
	require.NotEmpty(t, files)
	item := loadItem(t, files[0])
	require.NotContains(t, item, AttrChange)
	s, err := DecodeItem(item)
	require.NoError(t, err)
	require.Empty(t, s.Change, "a row written without it")

	s.Change = billing.EventTierChanged
	hist, err := EncodeHistoryItem(&s)
	require.NoError(t, err)
	require.Equal(t, &av.AttributeValueMemberS{Value: "subscription_tier_changed"}, hist[AttrChange])
	primary, err := EncodeItem(&s)
	require.NoError(t, err)
	require.NotContains(t, primary, AttrChange, "the billing table's item")

	back, err := DecodeItem(hist)
	require.NoError(t, err)
	require.Equal(t, billing.EventTierChanged, back.Change)
	require.Empty(t, ExtraAttributes(&back), "billing_change is not an unknown attribute")
	back.Change = ""
	again, err := EncodeHistoryItem(&back)
	require.NoError(t, err)
	require.NotContains(t, again, AttrChange, "a row read back and written again without a change")

	hist[AttrChange] = &av.AttributeValueMemberN{Value: "1"}
	_, err = DecodeItem(hist)
	require.ErrorIs(t, err, billing.ErrInvalidItem)
	require.ErrorContains(t, err, AttrChange)
}

// TestLegacyFixtures: items in the forms older writers produced (trimmed
// fractions, offsets, zero times, NULLs, "5", no term) decode, and encode to
// the canonical form kept in the .golden.json beside them.
func TestLegacyFixtures(t *testing.T) {
	files, _ := filepath.Glob("../../testdata/legacy/*[^n].json")
	if len(files) < 2 {
		t.Fatalf("found %d legacy fixtures", len(files))
	}
	for _, f := range files {
		if strings.HasSuffix(f, ".golden.json") {
			continue
		}
		t.Run(filepath.Base(f), func(t *testing.T) {
			s, err := DecodeItem(loadItem(t, f))
			if err != nil {
				t.Fatal(err)
			}
			enc, err := EncodeHistoryItem(&s)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := ddbjson.MarshalItem(enc)
			golden := strings.TrimSuffix(f, ".json") + ".golden.json"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -run TestLegacyFixtures -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("encoding differs from %s:\n%s", golden, got)
			}
			// The canonical form is stable.
			s2, err := DecodeItem(enc)
			if err != nil {
				t.Fatal(err)
			}
			enc2, _ := EncodeHistoryItem(&s2)
			if !reflect.DeepEqual(enc, enc2) {
				t.Fatal("canonical form does not round trip")
			}
		})
	}
}

func TestDecodeValues(t *testing.T) {
	s, err := DecodeItem(loadItem(t, "../../testdata/legacy/go_sdk_zero_values.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := billing.Period{
		UserID:             "user-6006",
		BillingDate:        time.Date(2023, 11, 30, 9, 0, 0, 0, time.UTC),
		SubscriptionID:     "7c6b5a49-3827-4160-9f5e-4d3c2b1a0f9e",
		Amount:             billing.Cents(500),
		Status:             billing.StatusACHSent,
		BillingPeriod:      "11/2023",
		TransactionID:      "JPM-20231130-0001",
		CreatedDate:        time.Date(2023, 10, 30, 9, 0, 0, 500_000_000, time.UTC),
		InitialRunDate:     time.Date(2023, 11, 30, 9, 1, 2, 120_000_000, time.UTC),
		LastRunDate:        time.Date(2023, 11, 30, 9, 1, 2, 123_456_000, time.UTC),
		Process:            billing.ProcessWebhook,
		Term:               billing.TermMonthly,
		ReceiptAccountMask: "1234",
		ReceiptPaymentType: "ACH",
		ReceiptTierName:    "Plus:v1",
		Stored: &stored{billingDate: "2023-11-30T09:00:00Z", lastRunDate: "2023-11-30T03:01:02.123456-06:00",
			billingDateAt: time.Date(2023, 11, 30, 9, 0, 0, 0, time.UTC), lastRunDateAt: time.Date(2023, 11, 30, 9, 1, 2, 123_456_000, time.UTC)},
	}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("decoded\n%+v\nwant\n%+v", s, want)
	}
	if s.Tier() != "Plus" || s.TierVersion() != "v1" {
		t.Errorf("tier = %q %q", s.Tier(), s.TierVersion())
	}

	h, err := DecodeItem(loadItem(t, "../../testdata/items/history_with_data.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(DataAttributes(&h)) != 3 || DataAttributes(&h)["data_downgrade_reason"] == nil {
		t.Errorf("Data = %v", DataAttributes(&h))
	}
	if len(ExtraAttributes(&h)) != 1 || ExtraAttributes(&h)["kinesis_sequence"] == nil {
		t.Errorf("Extra = %v", ExtraAttributes(&h))
	}
	if !h.IsPendingDowngrade || h.UpdatedEvent != billing.UpdatedUserReactivated || h.Process != billing.ProcessReactivation {
		t.Errorf("decoded %+v", h)
	}
	f, err := DecodeItem(loadItem(t, "../../testdata/items/friday_billing_error.json"))
	if err != nil || f.BillingWeek != 2 || f.Attempt != 3 || f.PaymentError != "R01 insufficient funds" {
		t.Errorf("friday = %+v, %v", f, err)
	}
}

// TestLegacyKeyKept: a billing_date key not in canonical form is written back
// byte for byte, so a rewrite addresses the same item.
func TestLegacyKeyKept(t *testing.T) {
	s, err := DecodeItem(loadItem(t, "../../testdata/legacy/sdk_v1_nulls.json"))
	if err != nil {
		t.Fatal(err)
	}
	item, _ := EncodeItem(&s)
	if got := item[AttrBillingDate].(*av.AttributeValueMemberS).Value; got != "2022-02-28T00:00:00.000Z" {
		t.Fatalf("billing_date = %q", got)
	}
	// Once the date changes, the canonical form is used.
	s.BillingDate = s.BillingDate.AddDate(0, 1, 0)
	item, _ = EncodeItem(&s)
	if got := item[AttrBillingDate].(*av.AttributeValueMemberS).Value; got != "2022-03-28T00:00:00Z" {
		t.Fatalf("billing_date = %q", got)
	}
}

func TestDecodeErrorsNameAttributeAndKey(t *testing.T) {
	base := func() map[string]av.AttributeValue {
		return loadItem(t, "../../testdata/items/monthly_completed.json")
	}
	s := func(v string) av.AttributeValue { return &av.AttributeValueMemberS{Value: v} }
	n := func(v string) av.AttributeValue { return &av.AttributeValueMemberN{Value: v} }
	tests := []struct {
		attr  string
		value av.AttributeValue // nil deletes
		cause error
	}{
		{AttrUserID, nil, nil},
		{AttrBillingDate, nil, nil},
		{AttrSubscriptionID, nil, nil},
		{AttrBillingStatus, nil, nil},
		{AttrBillingAmount, nil, nil},
		{AttrUserID, s(""), nil},
		{AttrSubscriptionID, s(""), nil},
		{AttrBillingDate, s("2024-01-31"), billing.ErrInvalidDate},
		{AttrBillingDate, n("1706713200"), nil},
		{AttrBillingAmount, s("4.999"), billing.ErrInvalidAmount},
		{AttrBillingAmount, n("4.99"), nil},
		{AttrBillingStatus, s("PENDING"), billing.ErrInvalidStatus},
		{AttrBillingStatus, s("INACTIVE"), billing.ErrInvalidStatus},
		{AttrTerm, s("FORTNIGHTLY"), billing.ErrInvalidTerm},
		{AttrLastRunDate, s("yesterday"), billing.ErrInvalidDate},
		{AttrCompletionDate, n("0"), nil},
		{AttrBillingWeek, n("6"), nil},
		{AttrBillingWeek, n("-1"), nil},
		{AttrBillingWeek, n("1.5"), nil},
		{AttrBillingWeek, s("2"), nil},
		{AttrPauseDurationMonths, n("-2"), nil},
		{AttrAnchorDay, n("32"), nil},
		{AttrInterval, n("121"), nil},
		{AttrInterval, n("-1"), nil},
		{AttrInterval, n("2.5"), nil},
		{AttrInterval, s("3"), nil},
		{AttrAttempt, n("99999999999999999999"), nil},
		{AttrIsPendingDowngrade, s("true"), nil},
		{AttrReceiptTierName, &av.AttributeValueMemberBOOL{Value: true}, nil},
	}
	for _, tt := range tests {
		item := base()
		if tt.value == nil {
			delete(item, tt.attr)
		} else {
			item[tt.attr] = tt.value
		}
		_, err := DecodeItem(item)
		var fe *billing.FieldError
		if !errors.Is(err, billing.ErrInvalidItem) || !errors.As(err, &fe) {
			t.Errorf("%s=%v: err = %v, want FieldError wrapping ErrInvalidItem", tt.attr, tt.value, err)
			continue
		}
		if fe.Field != tt.attr {
			t.Errorf("%s: error names field %q", tt.attr, fe.Field)
		}
		if tt.cause != nil && !errors.Is(err, tt.cause) {
			t.Errorf("%s: err = %v, want %v", tt.attr, err, tt.cause)
		}
		msg := err.Error()
		if !strings.Contains(msg, tt.attr) || (tt.attr != AttrUserID && !strings.Contains(msg, "user-1001")) {
			t.Errorf("%s: message %q does not name the attribute and key", tt.attr, msg)
		}
	}
}

func TestEncodeRejectsUnstorable(t *testing.T) {
	good := func() billing.Period {
		return billing.Period{
			UserID: "u", SubscriptionID: "s", Status: billing.StatusScheduled, Amount: billing.Cents(499),
			BillingDate: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC),
			LastRunDate: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC),
		}
	}
	tests := []struct {
		field string
		mut   func(*billing.Period)
	}{
		{AttrUserID, func(s *billing.Period) { s.UserID = "" }},
		{AttrSubscriptionID, func(s *billing.Period) { s.SubscriptionID = "" }},
		{AttrBillingDate, func(s *billing.Period) { s.BillingDate = time.Time{} }},
		{AttrBillingDate, func(s *billing.Period) { s.BillingDate = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }},
		{AttrBillingStatus, func(s *billing.Period) { s.Status = billing.StatusInactive }},
		{AttrBillingStatus, func(s *billing.Period) { s.Status = "" }},
		{AttrBillingAmount, func(s *billing.Period) { s.Amount = -1 }},
		{AttrTerm, func(s *billing.Period) { s.Term = "DAILY" }},
		{AttrBillingWeek, func(s *billing.Period) { s.BillingWeek = 6 }},
		{AttrAnchorDay, func(s *billing.Period) { s.AnchorDay = -1 }},
		{AttrPauseDurationMonths, func(s *billing.Period) { s.PauseDurationMonths = -1 }},
		{AttrBillingStatus, func(s *billing.Period) {
			SetExtraAttributes(s, map[string]av.AttributeValue{AttrBillingStatus: &av.AttributeValueMemberS{Value: "X"}})
		}},
		{"other", func(s *billing.Period) {
			SetDataAttributes(s, map[string]av.AttributeValue{"other": &av.AttributeValueMemberS{Value: "X"}})
		}},
		{AttrLastRunDate, func(s *billing.Period) { s.LastRunDate = time.Time{} }},
	}
	for _, tt := range tests {
		s := good()
		tt.mut(&s)
		_, err := EncodeHistoryItem(&s)
		var fe *billing.FieldError
		if !errors.As(err, &fe) || fe.Field != tt.field || !errors.Is(err, billing.ErrInvalidItem) {
			t.Errorf("%s: err = %v", tt.field, err)
		}
	}
	s := good()
	item, err := EncodeItem(&s)
	if err != nil {
		t.Fatal(err)
	}
	// Minimal record: keys, amount, status, term, and nothing else.
	want := []string{"billing_amount", "billing_date", "billing_status", "last_run_date", "subscription_id", "term", "user_id"}
	if got := ddbjson.SortedNames(item); !reflect.DeepEqual(got, want) {
		t.Fatalf("attributes = %v, want %v", got, want)
	}
	if item[AttrTerm].(*av.AttributeValueMemberS).Value != "MONTHLY" {
		t.Error("empty term not written as MONTHLY")
	}
}

func TestSetDataAttributesLeavesCopiesAlone(t *testing.T) {
	var s billing.Period
	SetDataAttributes(&s, map[string]av.AttributeValue{"data_a": &av.AttributeValueMemberS{Value: "1"}})
	c := s.Clone()
	SetDataAttributes(&c, map[string]av.AttributeValue{"data_b": &av.AttributeValueMemberS{Value: "2"}})
	if len(DataAttributes(&s)) != 1 || DataAttributes(&s)["data_a"] == nil {
		t.Fatalf("setting a copy's data_ attributes changed the original: %v", DataAttributes(&s))
	}
}

func TestSplitTier(t *testing.T) {
	for _, tt := range []struct{ in, name, version string }{
		{"Plus:v2", "Plus", "v2"}, {"Plus", "Plus", ""}, {"", "", ""}, {"A:b:c", "A", "b:c"}, {":v1", "", "v1"},
	} {
		p := billing.Period{ReceiptTierName: tt.in}
		n, v := p.Tier(), p.TierVersion()
		if n != tt.name || v != tt.version {
			t.Errorf("Tier, TierVersion of %q = %q, %q", tt.in, n, v)
		}
		if tt.in != "" && tt.version != "" && n+":"+v != tt.in {
			t.Errorf("JoinTier(%q, %q) = %q", n, v, n+":"+v)
		}
	}
}

func FuzzDecodeItem(f *testing.F) {
	files, _ := filepath.Glob("../../testdata/*/*.json")
	for _, p := range files {
		data, _ := os.ReadFile(p)
		f.Add(data)
	}
	f.Add([]byte(`{"user_id":{"S":"u"},"billing_date":{"S":"x"}}`))
	// Proration attributes beside testdata/items/proration_next_charge.json:
	// a time with an offset (written back in UTC), an unknown field (dropped)
	// and a balance; and an empty array (read as none) with a balance that
	// overflows with billing_amount (refused on read as on write).
	f.Add([]byte(`{"user_id":{"S":"u"},"billing_date":{"S":"2024-04-01T00:00:00Z"},"subscription_id":{"S":"s"},` +
		`"billing_status":{"S":"SCHEDULED"},"billing_amount":{"S":"20.00"},"last_run_date":{"S":"2024-03-16T00:00:00Z"},` +
		`"billing_balance":{"S":"0.01"},"billing_adjustments":{"S":"[{\"start\":\"2024-03-16T02:00:00+02:00\",\"amount\":\"5.16\",\"credit\":true,\"x\":1}]"}}`))
	f.Add([]byte(`{"user_id":{"S":"u"},"billing_date":{"S":"2024-04-01T00:00:00Z"},"subscription_id":{"S":"s"},` +
		`"billing_status":{"S":"SCHEDULED"},"billing_amount":{"S":"20.00"},"last_run_date":{"S":"2024-03-16T00:00:00Z"},` +
		`"billing_balance":{"S":"92233720368547758.07"},"billing_adjustments":{"S":"[]"}}`))
	// Discounts beside testdata/items/discounts_next_charge.json: another
	// writer's key order, spacing, an unknown field and a literal '<'
	// (written back in encoding/json's form), with adjustments; a percent
	// and an amount off together (refused); and the limits (8 discounts,
	// charges left -1 and 0, a percent of 10000).
	f.Add([]byte(`{"user_id":{"S":"u"},"billing_date":{"S":"2024-05-01T00:00:00Z"},"subscription_id":{"S":"s"},` +
		`"billing_status":{"S":"SCHEDULED"},"billing_amount":{"S":"20.00"},"last_run_date":{"S":"2024-04-01T00:00:00Z"},` +
		`"billing_adjustments":{"S":"[{\"amount\":\"5.16\",\"credit\":true}]"},` +
		`"billing_discounts":{"S":" [{\"charges_left\":2, \"percent_off\":2000, \"coupon\":\"W<20>\", \"x\":[1]}] "}}`))
	f.Add([]byte(`{"user_id":{"S":"u"},"billing_date":{"S":"2024-05-01T00:00:00Z"},"subscription_id":{"S":"s"},` +
		`"billing_status":{"S":"SCHEDULED"},"billing_amount":{"S":"20.00"},"last_run_date":{"S":"2024-04-01T00:00:00Z"},` +
		`"billing_discounts":{"S":"[{\"coupon\":\"C\",\"percent_off\":500,\"amount_off\":\"1.00\",\"charges_left\":1}]"}}`))
	f.Add([]byte(`{"user_id":{"S":"u"},"billing_date":{"S":"2024-05-01T00:00:00Z"},"subscription_id":{"S":"s"},` +
		`"billing_status":{"S":"SCHEDULED"},"billing_amount":{"S":"20.00"},"last_run_date":{"S":"2024-04-01T00:00:00Z"},` +
		`"billing_discounts":{"S":"[` + strings.Repeat(`{\"coupon\":\"C\",\"percent_off\":10000,\"charges_left\":-1},`, 7) +
		`{\"coupon\":\"D\",\"amount_off\":\"0.01\",\"charges_left\":0}]"}}`))
	// Dunning beside testdata/items/dunning_declined.json: another
	// writer's key order, spacing, times with an offset and without a
	// fraction, an unknown field and a literal '&' (written back in the
	// library's form); an ended one at its start; an end without its time
	// and a notice without one (refused); and the limits (year 1 and 9999,
	// retries 400, an end of 32 bytes).
	f.Add([]byte(`{"user_id":{"S":"u"},"billing_date":{"S":"2024-06-01T00:00:00Z"},"subscription_id":{"S":"s"},` +
		`"billing_status":{"S":"ERROR"},"billing_amount":{"S":"20.00"},"last_run_date":{"S":"2024-06-02T00:00:00Z"},` +
		`"billing_dunning":{"S":" { \"notices\": [ {\"at\": \"2024-06-01T10:00:04+02:00\", \"attempt\": 1, \"kind\": \"payment_failed\", \"x\": 1} ], ` +
		`\"kind\": \"authentication_required\", \"action_url\": \"https://p/c?a=1&b=2\", \"attempt\": 1, \"since\": \"2024-06-01T08:00:03Z\" } "}}`))
	f.Add([]byte(`{"user_id":{"S":"u"},"billing_date":{"S":"2024-06-01T00:00:00Z"},"subscription_id":{"S":"s"},` +
		`"billing_status":{"S":"ERROR"},"billing_amount":{"S":"20.00"},"last_run_date":{"S":"2024-06-02T00:00:00Z"},` +
		`"billing_dunning":{"S":"{\"since\":\"2024-06-01T08:00:03.000000000Z\",\"attempt\":2,\"kind\":\"hard\",` +
		`\"ended\":\"2024-06-01T08:00:03.000000000Z\",\"end\":\"cancel\"}"}}`))
	f.Add([]byte(`{"user_id":{"S":"u"},"billing_date":{"S":"2024-06-01T00:00:00Z"},"subscription_id":{"S":"s"},` +
		`"billing_status":{"S":"ERROR"},"billing_amount":{"S":"20.00"},"last_run_date":{"S":"2024-06-02T00:00:00Z"},` +
		`"billing_dunning":{"S":"{\"since\":\"2024-06-01T08:00:03Z\",\"attempt\":1,\"end\":\"recovered\"}"}}`))
	f.Add([]byte(`{"user_id":{"S":"u"},"billing_date":{"S":"2024-06-01T00:00:00Z"},"subscription_id":{"S":"s"},` +
		`"billing_status":{"S":"ERROR"},"billing_amount":{"S":"20.00"},"last_run_date":{"S":"2024-06-02T00:00:00Z"},` +
		`"billing_dunning":{"S":"{\"since\":\"2024-06-01T08:00:03Z\",\"attempt\":1,\"notices\":[{\"kind\":\"k\",\"attempt\":1}]}"}}`))
	f.Add([]byte(`{"user_id":{"S":"u"},"billing_date":{"S":"2024-06-01T00:00:00Z"},"subscription_id":{"S":"s"},` +
		`"billing_status":{"S":"ERROR"},"billing_amount":{"S":"20.00"},"last_run_date":{"S":"2024-06-02T00:00:00Z"},` +
		`"billing_dunning":{"S":"{\"since\":\"0001-01-01T00:00:00.000000001Z\",\"attempt\":1,\"retries\":400,` +
		`\"notices\":[{\"kind\":\"k\",\"attempt\":0,\"at\":\"9999-12-31T23:59:59.999999999Z\"}],` +
		`\"ended\":\"9999-12-31T23:59:59.999999999Z\",\"end\":\"` + strings.Repeat("e", 32) + `\"}"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		item, err := ddbjson.UnmarshalItem(data)
		if err != nil {
			return
		}
		s, err := DecodeItem(item)
		if err != nil {
			var fe *billing.FieldError
			if !errors.As(err, &fe) || fe.Field == "" || !errors.Is(err, billing.ErrInvalidItem) {
				t.Fatalf("decode error without field: %v", err)
			}
			return
		}
		enc, err := EncodeHistoryItem(&s)
		if err != nil {
			if s.LastRunDate.IsZero() {
				return
			}
			t.Fatalf("decoded item does not encode: %v", err)
		}
		s2, err := DecodeItem(enc)
		if err != nil {
			t.Fatalf("encoded item does not decode: %v", err)
		}
		enc2, err := EncodeHistoryItem(&s2)
		if err != nil || !reflect.DeepEqual(enc, enc2) {
			t.Fatalf("canonical form unstable: %v", err)
		}
	})
}
