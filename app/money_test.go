package app_test

import (
	"math"
	"strings"
	"testing"

	"yosan/app"
)

func TestFormatMoney(t *testing.T) {
	tests := []struct {
		name  string
		micro int64
		want  string
	}{
		{"Zero", 0, "0"},
		{"OneMicro", 1, "0.000001"},
		{"Whole", 1500 * app.Micro, "1500"},
		{"TrailingZerosTrimmed", 2_500_000, "2.5"},
		{"SmallFraction", 123, "0.000123"},
		{"Negative", -2_500_000, "-2.5"},
		{"NegativeMicro", -1, "-0.000001"},
		{"MaxInt64", math.MaxInt64, "9223372036854.775807"},
		{"MinInt64", math.MinInt64, "-9223372036854.775808"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := app.FormatMoney(tt.micro); got != tt.want {
				t.Errorf("FormatMoney(%d) = %q, want %q", tt.micro, got, tt.want)
			}
		})
	}
}

func TestParseMoney(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want int64
	}{
		{"Zero", "0", 0},
		{"Whole", "1000", 1000 * app.Micro},
		{"Fraction", "12.5", 12_500_000},
		{"OneMicro", "0.000001", 1},
		{"SixDecimals", "1.123456", 1_123_456},
		{"TrailingZeros", "1.100000", 1_100_000},
		{"LeadingZeros", "007", 7 * app.Micro},
		{"Spaces", "  150 ", 150 * app.Micro},
		{"Largest", "9223372036853.999999", 9223372036853_999999},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := app.ParseMoney(tt.in)
			if err != nil {
				t.Fatalf("ParseMoney(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("ParseMoney(%q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseMoneyErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		msg  string
	}{
		{"ErrEmpty", "", "amount is empty"},
		{"ErrBlank", "   ", "amount is empty"},
		{"ErrNegative", "-1", "is not a non-negative decimal number"},
		{"ErrPlus", "+1", "is not a non-negative decimal number"},
		{"ErrTrailingDot", "1.", "is not a non-negative decimal number"},
		{"ErrLeadingDot", ".5", "is not a non-negative decimal number"},
		{"ErrTwoDots", "1.2.3", "is not a non-negative decimal number"},
		{"ErrSevenDecimals", "1.1234567", "has more than 6 decimal places"},
		{"ErrLetters", "abc", "is not a non-negative decimal number"},
		{"ErrExponent", "1e3", "is not a non-negative decimal number"},
		{"ErrThousandsSeparator", "1,000", "is not a non-negative decimal number"},
		{"ErrHex", "0x10", "is not a non-negative decimal number"},
		{"ErrNonASCIIDigit", "١٢", "is not a non-negative decimal number"},
		{"ErrInnerSpace", "1 000", "is not a non-negative decimal number"},
		{"ErrOverflowInt64", "99999999999999999999", "is too large"},
		{"ErrOverflowMicro", "9223372036855", "is too large"},
		{"ErrOverflowWithFraction", "10000000000000.5", "is too large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := app.ParseMoney(tt.in)
			if err == nil {
				t.Fatalf("ParseMoney(%q) = %d, want an error", tt.in, got)
			}
			if code := app.ErrorCode(err); code != app.EINVALID {
				t.Errorf("code = %q, want %q", code, app.EINVALID)
			}
			if msg := app.ErrorMessage(err); !strings.Contains(msg, tt.msg) {
				t.Errorf("message %q does not contain %q", msg, tt.msg)
			}
		})
	}
}

func TestMoneyRoundTrip(t *testing.T) {
	for _, v := range []int64{0, 1, 10, 999_999, app.Micro, 1_000_001, 150 * app.Micro, 151_250_000,
		123_456_789_012, 9223372036853_999999} {
		s := app.FormatMoney(v)
		got, err := app.ParseMoney(s)
		if err != nil {
			t.Errorf("ParseMoney(FormatMoney(%d) = %q): %v", v, s, err)
			continue
		}
		if got != v {
			t.Errorf("ParseMoney(FormatMoney(%d) = %q) = %d", v, s, got)
		}
	}
	for _, s := range []string{"0", "0.000001", "1500", "2.5", "151.25", "0.15"} {
		v, err := app.ParseMoney(s)
		if err != nil {
			t.Fatalf("ParseMoney(%q): %v", s, err)
		}
		if got := app.FormatMoney(v); got != s {
			t.Errorf("FormatMoney(ParseMoney(%q)) = %q", s, got)
		}
	}
}

func TestPriceCost(t *testing.T) {
	const (
		jpy150    = 150 * app.Micro
		jpy151_25 = 151_250_000
		usd       = app.Micro
	)
	mini := app.Price{InputPerM: 150_000, OutputPerM: 600_000}                               // USD 0.15 / 0.60 per 1M
	cached := app.Price{InputPerM: 2_500_000, CachedPerM: 1_250_000, OutputPerM: 10_000_000} // USD 2.50 / 1.25 / 10
	uncached := app.Price{InputPerM: 2_500_000, OutputPerM: 10_000_000}
	max := app.Price{InputPerM: 15_000_000, OutputPerM: 75_000_000}
	tests := []struct {
		name                  string
		price                 app.Price
		input, cached, output int64
		rate                  int64
		want                  int64
	}{
		{"Zero", mini, 0, 0, 0, jpy150, 0},
		// 1000 x 0.15/1M + 500 x 0.60/1M = USD 0.00045 = JPY 0.0675
		{"JPY150", mini, 1000, 0, 500, jpy150, 67_500},
		// USD 0.00045 x 151.25 = JPY 0.0680625
		{"JPY151_25", mini, 1000, 0, 500, jpy151_25, 68_063},
		{"USD", mini, 1000, 0, 500, usd, 450},
		// one input token costs USD 0.00000015 = 0.15 micro-USD: rounded up, never down
		{"RoundsUpUSD", mini, 1, 0, 0, usd, 1},
		// 0.15 micro-USD x 150 = 22.5 micro-JPY
		{"RoundsUpJPY", mini, 1, 0, 0, jpy150, 23},
		{"ExactNoRoundUp", mini, 20, 0, 0, usd, 3},
		// 600 x 2.50 + 400 x 1.25 + 100 x 10 = USD 0.003
		{"Cached", cached, 1000, 400, 100, usd, 3000},
		{"CachedJPY", cached, 1000, 400, 100, jpy150, 450_000},
		{"CachedPriceZeroBillsAsInput", uncached, 1000, 400, 100, usd, 3500},
		{"CachedOverInputIgnored", cached, 1000, 1001, 100, usd, 3500},
		{"NegativeCachedIgnored", cached, 1000, -5, 100, usd, 3500},
		{"NegativeInputIsZero", mini, -1000, 0, 0, usd, 0},
		// 1e9 output tokens at USD 75/1M = USD 75,000 = JPY 11,343,750 at 151.25: the
		// intermediate product is above 2^64.
		{"HugeNoOverflow", max, 0, 0, 1_000_000_000, jpy151_25, 11_343_750 * app.Micro},
		// 1e11 output tokens = USD 7.5M = JPY 1,134,375,000.
		{"HugerNoOverflow", max, 0, 0, 100_000_000_000, jpy151_25, 1_134_375_000 * app.Micro},
		{"HugeInputAndOutput", max, 1_000_000_000, 0, 1_000_000_000, jpy150, 13_500_000 * app.Micro},
		{"SaturatesOutput", max, 0, 0, math.MaxInt64, jpy150, math.MaxInt64},
		{"SaturatesInput", max, math.MaxInt64, 0, 0, usd, math.MaxInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.price.Cost(tt.input, tt.cached, tt.output, tt.rate)
			if got != tt.want {
				t.Errorf("Cost(%d, %d, %d, %d) = %d (%s), want %d (%s)", tt.input, tt.cached, tt.output, tt.rate,
					got, app.FormatMoney(got), tt.want, app.FormatMoney(tt.want))
			}
		})
	}
}

// A negative output count (a broken upstream usage object) must cost nothing, as a negative
// input count does, not the saturated maximum.
func TestPriceCostNegativeOutput(t *testing.T) {
	p := app.Price{InputPerM: 150_000, OutputPerM: 600_000}
	if got := p.Cost(0, 0, -1, 150*app.Micro); got != 0 {
		t.Errorf("Cost(0, 0, -1) = %d (%s), want 0", got, app.FormatMoney(got))
	}
}

func TestRateFor(t *testing.T) {
	tests := []struct {
		name     string
		currency string
		want     int64
	}{
		{"USD", app.USD, app.Micro},
		{"JPY", app.JPY, 151_250_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := app.RateFor(tt.currency, 151_250_000); got != tt.want {
				t.Errorf("RateFor(%q) = %d, want %d", tt.currency, got, tt.want)
			}
		})
	}
}

func TestValidCurrency(t *testing.T) {
	for c, want := range map[string]bool{"JPY": true, "USD": true, "jpy": false, "EUR": false, "": false} {
		if got := app.ValidCurrency(c); got != want {
			t.Errorf("ValidCurrency(%q) = %v, want %v", c, got, want)
		}
	}
}

func TestCostWithCacheWrites(t *testing.T) {
	// Claude-like prices in micro-USD per 1M tokens: input 3, output 15, cache read 0.30, cache
	// write 3.75 (1.25x).
	p := app.Price{InputPerM: 3_000_000, OutputPerM: 15_000_000, CachedPerM: 300_000, CacheWritePerM: 3_750_000}
	u := app.Usage{PromptTokens: 2104, CachedTokens: 2000, CacheWriteTokens: 100, CompletionTokens: 30}
	// 4 x 3 + 2000 x 0.30 + 100 x 3.75 + 30 x 15 = 1,437 micro-USD.
	if got := p.CostOf(u, app.Micro); got != 1437 {
		t.Errorf("CostOf = %d micro-USD, want 1437", got)
	}
	// Without a cache-write price, writes are plain input: 104 x 3 + 600 + 450 = 1,362.
	if got := (app.Price{InputPerM: 3_000_000, OutputPerM: 15_000_000, CachedPerM: 300_000}).CostOf(u, app.Micro); got != 1362 {
		t.Errorf("CostOf without a cache-write price = %d, want 1362", got)
	}
	// Writes beyond the uncached input are ignored rather than trusted.
	if got := p.CostOf(app.Usage{PromptTokens: 10, CachedTokens: 5, CacheWriteTokens: 6}, app.Micro); got != p.Cost(10, 5, 0, app.Micro) {
		t.Errorf("impossible writes priced %d", got)
	}
	// The worst case prices every input token at the dearer cache-write price.
	if got := p.WorstCost(1000, 100, app.Micro); got != 5250 {
		t.Errorf("WorstCost = %d, want 5250 (1000 x 3.75 + 100 x 15)", got)
	}
	cheapWrites := app.Price{InputPerM: 3_000_000, OutputPerM: 15_000_000, CacheWritePerM: 1_000_000}
	if got, want := cheapWrites.WorstCost(1000, 100, app.Micro), cheapWrites.Cost(1000, 0, 100, app.Micro); got != want {
		t.Errorf("WorstCost with cheaper writes = %d, want the plain input price %d", got, want)
	}
	if got := p.CostOf(u, 150*app.Micro); got != 1437*150 {
		t.Errorf("in yen: %d, want %d", got, 1437*150)
	}
}

func TestCostWithHourLongCacheWrites(t *testing.T) {
	// Input 3, 5-minute writes 3.75 (1.25x), 1-hour writes 6 (2x), output 15 (USD per 1M).
	p := app.Price{InputPerM: 3_000_000, OutputPerM: 15_000_000, CacheWritePerM: 3_750_000, CacheWrite1hPerM: 6_000_000}
	u := app.Usage{PromptTokens: 1000, CacheWriteTokens: 600, CacheWrite1hTokens: 200, CompletionTokens: 10}
	// 400 x 3 + 400 x 3.75 + 200 x 6 + 10 x 15 = 1,200 + 1,500 + 1,200 + 150 = 4,050 micro-USD.
	if got := p.CostOf(u, app.Micro); got != 4050 {
		t.Errorf("CostOf = %d, want 4050", got)
	}
	// Without a 1-hour price, hour-long writes cost what other writes cost.
	p5 := p
	p5.CacheWrite1hPerM = 0
	if got := p5.CostOf(u, app.Micro); got != 400*3+600*3.75+150 {
		t.Errorf("CostOf without a 1-hour price = %d", got)
	}
	// The worst case takes the dearest input price: 1,000 x 6 + 10 x 15.
	if got := p.WorstCost(1000, 10, app.Micro); got != 6150 {
		t.Errorf("WorstCost = %d, want 6150", got)
	}
	// A 1-hour price alone (no 5-minute price) is still the worst case.
	only1h := app.Price{InputPerM: 3_000_000, OutputPerM: 15_000_000, CacheWrite1hPerM: 6_000_000}
	if got := only1h.WorstCost(1000, 10, app.Micro); got != 6150 {
		t.Errorf("WorstCost with only a 1-hour price = %d, want 6150", got)
	}
	// More hour-long writes than writes is impossible: they are ignored.
	if got := p.CostOf(app.Usage{PromptTokens: 10, CacheWriteTokens: 2, CacheWrite1hTokens: 5}, app.Micro); got != p.CostOf(app.Usage{PromptTokens: 10, CacheWriteTokens: 2}, app.Micro) {
		t.Errorf("impossible 1-hour writes priced %d", got)
	}
}
