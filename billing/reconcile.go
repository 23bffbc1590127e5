package billing

import (
	"time"

	"yosan/app"
)

// Reconciliation statuses.
const (
	ReconOK          = "ok"           // the invoice's usage lines equal the ledger, to the yen and per line
	ReconMismatch    = "mismatch"     // they differ: see Difference and Lines
	ReconNotInvoiced = "not_invoiced" // settled usage but no standing invoice (not closed yet)
	ReconPending     = "pending"      // rows still pending: the period cannot be closed yet
)

// Reconciliation compares one org-period's ledger, as it is now, with its standing invoice.
type Reconciliation struct {
	OrgID    string
	OrgName  string
	Period   string
	Currency string
	Status   string
	// Pending counts the period's ledger rows not settled yet.
	Pending int64
	// LedgerMicro is the settled ledger total (micro-units of Currency) and LedgerYen what the
	// invoice's usage lines must add up to (floored to the yen, converted for USD orgs).
	LedgerMicro int64
	LedgerYen   int64
	// The standing invoice ("" when none), the sum of its usage lines and its subtotal.
	InvoiceID     string
	InvoiceNumber string
	InvoiceUsage  int64
	Subtotal      int64
	// Difference is InvoiceUsage - LedgerYen.
	Difference int64
	// Lines lists the provider/model/price groups whose ledger sum differs from the line
	// invoiced for them (empty when all agree).
	Lines []ReconLine
}

// ReconLine is one group where the ledger and the invoice disagree.
type ReconLine struct {
	Provider      string
	Model         string
	PriceFrom     time.Time
	LedgerMicro   int64
	InvoicedMicro int64
}

type groupKey struct {
	provider, model string
	from            int64
}

// Reconcile compares an org-period's settled ledger groups (and its pending count) with its
// standing invoice (nil when none): the usage lines must add up to the ledger total to the yen,
// and each line must carry exactly its group's ledger sum.
func Reconcile(org app.Org, period string, usdJPY int64, groups []app.LedgerGroup, pending int64, inv *app.Invoice) Reconciliation {
	r := Reconciliation{OrgID: org.ID, OrgName: org.Name, Period: period, Currency: org.Currency, Pending: pending}
	jpy := make([]int64, len(groups))
	ledger := map[groupKey]int64{}
	for i, g := range groups {
		r.LedgerMicro += g.Micro
		jpy[i] = g.Micro
		if org.Currency == app.USD {
			jpy[i] = MicroToYenFromUSD(g.Micro, usdJPY)
		}
		ledger[groupKey{g.Provider, g.Model, g.PriceFrom.UnixMicro()}] += g.Micro
	}
	if _, total, err := AllocateYen(jpy); err == nil {
		r.LedgerYen = total
	}
	switch {
	case pending > 0:
		r.Status = ReconPending
	case inv == nil && len(groups) > 0:
		r.Status = ReconNotInvoiced
	default:
		r.Status = ReconOK
	}
	if inv == nil {
		return r
	}
	r.InvoiceID, r.InvoiceNumber, r.Subtotal = inv.ID, inv.Number, inv.Subtotal
	invoiced := map[groupKey]int64{}
	for _, l := range inv.Lines {
		if l.Kind != app.LineUsage {
			continue
		}
		r.InvoiceUsage += l.Amount
		invoiced[groupKey{l.Provider, l.Model, l.PriceFrom.UnixMicro()}] += l.LedgerMicro
	}
	r.Difference = r.InvoiceUsage - r.LedgerYen
	for k, v := range ledger {
		if invoiced[k] != v {
			r.Lines = append(r.Lines, ReconLine{Provider: k.provider, Model: k.model, PriceFrom: time.UnixMicro(k.from).UTC(), LedgerMicro: v, InvoicedMicro: invoiced[k]})
		}
	}
	for k, v := range invoiced {
		if _, ok := ledger[k]; !ok {
			r.Lines = append(r.Lines, ReconLine{Provider: k.provider, Model: k.model, PriceFrom: time.UnixMicro(k.from).UTC(), InvoicedMicro: v})
		}
	}
	if r.Status == ReconOK && (r.Difference != 0 || len(r.Lines) > 0) {
		r.Status = ReconMismatch
	}
	return r
}
