package layout

import (
	"reflect"
	"testing"
	"time"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/entitlement"
	"github.com/dynabill/billing/internal/av"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDecodeStructsConvert pins that each tagged decode struct is its
// entitlement type field for field, so readAs's conversion cannot panic.
func TestDecodeStructsConvert(t *testing.T) {
	for f, to := range map[reflect.Type]reflect.Type{
		reflect.TypeFor[founderPassItem]():          reflect.TypeFor[entitlement.FounderPass](),
		reflect.TypeFor[creditsItem]():              reflect.TypeFor[entitlement.Credits](),
		reflect.TypeFor[providerSubscriptionItem](): reflect.TypeFor[entitlement.ProviderSubscription](),
		reflect.TypeFor[recurringFields]():          reflect.TypeFor[entitlement.RecurringSubscription](),
		reflect.TypeFor[receiptFields]():            reflect.TypeFor[entitlement.Receipt](),
	} {
		assert.True(t, f.ConvertibleTo(to), "%s -> %s", f, to)
	}
}

// FuzzFounderPassItem: any founder pass item decodes to a pass that grants
// its tier, or fails with a FieldError.
func FuzzFounderPassItem(f *testing.F) {
	f.Add("USER#u1", "FOUNDER#GUILD_BUILDER", "GUILD_BUILDER", "GUILDMASTER", "2025-01-01T00:00:00Z")
	f.Add("USER#u1", "FOUNDER#FOUNDING_MEMBER", "", "", "")
	f.Add("USER#", "FOUNDER#X", "x", "gold", "now")
	f.Fuzz(func(t *testing.T, pk, sk, passType, granted, purchased string) {
		item := map[string]av.AttributeValue{"PK": StringAV(pk), "SK": StringAV(sk), "purchasedAt": StringAV(purchased),
			"lifetimeAccess": &av.AttributeValueMemberBOOL{Value: true}}
		if passType != "" {
			item["passType"] = StringAV(passType)
		}
		if granted != "" {
			item["grantedTier"] = StringAV(granted)
		}
		p, err := SingleTableConfig{}.DecodeFounderPass(item)
		if err != nil {
			var fe *billing.FieldError
			require.ErrorAs(t, err, &fe)
			return
		}
		require.True(t, p.PassType.Tier() != "" && p.GrantedTier.Valid() && p.UserID != "", "decoded %+v", p)
		a := entitlement.ResolveAccess(time.Now(), []entitlement.FounderPass{p}, nil, "")
		require.Equal(t, entitlement.ReasonFounderPass, a.Reason)
		require.Equal(t, p.GrantedTier, a.Tier)
	})
}
