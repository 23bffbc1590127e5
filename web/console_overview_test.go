package web_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"yosan/app"
	"yosan/web/views"
)

// overbiller is an upstream that answers every chat with a usage far above any reservation (a
// tool run, image input): the gateway commits the true cost and flags an overrun.
type overbiller struct{ panicky }

func (overbiller) ChatCompletion(context.Context, *app.ProviderRequest) (*app.ProviderResponse, error) {
	body := `{"id":"chatcmpl-over","object":"chat.completion","created":1767225600,"model":"overbill",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":1000000,"completion_tokens":1000000,"total_tokens":2000000}}`
	return &app.ProviderResponse{Body: []byte(body), HasUsage: true,
		Usage: app.Usage{PromptTokens: 1_000_000, CompletionTokens: 1_000_000}}, nil
}

// overbillModel costs $1 per 1M input and $2 per 1M output tokens: one overbilled answer is
// $3 = ¥450 at the test orgs' 150 JPY/USD.
func overbillModel() *app.CatalogModel {
	return &app.CatalogModel{Model: app.Model{Name: "overbill", Provider: "overbill", UpstreamName: "overbill", Tier: "free",
		Kind: app.KindChat, MaxOutputTokens: 100}, Upstream: overbiller{},
		Prices: []app.DatedPrice{{Price: app.Price{InputPerM: 1_000_000, OutputPerM: 2_000_000}}}}
}

// consoleOrgs is a tenant with a second team, the console users of every role, and another org
// with its owner.
type consoleOrgs struct {
	tn, other tenant
	team2     string
	users     map[string]*browserClient
}

// consoleRoles are the users mustConsoleOrgs creates, by a name that says what they are.
var consoleRoles = []string{"owner", "finance_admin", "team_admin", "team_admin_other", "viewer", "operator", "other_owner"}

func (s *server) mustConsoleOrgs(t *testing.T, prefix string) consoleOrgs {
	t.Helper()
	o := consoleOrgs{tn: s.mustTenant(t, "free"), other: s.mustTenant(t, "free"), users: map[string]*browserClient{}}
	o.team2 = s.admin(t, "POST", "/admin/v1/orgs/"+o.tn.org+"/teams", `{"name":"sales"}`, 201)["id"].(string)
	for _, role := range consoleRoles {
		email := prefix + "-" + strings.ReplaceAll(role, "_", "-") + "@example.com"
		switch role {
		case "team_admin":
			o.users[role] = s.mustUser(t, email, role, o.tn.org, o.tn.team)
		case "team_admin_other":
			o.users[role] = s.mustUser(t, email, "team_admin", o.tn.org, o.team2)
		case "other_owner":
			o.users[role] = s.mustUser(t, email, "owner", o.other.org, "")
		default:
			o.users[role] = s.mustUser(t, email, role, o.tn.org, "")
		}
	}
	return o
}

func mustContain(t *testing.T, body string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("page does not contain %q", w)
		}
	}
}

func mustNotContain(t *testing.T, body string, unwanted ...string) {
	t.Helper()
	for _, w := range unwanted {
		if strings.Contains(body, w) {
			t.Errorf("page contains %q", w)
		}
	}
}

func (s *server) orgSpent(t *testing.T, kind, id string) (spent, reserved int64) {
	t.Helper()
	err := s.db.Pool.QueryRow(context.Background(), `SELECT coalesce(sum(spent), 0), coalesce(sum(reserved), 0)
		FROM budgets WHERE node_kind = $1 AND node_id = $2`, kind, id).Scan(&spent, &reserved)
	if err != nil {
		t.Fatal(err)
	}
	return spent, reserved
}

func TestConsoleOverview(t *testing.T) {
	s := mustServerWith(t, overbillModel())
	o := s.mustConsoleOrgs(t, "ov")
	path := "/console/orgs/" + o.tn.org

	t.Run("Roles", func(t *testing.T) {
		for _, role := range consoleRoles {
			t.Run(role, func(t *testing.T) {
				if role == "other_owner" {
					o.users[role].mustPage(path, 404)
					return
				}
				body := o.users[role].mustPage(path, 200)
				mustContain(t, body, "Spent this month", "Projected month-end")
			})
		}
	})

	t.Run("Empty", func(t *testing.T) {
		body := o.users["viewer"].mustPage(path, 200)
		mustContain(t, body, "No requests this month yet", "/console/orgs/"+o.tn.org+"/keys", s.url+"/v1", "No cap")
	})

	// Real requests through /v1 with the tenant's key: two ordinary ones, then one the upstream
	// overbills after the key got a ¥100 cap (an overrun: spent passes the cap).
	var ids []string
	for range 2 {
		resp, b := s.do(t, "POST", "/v1/chat/completions", o.tn.secret, chatBody("demo-mini", `,"max_tokens":10`))
		if resp.StatusCode != 200 {
			t.Fatalf("chat: %d %s", resp.StatusCode, b)
		}
		ids = append(ids, resp.Header.Get("x-request-id"))
	}
	s.admin(t, "PUT", "/admin/v1/budgets/key/"+o.tn.key, `{"cap":"100"}`, 200)
	s.admin(t, "PUT", "/admin/v1/budgets/org/"+o.tn.org, `{"cap":"1000000"}`, 200)
	resp, b := s.do(t, "POST", "/v1/chat/completions", o.tn.secret, chatBody("overbill", `,"max_tokens":10`))
	if resp.StatusCode != 200 {
		t.Fatalf("overbilled chat: %d %s", resp.StatusCode, b)
	}
	overrunID := resp.Header.Get("x-request-id")

	t.Run("Numbers", func(t *testing.T) {
		spent, reserved := s.orgSpent(t, "org", o.tn.org)
		var ledger, mini int64
		if err := s.db.Pool.QueryRow(context.Background(), `SELECT coalesce(sum(actual), 0),
				coalesce(sum(actual) FILTER (WHERE model = 'demo-mini'), 0)
			FROM reservations WHERE org_id = $1 AND status IN ('committed', 'expired')`, o.tn.org).Scan(&ledger, &mini); err != nil {
			t.Fatal(err)
		}
		if spent != ledger || reserved != 0 || spent < 450*app.Micro {
			t.Fatalf("org spent %d reserved %d, ledger %d: want equal, nothing in flight, at least ¥450", spent, reserved, ledger)
		}
		body := o.users["viewer"].mustPage(path, 200)
		mustNotContain(t, body, "No requests this month yet")
		tokyo, _ := time.LoadLocation("Asia/Tokyo")
		mustContain(t, body,
			views.MoneyText("JPY", spent), // spent
			"¥0",                          // reserved in flight
			views.MoneyText("JPY", 1_000_000*app.Micro-spent),    // remaining
			"left of a ¥1,000,000 cap",                           // the cap
			"linear projection",                                  // projected month-end
			"3 settled requests",                                 //
			"<td>research", "<td>ai@example.com", "<td>ci (ysk-", // top team, member, key
			"<td>overbill", "<td>demo-mini", views.MoneyText("JPY", mini), // top models
			"<svg", "<title id=\"daily-title\">", "<desc id=\"daily-desc\">", // the chart
			"<details>", time.Now().In(tokyo).Format("2006-01-02"), // its table
			"Over 80 % of their cap", // the key passed its ¥100 cap
			overrunID, ">¥450<",      // the overrun: actual ¥450 against a tiny reservation
		)
		for _, id := range ids {
			if strings.Contains(body, id) {
				t.Errorf("request %s did not overrun but is listed", id)
			}
		}
		// The key is far over its cap: listed among the hot nodes with its share of the cap.
		if !strings.Contains(body, `<span class="pill">Key</span> ci (ysk-`) {
			t.Errorf("the key over its cap is not listed among the nodes over 80 %%")
		}
	})

	t.Run("OtherOrgSeesNothing", func(t *testing.T) {
		body := o.users["other_owner"].mustPage("/console/orgs/"+o.other.org, 200)
		mustContain(t, body, "No requests this month yet")
		mustNotContain(t, body, overrunID, "research")
	})
}

func TestMoneyText(t *testing.T) {
	for _, tc := range []struct {
		cur   string
		micro int64
		want  string
	}{
		{"JPY", 0, "¥0"},
		{"JPY", 420_000, "¥0.42"},
		{"JPY", 123, "¥0.000123"},
		{"JPY", 1_000_000, "¥1"},
		{"JPY", 1_234_567_499_999, "¥1,234,567"},
		{"JPY", 1_234_567_500_000, "¥1,234,568"},
		{"JPY", -1_500_000, "−¥2"},
		{"USD", 1_234_560_000, "$1,234.56"},
		{"USD", 5_000, "$0.005"},
	} {
		if got := views.MoneyText(tc.cur, tc.micro); got != tc.want {
			t.Errorf("MoneyText(%s, %d) = %q, want %q", tc.cur, tc.micro, got, tc.want)
		}
	}
}
