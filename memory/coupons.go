package memory

import (
	"context"
	"fmt"
	"sync"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/coupondoc"
)

// Coupons is the in-memory twin of dynamostore's coupon stores: the same
// checks, counts and errors, with a mutex where DynamoDB has a
// transaction. Make one with [NewCoupons].
type Coupons struct {
	mu          sync.Mutex
	coupons     map[string]billing.Coupon        // by ID
	codes       map[string]billing.PromotionCode // by billing.FoldCode of the code
	redemptions map[[2]string]billing.Redemption // by user and request key
	byUser      map[string][]billing.Redemption  // user -> redemptions, in the order made
}

var _ billing.Coupons = (*Coupons)(nil)

// NewCoupons returns an empty coupon store.
func NewCoupons() *Coupons {
	return &Coupons{coupons: map[string]billing.Coupon{}, codes: map[string]billing.PromotionCode{},
		redemptions: map[[2]string]billing.Redemption{}, byUser: map[string][]billing.Redemption{}}
}

// PutCoupon implements [billing.Coupons.PutCoupon]: c's terms, with the
// count the store kept (0 for a new coupon; c.Redeemed is not taken).
func (s *Coupons) PutCoupon(ctx context.Context, c billing.Coupon) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := coupondoc.CheckCoupon(&c); err != nil {
		return err
	}
	c.RedeemBy = c.RedeemBy.UTC()
	s.mu.Lock()
	defer s.mu.Unlock()
	c.Redeemed = s.coupons[c.ID].Redeemed
	s.coupons[c.ID] = c
	return nil
}

// PutPromotionCode implements [billing.Coupons.PutPromotionCode]: p's
// rules under its folded code, with the count the store kept; a code of a
// coupon the store does not hold is [billing.ErrNotFound].
func (s *Coupons) PutPromotionCode(ctx context.Context, p billing.PromotionCode) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := coupondoc.CheckCode(&p); err != nil {
		return err
	}
	p.ExpiresAt = p.ExpiresAt.UTC()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.coupons[p.CouponID]; !ok {
		return fmt.Errorf("%w: coupon %s of promotion code %s", billing.ErrNotFound, p.CouponID, p.Code)
	}
	key := billing.FoldCode(p.Code)
	p.Redeemed = s.codes[key].Redeemed
	s.codes[key] = p
	return nil
}

// Coupon implements [billing.Coupons.Coupon].
func (s *Coupons) Coupon(ctx context.Context, id string) (billing.Coupon, error) {
	if err := ctx.Err(); err != nil {
		return billing.Coupon{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.coupons[id]
	if !ok {
		return billing.Coupon{}, fmt.Errorf("%w: coupon %s", billing.ErrNotFound, id)
	}
	return c, nil
}

// PromotionCode implements [billing.Coupons.PromotionCode].
func (s *Coupons) PromotionCode(ctx context.Context, code string) (billing.PromotionCode, error) {
	if err := ctx.Err(); err != nil {
		return billing.PromotionCode{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.codes[billing.FoldCode(code)]
	if !ok {
		return billing.PromotionCode{}, fmt.Errorf("%w: promotion code %s", billing.ErrNotFound, code)
	}
	return p, nil
}

// Redeem implements [billing.Coupons.Redeem]: under the mutex, a repeat
// of the user's key is answered from what is stored; otherwise the coupon
// and the code are checked and counted with the redemption, or nothing
// is.
func (s *Coupons) Redeem(ctx context.Context, r billing.Redemption) (billing.Redemption, error) {
	if err := ctx.Err(); err != nil {
		return billing.Redemption{}, err
	}
	if err := coupondoc.CheckRedemption(&r); err != nil {
		return billing.Redemption{}, err
	}
	r.At = r.At.UTC()
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.redemptions[[2]string{r.UserID, r.RequestKey}]; ok {
		return coupondoc.Repeat(cur, r)
	}
	c, ok := s.coupons[r.CouponID]
	if !ok {
		return billing.Redemption{}, fmt.Errorf("%w: coupon %s", billing.ErrNotFound, r.CouponID)
	}
	if err := coupondoc.CouponRefusal(&c, r.At); err != nil {
		return billing.Redemption{}, err
	}
	var p billing.PromotionCode
	fold := billing.FoldCode(r.Code)
	if r.Code != "" {
		if p, ok = s.codes[fold]; !ok {
			return billing.Redemption{}, fmt.Errorf("%w: promotion code %s", billing.ErrNotFound, r.Code)
		}
		if err := coupondoc.CodeRefusal(&p, r.CouponID, r.At); err != nil {
			return billing.Redemption{}, err
		}
	}
	c.Redeemed++
	s.coupons[c.ID] = c
	if r.Code != "" {
		p.Redeemed++
		s.codes[fold] = p
	}
	s.redemptions[[2]string{r.UserID, r.RequestKey}] = r
	s.byUser[r.UserID] = append(s.byUser[r.UserID], r)
	return r, nil
}

// Redemptions implements [billing.Coupons.Redemptions].
func (s *Coupons) Redemptions(ctx context.Context, userID string) ([]billing.Redemption, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	out := append([]billing.Redemption(nil), s.byUser[userID]...)
	s.mu.Unlock()
	coupondoc.SortRedemptions(out)
	return out, nil
}
