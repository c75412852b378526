package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/dynabill/billing/notice"
)

// sqsAPI is the part of the SQS client the adapters use; *sqs.Client
// satisfies it.
type sqsAPI interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

var (
	_ sqsAPI          = (*sqs.Client)(nil)
	_ notice.Enqueuer = (*sqsEnqueuer)(nil)
)

// sqsEnqueuer is the scheduler's notice.Enqueuer: one SendMessageBatch per
// batch of at most 10 bodies. Entries SQS rejects for a server-side reason
// are retried a few times; any entry still rejected makes Enqueue fail, so
// the scheduler's invocation fails and is retried.
type sqsEnqueuer struct {
	client   sqsAPI
	queueURL string
	// retries is the number of extra attempts for rejected entries
	// (default 3).
	retries int
}

func (q *sqsEnqueuer) Enqueue(ctx context.Context, bodies []string) error {
	pending := make([]types.SendMessageBatchRequestEntry, len(bodies))
	for i, b := range bodies {
		pending[i] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(b)}
	}
	retries := q.retries
	if retries == 0 {
		retries = 3
	}
	for attempt := 0; ; attempt++ {
		out, err := q.client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &q.queueURL, Entries: pending})
		if err != nil {
			return fmt.Errorf("sqs: send batch of %d: %w", len(pending), err)
		}
		if len(out.Failed) == 0 {
			return nil
		}
		byID := make(map[string]types.SendMessageBatchRequestEntry, len(pending))
		for _, e := range pending {
			byID[*e.Id] = e
		}
		var retry []types.SendMessageBatchRequestEntry
		var fatal []string
		for _, f := range out.Failed {
			id := aws.ToString(f.Id)
			if f.SenderFault || attempt >= retries {
				fatal = append(fatal, fmt.Sprintf("%s: %s %s", id, aws.ToString(f.Code), aws.ToString(f.Message)))
				continue
			}
			retry = append(retry, byID[id])
		}
		if len(fatal) > 0 {
			return fmt.Errorf("sqs: %d of %d messages rejected: %s", len(fatal), len(bodies), strings.Join(fatal, "; "))
		}
		pending = retry
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(50<<attempt) * time.Millisecond):
		}
	}
}

// sqsSender sends one message: the scheduler's continuation.
type sqsSender struct {
	client   sqsAPI
	queueURL string
}

func (s *sqsSender) Send(ctx context.Context, body string) error {
	_, err := s.client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &s.queueURL, MessageBody: aws.String(body)})
	return err
}
