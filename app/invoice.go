package app

import "time"

// TaxRounding is how the consumption tax of an invoice is rounded to the yen. Japan's qualified
// invoice rules let the issuer choose, provided the tax is rounded once per invoice per rate.
type TaxRounding string

// Tax rounding modes.
const (
	RoundFloor  TaxRounding = "floor" // 切り捨て, the default
	RoundCeil   TaxRounding = "ceil"  // 切り上げ
	RoundHalfUp TaxRounding = "half_up"
)

// StandardTaxRate is Japan's standard consumption tax rate in percent; an LLM API service is
// taxed at it.
const StandardTaxRate = 10

// Issuer is the business that issues the invoices (the gateway's operator), as printed on them.
type Issuer struct {
	Name string
	// RegistrationNumber is the qualified invoice issuer number: "T" and 13 digits.
	RegistrationNumber string
	Address            string
	Phone              string
	Email              string
	// PaymentTerms is printed on the invoice, e.g. "Bank transfer within 30 days".
	PaymentTerms string
	// BankAccount is printed under the payment terms.
	BankAccount string
}

// InvoiceKind says whether a document bills or corrects.
type InvoiceKind string

// Invoice kinds: a credit note negates an invoice it references; the corrected amounts then go
// on a new invoice that references the credit note's original too.
const (
	KindInvoice    InvoiceKind = "invoice"
	KindCreditNote InvoiceKind = "credit_note"
)

// InvoiceStatus is the payment state of an issued document, updated from Stripe's webhooks.
type InvoiceStatus string

// Invoice states.
const (
	InvoiceOpen          InvoiceStatus = "open"
	InvoicePaid          InvoiceStatus = "paid"
	InvoiceVoid          InvoiceStatus = "void"
	InvoiceUncollectible InvoiceStatus = "uncollectible"
)

// LineKind separates metered usage from adjustments (markup or discount).
type LineKind string

// Line kinds.
const (
	LineUsage      LineKind = "usage"
	LineAdjustment LineKind = "adjustment"
)

// InvoiceLine is one line of an invoice: one provider, model and unit price of the period (a
// mid-month price change makes a second line), or an adjustment.
type InvoiceLine struct {
	N        int
	Kind     LineKind
	Provider string
	Model    string
	// PriceFrom is when the line's unit prices took effect (zero: since always).
	PriceFrom time.Time
	// InputPerM, CachedPerM, CacheWritePerM and OutputPerM are the line's USD prices per 1M
	// tokens, in micro-USD (for the description).
	InputPerM, CachedPerM, CacheWritePerM, OutputPerM int64
	Description                                       string
	Requests                                          int64
	// InputTokens counts every input token; CachedTokens and CacheWriteTokens are the parts of
	// it read from and written to the provider's prompt cache.
	InputTokens      int64
	CachedTokens     int64
	CacheWriteTokens int64
	OutputTokens     int64
	// Quantity is the tokens billed (input + output).
	Quantity int64
	// LedgerMicro is the exact sum of the ledger rows behind a usage line, in micro-units of
	// the org currency.
	LedgerMicro int64
	// Amount is the line's amount in yen, tax excluded.
	Amount  int64
	TaxRate int
}

// Invoice is one issued document: immutable once issued, except its payment status and its
// Stripe sync state.
type Invoice struct {
	ID     string
	Number string
	Kind   InvoiceKind
	// Corrects is the id of the invoice a credit note negates (or a reissued invoice replaces).
	Corrects  string
	OrgID     string
	Recipient string
	// Period is the billed month ("2026-11") in the org's time zone; PeriodStart and PeriodEnd
	// are its bounds.
	Period      string
	PeriodStart time.Time
	PeriodEnd   time.Time
	IssuedAt    time.Time
	DueAt       time.Time
	Issuer      Issuer
	// Currency is the ledger's currency (JPY, or USD converted at USDJPY); amounts are in yen.
	Currency string
	USDJPY   int64
	FXSource string
	Lines    []InvoiceLine
	// Subtotal is the sum of the lines (tax excluded), all at TaxRate; Tax is computed once on
	// it with Rounding; Total = Subtotal + Tax. All in yen.
	Subtotal int64
	TaxRate  int
	Tax      int64
	Total    int64
	Rounding TaxRounding
	// MarkupBP is the markup (positive) or discount (negative) in basis points of the usage.
	MarkupBP int64
	// LedgerMicro is the ledger total of the period in micro-units of Currency.
	LedgerMicro int64
	Status      InvoiceStatus
	// Stripe sync state: the ids created so far, and the last error while it is not synced.
	StripeCustomerID string
	StripeInvoiceID  string
	StripeSynced     bool
	StripeError      string
	CreatedAt        time.Time
}

// LedgerGroup is an org-period's settled ledger rows (committed and expired) summed per
// provider, model and the unit prices in force when each request was made.
type LedgerGroup struct {
	Provider string
	Model    string
	// PriceFrom is when the prices took effect (zero: since always, or unknown prices).
	PriceFrom                                         time.Time
	InputPerM, CachedPerM, CacheWritePerM, OutputPerM int64
	Requests                                          int64
	InputTokens                                       int64
	CachedTokens                                      int64
	CacheWriteTokens                                  int64
	OutputTokens                                      int64
	// Micro is the sum of the rows' actual costs in micro-units of the org currency.
	Micro int64
}

// InvoiceFacts is what a month close knows about an org-period, read in its transaction: the
// assembler turns it into an invoice.
type InvoiceFacts struct {
	Org Org
	// Recipient is the name the invoice is addressed to.
	Recipient   string
	Period      string
	PeriodStart time.Time
	PeriodEnd   time.Time
	USDJPY      int64
	FXSource    string
	Groups      []LedgerGroup
	// Corrects is the id of the superseded invoice this one replaces ("" for a first issue).
	Corrects string
}
