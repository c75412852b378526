package prenote

import "context"

// BankAccount is one linked bank account.
type BankAccount struct {
	// ID identifies the account in its link.
	ID string
	// Mask is the end of the account number as the link reports it; only
	// its last four characters are ever put in a notification.
	Mask string
}

// BankLink is a user's linked bank (an account aggregator's item): the
// primary account that is charged and every linked account.
type BankLink struct {
	// PrimaryAccountID is the ID of the account collections debit (the
	// legacy main_account_id / primary_account_id); empty when none is set.
	PrimaryAccountID string
	// Accounts are the linked accounts.
	Accounts []BankAccount
}

// Primary returns the primary account, if the link has it.
func (l BankLink) Primary() (BankAccount, bool) {
	if l.PrimaryAccountID == "" {
		return BankAccount{}, false
	}
	for _, a := range l.Accounts {
		if a.ID == l.PrimaryAccountID {
			return a, true
		}
	}
	return BankAccount{}, false
}

// Usable reports whether the link can take a prenote: it has a primary
// account ID and at least one account.
func (l BankLink) Usable() bool { return l.PrimaryAccountID != "" && len(l.Accounts) > 0 }

// BankAccounts looks up users' linked bank accounts.
type BankAccounts interface {
	// BankLink returns the user's link; a user without one gets the zero
	// BankLink and a nil error. An error fails the message when the
	// notice needs the account ([AccountMask]), and is a prenote error in
	// [DefaultPolicy].
	BankLink(ctx context.Context, userID string) (BankLink, error)
}

// AccountMask adapts accounts to the notifier worker's AccountMask
// ([github.com/dynabill/billing/notice.WorkerConfig]): the
// last four characters of the primary account's mask, "" when the user has
// no primary account (the worker then logs a warning and sends the notice
// without digits). A lookup error is returned, and fails the message.
func AccountMask(accounts BankAccounts) func(ctx context.Context, userID string) (string, error) {
	return func(ctx context.Context, userID string) (string, error) {
		link, err := accounts.BankLink(ctx, userID)
		if err != nil {
			return "", err
		}
		a, ok := link.Primary()
		if !ok {
			return "", nil
		}
		return lastFour(a.Mask), nil
	}
}

// lastFour returns the last four characters of s.
func lastFour(s string) string {
	r := []rune(s)
	if len(r) > 4 {
		r = r[len(r)-4:]
	}
	return string(r)
}
