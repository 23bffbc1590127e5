package web

import (
	"net/http"
	"net/mail"
	"strings"

	"github.com/labstack/echo/v4"

	"yosan/app"
	"yosan/web/views"
)

func (s *Server) teamRoutes(o *echo.Group) {
	o.GET("/teams", s.teamsPage)
	o.POST("/teams", s.teamsCreate)
	o.POST("/teams/members", s.teamsAddMember)
}

// teamsData reads the teams page of org (one statement) and what the user may change there.
func (s *Server) teamsData(c echo.Context, org app.Org, f views.TeamForm) (views.TeamsData, error) {
	p := cc(c).p
	d := views.TeamsData{Shell: s.shell(c, &org, "teams", "Teams & members / チーム"), OrgID: org.ID,
		CanTeams: p.Can(app.ActManageTeams, app.Target{OrgID: org.ID}), CanMembers: map[string]bool{}, TeamForm: f}
	teams, err := s.cfg.DB.TeamRosters(c.Request().Context(), org.ID)
	if err != nil {
		return d, err
	}
	d.Teams = teams
	for _, t := range teams {
		if p.Can(app.ActManageMembers, app.Target{OrgID: org.ID, TeamID: t.ID}) {
			d.CanMembers[t.ID] = true
		}
	}
	return d, nil
}

func (s *Server) teamsPage(c echo.Context) error {
	org, err := s.consoleOrg(c)
	if err != nil {
		return err
	}
	d, err := s.teamsData(c, org, views.TeamForm{})
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.TeamsPage(d))
}

func (s *Server) teamsCreate(c echo.Context) error {
	org, err := s.consoleOrg(c)
	if err != nil {
		return err
	}
	if err := cc(c).p.Authorize(app.ActManageTeams, app.Target{OrgID: org.ID}); err != nil {
		return err
	}
	f := views.TeamForm{Name: strings.TrimSpace(c.FormValue("name")), Errors: map[string]string{}}
	if f.Name == "" || len(f.Name) > 100 {
		f.Errors["name"] = "Give the team a name (at most 100 characters)."
		d, err := s.teamsData(c, org, f)
		if err != nil {
			return err
		}
		return render(c, http.StatusBadRequest, views.TeamsPage(d))
	}
	t, err := s.cfg.DB.CreateTeam(c.Request().Context(), org.ID, f.Name)
	if err != nil {
		return err
	}
	s.audit(c, cc(c).p, org.ID, "team.create", "team", t.ID, map[string]any{"name": t.Name})
	return flash(c, "/console/orgs/"+org.ID+"/teams", "Team “"+t.Name+"” created.")
}

func (s *Server) teamsAddMember(c echo.Context) error {
	org, err := s.consoleOrg(c)
	if err != nil {
		return err
	}
	f := views.TeamForm{MemberEmail: strings.ToLower(strings.TrimSpace(c.FormValue("email"))), MemberTeam: c.FormValue("team"),
		Errors: map[string]string{}}
	if err := cc(c).p.Authorize(app.ActManageMembers, app.Target{OrgID: org.ID, TeamID: f.MemberTeam}); err != nil {
		return err
	}
	ctx := c.Request().Context()
	if _, err := s.cfg.DB.Team(ctx, org.ID, f.MemberTeam); err != nil {
		f.Errors["team"] = "Choose one of this organization's teams."
	}
	if a, err := mail.ParseAddress(f.MemberEmail); err != nil || a.Address != f.MemberEmail {
		f.Errors["email"] = "Enter an email address such as hanako@example.com."
	}
	var m app.Member
	if len(f.Errors) == 0 {
		if m, err = s.cfg.DB.CreateMember(ctx, org.ID, f.MemberTeam, f.MemberEmail); err != nil {
			if app.ErrorCode(err) != app.ECONFLICT {
				return err
			}
			f.Errors["email"] = "This email is already a member of the organization."
		}
	}
	if len(f.Errors) > 0 {
		d, err := s.teamsData(c, org, f)
		if err != nil {
			return err
		}
		return render(c, http.StatusBadRequest, views.TeamsPage(d))
	}
	s.audit(c, cc(c).p, org.ID, "member.create", "member", m.ID, map[string]any{"email": m.Email, "team_id": m.TeamID})
	return flash(c, "/console/orgs/"+org.ID+"/teams", m.Email+" added.")
}
