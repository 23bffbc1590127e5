package web

import (
	"fmt"
	"net/http"
	"net/mail"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"yosan/app"
	"yosan/db"
	"yosan/web/views"
)

// safeNext keeps a post-sign-in redirect inside the console.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/console") || strings.HasPrefix(next, "//") || strings.Contains(next, "\\") {
		return "/console"
	}
	return next
}

func (s *Server) setupPage(c echo.Context) error {
	n, err := s.cfg.DB.CountUsers(c.Request().Context())
	if err != nil {
		return err
	}
	if n > 0 {
		return c.Redirect(http.StatusSeeOther, "/console/login")
	}
	return render(c, http.StatusOK, views.SetupPage(views.AuthForm{CSRF: PreAuthCSRF(c)}))
}

func (s *Server) setupSubmit(c echo.Context) error {
	ctx := c.Request().Context()
	f := views.AuthForm{CSRF: PreAuthCSRF(c), Name: strings.TrimSpace(c.FormValue("name")),
		Email: strings.ToLower(strings.TrimSpace(c.FormValue("email"))), OrgName: strings.TrimSpace(c.FormValue("org")),
		Errors: map[string]string{}}
	if !CheckPreAuthCSRF(c, c.FormValue("_csrf")) {
		return app.Errorf(app.EFORBIDDEN, "the form expired (CSRF check failed); reload the page and try again")
	}
	password := c.FormValue("password")
	if f.Name == "" {
		f.Errors["name"] = "Enter your name."
	}
	if a, err := mail.ParseAddress(f.Email); err != nil || a.Address != f.Email {
		f.Errors["email"] = "Enter an email address such as admin@example.com."
	}
	if err := app.ValidPassword(password); err != nil {
		f.Errors["password"] = app.ErrorMessage(err)
	}
	if len(f.OrgName) > 200 {
		f.Errors["org"] = "At most 200 characters."
	}
	if len(f.Errors) > 0 {
		return render(c, http.StatusBadRequest, views.SetupPage(f))
	}
	hash, err := HashPassword(password)
	if err != nil {
		return err
	}
	u, err := s.cfg.DB.CreateFirstOperator(ctx, f.Email, f.Name, hash)
	if err != nil {
		if app.ErrorCode(err) == app.ECONFLICT {
			return c.Redirect(http.StatusSeeOther, "/console/login")
		}
		return err
	}
	p := app.Actor{User: u}
	s.audit(c, p, "", "user.setup", "user", u.ID, map[string]any{"email": u.Email})
	if f.OrgName != "" {
		o, err := s.cfg.DB.CreateOrg(ctx, app.Org{Name: f.OrgName, Currency: s.cfg.DefaultCurrency, TimeZone: s.cfg.DefaultTimeZone, USDJPY: s.cfg.DefaultUSDJPY})
		if err != nil {
			return err
		}
		if err := s.cfg.DB.SetMembership(ctx, app.Membership{UserID: u.ID, OrgID: o.ID, Role: app.RoleOwner}); err != nil {
			return err
		}
		s.audit(c, p, o.ID, "org.create", "org", o.ID, map[string]any{"name": o.Name})
	}
	if _, err := s.sessions.Issue(c, u.ID); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/console")
}

func (s *Server) loginPage(c echo.Context) error {
	if _, _, err := s.sessions.Authenticate(c); err == nil {
		return c.Redirect(http.StatusSeeOther, safeNext(c.QueryParam("next")))
	}
	n, err := s.cfg.DB.CountUsers(c.Request().Context())
	if err != nil {
		return err
	}
	if n == 0 {
		return c.Redirect(http.StatusSeeOther, "/console/setup")
	}
	return render(c, http.StatusOK, views.LoginPage(views.AuthForm{CSRF: PreAuthCSRF(c), Next: safeNext(c.QueryParam("next"))}))
}

// loginSubmit signs a user in. Failures are counted per email and per client address and
// throttled; the answer never says whether the email exists.
func (s *Server) loginSubmit(c echo.Context) error {
	ctx := c.Request().Context()
	f := views.AuthForm{CSRF: PreAuthCSRF(c), Email: strings.ToLower(strings.TrimSpace(c.FormValue("email"))),
		Next: safeNext(c.FormValue("next")), Errors: map[string]string{}}
	if !CheckPreAuthCSRF(c, c.FormValue("_csrf")) {
		return app.Errorf(app.EFORBIDDEN, "the form expired (CSRF check failed); reload the page and try again")
	}
	password := c.FormValue("password")
	if f.Email == "" {
		f.Errors["email"] = "Enter your email address."
	}
	if password == "" {
		f.Errors["password"] = "Enter your password."
	}
	if len(f.Errors) > 0 {
		return render(c, http.StatusBadRequest, views.LoginPage(f))
	}
	ip := c.RealIP()
	wait, err := s.sessions.Throttled(ctx, f.Email, ip)
	if err != nil {
		return err
	}
	if wait > 0 {
		f.Message = fmt.Sprintf("Too many failed attempts. Try again in %d minutes. / 試行回数が多すぎます。%d 分後に再試行してください。",
			int(wait.Round(time.Minute)/time.Minute)+1, int(wait.Round(time.Minute)/time.Minute)+1)
		c.Response().Header().Set("Retry-After", fmt.Sprint(int(wait.Seconds())+1))
		return render(c, http.StatusTooManyRequests, views.LoginPage(f))
	}
	u, hash, err := s.cfg.DB.UserByEmail(ctx, f.Email)
	ok := false
	switch {
	case err == nil:
		ok, err = CheckPassword(hash, password)
		if err != nil {
			return err
		}
	case app.ErrorCode(err) == app.ENOTFOUND:
		// Spend the same time as a real check, so timing does not tell which emails exist.
		_, _ = CheckPassword(dummyHash, password)
	default:
		return err
	}
	if rerr := s.cfg.DB.RecordLoginAttempt(ctx, f.Email, ip, ok); rerr != nil {
		return rerr
	}
	if !ok {
		f.Message = "The email or password is wrong. / メールアドレスまたはパスワードが違います。"
		return render(c, http.StatusUnauthorized, views.LoginPage(f))
	}
	if _, err := s.sessions.Issue(c, u.ID); err != nil {
		return err
	}
	s.audit(c, app.Actor{User: u}, "", "user.login", "user", u.ID, nil)
	return c.Redirect(http.StatusSeeOther, f.Next)
}

func (s *Server) logout(c echo.Context) error {
	if err := s.sessions.End(c); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/console/login")
}

func (s *Server) accountPage(c echo.Context) error {
	return render(c, http.StatusOK, views.AccountPage(s.shell(c, nil, "", "Account / アカウント"), nil))
}

// changePassword sets a new password and ends every session of the user (db.SetPassword),
// this one included.
func (s *Server) changePassword(c echo.Context) error {
	ctx := c.Request().Context()
	x := cc(c)
	errs := map[string]string{}
	_, hash, err := s.cfg.DB.UserByEmail(ctx, x.p.User.Email)
	if err != nil {
		return err
	}
	if ok, err := CheckPassword(hash, c.FormValue("current")); err != nil {
		return err
	} else if !ok {
		errs["current"] = "The current password is wrong."
	}
	if err := app.ValidPassword(c.FormValue("new")); err != nil {
		errs["new"] = app.ErrorMessage(err)
	}
	if len(errs) > 0 {
		return render(c, http.StatusBadRequest, views.AccountPage(s.shell(c, nil, "", "Account / アカウント"), errs))
	}
	newHash, err := HashPassword(c.FormValue("new"))
	if err != nil {
		return err
	}
	if err := s.cfg.DB.SetPassword(ctx, x.p.User.ID, newHash); err != nil {
		return err
	}
	s.audit(c, x.p, "", "user.password_changed", "user", x.p.User.ID, nil)
	_ = s.sessions.End(c)
	return c.Redirect(http.StatusSeeOther, "/console/login")
}

// audit appends to the audit log; a failure is logged, never shown (the change is done).
func (s *Server) audit(c echo.Context, p app.Actor, orgID, action, kind, id string, details map[string]any) {
	e := db.AuditEntry{Actor: p.Label(), ActorID: p.User.ID, OrgID: orgID, Action: action, TargetKind: kind, TargetID: id, Details: details}
	if err := s.cfg.DB.Audit(c.Request().Context(), e); err != nil {
		s.cfg.Log.Error("audit log", "action", action, "err", err)
	}
}
