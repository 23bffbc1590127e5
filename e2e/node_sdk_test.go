package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"yosan/db/dbtest"
	"yosan/providers/openai"
	"yosan/providers/openaifake"
)

// nodeTimeout bounds one run of e2e/node/client.mjs: node's start-up, the SDK's import and a
// few requests to a local gateway.
const nodeTimeout = 60 * time.Second

// TestOpenAINodeSDK drives the gateway with the official OpenAI Node SDK (npm package openai,
// pinned in e2e/node/package-lock.json), unchanged but for base URL and key: chat, streaming
// with include_usage, tool definitions and a tool round in the history, base64 embeddings the
// SDK decodes itself, its typed errors on 401 and 429, and a route alias. The fake upstream
// never answers with a tool call, so the model's half of a tool round trip is not exercised.
func TestOpenAINodeSDK(t *testing.T) {
	dir := mustNodeSDK(t)
	fu := newFakeUpstream(t, openaifake.Options{PromptTokens: 12, CompletionTokens: 6})
	// "big" is an enterprise model, outside the free plan: the route skips it.
	cfg := fakeConfig(fu.URL) + `routes:
  - name: auto
    candidates:
      - model: big
      - model: gpt-4o-mini
`
	url := dbtest.NewURL(t)
	g := startGateway(t, url, cfg)
	tn := g.newTenant(t, "free")
	base := g.URL + "/v1"
	const answer = "This is a fake answer from" // six words of the fake's vocabulary
	wantUsage := nodeUsage{PromptTokens: 12, CompletionTokens: 6, TotalTokens: 18}

	t.Run("Chat", func(t *testing.T) {
		var r struct {
			Object       string            `json:"object"`
			Model        string            `json:"model"`
			Choices      int               `json:"choices"`
			Content      string            `json:"content"`
			FinishReason string            `json:"finish_reason"`
			Usage        nodeUsage         `json:"usage"`
			Headers      map[string]string `json:"headers"`
		}
		runNode(t, dir, "chat", base, tn.Key, &r)
		if r.Object != "chat.completion" || r.Model != "gpt-4o-mini" || r.Choices != 1 || r.Content != answer || r.FinishReason != "stop" {
			t.Errorf("completion %+v", r)
		}
		if r.Usage != wantUsage {
			t.Errorf("usage %+v, want %+v", r.Usage, wantUsage)
		}
		if r.Headers["x-yosan-model"] != "gpt-4o-mini" || r.Headers["x-yosan-provider"] != "fake" {
			t.Errorf("gateway headers %v", r.Headers)
		}
		if req := fu.fake().LastRequest(); req.Model != "gpt-4o-mini" || req.Stream {
			t.Errorf("upstream request: %+v", req)
		}
	})
	t.Run("StreamingWithUsage", func(t *testing.T) {
		var r nodeStream
		runNode(t, dir, "stream", base, tn.Key, &r)
		// One chunk with the role, one per word, one with the finish reason, one with the usage.
		if r.Chunks != 9 || r.Content != answer || r.FinishReason != "stop" {
			t.Errorf("stream %+v", r)
		}
		if r.Usage == nil || *r.Usage != wantUsage || r.UsageChunkChoices == nil || *r.UsageChunkChoices != 0 {
			t.Errorf("usage %v in a chunk of %v choices, want %+v in a chunk of none", r.Usage, r.UsageChunkChoices, wantUsage)
		}
		if r.Headers["x-yosan-model"] != "gpt-4o-mini" {
			t.Errorf("gateway headers %v", r.Headers)
		}
		if req := fu.fake().LastRequest(); !req.Stream || !req.IncludeUsage {
			t.Errorf("upstream request: %+v", req)
		}
	})
	t.Run("ToolRoundPassThrough", func(t *testing.T) {
		var r struct {
			Content      string          `json:"content"`
			ToolCalls    json.RawMessage `json:"tool_calls"`
			FinishReason string          `json:"finish_reason"`
			Usage        nodeUsage       `json:"usage"`
		}
		runNode(t, dir, "tools", base, tn.Key, &r)
		if r.Content != answer || string(r.ToolCalls) != "null" || r.FinishReason != "stop" || r.Usage != wantUsage {
			t.Errorf("answer %+v", r)
		}
		// What the SDK serialized reached the upstream intact.
		var up struct {
			Tools []struct {
				Type     string `json:"type"`
				Function struct {
					Name       string          `json:"name"`
					Parameters json.RawMessage `json:"parameters"`
				} `json:"function"`
			} `json:"tools"`
			ToolChoice string `json:"tool_choice"`
			Messages   []struct {
				Role       string `json:"role"`
				ToolCallID string `json:"tool_call_id"`
				Content    any    `json:"content"`
				ToolCalls  []struct {
					ID       string `json:"id"`
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"messages"`
		}
		body := fu.fake().LastRequest().Body
		if err := json.Unmarshal(body, &up); err != nil {
			t.Fatalf("upstream body: %v: %s", err, body)
		}
		ok := len(up.Tools) == 1 && up.Tools[0].Type == "function" && up.Tools[0].Function.Name == "get_weather" &&
			strings.Contains(string(up.Tools[0].Function.Parameters), `"city"`) && up.ToolChoice == "auto" &&
			len(up.Messages) == 3 && up.Messages[1].Role == "assistant" && len(up.Messages[1].ToolCalls) == 1 &&
			up.Messages[1].ToolCalls[0].ID == "call_yosan_1" && up.Messages[1].ToolCalls[0].Function.Arguments == `{"city":"Osaka"}` &&
			up.Messages[2].Role == "tool" && up.Messages[2].ToolCallID == "call_yosan_1" && up.Messages[2].Content == `{"forecast":"sunny","celsius":21}`
		if !ok {
			t.Errorf("upstream body lost part of the tool round: %s", body)
		}
	})
	t.Run("EmbeddingsBase64", func(t *testing.T) {
		var r struct {
			Object string `json:"object"`
			Model  string `json:"model"`
			Data   []struct {
				Index     int       `json:"index"`
				Embedding []float64 `json:"embedding"`
			} `json:"data"`
			Usage struct {
				PromptTokens int64 `json:"prompt_tokens"`
				TotalTokens  int64 `json:"total_tokens"`
			} `json:"usage"`
		}
		runNode(t, dir, "embeddings", base, tn.Key, &r)
		if r.Object != "list" || r.Model != "text-embedding-3-small" || len(r.Data) != 2 || r.Usage.PromptTokens != 12 || r.Usage.TotalTokens != 12 {
			t.Fatalf("embeddings %+v", r)
		}
		var up struct {
			EncodingFormat string `json:"encoding_format"`
		}
		if err := json.Unmarshal(fu.fake().LastRequest().Body, &up); err != nil || up.EncodingFormat != "base64" {
			t.Errorf("upstream encoding_format %q (%v), want the SDK's default base64", up.EncodingFormat, err)
		}
		// The vectors the SDK decoded from base64 are, float32 for float32, the fake's.
		for i, in := range []string{`"yen"`, `"budget"`} {
			want := openai.HashVector([]byte(in), 8)
			got := r.Data[i].Embedding
			if r.Data[i].Index != i || len(got) != len(want) {
				t.Fatalf("vector %d: index %d, %d dims, want %d", i, r.Data[i].Index, len(got), len(want))
			}
			for j := range want {
				if got[j] != float64(want[j]) {
					t.Fatalf("vector %d = %v, want %v", i, got, want)
				}
			}
		}
	})
	t.Run("ErrAuthentication", func(t *testing.T) {
		before := fu.fake().Requests()
		var r struct {
			Chat nodeAPIError `json:"chat"`
		}
		runNode(t, dir, "auth_error", base, "sk-yosan-not-a-key", &r)
		if e := r.Chat; e.Class != "AuthenticationError" || !e.IsAuthenticationError || e.Status != 401 ||
			e.Message != "invalid API key" || e.Code != "invalid_api_key" || e.Type != "authentication_error" {
			t.Errorf("error %+v, want AuthenticationError 401 invalid_api_key", e)
		}
		if n := fu.fake().Requests() - before; n != 0 {
			t.Errorf("%d upstream calls for a bad key", n)
		}
	})
	t.Run("ErrBudgetExceeded", func(t *testing.T) {
		k := g.mustAdmin(t, "POST", "/orgs/"+tn.Org+"/keys", map[string]any{"name": "capped", "team_id": tn.Team, "plan": "free"}, 201)
		keyID := k["id"].(string)
		g.mustAdmin(t, "PUT", "/budgets/key/"+keyID, map[string]any{"cap": "0"}, 200)
		before := fu.fake().Requests()
		var r struct {
			Chat   nodeAPIError `json:"chat"`
			Stream nodeAPIError `json:"stream"`
		}
		runNode(t, dir, "budget_error", base, k["key"].(string), &r)
		for name, e := range map[string]nodeAPIError{"chat": r.Chat, "stream": r.Stream} {
			if e.Class != "RateLimitError" || !e.IsRateLimitError || e.Status != 429 || e.Code != "budget_exceeded" ||
				e.Type != "budget_exceeded" || e.Param != "key:"+keyID || !strings.HasPrefix(e.Message, "budget exceeded") {
				t.Errorf("%s: error %+v, want RateLimitError 429 budget_exceeded naming the key", name, e)
			}
		}
		if n := fu.fake().Requests() - before; n != 0 {
			t.Errorf("%d upstream calls over budget", n)
		}
	})
	t.Run("RouteAlias", func(t *testing.T) {
		var r struct {
			Chat struct {
				Model   string            `json:"model"`
				Content string            `json:"content"`
				Usage   nodeUsage         `json:"usage"`
				Headers map[string]string `json:"headers"`
			} `json:"chat"`
			Stream nodeStream `json:"stream"`
			Models []string   `json:"models"`
		}
		runNode(t, dir, "route", base, tn.Key, &r)
		wantHeaders := map[string]string{"x-yosan-route": "auto", "x-yosan-model": "gpt-4o-mini", "x-yosan-provider": "fake", "x-yosan-attempts": "1"}
		for k, v := range wantHeaders {
			if r.Chat.Headers[k] != v || r.Stream.Headers[k] != v {
				t.Errorf("%s: chat %q, stream %q, want %q", k, r.Chat.Headers[k], r.Stream.Headers[k], v)
			}
		}
		if r.Chat.Model != "gpt-4o-mini" || r.Chat.Content != answer || r.Chat.Usage != wantUsage {
			t.Errorf("chat through the route %+v", r.Chat)
		}
		if r.Stream.Content != answer || r.Stream.Usage == nil || *r.Stream.Usage != wantUsage {
			t.Errorf("stream through the route %+v", r.Stream)
		}
		if !slices.Contains(r.Models, "auto") || slices.Contains(r.Models, "big") {
			t.Errorf("models.list %v: want the route, not the enterprise model", r.Models)
		}
	})

	pool := mustPool(t, url)
	mustLedgerSums(t, pool)
	// One committed row per answer, with the fake's usage: chat, stream, tools, two through the
	// route, and the embeddings (input only); nothing for the refused requests.
	rows, err := pool.Query(context.Background(), `SELECT model || ' ' || status || ' ' || coalesce(input_tokens, -1) || '/' || coalesce(output_tokens, -1)
		FROM reservations ORDER BY created_at`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		got = append(got, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{"gpt-4o-mini committed 12/6", "gpt-4o-mini committed 12/6", "gpt-4o-mini committed 12/6",
		"text-embedding-3-small committed 12/0", "gpt-4o-mini committed 12/6", "gpt-4o-mini committed 12/6"}
	if !slices.Equal(got, want) {
		t.Errorf("ledger rows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// nodeUsage is the usage object of a chat answer as the SDK returned it.
type nodeUsage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

// nodeStream is what client.mjs collected from a chat completion stream.
type nodeStream struct {
	Chunks            int               `json:"chunks"`
	Content           string            `json:"content"`
	FinishReason      string            `json:"finish_reason"`
	Usage             *nodeUsage        `json:"usage"`
	UsageChunkChoices *int              `json:"usage_chunk_choices"`
	Headers           map[string]string `json:"headers"`
}

// nodeAPIError is an error the SDK threw, with the class it chose.
type nodeAPIError struct {
	Class                 string `json:"class"`
	IsAuthenticationError bool   `json:"is_authentication_error"`
	IsRateLimitError      bool   `json:"is_rate_limit_error"`
	Status                int    `json:"status"`
	Message               string `json:"message"`
	Type                  string `json:"type"`
	Code                  string `json:"code"`
	Param                 string `json:"param"`
}

// mustNodeSDK returns the e2e/node folder after checking that node is on PATH and that
// node_modules holds the SDK version package-lock.json pins. It fails, never skips: the SDK is
// a client the gateway promises to serve, and scripts/node-deps.sh installs it.
func mustNodeSDK(tb testing.TB) string {
	tb.Helper()
	const fix = "run scripts/node-deps.sh (as root it installs Debian's nodejs and npm; it runs npm ci in e2e/node)"
	dir, err := filepath.Abs("node")
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		tb.Fatalf("node is not on PATH: %s", fix)
	}
	var lock struct {
		Packages map[string]struct {
			Version string `json:"version"`
		} `json:"packages"`
	}
	var installed struct {
		Version string `json:"version"`
	}
	if err := readJSONFile(filepath.Join(dir, "package-lock.json"), &lock); err != nil {
		tb.Fatal(err)
	}
	pinned := lock.Packages["node_modules/openai"].Version
	if err := readJSONFile(filepath.Join(dir, "node_modules", "openai", "package.json"), &installed); errors.Is(err, os.ErrNotExist) {
		tb.Fatalf("the OpenAI Node SDK is not installed in e2e/node/node_modules: %s", fix)
	} else if err != nil {
		tb.Fatal(err)
	}
	if pinned == "" || installed.Version != pinned {
		tb.Fatalf("e2e/node/node_modules has openai %q, package-lock.json pins %q: %s", installed.Version, pinned, fix)
	}
	return dir
}

func readJSONFile(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	return nil
}

// runNode runs `node client.mjs scenario` in dir against baseURL with key, and decodes the
// "result" of the JSON line it prints into result.
func runNode(tb testing.TB, dir, scenario, baseURL, key string, result any) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), nodeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "client.mjs", scenario)
	cmd.Dir = dir
	// The SDK reads OPENAI_* variables (base URL, organization, extra headers, logging): none
	// of the developer's may change what it sends.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OPENAI_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "YOSAN_BASE_URL="+baseURL, "YOSAN_API_KEY="+key)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("no answer in %s: %w", nodeTimeout, ctx.Err())
		}
		tb.Fatalf("node client.mjs %s: %v\nstderr:\n%s\nstdout:\n%s", scenario, err, stderr.String(), stdout.String())
	}
	var line struct {
		Scenario   string          `json:"scenario"`
		SDKVersion string          `json:"sdk_version"`
		Node       string          `json:"node"`
		Result     json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &line); err != nil || line.Scenario != scenario {
		tb.Fatalf("node client.mjs %s: not one JSON line for the scenario (%v):\n%s\nstderr:\n%s", scenario, err, stdout.String(), stderr.String())
	}
	tb.Logf("openai %s on node %s: %s", line.SDKVersion, line.Node, line.Result)
	if err := json.Unmarshal(line.Result, result); err != nil {
		tb.Fatalf("node client.mjs %s: result: %v: %s", scenario, err, line.Result)
	}
}
