package app

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// Micro is the number of micro-units in one unit of a currency (1 JPY = 1_000_000 micro-JPY).
const Micro = 1_000_000

// Currency codes the gateway bills in.
const (
	JPY = "JPY"
	USD = "USD"
)

// ValidCurrency reports whether c is a supported billing currency.
func ValidCurrency(c string) bool { return c == JPY || c == USD }

// FormatMoney renders micro-units as a decimal string with no trailing zeros ("1500",
// "0.000123", "-2.5").
func FormatMoney(micro int64) string {
	neg := micro < 0
	u := uint64(micro)
	if neg {
		u = uint64(-micro)
	}
	s := strconv.FormatUint(u/Micro, 10)
	if frac := u % Micro; frac != 0 {
		f := strings.TrimRight(fmt.Sprintf("%06d", frac), "0")
		s += "." + f
	}
	if neg {
		s = "-" + s
	}
	return s
}

// ParseMoney parses a non-negative decimal string ("1000", "12.5", "0.000001") into micro-units.
// It returns EINVALID for anything else, including more than six decimals and overflow.
func ParseMoney(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, Errorf(EINVALID, "amount is empty")
	}
	whole, frac, hasFrac := strings.Cut(s, ".")
	if whole == "" || !allDigits(whole) || (hasFrac && (frac == "" || !allDigits(frac))) {
		return 0, Errorf(EINVALID, "amount %q is not a non-negative decimal number", s)
	}
	if len(frac) > 6 {
		return 0, Errorf(EINVALID, "amount %q has more than 6 decimal places", s)
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w > (1<<63-1)/Micro-1 {
		return 0, Errorf(EINVALID, "amount %q is too large", s)
	}
	var f int64
	if frac != "" {
		f, _ = strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
	}
	return w*Micro + f, nil
}

func allDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// Price is a model's price per 1M tokens in micro-USD (USD 0.15 per 1M = 150_000).
type Price struct {
	InputPerM  int64
	OutputPerM int64
	// CachedPerM prices cached input tokens; 0 means cached input is billed as plain input.
	CachedPerM int64
	// CacheWritePerM prices input tokens written to the provider's prompt cache (Anthropic
	// bills them at 1.25x the input price); 0 means they are billed as plain input.
	CacheWritePerM int64
	// CacheWrite1hPerM prices cache writes kept for an hour (Anthropic: 2x the input price);
	// 0 means they are billed as other cache writes.
	CacheWrite1hPerM int64
}

// Cost returns the cost of usage (see Cost).
func (p Price) CostOf(u Usage, rate int64) int64 {
	return p.cost(u.PromptTokens, u.CachedTokens, u.CacheWriteTokens, u.CacheWrite1hTokens, u.CompletionTokens, rate)
}

// WorstCost is the most input tokens of input and output tokens of output can cost: every
// input token at the dearest of the input and cache-write prices (a request may write the
// cache), none of them cached.
func (p Price) WorstCost(input, output, rate int64) int64 {
	w5, w1h := p.writePrices()
	switch {
	case w1h > p.InputPerM && w1h >= w5:
		return p.cost(input, 0, input, input, output, rate)
	case w5 > p.InputPerM:
		return p.cost(input, 0, input, 0, output, rate)
	}
	return p.cost(input, 0, 0, 0, output, rate)
}

// writePrices are the prices of cache writes (5-minute and 1-hour), each falling back as
// documented on Price.
func (p Price) writePrices() (w5, w1h int64) {
	w5 = p.CacheWritePerM
	if w5 == 0 {
		w5 = p.InputPerM
	}
	w1h = p.CacheWrite1hPerM
	if w1h == 0 {
		w1h = w5
	}
	return w5, w1h
}

// Cost returns the cost of the given token counts in micro-units of a currency, converting USD
// at rate (micro-units of the currency per 1 USD: 150 JPY/USD = 150_000_000; USD itself =
// Micro). cached counts the part of input that was a cache hit. The result is rounded UP so the
// ledger never under-counts; the arithmetic is 128-bit so no realistic input overflows.
func (p Price) Cost(input, cached, output, rate int64) int64 {
	return p.cost(input, cached, 0, 0, output, rate)
}

// cost is Cost with writes, the part of input written to the prompt cache, of which writes1h
// were kept for an hour.
func (p Price) cost(input, cached, writes, writes1h, output, rate int64) int64 {
	if input < 0 {
		input = 0
	}
	if cached < 0 || cached > input {
		cached = 0
	}
	if writes < 0 || writes > input-cached {
		writes = 0
	}
	if writes1h < 0 || writes1h > writes {
		writes1h = 0
	}
	if output < 0 {
		output = 0
	}
	if rate < 0 {
		rate = 0
	}
	cachedPrice := p.CachedPerM
	if cachedPrice == 0 {
		cachedPrice = p.InputPerM
	}
	w5, w1h := p.writePrices()
	// micro-USD x 1e6 (prices are per 1M tokens): exact in 128 bits.
	var hi, lo uint64
	for _, t := range [...][2]int64{{input - cached - writes, p.InputPerM}, {cached, cachedPrice}, {writes - writes1h, w5},
		{writes1h, w1h}, {output, p.OutputPerM}} {
		h, l := bits.Mul64(uint64(t[0]), uint64(t[1]))
		var c uint64
		lo, c = bits.Add64(lo, l, 0)
		hi += h + c
	}
	if hi != 0 {
		return 1<<63 - 1
	}
	// usd1e6 * rate / (1e6 * 1e6), rounded up.
	h, l := bits.Mul64(lo, uint64(rate))
	const div = Micro * Micro
	if h >= div {
		return 1<<63 - 1
	}
	q, r := bits.Div64(h, l, div)
	if r != 0 {
		q++
	}
	if q > 1<<63-1 {
		return 1<<63 - 1
	}
	return int64(q)
}

// RateFor returns the conversion rate from USD into currency in micro-units per USD, given the
// period's USD->JPY rate in micro-JPY.
func RateFor(currency string, usdJPY int64) int64 {
	if currency == USD {
		return Micro
	}
	return usdJPY
}
