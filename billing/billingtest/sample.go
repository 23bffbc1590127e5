// Package billingtest holds invoices for tests of what renders them (the HTML page, the PDF).
package billingtest

import (
	"time"

	"yosan/app"
)

// Invoice is a realistic issued invoice: three usage lines (the third from a mid-month price
// change), a negative adjustment, billed in USD at 150 JPY, tax rounded down. Its dates are
// in Tokyo (UTC+9).
func Invoice() app.Invoice {
	tokyo := time.FixedZone("Asia/Tokyo", 9*60*60)
	return app.Invoice{
		ID:          "inv_01",
		Number:      "YSN-2026-11-0042",
		Kind:        app.KindInvoice,
		OrgID:       "org_42",
		Recipient:   "株式会社サンプル商事",
		Period:      "2026-11",
		PeriodStart: time.Date(2026, 11, 1, 0, 0, 0, 0, tokyo),
		PeriodEnd:   time.Date(2026, 12, 1, 0, 0, 0, 0, tokyo),
		IssuedAt:    time.Date(2026, 12, 1, 9, 0, 0, 0, tokyo),
		DueAt:       time.Date(2026, 12, 31, 0, 0, 0, 0, tokyo),
		Issuer: app.Issuer{
			Name:               "Yosan株式会社",
			RegistrationNumber: "T7010705000725",
			Address:            "〒100-0005\n東京都千代田区丸の内1-1-1 丸の内ビル12階",
			Phone:              "03-1234-5678",
			Email:              "billing@yosan.example",
			PaymentTerms:       "請求書発行日から30日以内に銀行振込 / Bank transfer within 30 days",
			BankAccount:        "みずほ銀行 丸の内支店 普通 1234567\nヨサン（カ",
		},
		Currency: app.USD,
		USDJPY:   150_000_000,
		FXSource: "MUFG TTM 2026-11-02",
		Lines: []app.InvoiceLine{
			{
				N: 1, Kind: app.LineUsage, Provider: "openai", Model: "gpt-4.1",
				InputPerM: 2_000_000, CachedPerM: 500_000, OutputPerM: 8_000_000,
				Description: "LLM API 利用料 gpt-4.1 / LLM API usage",
				Requests:    18_204, InputTokens: 41_250_000, CachedTokens: 12_000_000, OutputTokens: 6_830_113,
				Quantity: 48_080_113, LedgerMicro: 16_017_635_560_000, Amount: 16_017_635, TaxRate: 10,
			},
			{
				N: 2, Kind: app.LineUsage, Provider: "anthropic", Model: "claude-sonnet-4",
				InputPerM: 3_000_000, OutputPerM: 15_000_000,
				Description: "LLM API 利用料 claude-sonnet-4 / LLM API usage",
				Requests:    920, InputTokens: 3_100_000, OutputTokens: 402_000,
				Quantity: 3_502_000, LedgerMicro: 2_299_500_400_000, Amount: 2_299_500, TaxRate: 10,
			},
			{
				N: 3, Kind: app.LineUsage, Provider: "anthropic", Model: "claude-sonnet-4",
				PriceFrom: time.Date(2026, 11, 15, 0, 0, 0, 0, tokyo),
				InputPerM: 2_500_000, OutputPerM: 12_500_000,
				Description: "LLM API 利用料 claude-sonnet-4 / LLM API usage",
				Requests:    2_004, InputTokens: 7_000_000, OutputTokens: 1_000_001,
				Quantity: 8_000_001, LedgerMicro: 4_500_001_875_000, Amount: 4_500_002, TaxRate: 10,
			},
			{
				N: 4, Kind: app.LineAdjustment,
				Description: "値引き 5% / Discount 5%",
				Amount:      -1_140_857, TaxRate: 10,
			},
		},
		Subtotal: 21_676_280,
		TaxRate:  10,
		Tax:      2_167_628,
		Total:    23_843_908,
		Rounding: app.RoundFloor,
		MarkupBP: -500,
		Status:   app.InvoiceOpen,
	}
}

// CreditNote negates Invoice in full.
func CreditNote() app.Invoice {
	inv := Invoice()
	cn := inv
	cn.ID, cn.Number, cn.Kind, cn.Corrects = "inv_02", "YSN-2026-11-0042-C1", app.KindCreditNote, inv.Number
	cn.IssuedAt = time.Date(2026, 12, 10, 14, 0, 0, 0, inv.IssuedAt.Location())
	cn.DueAt = time.Time{}
	cn.Lines = make([]app.InvoiceLine, len(inv.Lines))
	for i, l := range inv.Lines {
		l.Amount, l.LedgerMicro = -l.Amount, -l.LedgerMicro
		cn.Lines[i] = l
	}
	cn.Subtotal, cn.Tax, cn.Total = -inv.Subtotal, -inv.Tax, -inv.Total
	return cn
}
