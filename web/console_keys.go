package web

import (
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"yosan/app"
	"yosan/db"
	"yosan/web/views"
)

// The API keys page: the org's keys, issuing one (its secret shown once), revoking one.

func (s *Server) keyRoutes(o *echo.Group) {
	o.GET("/keys", s.keysPage)
	o.POST("/keys", s.keysCreate)
	o.GET("/keys/:id/revoke", s.keyRevokePage)
	o.POST("/keys/:id/revoke", s.keyRevoke)
}

// orgLocation is the org's time zone (UTC if the stored name no longer loads).
func orgLocation(org app.Org) *time.Location {
	loc, err := time.LoadLocation(org.TimeZone)
	if err != nil {
		return time.UTC
	}
	return loc
}

// keyStatus is what the list says of a key at now.
func keyStatus(k app.APIKey, now time.Time) string {
	switch {
	case k.RevokedAt != nil:
		return "revoked"
	case k.ExpiresAt != nil && !k.ExpiresAt.After(now):
		return "expired"
	}
	return "active"
}

func keyRow(k db.KeyListing, loc *time.Location, now time.Time, canRevoke bool) views.KeyRow {
	r := views.KeyRow{ID: k.ID, Name: k.Name, Prefix: k.Prefix, Team: k.TeamName, Member: k.MemberEmail, Plan: k.Plan,
		Created: k.CreatedAt.In(loc), Status: keyStatus(k.APIKey, now), CanRevoke: canRevoke}
	if k.ExpiresAt != nil {
		r.Expires = k.ExpiresAt.In(loc)
	}
	if k.LastUsed != nil {
		r.LastUsed = k.LastUsed.In(loc)
	}
	return r
}

// keyTeams returns the teams in which the principal may issue and revoke keys.
func keyTeams(x *consoleCtx, orgID string, teams []app.Team) []app.Team {
	var out []app.Team
	for _, t := range teams {
		if x.p.Can(app.ActManageKeys, app.Target{OrgID: orgID, TeamID: t.ID}) {
			out = append(out, t)
		}
	}
	return out
}

// keysData reads the keys page of org: three statements whatever the number of keys (the org
// was read by consoleOrg; then the key list with each key's last use, and the form's choices).
func (s *Server) keysData(c echo.Context, org app.Org, f *views.KeyForm) (views.KeysData, error) {
	ctx := c.Request().Context()
	d := views.KeysData{Shell: s.shell(c, &org, "keys", "API keys / APIキー"), OrgID: org.ID, TimeZone: org.TimeZone}
	keys, err := s.cfg.DB.OrgKeys(ctx, org.ID)
	if err != nil {
		return d, err
	}
	choices, err := s.cfg.DB.KeyFormChoices(ctx, org.ID)
	if err != nil {
		return d, err
	}
	loc, now := orgLocation(org), s.cfg.DB.Now()
	allowed := map[string]bool{}
	for _, t := range keyTeams(cc(c), org.ID, choices.Teams) {
		allowed[t.ID] = true
	}
	d.Keys = make([]views.KeyRow, 0, len(keys))
	for _, k := range keys {
		d.Keys = append(d.Keys, keyRow(k, loc, now, allowed[k.TeamID]))
	}
	if len(allowed) == 0 {
		// Every key belongs to a team: one who may issue keys is told to create a team first.
		d.NeedTeam = len(choices.Teams) == 0 && cc(c).p.Can(app.ActManageKeys, app.Target{OrgID: org.ID})
		return d, nil
	}
	if f == nil {
		f = &views.KeyForm{}
	}
	teamName := map[string]string{}
	for _, t := range choices.Teams {
		teamName[t.ID] = t.Name
		if allowed[t.ID] {
			f.Teams = append(f.Teams, views.Choice{Value: t.ID, Label: t.Name})
		}
	}
	if len(f.Teams) == 1 && f.TeamID == "" {
		f.TeamID = f.Teams[0].Value
	}
	for _, m := range choices.Members {
		if allowed[m.TeamID] {
			f.Members = append(f.Members, views.Choice{Value: m.ID, Label: m.Email + " (" + teamName[m.TeamID] + ")"})
		}
	}
	for _, pl := range choices.Plans {
		f.Plans = append(f.Plans, views.Choice{Value: pl, Label: pl})
	}
	d.Form = f
	return d, nil
}

func (s *Server) keysPage(c echo.Context) error {
	org, err := s.consoleOrg(c)
	if err != nil {
		return err
	}
	d, err := s.keysData(c, org, nil)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.KeysPage(d))
}

// keysCreate issues a key. The checks are those of the admin API's createKey, with messages
// for a form; the team is checked against the principal's role before anything else is said.
func (s *Server) keysCreate(c echo.Context) error {
	ctx := c.Request().Context()
	org, err := s.consoleOrg(c)
	if err != nil {
		return err
	}
	p := cc(c).p
	f := &views.KeyForm{Name: strings.TrimSpace(c.FormValue("name")), TeamID: strings.TrimSpace(c.FormValue("team")),
		MemberID: strings.TrimSpace(c.FormValue("member")), Plan: strings.TrimSpace(c.FormValue("plan")),
		Expires: strings.TrimSpace(c.FormValue("expires")), Errors: map[string]string{}}
	choices, err := s.cfg.DB.KeyFormChoices(ctx, org.ID)
	if err != nil {
		return err
	}
	teams := keyTeams(cc(c), org.ID, choices.Teams)
	if len(teams) == 0 {
		// No team at all: the role's own refusal ("viewer may not manage API keys").
		if err := p.Authorize(app.ActManageKeys, app.Target{OrgID: org.ID}); err != nil {
			return err
		}
		return app.Errorf(app.EFORBIDDEN, "you may not issue keys in any team of this org")
	}
	var team *app.Team
	for i := range choices.Teams {
		if choices.Teams[i].ID == f.TeamID {
			team = &choices.Teams[i]
		}
	}
	switch {
	case f.TeamID == "":
		f.Errors["team"] = "Choose the team the key is for."
	case team == nil:
		f.Errors["team"] = "That team does not exist in this organization; choose one from the list."
	default:
		// A team the role does not cover is a forged form (the form offers only allowed teams).
		if err := p.Authorize(app.ActManageKeys, app.Target{OrgID: org.ID, TeamID: team.ID}); err != nil {
			return err
		}
	}
	if f.Name == "" {
		f.Errors["name"] = "Give the key a name, such as the program or person that will use it."
	} else if utf8.RuneCountInString(f.Name) > 200 {
		f.Errors["name"] = "At most 200 characters."
	}
	if f.MemberID != "" {
		var member *app.Member
		for i := range choices.Members {
			if choices.Members[i].ID == f.MemberID {
				member = &choices.Members[i]
			}
		}
		switch {
		case member == nil:
			f.Errors["member"] = "That member does not exist in this organization; choose one from the list."
		case team != nil && member.TeamID != team.ID:
			f.Errors["member"] = member.Email + " is not in team " + team.Name + ": choose a member of that team, or no member."
		}
	}
	planOK := false
	for _, pl := range choices.Plans {
		planOK = planOK || pl == f.Plan
	}
	if f.Plan == "" {
		f.Errors["plan"] = "Choose a plan (for example free, pro or enterprise)."
	} else if !planOK {
		f.Errors["plan"] = "Plan “" + f.Plan + "” does not exist; choose one from the list."
	}
	var expires *time.Time
	if f.Expires != "" {
		loc := orgLocation(org)
		day, err := time.ParseInLocation("2006-01-02", f.Expires, loc)
		if err != nil {
			f.Errors["expires"] = "Enter a date such as 2026-12-31, or leave it empty for no expiry."
		} else {
			// The key works until the end of that day in the org's time zone.
			end := time.Date(day.Year(), day.Month(), day.Day()+1, 0, 0, 0, 0, loc).Add(-time.Microsecond)
			if !end.After(s.cfg.DB.Now()) {
				f.Errors["expires"] = "The expiry must be in the future: choose today or a later day."
			}
			expires = &end
		}
	}
	if len(f.Errors) > 0 {
		d, err := s.keysData(c, org, f)
		if err != nil {
			return err
		}
		return render(c, http.StatusBadRequest, views.KeysPage(d))
	}
	secret := db.NewKeySecret()
	k, err := s.cfg.DB.CreateKey(ctx, app.APIKey{OrgID: org.ID, TeamID: team.ID, MemberID: f.MemberID, Name: f.Name,
		Plan: f.Plan, ExpiresAt: expires}, secret)
	if err != nil {
		return err
	}
	details := map[string]any{"name": k.Name, "team": team.Name, "plan": k.Plan, "prefix": k.Prefix}
	if k.MemberID != "" {
		details["member"] = k.MemberID
	}
	if expires != nil {
		details["expires"] = f.Expires
	}
	s.audit(c, p, org.ID, "key.create", "key", k.ID, details)
	sh := s.shell(c, &org, "keys", "Key issued / キーを発行しました")
	return render(c, http.StatusCreated, views.KeyCreatedPage(views.KeyCreatedData{Shell: sh, OrgID: org.ID,
		Name: k.Name, Team: team.Name, Secret: secret}))
}

// revokableKey loads key :id of the URL's org and checks the principal may revoke it: another
// org's key is 404, a key of a team the role does not cover 403.
func (s *Server) revokableKey(c echo.Context) (app.Org, db.KeyListing, error) {
	org, err := s.consoleOrg(c)
	if err != nil {
		return org, db.KeyListing{}, err
	}
	k, err := s.cfg.DB.OrgKey(c.Request().Context(), org.ID, c.Param("id"))
	if err != nil {
		return org, k, err
	}
	return org, k, cc(c).p.Authorize(app.ActManageKeys, app.Target{OrgID: org.ID, TeamID: k.TeamID})
}

func (s *Server) keyRevokePage(c echo.Context) error {
	org, k, err := s.revokableKey(c)
	if err != nil {
		return err
	}
	if k.RevokedAt != nil {
		return flash(c, keysPath(org.ID), "The key “"+k.Name+"” is already revoked.")
	}
	return render(c, http.StatusOK, views.KeyRevokePage(views.KeyRevokeData{
		Shell: s.shell(c, &org, "keys", "Revoke a key / キーの失効"), OrgID: org.ID,
		Key: keyRow(k, orgLocation(org), s.cfg.DB.Now(), true)}))
}

// keyRevoke revokes the key and drops it from this process's key cache at once.
func (s *Server) keyRevoke(c echo.Context) error {
	org, k, err := s.revokableKey(c)
	if err != nil {
		return err
	}
	if k.RevokedAt != nil {
		return flash(c, keysPath(org.ID), "The key “"+k.Name+"” is already revoked.")
	}
	if _, err := s.cfg.DB.RevokeKey(c.Request().Context(), k.ID); err != nil {
		return err
	}
	s.cfg.Gateway.ForgetKey(k.ID)
	s.audit(c, cc(c).p, org.ID, "key.revoke", "key", k.ID, map[string]any{"name": k.Name, "prefix": k.Prefix, "team": k.TeamName})
	return flash(c, keysPath(org.ID), "Key “"+k.Name+"” revoked: requests with it are refused from now on.")
}

func keysPath(orgID string) string { return "/console/orgs/" + orgID + "/keys" }
