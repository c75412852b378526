package prenote_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/billingtest"
	"github.com/dynabill/billing/notice"
	"github.com/dynabill/billing/prenote"
	"github.com/dynabill/billing/prenote/prenotetest"
)

// The legacy host's worker: the notice carries the last four digits of the
// primary bank account, and after each notice the step decides on an ACH
// prenote with the default policy, submits it and meters the decision.
func ExampleStep() {
	ctx := context.Background()
	now := time.Date(2024, 3, 10, 12, 0, 0, 0, time.UTC)
	users := billingtest.NewUserDirectory(billing.User{
		ID: "ann", Email: "ann@example.com", FirstName: "Ann", LastName: "Lee",
		Status: billing.UserStatusActive, DateJoined: now.AddDate(0, 0, -10),
	})
	accounts := &prenotetest.BankAccounts{}
	accounts.Set("ann", prenote.BankLink{PrimaryAccountID: "acc-1", Accounts: []prenote.BankAccount{{ID: "acc-1", Mask: "6789"}}})
	flags := &prenotetest.FeatureFlags{}
	flags.SetEnabled(prenote.EnabledFlag, true)
	policy, err := prenote.NewDefaultPolicy(prenote.PolicyConfig{
		Flags: flags, Accounts: accounts, Payments: &prenotetest.Payments{}, Clock: billingtest.NewClock(now),
		Provider: "ach", // the host's name for its prenote provider
	})
	if err != nil {
		log.Fatal(err)
	}
	metrics := &prenotetest.MetricsRecorder{}
	step, err := prenote.NewStep(prenote.StepConfig{Policy: policy, Submitter: &prenotetest.Submitter{}, Metrics: metrics})
	if err != nil {
		log.Fatal(err)
	}
	notifier := &billingtest.RecordingNotifier{}
	worker, err := notice.NewWorker(notice.WorkerConfig{
		Users: users, Notifier: notifier,
		AccountMask: prenote.AccountMask(accounts),
		AfterSend:   step.AfterSend,
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
		{ID: "m1", Body: body("ann")}, // sent, then a prenote
		{ID: "m2", Body: "not json"},  // dropped: logged, and never redelivered
		{ID: "m3", Body: body("bo")},  // failed: redelivered, the user service may be back
	})
	fmt.Println("failed:", failed)
	for _, s := range notifier.Sent() {
		b, _ := json.Marshal(s.Notification)
		fmt.Println("sent to", s.Email, string(b))
	}
	for _, c := range metrics.Counts() {
		fmt.Println("metric", c.Name, c.Tags)
	}
	// Output:
	// failed: [m3]
	// sent to ann@example.com {"event_type":"three_day_notification","user_id":"ann","billing_date":"03/14/2024","amount":"4.99","membership_tier":"Plus","account":"6789"}
	// metric subscriptions.notifier.prenotes [submitted:true provider:ach]
}
