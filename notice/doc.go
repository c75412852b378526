// Package notice is the pre-billing notifier: it tells each user, a few
// days ahead, what their subscription will charge and when, at most once
// per billing period.
//
// It runs in two halves joined by a queue (the legacy notifier-scheduler
// and notifier-worker Lambdas, with an SQS queue between them):
//
//   - a daily [Scheduler] pages through the periods billed
//     [billing.NoticeLeadDays] (4) days ahead (see [Window]) and enqueues
//     one [Message] per period through the host's [Enqueuer], handing back
//     a continuation [Event] when the window takes more than one
//     invocation;
//   - a [Worker] turns each message into a [billing.RenewalNotice] (or,
//     before the first charge after a trial, a trial-ending notice) for the
//     host's [billing.Notifier], after looking the user up in the host's
//     [billing.UserDirectory].
//
// Delivery through the queue is at least once; with
// [WorkerConfig.Reminders] set to the store (every repository of this
// module is a [ReminderClaimer]), each reminder is claimed on its
// period before it is sent, so it goes out at most once however often the
// scheduler runs and however many workers receive the message.
//
// The queue bodies keep the legacy wire format byte for byte: an [Event]
// is {"date", "status", "start_key"}, a [Message] the due record's
// attribute names (see [Message.MarshalJSON]).
package notice
