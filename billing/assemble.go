package billing

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"yosan/app"
)

// Config is the issuer's invoicing settings.
type Config struct {
	Issuer app.Issuer
	// Rounding is how the tax is rounded (once per invoice); "" means floor.
	Rounding app.TaxRounding
	// MarkupBP is a markup (> 0) or discount (< 0) on the usage, in basis points (500 = 5 %).
	MarkupBP int64
	// DueDays is the payment term in days after the issue date.
	DueDays int
	// Now is the clock (the issue date).
	Now func() time.Time
}

// Validate checks the issuer and the settings. It returns an EINVALID error naming the problem.
func (c Config) Validate() error {
	if strings.TrimSpace(c.Issuer.Name) == "" {
		return app.Errorf(app.EINVALID, "the issuer's name is required on a qualified invoice")
	}
	if err := ValidateRegistrationNumber(c.Issuer.RegistrationNumber); err != nil {
		return err
	}
	switch c.Rounding {
	case "", app.RoundFloor, app.RoundCeil, app.RoundHalfUp:
	default:
		return app.Errorf(app.EINVALID, "tax rounding must be floor, ceil or half_up, not %q", c.Rounding)
	}
	if c.MarkupBP <= -10000 || c.MarkupBP > 100000 {
		return app.Errorf(app.EINVALID, "the markup must be above -100 %% (a discount) and at most 1000 %%")
	}
	if c.DueDays < 0 || c.DueDays > 365 {
		return app.Errorf(app.EINVALID, "due days must be from 0 to 365, not %d", c.DueDays)
	}
	return nil
}

// Assemble builds the invoice of an org-period from its ledger groups: one usage line per
// provider, model and unit price (a mid-month price change gives two lines), whose yen amounts
// add up exactly to the ledger total (floored to the yen, see AllocateYen); then the markup or
// discount as its own line; then the consumption tax, computed once on the invoice's total at
// 10 % and rounded as configured. Costs of an org billed in USD are converted at the period's
// fixed rate first. The id, number and kind are the caller's.
func Assemble(cfg Config, f app.InvoiceFacts) (app.Invoice, error) {
	if err := cfg.Validate(); err != nil {
		return app.Invoice{}, err
	}
	if len(f.Groups) == 0 {
		return app.Invoice{}, errors.New("assemble invoice: no usage")
	}
	rounding := cfg.Rounding
	if rounding == "" {
		rounding = app.RoundFloor
	}
	now := time.Now
	if cfg.Now != nil {
		now = cfg.Now
	}
	issued := now().UTC().Truncate(time.Microsecond)
	inv := app.Invoice{
		Recipient: f.Recipient, Period: f.Period, PeriodStart: f.PeriodStart, PeriodEnd: f.PeriodEnd,
		IssuedAt: issued, DueAt: issued.AddDate(0, 0, cfg.DueDays), Issuer: cfg.Issuer, Currency: f.Org.Currency,
		USDJPY: f.USDJPY, FXSource: f.FXSource, TaxRate: app.StandardTaxRate, Rounding: rounding, MarkupBP: cfg.MarkupBP,
	}
	jpy := make([]int64, len(f.Groups))
	for i, g := range f.Groups {
		if g.Micro < 0 {
			return app.Invoice{}, fmt.Errorf("assemble invoice: negative ledger sum for %s", g.Model)
		}
		inv.LedgerMicro += g.Micro
		jpy[i] = g.Micro
		if f.Org.Currency == app.USD {
			jpy[i] = MicroToYenFromUSD(g.Micro, f.USDJPY)
		}
	}
	yen, usage, err := AllocateYen(jpy)
	if err != nil {
		return app.Invoice{}, fmt.Errorf("assemble invoice: %w", err)
	}
	for i, g := range f.Groups {
		inv.Lines = append(inv.Lines, app.InvoiceLine{
			N: i + 1, Kind: app.LineUsage, Provider: g.Provider, Model: g.Model, PriceFrom: g.PriceFrom,
			InputPerM: g.InputPerM, CachedPerM: g.CachedPerM, CacheWritePerM: g.CacheWritePerM, OutputPerM: g.OutputPerM,
			Description: fmt.Sprintf("LLM API 利用料 %s / LLM API usage", g.Model),
			Requests:    g.Requests, InputTokens: g.InputTokens, CachedTokens: g.CachedTokens, CacheWriteTokens: g.CacheWriteTokens,
			OutputTokens: g.OutputTokens,
			Quantity:     g.InputTokens + g.OutputTokens, LedgerMicro: g.Micro, Amount: yen[i], TaxRate: app.StandardTaxRate,
		})
	}
	inv.Subtotal = usage
	if cfg.MarkupBP != 0 {
		adj := Adjustment(usage, cfg.MarkupBP)
		desc := fmt.Sprintf("手数料 %s%% / Service fee %s%%", percent(cfg.MarkupBP), percent(cfg.MarkupBP))
		if cfg.MarkupBP < 0 {
			desc = fmt.Sprintf("値引き %s%% / Discount %s%%", percent(-cfg.MarkupBP), percent(-cfg.MarkupBP))
		}
		inv.Lines = append(inv.Lines, app.InvoiceLine{N: len(inv.Lines) + 1, Kind: app.LineAdjustment,
			Description: desc, Amount: adj, TaxRate: app.StandardTaxRate})
		inv.Subtotal += adj
	}
	if inv.Tax, err = Tax(inv.Subtotal, app.StandardTaxRate, rounding); err != nil {
		return app.Invoice{}, fmt.Errorf("assemble invoice: %w", err)
	}
	inv.Total = inv.Subtotal + inv.Tax
	return inv, nil
}

// percent renders basis points as a percentage without trailing zeros: 500 -> "5", 250 -> "2.5".
func percent(bp int64) string {
	s := strconv.FormatInt(bp/100, 10)
	if frac := bp % 100; frac != 0 {
		s += strings.TrimRight(fmt.Sprintf(".%02d", frac), "0")
	}
	return s
}

// ParsePercent parses a markup or discount such as "5", "2.5" or "-10" into basis points.
// EINVALID for anything else (more than two decimals, or not a number).
func ParsePercent(s string) (int64, error) {
	s = strings.TrimSpace(s)
	neg := strings.HasPrefix(s, "-")
	t := strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	whole, frac, _ := strings.Cut(t, ".")
	if whole == "" || len(frac) > 2 || strings.Trim(whole+frac, "0123456789") != "" || len(whole) > 6 {
		return 0, app.Errorf(app.EINVALID, "%q is not a percentage such as \"5\", \"2.5\" or \"-10\"", s)
	}
	w, _ := strconv.ParseInt(whole, 10, 64)
	f, _ := strconv.ParseInt((frac + "00")[:2], 10, 64)
	bp := w*100 + f
	if neg {
		bp = -bp
	}
	return bp, nil
}
