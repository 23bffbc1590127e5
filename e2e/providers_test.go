package e2e

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"yosan/db/dbtest"
	"yosan/providers/geminifake"
	"yosan/providers/ollamafake"
	"yosan/providers/zhipufake"
)

// TestRouteGeminiZhipuOllama runs the real binary with a route over the native Gemini API,
// Zhipu GLM and a local Ollama (three fakes speaking their real wire formats, errors
// included): Gemini answers and its thoughts are billed as output; Gemini's daily quota
// (429 RESOURCE_EXHAUSTED with a QuotaFailure) goes straight to GLM and cools Gemini down until
// midnight in Los Angeles; GLM out of balance (business code 1113) needs an operator and falls
// to Ollama; an Ollama model that is not pulled, with nothing left, is a 502. The ledger holds
// exactly the settled answers, every failed attempt released.
func TestRouteGeminiZhipuOllama(t *testing.T) {
	gf := geminifake.New(geminifake.Options{APIKey: "gk-e2e", PromptTokens: 12, CandidatesTokens: 7, ThoughtsTokens: 30})
	gsrv := httptest.NewServer(gf)
	zf := zhipufake.New(zhipufake.Options{APIKey: "zk-e2e"})
	zsrv := httptest.NewServer(zf)
	of := ollamafake.New(ollamafake.Options{Models: []string{"llama3.2"}})
	osrv := httptest.NewServer(of)
	t.Cleanup(func() {
		gf.Close()
		gsrv.Close()
		zf.Close()
		zsrv.Close()
		of.Close()
		osrv.Close()
	})
	cfg := `providers:
  - {name: gemini, type: gemini, base_url: ` + gsrv.URL + `, api_key_env: YOSAN_E2E_GEMINI}
  - {name: zhipu, type: zhipu, base_url: ` + zsrv.URL + zhipufake.DefaultPrefix + `, api_key_env: YOSAN_E2E_ZHIPU}
  - {name: ollama, type: ollama, base_url: ` + osrv.URL + `/v1, local: true}
models:
  - {name: flash, provider: gemini, upstream_model: gemini-2.5-flash, tier: free, max_output_tokens: 1000, price: {input: "0.30", output: "2.50"}}
  - {name: glm, provider: zhipu, upstream_model: glm-4.6, tier: free, max_output_tokens: 1000, price: {input: "0.60", output: "2.20"}}
  - {name: llama, provider: ollama, upstream_model: llama3.2, tier: free, max_output_tokens: 1000, price: {input: "0", output: "0"}}
  - {name: qwen, provider: ollama, upstream_model: qwen3:32b, tier: free, max_output_tokens: 1000, price: {input: "0", output: "0"}}
routes:
  - name: auto
    candidates:
      - model: flash
      - {model: glm, when: [rate_limited, quota_exhausted, backend_error]}
      - {model: llama, when: [manual_action, backend_error]}
  - name: local-only
    candidates:
      - model: qwen
`
	url := dbtest.NewURL(t)
	g := startGateway(t, url, cfg, "YOSAN_E2E_GEMINI=gk-e2e", "YOSAN_E2E_ZHIPU=zk-e2e")
	tn := g.newTenant(t, "free")
	pool := mustPool(t, url)
	ctx := context.Background()

	status, h, out := g.chat(t, tn.Key, chatBody("auto", 50))
	if status != 200 || h.Get("x-yosan-model") != "flash" || out["object"] != "chat.completion" {
		t.Fatalf("Gemini: %d %v %v", status, h, out)
	}
	var outTokens int64
	if err := pool.QueryRow(ctx, `SELECT output_tokens FROM reservations WHERE request_id = $1`, h.Get("x-request-id")).Scan(&outTokens); err != nil || outTokens != 37 {
		t.Fatalf("Gemini output tokens %d (%v), want 7 + 30 thoughts", outTokens, err)
	}

	// Gemini's daily quota: no retry, straight to GLM, Gemini cools down until midnight LA.
	before := gf.ChatRequests()
	gf.Enqueue(geminifake.QuotaPerDay())
	status, h, out = g.chat(t, tn.Key, chatBody("auto", 50))
	if status != 200 || h.Get("x-yosan-model") != "glm" || gf.ChatRequests()-before != 1 || h.Get("x-yosan-attempts") != "2" {
		t.Fatalf("after Gemini's daily quota: %d model %s attempts %s gemini calls %d: %v", status, h.Get("x-yosan-model"),
			h.Get("x-yosan-attempts"), gf.ChatRequests()-before, out)
	}
	la, _ := time.LoadLocation("America/Los_Angeles")
	n := time.Now().In(la)
	midnight := time.Date(n.Year(), n.Month(), n.Day()+1, 0, 0, 0, 0, la)
	code, _, st := call(t, "GET", g.URL+"/status", "", nil)
	cds, _ := st["cooldowns"].([]any)
	if code != 200 || len(cds) != 1 {
		t.Fatalf("/status: %d %v", code, st)
	}
	cd := cds[0].(map[string]any)
	reset, _ := time.Parse(time.RFC3339, cd["reset_at"].(string))
	if cd["provider"] != "gemini" || cd["class"] != "quota_exhausted" || !reset.Equal(midnight) {
		t.Fatalf("Gemini cooldown %v, want quota_exhausted until %s", cd, midnight.UTC().Format(time.RFC3339))
	}

	// GLM out of balance: manual_action, Gemini still cooling, Ollama answers.
	zf.Enqueue(zhipufake.InsufficientBalance())
	before = gf.ChatRequests()
	status, h, out = g.chat(t, tn.Key, chatBody("auto", 50))
	if status != 200 || h.Get("x-yosan-model") != "llama" || gf.ChatRequests() != before {
		t.Fatalf("after GLM's 1113: %d model %s gemini calls %d: %v", status, h.Get("x-yosan-model"), gf.ChatRequests()-before, out)
	}
	_, _, st = call(t, "GET", g.URL+"/status", "", nil)
	if cds, _ := st["cooldowns"].([]any); len(cds) != 2 {
		t.Fatalf("cooldowns %v, want gemini and zhipu", st["cooldowns"])
	}

	// A local model that is not pulled: manual_action, nothing else to try.
	status, _, out = g.chat(t, tn.Key, chatBody("local-only", 50))
	if status != 502 || errCode(out) != "upstream_error" {
		t.Fatalf("unpulled Ollama model: %d %v, want 502", status, out)
	}

	mustLedgerSums(t, pool)
	var committed, released, pending int
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'committed'), count(*) FILTER (WHERE status = 'released'),
		count(*) FILTER (WHERE status = 'pending') FROM reservations`).Scan(&committed, &released, &pending); err != nil {
		t.Fatal(err)
	}
	if committed != 3 || released != 3 || pending != 0 {
		t.Errorf("%d committed, %d released, %d pending; want 3 answers and the 3 failed attempts released", committed, released, pending)
	}
}
