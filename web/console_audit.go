package web

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"yosan/app"
	"yosan/web/views"
)

// The org's audit log: who changed what, and when.

// auditPageSize is the number of entries a page of the audit log shows.
const auditPageSize = 50

// auditPrefixes are the action families the filter offers.
var auditPrefixes = []views.Choice{{Value: "", Label: "All actions"}, {Value: "budget.", Label: "budget. (caps)"},
	{Value: "key.", Label: "key. (API keys)"}, {Value: "user.", Label: "user. (console users)"},
	{Value: "alert.", Label: "alert. (alerts)"}, {Value: "invoice.", Label: "invoice. (billing)"},
	{Value: "team.", Label: "team. (teams)"}, {Value: "member.", Label: "member. (members)"}, {Value: "org.", Label: "org. (organization)"}}

func (s *Server) auditRoutes(o *echo.Group) {
	o.GET("/audit", s.auditPage)
}

// auditPage reads one page of the log: one statement (after the org).
func (s *Server) auditPage(c echo.Context) error {
	org, err := s.consoleOrg(c)
	if err != nil {
		return err
	}
	if err := cc(c).p.Authorize(app.ActViewAudit, app.Target{OrgID: org.ID}); err != nil {
		return err
	}
	prefix := c.QueryParam("action")
	known := false
	for _, p := range auditPrefixes {
		known = known || p.Value == prefix
	}
	if !known {
		return app.Errorf(app.EINVALID, "choose an action family from the list")
	}
	var before int64
	if b := c.QueryParam("before"); b != "" {
		if before, err = strconv.ParseInt(b, 10, 64); err != nil || before <= 0 {
			return app.Errorf(app.EINVALID, "the page link is damaged; open the first page again")
		}
	}
	entries, err := s.cfg.DB.OrgAuditPage(c.Request().Context(), org.ID, prefix, before, auditPageSize+1)
	if err != nil {
		return err
	}
	base := "/console/orgs/" + org.ID + "/audit"
	d := views.AuditData{Shell: s.shell(c, &org, "audit", "Audit log / 監査ログ"), OrgID: org.ID, TimeZone: org.TimeZone,
		Prefix: prefix, Prefixes: auditPrefixes}
	v := url.Values{}
	if prefix != "" {
		v.Set("action", prefix)
	}
	if before > 0 {
		d.NewestHref = base + "?" + v.Encode()
	}
	if len(entries) > auditPageSize {
		entries = entries[:auditPageSize]
		v.Set("before", strconv.FormatInt(entries[len(entries)-1].ID, 10))
		d.OlderHref = base + "?" + v.Encode()
	}
	loc := orgLocation(org)
	for _, e := range entries {
		target := e.TargetKind
		if e.TargetID != "" {
			target = strings.TrimSpace(target + " " + e.TargetID)
		}
		d.Entries = append(d.Entries, views.AuditRow{At: e.At.In(loc), Actor: e.Actor, Action: e.Action, Target: target,
			Details: auditDetails(e.Details)})
	}
	return render(c, http.StatusOK, views.AuditPage(d))
}

// auditDetails renders details compactly, keys sorted: `name="ci key" plan=pro`.
func auditDetails(m map[string]any) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		v := fmt.Sprint(m[k])
		if v == "" || strings.ContainsAny(v, " \t\n\"=") {
			v = strconv.Quote(v)
		}
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, " ")
}
