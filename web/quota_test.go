package web_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"yosan/app"
	"yosan/db"
	"yosan/providers/anthropic"
	"yosan/providers/anthropicfake"
	"yosan/providers/classify"
	"yosan/providers/openaifake"
	"yosan/web"
)

// quotaFixture: alpha-1 has provider quota windows (60 requests a minute kept to 50 by a
// reserve ratio, 5,000 tokens a minute), beta-1 has none, and the route "auto" tries alpha
// then beta on any limit. The gateway's clock is fixed, so every request is in one minute.
type quotaFixture struct {
	s           *server
	alpha, beta *openaifake.Fake
	now         time.Time
}

func newQuotaFixture(t *testing.T) *quotaFixture {
	f := &quotaFixture{alpha: openaifake.New(openaifake.Options{}), beta: openaifake.New(openaifake.Options{}),
		now: time.Date(2026, 11, 30, 12, 0, 30, 0, time.UTC)}
	alpha := fakeModel(t, "alpha-1", "alpha", f.alpha)
	alpha.Quota = &app.Quota{RPM: 60, TPM: 60_000, RPD: 10_000, ReserveRatio: 1.0 / 6, Location: time.UTC}
	beta := fakeModel(t, "beta-1", "beta", f.beta)
	f.s = mustServerConfig(t, func(c *web.Config) {
		if err := c.Gateway.Catalog.SetRoutes([]app.Route{
			{Name: "auto", Candidates: []app.Candidate{{Model: "alpha-1"},
				{Model: "beta-1", When: []app.ErrorClass{app.ClassRateLimited, app.ClassQuotaExhausted, app.ClassRequestTooLarge}}}},
		}); err != nil {
			t.Fatal(err)
		}
		c.Gateway.Now = func() time.Time { return f.now }
		cd := &db.Cooldowns{DB: c.DB, RefreshEvery: time.Nanosecond}
		c.Cooldowns, c.Gateway.Cooldowns = cd, cd
		c.Gateway.Classify = func(provider string, e *app.UpstreamError, now time.Time) app.Classification {
			return classify.Classify(classify.Kind("openai"), e, now)
		}
	}, alpha, beta)
	return f
}

// window returns alpha-1's window of kind: reserved and used.
func (f *quotaFixture) window(t *testing.T, kind app.QuotaKind) (reserved, used int64) {
	t.Helper()
	if err := f.s.db.Pool.QueryRow(context.Background(), `SELECT coalesce(sum(reserved), 0), coalesce(sum(used), 0)
		FROM quota_windows WHERE provider = 'alpha' AND model = 'alpha-1' AND kind = $1`, string(kind)).Scan(&reserved, &used); err != nil {
		t.Fatal(err)
	}
	return reserved, used
}

// TestQuotaWindowHoldsUnderConcurrency sends 300 concurrent requests for alpha-1 by name: the
// minute's effective limit of 50 admits exactly 50, the others get 429 with Retry-After until
// the minute ends, alpha is called exactly 50 times, and the window and the budgets are
// settled to the ledger rows.
func TestQuotaWindowHoldsUnderConcurrency(t *testing.T) {
	f := newQuotaFixture(t)
	tn := f.s.mustTenant(t, "free")
	const n = 300
	statuses := make([]int, n)
	retry := make([]string, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			resp, _ := f.s.do(t, "POST", "/v1/chat/completions", tn.secret, chatBody("alpha-1", `,"max_tokens":20`))
			statuses[i], retry[i] = resp.StatusCode, resp.Header.Get("Retry-After")
		}(i)
	}
	wg.Wait()
	ok, limited := 0, 0
	for i, st := range statuses {
		switch st {
		case 200:
			ok++
		case 429:
			limited++
			if retry[i] != "30" {
				t.Errorf("Retry-After %q, want 30 (the minute ends in 30 s)", retry[i])
			}
		default:
			t.Errorf("status %d", st)
		}
	}
	if ok != 50 || limited != n-50 {
		t.Fatalf("%d answered and %d refused, want exactly 50 and %d", ok, limited, n-50)
	}
	if got := f.alpha.ChatRequests(); got != 50 {
		t.Errorf("alpha called %d times, want 50", got)
	}
	if r, u := f.window(t, app.QuotaRPM); r != 0 || u != 50 {
		t.Errorf("rpm window reserved=%d used=%d, want 0 and 50", r, u)
	}
	var committed, tokens int64
	if err := f.s.db.Pool.QueryRow(context.Background(), `SELECT count(*), coalesce(sum(input_tokens + output_tokens), 0)
		FROM reservations WHERE status = 'committed'`).Scan(&committed, &tokens); err != nil {
		t.Fatal(err)
	}
	if r, u := f.window(t, app.QuotaTPM); committed != 50 || r != 0 || u != tokens {
		t.Errorf("tpm window reserved=%d used=%d, want 0 and the %d tokens of the %d committed rows", r, u, tokens, committed)
	}
	if got := f.s.sumReserved(t); got != 0 {
		t.Errorf("budgets still hold %d", got)
	}

	// GET /status shows the windows with their limits.
	resp, body := f.s.do(t, "GET", "/status", "", "")
	var st struct {
		Quotas []struct {
			Provider, Model, Kind            string
			Limit, Effective, Used, Reserved int64
			ResetsAt                         time.Time `json:"resets_at"`
		}
	}
	if err := json.Unmarshal(body, &st); err != nil || resp.StatusCode != 200 {
		t.Fatalf("status: %d %s %v", resp.StatusCode, body, err)
	}
	var sawRPM bool
	for _, q := range st.Quotas {
		if q.Kind == "rpm" {
			sawRPM = true
			if q.Provider != "alpha" || q.Model != "alpha-1" || q.Limit != 60 || q.Used != 50 || q.Reserved != 0 ||
				!q.ResetsAt.Equal(time.Date(2026, 11, 30, 12, 1, 0, 0, time.UTC)) {
				t.Errorf("status rpm window %+v", q)
			}
		}
	}
	if !sawRPM || len(st.Quotas) != 3 || !strings.Contains(string(body), `"effective_limit":50,`) {
		t.Errorf("status quotas %s", body)
	}

	// The console's providers page shows the same windows.
	owner := f.s.mustUser(t, "owner@acme.example", "owner", tn.org, "")
	page := owner.mustPage("/console/orgs/"+tn.org+"/providers", 200)
	for _, want := range []string{"alpha / alpha-1", "requests per minute", "tokens per minute", "requests per day",
		`<td class="num">50 <span class="muted">(60)</span></td>`, "No cooldown is in force"} {
		if !strings.Contains(page, want) {
			t.Errorf("providers page lacks %q", want)
		}
	}

	// The route falls back to beta without calling alpha; alpha's next minute admits again.
	before := f.alpha.ChatRequests()
	resp, body = f.s.do(t, "POST", "/v1/chat/completions", tn.secret, chatBody("auto", `,"max_tokens":20`))
	if resp.StatusCode != 200 || resp.Header.Get("x-yosan-model") != "beta-1" || f.alpha.ChatRequests() != before ||
		resp.Header.Get("x-yosan-attempts") != "1" {
		t.Fatalf("route with alpha's window full: %d %s model %s attempts %s", resp.StatusCode, body,
			resp.Header.Get("x-yosan-model"), resp.Header.Get("x-yosan-attempts"))
	}
	f.now = f.now.Add(time.Minute)
	resp, body = f.s.do(t, "POST", "/v1/chat/completions", tn.secret, chatBody("auto", `,"max_tokens":20`))
	if resp.StatusCode != 200 || resp.Header.Get("x-yosan-model") != "alpha-1" {
		t.Fatalf("next minute: %d %s model %s", resp.StatusCode, body, resp.Header.Get("x-yosan-model"))
	}
}

func TestQuotaWindowErrors(t *testing.T) {
	f := newQuotaFixture(t)
	tn := f.s.mustTenant(t, "free")

	t.Run("TooLargeForTheMinute", func(t *testing.T) {
		// 50,000 tokens of tpm effective limit: a request whose max_tokens alone is larger can
		// never fit the window.
		resp, body := f.s.do(t, "POST", "/v1/chat/completions", tn.secret, chatBody("alpha-1", `,"max_tokens":60000`))
		var e struct {
			Error struct{ Message, Type, Param string }
		}
		_ = json.Unmarshal(body, &e)
		if resp.StatusCode != 400 || !strings.Contains(e.Error.Message, "request_too_large") || !strings.Contains(e.Error.Message, "50000 tokens") {
			t.Fatalf("%d %s, want 400 request_too_large", resp.StatusCode, body)
		}
		// Through the route the candidate is too large and beta answers.
		resp, body = f.s.do(t, "POST", "/v1/chat/completions", tn.secret, chatBody("auto", `,"max_tokens":60000`))
		if resp.StatusCode != 200 || resp.Header.Get("x-yosan-model") != "beta-1" {
			t.Fatalf("route: %d %s model %s", resp.StatusCode, body, resp.Header.Get("x-yosan-model"))
		}
		if r, u := f.window(t, app.QuotaRPM); r != 0 || u != 0 {
			t.Errorf("a request too large took rpm reserved=%d used=%d", r, u)
		}
	})
	t.Run("DayWindowFull", func(t *testing.T) {
		if resp, body := f.s.do(t, "POST", "/v1/chat/completions", tn.secret, chatBody("alpha-1", `,"max_tokens":20`)); resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		// Fill the day: its effective limit is 8,333.
		if tag, err := f.s.db.Pool.Exec(context.Background(), `UPDATE quota_windows SET used = 8333 WHERE kind = 'rpd'`); err != nil || tag.RowsAffected() != 1 {
			t.Fatal(tag, err)
		}
		resp, body := f.s.do(t, "POST", "/v1/chat/completions", tn.secret, chatBody("alpha-1", `,"max_tokens":20`))
		wantRetry := strconv.Itoa(int(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).Sub(f.now).Seconds()))
		if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != wantRetry || !strings.Contains(string(body), "requests per day") {
			t.Fatalf("%d Retry-After %q %s, want 429 until midnight (%s s)", resp.StatusCode, resp.Header.Get("Retry-After"), body, wantRetry)
		}
	})
}

// TestModelByNameRetriesAndCoolsDown: a model asked for by name is retried like a route's
// candidate and its provider's throttling cools it down; its own errors keep their shape.
func TestModelByNameRetriesAndCoolsDown(t *testing.T) {
	f := newQuotaFixture(t)
	tn := f.s.mustTenant(t, "free")
	call := func() (int, string, []byte, string) {
		resp, body := f.s.do(t, "POST", "/v1/chat/completions", tn.secret, chatBody("beta-1", `,"max_tokens":20`))
		return resp.StatusCode, resp.Header.Get("x-yosan-attempts"), body, resp.Header.Get("Retry-After")
	}

	f.beta.Enqueue(openaifake.ServerError())
	if st, attempts, body, _ := call(); st != 200 || attempts != "2" {
		t.Fatalf("one 500 then an answer: %d attempts %s %s", st, attempts, body)
	}
	f.beta.Enqueue(openaifake.ServerError(), openaifake.ServerError())
	if st, _, body, _ := call(); st != 502 || !strings.Contains(string(body), "answered HTTP 500") {
		t.Fatalf("two 500s: %d %s, want 502", st, body)
	}
	// A failing backend does not stop a model asked for by name from being tried again.
	before := f.beta.ChatRequests()
	if st, _, body, _ := call(); st != 200 || f.beta.ChatRequests() != before+1 {
		t.Fatalf("after two 500s: %d %s", st, body)
	}
	f.beta.Enqueue(openaifake.RateLimitedRequests(), openaifake.RateLimitedRequests(), openaifake.RateLimitedRequests())
	before = f.beta.ChatRequests()
	st, _, body, retry := call()
	if st != 429 || f.beta.ChatRequests() != before+3 || retry == "" {
		t.Fatalf("three 429s: %d Retry-After %q %s, calls +%d", st, retry, body, f.beta.ChatRequests()-before)
	}
	// Throttled: the model cools down, and the next request is answered 429 without a call.
	before = f.beta.ChatRequests()
	st, _, body, retry = call()
	if st != 429 || f.beta.ChatRequests() != before || retry == "" || !strings.Contains(string(body), "beta-1") {
		t.Fatalf("during the cooldown: %d Retry-After %q %s, calls +%d", st, retry, body, f.beta.ChatRequests()-before)
	}
	if got := f.s.sumReserved(t); got != 0 {
		t.Errorf("budgets still hold %d", got)
	}
	owner := f.s.mustUser(t, "owner@acme.example", "owner", tn.org, "")
	page := owner.mustPage("/console/orgs/"+tn.org+"/providers", 200)
	for _, want := range []string{"1 cooling down", "throttled", "<code>rate_limit_exceeded</code>", "beta-1"} {
		if !strings.Contains(page, want) {
			t.Errorf("providers page lacks %q", want)
		}
	}
	// The cooldown ends on the gateway's clock: two minutes later beta is called again.
	f.now = f.now.Add(2 * time.Minute)
	before = f.beta.ChatRequests()
	if st, _, body, _ := call(); st != 200 || f.beta.ChatRequests() != before+1 {
		t.Fatalf("after the cooldown: %d %s, calls +%d", st, body, f.beta.ChatRequests()-before)
	}
	if page := owner.mustPage("/console/orgs/"+tn.org+"/providers", 200); !strings.Contains(page, "No cooldown is in force") {
		t.Errorf("providers page still shows a cooldown")
	}
}

// TestClampMaxTokens: a plan with clamp_max_tokens lowers max_tokens to what the budget still
// holds (and says so) instead of refusing; the upstream is asked for no more than that, and
// the ledger reserved exactly that. Other plans, or a budget that holds too few tokens, refuse.
func TestClampMaxTokens(t *testing.T) {
	f := newQuotaFixture(t)
	ctx := context.Background()
	if err := f.s.db.UpsertPlans(ctx, []app.Plan{{Name: "clampy", Tiers: []string{"free"}, ClampMaxTokens: true}}); err != nil {
		t.Fatal(err)
	}
	clampy := f.s.mustTenant(t, "clampy")
	strict := f.s.mustTenant(t, "free")
	// 0.05 JPY: beta-1 costs 90 micro-yen per output token at 150 JPY/USD.
	for _, tn := range []tenant{clampy, strict} {
		f.s.admin(t, "PUT", "/admin/v1/budgets/org/"+tn.org, `{"cap":"0.05"}`, 200)
	}

	resp, body := f.s.do(t, "POST", "/v1/chat/completions", strict.secret, chatBody("beta-1", `,"max_tokens":1000`))
	if resp.StatusCode != 429 || resp.Header.Get("x-yosan-max-tokens-clamped") != "" {
		t.Fatalf("plan without clamping: %d %s, want 429 budget_exceeded", resp.StatusCode, body)
	}

	resp, body = f.s.do(t, "POST", "/v1/chat/completions", clampy.secret, chatBody("beta-1", `,"max_tokens":1000`))
	clamped := resp.Header.Get("x-yosan-max-tokens-clamped")
	if resp.StatusCode != 200 || !strings.HasPrefix(clamped, "1000 -> ") {
		t.Fatalf("clamping plan: %d %s clamped %q", resp.StatusCode, body, clamped)
	}
	to, err := strconv.ParseInt(strings.TrimPrefix(clamped, "1000 -> "), 10, 64)
	if err != nil || to < app.MinClampedTokens || to >= 1000 {
		t.Fatalf("clamped to %q", clamped)
	}
	var sent struct {
		MaxTokens int64 `json:"max_tokens"`
	}
	if err := json.Unmarshal(f.beta.LastRequest().Body, &sent); err != nil || sent.MaxTokens != to {
		t.Fatalf("upstream got max_tokens %d (%v), want %d", sent.MaxTokens, err, to)
	}
	row := f.s.mustRow(t, resp.Header.Get("x-request-id"))
	var reservedOut, amount int64
	if err := f.s.db.Pool.QueryRow(ctx, `SELECT max_output_tokens, amount FROM reservations WHERE request_id = $1`,
		resp.Header.Get("x-request-id")).Scan(&reservedOut, &amount); err != nil {
		t.Fatal(err)
	}
	if row.status != "committed" || reservedOut != to || amount > 50_000 {
		t.Fatalf("ledger row %+v reserved %d tokens for %d micro-yen, want %d tokens within the 50,000 cap", row, reservedOut, amount, to)
	}
	// One more token would not have fitted: the clamp is the largest that does.
	var est int64
	if err := f.s.db.Pool.QueryRow(ctx, `SELECT est_input_tokens FROM reservations WHERE request_id = $1`,
		resp.Header.Get("x-request-id")).Scan(&est); err != nil {
		t.Fatal(err)
	}
	price := app.Price{InputPerM: 150_000, OutputPerM: 600_000}
	if next := price.Cost(est, 0, to+1, 150*app.Micro); next <= 50_000 {
		t.Errorf("%d tokens would have cost %d, within the cap: the clamp is not the largest", to+1, next)
	}

	// The console's plans table says which plans clamp.
	owner := f.s.mustUser(t, "owner@acme.example", "owner", clampy.org, "")
	if page := owner.mustPage("/console/orgs/"+clampy.org+"/models", 200); !strings.Contains(page, "<td>clampy</td>") ||
		!strings.Contains(page, "max_tokens lowered to fit") || !strings.Contains(page, "refused (429)") {
		t.Errorf("plans table does not show the clamping plan")
	}

	// A budget that holds fewer than MinClampedTokens: refused, not clamped to nothing.
	tiny := f.s.mustTenant(t, "clampy")
	f.s.admin(t, "PUT", "/admin/v1/budgets/org/"+tiny.org, `{"cap":"0.001"}`, 200) // about 10 tokens
	resp, body = f.s.do(t, "POST", "/v1/chat/completions", tiny.secret, chatBody("beta-1", `,"max_tokens":1000`))
	if resp.StatusCode != 429 || resp.Header.Get("x-yosan-max-tokens-clamped") != "" {
		t.Fatalf("room for about 10 tokens: %d %s, want 429", resp.StatusCode, body)
	}
	if got := f.s.sumReserved(t); got != 0 {
		t.Errorf("budgets still hold %d", got)
	}
}

// TestBrokenStreamKeepsReportedUsage: an Anthropic stream that breaks after message_start is
// settled on no less than what Anthropic reported there: its cache writes are recorded and
// priced as writes, not lost to the relayed-text estimate.
func TestBrokenStreamKeepsReportedUsage(t *testing.T) {
	af := anthropicfake.New(anthropicfake.Options{Answer: anthropicfake.Answer{Text: "one two three four five six seven eight",
		Usage: anthropicfake.Usage{InputTokens: 4, OutputTokens: 30, CacheCreationInputTokens: 1000}}})
	srv := httptest.NewServer(af)
	t.Cleanup(func() { af.Close(); srv.Close() })
	price := app.Price{InputPerM: 3_000_000, OutputPerM: 15_000_000, CacheWritePerM: 3_750_000}
	m := &app.CatalogModel{Model: app.Model{Name: "claude", Provider: "claude", UpstreamName: "claude-x", Tier: "free",
		Kind: app.KindChat, MaxOutputTokens: 100}, Upstream: anthropic.New(anthropic.Config{Name: "claude", BaseURL: srv.URL, APIKey: "k"}),
		Prices: []app.DatedPrice{{Price: price}}}
	s := mustServerWith(t, m)
	tn := s.mustTenant(t, "free")
	af.Enqueue(anthropicfake.Response{Kind: anthropicfake.BreakStream, After: 4})
	resp, body := s.do(t, "POST", "/v1/chat/completions", tn.secret, chatBody("claude", `,"max_tokens":50,"stream":true`))
	if resp.StatusCode != 200 || !strings.Contains(string(body), "upstream_stream_broken") {
		t.Fatalf("%d %s, want a stream that ends with the broken-stream error", resp.StatusCode, body)
	}
	var writes, input, actual int64
	var source string
	if err := s.db.Pool.QueryRow(context.Background(), `SELECT cache_write_tokens, input_tokens, actual, usage_source
		FROM reservations WHERE request_id = $1`, resp.Header.Get("x-request-id")).Scan(&writes, &input, &actual, &source); err != nil {
		t.Fatal(err)
	}
	if source != "relayed" || writes != 1000 || input < 1004 {
		t.Fatalf("row: %s, %d cache writes of %d input tokens; want relayed, 1000 of at least 1004", source, writes, input)
	}
	if plain := price.Cost(input, 0, 0, 150*app.Micro); actual <= plain {
		t.Errorf("actual %d does not price the cache writes (input alone at the input price: %d)", actual, plain)
	}
}
