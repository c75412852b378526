package dynamostore

import (
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/invoicedoc"
	"github.com/dynabill/billing/internal/layout"
)

// invoiceLayoutCase is a table whose stream carries invoice history rows:
// its decoder and the store that writes the rows.
type invoiceLayoutCase struct {
	name    string
	decoder *StreamDecoder
	store   *Invoices
}

func invoiceStreamLayouts(t testing.TB) []invoiceLayoutCase {
	legacy, err := NewInvoices(Config{Client: struct{ API }{}, Tables: TableConfig{Invoices: "billing-invoices"}})
	require.NoError(t, err)
	singleStore, err := NewSingleTableInvoices(SingleTableStoreConfig{Client: struct{ API }{}})
	require.NoError(t, err)
	single, err := NewSingleTableStreamDecoder(SingleTableConfig{})
	require.NoError(t, err)
	return []invoiceLayoutCase{
		{name: "legacy", decoder: NewInvoiceStreamDecoder(), store: legacy},
		{name: "single", decoder: single, store: singleStore},
	}
}

// row is the history row the store writes for version inv (note: the
// credit note that version issued).
func (l invoiceLayoutCase) row(t testing.TB, inv *billing.Invoice, note *billing.CreditNote) map[string]types.AttributeValue {
	pk, _, local, err := l.store.invoiceKey(inv.ID)
	require.NoError(t, err)
	return l.store.historyItem(pk, local, inv, note)
}

// other is an item of the invoice's partition that is not a history row.
func (l invoiceLayoutCase) other(t testing.TB, inv *billing.Invoice, sk string) map[string]types.AttributeValue {
	pk, _, _, err := l.store.invoiceKey(inv.ID)
	require.NoError(t, err)
	return l.store.item(pk, sk, encodeInvoice(inv, "Invoice"))
}

func (l invoiceLayoutCase) keysOf(item map[string]types.AttributeValue) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{l.store.pk: item[l.store.pk], l.store.sk: item[l.store.sk]}
}

// keyText is the key a StreamRecordError names for item.
func (l invoiceLayoutCase) keyText(item map[string]types.AttributeValue) string {
	s := func(a string) string { return item[a].(*types.AttributeValueMemberS).Value }
	return l.store.pk + "=" + s(l.store.pk) + " " + l.store.sk + "=" + s(l.store.sk)
}

// invoiceLife is one invoice through each change, as the store's changes
// make it (the rows are what the store writes for them).
type invoiceLife struct {
	draft, open, paid, credited1, credited2, void, uncollectible billing.Invoice
	note1, note2                                                 billing.CreditNote
}

func newInvoiceLife(t testing.TB, currency string, total int64) invoiceLife {
	return newUserInvoiceLife(t, "acct-1#sub-1#PLUS", currency, total)
}

func newUserInvoiceLife(t testing.TB, user, currency string, total int64) invoiceLife {
	t0 := streamT0
	base := billing.Invoice{
		UserID: user, Key: "per-1", Currency: currency, DueAt: t0,
		Lines: []billing.InvoiceLine{{Description: "Plus:v2 03/2026", PeriodStart: t0, PeriodEnd: t0.AddDate(0, 1, 0),
			Quantity: 1, UnitAmount: total, Amount: total, Kind: billing.LinePlan}},
		Subtotal: total, Total: total, AmountDue: total, PeriodIDs: []string{"per-1"},
	}
	var l invoiceLife
	var err error
	l.draft, err = invoicedoc.Draft(&base, t0)
	require.NoError(t, err)
	l.open = invoicedoc.Finalized(l.draft, 7, t0.Add(time.Minute+123))
	l.paid, _, err = invoicedoc.Apply(l.open, invoicedoc.Change{To: billing.InvoicePaid, TxID: "tx-1"}, t0.Add(2*time.Minute))
	require.NoError(t, err)
	note := func(inv billing.Invoice, key string, amount int64, seq int64, at time.Time) (billing.CreditNote, billing.Invoice) {
		n, next, err := invoicedoc.Note(inv, &billing.CreditNote{Key: key, InvoiceID: inv.ID, Reason: "refund", Total: amount,
			Lines: []billing.InvoiceLine{{Description: "Refund", Quantity: 1, UnitAmount: amount, Amount: amount, Kind: billing.LineCredit}}}, at)
		require.NoError(t, err)
		n.Seq, n.Number = seq, invoicedoc.Number(n.Prefix, seq, true)
		return n, next
	}
	l.note1, l.credited1 = note(l.paid, "refund/1", total/2, 1, t0.Add(3*time.Minute))
	l.note2, l.credited2 = note(l.credited1, "refund/2", total-total/2, 2, t0.Add(4*time.Minute))
	l.void, _, err = invoicedoc.Apply(l.open, invoicedoc.Change{To: billing.InvoiceVoid}, t0.Add(5*time.Minute))
	require.NoError(t, err)
	l.uncollectible, _, err = invoicedoc.Apply(l.open, invoicedoc.Change{To: billing.InvoiceUncollectible}, t0.Add(6*time.Minute))
	require.NoError(t, err)
	return l
}

// TestStreamDecoderInvoiceTypes: each change of an invoice, as its
// history row on either layout, read in both input forms, is one event of
// the change's type, time and amount (the total, or what a credit note
// credited), naming the invoice (the note for a credit), with the invoice
// as that version left it; the draft's row is skipped.
func TestStreamDecoderInvoiceTypes(t *testing.T) {
	life := newInvoiceLife(t, "USD", 499)
	inv := func(i billing.Invoice, typ billing.EventType, at time.Time) billing.Event {
		return billing.Event{Type: typ, At: at, UserID: "acct-1#sub-1#PLUS", SubscriptionID: "per-1", Amount: billing.Cents(i.Total),
			TransactionID: i.TransactionID, InvoiceID: i.ID, InvoiceNumber: i.Number}
	}
	credit := func(i billing.Invoice, n billing.CreditNote) billing.Event {
		return billing.Event{Type: billing.EventCreditNoteIssued, At: n.IssuedAt, UserID: "acct-1#sub-1#PLUS", SubscriptionID: "per-1",
			Amount: billing.Cents(n.Total), TransactionID: "tx-1", InvoiceID: n.ID, InvoiceNumber: n.Number}
	}
	cases := []struct {
		name string
		inv  billing.Invoice
		note *billing.CreditNote
		want billing.Event
	}{
		{"finalized", life.open, nil, inv(life.open, billing.EventInvoiceFinalized, life.open.IssuedAt)},
		{"paid", life.paid, nil, inv(life.paid, billing.EventInvoicePaid, life.paid.PaidAt)},
		{"first credit note", life.credited1, &life.note1, credit(life.credited1, life.note1)},
		{"second credit note", life.credited2, &life.note2, credit(life.credited2, life.note2)},
		{"voided", life.void, nil, inv(life.void, billing.EventInvoiceVoided, life.void.VoidedAt)},
		{"uncollectible", life.uncollectible, nil, inv(life.uncollectible, billing.EventInvoiceUncollectible, life.uncollectible.UncollectibleAt)},
	}
	require.Equal(t, "tx-1", life.paid.TransactionID)
	require.Equal(t, []int64{249, 250}, []int64{life.note1.Total, life.note2.Total}, "two notes credit the total")
	for _, l := range invoiceStreamLayouts(t) {
		for i, tc := range cases {
			t.Run(l.name+"/"+tc.name, func(t *testing.T) {
				item := l.row(t, &tc.inv, tc.note)
				rec := wireRecord{event: "INSERT", seq: strconv.Itoa(4000 + i), keys: l.keysOf(item), image: item}
				ev, ok, err := decodeBoth(t, l.decoder, rec)
				require.NoError(t, err)
				require.True(t, ok)
				want := tc.want
				want.ID = ev.ID
				assert.Equal(t, want, ev.Event)
				assert.Equal(t, ev.ID, ev.Event.ID)
				id, err := uuid.Parse(ev.ID)
				require.NoError(t, err)
				assert.Equal(t, uuid.Version(5), id.Version())
				assert.Equal(t, rec.seq, ev.SequenceNumber)
				assert.Equal(t, billing.Period{}, ev.Row, "an invoice's row has no period")
				require.NotNil(t, ev.Invoice)
				assert.Equal(t, tc.inv, *ev.Invoice, "the invoice as that version left it")
			})
		}
		t.Run(l.name+"/draft skipped", func(t *testing.T) {
			item := l.row(t, &life.draft, nil)
			require.Equal(t, stringAV(invoicedoc.EventCreated), item["event"])
			ev, ok, err := decodeBoth(t, l.decoder, wireRecord{event: "INSERT", seq: "4100", keys: l.keysOf(item), image: item})
			require.NoError(t, err)
			assert.False(t, ok)
			assert.Equal(t, HistoryEvent{}, ev)
		})
	}
}

// TestStreamDecoderInvoiceAmounts: an event's amount is in cents whatever
// the invoice's currency has for minor units.
func TestStreamDecoderInvoiceAmounts(t *testing.T) {
	for _, tc := range []struct {
		currency string
		total    int64
		want     billing.Amount
	}{
		{"USD", 499, billing.Cents(499)},
		{"JPY", 500, billing.Cents(50000)}, // ¥500 is 500.00
		{"KWD", 1250, billing.Cents(125)},  // 1.250 KWD
		{"KWD", 1255, billing.Cents(126)},  // 1.255: half to even, up
		{"KWD", 1245, billing.Cents(124)},  // 1.245: half to even, down
		{"KWD", 1256, billing.Cents(126)},
		{"CLF", 12345678, billing.Cents(123457)}, // four digits: 1234.5678
	} {
		l := invoiceStreamLayouts(t)[0]
		life := newInvoiceLife(t, tc.currency, tc.total)
		item := l.row(t, &life.paid, nil)
		ev, ok, err := decodeBoth(t, l.decoder, wireRecord{event: "INSERT", seq: "1", keys: l.keysOf(item), image: item})
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, tc.want, ev.Event.Amount, "%d %s", tc.total, tc.currency)
		assert.Equal(t, tc.total, ev.Invoice.Total, "the exact total is on the invoice")
	}
	huge := billing.Invoice{Currency: "JPY"}
	_, err := invoiceCents(&huge, 1<<62)
	require.Error(t, err, "overflows in cents")
}

// TestStreamDecoderInvoiceSkipsAndErrors: the invoices' other items are
// skipped; a history row replaced or deleted, of an unknown change, without
// its time or, for a credit note, without the note is reported.
func TestStreamDecoderInvoiceSkipsAndErrors(t *testing.T) {
	life := newInvoiceLife(t, "USD", 499)
	for _, l := range invoiceStreamLayouts(t) {
		hist := l.row(t, &life.paid, nil)
		others := map[string]map[string]types.AttributeValue{
			"invoice":       l.other(t, &life.paid, skInvoice+"x"),
			"key claim":     l.other(t, &life.paid, skInvoiceKey+"per-1"),
			"credit note":   l.other(t, &life.paid, skNote+"x"),
			"counter":       l.other(t, &life.paid, skCounterInv),
			"number claim":  l.other(t, &life.paid, skNumberInv+"000000000007"),
			"other account": l.store.item("ORG#acct-1", histSK("x", 3), encodeInvoice(&life.paid, "InvoiceHistory")),
		}
		seq := 5000
		for name, item := range others {
			for _, event := range []string{"INSERT", "MODIFY", "REMOVE"} {
				t.Run(l.name+"/skip/"+name+"/"+event, func(t *testing.T) {
					seq++
					rec := wireRecord{event: event, seq: strconv.Itoa(seq), keys: l.keysOf(item)}
					if event != "REMOVE" {
						rec.image = item
					}
					ev, ok, err := decodeBoth(t, l.decoder, rec)
					require.NoError(t, err)
					assert.False(t, ok)
					assert.Equal(t, HistoryEvent{}, ev)
				})
			}
		}
		t.Run(l.name+"/skip/ttl remove", func(t *testing.T) {
			ev, ok, err := decodeBoth(t, l.decoder, wireRecord{event: "REMOVE", seq: "5100", keys: l.keysOf(hist), ttl: true})
			require.NoError(t, err)
			assert.False(t, ok)
			assert.Equal(t, HistoryEvent{}, ev)
		})

		for i, rec := range []wireRecord{
			{event: "MODIFY", keys: l.keysOf(hist), image: hist},
			{event: "MODIFY", image: hist},
			{event: "REMOVE", keys: l.keysOf(hist)},
		} {
			t.Run(l.name+"/changed/"+rec.event, func(t *testing.T) {
				rec.seq = strconv.Itoa(5200 + i)
				ev, ok, err := decodeBoth(t, l.decoder, rec)
				assert.False(t, ok)
				assert.Equal(t, HistoryEvent{}, ev)
				require.ErrorIs(t, err, ErrHistoryRowChanged)
				require.ErrorIs(t, err, billing.ErrInvalidItem)
				var re *StreamRecordError
				require.ErrorAs(t, err, &re)
				assert.Equal(t, rec.seq, re.SequenceNumber)
				assert.Equal(t, l.keyText(hist), re.Key)
			})
		}

		with := func(inv *billing.Invoice, note *billing.CreditNote, mod func(map[string]types.AttributeValue)) map[string]types.AttributeValue {
			item := l.row(t, inv, note)
			mod(item)
			return item
		}
		errs := []struct {
			name, field string
			item        map[string]types.AttributeValue
		}{
			{"unknown event", "event", with(&life.paid, nil, func(m map[string]types.AttributeValue) { m["event"] = stringAV("invoice_teleported") })},
			{"no event", "event", with(&life.paid, nil, func(m map[string]types.AttributeValue) { delete(m, "event") })},
			{"finalized without issued_at", "issued_at", with(&life.open, nil, func(m map[string]types.AttributeValue) { delete(m, "issued_at") })},
			{"paid without paid_at", "paid_at", with(&life.paid, nil, func(m map[string]types.AttributeValue) { delete(m, "paid_at") })},
			{"bad paid_at", "paid_at", with(&life.paid, nil, func(m map[string]types.AttributeValue) { m["paid_at"] = stringAV("yesterday") })},
			{"credit note without the note", "credit_note_id", with(&life.credited1, nil, func(map[string]types.AttributeValue) {})},
			{"credit note without its number", "credit_note_number", with(&life.credited1, &life.note1, func(m map[string]types.AttributeValue) { delete(m, "credit_note_number") })},
			{"credit note above the credited", "credit_note_total", with(&life.credited1, &life.note1, func(m map[string]types.AttributeValue) {
				m["credit_note_total"] = &types.AttributeValueMemberN{Value: "250"}
			})},
			{"credit note without its time", "credit_note_issued_at", with(&life.credited1, &life.note1, func(m map[string]types.AttributeValue) { delete(m, "credit_note_issued_at") })},
			{"unknown currency", "Currency", with(&life.paid, nil, func(m map[string]types.AttributeValue) { m["currency"] = stringAV("XYZ") })},
			{"total not its lines", "Total", with(&life.paid, nil, func(m map[string]types.AttributeValue) { m["total"] = &types.AttributeValueMemberN{Value: "500"} })},
			{"total not a number", "invoice", with(&life.paid, nil, func(m map[string]types.AttributeValue) { m["total"] = stringAV("4.99") })},
		}
		for i, tc := range errs {
			t.Run(l.name+"/error/"+tc.name, func(t *testing.T) {
				rec := wireRecord{event: "INSERT", seq: strconv.Itoa(5300 + i), keys: l.keysOf(tc.item), image: tc.item}
				ev, ok, err := decodeBoth(t, l.decoder, rec)
				assert.False(t, ok)
				assert.Equal(t, HistoryEvent{}, ev)
				require.ErrorIs(t, err, billing.ErrInvalidItem)
				var re *StreamRecordError
				require.ErrorAs(t, err, &re)
				assert.Equal(t, rec.seq, re.SequenceNumber)
				assert.Equal(t, l.keyText(tc.item), re.Key)
				var fe *billing.FieldError
				require.ErrorAs(t, err, &fe)
				assert.Equal(t, tc.field, fe.Field)
			})
		}
		t.Run(l.name+"/error/keys not strings", func(t *testing.T) {
			keys := map[string]types.AttributeValue{l.store.pk: &types.AttributeValueMemberN{Value: "1"}, l.store.sk: stringAV(skInvoiceHist + "x")}
			_, ok, err := decodeBoth(t, l.decoder, wireRecord{event: "INSERT", seq: "5400", keys: keys, image: hist})
			assert.False(t, ok)
			require.ErrorIs(t, err, billing.ErrInvalidItem)
		})
	}
}

// TestStreamDecoderInvoiceIDs: an invoice row's ID is stable across
// deliveries and its own: no other row, version, layout or period row
// shares it, not even the row of the other layout at the very same key
// (user acct-1 is partition USER#acct-1 of either table).
func TestStreamDecoderInvoiceIDs(t *testing.T) {
	life, plain := newInvoiceLife(t, "USD", 499), newUserInvoiceLife(t, "acct-1", "USD", 499)
	ids := map[string]string{}
	add := func(name, id string) {
		_, dup := ids[id]
		assert.False(t, dup, "%s shares its ID with %s", name, ids[id])
		ids[id] = name
	}
	keys := map[string][]types.AttributeValue{}
	for _, l := range invoiceStreamLayouts(t) {
		for name, v := range map[string]struct {
			inv  billing.Invoice
			note *billing.CreditNote
		}{"open": {life.open, nil}, "paid": {life.paid, nil}, "credited": {life.credited1, &life.note1}, "plain user": {plain.paid, nil}} {
			item := l.row(t, &v.inv, v.note)
			a, ok, err := decodeBoth(t, l.decoder, wireRecord{event: "INSERT", seq: "1", keys: l.keysOf(item), image: item})
			require.NoError(t, err)
			require.True(t, ok)
			again, _, err := decodeBoth(t, l.decoder, wireRecord{event: "INSERT", seq: "99", keys: l.keysOf(item), image: item})
			require.NoError(t, err)
			assert.Equal(t, a.ID, again.ID, "%s/%s: a redelivery keeps the ID", l.name, name)
			assert.Equal(t, a.Event, again.Event)
			add(l.name+"/"+name, a.ID)
			if name == "plain user" {
				keys[l.name] = []types.AttributeValue{item[l.store.pk], item[l.store.sk]}
			}
		}
	}
	require.Equal(t, stringAV("USER#acct-1"), keys["legacy"][0])
	require.Equal(t, keys["legacy"], keys["single"], "the same key values on either layout")
	// The period rows of the same user on either layout.
	for _, l := range streamLayouts(t) {
		row := streamRow(billing.StatusCompleted, nil)
		item := l.item(t, &row)
		ev, ok, err := decodeBoth(t, l.decoder, wireRecord{event: "INSERT", seq: "1", keys: l.keysOf(item), image: item})
		require.NoError(t, err)
		require.True(t, ok)
		add("period/"+l.name, ev.ID)
	}
	assert.Len(t, ids, 10)
}

// TestSingleTableStreamDecoderReadsBothRows: the single table's decoder
// reads a period's and an invoice's history rows of one account
// partition, and the legacy history decoder reads neither kind of item
// it does not hold.
func TestSingleTableStreamDecoderReadsBothRows(t *testing.T) {
	life := newInvoiceLife(t, "USD", 499)
	inv := invoiceStreamLayouts(t)[1]
	per := streamLayouts(t)[1]
	row := streamRow(billing.StatusCompleted, nil)
	periodItem, invoiceItem := per.item(t, &row), inv.row(t, &life.paid, nil)
	require.Equal(t, periodItem[layout.AttrPK], invoiceItem[layout.AttrPK], "one account partition")
	var got []billing.EventType
	for i, item := range []map[string]types.AttributeValue{periodItem, invoiceItem} {
		ev, ok, err := decodeBoth(t, inv.decoder, wireRecord{event: "INSERT", seq: strconv.Itoa(i), keys: inv.keysOf(item), image: item})
		require.NoError(t, err)
		require.True(t, ok)
		got = append(got, ev.Event.Type)
	}
	assert.Equal(t, []billing.EventType{billing.EventPaymentSucceeded, billing.EventInvoicePaid}, got)
}
