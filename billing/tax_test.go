package billing_test

import (
	"math"
	"testing"

	"yosan/app"
	"yosan/billing"
)

func TestTax(t *testing.T) {
	tests := []struct {
		name   string
		amount int64
		rate   int
		mode   app.TaxRounding
		want   int64
	}{
		{"ThreeLinesOf105Floor", 315, 10, app.RoundFloor, 31},
		{"ThreeLinesOf105DefaultIsFloor", 315, 10, "", 31},
		{"ThreeLinesOf105Ceil", 315, 10, app.RoundCeil, 32},
		{"ThreeLinesOf105HalfUp", 315, 10, app.RoundHalfUp, 32}, // 31.5
		{"HalfUpBelowHalf", 314, 10, app.RoundHalfUp, 31},       // 31.4
		{"CeilExact", 1000, 10, app.RoundCeil, 100},
		{"Zero", 0, 10, app.RoundCeil, 0},
		{"OneYenFloor", 1, 10, app.RoundFloor, 0},
		{"OneYenCeil", 1, 10, app.RoundCeil, 1},
		{"OneYenHalfUp", 1, 10, app.RoundHalfUp, 0},
		{"FiveYenHalfUp", 5, 10, app.RoundHalfUp, 1}, // 0.5
		{"Reduced8", 1250, 8, app.RoundFloor, 100},
		{"Reduced8Floor", 1249, 8, app.RoundFloor, 99},    // 99.92
		{"Reduced8HalfUp", 1249, 8, app.RoundHalfUp, 100}, // 99.92
		{"NegativeFloor", -315, 10, app.RoundFloor, -31},
		{"NegativeCeil", -315, 10, app.RoundCeil, -32},
		{"NegativeHalfUp", -315, 10, app.RoundHalfUp, -32},
		{"NegativeOneYenCeil", -1, 10, app.RoundCeil, -1},
		{"Large", 123_456_789_012, 10, app.RoundFloor, 12_345_678_901},
		{"HugeFloor", 8_000_000_000_000_000_005, 10, app.RoundFloor, 800_000_000_000_000_000},
		{"HugeCeil", 8_000_000_000_000_000_005, 10, app.RoundCeil, 800_000_000_000_000_001},
		{"HugeNegative", -8_000_000_000_000_000_005, 10, app.RoundHalfUp, -800_000_000_000_000_001},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := billing.Tax(tt.amount, tt.rate, tt.mode)
			if err != nil {
				t.Fatalf("Tax(%d, %d, %q): %v", tt.amount, tt.rate, tt.mode, err)
			}
			if got != tt.want {
				t.Errorf("Tax(%d, %d, %q) = %d, want %d", tt.amount, tt.rate, tt.mode, got, tt.want)
			}
		})
	}
}

// TestTaxOncePerInvoice shows why the tax is computed once on the total: per line it would be
// one yen short on the reference example.
func TestTaxOncePerInvoice(t *testing.T) {
	perLine, err := billing.Tax(105, 10, app.RoundFloor)
	if err != nil {
		t.Fatal(err)
	}
	once, err := billing.Tax(3*105, 10, app.RoundFloor)
	if err != nil {
		t.Fatal(err)
	}
	if perLine*3 == once {
		t.Fatalf("per-line rounding (%d) equals once-per-invoice rounding (%d): the example no longer shows the difference", perLine*3, once)
	}
	if perLine*3 != 30 || once != 31 {
		t.Errorf("per line 3 × %d = %d, once %d; want 30 and 31", perLine, perLine*3, once)
	}
}

func TestTaxSymmetric(t *testing.T) {
	for _, mode := range []app.TaxRounding{app.RoundFloor, app.RoundCeil, app.RoundHalfUp} {
		for _, rate := range []int{8, 10} {
			for x := int64(0); x <= 1000; x++ {
				pos, err1 := billing.Tax(x, rate, mode)
				neg, err2 := billing.Tax(-x, rate, mode)
				if err1 != nil || err2 != nil {
					t.Fatalf("Tax(±%d, %d, %s): %v, %v", x, rate, mode, err1, err2)
				}
				if neg != -pos {
					t.Fatalf("Tax(-%d, %d, %s) = %d, want %d", x, rate, mode, neg, -pos)
				}
			}
		}
	}
}

func TestTaxErrors(t *testing.T) {
	tests := []struct {
		name   string
		amount int64
		rate   int
		mode   app.TaxRounding
	}{
		{"UnknownMode", 100, 10, "bankers"},
		{"ModeCase", 100, 10, "FLOOR"},
		{"Rate5", 100, 5, app.RoundFloor},
		{"Rate0", 100, 0, app.RoundFloor},
		{"RateNegative", 100, -10, app.RoundFloor},
		{"OverflowMax", math.MaxInt64, 10, app.RoundFloor},
		{"OverflowMin", math.MinInt64, 10, app.RoundFloor},
		{"OverflowByCeil", math.MaxInt64 - 838_488_366_986_797_800, 10, app.RoundCeil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := billing.Tax(tt.amount, tt.rate, tt.mode)
			if err == nil {
				t.Fatalf("Tax(%d, %d, %q) = %d, want an error", tt.amount, tt.rate, tt.mode, got)
			}
			if code := app.ErrorCode(err); code != app.EINVALID {
				t.Errorf("error code = %q, want %q (%v)", code, app.EINVALID, err)
			}
		})
	}
}

func TestTaxLargestAmount(t *testing.T) {
	// The largest amount whose total still fits: a + floor(a/10) <= MaxInt64.
	const a = 8_384_883_669_867_978_007
	tax, err := billing.Tax(a, 10, app.RoundFloor)
	if err != nil {
		t.Fatalf("Tax(%d): %v", int64(a), err)
	}
	if tax != a/10 || a+tax != math.MaxInt64 {
		t.Errorf("Tax(%d) = %d, total %d; want %d and MaxInt64", int64(a), tax, a+tax, int64(a/10))
	}
	if _, err := billing.Tax(a+1, 10, app.RoundCeil); err == nil {
		t.Errorf("Tax(%d, ceil): want an overflow error", int64(a+1))
	}
}

func TestRoundingLabel(t *testing.T) {
	tests := []struct {
		name   string
		mode   app.TaxRounding
		ja, en string
	}{
		{"Default", "", "切り捨て", "rounded down"},
		{"Floor", app.RoundFloor, "切り捨て", "rounded down"},
		{"Ceil", app.RoundCeil, "切り上げ", "rounded up"},
		{"HalfUp", app.RoundHalfUp, "四捨五入", "rounded half up"},
		{"Unknown", "odd", "odd", "odd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ja, en := billing.RoundingLabel(tt.mode)
			if ja != tt.ja || en != tt.en {
				t.Errorf("RoundingLabel(%q) = %q, %q; want %q, %q", tt.mode, ja, en, tt.ja, tt.en)
			}
		})
	}
}
