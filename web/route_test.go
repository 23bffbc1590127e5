package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"yosan/app"
	"yosan/db"
	"yosan/providers/classify"
	"yosan/providers/openai"
	"yosan/providers/openaifake"
	"yosan/web"
)

// routeFixture is a server with two OpenAI-compatible fake providers ("alpha", "beta") behind
// the route "auto" (alpha first, beta when alpha is throttled, out of quota or failing), and
// "strict" (alpha only, then beta only after a quota failure).
type routeFixture struct {
	s           *server
	alpha, beta *openaifake.Fake
	cooldowns   *db.Cooldowns
	now         time.Time
}

func fakeModel(t *testing.T, name, provider string, f *openaifake.Fake) *app.CatalogModel {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	t.Cleanup(f.Close)
	return &app.CatalogModel{
		Model:    app.Model{Name: name, Provider: provider, UpstreamName: name, Tier: "free", Kind: app.KindChat, MaxOutputTokens: 1000},
		Prices:   []app.DatedPrice{{Price: app.Price{InputPerM: 150_000, OutputPerM: 600_000}}},
		Upstream: openai.New(openai.Config{Name: provider, BaseURL: srv.URL + "/v1"}),
	}
}

func newRouteFixture(t *testing.T) *routeFixture {
	f := &routeFixture{alpha: openaifake.New(openaifake.Options{}), beta: openaifake.New(openaifake.Options{})}
	big := fakeModel(t, "alpha-big", "alpha", f.alpha)
	big.Prices = []app.DatedPrice{{Price: app.Price{InputPerM: 15_000_000, OutputPerM: 75_000_000}}}
	local := fakeModel(t, "beta-1", "beta", f.beta)
	local.Local = true
	models := []*app.CatalogModel{fakeModel(t, "alpha-1", "alpha", f.alpha), local, big}
	f.s = mustServerConfig(t, func(c *web.Config) {
		if err := c.Gateway.Catalog.SetRoutes([]app.Route{
			{Name: "auto", Candidates: []app.Candidate{{Model: "alpha-1"},
				{Model: "beta-1", When: []app.ErrorClass{app.ClassRateLimited, app.ClassQuotaExhausted, app.ClassBackendError, app.ClassManualAction}}}},
			{Name: "strict", Candidates: []app.Candidate{{Model: "alpha-1"}, {Model: "beta-1", When: []app.ErrorClass{app.ClassQuotaExhausted}}}},
			{Name: "private", Sensitive: true, Candidates: []app.Candidate{{Model: "beta-1"}}},
			{Name: "thrifty", Downgrade: true, Candidates: []app.Candidate{{Model: "alpha-big"}, {Model: "alpha-1"}}},
			{Name: "cached", CacheTTL: time.Minute, Candidates: []app.Candidate{{Model: "alpha-1"}}},
		}); err != nil {
			t.Fatal(err)
		}
		f.cooldowns = &db.Cooldowns{DB: c.DB, RefreshEvery: time.Nanosecond}
		c.Cooldowns = f.cooldowns
		c.Gateway.Cooldowns = f.cooldowns
		c.Gateway.QuotaCooldown = time.Hour
		c.Gateway.Cache = app.NewResponseCache(100, 1<<20, time.Now)
		c.Gateway.Limiter = app.NewLimiter(app.Limits{PerProvider: map[string]int{"beta": 1}})
		c.Gateway.Classify = func(provider string, e *app.UpstreamError, now time.Time) app.Classification {
			return classify.Classify(classify.Kind("openai"), e, now)
		}
	}, models...)
	return f
}

func (f *routeFixture) chat(t *testing.T, key, model string, stream bool) (*http.Response, []byte) {
	t.Helper()
	extra := `,"max_tokens":20`
	if stream {
		extra += `,"stream":true`
	}
	return f.s.do(t, "POST", "/v1/chat/completions", key, chatBody(model, extra))
}

func (f *routeFixture) clearCooldowns(t *testing.T) {
	t.Helper()
	if _, err := f.s.db.Pool.Exec(context.Background(), `DELETE FROM provider_cooldowns`); err != nil {
		t.Fatal(err)
	}
}

func TestRouteFallback(t *testing.T) {
	f := newRouteFixture(t)
	tn := f.s.mustTenant(t, "free")

	t.Run("FirstCandidateAnswers", func(t *testing.T) {
		resp, body := f.chat(t, tn.secret, "auto", false)
		if resp.StatusCode != 200 || resp.Header.Get("x-yosan-model") != "alpha-1" || resp.Header.Get("x-yosan-route") != "auto" {
			t.Fatalf("%d %s %v", resp.StatusCode, body, resp.Header)
		}
	})
	t.Run("RateLimitedRetriesThenFallsBack", func(t *testing.T) {
		before := f.alpha.ChatRequests()
		f.alpha.Enqueue(openaifake.RateLimitedRequests(), openaifake.RateLimitedRequests(), openaifake.RateLimitedRequests())
		resp, body := f.chat(t, tn.secret, "auto", false)
		if resp.StatusCode != 200 || resp.Header.Get("x-yosan-model") != "beta-1" || resp.Header.Get("x-yosan-attempts") != "4" {
			t.Fatalf("%d %s model %s attempts %s", resp.StatusCode, body, resp.Header.Get("x-yosan-model"), resp.Header.Get("x-yosan-attempts"))
		}
		if got := f.alpha.ChatRequests() - before; got != 3 {
			t.Errorf("alpha called %d times, want 3 (the call and 2 retries)", got)
		}
		// alpha cools down: the next request goes to beta without calling alpha.
		before = f.alpha.ChatRequests()
		resp, _ = f.chat(t, tn.secret, "auto", false)
		if resp.Header.Get("x-yosan-model") != "beta-1" || f.alpha.ChatRequests() != before {
			t.Errorf("during the cooldown: %d model %s, alpha calls +%d %v", resp.StatusCode, resp.Header.Get("x-yosan-model"), f.alpha.ChatRequests()-before, resp.Header)
		}
		cds, err := f.cooldowns.List(context.Background(), time.Now())
		if err != nil || len(cds) != 1 || cds[0].Provider != "alpha" || cds[0].Class != app.ClassRateLimited {
			t.Errorf("cooldowns %+v %v", cds, err)
		}
		f.clearCooldowns(t)
	})
	t.Run("QuotaGoesStraightOn", func(t *testing.T) {
		before := f.alpha.ChatRequests()
		f.alpha.Enqueue(openaifake.InsufficientQuota())
		resp, body := f.chat(t, tn.secret, "auto", false)
		if resp.StatusCode != 200 || resp.Header.Get("x-yosan-model") != "beta-1" || f.alpha.ChatRequests()-before != 1 {
			t.Fatalf("%d %s, alpha calls %d", resp.StatusCode, body, f.alpha.ChatRequests()-before)
		}
		var st struct {
			Cooldowns []struct{ Provider, Class string }
		}
		sresp, sbody := f.s.do(t, "GET", "/status", "", "")
		if err := json.Unmarshal(sbody, &st); err != nil || sresp.StatusCode != 200 || len(st.Cooldowns) != 1 || st.Cooldowns[0].Class != "manual_action" {
			t.Errorf("/status %d %s", sresp.StatusCode, sbody)
		}
		if strings.Contains(string(sbody), "quota") && strings.Contains(string(sbody), "billing") {
			t.Errorf("/status shows the provider's message: %s", sbody)
		}
		// A cooldown that needs a human alerts the operator, once.
		var kind, provider, code string
		if err := f.s.db.Pool.QueryRow(context.Background(), `SELECT kind, provider, code FROM alert_events WHERE org_id IS NULL`).Scan(&kind, &provider, &code); err != nil {
			t.Fatalf("operator alert: %v", err)
		}
		if kind != "provider.manual_action" || provider != "alpha" || code != "insufficient_quota" {
			t.Errorf("operator alert %s %s %s", kind, provider, code)
		}
		// An admin clears it.
		if resp, b := f.s.do(t, "DELETE", "/admin/v1/cooldowns/alpha/alpha-1", adminToken, ""); resp.StatusCode != 204 {
			t.Fatalf("clear: %d %s", resp.StatusCode, b)
		}
		if resp, _ := f.chat(t, tn.secret, "auto", false); resp.Header.Get("x-yosan-model") != "alpha-1" {
			t.Errorf("after clearing: %s", resp.Header.Get("x-yosan-model"))
		}
	})
	t.Run("WhenRulesStopTheChain", func(t *testing.T) {
		f.alpha.Enqueue(openaifake.ServerError(), openaifake.ServerError())
		resp, body := f.chat(t, tn.secret, "strict", false)
		if resp.StatusCode != 502 || !strings.Contains(string(body), "every candidate of 'strict' failed") {
			t.Fatalf("strict after backend errors: %d %s", resp.StatusCode, body)
		}
		f.clearCooldowns(t)
	})
	t.Run("ClientErrorPassedBack", func(t *testing.T) {
		before := f.beta.ChatRequests()
		f.alpha.Enqueue(openaifake.ContextLengthExceeded())
		resp, body := f.chat(t, tn.secret, "auto", false)
		if resp.StatusCode != 400 || f.beta.ChatRequests() != before {
			t.Fatalf("context too long: %d %s, beta +%d", resp.StatusCode, body, f.beta.ChatRequests()-before)
		}
	})
	t.Run("AllThrottled429WithRetryAfter", func(t *testing.T) {
		f.alpha.Enqueue(openaifake.RateLimitedRequests(), openaifake.RateLimitedRequests(), openaifake.RateLimitedRequests())
		f.beta.Enqueue(openaifake.RateLimitedRequests(), openaifake.RateLimitedRequests(), openaifake.RateLimitedRequests())
		resp, body := f.chat(t, tn.secret, "auto", false)
		if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "rate_limited") {
			t.Fatalf("all throttled: %d %s %v", resp.StatusCode, body, resp.Header)
		}
		f.clearCooldowns(t)
	})
	t.Run("StreamFallsBackBeforeTheFirstByte", func(t *testing.T) {
		f.alpha.Enqueue(openaifake.Overloaded(), openaifake.Overloaded())
		resp, body := f.chat(t, tn.secret, "auto", true)
		if resp.StatusCode != 200 || resp.Header.Get("x-yosan-model") != "beta-1" || !strings.Contains(string(body), "data: [DONE]") {
			t.Fatalf("stream: %d %s %s", resp.StatusCode, resp.Header.Get("x-yosan-model"), body)
		}
		f.clearCooldowns(t)
	})
	t.Run("LedgerExact", func(t *testing.T) {
		f.s.gw.Drain()
		var pending, bad int
		if err := f.s.db.Pool.QueryRow(context.Background(), `SELECT
				(SELECT count(*) FROM reservations WHERE status = 'pending'),
				(SELECT count(*) FROM budgets WHERE reserved <> 0)`).Scan(&pending, &bad); err != nil {
			t.Fatal(err)
		}
		if pending != 0 || bad != 0 {
			t.Errorf("%d pending reservations, %d budgets with money still reserved", pending, bad)
		}
		var released int
		if err := f.s.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM reservations WHERE status = 'released'`).Scan(&released); err != nil || released < 8 {
			t.Errorf("%d released attempts (every failed attempt releases its own reservation): %v", released, err)
		}
	})
}

func TestRoutePrivacyAndDowngrade(t *testing.T) {
	f := newRouteFixture(t)
	tn := f.s.mustTenant(t, "free")
	t.Run("SensitiveRouteNeedsLocalCandidates", func(t *testing.T) {
		c, err := app.NewCatalog([]*app.CatalogModel{{Model: app.Model{Name: "cloud", Provider: "openai"}, Prices: []app.DatedPrice{{}}, Upstream: f.s.gw.Catalog.Models()[0].Upstream}})
		if err != nil {
			t.Fatal(err)
		}
		err = c.SetRoutes([]app.Route{{Name: "secret", Sensitive: true, Candidates: []app.Candidate{{Model: "cloud"}}}})
		if err == nil || !strings.Contains(err.Error(), `route "secret" is privacy: sensitive, but its candidate "cloud" runs on provider "openai", which is not a local backend`) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("SensitiveOnlyKey", func(t *testing.T) {
		k := f.s.admin(t, "POST", "/admin/v1/orgs/"+tn.org+"/keys", `{"name":"private","team_id":"`+tn.team+`","plan":"free","sensitive_only":true}`, 201)
		secret := k["key"].(string)
		if k["sensitive_only"] != true {
			t.Fatalf("key %v", k)
		}
		for _, model := range []string{"auto", "alpha-1"} {
			resp, body := f.chat(t, secret, model, false)
			mustAPIError(t, resp, body, 403, "permission_error", "model_not_allowed", "model", "privacy: sensitive")
		}
		resp, body := f.chat(t, secret, "private", false)
		if resp.StatusCode != 200 || resp.Header.Get("x-yosan-model") != "beta-1" {
			t.Fatalf("sensitive route: %d %s", resp.StatusCode, body)
		}
	})
	t.Run("Downgrade", func(t *testing.T) {
		// A key cap that holds the cheap model's worst case but not the big one's.
		f.s.admin(t, "PUT", "/admin/v1/budgets/key/"+tn.key, `{"cap":"0.01"}`, 200)
		resp, body := f.chat(t, tn.secret, "thrifty", false)
		if resp.StatusCode != 200 || resp.Header.Get("x-yosan-model") != "alpha-1" || resp.Header.Get("x-yosan-downgraded") != "alpha-big -> alpha-1" {
			t.Fatalf("downgrade: %d %s %v", resp.StatusCode, body, resp.Header)
		}
		// Without downgrade, the same request is refused by the budget.
		resp, body = f.s.do(t, "POST", "/v1/chat/completions", tn.secret, chatBody("alpha-big", `,"max_tokens":20`))
		mustAPIError(t, resp, body, 429, "budget_exceeded", "budget_exceeded", "key:"+tn.key, "budget exceeded")
		f.s.admin(t, "PUT", "/admin/v1/budgets/key/"+tn.key, `{"cap":"0.00001"}`, 200)
		resp, body = f.chat(t, tn.secret, "thrifty", false)
		mustAPIError(t, resp, body, 429, "budget_exceeded", "budget_exceeded", "key:"+tn.key, "budget exceeded")
	})
}

func TestModelsListRoutesAndLimits(t *testing.T) {
	f := newRouteFixture(t)
	tn := f.s.mustTenant(t, "free")
	resp, body := f.s.do(t, "GET", "/v1/models", tn.secret, "")
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	var out struct {
		Data []map[string]any `json:"data"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	byID := map[string]map[string]any{}
	for _, m := range out.Data {
		byID[m["id"].(string)] = m
	}
	if r, ok := byID["auto"]; !ok || r["owned_by"] != "yosan-route" {
		t.Errorf("route alias missing or wrong: %v", r)
	}
	if _, listed := byID["auto"]["context_window"]; listed {
		t.Errorf("a route shows limits: %v", byID["auto"])
	}
	m := byID["alpha-1"]
	if cw, present := m["context_window"]; !present || cw != nil || m["max_output_tokens"] != 1000.0 {
		t.Errorf("alpha-1 limits: %v (an unknown context window is null, not a number)", m)
	}
}

func TestRouteCacheAndLimits(t *testing.T) {
	f := newRouteFixture(t)
	tn := f.s.mustTenant(t, "free")
	other := f.s.mustTenant(t, "free")
	rows := func() int {
		var n int
		if err := f.s.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM reservations`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	t.Run("HitCostsNothing", func(t *testing.T) {
		resp, body := f.chat(t, tn.secret, "cached", false)
		if resp.StatusCode != 200 || resp.Header.Get("x-yosan-cache") != "miss" {
			t.Fatalf("first: %d %s %v", resp.StatusCode, body, resp.Header)
		}
		calls, ledger := f.alpha.ChatRequests(), rows()
		resp, again := f.chat(t, tn.secret, "cached", false)
		if resp.StatusCode != 200 || resp.Header.Get("x-yosan-cache") != "hit" || string(again) != string(body) {
			t.Fatalf("second: %d %v\n%s\n%s", resp.StatusCode, resp.Header, again, body)
		}
		if f.alpha.ChatRequests() != calls || rows() != ledger {
			t.Errorf("a cache hit called the upstream (%d) or wrote the ledger (%d)", f.alpha.ChatRequests()-calls, rows()-ledger)
		}
		// A stream of the same request is served from the stored answer.
		resp, sse := f.chat(t, tn.secret, "cached", true)
		if resp.Header.Get("x-yosan-cache") != "hit" || !strings.Contains(string(sse), `"object":"chat.completion.chunk"`) ||
			!strings.HasSuffix(string(sse), "data: [DONE]\n\n") || strings.Contains(string(sse), `"usage":{`) {
			t.Errorf("stream from the cache: %v\n%s", resp.Header, sse)
		}
		// Another org never shares the entry.
		if resp, _ := f.chat(t, other.secret, "cached", false); resp.Header.Get("x-yosan-cache") != "miss" {
			t.Errorf("another org got %q", resp.Header.Get("x-yosan-cache"))
		}
	})
	t.Run("ConcurrencyLimit", func(t *testing.T) {
		f.beta.Enqueue(openaifake.Response{Kind: openaifake.Hang})
		done := make(chan int)
		go func() {
			resp, _ := f.chat(t, tn.secret, "private", false)
			done <- resp.StatusCode
		}()
		// Wait until the first call is in flight at beta.
		for deadline := time.Now().Add(5 * time.Second); f.beta.ChatRequests() == 0 && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		resp, body := f.chat(t, tn.secret, "private", false)
		mustAPIError(t, resp, body, 429, "rate_limit_error", "concurrency_limit", nil, "")
		f.beta.Close() // ends the hanging call
		<-done
		// Released on that exit path too.
		if inflight := f.s.gw.Limiter.InFlight(); len(inflight) != 0 {
			t.Errorf("slots still held after the calls ended: %v", inflight)
		}
	})
}

// TestConsoleClearsCooldown: an operator ends a cooldown from the Providers page and the route
// calls the provider again; an owner sees no Clear button.
func TestConsoleClearsCooldown(t *testing.T) {
	f := newRouteFixture(t)
	tn := f.s.mustTenant(t, "free")
	f.alpha.Enqueue(openaifake.InsufficientQuota())
	if resp, body := f.chat(t, tn.secret, "auto", false); resp.StatusCode != 200 || resp.Header.Get("x-yosan-model") != "beta-1" {
		t.Fatalf("insufficient_quota: %d %s", resp.StatusCode, body)
	}
	page := "/console/orgs/" + tn.org + "/providers"
	owner := f.s.mustUser(t, "owner@acme.example", "owner", tn.org, "")
	// The failed attempt's ledger row says why, in the explorer and the admin API.
	if body := owner.mustPage("/console/orgs/"+tn.org+"/reservations", 200); !strings.Contains(body, "manual_action") ||
		!strings.Contains(body, "<code>insufficient_quota</code>") {
		t.Errorf("the explorer does not show the failed attempt's class: %.300s", body)
	}
	list := f.s.admin(t, "GET", "/admin/v1/orgs/"+tn.org+"/reservations?status=released", "", 200)["data"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["error_class"] != "manual_action" || list[0].(map[string]any)["error_code"] != "insufficient_quota" {
		t.Errorf("released rows %v, want the failed attempt with its class and code", list)
	}
	var answered int
	if err := f.s.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM reservations WHERE status = 'committed' AND error_class IS NULL`).Scan(&answered); err != nil || answered != 1 {
		t.Errorf("%d answered rows without an error class (%v), want 1", answered, err)
	}
	if body := owner.mustPage(page, 200); !strings.Contains(body, "needs an operator") || strings.Contains(body, ">Clear</button>") {
		t.Fatalf("owner's providers page: %.600s", body)
	}
	if status, _, _ := owner.post(page+"/cooldowns/clear", url.Values{"provider": {"alpha"}, "model": {"alpha-1"}}); status != http.StatusForbidden {
		t.Fatalf("owner clearing: %d, want 403", status)
	}
	op := f.s.mustUser(t, "ops@gateway.example", "operator", "", "")
	if body := op.mustPage(page, 200); !strings.Contains(body, ">Clear</button>") {
		t.Fatalf("operator's providers page has no Clear button")
	}
	status, _, h := op.post(page+"/cooldowns/clear", url.Values{"provider": {"alpha"}, "model": {"alpha-1"}})
	if status != http.StatusSeeOther || h.Get("Location") != page {
		t.Fatalf("clear: %d %v", status, h)
	}
	if body := op.mustPage(page, 200); !strings.Contains(body, "is cleared") || !strings.Contains(body, "No cooldown is in force") {
		t.Fatalf("after clearing: %.800s", body)
	}
	// A second click finds nothing to clear, and says so without an error page.
	if status, _, _ := op.post(page+"/cooldowns/clear", url.Values{"provider": {"alpha"}, "model": {"alpha-1"}}); status != http.StatusSeeOther {
		t.Fatalf("second clear: %d", status)
	}
	if resp, _ := f.chat(t, tn.secret, "auto", false); resp.Header.Get("x-yosan-model") != "alpha-1" {
		t.Fatalf("after clearing, answered by %s", resp.Header.Get("x-yosan-model"))
	}
	var audited int
	if err := f.s.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE action = 'provider.cooldown_clear'`).Scan(&audited); err != nil || audited != 1 {
		t.Errorf("%d audit entries (%v), want 1", audited, err)
	}
}
