package dynamostore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/dynabill/billing/internal/sdkav"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/ddbjson"
)

// ErrNotStreamEvent reports a Lambda payload that is not a DynamoDB
// Streams event: not a JSON object with a Records array.
var ErrNotStreamEvent = errors.New("billing: not a DynamoDB Streams event")

// lambdaRecord is one record of the event a Lambda function receives
// from a DynamoDB Streams event source.
type lambdaRecord struct {
	EventName   string `json:"eventName"`
	EventSource string `json:"eventSource"`
	// UserIdentity names DynamoDB's TTL service on a TTL deletion.
	UserIdentity *struct {
		PrincipalID string `json:"principalId"`
		Type        string `json:"type"`
	} `json:"userIdentity"`
	Dynamodb *struct {
		Keys           json.RawMessage `json:"Keys"`
		NewImage       json.RawMessage `json:"NewImage"`
		SequenceNumber string          `json:"SequenceNumber"`
	} `json:"dynamodb"`
}

// DecodeLambda decodes the JSON payload a Lambda function receives from a
// DynamoDB Streams event source ({"Records": [{"eventName": "INSERT",
// "dynamodb": {"Keys": …, "NewImage": …, "SequenceNumber": …},
// "userIdentity": …}]}),
// without aws-lambda-go: one [StreamResult] per record, in order, each as
// [StreamDecoder.Decode] would give it. A record that does not parse is a
// result with Err set, naming its sequence number when it has one. The
// error is an [ErrNotStreamEvent] only when the payload is not such an
// event at all; a host then fails the whole batch.
func (d *StreamDecoder) DecodeLambda(payload []byte) ([]StreamResult, error) {
	var ev struct {
		Records *[]json.RawMessage `json:"Records"`
	}
	if err := json.Unmarshal(payload, &ev); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotStreamEvent, err)
	}
	if ev.Records == nil {
		return nil, fmt.Errorf("%w: no Records", ErrNotStreamEvent)
	}
	out := make([]StreamResult, 0, len(*ev.Records))
	for i, raw := range *ev.Records {
		rec, err := parseLambdaRecord(raw)
		if err != nil {
			out = append(out, StreamResult{SequenceNumber: rec.seq, Err: &StreamRecordError{
				SequenceNumber: rec.seq, Err: fmt.Errorf("%w: record %d: %w", billing.ErrInvalidItem, i, err),
			}})
			continue
		}
		hev, ok, err := d.decode(rec)
		out = append(out, StreamResult{SequenceNumber: rec.seq, Event: hev, OK: ok, Err: err})
	}
	return out, nil
}

// parseLambdaRecord parses one record of a Lambda event. Its sequence
// number is set as soon as it is read, for the error of a record that does
// not parse.
func parseLambdaRecord(raw json.RawMessage) (streamRecord, error) {
	var lr lambdaRecord
	if err := json.Unmarshal(raw, &lr); err != nil {
		if lr.Dynamodb != nil { // a mistyped field does not hide the rest
			return streamRecord{seq: lr.Dynamodb.SequenceNumber}, err
		}
		return streamRecord{}, err
	}
	if lr.Dynamodb == nil {
		return streamRecord{}, fmt.Errorf("no dynamodb")
	}
	rec := streamRecord{event: lr.EventName, seq: lr.Dynamodb.SequenceNumber}
	if id := lr.UserIdentity; id != nil {
		rec.ttl = isTTLDeletion(id.PrincipalID, id.Type)
	}
	if lr.EventSource != "" && lr.EventSource != "aws:dynamodb" {
		return rec, fmt.Errorf("eventSource %q", lr.EventSource)
	}
	rec.keys, rec.keysErr = lambdaItem(lr.Dynamodb.Keys)
	rec.image, rec.imageErr = lambdaItem(lr.Dynamodb.NewImage)
	return rec, nil
}

// lambdaItem parses an item of a Lambda event in DynamoDB JSON; absent or
// null is nil.
func lambdaItem(raw json.RawMessage) (map[string]types.AttributeValue, error) {
	if len(raw) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, nil
	}
	item, err := ddbjson.UnmarshalItem(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", billing.ErrInvalidItem, err)
	}
	return sdkav.ToSDK(item), nil
}
