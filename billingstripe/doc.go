// Package billingstripe charges dynabill subscriptions through Stripe.
package billingstripe
