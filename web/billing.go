package web

import (
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"yosan/app"
	"yosan/billing"
	"yosan/db"
	"yosan/web/views"
)

func (s *Server) billingRoutes(adm *echo.Group) {
	adm.GET("/orgs/:org/billing", s.getOrgBilling)
	adm.PUT("/orgs/:org/billing", s.putOrgBilling)
	adm.GET("/orgs/:org/periods/:period", s.getPeriod)
	adm.PUT("/orgs/:org/periods/:period", s.putPeriod)
	adm.GET("/orgs/:org/invoices", s.listInvoices)
	adm.GET("/orgs/:org/invoices/:id", s.getInvoice)
	adm.GET("/orgs/:org/invoices/:id/html", s.invoiceHTML)
	adm.GET("/orgs/:org/invoices/:id/pdf", s.invoicePDF)
	adm.POST("/orgs/:org/invoices/:id/credit-note", s.creditInvoice)
	adm.POST("/orgs/:org/invoices/:id/stripe-sync", s.syncInvoice)
	adm.POST("/billing/close", s.closePeriod)
	adm.GET("/billing/reconciliation", s.reconciliation)
}

type orgBillingJSON struct {
	Name             string `json:"name"`
	Email            string `json:"email"`
	TaxID            string `json:"tax_id"`
	StripeCustomerID string `json:"stripe_customer_id,omitempty"`
}

func (s *Server) getOrgBilling(c echo.Context) error {
	b, err := s.cfg.DB.OrgBilling(c.Request().Context(), c.Param("org"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, orgBillingJSON(b))
}

func (s *Server) putOrgBilling(c echo.Context) error {
	var in struct {
		Name  string `json:"name"`
		Email string `json:"email"`
		TaxID string `json:"tax_id"`
	}
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	b := db.OrgBilling{Name: strings.TrimSpace(in.Name), Email: strings.TrimSpace(in.Email), TaxID: strings.TrimSpace(in.TaxID)}
	if len(b.Name) > 200 {
		return app.Errorf(app.EINVALID, "'name' is at most 200 characters")
	}
	if b.Email != "" {
		if _, err := checkEmails([]string{b.Email}); err != nil {
			return app.Errorf(app.EINVALID, "'email' %q is not an email address such as billing@example.com", in.Email)
		}
	}
	if b.TaxID != "" {
		if err := billing.ValidateRegistrationNumber(b.TaxID); err != nil {
			return app.Errorf(app.EINVALID, "'tax_id': %s", app.ErrorMessage(err))
		}
	}
	out, err := s.cfg.DB.SetOrgBilling(c.Request().Context(), c.Param("org"), b)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, orgBillingJSON(out))
}

type periodJSON struct {
	Period   string     `json:"period"`
	USDJPY   string     `json:"usd_jpy"`
	Source   string     `json:"source"`
	Open     bool       `json:"open"`
	OpenedAt *time.Time `json:"opened_at"`
	ClosedAt *time.Time `json:"closed_at"`
}

func toPeriodJSON(p db.PeriodFX) periodJSON {
	return periodJSON{Period: p.Period, USDJPY: app.FormatMoney(p.USDJPY), Source: p.Source, Open: p.Open,
		OpenedAt: p.OpenedAt, ClosedAt: p.ClosedAt}
}

func (s *Server) getPeriod(c echo.Context) error {
	p, err := s.cfg.DB.OrgPeriodFX(c.Request().Context(), c.Param("org"), c.Param("period"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toPeriodJSON(p))
}

func (s *Server) putPeriod(c echo.Context) error {
	var in struct {
		USDJPY money  `json:"usd_jpy"`
		Source string `json:"source"`
	}
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	if !in.USDJPY.set || in.USDJPY.null || in.USDJPY.value <= 0 {
		return app.Errorf(app.EINVALID, "'usd_jpy' is required: the period's USD->JPY rate as a decimal string such as \"151.20\"")
	}
	src := strings.TrimSpace(in.Source)
	if src == "" || len(src) > 200 {
		return app.Errorf(app.EINVALID, "'source' is required (at most 200 characters): it is printed on the invoice, e.g. \"MUFG TTM 2026-11-30\"")
	}
	p, err := s.cfg.DB.SetOrgPeriodRate(c.Request().Context(), c.Param("org"), c.Param("period"), in.USDJPY.value, src)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toPeriodJSON(p))
}

type invoiceLineJSON struct {
	N            int        `json:"n"`
	Kind         string     `json:"kind"`
	Provider     string     `json:"provider,omitempty"`
	Model        string     `json:"model,omitempty"`
	PriceFrom    *time.Time `json:"price_from,omitempty"`
	Description  string     `json:"description"`
	Requests     int64      `json:"requests"`
	InputTokens  int64      `json:"input_tokens"`
	CachedTokens int64      `json:"cached_tokens"`
	// CacheWriteTokens is the part of input_tokens written to the provider's prompt cache.
	CacheWriteTokens int64  `json:"cache_write_tokens"`
	OutputTokens     int64  `json:"output_tokens"`
	Quantity         int64  `json:"quantity"`
	LedgerTotal      string `json:"ledger_total"`
	Amount           int64  `json:"amount"`
	TaxRate          int    `json:"tax_rate"`
}

type invoiceJSON struct {
	ID           string            `json:"id"`
	Number       string            `json:"number"`
	Kind         string            `json:"kind"`
	Corrects     string            `json:"corrects,omitempty"`
	SupersededBy string            `json:"superseded_by,omitempty"`
	OrgID        string            `json:"org_id"`
	Recipient    string            `json:"recipient"`
	Period       string            `json:"period"`
	IssuedAt     time.Time         `json:"issued_at"`
	DueAt        time.Time         `json:"due_at"`
	Issuer       string            `json:"issuer"`
	Registration string            `json:"registration_number"`
	Currency     string            `json:"currency"`
	USDJPY       string            `json:"usd_jpy"`
	FXSource     string            `json:"fx_source"`
	Subtotal     int64             `json:"subtotal"`
	TaxRate      int               `json:"tax_rate"`
	Tax          int64             `json:"tax"`
	Total        int64             `json:"total"`
	Rounding     string            `json:"tax_rounding"`
	MarkupBP     int64             `json:"markup_bp"`
	LedgerTotal  string            `json:"ledger_total"`
	Status       string            `json:"status"`
	Stripe       stripeStateJSON   `json:"stripe"`
	Lines        []invoiceLineJSON `json:"lines,omitempty"`
}

type stripeStateJSON struct {
	Synced     bool   `json:"synced"`
	InvoiceID  string `json:"invoice_id,omitempty"`
	CustomerID string `json:"customer_id,omitempty"`
	Error      string `json:"error,omitempty"`
}

func toInvoiceJSON(inv app.Invoice, supersededBy string) invoiceJSON {
	out := invoiceJSON{ID: inv.ID, Number: inv.Number, Kind: string(inv.Kind), Corrects: inv.Corrects, SupersededBy: supersededBy,
		OrgID: inv.OrgID, Recipient: inv.Recipient, Period: inv.Period, IssuedAt: inv.IssuedAt, DueAt: inv.DueAt,
		Issuer: inv.Issuer.Name, Registration: inv.Issuer.RegistrationNumber, Currency: inv.Currency,
		USDJPY: app.FormatMoney(inv.USDJPY), FXSource: inv.FXSource, Subtotal: inv.Subtotal, TaxRate: inv.TaxRate, Tax: inv.Tax,
		Total: inv.Total, Rounding: string(inv.Rounding), MarkupBP: inv.MarkupBP, LedgerTotal: app.FormatMoney(inv.LedgerMicro),
		Status: string(inv.Status),
		Stripe: stripeStateJSON{Synced: inv.StripeSynced, InvoiceID: inv.StripeInvoiceID, CustomerID: inv.StripeCustomerID, Error: inv.StripeError}}
	for _, l := range inv.Lines {
		j := invoiceLineJSON{N: l.N, Kind: string(l.Kind), Provider: l.Provider, Model: l.Model, Description: l.Description,
			Requests: l.Requests, InputTokens: l.InputTokens, CachedTokens: l.CachedTokens, CacheWriteTokens: l.CacheWriteTokens,
			OutputTokens: l.OutputTokens, Quantity: l.Quantity, LedgerTotal: app.FormatMoney(l.LedgerMicro), Amount: l.Amount, TaxRate: l.TaxRate}
		if !l.PriceFrom.IsZero() {
			f := l.PriceFrom
			j.PriceFrom = &f
		}
		out.Lines = append(out.Lines, j)
	}
	return out
}

func (s *Server) listInvoices(c echo.Context) error {
	period := c.QueryParam("period")
	if period != "" && !db.ValidPeriod(period) {
		return app.Errorf(app.EINVALID, "'period' must be a month such as 2026-11")
	}
	rows, err := s.cfg.DB.Invoices(c.Request().Context(), c.Param("org"), period)
	if err != nil {
		return err
	}
	out := make([]invoiceJSON, 0, len(rows))
	for _, r := range rows {
		out = append(out, toInvoiceJSON(r.Invoice, r.SupersededBy))
	}
	return c.JSON(http.StatusOK, map[string]any{"object": "list", "data": out})
}

func (s *Server) getInvoice(c echo.Context) error {
	inv, err := s.cfg.DB.Invoice(c.Request().Context(), c.Param("org"), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toInvoiceJSON(inv, ""))
}

// invoiceHTML serves the qualified invoice as a printable A4 page.
func (s *Server) invoiceHTML(c echo.Context) error {
	inv, err := s.cfg.DB.Invoice(c.Request().Context(), c.Param("org"), c.Param("id"))
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().WriteHeader(http.StatusOK)
	return views.InvoicePage(inv).Render(c.Request().Context(), c.Response())
}

// invoicePDF answers the qualified invoice as a PDF.
func (s *Server) invoicePDF(c echo.Context) error {
	if _, err := s.cfg.DB.Org(c.Request().Context(), c.Param("org")); err != nil {
		return err
	}
	return s.servePDF(c, c.Param("org"), c.Param("id"))
}

func (s *Server) creditInvoice(c echo.Context) error {
	cn, err := s.cfg.Billing.Credit(c.Request().Context(), c.Param("org"), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, toInvoiceJSON(cn, ""))
}

// syncInvoice mirrors one document in Stripe now (it is otherwise retried in the background).
func (s *Server) syncInvoice(c echo.Context) error {
	ctx := c.Request().Context()
	if s.cfg.Billing.Stripe == nil {
		return app.Errorf(app.EINVALID, "Stripe is not configured (billing.stripe in the config file)")
	}
	inv, err := s.cfg.DB.Invoice(ctx, c.Param("org"), c.Param("id"))
	if err != nil {
		return err
	}
	if _, _, err := s.cfg.Billing.SyncStripe(ctx, inv.ID); err != nil {
		return err
	}
	if inv, err = s.cfg.DB.Invoice(ctx, c.Param("org"), c.Param("id")); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toInvoiceJSON(inv, ""))
}

func (s *Server) closePeriod(c echo.Context) error {
	var in struct {
		Period string `json:"period"`
		OrgID  string `json:"org_id"`
	}
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	ctx := c.Request().Context()
	if in.OrgID != "" {
		if _, err := s.cfg.DB.Org(ctx, in.OrgID); err != nil {
			return err
		}
	}
	res, err := s.cfg.Billing.ClosePeriod(ctx, in.Period, in.OrgID)
	if err != nil {
		return err
	}
	type closeJSON struct {
		OrgID   string       `json:"org_id"`
		Status  string       `json:"status"`
		Invoice *invoiceJSON `json:"invoice,omitempty"`
		Error   string       `json:"error,omitempty"`
	}
	out := make([]closeJSON, 0, len(res))
	for _, r := range res {
		j := closeJSON{OrgID: r.OrgID}
		switch {
		case r.Err != nil:
			j.Status, j.Error = "not_closed", app.ErrorMessage(r.Err)
		case r.Result.NoUsage:
			j.Status = "no_usage"
		case r.Result.Created:
			j.Status = "issued"
		default:
			j.Status = "already_issued"
		}
		if r.Result.Invoice != nil {
			inv := toInvoiceJSON(*r.Result.Invoice, "")
			inv.Lines = nil
			j.Invoice = &inv
		}
		out = append(out, j)
	}
	return c.JSON(http.StatusOK, map[string]any{"object": "list", "period": in.Period, "data": out})
}

type reconLineJSON struct {
	Provider  string     `json:"provider"`
	Model     string     `json:"model"`
	PriceFrom *time.Time `json:"price_from,omitempty"`
	Ledger    string     `json:"ledger_total"`
	Invoiced  string     `json:"invoiced_total"`
}

type reconJSON struct {
	OrgID         string          `json:"org_id"`
	OrgName       string          `json:"org_name"`
	Period        string          `json:"period"`
	Currency      string          `json:"currency"`
	Status        string          `json:"status"`
	Pending       int64           `json:"pending_reservations"`
	LedgerTotal   string          `json:"ledger_total"`
	LedgerYen     int64           `json:"ledger_yen"`
	InvoiceID     string          `json:"invoice_id,omitempty"`
	InvoiceNumber string          `json:"invoice_number,omitempty"`
	InvoiceUsage  int64           `json:"invoice_usage"`
	Subtotal      int64           `json:"invoice_subtotal"`
	Difference    int64           `json:"difference_yen"`
	Lines         []reconLineJSON `json:"differences"`
}

func (s *Server) reconciliation(c echo.Context) error {
	period := c.QueryParam("period")
	orgID := c.QueryParam("org_id")
	ctx := c.Request().Context()
	if orgID != "" {
		if _, err := s.cfg.DB.Org(ctx, orgID); err != nil {
			return err
		}
	}
	facts, err := s.cfg.DB.Reconciliation(ctx, period, orgID)
	if err != nil {
		return err
	}
	out := make([]reconJSON, 0, len(facts))
	ok := true
	for _, f := range facts {
		r := billing.Reconcile(f.Org, period, f.USDJPY, f.Groups, f.Pending, f.Invoice)
		ok = ok && r.Status == billing.ReconOK
		j := reconJSON{OrgID: r.OrgID, OrgName: r.OrgName, Period: r.Period, Currency: r.Currency, Status: r.Status,
			Pending: r.Pending, LedgerTotal: app.FormatMoney(r.LedgerMicro), LedgerYen: r.LedgerYen, InvoiceID: r.InvoiceID,
			InvoiceNumber: r.InvoiceNumber, InvoiceUsage: r.InvoiceUsage, Subtotal: r.Subtotal, Difference: r.Difference,
			Lines: []reconLineJSON{}}
		for _, l := range r.Lines {
			lj := reconLineJSON{Provider: l.Provider, Model: l.Model, Ledger: app.FormatMoney(l.LedgerMicro), Invoiced: app.FormatMoney(l.InvoicedMicro)}
			if l.PriceFrom.Unix() > 0 {
				f := l.PriceFrom
				lj.PriceFrom = &f
			}
			j.Lines = append(j.Lines, lj)
		}
		out = append(out, j)
	}
	return c.JSON(http.StatusOK, map[string]any{"object": "list", "period": period, "all_ok": ok, "data": out})
}

// stripeWebhook receives Stripe's events: the signature is verified before anything is read.
func (s *Server) stripeWebhook(c echo.Context) error {
	body, err := io.ReadAll(io.LimitReader(c.Request().Body, 1<<20))
	if err != nil {
		return app.WrapError(app.EINVALID, err, "could not read the request body")
	}
	number, err := s.cfg.Billing.StripeWebhook(c.Request().Context(), body, c.Request().Header.Get("Stripe-Signature"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"received": true, "invoice": number})
}
