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
//	p, err := billingstripe.New(billingstripe.Config{Client: client, Customers: customers, Logger: logger,
//		// The page where a customer confirms a payment the bank holds for
//		// 3-D Secure, sent in the dunning's action-required notice.
//		ConfirmURL: func(pi *stripe.PaymentIntent) string { return "https://app.example/billing/confirm?pi=" + pi.ID },
//	})
//	if err != nil {
//		return err
//	}
//	c, err := billing.NewCollector(billing.Config{
//		Repository: repo, History: hist, Locker: locker,
//		Provider: p, // charges, lookups, replay window and request timeout in one
//	})
//	if err != nil {
//		return err
//	}
//	// Stripe's events: ACH debits settled or returned, refunds, a new
//	// payment method charging the owed periods at once (with Users), and,
//	// with Accounts, Users and Tiers, subscriptions, founder passes and
//	// monthly credit grants.
//	hooks, err := billingstripe.NewWebhookHandler(billingstripe.WebhookConfig{
//		Secret:    os.Getenv("STRIPE_WEBHOOK_SECRET"),
//		Collector: c,
//		Users:     customerUsers, // the host's map from Stripe customer to user
//		Intents:   billingstripe.NewIntentMetadata(client),
//		Logger:    logger,
//	})
//	if err != nil {
//		return err
//	}
//	http.Handle("POST /stripe/webhook", hooks)
//
// # Charges
//
// A period's first collection attempt is one PaymentIntent, created and confirmed
// off-session in one request (confirm=true, off_session=true) on the
// customer's saved payment method, for the attempt's amount in cents, with
// the attempt's idempotency key as the Idempotency-Key and metadata naming
// the attempt ([MetadataIdempotencyKey], [MetadataSubscriptionID],
// [MetadataUserID], [MetadataBillingDate], [MetadataAttempt]). The record's
// transaction_id is the PaymentIntent's ID ("pi_…"), its account mask and
// payment type come from the expanded payment method ("CARD" or "ACH").
//
// # Retries: one PaymentIntent per period while it can succeed
//
// A retry never creates a PaymentIntent while the period's earlier one can
// still succeed: a card declined off-session can be confirmed by its
// customer on session (Stripe's standard recovery), and the
// payment_intent.succeeded notice may reach the host only after the next
// retry runs. Every attempt after the period's first names the record's
// transaction_id ([billing.PaymentRequest.PriorPayment]), and Collect
// reads that intent before anything else:
//
//   - succeeded or processing: it is the attempt's answer; nothing is
//     charged, and the late notice is then a replay;
//   - a card intent that needs a payment method, a confirmation or an
//     action: the same intent is confirmed again, off-session with the
//     customer's saved payment method, under the attempt's key plus
//     ":confirm"; Stripe lets an intent succeed at most once, so the
//     customer's confirmation and the retry's cannot both charge, and the
//     customer's link to pay it stays valid;
//   - a failed bank debit, or an intent of another amount than the
//     attempt's: it is canceled first (key plus ":cancel"), then a new
//     intent is created; if Stripe refuses the cancel because the intent
//     moved (the customer paid it), the intent as it now is decides;
//   - canceled, unknown to the account, or of another period (its
//     [MetadataSubscriptionID]): a new intent is created.
//
// A reconfirmed intent keeps the metadata of the attempt that created it;
// [Provider.LookupPayment], finding no intent with an attempt's key,
// reads the intent the attempt named. The choice of confirming the same
// intent over looking the earlier payment up before creating a new one is
// deliberate: Stripe serialises confirmations of one intent, so there is
// no window in which the customer pays the old intent while the new one
// is created.
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
// only a succeeded, processing or failed PaymentIntent is an outcome, and
// everything else leaves the attempt in flight, never guessed. A 429 is
// never a refusal: it is answered by the PaymentIntent a lookup finds for
// the key (an earlier try the client resent may have charged), and
// otherwise leaves the attempt in flight too, since an earlier try may
// still be running at Stripe, where no lookup sees it. The cost is that a
// rate-limited charge waits for the next run, which settles it by
// replaying the key: the collector does not retry it within the run, as
// it does for a provider's refusal, though it slows the run down for it.
//
// # Webhooks
//
// [WebhookHandler] verifies the Stripe-Signature header with the
// endpoint's secret and applies, idempotently and in any order of
// delivery, the events of the payments the provider made
// (payment_intent.succeeded and payment_intent.payment_failed settle or
// return a pending ACH debit, charge.refunded refunds) and, for
// provider-billed tiers, subscription events, founder-pass purchases and
// paid invoices. When the customer's payment method changes
// (customer.updated with a new invoice_settings.default_payment_method,
// or payment_method.automatically_updated when the card network renews
// a card), it calls [billing.Collector.PaymentMethodUpdated] for the
// customer's user ([WebhookConfig.Users]) with the request key "stripe:"
// and the event's ID: the owed periods are charged at once and their
// dunning ends when paid, and a redelivered event is the same request,
// which charges nothing more. It answers 200 for what it applied,
// repeated or ignores, 4xx for what no delivery can fix, and 5xx for
// what a later delivery can, so that Stripe retries only those.
//
// # Currencies
//
// billing.Amount counts hundredths, so [Config.Currency] must be a currency
// Stripe counts in hundredths; zero-decimal (jpy, krw, …) and
// three-decimal (kwd, bhd, …) currencies are refused by [New].
//
// # Testing without a Stripe account
//
// Two tools cover what a test needs, and neither needs an account or a
// network:
//
//   - Package stripetest, for behaviour: a stateful fake of the Stripe
//     API the provider uses, which stripe-go's client talks to. It keeps
//     PaymentIntents and idempotency keys, so charges, scripted declines
//     and authentication requests, replays of a key, lookups and injected
//     faults (429, 500, dropped answers, requests still running) behave as
//     at Stripe. It also moves an intent as Stripe or the customer would
//     (ConfirmOnSession recovers a decline, Settle and FailProcessing end
//     a bank debit, Refund refunds) and builds the signed webhook event of
//     an intent as it now stands (Server.Event: payment_intent.succeeded,
//     .processing, .payment_failed, charge.refunded, with the metadata
//     the provider wrote), ready to deliver to a [WebhookHandler]
//     configured with the fake's WebhookSecret. NewEvent signs an event
//     about any other object.
//   - stripe-mock (github.com/stripe/stripe-mock), for request shapes: it
//     checks every request against Stripe's OpenAPI spec and answers 400
//     to one the spec does not allow. It cannot complete a charge through
//     the provider: it keeps no state and answers from fixtures, so the
//     PaymentIntent it returns does not carry the idempotency-key
//     metadata the provider wrote, and the provider refuses it as an
//     answer it cannot tie to the attempt ([ErrUnexpectedAnswer],
//     "carries key \"\""), leaving the outcome unknown and the attempt in
//     flight. Use it to check shapes, and stripetest to check outcomes.
//
// A test of a host's webhook wiring, with fake the stripetest server the
// provider charges through and hooks the host's handler:
//
//	fake.Script("cus_ada", stripetest.Decline("insufficient_funds"))
//	// ... a collection run records the decline ...
//	pi := fake.Intents()[0].ID
//	_ = fake.ConfirmOnSession(pi, stripetest.Succeed()) // the customer pays on-session
//	ev, _ := fake.Event(stripe.EventTypePaymentIntentSucceeded, pi)
//	rec := ev.Deliver(hooks) // or POST ev.Body with header Stripe-Signature: ev.Signature
package billingstripe
