package entitlement_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/entitlement"
)

func TestCheckRequestID(t *testing.T) {
	for _, ok := range []string{"r", strings.Repeat("x", entitlement.MaxRequestID), "order#42/é ✓", strings.Repeat("é", entitlement.MaxRequestID/2)} {
		require.NoError(t, entitlement.CheckRequestID(ok), "%q", ok)
	}
	for _, bad := range []string{"", strings.Repeat("x", entitlement.MaxRequestID+1), strings.Repeat("é", entitlement.MaxRequestID/2) + "x", "\xff"} {
		err := entitlement.CheckRequestID(bad)
		require.ErrorIs(t, err, entitlement.ErrInvalidCredits, "%q", bad)
		var fe *billing.FieldError
		require.ErrorAs(t, err, &fe, "%q", bad)
		require.Equal(t, "request ID", fe.Field, "%q", bad)
		require.Equal(t, bad, fe.Value, "%q", bad)
	}
}
