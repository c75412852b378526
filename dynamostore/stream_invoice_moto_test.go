package dynamostore_test

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/dynamotest"
)

// TestInvoiceStreamEndToEnd makes invoices through the store of each
// layout (the legacy invoices table, made with its stream by
// InvoicesTableDefinition, and the single table), takes them through
// every change, reads the table's stream from moto and decodes it: exactly
// the events of the changes, in the order they were written, each with the
// invoice as that version left it; the drafts' rows, the invoices, their
// counters, claims and credit notes are skipped, and repeated calls add
// nothing.
func TestInvoiceStreamEndToEnd(t *testing.T) {
	t.Parallel()
	type env struct {
		user    string
		store   *dynamostore.Invoices
		table   string
		decoder *dynamostore.StreamDecoder
	}
	layouts := map[string]func(t *testing.T, clock billing.Clock) env{
		"legacy": func(t *testing.T, _ billing.Clock) env {
			client := dynamotest.Client(t)
			tables := dynamostore.TableConfig{Invoices: dynamotest.TableName(t, "billing-invoices")}
			dynamotest.CreateTable(t, client, dynamostore.InvoicesTableDefinition(tables)) // its stream is the definition's
			s, err := dynamostore.NewInvoices(dynamostore.Config{Client: client, Tables: tables})
			require.NoError(t, err)
			return env{"u-stream", s, tables.Invoices, dynamostore.NewInvoiceStreamDecoder()}
		},
		"single": func(t *testing.T, clock billing.Clock) env {
			client := dynamotest.Client(t)
			table := dynamostore.SingleTableConfig{Table: dynamotest.TableName(t, "payments"), AccountPrefix: "ACC#", TTLAttribute: "TTL"}
			dynamotest.CreateTable(t, client, withStream(dynamostore.SingleTableDefinition(table)))
			s, err := dynamostore.NewSingleTableInvoices(dynamostore.SingleTableStoreConfig{Client: client, Table: table, Clock: clock})
			require.NoError(t, err)
			d, err := dynamostore.NewSingleTableStreamDecoder(table)
			require.NoError(t, err)
			return env{"acct-1#s1#PLUS", s, table.Table, d}
		},
	}
	for name, setup := range layouts {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
			clock := billingtest.NewClock(t0)
			e := setup(t, clock)
			s := e.store
			at := func(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }

			draft := func(key, currency string, total int64) billing.Invoice {
				t.Helper()
				inv, err := s.CreateDraft(ctx, &billing.Invoice{
					UserID: e.user, Key: key, Currency: currency, DueAt: t0, Created: t0,
					Lines: []billing.InvoiceLine{{Description: "Plus:v2 03/2026", PeriodStart: t0, PeriodEnd: t0.AddDate(0, 1, 0),
						Quantity: 1, UnitAmount: total, Amount: total, Kind: billing.LinePlan}},
					Subtotal: total, Total: total, AmountDue: total, PeriodIDs: []string{key},
				})
				require.NoError(t, err, key)
				return inv
			}
			must := func(inv billing.Invoice, err error) billing.Invoice {
				t.Helper()
				require.NoError(t, err)
				return inv
			}
			note := func(inv billing.Invoice, key string, amount int64) billing.CreditNote {
				t.Helper()
				n, err := s.IssueCreditNote(ctx, &billing.CreditNote{Key: key, InvoiceID: inv.ID, Reason: "refund", Total: amount,
					Lines: []billing.InvoiceLine{{Description: "Refund", Quantity: 1, UnitAmount: amount, Amount: amount, Kind: billing.LineCredit}}})
				require.NoError(t, err, key)
				return n
			}

			// A: finalized, paid, refunded in two credit notes.
			a := draft("per-1", "USD", 499)
			aOpen := must(s.Finalize(ctx, a.ID, at(1)))
			aPaid := must(s.MarkPaid(ctx, a.ID, "tx-1", at(2)))
			must(s.MarkPaid(ctx, a.ID, "tx-1", at(9))) // a repeat: no row
			n1 := note(aPaid, "refund/1", 200)
			n2 := note(aPaid, "refund/2", 299)
			_ = note(aPaid, "refund/2", 299) // a repeat: no row
			// B, in yen: finalized, voided.
			b := draft("per-2", "JPY", 500)
			bOpen := must(s.Finalize(ctx, b.ID, at(3)))
			bVoid := must(s.Void(ctx, b.ID, at(4)))
			// C: finalized, given up, paid late.
			c := draft("per-3", "USD", 499)
			cOpen := must(s.Finalize(ctx, c.ID, at(5)))
			cUnc := must(s.MarkUncollectible(ctx, c.ID, at(6)))
			cPaid := must(s.MarkPaid(ctx, c.ID, "tx-3", at(7)))
			// D: a draft voided before it was numbered.
			d := draft("per-4", "USD", 499)
			dVoid := must(s.Void(ctx, d.ID, at(8)))
			require.Equal(t, []int64{1, 2, 3}, []int64{aOpen.Seq, bOpen.Seq, cOpen.Seq})
			require.Equal(t, "tx-1", aPaid.TransactionID)

			ev := func(typ billing.EventType, inv billing.Invoice, when time.Time, amount billing.Amount) billing.Event {
				return billing.Event{Type: typ, At: when, UserID: e.user, SubscriptionID: inv.PeriodIDs[0], Amount: amount,
					TransactionID: inv.TransactionID, InvoiceID: inv.ID, InvoiceNumber: inv.Number}
			}
			credit := func(n billing.CreditNote) billing.Event {
				return billing.Event{Type: billing.EventCreditNoteIssued, At: n.IssuedAt, UserID: e.user, SubscriptionID: "per-1",
					Amount: billing.Cents(n.Total), TransactionID: "tx-1", InvoiceID: n.ID, InvoiceNumber: n.Number}
			}
			want := []billing.Event{
				ev(billing.EventInvoiceFinalized, aOpen, at(1), billing.Cents(499)),
				ev(billing.EventInvoicePaid, aPaid, at(2), billing.Cents(499)),
				credit(n1),
				credit(n2),
				ev(billing.EventInvoiceFinalized, bOpen, at(3), billing.Cents(50000)), // ¥500
				ev(billing.EventInvoiceVoided, bVoid, at(4), billing.Cents(50000)),
				ev(billing.EventInvoiceFinalized, cOpen, at(5), billing.Cents(499)),
				ev(billing.EventInvoiceUncollectible, cUnc, at(6), billing.Cents(499)),
				ev(billing.EventInvoicePaid, cPaid, at(7), billing.Cents(499)),
				ev(billing.EventInvoiceVoided, dVoid, at(8), billing.Cents(499)),
			}
			require.Equal(t, []int64{200, 299}, []int64{n1.Total, n2.Total})
			require.NotEmpty(t, n1.Number)

			// The stream, decoded twice: the same events and IDs.
			recs := readStream(t, e.table)
			var got []billing.Event
			ids := map[string]bool{}
			skipped := 0
			for _, r := range recs {
				hev, ok, err := e.decoder.Decode(r)
				require.NoError(t, err, "stream record %s %s", r.EventName, aws.ToString(r.Dynamodb.SequenceNumber))
				again, ok2, err := e.decoder.Decode(r)
				require.NoError(t, err)
				require.Equal(t, ok, ok2)
				assert.Equal(t, hev, again, "decoding a record again gives the same event")
				if !ok {
					skipped++
					continue
				}
				assert.Equal(t, "INSERT", string(r.EventName))
				require.NotEmpty(t, hev.ID)
				require.False(t, ids[hev.ID], "two events share ID %s", hev.ID)
				ids[hev.ID] = true
				assert.Equal(t, hev.ID, hev.Event.ID)
				assert.Equal(t, billing.Period{}, hev.Row)
				// The invoice is the row the store's History reads.
				require.NotNil(t, hev.Invoice)
				rows, err := s.History(ctx, hev.Invoice.ID)
				require.NoError(t, err)
				require.GreaterOrEqual(t, len(rows), int(hev.Invoice.Version))
				assert.Equal(t, rows[hev.Invoice.Version-1], *hev.Invoice, "the invoice of the row")
				e := hev.Event
				e.ID = ""
				got = append(got, e)
			}
			assert.Equal(t, want, got, "the invoices' events, in order")
			t.Logf("%d stream records: %d events, %d skipped", len(recs), len(got), skipped)
			// 4 drafts' rows, 4 invoices (each changed again), 4 key
			// claims, 2 counters, 3 number claims and 2 credit notes with
			// their number claims at the least.
			assert.GreaterOrEqual(t, skipped, 4+4+4+2+3+2+2, "records of items that are no invoice history rows")
		})
	}
}

// TestInvoicesTableHasStream: the invoices table the library creates has
// the NEW_IMAGE stream its history rows are read from, on the server too.
func TestInvoicesTableHasStream(t *testing.T) {
	t.Parallel()
	client := dynamotest.Client(t)
	tables := dynamostore.TableConfig{Invoices: dynamotest.TableName(t, "billing-invoices")}
	dynamotest.CreateTable(t, client, dynamostore.InvoicesTableDefinition(tables))
	out, err := client.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(tables.Invoices)})
	require.NoError(t, err)
	require.NotNil(t, out.Table.StreamSpecification)
	assert.True(t, aws.ToBool(out.Table.StreamSpecification.StreamEnabled))
	assert.Equal(t, "NEW_IMAGE", string(out.Table.StreamSpecification.StreamViewType))
	assert.NotEmpty(t, aws.ToString(out.Table.LatestStreamArn))
}
