package dynamostore

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTranslateWriteCancellation(t *testing.T) {
	ops := []txOp{
		{key: "k0", reason: "record"},
		{key: "k1", reason: "history row exists", exists: true, history: true},
		{key: "k2", reason: "pointer"},
	}
	reasons := func(codes ...string) error {
		rs := make([]types.CancellationReason, len(codes))
		for i, c := range codes {
			rs[i] = types.CancellationReason{Code: aws.String(c)}
		}
		return &types.TransactionCanceledException{Message: aws.String("cancelled"), CancellationReasons: rs}
	}
	cases := []struct {
		name     string
		err      error
		key      string
		sentinel error
		reason   string
		history  bool
	}{
		{"condition of the second action", reasons("None", codeConditionFailed, "None"), "k1", billing.ErrAlreadyExists, "history row exists", true},
		{"conflict on the third action", reasons("None", "None", codeTxConflict), "k2", billing.ErrConflict, "a concurrent transaction wrote the same item", false},
		{"conflict on the first action", reasons(codeTxConflict, "None", "None"), "k0", billing.ErrConflict, "a concurrent transaction wrote the same item", false},
		{"conflict beyond the described actions", reasons("None", "None", "None", codeTxConflict), "k0", billing.ErrConflict, "a concurrent transaction wrote the same item", false},
		{"single-item condition", &types.ConditionalCheckFailedException{Message: aws.String("failed")}, "k0", billing.ErrConflict, "record", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := translateWrite("op", ops, tc.err)
			require.ErrorIs(t, err, tc.sentinel)
			var ce *billing.ConflictError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tc.key, ce.Key)
			assert.Equal(t, "op", ce.Op)
			assert.Equal(t, tc.reason, ce.Reason)
			assert.Equal(t, tc.history, ce.HistoryRow)
		})
	}

	err := translateWrite("op", ops, reasons("None", "ThrottlingError", "None"))
	require.Error(t, err)
	assert.NotErrorIs(t, err, billing.ErrConflict, "a throttled transaction is not a conflict")
	assert.ErrorContains(t, err, "op (k0): transaction cancelled")
	var tce *types.TransactionCanceledException
	assert.ErrorAs(t, err, &tce)

	other := errors.New("boom")
	assert.ErrorIs(t, translateWrite("op", nil, other), other, "no actions described: no key, no panic")
	var ce *billing.ConflictError
	require.ErrorAs(t, translateWrite("op", nil, reasons(codeTxConflict)), &ce)
	assert.Empty(t, ce.Key)
	assert.ErrorContains(t, translateWrite("op", nil, reasons("ThrottlingError")), "billing: op (): transaction cancelled")
	assert.NoError(t, translateWrite("op", ops, nil))
}
