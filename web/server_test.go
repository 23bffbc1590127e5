package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"yosan/app"
	"yosan/db"
	"yosan/db/dbtest"
	"yosan/providers/demo"
	"yosan/providers/tokens"
	"yosan/web"
)

const (
	adminToken   = "admin-secret-token"
	maxBodyBytes = 4096
)

// server is the assembled gateway as cmd/yosan wires it, on a fresh database, behind a real
// HTTP listener.
type server struct {
	url    string
	db     *db.DB
	ledger *db.Ledger
	gw     *app.Gateway
	client *http.Client
}

func mustServer(tb testing.TB) *server {
	tb.Helper()
	return mustServerWith(tb)
}

// mustServerWith assembles the server with extra models next to the demo ones.
func mustServerWith(tb testing.TB, extra ...*app.CatalogModel) *server {
	tb.Helper()
	return mustServerConfig(tb, nil, extra...)
}

// mustServerConfig assembles the server, letting configure change its config last.
func mustServerConfig(tb testing.TB, configure func(*web.Config), extra ...*app.CatalogModel) *server {
	tb.Helper()
	ctx := context.Background()
	d := dbtest.New(tb)
	counter := tokens.New()
	up := demo.New(demo.Options{Counter: counter})
	var models []*app.CatalogModel
	var plain []app.Model
	var prices []db.ModelPrice
	for _, m := range demo.DefaultModels() {
		models = append(models, &app.CatalogModel{Model: m, Upstream: up, Prices: []app.DatedPrice{{Price: m.Price}}})
		plain = append(plain, m)
		prices = append(prices, db.ModelPrice{Model: m.Name, Price: m.Price})
	}
	for _, m := range extra {
		models = append(models, m)
		plain = append(plain, m.Model)
		prices = append(prices, db.ModelPrice{Model: m.Name, Price: m.Prices[0].Price})
	}
	catalog, err := app.NewCatalog(models)
	if err != nil {
		tb.Fatal(err)
	}
	if err := d.UpsertPlans(ctx, []app.Plan{
		{Name: "free", Tiers: []string{"free"}},
		{Name: "pro", Tiers: []string{"free", "pro"}},
		{Name: "enterprise", Tiers: []string{"free", "pro", "enterprise"}},
	}); err != nil {
		tb.Fatal(err)
	}
	if err := d.UpsertModels(ctx, plain, prices); err != nil {
		tb.Fatal(err)
	}
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		tb.Fatal(err)
	}
	ledger := db.NewLedger(d, db.LedgerConfig{GlobalCurrency: app.JPY, GlobalLocation: tokyo})
	tb.Cleanup(ledger.Close)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	gw := &app.Gateway{Keys: d, Ledger: ledger, Catalog: catalog, Counter: counter, Log: log, Now: time.Now,
		RequestTimeout: 30 * time.Second, SettleMargin: time.Minute, GlobalCurrency: app.JPY, GlobalLocation: tokyo,
		KeyCacheTTL: time.Hour}
	cfg := web.Config{Gateway: gw, DB: d, Ledger: ledger, AdminToken: adminToken, MaxBodyBytes: maxBodyBytes,
		DefaultCurrency: app.JPY, DefaultTimeZone: "Asia/Tokyo", DefaultUSDJPY: 150 * app.Micro, Log: log}
	if configure != nil {
		configure(&cfg)
	}
	srv := web.New(cfg)
	ts := httptest.NewServer(srv.Echo)
	tb.Cleanup(ts.Close)
	return &server{url: ts.URL, db: d, ledger: ledger, gw: gw, client: ts.Client()}
}

// do sends a request; auth is the bearer token ("" for none) and body the raw body ("" for none).
func (s *server) do(tb testing.TB, method, path, auth, body string) (*http.Response, []byte) {
	tb.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.url+path, r)
	if err != nil {
		tb.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return s.send(tb, req)
}

func (s *server) send(tb testing.TB, req *http.Request) (*http.Response, []byte) {
	tb.Helper()
	resp, err := s.client.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("read %s %s: %v", req.Method, req.URL.Path, err)
	}
	// Settlements run after the answer: wait for them, so checks see the settled ledger.
	s.gw.Drain()
	return resp, b
}

// admin calls the admin API and decodes the JSON answer, failing unless the status is want.
func (s *server) admin(tb testing.TB, method, path, body string, want int) map[string]any {
	tb.Helper()
	resp, b := s.do(tb, method, path, adminToken, body)
	if resp.StatusCode != want {
		tb.Fatalf("%s %s %s: HTTP %d %s, want %d", method, path, body, resp.StatusCode, b, want)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		tb.Fatalf("%s %s: decode %s: %v", method, path, b, err)
	}
	return out
}

// tenant is an org with a team, a member and a key bound to the member, made through the
// admin API.
type tenant struct {
	org, team, member, key string
	secret                 string
}

func (s *server) mustTenant(tb testing.TB, plan string) tenant {
	tb.Helper()
	var tn tenant
	tn.org = s.admin(tb, "POST", "/admin/v1/orgs", `{"name":"Acme"}`, 201)["id"].(string)
	tn.team = s.admin(tb, "POST", "/admin/v1/orgs/"+tn.org+"/teams", `{"name":"research"}`, 201)["id"].(string)
	tn.member = s.admin(tb, "POST", "/admin/v1/orgs/"+tn.org+"/members", `{"email":"ai@example.com","team_id":"`+tn.team+`"}`, 201)["id"].(string)
	k := s.admin(tb, "POST", "/admin/v1/orgs/"+tn.org+"/keys", `{"name":"ci","team_id":"`+tn.team+`","member_id":"`+tn.member+`","plan":"`+plan+`"}`, 201)
	tn.key, tn.secret = k["id"].(string), k["key"].(string)
	return tn
}

// mustAPIError checks an error answer is exactly {"error":{"message","type","param","code"}}
// with the given status, type, code and param (nil for JSON null), and a message containing msg.
func mustAPIError(tb testing.TB, resp *http.Response, body []byte, status int, typ, code string, param any, msg string) {
	tb.Helper()
	if resp.StatusCode != status {
		tb.Errorf("HTTP %d, want %d: %s", resp.StatusCode, status, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		tb.Errorf("Content-Type = %q, want application/json", ct)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		tb.Fatalf("body %s is not a JSON object: %v", body, err)
	}
	if len(top) != 1 || top["error"] == nil {
		tb.Fatalf("body %s: want exactly one member, \"error\"", body)
	}
	var e map[string]json.RawMessage
	if err := json.Unmarshal(top["error"], &e); err != nil {
		tb.Fatalf("error %s is not an object: %v", top["error"], err)
	}
	var keys []string
	for k := range e {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if got := strings.Join(keys, ","); got != "code,message,param,type" {
		tb.Errorf("error members = %s, want code,message,param,type", got)
	}
	wantParam := "null"
	if param != nil {
		p, _ := json.Marshal(param)
		wantParam = string(p)
	}
	if string(e["param"]) != wantParam {
		tb.Errorf("param = %s, want %s", e["param"], wantParam)
	}
	var got struct{ Message, Type, Code string }
	if err := json.Unmarshal(top["error"], &got); err != nil {
		tb.Fatal(err)
	}
	if got.Type != typ || got.Code != code {
		tb.Errorf("type %q code %q, want %q %q", got.Type, got.Code, typ, code)
	}
	if !strings.Contains(got.Message, msg) {
		tb.Errorf("message %q does not contain %q", got.Message, msg)
	}
}

func chatBody(model, extra string) string {
	return `{"model":"` + model + `","messages":[{"role":"user","content":"Hello there"}]` + extra + `}`
}

// sumReserved returns the total reserved on every budget row.
func (s *server) sumReserved(tb testing.TB) int64 {
	tb.Helper()
	var n int64
	if err := s.db.Pool.QueryRow(context.Background(), `SELECT coalesce(sum(reserved), 0) FROM budgets`).Scan(&n); err != nil {
		tb.Fatal(err)
	}
	return n
}

func TestV1Errors(t *testing.T) {
	s := mustServer(t)
	free := s.mustTenant(t, "free")
	revoked := s.mustTenant(t, "free")
	s.admin(t, "DELETE", "/admin/v1/keys/"+revoked.key, "", 200)

	const (
		invalid = "invalid_request_error"
		authn   = "authentication_error"
	)
	tests := []struct {
		name   string
		method string
		path   string
		auth   string
		body   string
		status int
		typ    string
		code   string
		param  any
		msg    string
	}{
		{"ErrMissingKey", "POST", "/v1/chat/completions", "", chatBody("demo-mini", ""), 401, authn, "invalid_api_key", nil, "missing API key: send it as 'Authorization: Bearer <key>'"},
		{"ErrBadKey", "POST", "/v1/chat/completions", "ysk-not-a-real-key", chatBody("demo-mini", ""), 401, authn, "invalid_api_key", nil, "invalid API key"},
		{"ErrRevokedKey", "POST", "/v1/chat/completions", revoked.secret, chatBody("demo-mini", ""), 401, authn, "invalid_api_key", nil, "this API key has been revoked"},
		{"ErrMissingKeyModels", "GET", "/v1/models", "", "", 401, authn, "invalid_api_key", nil, "missing API key"},
		{"ErrBadKeyEmbeddings", "POST", "/v1/embeddings", "nope", `{"model":"demo-embed","input":"x"}`, 401, authn, "invalid_api_key", nil, "invalid API key"},
		{"ErrModelNotInPlan", "POST", "/v1/chat/completions", free.secret, chatBody("demo-max", ""), 403, "permission_error", "model_not_allowed", "model",
			"the model 'demo-max' is in tier 'enterprise', which your key's plan 'free' does not include"},
		{"ErrUnknownModel", "POST", "/v1/chat/completions", free.secret, chatBody("gpt-9", ""), 404, invalid, "model_not_found", "model", "the model 'gpt-9' does not exist"},
		{"ErrUnknownEmbeddingModel", "POST", "/v1/embeddings", free.secret, `{"model":"gpt-9","input":"x"}`, 404, invalid, "model_not_found", "model", "the model 'gpt-9' does not exist"},
		{"ErrUnknownModelGet", "GET", "/v1/models/demo-max", free.secret, "", 404, invalid, "model_not_found", "model", "the model 'demo-max' does not exist or your key's plan does not include it"},
		{"ErrEmbeddingModelForChat", "POST", "/v1/chat/completions", free.secret, chatBody("demo-embed", ""), 400, invalid, "invalid_request", "model", "is a embedding model"},
		{"ErrMalformedJSON", "POST", "/v1/chat/completions", free.secret, `{"model":"demo-mini",`, 400, invalid, "invalid_request", nil, "the request body is not a valid JSON object"},
		{"ErrEmptyBody", "POST", "/v1/chat/completions", free.secret, "", 400, invalid, "invalid_request", nil, "the request body is empty"},
		{"ErrMissingModel", "POST", "/v1/chat/completions", free.secret, `{"messages":[{"role":"user","content":"hi"}]}`, 400, invalid, "invalid_request", "model", "missing required parameter: 'model'"},
		{"ErrMissingMessages", "POST", "/v1/chat/completions", free.secret, `{"model":"demo-mini"}`, 400, invalid, "invalid_request", "messages", "missing required parameter: 'messages'"},
		{"ErrBadMaxTokens", "POST", "/v1/chat/completions", free.secret, chatBody("demo-mini", `,"max_tokens":0`), 400, invalid, "invalid_request", "max_tokens", "'max_tokens' must be an"},
		{"ErrBadMaxCompletionTokens", "POST", "/v1/chat/completions", free.secret, chatBody("demo-mini", `,"max_completion_tokens":"many"`), 400, invalid, "invalid_request", "max_completion_tokens", "'max_completion_tokens' must be an"},
		{"ErrMissingInput", "POST", "/v1/embeddings", free.secret, `{"model":"demo-embed"}`, 400, invalid, "invalid_request", "input", "missing required parameter: 'input'"},
		{"ErrUnknownRoute", "GET", "/v1/nope", free.secret, "", 404, invalid, "not_found", nil, "no such endpoint: GET /v1/nope"},
		{"ErrUnknownRootRoute", "GET", "/nope", "", "", 404, invalid, "not_found", nil, "no such endpoint: GET /nope"},
		{"ErrMethodNotAllowedModels", "POST", "/v1/models", free.secret, "{}", 405, invalid, "method_not_allowed", nil, "method POST is not allowed on /v1/models"},
		{"ErrMethodNotAllowedChat", "GET", "/v1/chat/completions", free.secret, "", 405, invalid, "method_not_allowed", nil, "method GET is not allowed on /v1/chat/completions"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := s.do(t, tt.method, tt.path, tt.auth, tt.body)
			mustAPIError(t, resp, body, tt.status, tt.typ, tt.code, tt.param, tt.msg)
			if tt.code != "not_found" && tt.code != "method_not_allowed" {
				if id := resp.Header.Get("x-request-id"); !strings.HasPrefix(id, "req_") {
					t.Errorf("x-request-id = %q", id)
				}
			}
		})
	}
	t.Run("NothingReserved", func(t *testing.T) {
		if n := s.sumReserved(t); n != 0 {
			t.Errorf("reserved = %d after failed requests, want 0", n)
		}
		var pending int
		if err := s.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM reservations WHERE status = 'pending'`).Scan(&pending); err != nil {
			t.Fatal(err)
		}
		if pending != 0 {
			t.Errorf("%d pending reservations", pending)
		}
	})
}

func TestV1BodyLimit(t *testing.T) {
	s := mustServer(t)
	tn := s.mustTenant(t, "free")
	// A chat body of exactly n bytes.
	bodyOf := func(n int) string {
		b := chatBody("demo-mini", `,"max_tokens":5,"user":"`)
		return b[:len(b)-1] + strings.Repeat("x", n-len(b)-1) + `"}`
	}
	if len(bodyOf(maxBodyBytes)) != maxBodyBytes {
		t.Fatal("bodyOf is wrong")
	}
	tooLarge := "the request body exceeds the gateway's limit of 4096 bytes"
	t.Run("AtLimit", func(t *testing.T) {
		resp, b := s.do(t, "POST", "/v1/chat/completions", tn.secret, bodyOf(maxBodyBytes))
		if resp.StatusCode != 200 {
			t.Errorf("HTTP %d %s", resp.StatusCode, b)
		}
	})
	t.Run("ErrContentLength", func(t *testing.T) {
		resp, b := s.do(t, "POST", "/v1/chat/completions", tn.secret, bodyOf(maxBodyBytes+1))
		mustAPIError(t, resp, b, 413, "invalid_request_error", "request_too_large", nil, tooLarge)
	})
	t.Run("ErrChunked", func(t *testing.T) {
		// io.MultiReader hides the length, so the client sends Transfer-Encoding: chunked.
		req, err := http.NewRequest("POST", s.url+"/v1/chat/completions", io.MultiReader(strings.NewReader(bodyOf(2*maxBodyBytes))))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tn.secret)
		if req.ContentLength != 0 {
			t.Fatalf("ContentLength = %d: the body would not be chunked", req.ContentLength)
		}
		resp, b := s.send(t, req)
		mustAPIError(t, resp, b, 413, "invalid_request_error", "request_too_large", nil, tooLarge)
	})
	t.Run("ChunkedAtLimit", func(t *testing.T) {
		req, err := http.NewRequest("POST", s.url+"/v1/chat/completions", io.MultiReader(bytes.NewReader([]byte(bodyOf(maxBodyBytes)))))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tn.secret)
		resp, b := s.send(t, req)
		if resp.StatusCode != 200 {
			t.Errorf("HTTP %d %s", resp.StatusCode, b)
		}
	})
	t.Run("ErrEmbeddings", func(t *testing.T) {
		resp, b := s.do(t, "POST", "/v1/embeddings", tn.secret, `{"model":"demo-embed","input":"`+strings.Repeat("y", maxBodyBytes)+`"}`)
		mustAPIError(t, resp, b, 413, "invalid_request_error", "request_too_large", nil, tooLarge)
	})
}

func TestV1BudgetExceeded(t *testing.T) {
	s := mustServer(t)
	tn := s.mustTenant(t, "free")
	tests := []struct {
		name string
		kind string
		id   string
	}{
		{"Key", "key", tn.key},
		{"Member", "member", tn.member},
		{"Team", "team", tn.team},
		{"Org", "org", tn.org},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s.admin(t, "PUT", "/admin/v1/budgets/"+tt.kind+"/"+tt.id, `{"cap":"0.000001"}`, 200)
			defer s.admin(t, "PUT", "/admin/v1/budgets/"+tt.kind+"/"+tt.id, `{"cap":null}`, 200)
			resp, b := s.do(t, "POST", "/v1/chat/completions", tn.secret, chatBody("demo-mini", `,"max_tokens":10`))
			node := tt.kind + ":" + tt.id
			mustAPIError(t, resp, b, 429, "budget_exceeded", "budget_exceeded", node,
				"budget exceeded: the "+tt.kind+" budget ("+node+") has no room for this request's worst-case cost of")
			if n := s.sumReserved(t); n != 0 {
				t.Errorf("reserved = %d after a refused request, want 0", n)
			}
		})
	}
	t.Run("Global", func(t *testing.T) {
		s.admin(t, "PUT", "/admin/v1/budgets/global", `{"cap":"0"}`, 200)
		defer s.admin(t, "PUT", "/admin/v1/budgets/global", `{"cap":null}`, 200)
		resp, b := s.do(t, "POST", "/v1/chat/completions", tn.secret, chatBody("demo-mini", `,"max_tokens":10`))
		mustAPIError(t, resp, b, 429, "budget_exceeded", "budget_exceeded", "global", "the global budget (global) has no room")
		if n := s.sumReserved(t); n != 0 {
			t.Errorf("reserved = %d after a refused request, want 0", n)
		}
	})
	t.Run("NoRowsForRefused", func(t *testing.T) {
		var n int
		if err := s.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM reservations`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%d reservation rows for refused requests, want 0", n)
		}
	})
	// A worst case that saturates int64 must be refused by a capped node that has spent
	// something, not wrap around the cap check (reserved + spent + amount overflowing).
	t.Run("HugeMaxTokensAfterSpend", func(t *testing.T) {
		s.admin(t, "PUT", "/admin/v1/budgets/org/"+tn.org, `{"cap":"1000"}`, 200)
		defer s.admin(t, "PUT", "/admin/v1/budgets/org/"+tn.org, `{"cap":null}`, 200)
		resp, b := s.do(t, "POST", "/v1/chat/completions", tn.secret, chatBody("demo-mini", `,"max_tokens":5`))
		if resp.StatusCode != 200 {
			t.Fatalf("HTTP %d %s", resp.StatusCode, b)
		}
		resp, b = s.do(t, "POST", "/v1/chat/completions", tn.secret, chatBody("demo-mini", `,"max_tokens":9000000000000000000`))
		if resp.StatusCode != 429 && resp.StatusCode != 400 {
			t.Errorf("HTTP %d %s, want 429 (or 400 from the gateway)", resp.StatusCode, b)
		}
		var over int
		if err := s.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM reservations WHERE amount > $1`, int64(1000)*app.Micro).Scan(&over); err != nil {
			t.Fatal(err)
		}
		if over != 0 {
			t.Errorf("%d reservations larger than the org's 1000 JPY cap were admitted", over)
		}
	})
}
