package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"yosan/db/dbtest"
	"yosan/providers/anthropicfake"
	"yosan/providers/openaifake"
)

// TestRouteAcrossProviders runs the real binary with a route whose first candidate is an
// Anthropic model and whose second is an OpenAI-compatible one (both fakes speaking their real
// wire formats): an overloaded Anthropic is retried once and the request falls back; the
// Anthropic model answers in the OpenAI shape otherwise, streams included; /status shows the
// cooldown; the ledger holds exactly the settled answers.
func TestRouteAcrossProviders(t *testing.T) {
	af := anthropicfake.New(anthropicfake.Options{APIKey: "sk-ant-e2e"})
	asrv := httptest.NewServer(af)
	t.Cleanup(func() { af.Close(); asrv.Close() })
	fu := newFakeUpstream(t, openaifake.Options{})
	cfg := `providers:
  - {name: claude, type: anthropic, base_url: ` + asrv.URL + `, api_key_env: YOSAN_E2E_ANTHROPIC}
  - {name: fake, type: openai-compatible, base_url: ` + fu.URL + `/v1}
models:
  - {name: claude-haiku, provider: claude, upstream_model: claude-3-5-haiku-latest, tier: free, max_output_tokens: 1000, price: {input: "0.80", output: "4.00", cached_input: "0.08"}}
  - {name: gpt-4o-mini, provider: fake, tier: free, max_output_tokens: 1000, price: {input: "0.15", output: "0.60"}}
routes:
  - name: auto
    candidates:
      - model: claude-haiku
      - {model: gpt-4o-mini, when: [rate_limited, quota_exhausted, backend_error, manual_action]}
`
	url := dbtest.NewURL(t)
	g := startGateway(t, url, cfg, "YOSAN_E2E_ANTHROPIC=sk-ant-e2e")
	tn := g.newTenant(t, "free")

	status, h, out := g.chat(t, tn.Key, chatBody("auto", 50))
	if status != 200 || h.Get("x-yosan-model") != "claude-haiku" || h.Get("x-yosan-provider") != "claude" {
		t.Fatalf("first answer: %d %v %v", status, h, out)
	}
	if out["object"] != "chat.completion" || out["usage"] == nil {
		t.Fatalf("the Anthropic answer is not OpenAI-shaped: %v", out)
	}

	// Overloaded twice: the call and its one retry fail, and the route falls back.
	before := af.Requests()
	af.Enqueue(anthropicfake.Overloaded(), anthropicfake.Overloaded())
	status, h, out = g.chat(t, tn.Key, chatBody("auto", 50))
	if status != 200 || h.Get("x-yosan-model") != "gpt-4o-mini" || h.Get("x-yosan-attempts") != "3" || af.Requests()-before != 2 {
		t.Fatalf("after 529s: %d model %s attempts %s anthropic calls %d: %v", status, h.Get("x-yosan-model"),
			h.Get("x-yosan-attempts"), af.Requests()-before, out)
	}
	code, _, st := call(t, "GET", g.URL+"/status", "", nil)
	cds, _ := st["cooldowns"].([]any)
	if code != 200 || len(cds) != 1 || cds[0].(map[string]any)["class"] != "backend_error" || cds[0].(map[string]any)["provider"] != "claude" {
		t.Fatalf("/status: %d %v", code, st)
	}
	// Cooling down: the next request goes to the second candidate without calling Anthropic.
	before = af.Requests()
	if status, h, _ := g.chat(t, tn.Key, chatBody("auto", 50)); status != 200 || h.Get("x-yosan-model") != "gpt-4o-mini" || af.Requests() != before {
		t.Fatalf("during the cooldown: %d %s, anthropic calls %d", status, h.Get("x-yosan-model"), af.Requests()-before)
	}
	g.mustAdmin(t, "DELETE", "/cooldowns/claude/claude-3-5-haiku-latest", nil, 204)

	// A stream from Anthropic, translated.
	req, err := http.NewRequest("POST", g.URL+"/v1/chat/completions", strings.NewReader(
		`{"model":"auto","stream":true,"max_tokens":50,"messages":[{"role":"user","content":"Tell me a story."}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tn.Key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("stream: %d", resp.StatusCode)
	}
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	if !strings.Contains(sb.String(), `"object":"chat.completion.chunk"`) || !strings.HasSuffix(sb.String(), "data: [DONE]\n\n") {
		t.Fatalf("stream body %s", sb.String())
	}
	if resp.Header.Get("x-yosan-model") != "claude-haiku" {
		t.Errorf("stream answered by %s", resp.Header.Get("x-yosan-model"))
	}
	mustLedgerSums(t, mustPool(t, url))
	var released int
	if err := mustPool(t, url).QueryRow(context.Background(), `SELECT count(*) FROM reservations WHERE status = 'released'`).Scan(&released); err != nil || released != 2 {
		t.Errorf("%d released attempts, want the 2 failed Anthropic calls: %v", released, err)
	}
}

// TestPrivacyGuardRefusesConfig: a route marked privacy: sensitive with a cloud candidate
// stops the gateway at start-up, with a message naming the route and the candidate.
func TestPrivacyGuardRefusesConfig(t *testing.T) {
	cfg := `providers:
  - {name: cloud, type: openai-compatible, base_url: "http://127.0.0.1:1/v1"}
  - {name: office, type: ollama, base_url: "http://127.0.0.1:2/v1", local: true}
models:
  - {name: gpt-4o-mini, provider: cloud, tier: free, max_output_tokens: 100, price: {input: "0.15", output: "0.60"}}
  - {name: llama3, provider: office, tier: free, max_output_tokens: 100, price: {input: "0", output: "0"}}
routes:
  - name: private
    privacy: sensitive
    candidates: [{model: llama3}, {model: gpt-4o-mini}]
`
	path := filepath.Join(t.TempDir(), "yosan.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "serve")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbtest.NewURL(t), "YOSAN_ADDR=127.0.0.1:0", "YOSAN_CONFIG="+path)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the gateway started with a cloud candidate on a sensitive route:\n%s", out)
	}
	want := `route "private" is privacy: sensitive, but its candidate "gpt-4o-mini" runs on provider "cloud", which is not a local backend`
	if !strings.Contains(string(out), want) {
		t.Fatalf("output lacks %q:\n%s", want, out)
	}
}
