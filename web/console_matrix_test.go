package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestConsoleRouteMatrix walks every console page and every kind of change by every role and
// checks each answer: allowed (200, or the action's redirect / validation answer), refused
// (403 page), or, for a user of another org, 404 as if the org did not exist.
func TestConsoleRouteMatrix(t *testing.T) {
	s := mustServer(t)
	tn := s.mustTenant(t, "free")
	other := s.mustTenant(t, "free")
	ctx := context.Background()
	team2, err := s.db.CreateTeam(ctx, tn.org, "second")
	if err != nil {
		t.Fatal(err)
	}
	users := map[string]*browserClient{
		"operator":      s.mustUser(t, "op@gateway.example", "operator", "", ""),
		"owner":         s.mustUser(t, "owner@acme.example", "owner", tn.org, ""),
		"finance_admin": s.mustUser(t, "fin@acme.example", "finance_admin", tn.org, ""),
		"team_admin":    s.mustUser(t, "lead@acme.example", "team_admin", tn.org, tn.team),
		"viewer":        s.mustUser(t, "view@acme.example", "viewer", tn.org, ""),
		"other_owner":   s.mustUser(t, "owner@other.example", "owner", other.org, ""),
	}
	base := "/console/orgs/" + tn.org
	all := []string{"operator", "owner", "finance_admin", "team_admin", "viewer"}
	only := func(roles ...string) map[string]bool {
		m := map[string]bool{}
		for _, r := range roles {
			m[r] = true
		}
		return m
	}

	pages := []struct {
		path    string
		allowed map[string]bool
	}{
		{"", only(all...)},
		{"/budgets", only(all...)},
		{"/teams", only(all...)},
		{"/keys", only(all...)},
		{"/models", only(all...)},
		{"/reservations", only(all...)},
		{"/alerts", only(all...)},
		{"/invoices", only(all...)},
		{"/providers", only(all...)},
		{"/audit", only("operator", "owner", "finance_admin")},
		{"/users", only("operator", "owner")},
	}
	for _, p := range pages {
		for role, b := range users {
			t.Run("GET"+strings.ReplaceAll(p.path, "/", "_")+"/"+role, func(t *testing.T) {
				want := http.StatusForbidden
				switch {
				case role == "other_owner":
					want = http.StatusNotFound
				case p.allowed[role]:
					want = http.StatusOK
				}
				status, body, _ := b.get(base + p.path)
				if status != want {
					t.Fatalf("GET %s as %s: %d, want %d\n%.300s", p.path, role, status, want, body)
				}
				if want == http.StatusForbidden && !strings.Contains(body, "Not allowed") {
					t.Errorf("the 403 page does not say why: %.300s", body)
				}
			})
		}
	}

	// Changes. Each form is valid for the allowed roles (their answer is a redirect after
	// success) except where noted; the check is that the refused roles get 403 and another
	// org's owner 404, and that the allowed ones are not refused.
	changes := []struct {
		name    string
		path    string
		form    url.Values
		allowed map[string]bool
	}{
		{"org cap", "/budgets/org/" + tn.org, url.Values{"cap": {"1,000,000"}}, only("operator", "owner", "finance_admin")},
		{"team cap", "/budgets/team/" + tn.team, url.Values{"cap": {"500000"}}, only("operator", "owner", "finance_admin")},
		{"own team's key cap", "/budgets/key/" + tn.key, url.Values{"cap": {"1000"}}, only("operator", "owner", "finance_admin", "team_admin")},
		{"create team", "/teams", url.Values{"name": {"t"}}, only("operator", "owner")},
		{"member of own team", "/teams/members", url.Values{"email": {"m-%s@acme.example"}, "team": {tn.team}}, only("operator", "owner", "team_admin")},
		{"member of another team", "/teams/members", url.Values{"email": {"n-%s@acme.example"}, "team": {team2.ID}}, only("operator", "owner")},
		{"key for own team", "/keys", url.Values{"name": {"k"}, "team": {tn.team}, "plan": {"free"}}, only("operator", "owner", "finance_admin", "team_admin")},
		{"key for another team", "/keys", url.Values{"name": {"k"}, "team": {team2.ID}, "plan": {"free"}}, only("operator", "owner", "finance_admin")},
		{"alert channel", "/alerts/channels", url.Values{"name": {"hook"}, "kind": {"webhook"}, "target": {"https://hooks.example/y"}}, only("operator", "owner", "finance_admin")},
		{"close a month", "/invoices/close", url.Values{"period": {"2020-01"}}, only("operator", "owner", "finance_admin")},
		{"add a user", "/users", url.Values{"email": {"u-%s@acme.example"}, "role": {"viewer"}, "password": {"a long enough password"}}, only("operator", "owner")},
		{"clear a provider cooldown", "/providers/cooldowns/clear", url.Values{"provider": {"demo"}, "model": {"demo-mini"}}, only("operator")},
	}
	for _, ch := range changes {
		for role, b := range users {
			t.Run("POST "+ch.name+"/"+role, func(t *testing.T) {
				form := url.Values{}
				for k, v := range ch.form {
					form[k] = []string{strings.ReplaceAll(v[0], "%s", role)}
				}
				if role == "other_owner" {
					// The other org's owner, with a valid session and token, guessing ids.
					b.mustPage("/console/orgs/"+other.org, 200)
				} else {
					b.mustPage(base, 200)
				}
				status, body, _ := b.post(base+ch.path, form)
				switch {
				case role == "other_owner":
					if status != http.StatusNotFound {
						t.Fatalf("%s as another org's owner: %d, want 404", ch.name, status)
					}
				case ch.allowed[role]:
					if status == http.StatusForbidden || status == http.StatusNotFound || status >= 500 {
						t.Fatalf("%s as %s: %d\n%.400s", ch.name, role, status, body)
					}
				default:
					if status != http.StatusForbidden {
						t.Fatalf("%s as %s: %d, want 403\n%.400s", ch.name, role, status, body)
					}
				}
			})
		}
	}
	// Nothing the other org's owner tried landed anywhere.
	chs, err := s.db.AlertChannels(ctx, other.org)
	if err != nil || len(chs) != 0 {
		t.Errorf("other org's channels: %v %v", chs, err)
	}
	var stray int
	if err := s.db.Pool.QueryRow(ctx, `SELECT count(*) FROM members WHERE email LIKE '%other_owner%'`).Scan(&stray); err != nil || stray != 0 {
		t.Errorf("members created by another org's owner: %d %v", stray, err)
	}
}
