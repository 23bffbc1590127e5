package web

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"yosan/app"
	"yosan/db"
	"yosan/web/views"
)

// The reservations explorer: the org's ledger rows, filtered, 50 a page, newest first.

// ledgerPageSize is the number of rows a page of the explorer shows.
const ledgerPageSize = 50

func (s *Server) reservationRoutes(o *echo.Group) {
	o.GET("/reservations", s.reservationsPage)
}

// reservationsPage reads the org (consoleOrg), the filters' choices and one page of rows: three
// statements whatever the page shows.
func (s *Server) reservationsPage(c echo.Context) error {
	ctx := c.Request().Context()
	org, err := s.consoleOrg(c)
	if err != nil {
		return err
	}
	loc, now := orgLocation(org), s.cfg.DB.Now()
	q := c.QueryParams()
	f := views.LedgerFilterForm{Status: strings.TrimSpace(q.Get("status")), KeyID: strings.TrimSpace(q.Get("key")),
		Model: strings.TrimSpace(q.Get("model")), From: strings.TrimSpace(q.Get("from")), To: strings.TrimSpace(q.Get("to")),
		Stuck: q.Get("stuck") != "", Errors: map[string]string{}}
	if f.Status == "any" {
		f.Status = ""
	}
	choices, err := s.cfg.DB.LedgerFilterChoices(ctx, org.ID)
	if err != nil {
		return err
	}
	d := views.LedgerData{Shell: s.shell(c, &org, "reservations", "Reservations / 台帳"), OrgID: org.ID,
		TimeZone: org.TimeZone, Filter: f,
		Filtered: f.Status != "" || f.KeyID != "" || f.Model != "" || f.From != "" || f.To != "" || f.Stuck}
	keyOK, modelOK := f.KeyID == "", f.Model == ""
	for _, k := range choices.Keys {
		d.Keys = append(d.Keys, views.Choice{Value: k.ID, Label: k.Name})
		keyOK = keyOK || k.ID == f.KeyID
	}
	for _, m := range choices.Models {
		d.Models = append(d.Models, views.Choice{Value: m, Label: m})
		modelOK = modelOK || m == f.Model
	}

	filter := db.LedgerFilter{OrgID: org.ID, Status: app.ReservationStatus(f.Status), KeyID: f.KeyID, Model: f.Model,
		Limit: ledgerPageSize + 1}
	switch filter.Status {
	case "", app.StatusPending, app.StatusCommitted, app.StatusReleased, app.StatusExpired:
	default:
		f.Errors["status"] = "Choose pending, committed, released, expired or any."
	}
	if !keyOK {
		f.Errors["key"] = "No such key in this organization; choose one from the list."
	}
	if !modelOK {
		f.Errors["model"] = "No such model; choose one from the list."
	}
	if f.From != "" {
		if day, err := time.ParseInLocation("2006-01-02", f.From, loc); err != nil {
			f.Errors["from"] = "Enter a date such as 2026-04-01."
		} else {
			filter.From = day
		}
	}
	if f.To != "" {
		if day, err := time.ParseInLocation("2006-01-02", f.To, loc); err != nil {
			f.Errors["to"] = "Enter a date such as 2026-04-30."
		} else {
			filter.To = day.AddDate(0, 0, 1) // the whole day is included
		}
	}
	if !filter.From.IsZero() && !filter.To.IsZero() && !filter.From.Before(filter.To) {
		f.Errors["to"] = "The end date must be on or after the start date."
	}
	if f.Stuck {
		filter.StuckAt = now
	}
	if b := q.Get("before"); b != "" {
		at, err := time.Parse(time.RFC3339Nano, b)
		if err != nil {
			return app.Errorf(app.EINVALID, "the page link is damaged; open the first page again")
		}
		filter.BeforeAt, filter.BeforeID = at, q.Get("before_id")
		d.NewestHref = "/console/orgs/" + org.ID + "/reservations?" + ledgerQuery(f).Encode()
	}
	d.Filter = f
	if len(f.Errors) > 0 {
		d.NewestHref = ""
		return render(c, http.StatusBadRequest, views.LedgerPage(d))
	}
	rows, err := s.cfg.DB.LedgerPage(ctx, filter)
	if err != nil {
		return err
	}
	if len(rows) > ledgerPageSize {
		rows = rows[:ledgerPageSize]
		last := rows[len(rows)-1]
		v := ledgerQuery(f)
		v.Set("before", last.CreatedAt.UTC().Format(time.RFC3339Nano))
		v.Set("before_id", last.RequestID)
		d.OlderHref = "/console/orgs/" + org.ID + "/reservations?" + v.Encode()
	}
	d.Rows = make([]views.LedgerRow, 0, len(rows))
	for _, r := range rows {
		d.Rows = append(d.Rows, views.LedgerRow{At: r.CreatedAt.In(loc), RequestID: r.RequestID, KeyName: r.KeyName,
			Model: r.Model, Provider: r.Provider, Status: string(r.Status), Input: r.InputTokens, Cached: r.CachedTokens,
			Output: r.OutputTokens, Currency: r.Currency, Reserved: r.Amount, Actual: r.Actual, Overrun: r.Overrun,
			Nodes: r.Nodes, Source: r.UsageSource, Deadline: r.Deadline.In(loc), ErrorClass: r.ErrorClass, ErrorCode: r.ErrorCode,
			Stuck: r.Status == app.StatusPending && r.Deadline.Before(now)})
		if d.Rows[len(d.Rows)-1].Stuck {
			d.Stuck++
		}
	}
	return render(c, http.StatusOK, views.LedgerPage(d))
}

// ledgerQuery is the filters as a query string, for the pagination links.
func ledgerQuery(f views.LedgerFilterForm) url.Values {
	v := url.Values{}
	for name, value := range map[string]string{"status": f.Status, "key": f.KeyID, "model": f.Model, "from": f.From, "to": f.To} {
		if value != "" {
			v.Set(name, value)
		}
	}
	if f.Stuck {
		v.Set("stuck", "1")
	}
	return v
}
