package layout

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/timefmt"
)

// This file is the codec of a period's proration attributes:
// billing_adjustments, the lines its charge carries (a JSON array in an S
// attribute), and billing_balance, the customer's credit balance it
// carries (an amount).

// maxAdjustments bounds the lines one record carries, as the root's
// Period.checkAdjustments does (every plan change during a period adds
// two).
const maxAdjustments = 64

// checkAdjustments checks the adjustments and balance of s as the root's
// Period.checkAdjustments does, with the times a store can write: at most
// maxAdjustments lines, amounts, prices and the balance not negative, the
// lines' times in the years 0000–9999, and a charge (billing_amount with
// the lines, and the balance) that does not overflow. It returns the
// attribute at fault, its value for the error and the cause (wrapping
// billing.ErrInvalidAmount, or billing.ErrInvalidDate for a time), or a
// nil cause.
func checkAdjustments(s *billing.Period) (field, value string, cause error) {
	if len(s.Adjustments) == 0 && s.Balance == 0 {
		return "", "", nil
	}
	if n := len(s.Adjustments); n > maxAdjustments {
		return AttrAdjustments, strconv.Itoa(n) + " lines", fmt.Errorf("%w: %d adjustments, at most %d", billing.ErrInvalidAmount, n, maxAdjustments)
	}
	if s.Balance < 0 {
		return AttrBalance, s.Balance.String(), fmt.Errorf("%w: the balance is negative", billing.ErrInvalidAmount)
	}
	sum := new(big.Int).SetInt64(int64(s.Amount))
	for i := range s.Adjustments {
		a := &s.Adjustments[i]
		if a.Amount < 0 || a.Price < 0 {
			return AttrAdjustments, a.Amount.String() + " of " + a.Price.String(), fmt.Errorf("%w: adjustment %d: a negative amount", billing.ErrInvalidAmount, i)
		}
		for _, t := range [...]struct {
			name string
			err  error
		}{{"start", timefmt.Check(a.Start)}, {"end", timefmt.Check(a.End)}} {
			if t.err != nil {
				return AttrAdjustments, "", fmt.Errorf("%w: adjustment %d: %s: %w", billing.ErrInvalidDate, i, t.name, t.err)
			}
		}
		if a.Credit {
			sum.Sub(sum, big.NewInt(int64(a.Amount)))
		} else {
			sum.Add(sum, big.NewInt(int64(a.Amount)))
		}
	}
	sum.Abs(sum).Add(sum, big.NewInt(int64(s.Balance)))
	if !sum.IsInt64() {
		field, value = AttrAdjustments, strconv.Itoa(len(s.Adjustments))+" lines"
		if len(s.Adjustments) == 0 {
			field, value = AttrBalance, s.Balance.String()
		}
		return field, value, fmt.Errorf("%w: the adjustments and balance overflow", billing.ErrInvalidAmount)
	}
	return "", "", nil
}

// encodeAdjustments is the text of billing_adjustments for lines, which
// checkAdjustments accepted: the JSON array encoding/json writes for them
// with their times in UTC. The same lines give the same text (stores
// compare encodings).
func encodeAdjustments(lines []billing.Adjustment) (string, error) {
	utc := make([]billing.Adjustment, len(lines))
	for i := range lines {
		utc[i] = lines[i]
		utc[i].Start, utc[i].End = lines[i].Start.UTC(), lines[i].End.UTC()
	}
	b, err := json.Marshal(utc)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// decodeAdjustments reads the text of billing_adjustments: a JSON array of
// lines, their times in UTC; an empty array reads as none (nil). Fields
// the array's objects have and Adjustment lacks are ignored.
func decodeAdjustments(text string) ([]billing.Adjustment, error) {
	var lines []billing.Adjustment
	if err := json.Unmarshal([]byte(text), &lines); err != nil {
		return nil, fmt.Errorf("want a JSON array of adjustments: %w", err)
	}
	if lines == nil {
		return nil, errors.New("want a JSON array of adjustments, not null")
	}
	if len(lines) == 0 {
		return nil, nil
	}
	for i := range lines {
		lines[i].Start, lines[i].End = lines[i].Start.UTC(), lines[i].End.UTC()
	}
	return lines, nil
}
