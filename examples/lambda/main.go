// Command lambda wires the billing library into AWS Lambda the way the
// legacy subscription service ran it: one binary, one function per role,
// chosen by the HANDLER environment variable.
//
//	HANDLER=scheduler  notifier-scheduler: the daily CloudWatch (EventBridge)
//	                   rule and the scheduler's own SQS queue (batch size 1)
//	HANDLER=worker     notifier-worker: the worker SQS queue (batch size 10,
//	                   ReportBatchItemFailures enabled)
//	HANDLER=collector  collection runs: CloudWatch rules with detail
//	                   {"kind": "scheduled"|"retry"|"pause"} and the
//	                   collector's own SQS queue for continuations (batch
//	                   size 1); or invoked directly with a run request,
//	                   {"kind": "scheduled", "shards": [3], "cursor": "..."},
//	                   by a state machine that continues the run itself
//	                   (examples/cloudformation/billing-run.json)
//	HANDLER=events     the durable event log: the DynamoDB Streams event
//	                   source of the history table (or the single table),
//	                   ReportBatchItemFailures enabled, an on-failure
//	                   destination for a record that fails every retry
//	                   (examples/cloudformation/billing-events.json); each
//	                   history row is handed to the host's EventSink in
//	                   stream order, at least once, with a stable Event.ID
//	HANDLER=stripe-webhook
//	                   the Stripe webhook endpoint, behind a Lambda function
//	                   URL or an API Gateway proxy integration (stripe_webhook.go)
//
// It is its own module so that the library does not depend on
// aws-lambda-go. Build it for Lambda's provided.al2023 runtime with
//
//	GOOS=linux GOARCH=arm64 go build -tags lambda.norpc -o bootstrap .
//
// Environment:
//
//	BILLING_LAYOUT           "legacy" (default): the billing-activity tables;
//	                         "single": the single table of recurring
//	                         payments, whose daily jobs
//	                         are this binary's scheduler (reminders due today)
//	                         and collector (payments due today)
//	SINGLE_TABLE             the single table (default "billing"; set it to
//	                         the name of your existing table)
//	ACCOUNT_PREFIX           its account partition prefix (default "USER#";
//	                         "ACC#" for the recurring payments layout)
//	SINGLE_TABLE_TTL         its TTL attribute (default "expiresAt")
//	BILLING_TABLE            billing-activity table (default "billing-activity")
//	BILLING_HISTORY_TABLE    history table (default "billing-activity-history")
//	STATUS_INDEX_MODE        legacy layout only: "legacy" (default),
//	                         "sorted", or "due": the sharded due index
//	                         (needs DUE_SHARDS)
//	DUE_SHARDS               the due shards, both layouts
//	                         (TableConfig.DueShards or
//	                         SingleTableConfig.DueShards, 0 to 1024;
//	                         default 0: no due keys, one shard).
//	                         Give every function (and every other writer of
//	                         the table) the same value: a record written
//	                         without it gets no due key, and a run on the
//	                         due index misses it. Legacy layout: reads use
//	                         the due index with STATUS_INDEX_MODE=due.
//	                         Single layout: reads use it whenever
//	                         DUE_SHARDS is set, unless DUE_INDEX_PENDING.
//	                         A run request may then name shards 0 to
//	                         DUE_SHARDS-1
//	DUE_INDEX_PENDING        single layout only, "true" during the move to
//	                         the due index (SingleTableStoreConfig.
//	                         DueIndexPending; needs DUE_SHARDS): writers keep
//	                         the due keys while status queries still walk
//	                         the payment index, one shard (a run request
//	                         may name only shard 0). Unset it once
//	                         BackfillDue (billingctl index backfill) updates
//	                         nothing; the legacy layout's equivalent is
//	                         STATUS_INDEX_MODE legacy or sorted
//	DUE_INDEX                the due index's name, both layouts (default
//	                         "billing_due-billing_date-index"; needs
//	                         DUE_SHARDS)
//	DYNAMODB_ENDPOINT        optional, e.g. http://localhost:8000 for local runs
//	WORKER_QUEUE_URL         pre-subscription-notifier-worker queue (scheduler)
//	SCHEDULER_QUEUE_URL      pre-subscription-notifier-scheduler queue (scheduler)
//	PAGES_PER_INVOKE         status pages per scheduler invocation (default 3)
//	LOCK_TABLE               dynamolock table (default "locks")
//	COLLECTOR_QUEUE_URL      the collector's continuation queue (collector)
//	OLD_SUBSCRIPTION_DAYS    stale threshold (collector, default 30)
//	RUN_CURSOR_KEYS          collector: the keys that sign the run cursors
//	                         it re-enqueues or hands back
//	                         (Config.RunCursorKeys), comma-separated
//	                         standard base64, each at least 32 bytes
//	                         (openssl rand -base64 32), the signing key
//	                         first; the same value on every collector
//	                         function. To rotate, set "NEW,OLD", and drop
//	                         OLD once the runs it signed are done (the next
//	                         day). A cursor no key verifies is refused:
//	                         its message fails until the queue's
//	                         redrive policy moves it aside, and its
//	                         records are the next run's. Unset (and no
//	                         ARN), cursors carry an unkeyed checksum, and
//	                         whoever can write the collector's queue can
//	                         choose a run's instant and position (not get
//	                         a record charged before it is due, or twice).
//	                         Never logged
//	RUN_CURSOR_KEYS_ARN      instead of RUN_CURSOR_KEYS: the ARN of a
//	                         Secrets Manager secret whose SecretString is
//	                         that list
//	SHARD_CONCURRENCY        shards one collector invocation works at once
//	                         (Config.ShardConcurrency, default 1)
//	STRIPE_SECRET_KEY        Stripe secret key ("sk_live_…", or a restricted
//	                         key that may write PaymentIntents and read
//	                         customers): with it the collector charges
//	                         through Stripe (billingstripe); without it,
//	                         through the logging stub. Never logged
//	STRIPE_SECRET_ARN        instead of STRIPE_SECRET_KEY: the ARN of a
//	                         Secrets Manager secret whose SecretString is
//	                         the key (the role needs
//	                         secretsmanager:GetSecretValue on it)
//	STRIPE_WEBHOOK_SECRET    the webhook endpoint's signing secret
//	                         ("whsec_…"; stripe-webhook, required, or ...)
//	STRIPE_WEBHOOK_SECRET_ARN
//	                         ... a Secrets Manager secret holding it
//	STRIPE_PRICE_TIERS       stripe-webhook, optional: the tier of each
//	                         Stripe price, "price_A=SAGE,price_B=GUILDMASTER";
//	                         with it the webhook also applies subscription
//	                         events, founder passes and monthly credit
//	                         grants to the provider-billed accounts on the
//	                         single table (SINGLE_TABLE, ACCOUNT_PREFIX and
//	                         SINGLE_TABLE_TTL, whatever BILLING_LAYOUT).
//	                         ACCOUNTS_TABLE and ACCOUNTS_PREFIX are no
//	                         longer read: set, they stop the function
//	ALLOWED_EMAIL_SUFFIXES   comma-separated email domains; set in test
//	                         environments only, e.g.
//	                         "test.example.com,qa.example.org": each allows
//	                         the domain and its subdomains ("@d" the domain
//	                         only, ".d" subdomains only; see
//	                         WorkerConfig.AllowedEmailSuffixes)
//
// The host ports a real service implements against its own systems (user
// service, bank links, payments, feature flags, notification channel,
// metrics) are stubs in hostports.go that log what they are asked; the
// Stripe ports (customer of a user, user of a customer, tier of a price,
// pass of a purchase) are examples in stripe.go that keep the user's ID on
// the Stripe customer.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/notice"
	"github.com/dynabill/billing/prenote"
)

func main() {
	logger := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	handler, err := newHandler(context.Background(), os.Getenv("HANDLER"), logger)
	if err != nil {
		logger.Error("startup failed", "error", err)
		os.Exit(1)
	}
	lambda.Start(handler)
}

// newHandler builds the handler for role, with its dependencies created once
// per Lambda container.
func newHandler(ctx context.Context, role string, logger *slog.Logger) (any, error) {
	if role == "events" {
		// Decoding the stream's batches needs no AWS client.
		h, err := newEventsHandler(logEvents{logger}, logger)
		if err != nil {
			return nil, err
		}
		return h.Handle, nil
	}
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("aws config: %w", err)
	}
	switch role {
	case "scheduler":
		repo, err := newRepository(awsCfg, logger)
		if err != nil {
			return nil, err
		}
		client := sqs.NewFromConfig(awsCfg)
		workerQueue, schedulerQueue := os.Getenv("WORKER_QUEUE_URL"), os.Getenv("SCHEDULER_QUEUE_URL")
		if workerQueue == "" || schedulerQueue == "" {
			return nil, errors.New("WORKER_QUEUE_URL and SCHEDULER_QUEUE_URL are required")
		}
		pages, err := intEnv("PAGES_PER_INVOKE")
		if err != nil {
			return nil, err
		}
		sched, err := notice.NewScheduler(notice.SchedulerConfig{
			Repository:         repo,
			Enqueuer:           &sqsEnqueuer{client: client, queueURL: workerQueue},
			PagesPerInvocation: pages,
			Logger:             logger,
		})
		if err != nil {
			return nil, err
		}
		h := &schedulerHandler{sched: sched, continuations: &sqsSender{client: client, queueURL: schedulerQueue}, logger: logger}
		return h.Handle, nil
	case "worker":
		repo, err := newRepository(awsCfg, logger)
		if err != nil {
			return nil, err
		}
		// The worker claims each reminder on its record before sending, so
		// a redelivered message or a rerun never sends one twice.
		claims, ok := repo.(notice.ReminderClaimer)
		if !ok {
			return nil, fmt.Errorf("repository %T cannot record reminders", repo)
		}
		worker, err := newWorker(logger, claims)
		if err != nil {
			return nil, err
		}
		return workerHandler(worker), nil
	case "collector":
		repo, err := newRepository(awsCfg, logger)
		if err != nil {
			return nil, err
		}
		queue := os.Getenv("COLLECTOR_QUEUE_URL")
		if queue == "" {
			return nil, errors.New("COLLECTOR_QUEUE_URL is required")
		}
		cfg, err := collectorConfig(repo, logger)
		if err != nil {
			return nil, err
		}
		sm := func() secretGetter { return secretsmanager.NewFromConfig(awsCfg) }
		if cfg.Provider, _, err = paymentProvider(ctx, sm, cfg.Provider, logger); err != nil {
			return nil, err
		}
		if cfg.RunCursorKeys, err = runCursorKeys(ctx, sm); err != nil {
			return nil, err
		}
		if len(cfg.RunCursorKeys) == 0 {
			logger.WarnContext(ctx, "run cursors are not signed: whoever can write COLLECTOR_QUEUE_URL can edit a run's instant and position; set RUN_CURSOR_KEYS or RUN_CURSOR_KEYS_ARN")
		}
		cfg.Locker, err = dynamostore.NewLocker(dynamostore.ClientOf(repo),
			dynamostore.WithLockTable(os.Getenv("LOCK_TABLE")), dynamostore.WithLockLogger(logger))
		if err != nil {
			return nil, err
		}
		c, err := billing.NewCollector(cfg)
		if err != nil {
			return nil, err
		}
		h := &collectorHandler{collector: c, continuations: &sqsSender{client: sqs.NewFromConfig(awsCfg), queueURL: queue}, logger: logger}
		return h.Handle, nil
	case "stripe-webhook":
		return newStripeWebhook(ctx, awsCfg, logger)
	}
	return nil, fmt.Errorf("HANDLER must be scheduler, worker, collector, events or stripe-webhook, got %q", role)
}

// collectorConfig is the collector's configuration from the environment,
// all but its Locker.
func collectorConfig(repo billing.Repository, logger *slog.Logger) (billing.Config, error) {
	oldDays, err := intEnv("OLD_SUBSCRIPTION_DAYS")
	if err != nil {
		return billing.Config{}, err
	}
	shardConcurrency, err := intEnv("SHARD_CONCURRENCY")
	if err != nil {
		return billing.Config{}, err
	}
	return billing.Config{
		Repository:          repo,
		Provider:            stubProvider{logger},
		Logger:              logger,
		OldSubscriptionDays: oldDays,
		ShardConcurrency:    shardConcurrency,
		Events:              logEvents{logger},
	}, nil
}

// newRepository opens the tables of BILLING_LAYOUT.
func newRepository(awsCfg aws.Config, logger *slog.Logger) (billing.Repository, error) {
	var opts []func(*dynamodb.Options)
	if ep := os.Getenv("DYNAMODB_ENDPOINT"); ep != "" {
		opts = append(opts, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(ep) })
	}
	client := dynamodb.NewFromConfig(awsCfg, opts...)
	due, err := dueIndexFromEnv()
	if err != nil {
		return nil, err
	}
	switch layout := os.Getenv("BILLING_LAYOUT"); layout {
	case "", "legacy":
		return legacyRepository(client, due, logger)
	case "single":
		return singleTableRepository(client, due, logger)
	default:
		return nil, fmt.Errorf("BILLING_LAYOUT must be legacy or single, got %q", layout)
	}
}

// dueIndex is the sharded due index as the environment configures it,
// read and checked the same way for both layouts.
type dueIndex struct {
	// shards is DUE_SHARDS, 0 to dynamostore.MaxDueShards: 0 writes no
	// due keys.
	shards int
	// name is DUE_INDEX, "" for the library's default.
	name string
	// pending is DUE_INDEX_PENDING: writers keep the due keys while reads
	// stay off the index, until the backfill is done (single layout; the
	// legacy tables say the same with STATUS_INDEX_MODE).
	pending bool
}

func dueIndexFromEnv() (dueIndex, error) {
	shards, err := intEnv("DUE_SHARDS")
	if err != nil {
		return dueIndex{}, err
	}
	if shards > dynamostore.MaxDueShards {
		return dueIndex{}, fmt.Errorf("DUE_SHARDS must be at most %d, got %d", dynamostore.MaxDueShards, shards)
	}
	pending, err := boolEnv("DUE_INDEX_PENDING")
	if err != nil {
		return dueIndex{}, err
	}
	due := dueIndex{shards: shards, name: os.Getenv("DUE_INDEX"), pending: pending}
	// Without shards there are no due keys: a pending migration or an
	// index name would configure nothing, so they are a mistake.
	if shards == 0 && pending {
		return dueIndex{}, errors.New("DUE_INDEX_PENDING needs DUE_SHARDS (the shards whose due keys the writers keep during the migration)")
	}
	if shards == 0 && due.name != "" {
		return dueIndex{}, fmt.Errorf("DUE_INDEX %q needs DUE_SHARDS (the shards of the due index)", due.name)
	}
	return due, nil
}

// legacyRepository opens the billing-activity tables.
func legacyRepository(client *dynamodb.Client, due dueIndex, logger *slog.Logger) (billing.Repository, error) {
	if due.pending {
		return nil, errors.New("DUE_INDEX_PENDING is for the single layout: the legacy tables keep reads off the due index " +
			"with STATUS_INDEX_MODE legacy or sorted until the backfill is done")
	}
	tables := dynamostore.TableConfig{
		Subscriptions: os.Getenv("BILLING_TABLE"),
		History:       os.Getenv("BILLING_HISTORY_TABLE"),
		DueShards:     due.shards,
		DueIndex:      due.name,
	}
	switch mode := os.Getenv("STATUS_INDEX_MODE"); mode {
	case "", "legacy":
		tables.StatusIndexMode = dynamostore.StatusIndexLegacy
	case "sorted":
		tables.StatusIndexMode = dynamostore.StatusIndexSorted
	case "due":
		if due.shards == 0 {
			return nil, errors.New("STATUS_INDEX_MODE=due needs DUE_SHARDS (the shards of the due index)")
		}
		tables.StatusIndexMode = dynamostore.StatusIndexDue
	default:
		return nil, fmt.Errorf("STATUS_INDEX_MODE must be legacy, sorted or due, got %q", mode)
	}
	return dynamostore.NewRepository(dynamostore.Config{
		Client: client,
		Tables: tables,
		Logger: logger,
	})
}

// singleTableRepository opens the single table. With DUE_SHARDS its status
// queries read the due index, one shard a page, unless DUE_INDEX_PENDING
// keeps them on the payment-index walk (one shard).
func singleTableRepository(client *dynamodb.Client, due dueIndex, logger *slog.Logger) (billing.Repository, error) {
	if mode := os.Getenv("STATUS_INDEX_MODE"); mode != "" {
		return nil, fmt.Errorf("STATUS_INDEX_MODE is for the legacy layout, got %q: the single table reads the due index "+
			"when DUE_SHARDS is set (DUE_INDEX_PENDING=true keeps the payment-index walk during a migration)", mode)
	}
	table := singleTableFromEnv()
	table.DueShards, table.DueIndex = due.shards, due.name
	return dynamostore.NewSingleTableRepository(dynamostore.SingleTableStoreConfig{
		Client:          client,
		Table:           table,
		DueIndexPending: due.pending,
		Logger:          logger,
	})
}

// singleTableFromEnv is the single table as SINGLE_TABLE, ACCOUNT_PREFIX
// and SINGLE_TABLE_TTL name it.
func singleTableFromEnv() dynamostore.SingleTableConfig {
	return dynamostore.SingleTableConfig{
		Table: os.Getenv("SINGLE_TABLE"), AccountPrefix: os.Getenv("ACCOUNT_PREFIX"), TTLAttribute: os.Getenv("SINGLE_TABLE_TTL"),
	}
}

// newWorker wires the worker to the host ports and the legacy prenote step
// (package prenote), configured the way the legacy service ran it: the
// notice carries the primary bank account's last four digits; prenotes go
// through "jpm" unless the provider flag says "usio", whose prenotes are
// submitted under the account "subscription" with the user's email; a good
// payment went through "jpm". The names are this host's; the library has
// none. A host without bank accounts or prenotes leaves AccountMask and
// AfterSend nil.
func newWorker(logger *slog.Logger, reminders notice.ReminderClaimer) (*notice.Worker, error) {
	accounts := stubBankAccounts{logger}
	policy, err := prenote.NewDefaultPolicy(prenote.PolicyConfig{
		Flags:               stubFlags{logger},
		Accounts:            accounts,
		Payments:            stubPayments{logger},
		Provider:            "jpm",
		AlternateProvider:   "usio",
		AlternateAccount:    "subscription",
		GoodPaymentProvider: "jpm",
	})
	if err != nil {
		return nil, err
	}
	step, err := prenote.NewStep(prenote.StepConfig{
		Policy:    policy,
		Submitter: stubSubmitter{logger},
		Metrics:   logMetrics{logger},
		Logger:    logger,
	})
	if err != nil {
		return nil, err
	}
	var suffixes []string
	for s := range strings.SplitSeq(os.Getenv("ALLOWED_EMAIL_SUFFIXES"), ",") {
		if s = strings.TrimSpace(s); s != "" {
			suffixes = append(suffixes, s)
		}
	}
	return notice.NewWorker(notice.WorkerConfig{
		Reminders:            reminders,
		Users:                stubUsers{logger},
		Notifier:             logNotifier{logger},
		AccountMask:          prenote.AccountMask(accounts),
		AfterSend:            step.AfterSend,
		AllowedEmailSuffixes: suffixes,
		Logger:               logger,
	})
}

// continuationSender sends a continuation to the scheduler's own queue.
type continuationSender interface {
	Send(ctx context.Context, body string) error
}

// schedulerHandler is the notifier-scheduler function. It takes both of its
// triggers: the daily rule's CloudWatch event (whose detail is the
// scheduler event, {"status": "SCHEDULED"}) and a batch from the scheduler
// queue (one continuation). When pages remain, it sends the continuation
// to the scheduler queue before returning.
type schedulerHandler struct {
	sched         *notice.Scheduler
	continuations continuationSender
	logger        *slog.Logger
}

// Handle tells the two triggers apart by shape: an SQS event has Records.
func (h *schedulerHandler) Handle(ctx context.Context, raw json.RawMessage) error {
	var probe struct {
		Records []events.SQSMessage `json:"Records"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return fmt.Errorf("scheduler: unrecognised event: %w", err)
	}
	var (
		res notice.Result
		err error
	)
	if len(probe.Records) > 0 {
		bodies := make([]string, len(probe.Records))
		for i, r := range probe.Records {
			bodies[i] = r.Body
		}
		// More than one record fails the whole invocation
		// (notice.ErrTooManyRecords): the mapping's batch size is 1.
		res, err = h.sched.RunBatch(ctx, bodies)
	} else {
		var cw events.CloudWatchEvent
		if err := json.Unmarshal(raw, &cw); err != nil {
			return fmt.Errorf("scheduler: CloudWatch event: %w", err)
		}
		ev, perr := notice.ParseEvent(cw.Detail)
		if perr != nil {
			return perr
		}
		res, err = h.sched.Run(ctx, ev)
	}
	if err != nil {
		// Returned so SQS retries the message (up to maxReceiveCount, then
		// the DLQ); pages already enqueued by this invocation may be
		// enqueued again: delivery is at least once.
		return err
	}
	if res.Continuation != nil {
		body, err := json.Marshal(res.Continuation)
		if err != nil {
			return err
		}
		if err := h.continuations.Send(ctx, string(body)); err != nil {
			return fmt.Errorf("scheduler: re-enqueue continuation: %w", err)
		}
	}
	return nil
}

// workerHandler is the notifier-worker function: it reports the failed
// messages so that SQS redelivers only those.
func workerHandler(w *notice.Worker) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		msgs := make([]notice.QueueMessage, len(ev.Records))
		for i, r := range ev.Records {
			msgs[i] = notice.QueueMessage{ID: r.MessageId, Body: r.Body}
		}
		var resp events.SQSEventResponse
		for _, id := range w.HandleBatch(ctx, msgs) {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: id})
		}
		return resp, nil
	}
}

// collectorHandler runs the collection engine. It takes three triggers,
// told apart by shape:
//
//   - a CloudWatch (EventBridge) rule per run kind, whose detail is the run
//     request;
//   - a message of its own queue (batch size 1): a continuation;
//   - a direct invocation whose payload is the run request, as a Step
//     Functions Task sends it: {"kind": "scheduled", "shards": [3],
//     "cursor": "..."}.
//
// For the first two, while pages remain, the handler re-enqueues the
// continuation (a billing.RunRequest with the cursor and the shards) to
// its own queue. A direct invocation returns a runOutcome instead and
// enqueues nothing: its caller continues the run with outcome.Next.
type collectorHandler struct {
	collector     *billing.Collector
	continuations continuationSender
	logger        *slog.Logger
}

// runOutcome is a direct invocation's answer: the run it continued, the
// cursor that continues it and what this invocation did, in the few
// numbers a state machine sums (the whole report is in the log's
// "collection run" line; a state machine's payload is limited in size).
// A state machine loops while Next is not "", sending {kind, shards,
// cursor: next}.
type runOutcome struct {
	Kind billing.RunKind `json:"kind"`
	// Shards are the request's shards, [] for every shard: always present,
	// so a state machine can pass them on.
	Shards []int `json:"shards"`
	// Next continues the run; "" when it is done. Always present: a Choice
	// state's test of a missing field is an error.
	Next      string `json:"next"`
	Attempted int    `json:"attempted"`
	Collected int    `json:"collected"`
	// Failed is the number of records whose handling failed.
	Failed int `json:"failed"`
}

func outcomeOf(req billing.RunRequest, rep *billing.Report) *runOutcome {
	shards := req.Shards
	if shards == nil {
		shards = []int{}
	}
	return &runOutcome{Kind: req.Kind, Shards: shards, Next: rep.Next, Attempted: rep.Attempted, Collected: rep.Collected, Failed: len(rep.Failed)}
}

// Handle tells the triggers apart by their top-level fields: an SQS event
// has Records, a CloudWatch event detail (and source, detail-type); any
// other object is a direct invocation's run request, decoded as strictly
// as the others (an unknown field is an error). It returns a runOutcome
// for a direct invocation and nil otherwise.
func (h *collectorHandler) Handle(ctx context.Context, raw json.RawMessage) (*runOutcome, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, fmt.Errorf("collector: unrecognised event: %w", err)
	}
	var (
		body   []byte
		direct bool
	)
	_, isSQS := probe["Records"]
	_, hasDetail := probe["detail"]
	_, hasDetailType := probe["detail-type"]
	_, hasSource := probe["source"]
	switch {
	case isSQS:
		var ev events.SQSEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, fmt.Errorf("collector: SQS event: %w", err)
		}
		if len(ev.Records) != 1 {
			return nil, fmt.Errorf("collector: %d records in one invocation, the queue's batch size must be 1", len(ev.Records))
		}
		body = []byte(ev.Records[0].Body)
	case hasDetail || hasDetailType || hasSource:
		var cw events.CloudWatchEvent
		if err := json.Unmarshal(raw, &cw); err != nil {
			return nil, fmt.Errorf("collector: CloudWatch event: %w", err)
		}
		body = cw.Detail
	default:
		body, direct = raw, true
	}
	var req billing.RunRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, fmt.Errorf("collector: run request %s: %w", body, err)
	}
	rep, err := h.collector.Run(ctx, req)
	h.logger.InfoContext(ctx, "collection run", "shards", req.Shards, "direct", direct, "report", rep)
	if err != nil {
		// A failed page read (or a refused request) is returned and
		// nothing is enqueued: SQS retries the message, Lambda the
		// event, a state machine its Task, each with the request it had,
		// and pages read again are cheap (their handled records are no
		// longer due). Enqueueing rep.Next as well would run the rest of
		// the run twice, and for an error that stays (a refused cursor)
		// add one more message at every attempt. Failed items are in the
		// report and are picked up by the next run.
		return nil, err
	}
	if direct {
		return outcomeOf(req, rep), nil
	}
	if rep.Next != "" {
		// The continuation keeps the request's shards: its cursor belongs
		// to a run over them, and the collector refuses it for any other.
		next, merr := json.Marshal(billing.RunRequest{Kind: req.Kind, Cursor: rep.Next, Shards: req.Shards})
		if merr != nil {
			return nil, merr
		}
		if serr := h.continuations.Send(ctx, string(next)); serr != nil {
			return nil, fmt.Errorf("collector: re-enqueue continuation: %w", serr)
		}
	}
	return nil, nil
}

// intEnv reads an optional non-negative integer variable; unset is 0 (the
// library default).
func intEnv(name string) (int, error) {
	v := os.Getenv(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s must be a non-negative integer, got %q", name, v)
	}
	return n, nil
}

// boolEnv reads an optional boolean variable (true, false, 1, 0, ...);
// unset is false.
func boolEnv(name string) (bool, error) {
	v := os.Getenv(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s must be true or false, got %q", name, v)
	}
	return b, nil
}
