package web

import (
	"context"
	"embed"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"yosan/app"
	"yosan/db"
	"yosan/web/views"
)

//go:embed static
var staticFS embed.FS

// The console: server-rendered pages under /console for the people who run budgets. Every
// page checks the signed-in user's role in the org server-side (app.Actor.Authorize), the
// same check the JSON admin API makes; every form that changes something carries a CSRF token.

// consoleCtx is what a console handler knows about the request once it is signed in.
type consoleCtx struct {
	echo.Context
	p    app.Actor
	sess db.Session
	csrf string
}

// consoleKey is where requireUser leaves the consoleCtx in echo's context.
const consoleKey = "yosan.console"

func (s *Server) consoleRoutes(e *echo.Echo) {
	e.GET("/console/static/*", echo.WrapHandler(http.StripPrefix("/console/", http.FileServer(http.FS(staticFS)))))
	e.GET("/console/setup", s.setupPage)
	e.POST("/console/setup", s.setupSubmit)
	e.GET("/console/login", s.loginPage)
	e.POST("/console/login", s.loginSubmit)

	g := e.Group("/console", s.requireUser)
	g.POST("/logout", s.logout)
	g.GET("", s.consoleHome)
	g.GET("/", s.consoleHome)
	g.GET("/switch", s.switchOrg)
	g.GET("/account", s.accountPage)
	g.POST("/account/password", s.changePassword)
	s.consolePages(g)
}

// requireUser authenticates the session cookie and checks the CSRF token of every request that
// changes something; a visitor without a session is sent to the sign-in page.
func (s *Server) requireUser(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		p, sess, err := s.sessions.Authenticate(c)
		if err != nil {
			if app.ErrorCode(err) == app.EUNAUTHORIZED {
				if c.Request().Method == http.MethodGet {
					return c.Redirect(http.StatusSeeOther, "/console/login?next="+url.QueryEscape(c.Request().URL.RequestURI()))
				}
				return err
			}
			return err
		}
		cc := &consoleCtx{Context: c, p: p, sess: sess, csrf: s.sessions.CSRFToken(sess)}
		if c.Request().Method != http.MethodGet && c.Request().Method != http.MethodHead {
			if !s.sessions.CheckCSRF(sess, c.FormValue("_csrf")) {
				return app.Errorf(app.EFORBIDDEN, "the form expired or did not come from this console (CSRF check failed); reload the page and try again")
			}
		}
		c.Set(consoleKey, cc)
		return next(c)
	}
}

// cc returns the signed-in context requireUser set.
func cc(c echo.Context) *consoleCtx {
	v, _ := c.Get(consoleKey).(*consoleCtx)
	return v
}

// render writes a templ component as the answer.
func render(c echo.Context, status int, comp templ.Component) error {
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().Header().Set("Cache-Control", "no-store")
	c.Response().WriteHeader(status)
	return comp.Render(c.Request().Context(), c.Response())
}

// shell builds the frame of a console page about org (nil above orgs).
func (s *Server) shell(c echo.Context, org *app.Org, section, title string) views.Shell {
	x := cc(c)
	sh := views.Shell{Title: title, Section: section}
	if x == nil {
		return sh
	}
	sh.UserEmail, sh.Operator, sh.CSRF = x.p.User.Email, x.p.Operator(), x.csrf
	sh.Orgs = s.orgLinks(c.Request().Context(), x.p)
	if org != nil {
		link := views.OrgLink{ID: org.ID, Name: org.Name}
		if m, ok := x.p.Role(org.ID); ok {
			link.Role = string(m.Role)
		}
		sh.Org = &link
		sh.Nav = navFor(x.p, org.ID)
	}
	if f, err := c.Cookie("yosan_flash"); err == nil && f.Value != "" {
		msg, _ := url.QueryUnescape(f.Value)
		sh.Flash, sh.FlashError = strings.TrimPrefix(msg, "!"), strings.HasPrefix(msg, "!")
		c.SetCookie(&http.Cookie{Name: "yosan_flash", Path: "/console", MaxAge: -1})
	}
	return sh
}

// flash redirects to path with a one-time message shown there ("!" first marks an error).
func flash(c echo.Context, path, msg string) error {
	c.SetCookie(&http.Cookie{Name: "yosan_flash", Value: url.QueryEscape(msg), Path: "/console", HttpOnly: true,
		SameSite: http.SameSiteLaxMode, MaxAge: 60})
	return c.Redirect(http.StatusSeeOther, path)
}

// orgLinks lists the orgs the user may open: all of them for an operator.
func (s *Server) orgLinks(ctx context.Context, p app.Actor) []views.OrgLink {
	if p.Operator() {
		orgs, err := s.cfg.DB.Orgs(ctx)
		if err != nil {
			return nil
		}
		out := make([]views.OrgLink, 0, len(orgs))
		for _, o := range orgs {
			link := views.OrgLink{ID: o.ID, Name: o.Name}
			if m, ok := p.Role(o.ID); ok {
				link.Role = string(m.Role)
			}
			out = append(out, link)
		}
		return out
	}
	ids := make([]string, 0, len(p.Memberships))
	for _, m := range p.Memberships {
		ids = append(ids, m.OrgID)
	}
	names, err := s.cfg.DB.OrgNames(ctx, ids)
	if err != nil {
		return nil
	}
	out := make([]views.OrgLink, 0, len(p.Memberships))
	for _, m := range p.Memberships {
		out = append(out, views.OrgLink{ID: m.OrgID, Name: names[m.OrgID], Role: string(m.Role)})
	}
	return out
}

// navFor lists the sections of org the principal may open.
func navFor(p app.Actor, orgID string) []views.NavItem {
	base := "/console/orgs/" + orgID
	t := app.Target{OrgID: orgID}
	items := []views.NavItem{
		{Section: "overview", Label: "Overview 概要", Href: base},
		{Section: "budgets", Label: "Budgets 予算", Href: base + "/budgets"},
		{Section: "teams", Label: "Teams チーム", Href: base + "/teams"},
		{Section: "keys", Label: "API keys キー", Href: base + "/keys"},
		{Section: "models", Label: "Plans & models", Href: base + "/models"},
		{Section: "reservations", Label: "Reservations 台帳", Href: base + "/reservations"},
		{Section: "alerts", Label: "Alerts アラート", Href: base + "/alerts"},
		{Section: "invoices", Label: "Invoices 請求書", Href: base + "/invoices"},
		{Section: "providers", Label: "Providers", Href: base + "/providers"},
	}
	if p.Can(app.ActViewAudit, t) {
		items = append(items, views.NavItem{Section: "audit", Label: "Audit log 監査", Href: base + "/audit"})
	}
	if p.Can(app.ActManageUsers, t) {
		items = append(items, views.NavItem{Section: "users", Label: "Users ユーザー", Href: base + "/users"})
	}
	return items
}

// consoleOrg loads the org of the URL after checking the principal may view it: another
// org's id answers 404, as if it did not exist.
func (s *Server) consoleOrg(c echo.Context) (app.Org, error) {
	x := cc(c)
	id := c.Param("org")
	if err := x.p.Authorize(app.ActView, app.Target{OrgID: id}); err != nil {
		return app.Org{}, err
	}
	return s.cfg.DB.Org(c.Request().Context(), id)
}

// consoleHome opens the user's first org (or, for an operator without orgs, the org list).
func (s *Server) consoleHome(c echo.Context) error {
	links := s.orgLinks(c.Request().Context(), cc(c).p)
	if len(links) == 0 {
		return render(c, http.StatusOK, views.NoOrgs(s.shell(c, nil, "", "Welcome / ようこそ"), cc(c).p.Operator()))
	}
	return c.Redirect(http.StatusSeeOther, "/console/orgs/"+links[0].ID)
}

func (s *Server) switchOrg(c echo.Context) error {
	id := c.QueryParam("org")
	if err := cc(c).p.Authorize(app.ActView, app.Target{OrgID: id}); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/console/orgs/"+url.PathEscape(id))
}

// consoleError renders an error as the console's HTML error page.
func (s *Server) consoleError(err error, c echo.Context) {
	code := app.ErrorCode(err)
	status, _, _ := statusOf(code)
	msg := app.ErrorMessage(err)
	var he *echo.HTTPError
	if errors.As(err, &he) && app.AsError(err) == nil {
		status = he.Code
		msg = http.StatusText(he.Code)
		if he.Code == http.StatusNotFound {
			msg = "No such page / ページが見つかりません: " + c.Request().URL.Path
		}
	}
	if status >= 500 {
		s.cfg.Log.Error("console request failed", "method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
	}
	title := map[int]string{400: "Check the form / 入力を確認してください", 401: "Sign in / サインイン",
		403: "Not allowed / 権限がありません", 404: "Not found / 見つかりません", 409: "Conflict / 競合"}[status]
	if title == "" {
		title = "Something went wrong / エラー"
	}
	_ = render(c, status, views.ErrorPage(s.shell(c, nil, "", title), status, msg))
}

// parseYen reads an amount typed in a form: "1,000,000", "1000000", "¥1,000,000.5" or a
// full-width "１０００" all mean the same; "" is no value. EINVALID names what is wrong.
func parseYen(s string) (int64, bool, error) {
	s = strings.Map(func(r rune) rune {
		switch {
		case r >= '０' && r <= '９':
			return '0' + (r - '０')
		case r == '，' || r == ',' || r == '¥' || r == '￥' || r == ' ' || r == '\u00a0' || r == '\u3000' || r == '_':
			return -1
		case r == '．':
			return '.'
		}
		return r
	}, strings.TrimSpace(s))
	s = strings.TrimSuffix(strings.TrimSuffix(s, "円"), "JPY")
	if s == "" {
		return 0, false, nil
	}
	v, err := app.ParseMoney(s)
	if err != nil {
		return 0, true, app.Errorf(app.EINVALID, "enter an amount such as 1,000,000 (no negative numbers, at most 6 decimals)")
	}
	return v, true, nil
}
