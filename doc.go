// Package billing runs recurring subscription billing on Amazon DynamoDB
// inside a host's own Lambdas and servers.
//
// It owns the subscription records and their audit history, per-user billing
// locks, the collection engine and the pre-billing notifier; the host plugs
// in its payment processor, notification channel, user directory and queues
// through small interfaces. Billing is money: every design choice here leans
// towards "never charge twice, never lose a record, never skip a user
// silently".
//
// # The domain model
//
// A [Subscription] is one billing period of one user: one item of the legacy
// billing-activity table (partition key user_id, sort key billing_date). Its
// [Status] moves only along the transition table documented on [Status] and
// checked by [CanTransition]. Money is an [Amount] in integer cents, parsed
// and printed exactly ("4.99"); there are no floats in any money path.
// Billing dates follow a [Schedule]: monthly or yearly, anchored on the day
// the subscription started so that a Jan 31 subscription bills on Feb 29 and
// then Mar 31, or on the n-th Friday of the month for Friday billing.
//
// # The wire contract
//
// Existing tables and data must keep working, so attribute names, key schema
// and encodings are fixed: [EncodeItem], [EncodeHistoryItem] and
// [DecodeItem] convert between a Subscription and its DynamoDB item, and the
// Attr… constants name every attribute. billing_date is written in whole
// seconds and last_run_date with a fixed nine-digit fraction, so that string
// order equals time order in keys and range conditions. Items written by
// older services (NULLs, trimmed fractions, "5" for 5.00, a missing term)
// still decode; attributes this library does not know are kept and written
// back.
//
// # Errors
//
// Errors wrap the package's sentinels (ErrInvalidAmount, ErrInvalidStatus,
// ErrInvalidItem, ErrIllegalTransition, …) for [errors.Is], and carry data in
// typed errors ([*FieldError], [*TransitionError]) for [errors.As].
//
// # Wiring
//
// A host decodes items it receives (for example from a DynamoDB stream),
// decides, and encodes its writes:
//
//	sub, err := billing.DecodeItem(record.NewImage)
//	if err != nil {
//		var fe *billing.FieldError
//		if errors.As(err, &fe) {
//			log.Printf("skipping bad item %s: attribute %s", fe.Key, fe.Field)
//		}
//		return err
//	}
//	if err := billing.CheckTransition(sub.Status, billing.StatusCompleted); err != nil {
//		return err // e.g. a settlement for a record that was cancelled
//	}
//	next, err := billing.NextBillingDate(sub.BillingDate, sub.Schedule())
//
// The repository, locks, collector and notifier build on these types; see
// the README for the state of each.
package billing
