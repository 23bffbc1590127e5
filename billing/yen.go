package billing

import (
	"math"
	"math/big"
	"math/bits"
	"slices"

	"yosan/app"
)

// AllocateYen turns the ledger sums behind an invoice's usage lines (micro-yen, one per line)
// into whole yen per line whose sum is exactly the ledger total in yen.
//
// total is floor(sum(micros) / 1e6): the invoice never bills a fraction of a yen the ledger did
// not reach. Each line first gets floor(micro / 1e6); the yen left over (fewer than the number of
// lines) go one each to the lines with the largest fractional remainders, the earlier line first
// on a tie. So sum(yen) == total and every line is within one yen of its exact value
// (|yen[i] - micros[i]/1e6| < 1). The result is a new slice, in the order of micros.
//
// It returns EINVALID for a negative input or when the sum of micros overflows int64.
func AllocateYen(micros []int64) (yen []int64, total int64, err error) {
	var sum int64
	for i, m := range micros {
		if m < 0 {
			return nil, 0, app.Errorf(app.EINVALID, "ledger amount of line %d is negative (%d micro-yen)", i+1, m)
		}
		if m > math.MaxInt64-sum {
			return nil, 0, app.Errorf(app.EINVALID, "ledger amounts overflow: their sum does not fit in 64 bits")
		}
		sum += m
	}
	total = sum / app.Micro
	yen = make([]int64, len(micros))
	var floors int64
	for i, m := range micros {
		yen[i] = m / app.Micro
		floors += yen[i]
	}
	// left < len(micros): each line lost less than one yen to its floor.
	left := total - floors
	if left == 0 {
		return yen, total, nil
	}
	order := make([]int, len(micros))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ra, rb := micros[a]%app.Micro, micros[b]%app.Micro
		switch {
		case ra > rb:
			return -1
		case ra < rb:
			return 1
		}
		return 0 // stable: the earlier line stays first
	})
	for _, i := range order[:left] {
		yen[i]++
	}
	return yen, total, nil
}

// Adjustment returns the markup (basisPoints > 0) or discount (basisPoints < 0) on an invoice's
// usage subtotal, in yen: usageYen × basisPoints / 10000, rounded half away from zero (10000 yen
// at 500 bp = 500; 333 yen at 250 bp = 8, from 8.325; 105 yen at -1000 bp = -11, from -10.5).
// The arithmetic is exact; a result beyond int64 (no sane input comes near) is clamped to
// math.MaxInt64 or math.MinInt64.
func Adjustment(usageYen int64, basisPoints int64) int64 {
	p := new(big.Int).Mul(big.NewInt(usageYen), big.NewInt(basisPoints))
	return clampInt64(divHalfAway(p, big.NewInt(10_000)))
}

// MicroToYenFromUSD converts usdMicro micro-USD into micro-JPY at usdJPYMicro micro-JPY per USD
// (150 JPY/USD = 150_000_000): usdMicro × usdJPYMicro / 1e6, with 128-bit arithmetic, rounded
// half up on the magnitude (half away from zero, so a negative amount converts to the negation
// of its magnitude's conversion). A result beyond int64 is clamped to math.MaxInt64 or
// math.MinInt64.
func MicroToYenFromUSD(usdMicro, usdJPYMicro int64) int64 {
	neg := (usdMicro < 0) != (usdJPYMicro < 0)
	a, b := uint64(usdMicro), uint64(usdJPYMicro)
	if usdMicro < 0 {
		a = -a
	}
	if usdJPYMicro < 0 {
		b = -b
	}
	hi, lo := bits.Mul64(a, b)
	var c uint64
	lo, c = bits.Add64(lo, app.Micro/2, 0)
	hi += c // a, b <= 2^63, so hi <= 2^62 and cannot wrap
	if hi >= app.Micro {
		// The quotient would not fit in 64 bits (and Div64 would panic).
		if neg {
			return math.MinInt64
		}
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, app.Micro)
	switch {
	case neg && q >= 1<<63:
		return math.MinInt64
	case neg:
		return -int64(q)
	case q > math.MaxInt64:
		return math.MaxInt64
	default:
		return int64(q)
	}
}

// divHalfAway returns n / d rounded half away from zero, for d > 0.
func divHalfAway(n, d *big.Int) *big.Int {
	abs := new(big.Int).Abs(n)
	// (2|n| + d) / 2d = floor(|n|/d + 1/2).
	abs.Lsh(abs, 1).Add(abs, d)
	q := abs.Quo(abs, new(big.Int).Lsh(d, 1))
	if n.Sign() < 0 {
		q.Neg(q)
	}
	return q
}

// clampInt64 returns x, or the int64 bound nearest to it when x does not fit.
func clampInt64(x *big.Int) int64 {
	switch {
	case x.IsInt64():
		return x.Int64()
	case x.Sign() > 0:
		return math.MaxInt64
	default:
		return math.MinInt64
	}
}
