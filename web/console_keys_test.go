package web_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

var secretRE = regexp.MustCompile(`ysk-[0-9a-f]{48}`)

func keysPath(org string) string { return "/console/orgs/" + org + "/keys" }

func tokyoDay(days int) string {
	tokyo, _ := time.LoadLocation("Asia/Tokyo")
	return time.Now().In(tokyo).AddDate(0, 0, days).Format("2006-01-02")
}

// mustKey issues a key in team of org through the admin API and returns its id and secret.
func (s *server) mustKey(t *testing.T, org, team, name string) (string, string) {
	t.Helper()
	k := s.admin(t, "POST", "/admin/v1/orgs/"+org+"/keys", `{"name":"`+name+`","team_id":"`+team+`","plan":"free"}`, 201)
	return k["id"].(string), k["key"].(string)
}

func TestConsoleKeysPage(t *testing.T) {
	s := mustServer(t)
	o := s.mustConsoleOrgs(t, "keys")
	team2Key, _ := s.mustKey(t, o.tn.org, o.team2, "sales-bot")
	// The tenant's key has been used once: the list shows when.
	if resp, b := s.do(t, "POST", "/v1/chat/completions", o.tn.secret, chatBody("demo-mini", `,"max_tokens":5`)); resp.StatusCode != 200 {
		t.Fatalf("chat: %d %s", resp.StatusCode, b)
	}
	form := `action="` + keysPath(o.tn.org) + `"`
	for _, tt := range []struct {
		role     string
		status   int
		form     bool
		revokes  []string // keys with a revoke link
		noRevoke []string
	}{
		{"owner", 200, true, []string{o.tn.key, team2Key}, nil},
		{"finance_admin", 200, true, []string{o.tn.key, team2Key}, nil},
		{"team_admin", 200, true, []string{o.tn.key}, []string{team2Key}},
		{"team_admin_other", 200, true, []string{team2Key}, []string{o.tn.key}},
		{"viewer", 200, false, nil, []string{o.tn.key, team2Key}},
		{"operator", 200, true, []string{o.tn.key, team2Key}, nil},
		{"other_owner", 404, false, nil, nil},
	} {
		t.Run(tt.role, func(t *testing.T) {
			body := o.users[tt.role].mustPage(keysPath(o.tn.org), tt.status)
			if tt.status != 200 {
				mustNotContain(t, body, "sales-bot", o.tn.key)
				return
			}
			mustContain(t, body, "ci", "sales-bot", "research", "sales", "ai@example.com", "active")
			if strings.Count(body, "never") == 0 {
				t.Error("the unused key does not say it was never used")
			}
			if got := strings.Contains(body, form); got != tt.form {
				t.Errorf("create form shown = %v, want %v", got, tt.form)
			}
			for _, k := range tt.revokes {
				mustContain(t, body, keysPath(o.tn.org)+"/"+k+"/revoke")
			}
			for _, k := range tt.noRevoke {
				mustNotContain(t, body, keysPath(o.tn.org)+"/"+k+"/revoke")
			}
		})
	}
	t.Run("TeamAdminFormOffersOwnTeamOnly", func(t *testing.T) {
		body := o.users["team_admin"].mustPage(keysPath(o.tn.org), 200)
		mustContain(t, body, `<option value="`+o.tn.team+`"`)
		mustNotContain(t, body, `<option value="`+o.team2+`"`)
	})
	t.Run("LastUsed", func(t *testing.T) {
		body := o.users["owner"].mustPage(keysPath(o.tn.org), 200)
		used, unused := rowOf(t, body, "<td>ci</td>"), rowOf(t, body, "<td>sales-bot</td>")
		if strings.Count(used, "never") != 1 || strings.Count(used, tokyoDay(0)) != 2 { // no expiry, used today
			t.Errorf("the used key's row does not show today's use: %s", used)
		}
		if strings.Count(unused, "never") != 2 { // no expiry, never used
			t.Errorf("the unused key's row: %s", unused)
		}
	})
}

func TestConsoleKeysCreate(t *testing.T) {
	s := mustServer(t)
	o := s.mustConsoleOrgs(t, "kc")
	otherMember := s.admin(t, "POST", "/admin/v1/orgs/"+o.tn.org+"/members", `{"email":"bob@example.com","team_id":"`+o.team2+`"}`, 201)["id"].(string)
	path := keysPath(o.tn.org)
	valid := func() url.Values {
		return url.Values{"name": {"batch job"}, "team": {o.tn.team}, "member": {o.tn.member}, "plan": {"pro"}, "expires": {tokyoDay(30)}}
	}

	t.Run("OK", func(t *testing.T) {
		b := o.users["finance_admin"]
		b.mustPage(path, 200)
		body, _ := b.mustForm(path, valid(), http.StatusCreated)
		secrets := secretRE.FindAllString(body, -1)
		if len(secrets) != 1 {
			t.Fatalf("the secret appears %d times on the created page, want exactly once", len(secrets))
		}
		secret := secrets[0]
		mustContain(t, body, `class="secret"`, "will not be shown again", `href="`+path+`"`, "batch job")
		list := b.mustPage(path, 200)
		mustNotContain(t, list, secret)
		mustContain(t, list, "batch job", secret[:10]+"…", "pro", tokyoDay(30))
		// The key works at once, as the team's key bound to the member.
		if resp, rb := s.do(t, "POST", "/v1/chat/completions", secret, chatBody("demo-mini", `,"max_tokens":5`)); resp.StatusCode != 200 {
			t.Fatalf("chat with the new key: %d %s", resp.StatusCode, rb)
		}
		audit := o.users["owner"].mustPage("/console/orgs/"+o.tn.org+"/audit?action=key.", 200)
		mustContain(t, audit, "key.create", "kc-finance-admin@example.com", "name=&#34;batch job&#34;", "plan=pro")
		mustNotContain(t, audit, secret)
	})
	t.Run("TeamAdminOwnTeam", func(t *testing.T) {
		b := o.users["team_admin"]
		b.mustPage(path, 200)
		v := valid()
		v.Set("name", "ta key")
		v.Set("expires", tokyoDay(0)) // today: the key works until midnight in Tokyo
		body, _ := b.mustForm(path, v, http.StatusCreated)
		if n := len(secretRE.FindAllString(body, -1)); n != 1 {
			t.Errorf("secret shown %d times", n)
		}
		var exp time.Time
		if err := s.db.Pool.QueryRow(context.Background(), `SELECT expires_at FROM api_keys WHERE name = 'ta key'`).Scan(&exp); err != nil {
			t.Fatal(err)
		}
		tokyo := mustTokyo(t)
		day, _ := time.ParseInLocation("2006-01-02", tokyoDay(1), tokyo)
		if want := day.Add(-time.Microsecond); !exp.Equal(want) {
			t.Errorf("expires_at = %v, want %v (the end of the day in Tokyo)", exp.In(tokyo), want)
		}
	})

	for _, tt := range []struct {
		name   string
		change func(url.Values)
		field  string // the field whose error shows
		msg    string
		kept   string // a typed value still on the page
	}{
		{"NameEmpty", func(v url.Values) { v.Set("name", "  ") }, "name", "Give the key a name", `value="` + tokyoDay(30) + `"`},
		{"NoTeam", func(v url.Values) { v.Set("team", ""); v.Set("member", "") }, "team", "Choose the team", `value="batch job"`},
		{"UnknownTeam", func(v url.Values) { v.Set("team", o.other.team); v.Set("member", "") }, "team", "does not exist in this organization", `value="batch job"`},
		{"MemberOfAnotherTeam", func(v url.Values) { v.Set("member", otherMember) }, "member", "bob@example.com is not in team research", `<option value="pro" selected`},
		{"NoPlan", func(v url.Values) { v.Set("plan", "") }, "plan", "Choose a plan", `value="batch job"`},
		{"UnknownPlan", func(v url.Values) { v.Set("plan", "gold") }, "plan", "does not exist", `value="batch job"`},
		{"ExpiryInThePast", func(v url.Values) { v.Set("expires", tokyoDay(-1)) }, "expires", "must be in the future", `value="` + tokyoDay(-1) + `"`},
		{"ExpiryNotADate", func(v url.Values) { v.Set("expires", "next week") }, "expires", "Enter a date", `value="next week"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := o.users["owner"]
			b.mustPage(path, 200)
			v := valid()
			tt.change(v)
			body, _ := b.mustForm(path, v, http.StatusBadRequest)
			mustContain(t, body, `id="f-`+tt.field+`-error"`, tt.msg, tt.kept, `aria-invalid="true"`)
			if secretRE.MatchString(body) {
				t.Error("a refused form shows a secret")
			}
		})
	}

	t.Run("Forbidden", func(t *testing.T) {
		for _, tt := range []struct {
			role   string
			team   string
			status int
		}{
			{"viewer", o.tn.team, 403},
			{"team_admin", o.team2, 403},
			{"team_admin_other", o.tn.team, 403},
			{"other_owner", o.tn.team, 404},
		} {
			b := o.users[tt.role]
			b.mustPage("/console/account", 200) // a CSRF token of their own session
			v := valid()
			v.Set("team", tt.team)
			v.Del("member")
			body, _ := b.mustForm(path, v, tt.status)
			if secretRE.MatchString(body) {
				t.Errorf("%s: a refused form shows a secret", tt.role)
			}
		}
		// Nothing was created by the refused forms.
		var n int
		if err := s.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM api_keys WHERE org_id = $1 AND name = 'batch job' AND team_id <> $2`,
			o.tn.org, o.tn.team).Scan(&n); err != nil || n != 0 {
			t.Errorf("keys created by refused forms: %d (%v)", n, err)
		}
	})
}

func TestConsoleKeysRevoke(t *testing.T) {
	s := mustServer(t)
	o := s.mustConsoleOrgs(t, "kr")
	team2Key, team2Secret := s.mustKey(t, o.tn.org, o.team2, "sales-bot")
	revoke := func(org, key string) string { return keysPath(org) + "/" + key + "/revoke" }

	t.Run("Refused", func(t *testing.T) {
		for _, tt := range []struct {
			role, path string
			status     int
		}{
			{"viewer", revoke(o.tn.org, o.tn.key), 403},
			{"team_admin", revoke(o.tn.org, team2Key), 403},
			{"team_admin_other", revoke(o.tn.org, o.tn.key), 403},
			{"other_owner", revoke(o.tn.org, o.tn.key), 404},
			// Another org's key, guessed into the user's own org's URL.
			{"other_owner", revoke(o.other.org, o.tn.key), 404},
			{"owner", revoke(o.tn.org, o.other.key), 404},
			{"owner", revoke(o.tn.org, "not-a-uuid"), 404},
		} {
			b := o.users[tt.role]
			b.mustPage(tt.path, tt.status)
			b.mustPage("/console/account", 200)
			b.mustForm(tt.path, nil, tt.status)
		}
		// The keys still work.
		for _, secret := range []string{o.tn.secret, team2Secret, o.other.secret} {
			if resp, b := s.do(t, "POST", "/v1/chat/completions", secret, chatBody("demo-mini", `,"max_tokens":5`)); resp.StatusCode != 200 {
				t.Errorf("chat after refused revokes: %d %s", resp.StatusCode, b)
			}
		}
	})

	t.Run("OK", func(t *testing.T) {
		b := o.users["team_admin"]
		// Warm the gateway's key cache, so the revoke must drop it.
		if resp, rb := s.do(t, "POST", "/v1/chat/completions", o.tn.secret, chatBody("demo-mini", `,"max_tokens":5`)); resp.StatusCode != 200 {
			t.Fatalf("chat: %d %s", resp.StatusCode, rb)
		}
		confirm := b.mustPage(revoke(o.tn.org, o.tn.key), 200)
		mustContain(t, confirm, "Revoke the key “ci”", o.tn.secret[:10]+"…", "refused from the moment you confirm", `class="danger"`)
		_, loc := b.mustForm(revoke(o.tn.org, o.tn.key), nil, http.StatusSeeOther)
		if loc != keysPath(o.tn.org) {
			t.Fatalf("revoke redirects to %q", loc)
		}
		list := b.mustPage(loc, 200)
		mustContain(t, list, "Key “ci” revoked", `<span class="pill bad">revoked</span>`)
		resp, rb := s.do(t, "POST", "/v1/chat/completions", o.tn.secret, chatBody("demo-mini", `,"max_tokens":5`))
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("chat with the revoked key: %d %s, want 401", resp.StatusCode, rb)
		}
		audit := o.users["owner"].mustPage("/console/orgs/"+o.tn.org+"/audit", 200)
		mustContain(t, audit, "key.revoke", "kr-team-admin@example.com", "key "+o.tn.key)
		// Revoking again says so.
		b.mustPage("/console/account", 200)
		_, loc = b.mustForm(revoke(o.tn.org, o.tn.key), nil, http.StatusSeeOther)
		mustContain(t, b.mustPage(loc, 200), "already revoked")
	})
}

// TestConsoleKeysThousand renders a page of 1,000 keys. The page reads a fixed number of
// statements by construction (the org, one list statement with each key's last use as a
// correlated subquery, one statement for the form's choices), so it stays fast at any size.
func TestConsoleKeysThousand(t *testing.T) {
	s := mustServer(t)
	tn := s.mustTenant(t, "free")
	b := s.mustUser(t, "many@example.com", "owner", tn.org, "")
	ctx := context.Background()
	if _, err := s.db.Pool.Exec(ctx, `INSERT INTO api_keys (id, org_id, team_id, name, plan, key_hash, prefix, created_at)
		SELECT gen_random_uuid(), $1, $2, 'bulk-' || lpad(g::text, 4, '0'), 'free', sha256(g::text::bytea), 'ysk-' || lpad(g::text, 6, '0'),
			now() - g * interval '1 minute'
		FROM generate_series(1, 1000) g`, tn.org, tn.team); err != nil {
		t.Fatal(err)
	}
	if resp, rb := s.do(t, "POST", "/v1/chat/completions", tn.secret, chatBody("demo-mini", `,"max_tokens":5`)); resp.StatusCode != 200 {
		t.Fatalf("chat: %d %s", resp.StatusCode, rb)
	}
	body := b.mustPage(keysPath(tn.org), 200)
	if n := strings.Count(body, "<td>bulk-"); n != 1000 {
		t.Errorf("the page lists %d bulk keys, want 1000", n)
	}
	mustContain(t, body, "bulk-0001", "bulk-1000", "(1,001)")
	if n := strings.Count(body, "/revoke"); n != 1001 {
		t.Errorf("%d revoke links, want 1001", n)
	}
}

// rowOf returns the table row of body that contains marker.
func rowOf(t *testing.T, body, marker string) string {
	t.Helper()
	for _, row := range strings.Split(body, "<tr") {
		if strings.Contains(row, marker) {
			return row
		}
	}
	t.Fatalf("no row contains %q", marker)
	return ""
}

func TestConsoleKeysNoTeam(t *testing.T) {
	s := mustServer(t)
	org := s.admin(t, "POST", "/admin/v1/orgs", `{"name":"Empty"}`, 201)["id"].(string)
	body := s.mustUser(t, "first@example.com", "owner", org, "").mustPage(keysPath(org), 200)
	mustContain(t, body, "has no API key yet", "Create a team", `href="/console/orgs/`+org+`/teams"`)
	mustNotContain(t, body, `action="`+keysPath(org)+`"`)
	body = s.mustUser(t, "look@example.com", "viewer", org, "").mustPage(keysPath(org), 200)
	mustNotContain(t, body, "Create a team")
}
