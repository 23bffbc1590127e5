package billing_test

import (
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"

	"yosan/app"
	"yosan/billing"
)

func TestAllocateYen(t *testing.T) {
	tests := []struct {
		name   string
		micros []int64
		yen    []int64
		total  int64
	}{
		{"Empty", nil, []int64{}, 0},
		{"Exact", []int64{105_000_000, 2_000_000}, []int64{105, 2}, 107},
		{"BelowOneYen", []int64{999_999}, []int64{0}, 0},
		// 0.6 + 0.6 + 0.6 = 1.8 -> 1 yen, to the first of the equal remainders.
		{"TieGoesToEarlier", []int64{600_000, 600_000, 600_000}, []int64{1, 0, 0}, 1},
		// 1.2 + 2.7 + 3.5 = 7.4 -> 7: floors 6, one left for the largest remainder (2.7).
		{"LargestRemainder", []int64{1_200_000, 2_700_000, 3_500_000}, []int64{1, 3, 3}, 7},
		// 0.5 × 4 = 2: two yen left, to the first two lines.
		{"TwoLeftOver", []int64{500_000, 500_000, 500_000, 500_000}, []int64{1, 1, 0, 0}, 2},
		{"ZeroLines", []int64{0, 0, 1_000_000}, []int64{0, 0, 1}, 1},
		{"Huge", []int64{math.MaxInt64 - 1_000_000, 1_000_000}, []int64{(math.MaxInt64 - 1_000_000) / 1_000_000, 1}, math.MaxInt64 / 1_000_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			yen, total, err := billing.AllocateYen(tt.micros)
			if err != nil {
				t.Fatalf("AllocateYen(%v): %v", tt.micros, err)
			}
			if total != tt.total || !slices.Equal(yen, tt.yen) {
				t.Errorf("AllocateYen(%v) = %v, %d; want %v, %d", tt.micros, yen, total, tt.yen, tt.total)
			}
		})
	}
}

func TestAllocateYenErrors(t *testing.T) {
	tests := []struct {
		name   string
		micros []int64
	}{
		{"Negative", []int64{1_000_000, -1}},
		{"Overflow", []int64{math.MaxInt64, 1}},
		{"OverflowMany", []int64{math.MaxInt64 / 2, math.MaxInt64 / 2, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := billing.AllocateYen(tt.micros)
			if code := app.ErrorCode(err); code != app.EINVALID {
				t.Errorf("AllocateYen(%v) error = %v, want %s", tt.micros, err, app.EINVALID)
			}
		})
	}
}

// TestAllocateYenProperties checks the invariants on random ledgers: the lines sum to the
// floored ledger total, and every line is within one yen of its exact micro-yen value.
func TestAllocateYenProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(2026, 11))
	for iter := range 10_000 {
		n := rng.IntN(40) + 1
		micros := make([]int64, n)
		var sum int64
		for i := range micros {
			switch rng.IntN(4) {
			case 0: // sub-yen
				micros[i] = rng.Int64N(app.Micro)
			case 1: // a few yen
				micros[i] = rng.Int64N(100 * app.Micro)
			case 2: // a big month
				micros[i] = rng.Int64N(50_000_000 * app.Micro)
			default: // whole yen
				micros[i] = rng.Int64N(10_000) * app.Micro
			}
			sum += micros[i]
		}
		yen, total, err := billing.AllocateYen(micros)
		if err != nil {
			t.Fatalf("iteration %d: AllocateYen: %v", iter, err)
		}
		if total != sum/app.Micro {
			t.Fatalf("iteration %d: total = %d, want floor(%d / 1e6) = %d", iter, total, sum, sum/app.Micro)
		}
		var got int64
		for i, y := range yen {
			got += y
			// |y - m/1e6| < 1  <=>  |y*1e6 - m| < 1e6
			if d := y*app.Micro - micros[i]; d <= -app.Micro || d >= app.Micro {
				t.Fatalf("iteration %d: line %d: %d yen for %d micro-yen is a yen or more off", iter, i, y, micros[i])
			}
		}
		if got != total {
			t.Fatalf("iteration %d: lines sum to %d, total is %d (%v -> %v)", iter, got, total, micros, yen)
		}
	}
}

func TestAdjustment(t *testing.T) {
	tests := []struct {
		name string
		yen  int64
		bp   int64
		want int64
	}{
		{"Markup5Percent", 10_000, 500, 500},
		{"RoundsDown", 333, 250, 8},            // 8.325
		{"HalfAwayNegative", 105, -1000, -11},  // -10.5
		{"HalfAwayPositive", 105, 1000, 11},    // 10.5
		{"BelowHalfNegative", 104, -1000, -10}, // -10.4
		{"Zero", 10_000, 0, 0},
		{"ZeroUsage", 0, 500, 0},
		{"FullDiscount", 12_345, -10_000, -12_345},
		{"Large", 9_000_000_000_000_000_000, 1_000, 900_000_000_000_000_000}, // no int64 overflow in the product
		{"ClampedHigh", math.MaxInt64, 20_000, math.MaxInt64},
		{"ClampedLow", math.MaxInt64, -20_000, math.MinInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := billing.Adjustment(tt.yen, tt.bp); got != tt.want {
				t.Errorf("Adjustment(%d, %d) = %d, want %d", tt.yen, tt.bp, got, tt.want)
			}
		})
	}
}

func TestMicroToYenFromUSD(t *testing.T) {
	tests := []struct {
		name string
		usd  int64
		rate int64
		want int64
	}{
		{"OneDollar", 1_000_000, 150_000_000, 150_000_000},
		{"OneMicroUSD", 1, 150_000_000, 150},
		{"HalfUp", 1, 1_500_000, 2},         // 1.5
		{"BelowHalf", 1, 1_499_999, 1},      // 1.499999
		{"Fractional", 1, 149_123_456, 149}, // 149.123456
		{"Negative", -1, 1_500_000, -2},     // symmetric: -1.5 -> -2
		{"Zero", 0, 150_000_000, 0},
		{"ExactWide", 9_000_000_000_000, 150_000_000, 1_350_000_000_000_000}, // product is past 2^64
		{"Saturates", math.MaxInt64, 150_000_000, math.MaxInt64},
		{"SaturatesNegative", math.MinInt64, 150_000_000, math.MinInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := billing.MicroToYenFromUSD(tt.usd, tt.rate); got != tt.want {
				t.Errorf("MicroToYenFromUSD(%d, %d) = %d, want %d", tt.usd, tt.rate, got, tt.want)
			}
		})
	}
}

// TestMicroToYenFromUSDMatchesBig compares the 128-bit arithmetic with math/big on random inputs.
func TestMicroToYenFromUSDMatchesBig(t *testing.T) {
	rng := rand.New(rand.NewPCG(150, 1))
	million := big.NewInt(app.Micro)
	for iter := range 10_000 {
		usd := rng.Int64N(1 << 50)
		rate := rng.Int64N(1_000_000_000) // up to 1000 JPY/USD
		if rng.IntN(2) == 0 {
			usd = -usd
		}
		p := new(big.Int).Mul(big.NewInt(usd), big.NewInt(rate))
		abs := new(big.Int).Abs(p)
		q := abs.Quo(abs.Add(abs, big.NewInt(app.Micro/2)), million)
		if p.Sign() < 0 {
			q.Neg(q)
		}
		if got := billing.MicroToYenFromUSD(usd, rate); !q.IsInt64() || got != q.Int64() {
			t.Fatalf("iteration %d: MicroToYenFromUSD(%d, %d) = %d, want %s", iter, usd, rate, got, q)
		}
	}
}
