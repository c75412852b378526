package billingstripe

// Metadata keys the Provider sets on every PaymentIntent it creates. The
// webhook handler and operators read them to tie an intent back to the
// billing attempt that created it; their names are part of the package's
// contract and never change.
const (
	// MetadataIdempotencyKey holds the idempotency key of the attempt that
	// created the intent, the same value sent as the Idempotency-Key
	// header. LookupPayment matches on it. A later attempt that confirms
	// the intent again (see Retries in the package documentation) leaves
	// it as it is, as it does MetadataAttempt.
	MetadataIdempotencyKey = "dynabill_idempotency_key"
	// MetadataSubscriptionID holds the subscription's ID.
	MetadataSubscriptionID = "dynabill_subscription_id"
	// MetadataUserID holds the billed user's ID.
	MetadataUserID = "dynabill_user_id"
	// MetadataBillingDate holds the billed period's date as YYYY-MM-DD.
	MetadataBillingDate = "dynabill_billing_date"
	// MetadataAttempt holds the attempt number within the period, in decimal.
	MetadataAttempt = "dynabill_attempt"
	// MetadataInvoiceNumber and MetadataInvoiceID hold the number and ID
	// of the invoice the charge pays, when the collector issues invoices
	// (billing.Config.Invoices); absent otherwise.
	MetadataInvoiceNumber = "dynabill_invoice_number"
	MetadataInvoiceID     = "dynabill_invoice_id"
)

// billingDateLayout is the layout of MetadataBillingDate values.
const billingDateLayout = "2006-01-02"
