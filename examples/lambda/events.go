package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/events"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/dynamostore"
)

// eventsHandler is the history stream's consumer (HANDLER=events): the
// DynamoDB Streams event source of the history table (legacy layout) or of
// the single table, with ReportBatchItemFailures. Each history row
// becomes one event, handed to the host's sink in stream order.
//
// The first record that cannot be handled — a row that does not decode,
// or an event the sink refuses — is reported as the batch's failure and
// nothing after it is handed on: Lambda retries the batch from that
// record, so events of one item (one user's rows, in the legacy history
// table) keep their order. After the mapping's retries the record is
// isolated (BisectBatchOnFunctionError) and its place in the stream is
// sent to the on-failure destination, so one poison row stops its shard
// for a bounded time and is never lost silently.
//
// Delivery is at least once: a retried batch hands again the events before
// the failed record. The sink drops repeats by [billing.Event.ID].
type eventsHandler struct {
	decoder *dynamostore.StreamDecoder
	sink    billing.EventSink
	logger  *slog.Logger
}

// newEventsHandler builds the consumer for BILLING_LAYOUT's stream.
func newEventsHandler(sink billing.EventSink, logger *slog.Logger) (*eventsHandler, error) {
	h := &eventsHandler{sink: sink, logger: logger}
	switch layout := os.Getenv("BILLING_LAYOUT"); layout {
	case "", "legacy":
		h.decoder = dynamostore.NewHistoryStreamDecoder()
	case "single":
		d, err := dynamostore.NewSingleTableStreamDecoder(singleTableFromEnv())
		if err != nil {
			return nil, err
		}
		h.decoder = d
	default:
		return nil, fmt.Errorf("BILLING_LAYOUT must be legacy or single, got %q", layout)
	}
	return h, nil
}

// Handle hands the batch's events to the sink and reports the first record
// it could not hand on. A payload that is not a stream event at all fails
// the whole invocation.
func (h *eventsHandler) Handle(ctx context.Context, raw json.RawMessage) (events.DynamoDBEventResponse, error) {
	results, err := h.decoder.DecodeLambda(raw)
	if err != nil {
		return events.DynamoDBEventResponse{}, fmt.Errorf("events: %w", err)
	}
	for _, r := range results {
		if r.Err != nil {
			h.logger.ErrorContext(ctx, "billing events: undecodable history row", "sequence_number", r.SequenceNumber, "error", r.Err)
			return failedFrom(r.SequenceNumber), nil
		}
		if !r.OK {
			continue // not a history row: another entity, an update, a deletion
		}
		if err := h.sink.Emit(ctx, r.Event.Event); err != nil {
			h.logger.ErrorContext(ctx, "billing events: sink refused an event", "sequence_number", r.SequenceNumber,
				"event_id", r.Event.ID, "type", r.Event.Event.Type, "error", err)
			return failedFrom(r.SequenceNumber), nil
		}
	}
	return events.DynamoDBEventResponse{}, nil
}

// failedFrom is the partial batch response that makes Lambda retry from
// the record seq.
func failedFrom(seq string) events.DynamoDBEventResponse {
	return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{{ItemIdentifier: seq}}}
}
