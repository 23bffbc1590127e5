package billing

import (
	"math"
	"math/bits"

	"yosan/app"
)

// Tax returns the consumption tax on amount (yen, tax excluded) at ratePercent, rounded to the
// yen with mode ("" means app.RoundFloor, 切り捨て).
//
// Japan's qualified invoice rules allow one rounding per invoice and per rate, so amount must be
// the invoice's total at that rate, never a single line: three lines of 105 yen at 10 % give
// Tax(315) = 31 yen, where rounding each line would have given 3 × 10 = 30.
//
// A negative amount (a credit note) is rounded symmetrically: Tax(-x) == -Tax(x), so a credit
// note cancels its invoice's tax to the yen. The arithmetic is 128-bit and exact.
//
// It returns EINVALID for an unknown mode, a rate other than 8 or 10, or an amount so large that
// amount plus its tax would overflow int64.
func Tax(amount int64, ratePercent int, mode app.TaxRounding) (int64, error) {
	if ratePercent != 8 && ratePercent != 10 {
		return 0, app.Errorf(app.EINVALID, "tax rate %d%% is not a Japanese consumption tax rate (8 or 10)", ratePercent)
	}
	switch mode {
	case "", app.RoundFloor, app.RoundCeil, app.RoundHalfUp:
	default:
		return 0, app.Errorf(app.EINVALID, "unknown tax rounding mode %q (want floor, ceil or half_up)", mode)
	}
	// The magnitude as uint64 is exact even for math.MinInt64.
	u := uint64(amount)
	if amount < 0 {
		u = -u
	}
	hi, lo := bits.Mul64(u, uint64(ratePercent))
	q, r := bits.Div64(hi, lo, 100) // hi < 100: u*10 < 2^67
	switch mode {
	case app.RoundCeil:
		if r != 0 {
			q++
		}
	case app.RoundHalfUp:
		if r >= 50 {
			q++
		}
	}
	// q <= ceil(u/10) < 2^61, so the conversion is exact.
	tax := int64(q)
	if amount < 0 {
		tax = -tax
	}
	if (amount > 0 && tax > math.MaxInt64-amount) || (amount < 0 && tax < math.MinInt64-amount) {
		return 0, app.Errorf(app.EINVALID, "amount %d is too large: the amount plus its tax overflows", amount)
	}
	return tax, nil
}

// RoundingLabel returns how mode is printed on an invoice, in Japanese and in English:
// "切り捨て"/"rounded down" for floor (and ""), "切り上げ"/"rounded up" for ceil,
// "四捨五入"/"rounded half up" for half_up. An unknown mode is returned as is in both.
func RoundingLabel(mode app.TaxRounding) (ja, en string) {
	switch mode {
	case "", app.RoundFloor:
		return "切り捨て", "rounded down"
	case app.RoundCeil:
		return "切り上げ", "rounded up"
	case app.RoundHalfUp:
		return "四捨五入", "rounded half up"
	default:
		return string(mode), string(mode)
	}
}
