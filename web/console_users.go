package web

import (
	"net/http"
	"net/mail"
	"strings"

	"github.com/labstack/echo/v4"

	"yosan/app"
	"yosan/db"
	"yosan/web/views"
)

// The org's console users: who may open the org, with which role. Owners (and operators) only.

func (s *Server) userRoutes(o *echo.Group) {
	o.GET("/users", s.usersPage)
	o.POST("/users", s.usersAdd)
	o.POST("/users/:user/role", s.userRole)
	o.GET("/users/:user/remove", s.userRemovePage)
	o.POST("/users/:user/remove", s.userRemove)
}

// usersOrg loads the org and checks the principal may manage its users.
func (s *Server) usersOrg(c echo.Context) (app.Org, error) {
	org, err := s.consoleOrg(c)
	if err != nil {
		return org, err
	}
	return org, cc(c).p.Authorize(app.ActManageUsers, app.Target{OrgID: org.ID})
}

// usersState is what the users page and its checks read: the org's users and teams.
type usersState struct {
	users []db.OrgUser
	teams []app.Team
}

func (s *Server) usersState(c echo.Context, org app.Org) (usersState, error) {
	var st usersState
	var err error
	if st.users, err = s.cfg.DB.OrgUsers(c.Request().Context(), org.ID); err != nil {
		return st, err
	}
	st.teams, err = s.cfg.DB.OrgTeams(c.Request().Context(), org.ID)
	return st, err
}

func (st usersState) user(id string) (db.OrgUser, bool) {
	for _, u := range st.users {
		if u.User.ID == id {
			return u, true
		}
	}
	return db.OrgUser{}, false
}

func (st usersState) team(id string) (app.Team, bool) {
	for _, t := range st.teams {
		if t.ID == id {
			return t, true
		}
	}
	return app.Team{}, false
}

// lastOwner reports whether userID is the org's only owner: it may neither be removed nor
// lose the role, or no one could manage the org's users any more.
func (st usersState) lastOwner(userID string) bool {
	owners, isOwner := 0, false
	for _, u := range st.users {
		if u.Membership.Role == app.RoleOwner {
			owners++
			isOwner = isOwner || u.User.ID == userID
		}
	}
	return isOwner && owners == 1
}

func (s *Server) userRow(c echo.Context, st usersState, u db.OrgUser) views.UserRow {
	r := views.UserRow{ID: u.User.ID, Email: u.User.Email, Name: u.User.Name, Role: string(u.Membership.Role),
		TeamID: u.Membership.TeamID, You: u.User.ID == cc(c).p.User.ID}
	if t, ok := st.team(u.Membership.TeamID); ok {
		r.TeamName = t.Name
	}
	return r
}

func (s *Server) usersData(c echo.Context, org app.Org, st usersState) views.UsersData {
	d := views.UsersData{Shell: s.shell(c, &org, "users", "Users / ユーザー"), OrgID: org.ID,
		Form: views.UserForm{Errors: map[string]string{}}}
	for _, t := range st.teams {
		d.Teams = append(d.Teams, views.Choice{Value: t.ID, Label: t.Name})
	}
	for _, u := range st.users {
		d.Users = append(d.Users, s.userRow(c, st, u))
	}
	return d
}

func (s *Server) usersPage(c echo.Context) error {
	org, err := s.usersOrg(c)
	if err != nil {
		return err
	}
	st, err := s.usersState(c, org)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.UsersPage(s.usersData(c, org, st)))
}

// checkRoleTeam validates a role and its team as typed; it returns the membership's team id
// ("" for the org-wide roles) and the messages for the role and team fields.
func checkRoleTeam(st usersState, role, teamID string) (team, roleErr, teamErr string) {
	switch {
	case !app.ValidRole(app.Role(role)):
		return "", "Choose a role: owner, finance_admin, team_admin or viewer.", ""
	case app.Role(role) != app.RoleTeamAdmin:
		return "", "", "" // the org-wide roles take no team: a team chosen by mistake is dropped
	case teamID == "":
		return "", "", "A team admin needs a team: choose the team they administer."
	}
	if _, ok := st.team(teamID); !ok {
		return "", "", "That team does not exist in this organization; choose one from the list."
	}
	return teamID, "", ""
}

// usersAdd gives a user a role in the org, creating the account when the email has none.
func (s *Server) usersAdd(c echo.Context) error {
	ctx := c.Request().Context()
	org, err := s.usersOrg(c)
	if err != nil {
		return err
	}
	st, err := s.usersState(c, org)
	if err != nil {
		return err
	}
	f := views.UserForm{Email: strings.ToLower(strings.TrimSpace(c.FormValue("email"))), Name: strings.TrimSpace(c.FormValue("name")),
		Role: c.FormValue("role"), TeamID: c.FormValue("team"), Errors: map[string]string{}}
	password := c.FormValue("password")
	if a, err := mail.ParseAddress(f.Email); err != nil || a.Address != f.Email {
		f.Errors["email"] = "Enter an email address such as ann@example.com."
	}
	if len(f.Name) > 200 {
		f.Errors["name"] = "At most 200 characters."
	}
	team, roleErr, teamErr := checkRoleTeam(st, f.Role, f.TeamID)
	if roleErr != "" {
		f.Errors["role"] = roleErr
	}
	if teamErr != "" {
		f.Errors["team"] = teamErr
	}
	var existing *app.User
	if f.Errors["email"] == "" {
		u, _, err := s.cfg.DB.UserByEmail(ctx, f.Email)
		switch {
		case err == nil:
			existing = &u
		case app.ErrorCode(err) != app.ENOTFOUND:
			return err
		}
	}
	if existing != nil {
		if ou, ok := st.user(existing.ID); ok {
			f.Errors["email"] = f.Email + " is already a " + string(ou.Membership.Role) + " of this organization; change the role in the list above."
		}
	} else if err := app.ValidPassword(password); err != nil {
		f.Errors["password"] = strings.ToUpper(app.ErrorMessage(err)[:1]) + app.ErrorMessage(err)[1:] + "."
	}
	if len(f.Errors) > 0 {
		d := s.usersData(c, org, st)
		d.Form = f
		return render(c, http.StatusBadRequest, views.UsersPage(d))
	}
	created := existing == nil
	if created {
		hash, err := HashPassword(password)
		if err != nil {
			return err
		}
		u, err := s.cfg.DB.CreateUser(ctx, f.Email, f.Name, hash, false)
		if err != nil {
			return err
		}
		existing = &u
	}
	if err := s.cfg.DB.SetMembership(ctx, app.Membership{UserID: existing.ID, OrgID: org.ID, Role: app.Role(f.Role), TeamID: team}); err != nil {
		return err
	}
	details := map[string]any{"email": existing.Email, "role": f.Role, "new_account": created}
	if team != "" {
		details["team"] = team
	}
	s.audit(c, cc(c).p, org.ID, "user.add", "user", existing.ID, details)
	msg := existing.Email + " added as " + f.Role + "."
	if created {
		msg += " Give them the initial password by a separate channel."
	} else {
		msg += " They sign in with their existing password."
	}
	return flash(c, usersBase(org.ID), msg)
}

// userRole changes a user's role in the org, refusing to take the role away from the last
// owner.
func (s *Server) userRole(c echo.Context) error {
	ctx := c.Request().Context()
	org, err := s.usersOrg(c)
	if err != nil {
		return err
	}
	st, err := s.usersState(c, org)
	if err != nil {
		return err
	}
	ou, ok := st.user(c.Param("user"))
	if !ok {
		return app.Errorf(app.ENOTFOUND, "no such user in this organization")
	}
	role, teamID := c.FormValue("role"), c.FormValue("team")
	team, roleErr, teamErr := checkRoleTeam(st, role, teamID)
	msg := roleErr + teamErr
	if msg == "" && app.Role(role) != app.RoleOwner && st.lastOwner(ou.User.ID) {
		msg = ou.User.Email + " is the last owner of this organization: make another user owner first, or no one could manage its users."
	}
	if msg != "" {
		d := s.usersData(c, org, st)
		for i := range d.Users {
			if d.Users[i].ID == ou.User.ID {
				d.Users[i].Role, d.Users[i].TeamID, d.Users[i].Error = role, teamID, msg
			}
		}
		d.Error = "The role of " + ou.User.Email + " was not changed: " + msg
		return render(c, http.StatusBadRequest, views.UsersPage(d))
	}
	if err := s.cfg.DB.SetMembership(ctx, app.Membership{UserID: ou.User.ID, OrgID: org.ID, Role: app.Role(role), TeamID: team}); err != nil {
		return err
	}
	details := map[string]any{"email": ou.User.Email, "from": string(ou.Membership.Role), "to": role}
	if team != "" {
		details["team"] = team
	}
	s.audit(c, cc(c).p, org.ID, "user.role", "user", ou.User.ID, details)
	next := usersBase(org.ID)
	if ou.User.ID == cc(c).p.User.ID && !cc(c).p.Operator() && app.Role(role) != app.RoleOwner {
		next = "/console/orgs/" + org.ID // the page of users is no longer theirs to see
	}
	return flash(c, next, ou.User.Email+" is now "+role+".")
}

// removable loads the user of the URL in the org and says why it may not be removed ("" when
// it may).
func (s *Server) removable(c echo.Context) (app.Org, usersState, db.OrgUser, string, error) {
	org, err := s.usersOrg(c)
	if err != nil {
		return org, usersState{}, db.OrgUser{}, "", err
	}
	st, err := s.usersState(c, org)
	if err != nil {
		return org, st, db.OrgUser{}, "", err
	}
	ou, ok := st.user(c.Param("user"))
	if !ok {
		return org, st, ou, "", app.Errorf(app.ENOTFOUND, "no such user in this organization")
	}
	if st.lastOwner(ou.User.ID) {
		who := ou.User.Email + " is"
		if ou.User.ID == cc(c).p.User.ID {
			who = "You are"
		}
		return org, st, ou, who + " the last owner of this organization and cannot be removed: make another user owner first.", nil
	}
	return org, st, ou, "", nil
}

func (s *Server) userRemovePage(c echo.Context) error {
	org, st, ou, refusal, err := s.removable(c)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.UserRemovePage(views.UserRemoveData{Shell: s.shell(c, &org, "users", "Remove a user / ユーザーの削除"),
		OrgID: org.ID, User: s.userRow(c, st, ou), Error: refusal}))
}

func (s *Server) userRemove(c echo.Context) error {
	org, st, ou, refusal, err := s.removable(c)
	if err != nil {
		return err
	}
	if refusal != "" {
		return render(c, http.StatusBadRequest, views.UserRemovePage(views.UserRemoveData{Shell: s.shell(c, &org, "users", "Remove a user / ユーザーの削除"),
			OrgID: org.ID, User: s.userRow(c, st, ou), Error: refusal}))
	}
	if err := s.cfg.DB.RemoveMembership(c.Request().Context(), ou.User.ID, org.ID); err != nil {
		return err
	}
	s.audit(c, cc(c).p, org.ID, "user.remove", "user", ou.User.ID, map[string]any{"email": ou.User.Email, "role": string(ou.Membership.Role)})
	next := usersBase(org.ID)
	if ou.User.ID == cc(c).p.User.ID && !cc(c).p.Operator() {
		next = "/console"
	}
	return flash(c, next, ou.User.Email+" was removed from the organization.")
}

func usersBase(orgID string) string { return "/console/orgs/" + orgID + "/users" }
