package notice_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/memory"
	"github.com/dynabill/billing/notice"
)

// The scheduler pages through the records due in four days and hands back a
// continuation while pages remain; the host sends it to the scheduler's own
// queue and runs it in the next invocation.
func ExampleScheduler() {
	ctx := context.Background()
	store, err := memory.New(memory.Options{PageSize: 2})
	if err != nil {
		log.Fatal(err)
	}
	now := time.Date(2024, 3, 10, 12, 0, 0, 0, time.UTC) // due: 2024-03-14
	var subs []billing.Period
	for i, user := range []string{"ann", "bo", "cy"} {
		bd := time.Date(2024, 3, 14, 9+i, 0, 0, 0, time.UTC)
		subs = append(subs, billing.Period{
			UserID: user, SubscriptionID: "sub-" + user, BillingDate: bd, Status: billing.StatusScheduled,
			Amount: billing.MustParseAmount("4.99"), ReceiptTierName: "Plus:v2", LastRunDate: now,
		})
	}
	if _, err := store.Repository().AddAll(ctx, subs); err != nil {
		log.Fatal(err)
	}

	queue := &billingtest.RecordingEnqueuer{} // in production: SQS SendMessageBatch
	sched, err := notice.NewScheduler(notice.SchedulerConfig{
		Repository:         store.Repository(),
		Enqueuer:           queue,
		Clock:              billingtest.NewClock(now),
		PagesPerInvocation: 1,
	})
	if err != nil {
		log.Fatal(err)
	}
	// The daily trigger's detail.
	ev, err := notice.ParseEvent([]byte(`{"status": "SCHEDULED"}`))
	if err != nil {
		log.Fatal(err)
	}
	for invocation := 1; ; invocation++ {
		res, err := sched.Run(ctx, ev)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("invocation %d: %d page, %d enqueued\n", invocation, res.Pages, res.Enqueued)
		if res.Continuation == nil {
			break
		}
		body, _ := json.Marshal(res.Continuation) // sent to the scheduler queue
		fmt.Printf("  continue with date %s, status %s\n", res.Continuation.Date, res.Continuation.Status)
		if ev, err = notice.ParseEvent(body); err != nil {
			log.Fatal(err)
		}
	}
	for _, body := range queue.Bodies() {
		m, _ := notice.ParseMessage([]byte(body))
		fmt.Println(m.UserID, m.BillingDate.Format(time.DateOnly), m.Amount)
	}
	// Output:
	// invocation 1: 1 page, 2 enqueued
	//   continue with date 20240314, status SCHEDULED
	// invocation 2: 1 page, 1 enqueued
	// ann 2024-03-14 4.99
	// bo 2024-03-14 4.99
	// cy 2024-03-14 4.99
}

// The worker handles a batch from the worker queue and returns the IDs of
// the messages SQS should redeliver (a body that cannot be parsed is not
// one of them: it is logged and dropped). AccountMask gives the notice the
// last four digits of the account charged; package prenote's Step is the
// legacy host's AfterSend.
func ExampleWorker() {
	ctx := context.Background()
	now := time.Date(2024, 3, 10, 12, 0, 0, 0, time.UTC)
	users := billingtest.NewUserDirectory(billing.User{
		ID: "ann", Email: "ann@example.com", FirstName: "Ann", LastName: "Lee",
		Status: billing.UserStatusActive, DateJoined: now.AddDate(0, 0, -10),
	})
	notifier := &billingtest.RecordingNotifier{}
	worker, err := notice.NewWorker(notice.WorkerConfig{
		Users: users, Notifier: notifier,
		AccountMask: func(_ context.Context, userID string) (string, error) {
			return "6789", nil // the host's payment method on file for userID
		},
		AfterSend: func(_ context.Context, u billing.User) { fmt.Println("after send:", u.ID) },
	})
	if err != nil {
		log.Fatal(err)
	}

	body := func(user string) string {
		return `{"event_type":"three_day_notification","user_id":"` + user + `","subscription_id":"sub-` + user + `",` +
			`"billing_date":"2024-03-14T09:00:00Z","billing_amount":"4.99","billing_status":"SCHEDULED","receipt_tier_name":"Plus:v2"}`
	}
	users.FailFor("bo", errors.New("user service down"))
	failed := worker.HandleBatch(ctx, []notice.QueueMessage{
		{ID: "m1", Body: body("ann")}, // sent
		{ID: "m2", Body: "not json"},  // dropped: logged, and never redelivered
		{ID: "m3", Body: body("bo")},  // failed: redelivered, the user service may be back
	})
	fmt.Println("failed:", failed)
	for _, s := range notifier.Sent() {
		b, _ := json.Marshal(s.Notification)
		fmt.Println("sent to", s.Email, string(b))
	}
	// Output:
	// after send: ann
	// failed: [m3]
	// sent to ann@example.com {"event_type":"three_day_notification","user_id":"ann","billing_date":"03/14/2024","amount":"4.99","membership_tier":"Plus","account":"6789"}
}
