package web_test

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"yosan/app"
	"yosan/db"
	"yosan/providers/demo"
)

func ledgerPath(org string, q url.Values) string {
	p := "/console/orgs/" + org + "/reservations"
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	return p
}

// mustStuck reserves a request on the tenant's key whose deadline has passed and that nobody
// settles: a stuck pending row.
func (s *server) mustStuck(t *testing.T, tn tenant, requestID string) {
	t.Helper()
	tokyo, _ := time.LoadLocation("Asia/Tokyo")
	now := time.Now()
	res, err := s.ledger.Reserve(context.Background(), app.ReserveRequest{RequestID: requestID, OrgID: tn.org, KeyID: tn.key,
		Period: app.Period(now, tokyo), Currency: app.JPY,
		Nodes: []app.Node{{Kind: app.NodeOrg, ID: tn.org}, {Kind: app.NodeTeam, ID: tn.team},
			{Kind: app.NodeMember, ID: tn.member}, {Kind: app.NodeKey, ID: tn.key}},
		Amount: 12_345_000, GlobalPeriod: app.Period(now, tokyo), GlobalCurrency: app.JPY, GlobalAmount: 12_345_000,
		Model: "demo-max", Provider: "demo", UpstreamModel: "demo-max", USDJPY: 150 * app.Micro, EstInputTokens: 10,
		MaxOutputTokens: 100, Deadline: now.Add(-time.Minute)})
	if err != nil || !res.Admitted {
		t.Fatalf("reserve %s: %+v %v", requestID, res, err)
	}
}

var ledgerRowRE = regexp.MustCompile(`<code title="([^"]+)">`)

// ledgerIDs returns the request ids of the rows of an explorer page.
func ledgerIDs(body string) []string {
	var out []string
	for _, m := range ledgerRowRE.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

func TestConsoleReservations(t *testing.T) {
	s := mustServer(t)
	o := s.mustConsoleOrgs(t, "res")
	unusedKey, _ := s.mustKey(t, o.tn.org, o.team2, "sales-bot")
	for i := 0; i < 2; i++ {
		if resp, b := s.do(t, "POST", "/v1/chat/completions", o.tn.secret, chatBody("demo-mini", `,"max_tokens":5`)); resp.StatusCode != 200 {
			t.Fatalf("chat: %d %s", resp.StatusCode, b)
		}
	}
	s.mustStuck(t, o.tn, "req-stuck-0001-abcdefghijkl")
	base := ledgerPath(o.tn.org, nil)

	t.Run("Roles", func(t *testing.T) {
		for _, role := range consoleRoles {
			want := 200
			if role == "other_owner" {
				want = 404
			}
			body := o.users[role].mustPage(base, want)
			if want == 200 && len(ledgerIDs(body)) != 3 {
				t.Errorf("%s sees %d rows, want 3", role, len(ledgerIDs(body)))
			}
		}
	})
	t.Run("Rows", func(t *testing.T) {
		body := o.users["viewer"].mustPage(base, 200)
		stuck := rowOf(t, body, "req-stuck-0001")
		mustContain(t, stuck, `class="row-stuck"`, "Stuck: deadline", "demo-max", "¥12.345",
			"org, team, member, key, global", "req-stuck-00…")
		done := rowOf(t, body, `<span class="pill ok">committed</span>`)
		mustContain(t, done, "ci", "demo-mini", "demo", "upstream", "org, team, member, key, global")
		mustNotContain(t, done, "row-stuck", "overrun")
		mustContain(t, body, "1 stuck on this page")
		if strings.Count(body, "row-stuck") != 1 {
			t.Error("want exactly one stuck row")
		}
		mustContain(t, body, time.Now().In(mustTokyo(t)).Format("2006-01-02 15:"))
	})

	owner := o.users["owner"]
	for _, tt := range []struct {
		name  string
		q     url.Values
		rows  int
		empty bool
	}{
		{"Pending", url.Values{"status": {"pending"}}, 1, false},
		{"Committed", url.Values{"status": {"committed"}}, 2, false},
		{"Released", url.Values{"status": {"released"}}, 0, true},
		{"Any", url.Values{"status": {"any"}}, 3, false},
		{"StuckOnly", url.Values{"stuck": {"1"}}, 1, false},
		{"Key", url.Values{"key": {o.tn.key}}, 3, false},
		{"OtherKey", url.Values{"key": {unusedKey}}, 0, true},
		{"Model", url.Values{"model": {"demo-mini"}}, 2, false},
		{"ModelAndStatus", url.Values{"model": {"demo-max"}, "status": {"committed"}}, 0, true},
		{"FromToday", url.Values{"from": {tokyoDay(0)}}, 3, false},
		{"ToYesterday", url.Values{"to": {tokyoDay(-1)}}, 0, true},
		{"TodayOnly", url.Values{"from": {tokyoDay(0)}, "to": {tokyoDay(0)}}, 3, false},
		{"FromTomorrow", url.Values{"from": {tokyoDay(1)}}, 0, true},
	} {
		t.Run("Filter"+tt.name, func(t *testing.T) {
			body := owner.mustPage(ledgerPath(o.tn.org, tt.q), 200)
			if got := len(ledgerIDs(body)); got != tt.rows {
				t.Errorf("%d rows, want %d", got, tt.rows)
			}
			if tt.empty {
				mustContain(t, body, "No reservation matches these filters")
			}
			// The filters stay as chosen.
			for name, v := range tt.q {
				if name == "from" || name == "to" {
					mustContain(t, body, `name="`+name+`" type="date" value="`+v[0]+`"`)
				}
			}
		})
	}
	t.Run("FilterKept", func(t *testing.T) {
		body := owner.mustPage(ledgerPath(o.tn.org, url.Values{"status": {"pending"}, "model": {"demo-max"}, "stuck": {"1"}}), 200)
		mustContain(t, body, `<option value="pending" selected`, `<option value="demo-max" selected`, `name="stuck" type="checkbox" value="1" checked`)
	})
	for _, tt := range []struct {
		name  string
		q     url.Values
		field string
	}{
		{"BadStatus", url.Values{"status": {"lost"}}, "status"},
		{"BadKey", url.Values{"key": {o.other.key}}, "key"},
		{"BadModel", url.Values{"model": {"gpt-9"}}, "model"},
		{"BadDate", url.Values{"from": {"yesterday"}}, "from"},
		{"ToBeforeFrom", url.Values{"from": {tokyoDay(0)}, "to": {tokyoDay(-2)}}, "to"},
	} {
		t.Run("Invalid"+tt.name, func(t *testing.T) {
			body := owner.mustPage(ledgerPath(o.tn.org, tt.q), 400)
			mustContain(t, body, `id="f-`+tt.field+`-error"`)
			mustNotContain(t, body, o.other.key)
		})
	}
	t.Run("Empty", func(t *testing.T) {
		body := o.users["other_owner"].mustPage(ledgerPath(o.other.org, nil), 200)
		mustContain(t, body, "The ledger is empty", "Issue an API key")
	})
}

// TestConsoleReservationsPages walks the explorer's pages: 50 rows each, keyset on
// (created_at, request_id), so rows sharing a timestamp are neither lost nor repeated.
func TestConsoleReservationsPages(t *testing.T) {
	s := mustServer(t)
	tn := s.mustTenant(t, "free")
	b := s.mustUser(t, "pages@example.com", "viewer", tn.org, "")
	if resp, rb := s.do(t, "POST", "/v1/chat/completions", tn.secret, chatBody("demo-mini", `,"max_tokens":5`)); resp.StatusCode != 200 {
		t.Fatalf("chat: %d %s", resp.StatusCode, rb)
	}
	// 120 copies of the committed row, two by two at the same instant.
	if _, err := s.db.Pool.Exec(context.Background(), `INSERT INTO reservations (request_id, org_id, key_id, period, status, currency,
			amount, actual, budget_ids, global_budget_id, global_amount, global_actual, apply_nonce, overrun, model, provider,
			upstream_model, usd_jpy, est_input_tokens, max_output_tokens, input_tokens, cached_tokens, output_tokens, usage_source,
			deadline, created_at, settled_at)
		SELECT 'bulk-' || lpad(g::text, 3, '0'), org_id, key_id, period, status, currency, amount, actual, budget_ids,
			global_budget_id, global_amount, global_actual, gen_random_uuid(), overrun, model, provider, upstream_model, usd_jpy,
			est_input_tokens, max_output_tokens, input_tokens, cached_tokens, output_tokens, usage_source, deadline,
			created_at - (g / 2) * interval '1 second', settled_at
		FROM reservations, generate_series(1, 120) g WHERE org_id = $1`, tn.org); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	path := ledgerPath(tn.org, url.Values{"status": {"committed"}})
	pages := 0
	olderRE := regexp.MustCompile(`<a href="([^"]+)" rel="next">`)
	for path != "" {
		pages++
		body := b.mustPage(strings.ReplaceAll(path, "&amp;", "&"), 200)
		ids := ledgerIDs(body)
		if pages < 3 && len(ids) != 50 {
			t.Fatalf("page %d has %d rows, want 50", pages, len(ids))
		}
		for _, id := range ids {
			if seen[id] {
				t.Errorf("row %s shown twice", id)
			}
			seen[id] = true
		}
		if pages > 1 {
			mustContain(t, body, "« Newest", "status=committed")
		}
		path = ""
		if m := olderRE.FindStringSubmatch(body); m != nil {
			path = m[1]
			if !strings.Contains(path, "status=committed") {
				t.Errorf("the older link drops the filter: %s", path)
			}
		}
		if pages > 5 {
			t.Fatal("too many pages")
		}
	}
	if pages != 3 || len(seen) != 121 {
		t.Errorf("%d pages, %d rows; want 3 pages, 121 rows", pages, len(seen))
	}
}

func TestConsoleModels(t *testing.T) {
	noWindow := &app.CatalogModel{Model: app.Model{Name: "tiny", Provider: "demo", UpstreamName: "tiny-v1", Tier: "free",
		Kind: app.KindChat, MaxOutputTokens: 2048}, Upstream: demo.New(demo.Options{}),
		Prices: []app.DatedPrice{{Price: app.Price{InputPerM: 75_000, OutputPerM: 2_500_000}}}}
	s := mustServerWith(t, noWindow)
	o := s.mustConsoleOrgs(t, "models")
	now := time.Now()
	if err := s.db.UpsertModels(context.Background(), nil, []db.ModelPrice{
		{Model: "demo-mini", From: now.AddDate(0, 0, -10), Price: app.Price{InputPerM: 100_000, CachedPerM: 50_000, OutputPerM: 400_000}},
		{Model: "demo-mini", From: now.AddDate(0, 0, 20), Price: app.Price{InputPerM: 90_000, OutputPerM: 300_000}},
	}); err != nil {
		t.Fatal(err)
	}
	path := "/console/orgs/" + o.tn.org + "/models"
	for _, role := range consoleRoles {
		want := 200
		if role == "other_owner" {
			want = 404
		}
		body := o.users[role].mustPage(path, want)
		if want != 200 {
			continue
		}
		mustContain(t, body, "config file", "<td>free</td>", "free, pro, enterprise", "demo-max", "demo-embed")
		mustNotContain(t, body, `action="`+path)
	}
	body := o.users["viewer"].mustPage(path, 200)
	tiny := rowOf(t, body, "<td>tiny</td>")
	mustContain(t, tiny, "tiny-v1", "unknown", "2,048", "$0.075 / $0.00 / $2.50", "from the start", "in force")
	mini := rowOf(t, body, "<td>demo-mini</td>")
	tokyo := mustTokyo(t)
	mustContain(t, mini, "128,000", "$0.10 / $0.05 / $0.40", "from "+now.AddDate(0, 0, -10).In(tokyo).Format("2006-01-02"),
		"$0.09 / $0.00 / $0.30", "from "+now.AddDate(0, 0, 20).In(tokyo).Format("2006-01-02")+" (scheduled)")
	if strings.Count(mini, "in force") != 1 {
		t.Errorf("demo-mini has %d prices in force, want 1", strings.Count(mini, "in force"))
	}
	// The price in force is the one from ten days ago.
	current := mini[strings.Index(mini, "$0.10 / $0.05 / $0.40"):]
	if !strings.Contains(current[:strings.Index(current, "</li>")], "in force") {
		t.Errorf("the price from ten days ago is not marked in force: %s", mini)
	}
}

func TestConsoleAudit(t *testing.T) {
	s := mustServer(t)
	o := s.mustConsoleOrgs(t, "audit")
	ctx := context.Background()
	for i := 1; i <= 60; i++ {
		if err := s.db.Audit(ctx, db.AuditEntry{Actor: "ann@example.com", OrgID: o.tn.org, Action: "key.create", TargetKind: "key",
			TargetID: fmt.Sprintf("k%02d", i), Details: map[string]any{"name": fmt.Sprintf("key %02d", i), "plan": "free"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.db.Audit(ctx, db.AuditEntry{Actor: "fin@example.com", OrgID: o.tn.org, Action: "budget.cap_set", TargetKind: "org",
		TargetID: o.tn.org, Details: map[string]any{"cap": "1000000"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Audit(ctx, db.AuditEntry{Actor: "spy@example.com", OrgID: o.other.org, Action: "budget.cap_set"}); err != nil {
		t.Fatal(err)
	}
	path := "/console/orgs/" + o.tn.org + "/audit"
	for _, tt := range []struct {
		role   string
		status int
	}{{"owner", 200}, {"finance_admin", 200}, {"operator", 200}, {"team_admin", 403}, {"team_admin_other", 403}, {"viewer", 403}, {"other_owner", 404}} {
		body := o.users[tt.role].mustPage(path, tt.status)
		if tt.status != 200 {
			mustNotContain(t, body, "key.create", "ann@example.com")
		}
	}
	b := o.users["finance_admin"]
	first := b.mustPage(path, 200)
	mustContain(t, first, "budget.cap_set", "fin@example.com", "cap=1000000", "org "+o.tn.org, `name=&#34;key 60&#34; plan=free`)
	mustNotContain(t, first, "spy@example.com", "key 10")
	if n := strings.Count(first, "<code>key.create</code>"); n != 49 {
		t.Errorf("first page: %d key entries, want 49", n)
	}
	older := regexp.MustCompile(`<a href="([^"]+)" rel="next">`).FindStringSubmatch(first)
	if older == nil {
		t.Fatal("no older link")
	}
	second := b.mustPage(older[1], 200)
	mustContain(t, second, "key 11", "key 01", "« Newest")
	mustNotContain(t, second, "key 12", "budget.cap_set", `rel="next"`)

	budget := b.mustPage(path+"?action=budget.", 200)
	mustContain(t, budget, "budget.cap_set", `<option value="budget." selected`)
	mustNotContain(t, budget, "<code>key.create</code>")
	keys := b.mustPage(path+"?action=key.", 200)
	mustNotContain(t, keys, "<code>budget.cap_set</code>")
	b.mustPage(path+"?action=drop+table", 400)
	mustContain(t, b.mustPage(path+"?action=invoice.", 200), "No entry of this kind yet")
}
