package web_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"yosan/app"
)

const missingUUID = "7f3b1c2e-0000-4000-8000-000000000001"

func TestAdminAuth(t *testing.T) {
	s := mustServer(t)
	tests := []struct {
		name   string
		header string
		path   string
		msg    string
	}{
		{"ErrMissing", "", "/admin/v1/orgs", "missing admin token: send it as 'Authorization: Bearer <token>'"},
		{"ErrWrong", "Bearer " + adminToken + "x", "/admin/v1/orgs", "invalid admin token"},
		{"ErrBasic", "Basic " + adminToken, "/admin/v1/orgs", "missing admin token"},
		{"ErrEmptyBearer", "Bearer ", "/admin/v1/orgs", "missing admin token"},
		{"ErrUnknownRouteWithoutToken", "", "/admin/v1/nope", "missing admin token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest("POST", s.url+tt.path, strings.NewReader(`{"name":"Acme"}`))
			if err != nil {
				t.Fatal(err)
			}
			if tt.header != "" {
				req.Header.Set("Authorization", tt.header)
			}
			resp, b := s.send(t, req)
			mustAPIError(t, resp, b, 401, "authentication_error", "invalid_api_key", nil, tt.msg)
		})
	}
	t.Run("LowercaseScheme", func(t *testing.T) {
		req, err := http.NewRequest("POST", s.url+"/admin/v1/orgs", strings.NewReader(`{"name":"Acme"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "bearer "+adminToken)
		if resp, b := s.send(t, req); resp.StatusCode != 201 {
			t.Errorf("HTTP %d %s", resp.StatusCode, b)
		}
	})
	t.Run("ErrUnknownRoute", func(t *testing.T) {
		resp, b := s.do(t, "GET", "/admin/v1/nope", adminToken, "")
		mustAPIError(t, resp, b, 404, "invalid_request_error", "not_found", nil, "no such endpoint: GET /admin/v1/nope")
	})
}

func TestAdminOrgs(t *testing.T) {
	s := mustServer(t)
	t.Run("Defaults", func(t *testing.T) {
		o := s.admin(t, "POST", "/admin/v1/orgs", `{"name":"  Acme  "}`, 201)
		if o["name"] != "Acme" || o["currency"] != "JPY" || o["timezone"] != "Asia/Tokyo" || o["usd_jpy"] != "150" {
			t.Errorf("org %v", o)
		}
		if uuid.Validate(o["id"].(string)) != nil {
			t.Errorf("id %v", o["id"])
		}
		got := s.admin(t, "GET", "/admin/v1/orgs/"+o["id"].(string), "", 200)
		for _, k := range []string{"id", "name", "currency", "timezone", "usd_jpy"} {
			if got[k] != o[k] {
				t.Errorf("GET %s = %v, POST answered %v", k, got[k], o[k])
			}
		}
	})
	// The created_at a create answers is the one every later read answers (PostgreSQL keeps
	// microseconds).
	t.Run("CreatedAtMatchesGet", func(t *testing.T) {
		o := s.admin(t, "POST", "/admin/v1/orgs", `{"name":"Acme"}`, 201)
		got := s.admin(t, "GET", "/admin/v1/orgs/"+o["id"].(string), "", 200)
		if got["created_at"] != o["created_at"] {
			t.Errorf("GET created_at = %v, POST answered %v", got["created_at"], o["created_at"])
		}
	})
	tests := []struct {
		name                 string
		body                 string
		currency, tz, usdJPY string
	}{
		{"USD", `{"name":"B","currency":"USD"}`, "USD", "Asia/Tokyo", "150"},
		{"LowercaseCurrency", `{"name":"B","currency":"usd"}`, "USD", "Asia/Tokyo", "150"},
		{"ExplicitJPY", `{"name":"B","currency":"JPY","timezone":"UTC","usd_jpy":"151.25"}`, "JPY", "UTC", "151.25"},
		{"RateNumber", `{"name":"B","timezone":"America/New_York","usd_jpy":149.5}`, "JPY", "America/New_York", "149.5"},
		{"RateNull", `{"name":"B","usd_jpy":null}`, "JPY", "Asia/Tokyo", "150"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := s.admin(t, "POST", "/admin/v1/orgs", tt.body, 201)
			if o["currency"] != tt.currency || o["timezone"] != tt.tz || o["usd_jpy"] != tt.usdJPY {
				t.Errorf("org %v, want %s %s %s", o, tt.currency, tt.tz, tt.usdJPY)
			}
		})
	}
	errTests := []struct {
		name string
		body string
		msg  string
	}{
		{"ErrCurrency", `{"name":"B","currency":"EUR"}`, `'currency' must be JPY or USD, not "EUR"`},
		{"ErrTimeZone", `{"name":"B","timezone":"Mars/Olympus_Mons"}`, `'timezone' "Mars/Olympus_Mons" is not an IANA time zone name`},
		{"ErrTimeZoneLocal", `{"name":"B","timezone":"Local"}`, `'timezone' "Local" is not an IANA time zone name`},
		{"ErrRateZero", `{"name":"B","usd_jpy":"0"}`, `'usd_jpy' must be a positive decimal string`},
		{"ErrRateText", `{"name":"B","usd_jpy":"abc"}`, `invalid JSON body`},
		{"ErrRateNegative", `{"name":"B","usd_jpy":-150}`, `invalid JSON body`},
		{"ErrRateTooPrecise", `{"name":"B","usd_jpy":"150.1234567"}`, `invalid JSON body`},
		{"ErrUnknownField", `{"name":"B","plan":"pro"}`, `invalid JSON body: unknown field "plan"`},
		{"ErrMissingName", `{"currency":"JPY"}`, `'name' is required`},
		{"ErrBlankName", `{"name":"   "}`, `'name' is required`},
		{"ErrMalformed", `{"name":`, `invalid JSON body`},
		{"ErrEmpty", ``, `invalid JSON body: the body is empty`},
		{"ErrTrailingData", `{"name":"B"} {"name":"C"}`, `invalid JSON body: unexpected data after the object`},
		{"ErrNameNotString", `{"name":5}`, `invalid JSON body`},
	}
	for _, tt := range errTests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := s.do(t, "POST", "/admin/v1/orgs", adminToken, tt.body)
			mustAPIError(t, resp, b, 400, "invalid_request_error", "invalid_request", nil, tt.msg)
		})
	}
	t.Run("ErrNotFound", func(t *testing.T) {
		for _, id := range []string{missingUUID, "not-a-uuid"} {
			resp, b := s.do(t, "GET", "/admin/v1/orgs/"+id, adminToken, "")
			mustAPIError(t, resp, b, 404, "invalid_request_error", "not_found", nil, `org "`+id+`" not found`)
		}
	})
	t.Run("NoOrgsFromRefusedRequests", func(t *testing.T) {
		var n int
		if err := s.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM orgs`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 2+len(tests) {
			t.Errorf("%d orgs, want %d", n, 2+len(tests))
		}
	})
}

func TestAdminTeamsMembersKeys(t *testing.T) {
	s := mustServer(t)
	org := s.admin(t, "POST", "/admin/v1/orgs", `{"name":"Acme"}`, 201)["id"].(string)
	other := s.admin(t, "POST", "/admin/v1/orgs", `{"name":"Other"}`, 201)["id"].(string)
	otherTeam := s.admin(t, "POST", "/admin/v1/orgs/"+other+"/teams", `{"name":"x"}`, 201)["id"].(string)

	team := s.admin(t, "POST", "/admin/v1/orgs/"+org+"/teams", `{"name":" research "}`, 201)
	if team["name"] != "research" || team["org_id"] != org {
		t.Errorf("team %v", team)
	}
	teamID := team["id"].(string)
	team2 := s.admin(t, "POST", "/admin/v1/orgs/"+org+"/teams", `{"name":"sales"}`, 201)["id"].(string)
	member := s.admin(t, "POST", "/admin/v1/orgs/"+org+"/members", `{"email":"ai@example.com","team_id":"`+teamID+`"}`, 201)
	if member["email"] != "ai@example.com" || member["team_id"] != teamID || member["org_id"] != org {
		t.Errorf("member %v", member)
	}
	memberID := member["id"].(string)

	t.Run("Key", func(t *testing.T) {
		k := s.admin(t, "POST", "/admin/v1/orgs/"+org+"/keys", `{"name":"ci","team_id":"`+teamID+`","plan":"pro"}`, 201)
		secret, _ := k["key"].(string)
		if !strings.HasPrefix(secret, app.KeyPrefix) || len(secret) < 40 {
			t.Errorf("key %q", secret)
		}
		if k["prefix"] != secret[:len(app.KeyPrefix)+6] || k["plan"] != "pro" || k["team_id"] != teamID || k["org_id"] != org {
			t.Errorf("key %v", k)
		}
		if k["member_id"] != nil || k["revoked_at"] != nil || k["expires_at"] != nil {
			t.Errorf("key %v: want null member_id, revoked_at, expires_at", k)
		}
		// The secret is stored only as a hash.
		var n int
		if err := s.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM api_keys WHERE key_hash = sha256($1::bytea)`, []byte(secret)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("%d keys hash to the secret", n)
		}
		// The secret works at once, and is never shown again.
		if resp, b := s.do(t, "GET", "/v1/models", secret, ""); resp.StatusCode != 200 {
			t.Errorf("new key: HTTP %d %s", resp.StatusCode, b)
		}
		rev := s.admin(t, "DELETE", "/admin/v1/keys/"+k["id"].(string), "", 200)
		if _, shown := rev["key"]; shown {
			t.Errorf("DELETE answered the secret: %v", rev)
		}
		if rev["revoked_at"] == nil || rev["id"] != k["id"] {
			t.Errorf("revoked key %v", rev)
		}
	})
	t.Run("KeyWithMemberAndExpiry", func(t *testing.T) {
		exp := time.Now().Add(24 * time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
		k := s.admin(t, "POST", "/admin/v1/orgs/"+org+"/keys", `{"name":"m","team_id":"`+teamID+`","member_id":"`+memberID+`","plan":"free","expires_at":"`+exp+`"}`, 201)
		if k["member_id"] != memberID || k["expires_at"] != exp {
			t.Errorf("key %v, want member %s expires %s", k, memberID, exp)
		}
	})
	errTests := []struct {
		name   string
		path   string
		body   string
		status int
		code   string
		msg    string
	}{
		{"ErrTeamUnknownOrg", "/admin/v1/orgs/" + missingUUID + "/teams", `{"name":"x"}`, 404, "not_found", "not found"},
		{"ErrTeamBadOrgID", "/admin/v1/orgs/nope/teams", `{"name":"x"}`, 404, "not_found", `org "nope" not found`},
		{"ErrTeamNoName", "/admin/v1/orgs/" + org + "/teams", `{"name":""}`, 400, "invalid_request", "'name' is required"},
		{"ErrTeamUnknownField", "/admin/v1/orgs/" + org + "/teams", `{"name":"x","budget":1}`, 400, "invalid_request", `unknown field "budget"`},
		{"ErrMemberUnknownOrg", "/admin/v1/orgs/" + missingUUID + "/members", `{"email":"b@example.com","team_id":"` + teamID + `"}`, 404, "not_found", "not found"},
		{"ErrMemberUnknownTeam", "/admin/v1/orgs/" + org + "/members", `{"email":"b@example.com","team_id":"` + missingUUID + `"}`, 404, "not_found", `team "` + missingUUID + `" not found`},
		{"ErrMemberOtherOrgsTeam", "/admin/v1/orgs/" + org + "/members", `{"email":"b@example.com","team_id":"` + otherTeam + `"}`, 404, "not_found", "not found"},
		{"ErrMemberNoTeam", "/admin/v1/orgs/" + org + "/members", `{"email":"b@example.com"}`, 400, "invalid_request", "'team_id' is required"},
		{"ErrMemberBadEmail", "/admin/v1/orgs/" + org + "/members", `{"email":"nobody","team_id":"` + teamID + `"}`, 400, "invalid_request", "'email' must be an email address"},
		{"ErrMemberEmailSpace", "/admin/v1/orgs/" + org + "/members", `{"email":"a b@example.com","team_id":"` + teamID + `"}`, 400, "invalid_request", "'email' must be an email address"},
		{"ErrMemberDuplicate", "/admin/v1/orgs/" + org + "/members", `{"email":"ai@example.com","team_id":"` + team2 + `"}`, 409, "conflict", `member "ai@example.com" already exists in this org`},
		{"ErrKeyUnknownOrg", "/admin/v1/orgs/" + missingUUID + "/keys", `{"team_id":"` + teamID + `","plan":"free"}`, 404, "not_found", "not found"},
		{"ErrKeyUnknownTeam", "/admin/v1/orgs/" + org + "/keys", `{"team_id":"` + missingUUID + `","plan":"free"}`, 404, "not_found", "not found"},
		{"ErrKeyOtherOrgsTeam", "/admin/v1/orgs/" + org + "/keys", `{"team_id":"` + otherTeam + `","plan":"free"}`, 404, "not_found", "not found"},
		{"ErrKeyUnknownMember", "/admin/v1/orgs/" + org + "/keys", `{"team_id":"` + teamID + `","member_id":"` + missingUUID + `","plan":"free"}`, 404, "not_found", "not found"},
		{"ErrKeyMemberNotInTeam", "/admin/v1/orgs/" + org + "/keys", `{"team_id":"` + team2 + `","member_id":"` + memberID + `","plan":"free"}`, 400, "invalid_request", "member " + memberID + " is not in team " + team2},
		{"ErrKeyUnknownPlan", "/admin/v1/orgs/" + org + "/keys", `{"team_id":"` + teamID + `","plan":"platinum"}`, 400, "invalid_request", `plan "platinum" does not exist`},
		{"ErrKeyNoPlan", "/admin/v1/orgs/" + org + "/keys", `{"team_id":"` + teamID + `"}`, 400, "invalid_request", "'plan' is required"},
		{"ErrKeyNoTeam", "/admin/v1/orgs/" + org + "/keys", `{"plan":"free"}`, 400, "invalid_request", "'team_id' is required"},
		{"ErrKeyExpired", "/admin/v1/orgs/" + org + "/keys", `{"team_id":"` + teamID + `","plan":"free","expires_at":"2020-01-01T00:00:00Z"}`, 400, "invalid_request", "'expires_at' must be in the future"},
		{"ErrKeySecretField", "/admin/v1/orgs/" + org + "/keys", `{"team_id":"` + teamID + `","plan":"free","key":"ysk-mine"}`, 400, "invalid_request", `unknown field "key"`},
	}
	for _, tt := range errTests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := s.do(t, "POST", tt.path, adminToken, tt.body)
			mustAPIError(t, resp, b, tt.status, "invalid_request_error", tt.code, nil, tt.msg)
		})
	}
}

func TestAdminRevokeKey(t *testing.T) {
	s := mustServer(t)
	tn := s.mustTenant(t, "free")
	// Authenticated once, so the key is in the gateway's cache (TTL one hour).
	if resp, b := s.do(t, "POST", "/v1/chat/completions", tn.secret, chatBody("demo-mini", `,"max_tokens":3`)); resp.StatusCode != 200 {
		t.Fatalf("HTTP %d %s", resp.StatusCode, b)
	}
	first := s.admin(t, "DELETE", "/admin/v1/keys/"+tn.key, "", 200)
	t.Run("RevokedAtOnce", func(t *testing.T) {
		resp, b := s.do(t, "POST", "/v1/chat/completions", tn.secret, chatBody("demo-mini", `,"max_tokens":3`))
		mustAPIError(t, resp, b, 401, "authentication_error", "invalid_api_key", nil, "this API key has been revoked")
		resp, b = s.do(t, "GET", "/v1/models", tn.secret, "")
		mustAPIError(t, resp, b, 401, "authentication_error", "invalid_api_key", nil, "this API key has been revoked")
	})
	t.Run("Idempotent", func(t *testing.T) {
		again := s.admin(t, "DELETE", "/admin/v1/keys/"+tn.key, "", 200)
		if again["revoked_at"] != first["revoked_at"] {
			t.Errorf("revoked_at moved from %v to %v", first["revoked_at"], again["revoked_at"])
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		for _, id := range []string{missingUUID, "nope"} {
			resp, b := s.do(t, "DELETE", "/admin/v1/keys/"+id, adminToken, "")
			mustAPIError(t, resp, b, 404, "invalid_request_error", "not_found", nil, `key "`+id+`" not found`)
		}
	})
}

func TestAdminBudgets(t *testing.T) {
	s := mustServer(t)
	tn := s.mustTenant(t, "free")
	period := app.Period(time.Now(), mustTokyo(t))
	nodes := []struct{ kind, id string }{{"org", tn.org}, {"team", tn.team}, {"member", tn.member}, {"key", tn.key}}
	tests := []struct {
		name      string
		body      string
		cap       any
		remaining any
	}{
		{"String", `{"cap":"1000"}`, "1000", "1000"},
		{"Number", `{"cap":1000}`, "1000", "1000"},
		{"Fraction", `{"cap":"1000.5"}`, "1000.5", "1000.5"},
		{"NumberFraction", `{"cap":0.000001}`, "0.000001", "0.000001"},
		{"Zero", `{"cap":"0"}`, "0", "0"},
		{"NullRemovesCap", `{"cap":null}`, nil, nil},
	}
	for _, n := range nodes {
		for _, tt := range tests {
			t.Run(n.kind+"/"+tt.name, func(t *testing.T) {
				path := "/admin/v1/budgets/" + n.kind + "/" + n.id
				b := s.admin(t, "PUT", path, tt.body, 200)
				want := map[string]any{"kind": n.kind, "id": n.id, "period": period, "currency": "JPY",
					"cap": tt.cap, "reserved": "0", "spent": "0", "remaining": tt.remaining, "last_alert_threshold": 0.0}
				for k, v := range want {
					if b[k] != v {
						t.Errorf("PUT %s = %v, want %v", k, b[k], v)
					}
				}
				if fmt.Sprint(b["thresholds"]) != "[50 80 90 100]" {
					t.Errorf("thresholds %v, want the defaults", b["thresholds"])
				}
				if len(b) != len(want)+1 {
					t.Errorf("budget %v has other members", b)
				}
				got := s.admin(t, "GET", path, "", 200)
				for k, v := range want {
					if got[k] != v {
						t.Errorf("GET %s = %v, want %v", k, got[k], v)
					}
				}
			})
		}
	}
	t.Run("Global", func(t *testing.T) {
		b := s.admin(t, "PUT", "/admin/v1/budgets/global", `{"cap":"5000"}`, 200)
		if b["kind"] != "global" || b["id"] != app.GlobalNodeID || b["cap"] != "5000" || b["currency"] != "JPY" || b["period"] != period {
			t.Errorf("global budget %v", b)
		}
		if got := s.admin(t, "GET", "/admin/v1/budgets/global", "", 200); got["cap"] != "5000" {
			t.Errorf("GET global %v", got)
		}
		if got := s.admin(t, "PUT", "/admin/v1/budgets/global", `{"cap":null}`, 200); got["cap"] != nil {
			t.Errorf("global after null %v", got)
		}
	})
	t.Run("CapAppliesToRequests", func(t *testing.T) {
		s.admin(t, "PUT", "/admin/v1/budgets/key/"+tn.key, `{"cap":"0"}`, 200)
		resp, b := s.do(t, "POST", "/v1/chat/completions", tn.secret, chatBody("demo-mini", `,"max_tokens":3`))
		mustAPIError(t, resp, b, 429, "budget_exceeded", "budget_exceeded", "key:"+tn.key, "budget exceeded")
		s.admin(t, "PUT", "/admin/v1/budgets/key/"+tn.key, `{"cap":null}`, 200)
		if resp, b := s.do(t, "POST", "/v1/chat/completions", tn.secret, chatBody("demo-mini", `,"max_tokens":3`)); resp.StatusCode != 200 {
			t.Errorf("after removing the cap: HTTP %d %s", resp.StatusCode, b)
		}
	})
	errTests := []struct {
		name   string
		method string
		path   string
		body   string
		status int
		code   string
		msg    string
	}{
		{"ErrText", "PUT", "/admin/v1/budgets/org/" + tn.org, `{"cap":"abc"}`, 400, "invalid_request", "invalid JSON body"},
		{"ErrNegative", "PUT", "/admin/v1/budgets/org/" + tn.org, `{"cap":"-1"}`, 400, "invalid_request", "invalid JSON body"},
		{"ErrNegativeNumber", "PUT", "/admin/v1/budgets/org/" + tn.org, `{"cap":-1}`, 400, "invalid_request", "invalid JSON body"},
		{"ErrBool", "PUT", "/admin/v1/budgets/org/" + tn.org, `{"cap":true}`, 400, "invalid_request", "invalid JSON body"},
		{"ErrMissingCap", "PUT", "/admin/v1/budgets/org/" + tn.org, `{}`, 400, "invalid_request", "give 'cap'"},
		{"ErrUnknownField", "PUT", "/admin/v1/budgets/org/" + tn.org, `{"cap":"1","limit":"2"}`, 400, "invalid_request", `unknown field "limit"`},
		{"ErrUnknownKind", "PUT", "/admin/v1/budgets/user/" + tn.org, `{"cap":"1"}`, 400, "invalid_request", `unknown budget kind "user"`},
		{"ErrUnknownKindGet", "GET", "/admin/v1/budgets/orgs/" + tn.org, ``, 400, "invalid_request", `unknown budget kind "orgs"`},
		{"ErrUnknownOrg", "PUT", "/admin/v1/budgets/org/" + missingUUID, `{"cap":"1"}`, 404, "not_found", `org "` + missingUUID + `" not found`},
		{"ErrUnknownTeam", "GET", "/admin/v1/budgets/team/" + missingUUID, ``, 404, "not_found", `team "` + missingUUID + `" not found`},
		{"ErrUnknownMember", "PUT", "/admin/v1/budgets/member/" + missingUUID, `{"cap":"1"}`, 404, "not_found", "not found"},
		{"ErrUnknownKey", "GET", "/admin/v1/budgets/key/" + missingUUID, ``, 404, "not_found", "not found"},
		{"ErrBadID", "GET", "/admin/v1/budgets/org/nope", ``, 404, "not_found", `org "nope" not found`},
		{"ErrTeamIDAsOrg", "GET", "/admin/v1/budgets/org/" + tn.team, ``, 404, "not_found", "not found"},
	}
	for _, tt := range errTests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := s.do(t, tt.method, tt.path, adminToken, tt.body)
			mustAPIError(t, resp, b, tt.status, "invalid_request_error", tt.code, nil, tt.msg)
		})
	}
}

func mustTokyo(tb testing.TB) *time.Location {
	tb.Helper()
	loc, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		tb.Fatal(err)
	}
	return loc
}

func TestAdminReservations(t *testing.T) {
	s := mustServer(t)
	tn := s.mustTenant(t, "free")
	var ids []string
	for i := 0; i < 3; i++ {
		resp, b := s.do(t, "POST", "/v1/chat/completions", tn.secret, chatBody("demo-mini", `,"max_tokens":3`))
		if resp.StatusCode != 200 {
			t.Fatalf("HTTP %d %s", resp.StatusCode, b)
		}
		ids = append(ids, resp.Header.Get("x-request-id"))
	}
	// Refused by the upstream: released.
	resp, b := s.do(t, "POST", "/v1/chat/completions", tn.secret, chatBody("demo-mini", `,"max_tokens":5000`))
	if resp.StatusCode != 400 {
		t.Fatalf("HTTP %d %s", resp.StatusCode, b)
	}
	released := resp.Header.Get("x-request-id")
	list := func(t *testing.T, query string) []map[string]any {
		t.Helper()
		out := s.admin(t, "GET", "/admin/v1/orgs/"+tn.org+"/reservations"+query, "", 200)
		if out["object"] != "list" {
			t.Errorf("object %v", out["object"])
		}
		var rows []map[string]any
		for _, r := range out["data"].([]any) {
			rows = append(rows, r.(map[string]any))
		}
		return rows
	}
	t.Run("All", func(t *testing.T) {
		rows := list(t, "")
		if len(rows) != 4 {
			t.Fatalf("%d rows, want 4", len(rows))
		}
		r := rows[len(rows)-1] // oldest last
		if r["request_id"] != ids[0] || r["status"] != "committed" || r["org_id"] != tn.org || r["key_id"] != tn.key ||
			r["model"] != "demo-mini" || r["usage_source"] != "upstream" || r["currency"] != "JPY" || r["usd_jpy"] != "150" {
			t.Errorf("row %v", r)
		}
		if _, err := app.ParseMoney(r["amount"].(string)); err != nil {
			t.Errorf("amount %v: %v", r["amount"], err)
		}
		if _, err := app.ParseMoney(r["actual"].(string)); err != nil {
			t.Errorf("actual %v: %v", r["actual"], err)
		}
	})
	tests := []struct {
		name  string
		query string
		want  []string
	}{
		{"Committed", "?status=committed", ids},
		{"Released", "?status=released", []string{released}},
		{"Pending", "?status=pending", nil},
		{"Expired", "?status=expired", nil},
		{"Limit", "?status=committed&limit=1", nil}, // checked by count below
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows := list(t, tt.query)
			if tt.name == "Limit" {
				if len(rows) != 1 {
					t.Errorf("%d rows, want 1", len(rows))
				}
				return
			}
			got := map[string]bool{}
			for _, r := range rows {
				got[r["request_id"].(string)] = true
				if st := strings.TrimPrefix(tt.query, "?status="); r["status"] != st {
					t.Errorf("row status %v, want %s", r["status"], st)
				}
			}
			if len(rows) != len(tt.want) {
				t.Errorf("%d rows, want %d", len(rows), len(tt.want))
			}
			for _, id := range tt.want {
				if !got[id] {
					t.Errorf("%s missing", id)
				}
			}
		})
	}
	errTests := []struct {
		name   string
		org    string
		query  string
		status int
		code   string
		msg    string
	}{
		{"ErrStatus", tn.org, "?status=done", 400, "invalid_request", "'status' must be pending, committed, released or expired"},
		{"ErrLimitZero", tn.org, "?limit=0", 400, "invalid_request", "'limit' must be an integer from 1 to 1000"},
		{"ErrLimitTooLarge", tn.org, "?limit=1001", 400, "invalid_request", "'limit' must be an integer from 1 to 1000"},
		{"ErrLimitText", tn.org, "?limit=ten", 400, "invalid_request", "'limit' must be an integer from 1 to 1000"},
		{"ErrLimitNegative", tn.org, "?limit=-1", 400, "invalid_request", "'limit' must be an integer from 1 to 1000"},
		{"ErrUnknownOrg", missingUUID, "", 404, "not_found", "not found"},
	}
	for _, tt := range errTests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := s.do(t, "GET", "/admin/v1/orgs/"+tt.org+"/reservations"+tt.query, adminToken, "")
			mustAPIError(t, resp, b, tt.status, "invalid_request_error", tt.code, nil, tt.msg)
		})
	}
	t.Run("LimitBounds", func(t *testing.T) {
		if rows := list(t, "?limit=1000"); len(rows) != 4 {
			t.Errorf("%d rows, want 4", len(rows))
		}
	})
}
