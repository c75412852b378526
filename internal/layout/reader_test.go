package layout

import (
	"reflect"
	"testing"

	"github.com/dynabill/billing/entitlement"
	"github.com/stretchr/testify/assert"
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
