package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestConsoleTeamsPage(t *testing.T) {
	s := mustServer(t)
	tn := s.mustTenant(t, "free")
	base := "/console/orgs/" + tn.org + "/teams"
	owner := s.mustUser(t, "owner@acme.example", "owner", tn.org, "")
	lead := s.mustUser(t, "lead@acme.example", "team_admin", tn.org, tn.team)
	finance := s.mustUser(t, "fin@acme.example", "finance_admin", tn.org, "")
	viewer := s.mustUser(t, "view@acme.example", "viewer", tn.org, "")

	t.Run("CreateTeam", func(t *testing.T) {
		body, _ := owner.mustForm(base, url.Values{"name": {"  "}}, 400)
		if !strings.Contains(body, "Give the team a name") {
			t.Errorf("empty name %.300s", body)
		}
		_, loc := owner.mustForm(base, url.Values{"name": {"営業 Sales"}}, http.StatusSeeOther)
		if body := owner.mustPage(loc, 200); !strings.Contains(body, "Team “営業 Sales” created.") || !strings.Contains(body, "<td>営業 Sales</td>") {
			t.Errorf("after create %.500s", body)
		}
		for name, b := range map[string]*browserClient{"team_admin": lead, "finance_admin": finance, "viewer": viewer} {
			if body := b.mustPage(base, 200); strings.Contains(body, "Create a team") {
				t.Errorf("%s sees the team form", name)
			}
			b.mustForm(base, url.Values{"name": {"x"}}, 403)
		}
	})
	t.Run("AddMember", func(t *testing.T) {
		body, _ := lead.mustForm(base+"/members", url.Values{"email": {"bad"}, "team": {tn.team}}, 400)
		if !strings.Contains(body, "Enter an email address") || !strings.Contains(body, `value="bad"`) {
			t.Errorf("bad email %.400s", body)
		}
		_, loc := lead.mustForm(base+"/members", url.Values{"email": {"Hanako@Acme.example"}, "team": {tn.team}}, http.StatusSeeOther)
		if body := lead.mustPage(loc, 200); !strings.Contains(body, "hanako@acme.example added.") {
			t.Errorf("after add %.300s", body)
		}
		body, _ = lead.mustForm(base+"/members", url.Values{"email": {"hanako@acme.example"}, "team": {tn.team}}, 400)
		if !strings.Contains(body, "already a member") {
			t.Errorf("duplicate %.300s", body)
		}
		// The team_admin's team only; the other team is not theirs.
		teams, err := s.db.TeamRosters(context.Background(), tn.org)
		if err != nil {
			t.Fatal(err)
		}
		otherTeam := ""
		for _, tm := range teams {
			if tm.ID != tn.team {
				otherTeam = tm.ID
			}
			if tm.ID == tn.team && (len(tm.Members) != 2 || tm.Members[0].Email != "ai@example.com" && tm.Members[1].Email != "hanako@acme.example") {
				t.Errorf("roster of the team: %+v", tm.Members)
			}
		}
		lead.mustForm(base+"/members", url.Values{"email": {"x@acme.example"}, "team": {otherTeam}}, 403)
		viewer.mustForm(base+"/members", url.Values{"email": {"y@acme.example"}, "team": {tn.team}}, 403)
	})
}
