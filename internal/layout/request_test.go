package layout

import (
	"path/filepath"
	"testing"

	"github.com/dynabill/billing/internal/av"
	"github.com/stretchr/testify/require"
)

// TestRequestIsHistoryOnly: billing_request is written to history rows
// only, read back from them, optional on read, and never carried as an
// unknown attribute.
func TestRequestIsHistoryOnly(t *testing.T) {
	files, _ := filepath.Glob("../../testdata/items/*.json")
	require.NotEmpty(t, files)
	item := loadItem(t, files[0])
	require.NotContains(t, item, AttrRequest)
	s, err := DecodeItem(item)
	require.NoError(t, err)
	require.Empty(t, s.Request, "a row written without it")

	s.Request = "op=subscribe&key=order-9"
	hist, err := EncodeHistoryItem(&s)
	require.NoError(t, err)
	require.Equal(t, &av.AttributeValueMemberS{Value: "op=subscribe&key=order-9"}, hist[AttrRequest])
	primary, err := EncodeItem(&s)
	require.NoError(t, err)
	require.NotContains(t, primary, AttrRequest, "the billing table's item")

	back, err := DecodeItem(hist)
	require.NoError(t, err)
	require.Equal(t, "op=subscribe&key=order-9", back.Request)
	require.Empty(t, ExtraAttributes(&back), "billing_request is not an unknown attribute")

	hist[AttrRequest] = &av.AttributeValueMemberN{Value: "1"}
	_, err = DecodeItem(hist)
	require.ErrorContains(t, err, AttrRequest)
}

// TestOperatorIsHistoryOnly: who made a change and why are the data_
// attributes data_operator and data_reason, S, on history rows only; read
// back into the record's fields, absent from rows written without them,
// and another form (another writer's) is kept as it was read.
func TestOperatorIsHistoryOnly(t *testing.T) {
	files, _ := filepath.Glob("../../testdata/items/*.json")
	require.NotEmpty(t, files)
	item := loadItem(t, files[0])
	s, err := DecodeItem(item)
	require.NoError(t, err)
	require.Empty(t, s.Operator)
	hist, err := EncodeHistoryItem(&s)
	require.NoError(t, err)
	require.NotContains(t, hist, AttrOperator, "a row written without one")
	require.NotContains(t, hist, AttrReason)

	s.Operator, s.Reason = "ann@example.com", "card topped up\nticket 7"
	hist, err = EncodeHistoryItem(&s)
	require.NoError(t, err)
	require.Equal(t, &av.AttributeValueMemberS{Value: "ann@example.com"}, hist[AttrOperator])
	require.Equal(t, &av.AttributeValueMemberS{Value: "card topped up\nticket 7"}, hist[AttrReason])
	primary, err := EncodeItem(&s)
	require.NoError(t, err)
	require.NotContains(t, primary, AttrOperator, "the billing table's item")
	require.NotContains(t, primary, AttrReason)

	back, err := DecodeItem(hist)
	require.NoError(t, err)
	require.Equal(t, "ann@example.com", back.Operator)
	require.Equal(t, "card topped up\nticket 7", back.Reason)
	require.Empty(t, DataAttributes(&back), "read into the fields")
	again, err := EncodeHistoryItem(&back)
	require.NoError(t, err)
	require.Equal(t, hist, again, "byte for byte")

	// Another writer's data_operator that is no string stays as it was.
	hist[AttrOperator] = &av.AttributeValueMemberN{Value: "7"}
	back, err = DecodeItem(hist)
	require.NoError(t, err)
	require.Empty(t, back.Operator)
	back.Reason = ""
	again, err = EncodeHistoryItem(&back)
	require.NoError(t, err)
	require.Equal(t, &av.AttributeValueMemberN{Value: "7"}, again[AttrOperator])
	require.NotContains(t, again, AttrReason)
}
