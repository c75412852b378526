package entitlement_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/entitlement"
)

// These tests pin the parsing and ordering of the entitlement enums: the
// value lists, Rank, Valid, and the exact error each Parse function returns.

func TestTiersRankValid(t *testing.T) {
	tiers := entitlement.Tiers()
	require.Equal(t, []entitlement.Tier{"FREE", "INITIATE", "JOURNEYMAN", "SAGE", "GUILDMASTER"}, tiers)
	for i, tier := range tiers {
		require.Equal(t, i, tier.Rank(), "%s.Rank()", tier)
		require.True(t, tier.Valid(), "%s.Valid()", tier)
	}
	tiers[0] = "PLATINUM"
	require.Equal(t, entitlement.TierFree, entitlement.Tiers()[0], "Tiers returns a fresh slice")
	for _, bad := range []entitlement.Tier{"", "free", "Sage", " SAGE", "PLATINUM"} {
		require.Equal(t, -1, bad.Rank(), "%q.Rank()", bad)
		require.False(t, bad.Valid(), "%q.Valid()", bad)
	}
}

func TestProviderStatusesValid(t *testing.T) {
	all := entitlement.ProviderStatuses()
	require.Equal(t, []entitlement.ProviderStatus{"active", "canceled", "past_due", "trialing", "incomplete", "incomplete_expired"}, all)
	for _, st := range all {
		require.True(t, st.Valid(), "%q.Valid()", st)
	}
	for _, bad := range []entitlement.ProviderStatus{"", "ACTIVE", " active", "paused", "unpaid"} {
		require.False(t, bad.Valid(), "%q.Valid()", bad)
	}
}

func TestParseEnums(t *testing.T) {
	parseTier := func(s string) (string, error) { v, err := entitlement.ParseTier(s); return string(v), err }
	parsePass := func(s string) (string, error) { v, err := entitlement.ParsePassType(s); return string(v), err }
	parseStatus := func(s string) (string, error) { v, err := entitlement.ParseProviderStatus(s); return string(v), err }
	for _, tt := range []struct {
		name     string
		parse    func(string) (string, error)
		in, want string
		sentinel error
		field    string
	}{
		{"tier canonical", parseTier, "SAGE", "SAGE", nil, ""},
		{"tier lower", parseTier, "free", "FREE", nil, ""},
		{"tier mixed and spaces", parseTier, " Guildmaster\n", "GUILDMASTER", nil, ""},
		{"tier empty", parseTier, "", "", entitlement.ErrInvalidTier, "tier"},
		{"tier unknown", parseTier, " platinum ", "", entitlement.ErrInvalidTier, "tier"},
		{"tier long s", parseTier, "ſage", "", entitlement.ErrInvalidTier, "tier"},
		{"pass canonical", parsePass, "FOUNDING_MEMBER", "FOUNDING_MEMBER", nil, ""},
		{"pass lower and spaces", parsePass, " guild_builder ", "GUILD_BUILDER", nil, ""},
		{"pass unknown", parsePass, "founder", "", entitlement.ErrInvalidPassType, "passType"},
		{"pass empty", parsePass, "", "", entitlement.ErrInvalidPassType, "passType"},
		{"status exact", parseStatus, "past_due", "past_due", nil, ""},
		{"status case-sensitive", parseStatus, "ACTIVE", "", entitlement.ErrInvalidProviderStatus, "status"},
		{"status no trimming", parseStatus, "active ", "", entitlement.ErrInvalidProviderStatus, "status"},
		{"status new upstream", parseStatus, "paused", "", entitlement.ErrInvalidProviderStatus, "status"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.parse(tt.in)
			require.Equal(t, tt.want, got)
			if tt.sentinel == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.sentinel)
			var fe *billing.FieldError
			require.True(t, errors.As(err, &fe), "%T is not a *billing.FieldError", err)
			require.Equal(t, billing.FieldError{Field: tt.field, Value: tt.in, Err: tt.sentinel}, *fe)
			require.EqualError(t, err, (&billing.FieldError{Field: tt.field, Value: tt.in, Err: tt.sentinel}).Error())
		})
	}
}
