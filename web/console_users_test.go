package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"yosan/web"
)

func usersPath(org string) string { return "/console/orgs/" + org + "/users" }

// userID returns the id of the console user with email.
func (s *server) userID(t *testing.T, email string) string {
	t.Helper()
	u, _, err := s.db.UserByEmail(context.Background(), email)
	if err != nil {
		t.Fatal(err)
	}
	return u.ID
}

func TestConsoleUsersRoles(t *testing.T) {
	s := mustServer(t)
	o := s.mustConsoleOrgs(t, "ur")
	path := usersPath(o.tn.org)
	viewer := s.userID(t, "ur-viewer@example.com")
	for _, tt := range []struct {
		role   string
		status int
	}{{"owner", 200}, {"operator", 200}, {"finance_admin", 403}, {"team_admin", 403}, {"team_admin_other", 403}, {"viewer", 403}, {"other_owner", 404}} {
		t.Run(tt.role, func(t *testing.T) {
			b := o.users[tt.role]
			body := b.mustPage(path, tt.status)
			if tt.status == 200 {
				mustContain(t, body, "ur-owner@example.com", "ur-viewer@example.com", "ur-team-admin@example.com", "research", "sales",
					`action="`+path+`"`, path+"/"+viewer+"/remove")
				mustNotContain(t, body, "ur-other-owner@example.com")
				return
			}
			mustNotContain(t, body, "ur-owner@example.com")
			// Forged forms are refused the same way, and change nothing.
			b.mustPage("/console/account", 200)
			b.mustForm(path, url.Values{"email": {"x@example.com"}, "role": {"owner"}, "password": {"a long enough password"}}, tt.status)
			b.mustForm(path+"/"+viewer+"/role", url.Values{"role": {"owner"}}, tt.status)
			b.mustPage(path+"/"+viewer+"/remove", tt.status)
			b.mustForm(path+"/"+viewer+"/remove", nil, tt.status)
		})
	}
	if _, _, err := s.db.UserByEmail(context.Background(), "x@example.com"); err == nil {
		t.Error("a refused form created a user")
	}
	o.users["viewer"].mustPage("/console/orgs/"+o.tn.org, 200)
	// Another org's user, guessed into the owner's own org: not found.
	other := s.userID(t, "ur-other-owner@example.com")
	o.users["owner"].mustPage(path+"/"+other+"/remove", 404)
	o.users["owner"].mustForm(path+"/"+other+"/role", url.Values{"role": {"viewer"}}, 404)
}

func TestConsoleUsersAdd(t *testing.T) {
	s := mustServer(t)
	o := s.mustConsoleOrgs(t, "ua")
	path := usersPath(o.tn.org)
	owner := o.users["owner"]
	owner.mustPage(path, 200)

	t.Run("NewUser", func(t *testing.T) {
		const pw = "initial password 1"
		_, loc := owner.mustForm(path, url.Values{"email": {" Dana@Example.com "}, "name": {"Dana"}, "role": {"team_admin"},
			"team": {o.team2}, "password": {pw}}, http.StatusSeeOther)
		body := owner.mustPage(loc, 200)
		mustContain(t, body, "dana@example.com added as team_admin", "separate channel")
		row := rowOf(t, body, "<td>dana@example.com")
		mustContain(t, row, "Dana", `<option value="team_admin" selected`, `<option value="`+o.team2+`" selected`)
		// Dana signs in with the initial password and may manage keys of her team only.
		dana := s.browser(t)
		dana.login("dana@example.com", pw)
		keys := dana.mustPage(keysPath(o.tn.org), 200)
		mustContain(t, keys, `<option value="`+o.team2+`"`)
		mustNotContain(t, keys, `<option value="`+o.tn.team+`"`)
		audit := owner.mustPage("/console/orgs/"+o.tn.org+"/audit?action=user.", 200)
		mustContain(t, audit, "user.add", "email=dana@example.com", "role=team_admin", "new_account=true")
	})
	t.Run("ExistingAccount", func(t *testing.T) {
		hash, err := web.HashPassword("erin's own password")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.db.CreateUser(context.Background(), "erin@example.com", "Erin", hash, false); err != nil {
			t.Fatal(err)
		}
		owner.mustPage(path, 200)
		_, loc := owner.mustForm(path, url.Values{"email": {"erin@example.com"}, "role": {"viewer"}, "team": {o.tn.team}}, http.StatusSeeOther)
		mustContain(t, owner.mustPage(loc, 200), "erin@example.com added as viewer", "existing password")
		erin := s.browser(t)
		erin.login("erin@example.com", "erin's own password")
		erin.mustPage("/console/orgs/"+o.tn.org+"/keys", 200)
		// A team given with an org-wide role is dropped.
		if row := rowOf(t, owner.mustPage(path, 200), "<td>erin@example.com"); !strings.Contains(row, "whole org") {
			t.Errorf("erin's row: %s", row)
		}
	})

	for _, tt := range []struct {
		name   string
		form   url.Values
		field  string
		msg    string
		kept   []string
		status int
	}{
		{"BadEmail", url.Values{"email": {"not-an-email"}, "name": {"Fay"}, "role": {"viewer"}, "password": {"a long enough password"}},
			"email", "Enter an email address", []string{`value="not-an-email"`, `value="Fay"`, `<option value="viewer" selected`}, 400},
		{"ShortPassword", url.Values{"email": {"gus@example.com"}, "role": {"finance_admin"}, "password": {"short"}},
			"password", "The password is too short: use at least 12 characters", []string{`value="gus@example.com"`, `<option value="finance_admin" selected`}, 400},
		{"TeamAdminWithoutTeam", url.Values{"email": {"hal@example.com"}, "name": {"Hal"}, "role": {"team_admin"}, "password": {"a long enough password"}},
			"team", "A team admin needs a team", []string{`value="hal@example.com"`, `value="Hal"`, `<option value="team_admin" selected`}, 400},
		{"TeamOfAnotherOrg", url.Values{"email": {"hal@example.com"}, "role": {"team_admin"}, "team": {o.other.team}, "password": {"a long enough password"}},
			"team", "does not exist in this organization", []string{`value="hal@example.com"`}, 400},
		{"NoRole", url.Values{"email": {"ivy@example.com"}, "password": {"a long enough password"}},
			"role", "Choose a role", []string{`value="ivy@example.com"`}, 400},
		{"AlreadyInOrg", url.Values{"email": {"ua-viewer@example.com"}, "role": {"owner"}},
			"email", "ua-viewer@example.com is already a viewer of this organization", []string{`value="ua-viewer@example.com"`}, 400},
	} {
		t.Run(tt.name, func(t *testing.T) {
			owner.mustPage(path, 200)
			body, _ := owner.mustForm(path, tt.form, tt.status)
			mustContain(t, body, `id="f-`+tt.field+`-error"`, tt.msg, `aria-invalid="true"`)
			mustContain(t, body, tt.kept...)
			if pw := tt.form.Get("password"); pw != "" {
				mustNotContain(t, body, `value="`+pw+`"`)
			}
			if email := tt.form.Get("email"); tt.name != "AlreadyInOrg" {
				if _, _, err := s.db.UserByEmail(context.Background(), email); err == nil {
					t.Errorf("a refused form created %s", email)
				}
			}
		})
	}
}

func TestConsoleUsersRoleAndRemove(t *testing.T) {
	s := mustServer(t)
	o := s.mustConsoleOrgs(t, "um")
	path := usersPath(o.tn.org)
	owner := o.users["owner"]
	ownerID, viewerID := s.userID(t, "um-owner@example.com"), s.userID(t, "um-viewer@example.com")

	t.Run("ChangeRole", func(t *testing.T) {
		owner.mustPage(path, 200)
		_, loc := owner.mustForm(path+"/"+viewerID+"/role", url.Values{"role": {"finance_admin"}}, http.StatusSeeOther)
		body := owner.mustPage(loc, 200)
		mustContain(t, body, "um-viewer@example.com is now finance_admin")
		mustContain(t, rowOf(t, body, "<td>um-viewer@example.com"), "<td>finance_admin</td>")
		// The new role applies at once: the former viewer may now issue keys.
		mustContain(t, o.users["viewer"].mustPage(keysPath(o.tn.org), 200), "Issue a key")
		body, _ = owner.mustForm(path+"/"+viewerID+"/role", url.Values{"role": {"team_admin"}}, http.StatusBadRequest)
		mustContain(t, body, "A team admin needs a team", `id="role-`+viewerID+`-error"`)
		mustContain(t, rowOf(t, body, "<td>um-viewer@example.com"), `<option value="team_admin" selected`)
		owner.mustForm(path+"/"+viewerID+"/role", url.Values{"role": {"root"}}, http.StatusBadRequest)
		audit := owner.mustPage("/console/orgs/"+o.tn.org+"/audit?action=user.", 200)
		mustContain(t, audit, "user.role", "from=viewer", "to=finance_admin")
	})
	t.Run("LastOwner", func(t *testing.T) {
		owner.mustPage(path, 200)
		body, _ := owner.mustForm(path+"/"+ownerID+"/role", url.Values{"role": {"viewer"}}, http.StatusBadRequest)
		mustContain(t, body, "um-owner@example.com is the last owner of this organization")
		confirm := owner.mustPage(path+"/"+ownerID+"/remove", 200)
		mustContain(t, confirm, "You are the last owner of this organization and cannot be removed")
		mustNotContain(t, confirm, `class="danger"`)
		body, _ = owner.mustForm(path+"/"+ownerID+"/remove", nil, http.StatusBadRequest)
		mustContain(t, body, "You are the last owner")
		// The operator may not remove the last owner either.
		op := o.users["operator"]
		op.mustPage("/console/account", 200)
		body, _ = op.mustForm(path+"/"+ownerID+"/remove", nil, http.StatusBadRequest)
		mustContain(t, body, "um-owner@example.com is the last owner")
		owner.mustPage(path, 200) // still an owner
	})
	t.Run("Remove", func(t *testing.T) {
		confirm := owner.mustPage(path+"/"+viewerID+"/remove", 200)
		mustContain(t, confirm, "Remove um-viewer@example.com from this organization?", `class="danger"`)
		_, loc := owner.mustForm(path+"/"+viewerID+"/remove", nil, http.StatusSeeOther)
		body := owner.mustPage(loc, 200)
		mustContain(t, body, "um-viewer@example.com was removed")
		mustNotContain(t, body, path+"/"+viewerID+"/remove")
		o.users["viewer"].mustPage("/console/orgs/"+o.tn.org, 404)
		mustContain(t, owner.mustPage("/console/orgs/"+o.tn.org+"/audit", 200), "user.remove", "email=um-viewer@example.com")
	})
	t.Run("SecondOwnerLetsTheFirstGo", func(t *testing.T) {
		fin := s.userID(t, "um-finance-admin@example.com")
		owner.mustPage(path, 200)
		owner.mustForm(path+"/"+fin+"/role", url.Values{"role": {"owner"}}, http.StatusSeeOther)
		_, loc := owner.mustForm(path+"/"+ownerID+"/remove", nil, http.StatusSeeOther)
		if loc != "/console" {
			t.Errorf("removing oneself redirects to %q", loc)
		}
		owner.mustPage(path, 404)
	})
}
