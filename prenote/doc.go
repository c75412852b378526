// Package prenote is the legacy host's ACH prenote step for the
// pre-billing notifier, and the bank links it reads.
//
// A prenote is a $0 ACH entry sent through the bank network to validate a
// customer's account before the first real debit: a closed or mistyped
// account comes back as a return days before any money is at stake. The
// legacy service submitted one, through the host's payments service, for
// each user it had just sent the pre-billing notice to, when a feature flag
// allowed it and the user's bank link and payment history made it worth
// doing ([DefaultPolicy]).
//
// Nothing in package billing or package notice needs this package. A host
// plugs it into the notifier's worker
// ([github.com/dynabill/billing/notice.Worker]) through two optional hooks:
//
//	step, err := prenote.NewStep(prenote.StepConfig{Policy: policy, Submitter: submitter, Metrics: metrics})
//	...
//	w, err := notice.NewWorker(notice.WorkerConfig{
//		Users: users, Notifier: notifier,
//		AccountMask: prenote.AccountMask(accounts), // the notice's last four digits
//		AfterSend:   step.AfterSend,                // decide, submit, meter
//	})
//
// Every name on the wire keeps the legacy service's bytes: the flags
// ([EnabledFlag], [ProviderFlag]), the metric ([MetricName]) and its tags,
// and the reasons (such as [ReasonNoUsableBankLink], "no_good_plaid_item").
package prenote
