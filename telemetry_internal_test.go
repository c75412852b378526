package billing

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A run observes each record with a report of its own and adds it to the
// run's (Report.add): a count field that add leaves out would be lost from
// every run report. Every int field but the run-level ones must be added.
func TestReportAddCoversEveryCount(t *testing.T) {
	runLevel := map[string]bool{"Pages": true, "Scanned": true}
	var one Report
	v := reflect.ValueOf(&one).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if f.Type.Kind() == reflect.Int && !runLevel[f.Name] {
			v.Field(i).SetInt(1)
		}
	}
	one.Failed = []ItemFailure{{UserID: "u1", Reason: "x"}}
	var sum Report
	sum.add(&one)
	sum.add(&one)
	s := reflect.ValueOf(&sum).Elem()
	for i := range s.NumField() {
		f := s.Type().Field(i)
		if f.Type.Kind() == reflect.Int && !runLevel[f.Name] && s.Field(i).Int() != 2 {
			t.Errorf("Report.add does not add %s", f.Name)
		}
	}
	assert.Len(t, sum.Failed, 2, "Report.add: %d failures, want 2", len(sum.Failed))
}

func TestRecordOutcome(t *testing.T) {
	for _, tc := range []struct {
		rep  *Report
		err  error
		want string
	}{
		{&Report{Attempted: 1, Collected: 1}, nil, outcomeCollected},
		{&Report{Attempted: 1, Pending: 1}, nil, outcomePending},
		{&Report{Attempted: 1, Declined: 1}, nil, outcomeDeclined},
		{&Report{Attempted: 1, Unknown: 1, Failed: []ItemFailure{{}}}, errTest, outcomeUnknown},
		{&Report{Attempted: 1, Conflicts: 1, Failed: []ItemFailure{{}}}, errTest, outcomeConflict},
		{&Report{Attempted: 1}, fmt.Errorf("record: %w", &ConflictError{Op: "update", Err: ErrConflict}), outcomeConflict},
		{&Report{Failed: []ItemFailure{{}}}, nil, outcomeFailed}, // lock error
		{&Report{}, errTest, outcomeFailed},
		{&Report{Stale: 1}, nil, outcomeStale},
		{&Report{Advanced: 1}, nil, outcomeAdvanced},
		{&Report{SkippedLocked: 1}, nil, outcomeSkippedLocked},
		{&Report{NotEligible: 1}, nil, outcomeNotEligible},
	} {
		o := &recordObs{rep: tc.rep, err: tc.err}
		if got := o.outcome(); got != tc.want {
			t.Errorf("outcome of %+v, %v = %s, want %s", tc.rep, tc.err, got, tc.want)
		}
	}
}

var errTest = errors.New("test error")
