// Package views holds the server-rendered pages: templ components (*.templ, with their
// generated *_templ.go committed) and the small formatting helpers they share.
package views

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"yosan/app"
	"yosan/billing"
)

// minus is the true minus sign (U+2212) printed before negative amounts: a hyphen-minus is too
// short to read next to a yen sign and can be lost when a printout is scanned.
const minus = "\u2212"

// yen renders whole yen with thousands separators: "¥1,234,567", "−¥1,234", "¥0".
func yen(n int64) string {
	u := uint64(n)
	if n < 0 {
		u = -u // exact for math.MinInt64 too
	}
	s := "¥" + groupThousands(u)
	if n < 0 {
		s = minus + s
	}
	return s
}

// count renders a count (tokens, requests) with thousands separators: "1,234,567".
func count(n int64) string {
	if n < 0 {
		return minus + groupThousands(-uint64(n))
	}
	return groupThousands(uint64(n))
}

// groupThousands renders n with a comma every three digits.
func groupThousands(n uint64) string {
	d := strconv.FormatUint(n, 10)
	var b strings.Builder
	for i, c := range d {
		if i > 0 && (len(d)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// jaDate renders the calendar date of t, in t's own location, the Japanese way: "2026年12月1日".
// The zero time renders as "".
func jaDate(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return fmt.Sprintf("%d年%d月%d日", t.Year(), int(t.Month()), t.Day())
}

// lastDay returns the last day covered by an exclusive end bound: the day before the first
// instant of the next period, in end's location.
func lastDay(end time.Time) time.Time {
	if end.IsZero() {
		return end
	}
	return end.Add(-time.Nanosecond)
}

// period renders a transaction period from its bounds, end exclusive:
// "2026年11月1日〜2026年11月30日".
func period(start, end time.Time) string {
	if start.IsZero() || end.IsZero() {
		return jaDate(start) + jaDate(lastDay(end))
	}
	return jaDate(start) + "〜" + jaDate(lastDay(end))
}

// fxRate renders a rate in micro-JPY per USD with two decimals, rounded half up:
// 150_000_000 -> "150.00", 149_123_456 -> "149.12".
func fxRate(microJPY int64) string {
	if microJPY < 0 {
		return minus + fxRate(-microJPY)
	}
	const perCent = app.Micro / 100
	cents := (uint64(microJPY) + perCent/2) / perCent
	return fmt.Sprintf("%s.%02d", groupThousands(cents/100), cents%100)
}

// usdPrice renders a price in micro-USD with at least two decimals and no trailing zeros past
// them: 2_500_000 -> "$2.50", 75_000 -> "$0.075".
func usdPrice(micro int64) string {
	s := app.FormatMoney(micro)
	whole, frac, _ := strings.Cut(s, ".")
	for len(frac) < 2 {
		frac += "0"
	}
	if strings.HasPrefix(whole, "-") {
		return minus + "$" + whole[1:] + "." + frac
	}
	return "$" + whole + "." + frac
}

// percent renders a tax rate: "10%".
func percent(rate int) string { return strconv.Itoa(rate) + "%" }

// lineRate is the tax rate of a line, the invoice's when the line does not say.
func lineRate(inv app.Invoice, l app.InvoiceLine) int {
	if l.TaxRate != 0 {
		return l.TaxRate
	}
	return inv.TaxRate
}

// showFX reports whether the invoice prints its USD->JPY rate: for an org billed in USD, or
// whenever a rate was fixed for the period.
func showFX(inv app.Invoice) bool { return inv.Currency == app.USD || inv.USDJPY > 0 }

// roundingJA and roundingEN are the invoice's rounding mode line.
func roundingJA(mode app.TaxRounding) string {
	ja, _ := billing.RoundingLabel(mode)
	return "消費税の端数処理: " + ja + " (請求書単位で1回)"
}

func roundingEN(mode app.TaxRounding) string {
	_, en := billing.RoundingLabel(mode)
	return "Tax " + en + " once per invoice"
}

// hasPrices reports whether a usage line carries unit prices to print.
func hasPrices(l app.InvoiceLine) bool {
	return l.InputPerM > 0 || l.CachedPerM > 0 || l.CacheWritePerM > 0 || l.OutputPerM > 0
}

// docTitle is the document's title, Japanese and English.
func docTitle(inv app.Invoice) (ja, en string) {
	if inv.Kind == app.KindCreditNote {
		return "適格返還請求書", "Credit note"
	}
	return "適格請求書", "Invoice"
}

// pageTitle is the <title> of the page: "適格請求書 INV-2026-11-0042 / Invoice".
func pageTitle(inv app.Invoice) string {
	ja, en := docTitle(inv)
	if inv.Number == "" {
		return ja + " / " + en
	}
	return ja + " " + inv.Number + " / " + en + " " + inv.Number
}

// pageFooterStyle returns a <style> element that prints the document's title and number at the
// bottom left of every printed page, so a page of a long invoice that gets separated still says
// what it belongs to. The text goes through cssString, so no invoice number can end the element.
func pageFooterStyle(inv app.Invoice) string {
	ja, _ := docTitle(inv)
	return "<style>@page { @bottom-left { content: " + cssString(ja+" "+inv.Number) +
		"; font-size: 7.5pt; color: #555; } }</style>"
}

// cssString quotes s as a CSS string literal: ASCII letters, digits and "-_./" as they are,
// everything else as a six-digit hex escape, so the result is inert inside a <style> element (no
// quote, backslash, "<" or newline survives). Spaces are escaped too: CSS swallows a space that
// follows an escape.
func cssString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9',
			r == '-', r == '_', r == '.', r == '/':
			b.WriteRune(r)
		default:
			fmt.Fprintf(&b, "\\%06X", r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
