package billing

import "fmt"

// OwedError reports a [Periods.CancelUnowed] refused because cancelling
// the record would forgive money: its period is owed, or its payment is
// not settled yet. It matches [ErrOwed].
type OwedError struct {
	// SubscriptionID is the record, and Status its status as read under
	// the user's lock.
	SubscriptionID string
	Status         Status
	// InFlight is set when the record carries an attempt whose outcome is
	// not recorded yet (whatever its status).
	InFlight bool
}

// Error implements error.
func (e *OwedError) Error() string {
	why := "its charge was declined and is owed"
	switch {
	case e.InFlight:
		why = "a payment attempt has no recorded outcome yet"
	case e.Status == StatusACHSent:
		why = "its bank debit has not settled"
	}
	return fmt.Sprintf("%s: %s is %s: %s", ErrOwed, e.SubscriptionID, e.Status, why)
}

// Unwrap returns [ErrOwed].
func (e *OwedError) Unwrap() error { return ErrOwed }

// refuseOwed refuses a change that would forgive cur: an ERROR or ACHSENT
// record, or one with an attempt in flight.
func refuseOwed(cur *Period) error {
	if cur.InFlight() || cur.Status == StatusError || cur.Status == StatusACHSent {
		return &OwedError{SubscriptionID: cur.SubscriptionID, Status: cur.Status, InFlight: cur.InFlight()}
	}
	return nil
}
