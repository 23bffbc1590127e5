package web

import (
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"yosan/app"
	"yosan/billing"
	"yosan/db"
	"yosan/web/views"
)

func (s *Server) invoicePageRoutes(o *echo.Group) {
	o.GET("/invoices", s.invoicesPage)
	o.GET("/invoices/:id", s.invoicePrint)
	o.GET("/invoices/:id/pdf", s.invoicePDFConsole)
	o.GET("/invoices/:id/credit", s.invoiceCreditConfirm)
	o.POST("/invoices/:id/credit", s.invoiceCredit)
	o.POST("/invoices/close", s.invoicesClose)
	o.POST("/invoices/rate", s.invoicesRate)
}

func (s *Server) providerRoutes(o *echo.Group) {
	o.GET("/providers", s.providersPage)
	o.POST("/providers/cooldowns/clear", s.providersClear)
}

// providersClear ends a provider cooldown now, so the gateway calls the provider again: the
// console twin of DELETE /admin/v1/cooldowns, for operators only (the provider accounts serve
// every org).
func (s *Server) providersClear(c echo.Context) error {
	org, err := s.consoleOrg(c)
	if err != nil {
		return err
	}
	if err := cc(c).p.Authorize(app.ActManageProviders, app.Target{}); err != nil {
		return err
	}
	provider, model := c.FormValue("provider"), c.FormValue("model")
	if provider == "" {
		return app.Errorf(app.EINVALID, "name the provider whose cooldown to clear")
	}
	what, back := provider, "/console/orgs/"+org.ID+"/providers"
	if model != "" {
		what += " / " + model
	}
	err = app.Errorf(app.ENOTFOUND, "no cooldown")
	if s.cfg.Cooldowns != nil {
		err = s.cfg.Cooldowns.Clear(c.Request().Context(), provider, model)
	}
	if app.ErrorCode(err) == app.ENOTFOUND {
		// Ended meanwhile, or cleared by a second click: nothing to do, and no error page.
		return flash(c, back, "No cooldown of "+what+" is in force (it may have ended already).")
	}
	if err != nil {
		return err
	}
	s.audit(c, cc(c).p, "", "provider.cooldown_clear", "provider", provider+"/"+model, nil)
	return flash(c, back, "The cooldown of "+what+" is cleared: the gateway calls it again.")
}

func invoicesBase(orgID string) string { return "/console/orgs/" + orgID + "/invoices" }

// invoicesData reads the invoices page of org: the documents, the ended periods not closed,
// next month's rate and, when period is set, its reconciliation.
func (s *Server) invoicesData(c echo.Context, org app.Org, period string) (views.InvoicesData, error) {
	ctx := c.Request().Context()
	loc, err := time.LoadLocation(org.TimeZone)
	if err != nil {
		return views.InvoicesData{}, fmt.Errorf("org time zone: %w", err)
	}
	d := views.InvoicesData{Shell: s.shell(c, &org, "invoices", "Invoices / 請求書"), OrgID: org.ID, Loc: loc,
		CanManage: cc(c).p.Can(app.ActManageBilling, app.Target{OrgID: org.ID}), Period: period,
		StripeOn: s.cfg.Billing.Stripe != nil, HasPDF: s.pdfFont != "", RateErrors: map[string]string{}}
	rows, err := s.cfg.DB.Invoices(ctx, org.ID, "")
	if err != nil {
		return d, err
	}
	invoiced := map[string]bool{}
	for _, r := range rows {
		d.Invoices = append(d.Invoices, views.InvoiceRow{Invoice: r.Invoice, SupersededBy: r.SupersededBy})
		if r.Kind == app.KindInvoice && r.SupersededBy == "" {
			invoiced[r.Period] = true
		}
	}
	periods, err := s.cfg.DB.OrgPeriods(ctx, org.ID)
	if err != nil {
		return d, err
	}
	current := app.Period(s.cfg.DB.Now(), loc)
	for _, p := range periods {
		if p < current && !invoiced[p] {
			d.Closable = append(d.Closable, p)
		}
	}
	// The month after this one starts where this one ends (AddDate from the 31st would skip
	// a short month).
	_, end, err := db.PeriodBounds(current, loc)
	if err != nil {
		return d, err
	}
	next := app.Period(end, loc)
	fx, err := s.cfg.DB.OrgPeriodFX(ctx, org.ID, next)
	if err != nil {
		return d, err
	}
	d.NextPeriod, d.NextRate, d.NextSource, d.NextOpen = next, app.FormatMoney(fx.USDJPY), fx.Source, fx.Open
	if period != "" {
		if !db.ValidPeriod(period) {
			d.Shell.Flash, d.Shell.FlashError = "A period is a month such as 2026-11.", true
			return d, nil
		}
		facts, err := s.cfg.DB.Reconciliation(ctx, period, org.ID)
		if err != nil {
			return d, err
		}
		rc := &views.Recon{Period: period, Status: "no usage"}
		for _, f := range facts {
			r := billing.Reconcile(f.Org, period, f.USDJPY, f.Groups, f.Pending, f.Invoice)
			rc = &views.Recon{Period: period, Status: r.Status, InvoiceNumber: r.InvoiceNumber, LedgerYen: r.LedgerYen,
				InvoiceUsage: r.InvoiceUsage, Diff: r.Difference, Pending: r.Pending}
			for _, l := range r.Lines {
				rc.Lines = append(rc.Lines, fmt.Sprintf("%s / %s: ledger %s, invoiced %s", l.Provider, l.Model,
					app.FormatMoney(l.LedgerMicro), app.FormatMoney(l.InvoicedMicro)))
			}
		}
		d.Recon = rc
	}
	return d, nil
}

func (s *Server) invoicesPage(c echo.Context) error {
	org, err := s.consoleOrg(c)
	if err != nil {
		return err
	}
	d, err := s.invoicesData(c, org, strings.TrimSpace(c.QueryParam("period")))
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.InvoicesPage(d))
}

// invoicePrint shows the qualified invoice itself, ready to print.
func (s *Server) invoicePrint(c echo.Context) error {
	org, err := s.consoleOrg(c)
	if err != nil {
		return err
	}
	inv, err := s.cfg.DB.Invoice(c.Request().Context(), org.ID, c.Param("id"))
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.InvoicePage(inv))
}

func (s *Server) invoicePDFConsole(c echo.Context) error {
	org, err := s.consoleOrg(c)
	if err != nil {
		return err
	}
	return s.servePDF(c, org.ID, c.Param("id"))
}

// servePDF answers an invoice of org as a PDF download.
func (s *Server) servePDF(c echo.Context, orgID, id string) error {
	if s.pdfFont == "" {
		return app.Errorf(app.ENOTFOUND, "PDFs need a Japanese font on the gateway's machine (Debian: apt-get install fonts-ipaexfont-gothic, or set YOSAN_PDF_FONT); the printable page is at …/invoices/%s", id)
	}
	inv, err := s.cfg.DB.Invoice(c.Request().Context(), orgID, id)
	if err != nil {
		return err
	}
	pdf, err := billing.InvoicePDF(inv, s.pdfFont)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Content-Disposition", `attachment; filename="`+inv.Number+`.pdf"`)
	return c.Blob(http.StatusOK, "application/pdf", pdf)
}

// billingOrg loads the org and checks the principal may manage its invoices.
func (s *Server) billingOrg(c echo.Context) (app.Org, error) {
	org, err := s.consoleOrg(c)
	if err != nil {
		return app.Org{}, err
	}
	return org, cc(c).p.Authorize(app.ActManageBilling, app.Target{OrgID: org.ID})
}

func (s *Server) invoiceCreditConfirm(c echo.Context) error {
	org, err := s.billingOrg(c)
	if err != nil {
		return err
	}
	inv, err := s.cfg.DB.Invoice(c.Request().Context(), org.ID, c.Param("id"))
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.CreditConfirm(s.shell(c, &org, "invoices", "Correct an invoice / 請求書の訂正"), org.ID, inv))
}

func (s *Server) invoiceCredit(c echo.Context) error {
	org, err := s.billingOrg(c)
	if err != nil {
		return err
	}
	cn, err := s.cfg.Billing.Credit(c.Request().Context(), org.ID, c.Param("id"))
	if err != nil {
		return err
	}
	s.audit(c, cc(c).p, org.ID, "invoice.credit", "invoice", cn.ID, map[string]any{"number": cn.Number, "corrects": cn.Corrects})
	return flash(c, invoicesBase(org.ID), fmt.Sprintf("Credit note %s issued for %s. Close %s again to issue the corrected invoice.", cn.Number, cn.Corrects, cn.Period))
}

func (s *Server) invoicesClose(c echo.Context) error {
	org, err := s.billingOrg(c)
	if err != nil {
		return err
	}
	period := c.FormValue("period")
	res, err := s.cfg.Billing.ClosePeriod(c.Request().Context(), period, org.ID)
	if err != nil {
		return err
	}
	for _, r := range res {
		switch {
		case r.Err != nil:
			return flash(c, invoicesBase(org.ID), "!"+period+" was not closed: "+app.ErrorMessage(r.Err))
		case r.Result.NoUsage:
			return flash(c, invoicesBase(org.ID), period+" had no usage: no invoice.")
		case r.Result.Created:
			s.audit(c, cc(c).p, org.ID, "invoice.issue", "invoice", r.Result.Invoice.ID, map[string]any{"number": r.Result.Invoice.Number, "period": period})
			return flash(c, invoicesBase(org.ID), fmt.Sprintf("Invoice %s issued: ¥%d including tax.", r.Result.Invoice.Number, r.Result.Invoice.Total))
		default:
			return flash(c, invoicesBase(org.ID), period+" was invoiced already ("+r.Result.Invoice.Number+").")
		}
	}
	return flash(c, invoicesBase(org.ID), period+" had no usage: no invoice.")
}

func (s *Server) invoicesRate(c echo.Context) error {
	org, err := s.billingOrg(c)
	if err != nil {
		return err
	}
	period := c.FormValue("period")
	rate, present, perr := parseYen(c.FormValue("usd_jpy"))
	source := strings.TrimSpace(c.FormValue("source"))
	d, err := s.invoicesData(c, org, "")
	if err != nil {
		return err
	}
	if perr != nil || !present || rate <= 0 {
		d.RateErrors["usd_jpy"] = "Enter the rate as JPY per USD, such as 151.20."
	}
	if source == "" || len(source) > 200 {
		d.RateErrors["source"] = "Say where the rate comes from, such as “MUFG TTM 2026-11-30”: it is printed on the invoice."
	}
	if len(d.RateErrors) > 0 {
		return render(c, http.StatusBadRequest, views.InvoicesPage(d))
	}
	if _, err := s.cfg.DB.SetOrgPeriodRate(c.Request().Context(), org.ID, period, rate, source); err != nil {
		return err
	}
	s.audit(c, cc(c).p, org.ID, "invoice.fx_rate", "period", period, map[string]any{"usd_jpy": app.FormatMoney(rate), "source": source})
	return flash(c, invoicesBase(org.ID), fmt.Sprintf("The rate of %s is 1 USD = ¥%s (%s).", period, app.FormatMoney(rate), source))
}

// providersPage shows the upstream providers with the cooldowns in force and the open quota
// windows (gateway-wide state): two statements after the org.
func (s *Server) providersPage(c echo.Context) error {
	ctx := c.Request().Context()
	org, err := s.consoleOrg(c)
	if err != nil {
		return err
	}
	loc := orgLocation(org)
	d := views.ProvidersData{Shell: s.shell(c, &org, "providers", "Providers / プロバイダー"), TimeZone: org.TimeZone,
		OrgID: org.ID, CanClear: cc(c).p.Can(app.ActManageProviders, app.Target{})}
	byProvider := map[string]*views.ProviderRow{}
	if s.cfg.Gateway != nil && s.cfg.Gateway.Catalog != nil {
		for _, m := range s.cfg.Gateway.Catalog.Models() {
			row := byProvider[m.Provider]
			if row == nil {
				row = &views.ProviderRow{Name: m.Provider, Local: m.Local}
				byProvider[m.Provider] = row
			}
			row.Models = append(row.Models, m.Name)
		}
	}
	if s.cfg.Cooldowns != nil {
		cds, err := s.cfg.Cooldowns.List(ctx, s.cfg.Gateway.Now())
		if err != nil {
			return err
		}
		for _, cd := range cds {
			d.Cooldowns = append(d.Cooldowns, views.CooldownRow{Provider: cd.Provider, Model: cd.Model, Class: string(cd.Class),
				Code: cd.Code, ResetAt: cd.ResetAt.In(loc), LastSeen: cd.LastSeen.In(loc), Count: cd.Count})
			if row := byProvider[cd.Provider]; row != nil {
				row.Cooling++
			}
		}
	}
	if s.cfg.Gateway != nil && s.cfg.Gateway.Catalog != nil {
		quotas, err := s.quotaStatus(ctx)
		if err != nil {
			return err
		}
		for _, q := range quotas {
			d.Quotas = append(d.Quotas, views.QuotaRow{Provider: q.Provider, Model: q.Model, Kind: q.Kind, Limit: q.Limit,
				Effective: q.Effective, Used: q.Used, Held: q.Reserved, ResetsAt: q.ResetsAt.In(loc)})
		}
	}
	for _, row := range byProvider {
		slices.Sort(row.Models)
		d.Providers = append(d.Providers, *row)
	}
	sort.Slice(d.Providers, func(i, j int) bool { return d.Providers[i].Name < d.Providers[j].Name })
	return render(c, http.StatusOK, views.ProvidersPage(d))
}
