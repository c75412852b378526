package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
)

// recordingSink keeps the events it is given and refuses those of failUser.
type recordingSink struct {
	got      []billing.Event
	failUser string
}

func (s *recordingSink) Emit(_ context.Context, e billing.Event) error {
	if e.UserID == s.failUser {
		return errors.New("sink down")
	}
	s.got = append(s.got, e)
	return nil
}

func newTestEventsHandler(t *testing.T, sink billing.EventSink) *eventsHandler {
	t.Helper()
	t.Setenv("BILLING_LAYOUT", "legacy")
	h, err := newEventsHandler(sink, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	return h
}

// The recorded batch of the history table's stream: two rows of u-1001 (a
// collection and the next period it opened), a poison row (an amount
// written as "4,99" by another program), then a decline of u-1002.
const recordedBatch = "testdata/history-stream-batch.json"

// TestEventsHandlerStopsAtThePoisonRecord: the events before the poison
// row reach the sink in order with their IDs, the poison row is the
// batch's one failure, and nothing after it is handed on (Lambda retries
// from it, so order holds).
func TestEventsHandlerStopsAtThePoisonRecord(t *testing.T) {
	raw, err := os.ReadFile(recordedBatch)
	require.NoError(t, err)
	sink := &recordingSink{}
	h := newTestEventsHandler(t, sink)

	resp, err := h.Handle(context.Background(), raw)
	require.NoError(t, err)
	require.Equal(t, events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{{ItemIdentifier: "4100000000000000150"}}}, resp)
	require.Len(t, sink.got, 2)
	require.Equal(t, billing.EventPaymentSucceeded, sink.got[0].Type)
	require.Equal(t, "u-1001", sink.got[0].UserID)
	require.Equal(t, billing.Amount(499), sink.got[0].Amount)
	require.Equal(t, "pi_3QxA1", sink.got[0].TransactionID)
	require.Equal(t, billing.EventPeriodOpened, sink.got[1].Type)
	require.NotEmpty(t, sink.got[0].ID)
	require.NotEqual(t, sink.got[0].ID, sink.got[1].ID)

	// The retry delivers the same rows again: the same IDs, for the sink
	// to drop.
	again := &recordingSink{}
	_, err = newTestEventsHandler(t, again).Handle(context.Background(), raw)
	require.NoError(t, err)
	require.Equal(t, sink.got, again.got)
}

// TestEventsHandlerReportsTheRefusedEvent: when the sink refuses an event,
// that record is the failure, and the records after it wait for the retry.
func TestEventsHandlerReportsTheRefusedEvent(t *testing.T) {
	raw, err := os.ReadFile(recordedBatch)
	require.NoError(t, err)
	sink := &recordingSink{failUser: "u-1001"}
	resp, err := newTestEventsHandler(t, sink).Handle(context.Background(), raw)
	require.NoError(t, err)
	require.Equal(t, events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{{ItemIdentifier: "4100000000000000000"}}}, resp)
	require.Empty(t, sink.got)
}

// TestEventsHandlerRefusesAnotherPayload: a payload that is not a stream
// event fails the invocation rather than passing for an empty batch.
func TestEventsHandlerRefusesAnotherPayload(t *testing.T) {
	sink := &recordingSink{}
	_, err := newTestEventsHandler(t, sink).Handle(context.Background(), []byte(`{"kind":"scheduled"}`))
	require.Error(t, err)
	require.Empty(t, sink.got)
}

// TestEventsRoleWithoutAWS: HANDLER=events builds without an AWS client
// (decoding batches needs none).
func TestEventsRoleWithoutAWS(t *testing.T) {
	t.Setenv("BILLING_LAYOUT", "single")
	t.Setenv("SINGLE_TABLE", "billing")
	h, err := newHandler(context.Background(), "events", slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	require.NotNil(t, h)
	t.Setenv("BILLING_LAYOUT", "other")
	_, err = newHandler(context.Background(), "events", slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.ErrorContains(t, err, "BILLING_LAYOUT")
}

// TestEventsTemplateDeliversEveryRow: the templates enable the history
// table's stream with the new image, and map it to the events function
// with partial batch failures, bisection, bounded retries and an
// on-failure destination, so a poison record neither blocks the shard for
// ever nor vanishes.
func TestEventsTemplateDeliversEveryRow(t *testing.T) {
	var tables struct {
		Resources map[string]struct {
			Properties struct {
				StreamSpecification struct{ StreamViewType string }
			}
		}
		Outputs map[string]struct{ Value map[string][]string }
	}
	data, err := os.ReadFile("../cloudformation/billing-tables.json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &tables))
	require.Equal(t, "NEW_IMAGE", tables.Resources["BillingActivityHistory"].Properties.StreamSpecification.StreamViewType)
	require.Equal(t, []string{"BillingActivityHistory", "StreamArn"}, tables.Outputs["HistoryStreamArn"].Value["Fn::GetAtt"])

	var tpl struct {
		Parameters map[string]json.RawMessage
		Resources  map[string]struct {
			Type       string
			Properties map[string]any
		}
	}
	data, err = os.ReadFile("../cloudformation/billing-events.json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &tpl))
	m := tpl.Resources["EventsSourceMapping"]
	require.Equal(t, "AWS::Lambda::EventSourceMapping", m.Type)
	p := m.Properties
	require.Equal(t, []any{"ReportBatchItemFailures"}, p["FunctionResponseTypes"])
	require.Equal(t, true, p["BisectBatchOnFunctionError"])
	require.Equal(t, map[string]any{"Ref": "MaximumRetryAttempts"}, p["MaximumRetryAttempts"])
	require.Equal(t, map[string]any{"Ref": "HistoryStreamArn"}, p["EventSourceArn"])
	require.Equal(t, map[string]any{"Ref": "EventsFunctionArn"}, p["FunctionName"])
	require.Equal(t, "TRIM_HORIZON", p["StartingPosition"], "a new mapping starts with the oldest row, not the next one")
	require.EqualValues(t, 1, p["ParallelizationFactor"], "one batch of a shard at a time keeps a user's rows in order")
	dest := p["DestinationConfig"].(map[string]any)["OnFailure"].(map[string]any)["Destination"]
	require.Equal(t, map[string]any{"Fn::GetAtt": []any{"EventsOnFailureQueue", "Arn"}}, dest)
	require.Equal(t, "AWS::SQS::Queue", tpl.Resources["EventsOnFailureQueue"].Type)
	for _, name := range []string{"EventsFunctionArn", "EventsFunctionRoleName", "HistoryStreamArn", "BatchSize", "MaximumRetryAttempts"} {
		require.Contains(t, tpl.Parameters, name)
	}
}
