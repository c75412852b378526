package memory

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/invoicedoc"
)

// Invoices is the in-memory twin of dynamostore's invoice stores: the same
// numbering, conditions and errors, with a mutex where DynamoDB has
// transactions. Make one with [NewInvoices].
type Invoices struct {
	mu       sync.Mutex
	clock    billing.Clock
	invoices map[string]billing.Invoice    // by ID
	keys     map[[2]string]string          // account and issuance key -> invoice ID
	counters map[string]int64              // sequence scope -> last number given
	numbers  map[string]string             // sequence scope and number -> invoice or note ID
	history  map[string][]billing.Invoice  // invoice ID -> rows, version order
	notes    map[string]billing.CreditNote // by ID

	// fault, when set (by tests), is called before each write is applied
	// (applied false) and after it is (applied true): an error returned
	// before leaves the store as it was, one returned after is the answer
	// of a write that was made; a panic crashes the call.
	fault func(op string, applied bool) error

	// single: the single table's model, where a subscription's user ID
	// (account#subscription#SKU) numbers its invoices in its account's
	// sequence, as dynamostore.NewSingleTableInvoices does.
	single bool
}

var _ billing.Invoices = (*Invoices)(nil)

// NewInvoices returns an empty invoice store. clock gives the Created time
// of drafts that have none; nil means [billing.SystemClock].
func NewInvoices(clock billing.Clock) *Invoices {
	if clock == nil {
		clock = billing.SystemClock{}
	}
	return &Invoices{clock: clock, invoices: map[string]billing.Invoice{}, keys: map[[2]string]string{},
		counters: map[string]int64{}, numbers: map[string]string{}, history: map[string][]billing.Invoice{},
		notes: map[string]billing.CreditNote{}}
}

// NewSingleTableInvoices is [NewInvoices] as the single table keeps
// invoices: a subscription's user ID (account#subscription#SKU) has its
// invoices numbered in its account's sequence, with the account as the
// default prefix, and ByUser of the account lists every subscription's.
func NewSingleTableInvoices(clock billing.Clock) *Invoices {
	s := NewInvoices(clock)
	s.single = true
	return s
}

// accountOf is whose sequence numbers userID's invoices: on the single
// table the account of a subscription's user ID, else the user.
func (s *Invoices) accountOf(userID string) string {
	if s.single {
		return invoicedoc.Account(userID)
	}
	return userID
}

// scope names the counter of inv's sequence: the account's own, or the
// shared one of its name.
func (s *Invoices) scope(userID, sequence string, note bool) string {
	return scope(s.accountOf(userID), sequence, note)
}

func scope(userID, sequence string, note bool) string {
	s := "acct\x00" + userID
	if sequence != "" {
		s = "seq\x00" + sequence
	}
	if note {
		s += "\x00CN"
	}
	return s
}

// commit applies write under s.mu, with the fault hook around it.
func (s *Invoices) commit(op string, write func()) error {
	if s.fault != nil {
		if err := s.fault(op, false); err != nil {
			return err
		}
	}
	write()
	if s.fault != nil {
		return s.fault(op, true)
	}
	return nil
}

// CreateDraft implements [billing.Invoices.CreateDraft].
func (s *Invoices) CreateDraft(ctx context.Context, inv *billing.Invoice) (billing.Invoice, error) {
	if err := ctx.Err(); err != nil {
		return billing.Invoice{}, err
	}
	if acct := s.accountOf(inv.UserID); acct != inv.UserID && inv.Prefix == "" && inv.Sequence == "" {
		own := *inv
		own.Prefix = acct // the account's sequence: its numbers start with the account
		inv = &own
	}
	d, err := invoicedoc.Draft(inv, s.clock.Now())
	if err != nil {
		return billing.Invoice{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, ok := s.keys[[2]string{d.UserID, d.Key}]; ok {
		cur := s.invoices[id]
		if f := invoicedoc.Differs(&s.history[id][0], inv); len(f) > 0 {
			return billing.Invoice{}, invoicedoc.KeyReused(d.UserID, d.Key, "invoice", f)
		}
		return invoicedoc.Clone(cur), nil
	}
	err = s.commit("create draft", func() {
		s.keys[[2]string{d.UserID, d.Key}] = d.ID
		s.invoices[d.ID] = d
		s.history[d.ID] = []billing.Invoice{invoicedoc.Clone(d)}
	})
	return invoicedoc.Clone(d), err
}

// get returns the invoice id; s.mu must be held.
func (s *Invoices) get(id string) (billing.Invoice, error) {
	cur, ok := s.invoices[id]
	if !ok {
		return billing.Invoice{}, fmt.Errorf("%w: invoice %s", billing.ErrNotFound, id)
	}
	return cur, nil
}

// put writes next over the invoice and appends its history row; s.mu must
// be held.
func (s *Invoices) put(next billing.Invoice) {
	s.invoices[next.ID] = next
	s.history[next.ID] = append(s.history[next.ID], invoicedoc.Clone(next))
}

// Finalize implements [billing.Invoices.Finalize].
func (s *Invoices) Finalize(ctx context.Context, id string, at time.Time) (billing.Invoice, error) {
	if err := ctx.Err(); err != nil {
		return billing.Invoice{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.get(id)
	if err != nil {
		return cur, err
	}
	if cur.Number != "" {
		return invoicedoc.Clone(cur), nil // finalized already: a repeat
	}
	if err := cur.Status.CheckTransition(billing.InvoiceOpen); err != nil {
		return billing.Invoice{}, fmt.Errorf("billing: finalize invoice %s (key %s): %w", id, cur.Key, err)
	}
	if err := invoicedoc.CheckTime(cur.Key, at); err != nil {
		return billing.Invoice{}, err
	}
	sc := s.scope(cur.UserID, cur.Sequence, false)
	seq := s.counters[sc] + 1
	num := fmt.Sprintf("%s\x00%d", sc, seq)
	if other, ok := s.numbers[num]; ok {
		return billing.Invoice{}, &billing.ConflictError{Op: "finalize invoice", Key: id,
			Reason: fmt.Sprintf("number %d of the sequence is taken by %s", seq, other), Err: billing.ErrConflict}
	}
	next := invoicedoc.Finalized(cur, seq, at)
	err = s.commit("finalize invoice", func() {
		s.counters[sc] = seq
		s.numbers[num] = id
		s.put(next)
	})
	return invoicedoc.Clone(next), err
}

func (s *Invoices) change(ctx context.Context, op, id string, ch invoicedoc.Change, at time.Time) (billing.Invoice, error) {
	if err := ctx.Err(); err != nil {
		return billing.Invoice{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.get(id)
	if err != nil {
		return cur, err
	}
	next, repeat, err := invoicedoc.Apply(cur, ch, at)
	if err != nil {
		return billing.Invoice{}, fmt.Errorf("billing: %s: %w", op, err)
	}
	if repeat {
		return invoicedoc.Clone(cur), nil
	}
	err = s.commit(op, func() { s.put(next) })
	return invoicedoc.Clone(next), err
}

// MarkPaid implements [billing.Invoices.MarkPaid].
func (s *Invoices) MarkPaid(ctx context.Context, id, txID string, at time.Time) (billing.Invoice, error) {
	return s.change(ctx, "mark invoice paid", id, invoicedoc.Change{To: billing.InvoicePaid, TxID: txID}, at)
}

// Void implements [billing.Invoices.Void].
func (s *Invoices) Void(ctx context.Context, id string, at time.Time) (billing.Invoice, error) {
	return s.change(ctx, "void invoice", id, invoicedoc.Change{To: billing.InvoiceVoid}, at)
}

// MarkUncollectible implements [billing.Invoices.MarkUncollectible].
func (s *Invoices) MarkUncollectible(ctx context.Context, id string, at time.Time) (billing.Invoice, error) {
	return s.change(ctx, "mark invoice uncollectible", id, invoicedoc.Change{To: billing.InvoiceUncollectible}, at)
}

// IssueCreditNote implements [billing.Invoices.IssueCreditNote].
func (s *Invoices) IssueCreditNote(ctx context.Context, note *billing.CreditNote) (billing.CreditNote, error) {
	if err := ctx.Err(); err != nil {
		return billing.CreditNote{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	inv, err := s.get(note.InvoiceID)
	if err != nil {
		return billing.CreditNote{}, err
	}
	if cur, ok := s.notes[invoicedoc.NoteID(inv.ID, note.Key)]; ok {
		if f := invoicedoc.NoteDiffers(&cur, note); len(f) > 0 {
			return billing.CreditNote{}, invoicedoc.KeyReused(inv.UserID, note.Key, "credit note", f)
		}
		return invoicedoc.CloneNote(cur), nil
	}
	n, next, err := invoicedoc.Note(inv, note, s.clock.Now())
	if err != nil {
		return billing.CreditNote{}, err
	}
	sc := s.scope(inv.UserID, inv.Sequence, true)
	n.Seq = s.counters[sc] + 1
	n.Number = invoicedoc.Number(n.Prefix, n.Seq, true)
	err = s.commit("issue credit note", func() {
		s.counters[sc] = n.Seq
		s.numbers[fmt.Sprintf("%s\x00%d", sc, n.Seq)] = n.ID
		s.notes[n.ID] = n
		s.put(next)
	})
	return invoicedoc.CloneNote(n), err
}

// Invoice implements [billing.Invoices.Invoice].
func (s *Invoices) Invoice(ctx context.Context, id string) (billing.Invoice, error) {
	if err := ctx.Err(); err != nil {
		return billing.Invoice{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.get(id)
	return invoicedoc.Clone(cur), err
}

// ByUser implements [billing.Invoices.ByUser].
func (s *Invoices) ByUser(ctx context.Context, userID, after string, limit int) ([]billing.Invoice, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	var from string
	if after != "" {
		u, local, err := invoicedoc.ParseID(after, false)
		if err != nil || s.accountOf(u) != s.accountOf(userID) {
			return nil, "", fmt.Errorf("%w: invoice page after %q of user %s", billing.ErrInvalidCursor, after, userID)
		}
		from = local
	}
	if limit <= 0 {
		limit = 100
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	type row struct {
		local string
		inv   billing.Invoice
	}
	var rows []row
	whole := s.accountOf(userID) == userID // an account: every subscription's
	for id, inv := range s.invoices {
		if inv.UserID != userID && (!whole || s.accountOf(inv.UserID) != userID) {
			continue
		}
		_, local, _ := invoicedoc.ParseID(id, false)
		if from == "" || local < from {
			rows = append(rows, row{local, inv})
		}
	}
	slices.SortFunc(rows, func(a, b row) int { return strings.Compare(b.local, a.local) })
	var next string
	if len(rows) > limit {
		rows = rows[:limit]
		next = rows[limit-1].inv.ID
	}
	out := make([]billing.Invoice, len(rows))
	for i, r := range rows {
		out[i] = invoicedoc.Clone(r.inv)
	}
	return out, next, nil
}

// ByNumber implements [billing.Invoices.ByNumber].
func (s *Invoices) ByNumber(ctx context.Context, userID, sequence, number string) (billing.Invoice, error) {
	if err := ctx.Err(); err != nil {
		return billing.Invoice{}, err
	}
	seq, ok := invoicedoc.ParseSeq(number)
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.numbers[fmt.Sprintf("%s\x00%d", s.scope(userID, sequence, false), seq)]
	inv, found := s.invoices[id]
	if !ok || !found || inv.Number != number {
		return billing.Invoice{}, fmt.Errorf("%w: invoice number %s", billing.ErrNotFound, number)
	}
	return invoicedoc.Clone(inv), nil
}

// History implements [billing.Invoices.History].
func (s *Invoices) History(ctx context.Context, id string) ([]billing.Invoice, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]billing.Invoice, 0, len(s.history[id]))
	for _, r := range s.history[id] {
		out = append(out, invoicedoc.Clone(r))
	}
	return out, nil
}

// CreditNotes implements [billing.Invoices.CreditNotes].
func (s *Invoices) CreditNotes(ctx context.Context, invoiceID string) ([]billing.CreditNote, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []billing.CreditNote
	for _, n := range s.notes {
		if n.InvoiceID == invoiceID {
			out = append(out, invoicedoc.CloneNote(n))
		}
	}
	slices.SortFunc(out, func(a, b billing.CreditNote) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, nil
}
