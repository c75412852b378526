package dynamostore

import (
	"encoding/json"
	"fmt"
	"github.com/dynabill/billing/internal/sdkav"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/ddbjson"
	"github.com/dynabill/billing/internal/layout"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var streamT0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// streamRow is a history row of a single-table engine user (which the
// legacy table stores just as well).
func streamRow(status billing.Status, mod func(*billing.Period)) billing.Period {
	s := billing.Period{
		UserID: "acct-1#sub-1#PLUS", SubscriptionID: "per-1", BillingDate: streamT0, Amount: billing.Cents(499),
		Status: status, BillingPeriod: "03/2026", TransactionID: "tx-1", Process: billing.ProcessInitial,
		Term: billing.TermMonthly, ReceiptTierName: "Plus:v2",
		CreatedDate: streamT0.Add(-48 * time.Hour), LastRunDate: streamT0.Add(time.Hour + 123),
	}
	if mod != nil {
		mod(&s)
	}
	return s
}

// streamLayoutCase is one table layout: its decoder and how it stores a
// history row.
type streamLayoutCase struct {
	name    string
	decoder *StreamDecoder
	item    func(t testing.TB, s *billing.Period) map[string]types.AttributeValue
}

func streamLayouts(t testing.TB) []streamLayoutCase {
	single, err := NewSingleTableStreamDecoder(SingleTableConfig{})
	require.NoError(t, err)
	st := &SingleTableRepository{tbl: codecOf(SingleTableConfig{})}
	return []streamLayoutCase{
		{name: "legacy", decoder: NewHistoryStreamDecoder(), item: func(t testing.TB, s *billing.Period) map[string]types.AttributeValue {
			item, err := layout.EncodeHistoryItem(s)
			require.NoError(t, err)
			return sdkav.ToSDK(item)
		}},
		{name: "single", decoder: single, item: func(t testing.TB, s *billing.Period) map[string]types.AttributeValue {
			ref, err := layout.EngineRef(s)
			require.NoError(t, err)
			item, err := st.historyItem(ref, s)
			require.NoError(t, err)
			return sdkav.ToSDK(item)
		}},
	}
}

// keysOf returns the key attributes of an item of the layout.
func (l streamLayoutCase) keysOf(item map[string]types.AttributeValue) map[string]types.AttributeValue {
	names := []string{layout.AttrUserID, layout.AttrLastRunDate}
	if l.name == "single" {
		names = []string{layout.AttrPK, layout.AttrSK}
	}
	keys := map[string]types.AttributeValue{}
	for _, n := range names {
		keys[n] = item[n]
	}
	return keys
}

// toStreamItem converts an item into the Streams API's types.
func toStreamItem(item map[string]types.AttributeValue) map[string]streamtypes.AttributeValue {
	if item == nil {
		return nil
	}
	out := make(map[string]streamtypes.AttributeValue, len(item))
	for k, v := range item {
		out[k] = toStreamValue(v)
	}
	return out
}

func toStreamValue(av types.AttributeValue) streamtypes.AttributeValue {
	switch v := av.(type) {
	case *types.AttributeValueMemberS:
		return &streamtypes.AttributeValueMemberS{Value: v.Value}
	case *types.AttributeValueMemberN:
		return &streamtypes.AttributeValueMemberN{Value: v.Value}
	case *types.AttributeValueMemberB:
		return &streamtypes.AttributeValueMemberB{Value: v.Value}
	case *types.AttributeValueMemberSS:
		return &streamtypes.AttributeValueMemberSS{Value: v.Value}
	case *types.AttributeValueMemberNS:
		return &streamtypes.AttributeValueMemberNS{Value: v.Value}
	case *types.AttributeValueMemberBS:
		return &streamtypes.AttributeValueMemberBS{Value: v.Value}
	case *types.AttributeValueMemberM:
		return &streamtypes.AttributeValueMemberM{Value: toStreamItem(v.Value)}
	case *types.AttributeValueMemberL:
		l := make([]streamtypes.AttributeValue, len(v.Value))
		for i, e := range v.Value {
			l[i] = toStreamValue(e)
		}
		return &streamtypes.AttributeValueMemberL{Value: l}
	case *types.AttributeValueMemberNULL:
		return &streamtypes.AttributeValueMemberNULL{Value: v.Value}
	case *types.AttributeValueMemberBOOL:
		return &streamtypes.AttributeValueMemberBOOL{Value: v.Value}
	}
	panic(fmt.Sprintf("toStreamValue: %T", av))
}

// wireRecord is a stream record in the test's terms.
type wireRecord struct {
	event string // INSERT, MODIFY, REMOVE
	seq   string
	keys  map[string]types.AttributeValue
	image map[string]types.AttributeValue // nil: no new image
	ttl   bool                            // a deletion by DynamoDB's TTL service
}

func (r wireRecord) sdk() streamtypes.Record {
	var id *streamtypes.Identity
	if r.ttl {
		id = &streamtypes.Identity{PrincipalId: aws.String("dynamodb.amazonaws.com"), Type: aws.String("Service")}
	}
	return streamtypes.Record{
		UserIdentity: id,
		EventID:      aws.String("ev-" + r.seq), EventName: streamtypes.OperationType(r.event), EventSource: aws.String("aws:dynamodb"),
		Dynamodb: &streamtypes.StreamRecord{
			Keys: toStreamItem(r.keys), NewImage: toStreamItem(r.image), SequenceNumber: aws.String(r.seq),
			SizeBytes: aws.Int64(100), StreamViewType: streamtypes.StreamViewTypeNewImage,
			ApproximateCreationDateTime: aws.Time(streamT0),
		},
	}
}

// lambdaJSON is the record as a Lambda function receives it.
func (r wireRecord) lambdaJSON(t testing.TB) json.RawMessage {
	raw := func(item map[string]types.AttributeValue) json.RawMessage {
		if item == nil {
			return nil
		}
		b, err := ddbjson.MarshalItem(sdkav.FromSDK(item))
		require.NoError(t, err)
		return b
	}
	db := map[string]any{
		"ApproximateCreationDateTime": streamT0.Unix(), "Keys": raw(r.keys), "SequenceNumber": r.seq,
		"SizeBytes": 100, "StreamViewType": "NEW_IMAGE",
	}
	if r.image != nil {
		db["NewImage"] = raw(r.image)
	}
	rec := map[string]any{
		"eventID": "ev-" + r.seq, "eventName": r.event, "eventVersion": "1.1", "eventSource": "aws:dynamodb",
		"awsRegion": "us-east-1", "dynamodb": db,
		"eventSourceARN": "arn:aws:dynamodb:us-east-1:123456789012:table/t/stream/2026-03-02T00:00:00.000",
	}
	if r.ttl {
		rec["userIdentity"] = map[string]any{"type": "Service", "principalId": "dynamodb.amazonaws.com"}
	}
	b, err := json.Marshal(rec)
	require.NoError(t, err)
	return b
}

func lambdaPayload(t testing.TB, recs ...wireRecord) []byte {
	raws := make([]json.RawMessage, len(recs))
	for i, r := range recs {
		raws[i] = r.lambdaJSON(t)
	}
	b, err := json.Marshal(map[string]any{"Records": raws})
	require.NoError(t, err)
	return b
}

// decodeBoth decodes r in both input forms, requires them to agree and
// returns the outcome.
func decodeBoth(t *testing.T, d *StreamDecoder, r wireRecord) (HistoryEvent, bool, error) {
	t.Helper()
	ev, ok, err := d.Decode(r.sdk())
	res, lerr := d.DecodeLambda(lambdaPayload(t, r))
	require.NoError(t, lerr)
	require.Len(t, res, 1)
	assert.Equal(t, r.seq, res[0].SequenceNumber)
	assert.Equal(t, ok, res[0].OK, "Lambda form OK")
	if err != nil {
		require.Error(t, res[0].Err, "Lambda form error")
		assert.Equal(t, err.Error(), res[0].Err.Error())
	} else {
		require.NoError(t, res[0].Err)
		assert.Equal(t, ev, res[0].Event, "Lambda form event")
	}
	return ev, ok, err
}

func TestStreamDecoderTypes(t *testing.T) {
	at := func(s *billing.Period) { s.CreatedDate = s.LastRunDate } // the row that created the record
	ue := func(e billing.UpdatedEvent, opening bool) func(*billing.Period) {
		return func(s *billing.Period) {
			s.UpdatedEvent = e
			if opening {
				at(s)
			}
		}
	}
	cases := []struct {
		name   string
		status billing.Status
		mod    func(*billing.Period)
		want   billing.EventType
		reason string
	}{
		{name: "completed", status: billing.StatusCompleted, want: billing.EventPaymentSucceeded},
		{name: "ach sent", status: billing.StatusACHSent, want: billing.EventPaymentPending},
		{name: "declined", status: billing.StatusError, mod: func(s *billing.Period) { s.PaymentError = "insufficient funds" }, want: billing.EventPaymentDeclined, reason: "insufficient funds"},
		{name: "refunded", status: billing.StatusRefunded, want: billing.EventPaymentRefunded},
		{name: "ach overdue", status: billing.StatusStale, mod: ue(billing.UpdatedACHOverdue, false), want: billing.EventPaymentACHOverdue},
		{name: "stale", status: billing.StatusStale, want: billing.EventStale},
		{name: "pause skipped", status: billing.StatusPausedSkipped, mod: ue(billing.UpdatedPauseSkipped, false), want: billing.EventPauseMonthSkipped},
		{name: "waived", status: billing.StatusWaived, want: billing.EventWaived},
		{name: "cancelled", status: billing.StatusCancelled, want: billing.EventCancelled},
		{name: "paused period opened", status: billing.StatusPaused, mod: ue(billing.UpdatedPausePendingResume, true), want: billing.EventPeriodOpened},
		{name: "paused subscription created", status: billing.StatusPaused, mod: ue(billing.UpdatedUserSubscribed, true), want: billing.EventSubscriptionCreated},
		{name: "paused subscription created for one month", status: billing.StatusPaused, mod: func(s *billing.Period) {
			s.Process, s.UpdatedEvent = billing.ProcessSubscribe, billing.UpdatedPausePendingResume
			at(s)
		}, want: billing.EventSubscriptionCreated},
		{name: "paused", status: billing.StatusPaused, want: billing.EventPaused},
		{name: "paused user-subscribed later", status: billing.StatusPaused, mod: ue(billing.UpdatedUserSubscribed, false), want: billing.EventPaused},
		{name: "subscribed", status: billing.StatusScheduled, mod: ue(billing.UpdatedUserSubscribed, true), want: billing.EventSubscriptionCreated},
		{name: "reactivated", status: billing.StatusScheduled, mod: ue(billing.UpdatedUserReactivated, true), want: billing.EventSubscriptionReactivated},
		{name: "period opened", status: billing.StatusScheduled, mod: at, want: billing.EventPeriodOpened},
		{name: "period opened after a pause", status: billing.StatusScheduled, mod: ue(billing.UpdatedPauseResume, true), want: billing.EventPeriodOpened},
		{name: "resumed", status: billing.StatusScheduled, mod: ue(billing.UpdatedPauseResume, false), want: billing.EventResumed},
		{name: "changed", status: billing.StatusScheduled, want: billing.EventChanged},
		{name: "changed first period", status: billing.StatusScheduled, mod: ue(billing.UpdatedUserSubscribed, false), want: billing.EventChanged},
		{name: "subscribed by process", status: billing.StatusScheduled, mod: func(s *billing.Period) { s.Process = billing.ProcessSubscribe; at(s) }, want: billing.EventSubscriptionCreated},
		{name: "changed reactivated period", status: billing.StatusScheduled, mod: ue(billing.UpdatedUserReactivated, false), want: billing.EventChanged},
		// Rows of a trial's life without billing_change: the trial period
		// created and completed (billing_trial_end), and the first paid
		// period opened on its end, by its marker or, on a row written
		// before the marker, by updated_event trial-converted.
		{name: "trial started", status: billing.StatusScheduled, mod: func(s *billing.Period) {
			s.TrialEnd, s.TrialAmount, s.UpdatedEvent = streamT0.AddDate(0, 0, 14), billing.Cents(999), billing.UpdatedUserSubscribed
			at(s)
		}, want: billing.EventTrialStarted},
		{name: "trial ended", status: billing.StatusCompleted, mod: func(s *billing.Period) {
			s.TrialEnd, s.TrialAmount = streamT0.AddDate(0, 0, 14), billing.Cents(999)
		}, want: billing.EventTrialEnded},
		{name: "trial converted", status: billing.StatusScheduled, mod: func(s *billing.Period) { s.AfterTrial = true; at(s) }, want: billing.EventTrialConverted},
		{name: "trial converted before the marker", status: billing.StatusScheduled, mod: ue(billing.UpdatedTrialConverted, true), want: billing.EventTrialConverted},
		{name: "first paid period resumed", status: billing.StatusScheduled, mod: func(s *billing.Period) { s.AfterTrial, s.UpdatedEvent = true, billing.UpdatedPauseResume }, want: billing.EventResumed},
		{name: "first paid period charged", status: billing.StatusCompleted, mod: func(s *billing.Period) { s.AfterTrial = true }, want: billing.EventPaymentSucceeded},
		{name: "change written", status: billing.StatusScheduled, mod: func(s *billing.Period) { s.Change = billing.EventTierChanged }, want: billing.EventTierChanged},
		{name: "change written overrides derivation", status: billing.StatusError, mod: func(s *billing.Period) {
			s.Change, s.PaymentError = billing.EventPaymentReturned, "R01 insufficient funds"
		}, want: billing.EventPaymentReturned, reason: "R01 insufficient funds"},
		{name: "change of a newer library", status: billing.StatusScheduled, mod: func(s *billing.Period) { s.Change = "subscription_teleported" }, want: "subscription_teleported"},
	}
	for _, l := range streamLayouts(t) {
		for i, tc := range cases {
			t.Run(l.name+"/"+tc.name, func(t *testing.T) {
				row := streamRow(tc.status, tc.mod)
				item := l.item(t, &row)
				if row.Change != "" {
					require.Equal(t, stringAV(string(row.Change)), item[layout.AttrChange])
				}
				rec := wireRecord{event: "INSERT", seq: strconv.Itoa(1000 + i), keys: l.keysOf(item), image: item}
				ev, ok, err := decodeBoth(t, l.decoder, rec)
				require.NoError(t, err)
				require.True(t, ok)
				assert.Equal(t, billing.Event{
					ID: ev.ID, Type: tc.want, At: row.LastRunDate, UserID: row.UserID, SubscriptionID: "per-1", BillingDate: streamT0,
					Amount: billing.Cents(499), Process: row.Process, TransactionID: "tx-1", Reason: tc.reason,
				}, ev.Event)
				assert.Equal(t, rec.seq, ev.SequenceNumber)
				assert.Equal(t, tc.status, ev.Row.Status)
				assert.Equal(t, row.PaymentError, ev.Row.PaymentError)
				assert.True(t, ev.Row.LastRunDate.Equal(row.LastRunDate))
				id, err := uuid.Parse(ev.ID)
				require.NoError(t, err)
				assert.Equal(t, uuid.Version(5), id.Version())
			})
		}
	}
}

func TestStreamDecoderSkipsAndErrors(t *testing.T) {
	ls := streamLayouts(t)
	legacy, single := ls[0], ls[1]
	row := streamRow(billing.StatusCompleted, nil)
	withStatus := func(l streamLayoutCase, status string) map[string]types.AttributeValue {
		item := l.item(t, &row)
		item[layout.AttrBillingStatus] = &types.AttributeValueMemberS{Value: status}
		return item
	}
	// The single table's other items, written by the real encoders where
	// the engine writes them.
	period, err := layout.EncodeItem(&row)
	require.NoError(t, err)
	ref, err := layout.EngineRef(&row)
	require.NoError(t, err)
	period[layout.AttrPK] = layout.StringAV(single.decoder.tbl.AccountPK(ref.AccountID))
	period[layout.AttrSK] = layout.StringAV(layout.PeriodSK(ref, layout.BillingDateKey(&row)))
	period[layout.PayEntity] = layout.StringAV(layout.EntityPeriod)
	st := &SingleTableRepository{tbl: single.decoder.tbl}
	pointer := st.pointerItem(row.SubscriptionID, row.UserID, layout.BillingDateKey(&row))
	subItem := map[string]types.AttributeValue{
		layout.AttrPK: stringAV("USER#acct-1"), layout.AttrSK: stringAV(ref.SK()), "SKU": stringAV("PLUS"),
	}
	credits := map[string]types.AttributeValue{layout.AttrPK: stringAV("USER#acct-1"), layout.AttrSK: stringAV(layout.SKCredits)}
	foreignHist := single.item(t, &row)
	foreignHist[layout.AttrPK] = stringAV("ORG#acct-1") // not an account partition of this table

	histLegacy := legacy.item(t, &row)
	histSingle := single.item(t, &row)
	skipped := []struct {
		name string
		l    streamLayoutCase
		rec  wireRecord
	}{
		{"legacy ttl remove", legacy, wireRecord{event: "REMOVE", keys: legacy.keysOf(histLegacy), ttl: true}},
		{"single ttl remove", single, wireRecord{event: "REMOVE", keys: single.keysOf(histSingle), ttl: true}},
		{"single period modify", single, wireRecord{event: "MODIFY", keys: single.keysOf(sdkav.ToSDK(period)), image: sdkav.ToSDK(period)}},
		{"single period remove", single, wireRecord{event: "REMOVE", keys: single.keysOf(sdkav.ToSDK(period))}},
		{"single subscription modify", single, wireRecord{event: "MODIFY", keys: single.keysOf(subItem), image: subItem}},
		{"single credits remove", single, wireRecord{event: "REMOVE", keys: single.keysOf(credits)}},
		{"single other partition modify", single, wireRecord{event: "MODIFY", keys: single.keysOf(foreignHist), image: foreignHist}},
		{"single period item", single, wireRecord{event: "INSERT", keys: single.keysOf(sdkav.ToSDK(period)), image: sdkav.ToSDK(period)}},
		{"single period ID pointer", single, wireRecord{event: "INSERT", keys: single.keysOf(pointer), image: pointer}},
		{"single subscription item", single, wireRecord{event: "INSERT", keys: single.keysOf(subItem), image: subItem}},
		{"single credits", single, wireRecord{event: "INSERT", keys: single.keysOf(credits), image: credits}},
		{"single other partition", single, wireRecord{event: "INSERT", keys: single.keysOf(foreignHist), image: foreignHist}},
	}
	for i, tc := range skipped {
		t.Run("skip/"+tc.name, func(t *testing.T) {
			tc.rec.seq = strconv.Itoa(2000 + i)
			ev, ok, err := decodeBoth(t, tc.l.decoder, tc.rec)
			require.NoError(t, err)
			assert.False(t, ok)
			assert.Equal(t, HistoryEvent{}, ev)
		})
	}

	badAmount := func(l streamLayoutCase) map[string]types.AttributeValue {
		item := l.item(t, &row)
		item[layout.AttrBillingAmount] = stringAV("4,99")
		return item
	}
	errs := []struct {
		name  string
		l     streamLayoutCase
		rec   wireRecord
		key   string
		field string // the FieldError's attribute, "" for none
	}{
		{"legacy inactive", legacy, wireRecord{image: withStatus(legacy, "INACTIVE")}, "user_id=acct-1#sub-1#PLUS last_run_date=2026-03-02T10:00:00.000000123Z", layout.AttrBillingStatus},
		{"legacy unknown status", legacy, wireRecord{image: withStatus(legacy, "FROZEN")}, "user_id=acct-1#sub-1#PLUS last_run_date=2026-03-02T10:00:00.000000123Z", layout.AttrBillingStatus},
		{"legacy bad amount", legacy, wireRecord{image: badAmount(legacy)}, "user_id=acct-1#sub-1#PLUS last_run_date=2026-03-02T10:00:00.000000123Z", layout.AttrBillingAmount},
		{"legacy keys only", legacy, wireRecord{keys: legacy.keysOf(histLegacy)}, "user_id=acct-1#sub-1#PLUS last_run_date=2026-03-02T10:00:00.000000123Z", ""},
		{"legacy no key", legacy, wireRecord{keys: map[string]types.AttributeValue{layout.AttrUserID: stringAV("u1")}}, "user_id=u1 last_run_date=", ""},
		{"single inactive", single, wireRecord{image: withStatus(single, "INACTIVE")}, "PK=USER#acct-1 SK=HIST#sub-1#SKU#PLUS#2026-03-02T10:00:00.000000123Z", layout.AttrBillingStatus},
		{"single unknown status", single, wireRecord{image: withStatus(single, "FROZEN")}, "PK=USER#acct-1 SK=HIST#sub-1#SKU#PLUS#2026-03-02T10:00:00.000000123Z", layout.AttrBillingStatus},
		{"single bad amount", single, wireRecord{image: badAmount(single)}, "PK=USER#acct-1 SK=HIST#sub-1#SKU#PLUS#2026-03-02T10:00:00.000000123Z", layout.AttrBillingAmount},
		{"single keys only", single, wireRecord{keys: single.keysOf(histSingle)}, "PK=USER#acct-1 SK=HIST#sub-1#SKU#PLUS#2026-03-02T10:00:00.000000123Z", ""},
		{"single numeric key", single, wireRecord{keys: map[string]types.AttributeValue{layout.AttrPK: &types.AttributeValueMemberN{Value: "1"}, layout.AttrSK: stringAV("x")}}, "PK= SK=x", ""},
	}
	// A history row is written once: a record that replaces or deletes
	// one (other than by TTL) is reported, in both input forms.
	histKey := map[string]string{
		"legacy": "user_id=acct-1#sub-1#PLUS last_run_date=2026-03-02T10:00:00.000000123Z",
		"single": "PK=USER#acct-1 SK=HIST#sub-1#SKU#PLUS#2026-03-02T10:00:00.000000123Z",
	}
	changed := []struct {
		name string
		l    streamLayoutCase
		rec  wireRecord
	}{
		{"legacy modify", legacy, wireRecord{event: "MODIFY", keys: legacy.keysOf(histLegacy), image: histLegacy}},
		{"legacy remove", legacy, wireRecord{event: "REMOVE", keys: legacy.keysOf(histLegacy)}},
		{"single modify", single, wireRecord{event: "MODIFY", keys: single.keysOf(histSingle), image: histSingle}},
		{"single modify without keys", single, wireRecord{event: "MODIFY", image: histSingle}},
		{"single remove", single, wireRecord{event: "REMOVE", keys: single.keysOf(histSingle)}},
	}
	for i, tc := range changed {
		t.Run("changed/"+tc.name, func(t *testing.T) {
			tc.rec.seq = strconv.Itoa(2500 + i)
			ev, ok, err := decodeBoth(t, tc.l.decoder, tc.rec)
			assert.False(t, ok)
			assert.Equal(t, HistoryEvent{}, ev)
			require.ErrorIs(t, err, ErrHistoryRowChanged)
			require.ErrorIs(t, err, billing.ErrInvalidItem)
			var re *StreamRecordError
			require.ErrorAs(t, err, &re)
			assert.Equal(t, tc.rec.seq, re.SequenceNumber)
			assert.Equal(t, histKey[tc.l.name], re.Key)
		})
	}

	for i, tc := range errs {
		t.Run("error/"+tc.name, func(t *testing.T) {
			tc.rec.event, tc.rec.seq = "INSERT", strconv.Itoa(3000+i)
			if tc.rec.keys == nil {
				tc.rec.keys = tc.l.keysOf(tc.rec.image)
			}
			_, ok, err := decodeBoth(t, tc.l.decoder, tc.rec)
			assert.False(t, ok)
			require.ErrorIs(t, err, billing.ErrInvalidItem)
			var re *StreamRecordError
			require.ErrorAs(t, err, &re)
			assert.Equal(t, tc.rec.seq, re.SequenceNumber)
			assert.Equal(t, tc.key, re.Key)
			if tc.field != "" {
				var fe *billing.FieldError
				require.ErrorAs(t, err, &fe)
				assert.Equal(t, tc.field, fe.Field)
			}
		})
	}
}

func TestStreamDecoderIDs(t *testing.T) {
	ls := streamLayouts(t)
	first := streamRow(billing.StatusCompleted, nil)
	later := streamRow(billing.StatusCompleted, func(s *billing.Period) { s.LastRunDate = s.LastRunDate.Add(time.Nanosecond) })
	otherUser := streamRow(billing.StatusCompleted, func(s *billing.Period) { s.UserID = "acct-2#sub-1#PLUS" })
	ids := map[string]string{}
	for _, l := range ls {
		decode := func(row billing.Period, seq string) HistoryEvent {
			item := l.item(t, &row)
			ev, ok, err := decodeBoth(t, l.decoder, wireRecord{event: "INSERT", seq: seq, keys: l.keysOf(item), image: item})
			require.NoError(t, err)
			require.True(t, ok)
			return ev
		}
		a, again := decode(first, "1"), decode(first, "99")
		assert.Equal(t, a.ID, a.Event.ID, "the event carries the ID")
		assert.Equal(t, a.ID, again.ID, "%s: a redelivery keeps the ID", l.name)
		assert.Equal(t, a.Event, again.Event)
		for name, row := range map[string]billing.Period{"first": first, "later": later, "other user": otherUser} {
			id := decode(row, "5").ID
			_, dup := ids[id]
			assert.False(t, dup, "%s/%s shares its ID with %s", l.name, name, ids[id])
			ids[id] = l.name + "/" + name
		}
	}
	assert.Len(t, ids, 6, "every row of either layout has its own ID")
}

func TestStreamDecoderLambdaPayload(t *testing.T) {
	d := NewHistoryStreamDecoder()
	row := streamRow(billing.StatusCompleted, nil)
	item, err := layout.EncodeHistoryItem(&row)
	require.NoError(t, err)
	good := wireRecord{event: "INSERT", seq: "11", keys: map[string]types.AttributeValue{layout.AttrUserID: sdkav.ToSDKValue(item[layout.AttrUserID]), layout.AttrLastRunDate: sdkav.ToSDKValue(item[layout.AttrLastRunDate])}, image: sdkav.ToSDK(item)}

	for _, payload := range []string{``, `null`, `[]`, `{}`, `{"Records":null}`, `{"Records":{}}`, `{"Records":[]`, `"x"`} {
		res, err := d.DecodeLambda([]byte(payload))
		require.ErrorIs(t, err, ErrNotStreamEvent, "payload %q", payload)
		assert.Nil(t, res)
	}
	res, err := d.DecodeLambda([]byte(`{"Records":[]}`))
	require.NoError(t, err)
	assert.Empty(t, res)

	// One bad record is reported in its place; the others decode.
	payload := []byte(`{"Records":[` + string(good.lambdaJSON(t)) + `,
		{"eventName":"INSERT","dynamodb":{"SequenceNumber":"12","Keys":{"user_id":{"S":"u"},"last_run_date":{"S":"x"}},"NewImage":{"user_id":{"Q":"u"}}}},
		{"eventName":"INSERT","dynamodb":{"SequenceNumber":"13","SizeBytes":"many"}},
		{"eventName":"INSERT","eventSource":"aws:kinesis","dynamodb":{"SequenceNumber":"14"}},
		17,
		{"eventName":"REMOVE","userIdentity":{"type":"Service","principalId":"dynamodb.amazonaws.com"},"dynamodb":{"SequenceNumber":"15","Keys":{"user_id":{"S":"u"},"last_run_date":{"S":"x"}}}},
		{"eventName":"REMOVE","dynamodb":{"SequenceNumber":"16","Keys":{"user_id":{"S":"u"},"last_run_date":{"S":"x"}}}},
		{"eventName":"MODIFY","userIdentity":{"type":"Service","principalId":"dynamodb.amazonaws.com"},"dynamodb":{"SequenceNumber":"17","Keys":{"user_id":{"S":"u"},"last_run_date":{"S":"x"}}}}
	]}`)
	res, err = d.DecodeLambda(payload)
	require.NoError(t, err)
	require.Len(t, res, 8)
	assert.True(t, res[0].OK)
	assert.Equal(t, billing.EventPaymentSucceeded, res[0].Event.Event.Type)
	for i, seq := range []string{"12", "13", "14", ""} {
		r := res[i+1]
		assert.False(t, r.OK)
		assert.Equal(t, seq, r.SequenceNumber)
		var re *StreamRecordError
		require.ErrorAs(t, r.Err, &re, "record %d", i+1)
		assert.Equal(t, seq, re.SequenceNumber)
		assert.ErrorIs(t, r.Err, billing.ErrInvalidItem)
	}
	assert.Equal(t, StreamResult{SequenceNumber: "15"}, res[5], "a TTL deletion is skipped")
	for _, r := range res[6:] {
		assert.False(t, r.OK)
		var re *StreamRecordError
		require.ErrorAs(t, r.Err, &re, "record %s", r.SequenceNumber)
		assert.Equal(t, r.SequenceNumber, re.SequenceNumber)
		assert.Equal(t, "user_id=u last_run_date=x", re.Key)
		assert.ErrorIs(t, r.Err, ErrHistoryRowChanged, "a deletion or change of a history row is reported")
	}
}

func TestConvertStreamItem(t *testing.T) {
	item := map[string]types.AttributeValue{
		"s": stringAV("x"), "n": &types.AttributeValueMemberN{Value: "4.5"}, "b": &types.AttributeValueMemberB{Value: []byte{1, 2}},
		"ss": &types.AttributeValueMemberSS{Value: []string{"a", "b"}}, "ns": &types.AttributeValueMemberNS{Value: []string{"1", "2"}},
		"bs": &types.AttributeValueMemberBS{Value: [][]byte{{3}, {4}}}, "null": &types.AttributeValueMemberNULL{Value: true},
		"bool": &types.AttributeValueMemberBOOL{Value: true},
		"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{stringAV("y"), &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}}}},
		}},
	}
	got, err := convertStreamItem(toStreamItem(item))
	require.NoError(t, err)
	assert.Equal(t, item, got)

	got, err = convertStreamItem(nil)
	require.NoError(t, err)
	assert.Nil(t, got, "no image stays no image")
	got, err = convertStreamItem(map[string]streamtypes.AttributeValue{})
	require.NoError(t, err)
	assert.Equal(t, map[string]types.AttributeValue{}, got)

	for _, tc := range []struct {
		name string
		item map[string]streamtypes.AttributeValue
		want string
	}{
		{"unknown member nested in a map",
			map[string]streamtypes.AttributeValue{"m": &streamtypes.AttributeValueMemberM{Value: map[string]streamtypes.AttributeValue{"x": &streamtypes.UnknownUnionMember{Tag: "Z"}}}},
			"unknown AttributeValue union member, *types.UnknownUnionMember"},
		{"nil element of a list",
			map[string]streamtypes.AttributeValue{"l": &streamtypes.AttributeValueMemberL{Value: []streamtypes.AttributeValue{nil}}},
			"unknown AttributeValue union member, <nil>"},
		{"nil top-level value",
			map[string]streamtypes.AttributeValue{"s": &streamtypes.AttributeValueMemberS{Value: "x"}, "n": nil},
			"unknown AttributeValue union member, <nil>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := convertStreamItem(tc.item)
			require.ErrorIs(t, err, billing.ErrInvalidItem)
			assert.ErrorContains(t, err, tc.want)
			assert.Nil(t, got)
		})
	}

	// Through the decoder, a history row whose image does not convert is
	// reported, not skipped.
	d, err := NewSingleTableStreamDecoder(SingleTableConfig{})
	require.NoError(t, err)
	keys := map[string]streamtypes.AttributeValue{
		layout.AttrPK: &streamtypes.AttributeValueMemberS{Value: "USER#a"}, layout.AttrSK: &streamtypes.AttributeValueMemberS{Value: "HIST#x"},
	}
	image := map[string]streamtypes.AttributeValue{"x": &streamtypes.UnknownUnionMember{Tag: "Z"}}
	for k, v := range keys {
		image[k] = v
	}
	_, ok, err := d.Decode(streamtypes.Record{EventName: streamtypes.OperationTypeInsert, Dynamodb: &streamtypes.StreamRecord{
		SequenceNumber: aws.String("7"), Keys: keys, NewImage: image,
	}})
	assert.False(t, ok)
	require.ErrorIs(t, err, billing.ErrInvalidItem)
	var re *StreamRecordError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, "7", re.SequenceNumber)
	assert.Equal(t, "PK=USER#a SK=HIST#x", re.Key)
	assert.ErrorContains(t, err, "new image")
}

func TestNewSingleTableStreamDecoderChecksConfig(t *testing.T) {
	_, err := NewSingleTableStreamDecoder(SingleTableConfig{ReminderIndex: "x", PaymentIndex: "x"})
	require.Error(t, err)
	_, err = NewSingleTableStreamDecoder(SingleTableConfig{AccountPrefix: "PERIOD"})
	require.ErrorContains(t, err, "AccountPrefix")
	d, err := NewSingleTableStreamDecoder(SingleTableConfig{AccountPrefix: "ACC#"})
	require.NoError(t, err)
	assert.Equal(t, "ACC#", d.tbl.AccountPrefix)
}

// FuzzDecodeLambda feeds arbitrary payloads to the decoders: they never
// panic, and every record is either decoded, skipped or reported.
func FuzzDecodeLambda(f *testing.F) {
	for _, l := range streamLayouts(f) {
		for _, st := range []billing.Status{billing.StatusCompleted, billing.StatusError, billing.StatusScheduled, billing.StatusPaused} {
			row := streamRow(st, nil)
			item := l.item(f, &row)
			f.Add(lambdaPayload(f,
				wireRecord{event: "INSERT", seq: "1", keys: l.keysOf(item), image: item},
				wireRecord{event: "REMOVE", seq: "2", keys: l.keysOf(item)},
				wireRecord{event: "INSERT", seq: "3", keys: l.keysOf(item)},
			))
		}
	}
	life := newInvoiceLife(f, "USD", 499)
	for _, l := range invoiceStreamLayouts(f) {
		open, credited := l.row(f, &life.open, nil), l.row(f, &life.credited1, &life.note1)
		f.Add(lambdaPayload(f,
			wireRecord{event: "INSERT", seq: "1", keys: l.keysOf(open), image: open},
			wireRecord{event: "INSERT", seq: "2", keys: l.keysOf(credited), image: credited},
			wireRecord{event: "MODIFY", seq: "3", keys: l.keysOf(open), image: open},
		))
	}
	f.Add([]byte(`{"Records":[{"eventName":"INSERT","dynamodb":{"Keys":{"PK":{"S":"USER#a"},"SK":{"S":"HIST#x"}},"NewImage":{"m":{"M":{"l":{"L":[{"NULL":true}]}}}}}}]}`))
	f.Add([]byte(`{"Records":[{"eventName":"INSERT","dynamodb":{"Keys":{"pk":{"S":"USER#a"},"sk":{"S":"INVH#x"}},"NewImage":{"event":{"S":"invoice_paid"},"currency":{"S":"JPY"},"total":{"N":"9223372036854775807"}}}}]}`))
	f.Add([]byte(`{"Records":[17,null,{}]}`))
	decoders := []*StreamDecoder{NewHistoryStreamDecoder(), NewInvoiceStreamDecoder()}
	single, err := NewSingleTableStreamDecoder(SingleTableConfig{})
	require.NoError(f, err)
	decoders = append(decoders, single)
	f.Fuzz(func(t *testing.T, payload []byte) {
		for _, d := range decoders {
			res, err := d.DecodeLambda(payload)
			if err != nil {
				require.ErrorIs(t, err, ErrNotStreamEvent)
				require.Nil(t, res)
				continue
			}
			for _, r := range res {
				switch {
				case r.OK:
					require.NoError(t, r.Err)
					require.NotEmpty(t, r.Event.ID)
					require.NotEmpty(t, r.Event.Event.Type)
				case r.Err != nil:
					var re *StreamRecordError
					require.ErrorAs(t, r.Err, &re)
				default:
					require.Equal(t, HistoryEvent{}, r.Event)
				}
			}
		}
	})
}
