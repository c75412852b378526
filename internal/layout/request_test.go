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
