package dynamostore

import (
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
)

// TestStreamDecoderSkipsCouponItems: the coupon items share the tables
// whose streams carry the history (the invoices table, the single
// table), and their counts change in place; the decoders skip every
// change of them, inserted, modified or removed, without an error.
func TestStreamDecoderSkipsCouponItems(t *testing.T) {
	legacy, err := NewCoupons(Config{Client: struct{ API }{}, Tables: TableConfig{Invoices: "billing-invoices"}})
	require.NoError(t, err)
	singleStore, err := NewSingleTableCoupons(SingleTableStoreConfig{Client: struct{ API }{}})
	require.NoError(t, err)
	single, err := NewSingleTableStreamDecoder(SingleTableConfig{})
	require.NoError(t, err)
	c := billing.Coupon{ID: "WELCOME20", PercentOff: 2000, Duration: billing.CouponOnce, MaxRedemptions: 5, Redeemed: 2, RedeemBy: streamT0}
	p := billing.PromotionCode{Code: "Welcome", CouponID: c.ID, ExpiresAt: streamT0, Redeemed: 1}
	seq := 7000
	for _, l := range []struct {
		name    string
		decoder *StreamDecoder
		store   *Coupons
	}{{"legacy", NewInvoiceStreamDecoder(), legacy}, {"single", single, singleStore}} {
		s := l.store
		items := map[string]map[string]types.AttributeValue{
			"coupon": s.item(s.couponKey(c.ID), encodeCoupon(&c)),
			"code":   s.item(s.codeKey(p.Code), encodeCode(&p)),
		}
		for _, user := range []string{"acct-1", "acct-1#sub-1#PLUS"} {
			r := billing.Redemption{UserID: user, RequestKey: "k", CouponID: c.ID, Code: p.Code, At: streamT0}
			items["redemption of "+user] = s.item(s.redemptionKey(user, r.RequestKey), encodeRedemption(&r))
		}
		for name, item := range items {
			for _, event := range []string{"INSERT", "MODIFY", "REMOVE"} {
				t.Run(l.name+"/"+name+"/"+event, func(t *testing.T) {
					seq++
					rec := wireRecord{event: event, seq: strconv.Itoa(seq),
						keys: map[string]types.AttributeValue{s.pk: item[s.pk], s.sk: item[s.sk]}}
					if event != "REMOVE" {
						rec.image = item
					}
					ev, ok, err := decodeBoth(t, l.decoder, rec)
					require.NoError(t, err)
					assert.False(t, ok)
					assert.Equal(t, HistoryEvent{}, ev)
				})
			}
		}
	}
}
