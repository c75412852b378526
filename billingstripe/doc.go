// Package billingstripe charges dynabill subscriptions through Stripe.
//
// Wiring, in a host that already has its stores and locker:
//
//	client := stripe.NewClient(os.Getenv("STRIPE_SECRET_KEY"))
//	customers := billingstripe.CustomersFunc(func(ctx context.Context, userID string) (billingstripe.Customer, error) {
//		acct, err := users.Get(ctx, userID) // the host's own user directory
//		if err != nil {
//			return billingstripe.Customer{}, err
//		}
//		return billingstripe.Customer{ID: acct.StripeCustomerID, PaymentMethod: acct.StripePaymentMethodID}, nil
//	})
//	p, err := billingstripe.New(billingstripe.Config{Client: client, Customers: customers, Logger: logger})
//	if err != nil {
//		return err
//	}
//	c, err := billing.NewCollector(billing.Config{
//		Repository: repo, History: hist, Locker: locker,
//		Provider: p, // charges, lookups, replay window and request timeout in one
//	})
//
//	// <<WEBHOOK HANDLER: the line wiring Stripe's events (ACH settlement)
//	// into the collector goes here, with the webhook handler>>
//
// # Charges
//
// Every collection attempt is one PaymentIntent, created and confirmed
// off-session in one request (confirm=true, off_session=true) on the
// customer's saved payment method, for the attempt's amount in cents, with
// the attempt's idempotency key as the Idempotency-Key and metadata naming
// the attempt ([MetadataIdempotencyKey], [MetadataSubscriptionID],
// [MetadataUserID], [MetadataBillingDate], [MetadataAttempt]). The record's
// transaction_id is the PaymentIntent's ID ("pi_…"), its account mask and
// payment type come from the expanded payment method ("CARD" or "ACH").
//
// Stripe answers a repeated key with its first answer for at least 24
// hours, so the collector settles an attempt whose answer was lost by
// presenting it again; the provider's [Provider.ReplayWindow] (23 hours)
// keeps such replays inside Stripe's day. Older attempts are settled by
// [Provider.LookupPayment], which lists the customer's PaymentIntents (the
// list API reads its own writes; the search API, which lags, is never
// used) and matches the key in their metadata.
//
// How each answer maps (succeeded, processing for ACH, declines by decline
// code, 429, 409, 5xx, timeouts) is documented on [Provider]; in short,
// only a succeeded, processing or failed PaymentIntent is an outcome, a
// 429 is a refusal, and everything else leaves the attempt in flight,
// never guessed.
//
// # Currencies
//
// billing.Amount counts hundredths, so [Config.Currency] must be a currency
// Stripe counts in hundredths; zero-decimal (jpy, krw, …) and
// three-decimal (kwd, bhd, …) currencies are refused by [New].
//
// # Testing
//
// Package stripetest is a stateful fake of the Stripe API the provider
// uses (PaymentIntents, idempotency keys, faults) that stripe-go's client
// talks to; hosts can use it in their own tests. The provider's requests
// are also checked against Stripe's API spec with stripe-mock.
package billingstripe
