// Package billingui is an operator console for the billing engine: an
// [http.Handler] a host mounts under a prefix of its own server, next to
// its routes, as River's riverui is mounted.
//
//	console, err := billingui.New(billingui.Config{
//		Collector:  collector,
//		Repository: repo,
//		History:    hist,
//		Authorizer: authorize, // billinghttp.Authorizer: the same roles as the JSON API
//		CSRFKey:    csrfKey,   // 32+ random bytes kept by the host
//		Runs:       runs,      // *billingui.RunLog the host adds each Collector.Run report to
//	})
//	if err != nil {
//		return err
//	}
//	mux.Handle("/billing/", http.StripPrefix("/billing", console))
//
// # Pages
//
//   - Today (/): the latest scheduled, retry and pause runs' reports, the
//     declines recorded today by reason, and the revenue of the last 30
//     days per day as an inline SVG chart.
//   - Attention (/attention): attempts in flight past the processor's
//     request timeout, ACH debits past their settlement deadline, ERROR
//     records by decline reason, with a collector that has dunning
//     (billing.Config.Dunning) the owed periods whose final action comes
//     within three days (or is due, not yet applied), and stored items that
//     could not be decoded; each row links to its customer.
//   - Customer (/customer?user=ID): the user's subscription view, periods and
//     history as a timeline, and the actions the viewer's role allows; with
//     Config.Invoices, the user's invoices (see below). A period declined
//     under dunning shows its schedule (billing.Collector.DunningOf): the
//     retries left, the next retry's day, the final action and its day,
//     the decline in the customer's words and the notices sent; once it
//     ended, how ("recovered", or the final action applied) and when. The
//     schedule's days are UTC days, shown as such.
//   - Search (/search?q=…): a user ID, a period (subscription) ID, or a
//     transaction ID among the records of the last 60 days.
//
// Pages are rendered on the server with html/template, which escapes
// everything they show; the style sheet is embedded. There is no script:
// every action is a form with a confirmation page, and works with
// JavaScript off. Every page fits a 390 px phone: the header wraps, long
// IDs break, and a wide table scrolls inside its own box.
//
// Amounts are shown in Config.Currency (ISO 4217, USD by default) with its
// symbol, a comma between thousands and its minor unit's decimals: a
// billing.Amount counts minor units, so $1,408.45 is Amount(140845) and
// ¥1,408 is Amount(1408). Times are shown in Config.Location (UTC by
// default) with the zone's abbreviation; a date's element carries the
// instant and zone in its title. The customer page shows what the user
// owes (the declined open periods) and, for a paused user, the date
// billing resumes rather than the billing date the pause skips.
//
// It shows the customer's credit balance (the latest open period's
// billing.Period.Balance, "none" when zero) and, when the next charge is
// more than its plan, that charge's parts: the plan, each coupon applied
// (its code or ID, "25% off" or "$3.00 off", for how many more charges,
// and what it takes off, in the order applied), the proration lines of
// plan changes waiting on it (a credit negative), the balance it uses and
// what it comes to (billing.Period.Due, which is
// billing.Subscription.NextChargeAmount). A paused period or a trial's
// shows its coupons and lines without a total: it is charged when the
// pause or the trial ends.
//
// An ID (a user's) is shown as an isolated run of text in which every
// format character (the bidirectional overrides and isolates U+202A–U+202E
// and U+2066–U+2069, zero-width characters, the byte order mark) is
// written as a marked escape, \u202E: it never reorders or hides what is
// around it, so an ID cannot display as another one.
//
// A number in a page's address (the history's page) is a decimal whole
// number within its bounds; anything else is answered 400 with a
// sentence, a page past the history's end 404.
//
// # Invoices
//
// With Config.Invoices (the store of billing.Config.Invoices) the
// customer page lists the user's invoices, newest first,
// DefaultInvoicePage at a time with a link to the next ones (the store's
// ByUser cursor): number ("draft" before it has one), status, total in
// the invoice's own currency, the issue, due and paid dates, and the
// credit notes issued against each under it. With Config.Documents (a
// *render.Renderer, or anything with its PDF, HTML and CreditNotePDF
// methods) each row links to its documents:
//
//	invoice.pdf?user=ID&invoice=ID             application/pdf
//	invoice.html?user=ID&invoice=ID            text/html
//	credit-note.pdf?user=ID&invoice=ID&note=ID application/pdf
//
// each shown in the browser (Content-Disposition inline) and saved under
// the document's number, ACME-0001.pdf. They are reads: the Authorizer is
// asked [ActionInvoices] for the user first, then an invoice of another
// user is not found, exactly like an unknown ID. The console imports no
// PDF library: a host that serves it without documents links none.
//
//	docs, err := render.New(render.Config{Seller: render.Seller{Name: "Acme Video Ltd"}})
//	...
//	console, err := billingui.New(billingui.Config{..., Invoices: invoices, Documents: docs})
//
// # Reads
//
// Every read is bounded: status-index pages of Config.PageSize records, at
// most Config.MaxPages of them per view, with a link that continues from the
// index's cursor; a user's periods through Repository.Recent. The one read
// the ports do not page is a user's history ([billing.History.ListByUser]);
// the timeline shows it a page at a time.
//
// # Authorization and CSRF
//
// Each page and action is put to the host's [billinghttp.Authorizer] with the
// action names of the JSON API, so a host configures its roles once: the
// customer page asks [billinghttp.ActionGetSubscription] and
// [billinghttp.ActionHistory] for the user (and [ActionInvoices], a read
// the JSON API has no route for yet, for its invoice section and the
// documents: a refusal hides the section); retry asks
// [billinghttp.ActionPay], waive [billinghttp.ActionWaive], cancel
// [billinghttp.ActionCancel] (and [billinghttp.ActionCancelOwed], whose
// answer says whether the cancel may forgive an owed period), pause and resume [billinghttp.ActionPause] and
// [billinghttp.ActionResume], and a date move
// [billinghttp.ActionChangeBillingDate]. The pages over every user (Today,
// Attention, Search) ask [ActionOverview], a read with Operator set and
// UserID "*", which [billinghttp.RoleAuthorizer] grants operators only. A
// read-only support role is an Authorizer that allows what has Write false.
// A button the viewer's role may not use is not shown, and its POST is
// refused all the same.
//
// Every POST must carry the form's token and come from the console's own
// origin ([http.CrossOriginProtection]: Sec-Fetch-Site, or Origin against
// Host): a forged cross-site POST is answered 403 and reaches neither the
// Authorizer nor the engine. The token is an HMAC, under Config.CSRFKey,
// of a random value kept in a SameSite=Strict, HttpOnly cookie, of the
// operator's session (Config.Session's value, when the host gives one)
// and of its expiry, Config.CSRFTokenTTL (12 hours) after the page was
// rendered: it is refused in another browser, in another operator's
// session and once expired. The cookie is Secure when the request reached
// the console over TLS, or always with Config.SecureCookies (behind a
// proxy that ends TLS).
//
// # Actions
//
// Every action goes through the [billing.Collector], so each rule (the
// user's lock, attempts in flight, dates, prices, the transition table)
// applies as it does to the API; a refusal is shown with the engine's
// reason, answered 409 (conflict, lock held, in flight, not collectible),
// 422 (a date out of order or invalid), 404 (no such period of this user)
// or 403.
//
// Cancel, pause, resume and a move of the user's latest open period are
// made by the calls that take the user ([billing.Collector.Cancel],
// Pause, Resume, MoveBillingDate), retry and waive
// by the operator's period calls ([billing.Periods.Retry],
// [billing.Periods.Waive]), each with a request key: the customer
// page puts a fresh key on each of its buttons, the confirmation page
// carries it in its address and its form. The form sent again (a double
// click, the back button and a second submit, a retried request) is the
// same request: it is answered with the first one's result and a note
// that it was already done, and changes nothing more (a retry sent again
// presents nothing to the processor); the key sent with other parameters
// (another date) is refused. Cancel and pause act on the subscription,
// not on the one period whose button was pressed: every open period of
// the user, resume every paused one; the confirmation page lists them. A
// move of an earlier open period (an owed one) is made by the period call,
// [billing.Periods.Move], which has no keyed form.
//
// Every confirmation page asks for a reason, required; the action's
// history rows record it with the signed-in operator ([Config.Operator])
// as data_reason and data_operator, and the timeline shows both. A period
// whose attempt is in flight offers no action; a STALE one says why it was
// given up on, and Attention lists those of the last 180 days.
//
// A refusal is shown as a sentence (409 for a state that does not take
// the action, a lock held, an attempt in flight; 422 for a date or a form
// value; 404; 403); the engine's own error is written to Config.Logger.
// The banner after an action comes from a flash the action signs with
// Config.CSRFKey, bound to the customer and valid two minutes: a link
// whose query claims a result shows none. A decline, a rate-limited or a
// stale retry is a red banner, not a green one.
package billingui
