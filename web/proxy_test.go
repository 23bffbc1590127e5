package web_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"yosan/app"
)

// ledgerRow is the part of a reservation row the tests check.
type ledgerRow struct {
	status, source            string
	amount, actual            int64
	input, output             int64
	model, provider, upstream string
}

func (s *server) mustRow(tb testing.TB, requestID string) ledgerRow {
	tb.Helper()
	var r ledgerRow
	err := s.db.Pool.QueryRow(context.Background(), `SELECT status, coalesce(usage_source, ''), amount, coalesce(actual, -1),
		coalesce(input_tokens, -1), coalesce(output_tokens, -1), model, provider, upstream_model
		FROM reservations WHERE request_id = $1`, requestID).
		Scan(&r.status, &r.source, &r.amount, &r.actual, &r.input, &r.output, &r.model, &r.provider, &r.upstream)
	if err != nil {
		tb.Fatalf("reservation %s: %v", requestID, err)
	}
	return r
}

func TestChatCompletion(t *testing.T) {
	s := mustServer(t)
	tn := s.mustTenant(t, "free")

	t.Run("Unlimited", func(t *testing.T) {
		resp, b := s.do(t, "POST", "/v1/chat/completions", tn.secret, chatBody("demo-mini", `,"max_tokens":5`))
		if resp.StatusCode != 200 {
			t.Fatalf("HTTP %d %s", resp.StatusCode, b)
		}
		h := resp.Header
		if got := h.Get("x-yosan-budget-remaining"); got != "unlimited" {
			t.Errorf("x-yosan-budget-remaining = %q, want unlimited", got)
		}
		if got := h.Get("x-yosan-model"); got != "demo-mini" {
			t.Errorf("x-yosan-model = %q", got)
		}
		if h.Get("x-yosan-provider") != "demo" || h.Get("x-yosan-upstream-model") != "demo-mini" || h.Get("x-yosan-budget-currency") != "JPY" {
			t.Errorf("headers %v", h)
		}
		var got struct {
			Object  string `json:"object"`
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
			Usage struct {
				PromptTokens     int64 `json:"prompt_tokens"`
				CompletionTokens int64 `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if got.Object != "chat.completion" || len(got.Choices) != 1 || got.Usage.CompletionTokens != 5 {
			t.Errorf("answer %s", b)
		}
		id := h.Get("x-request-id")
		if !strings.HasPrefix(id, "req_") {
			t.Fatalf("x-request-id = %q", id)
		}
		r := s.mustRow(t, id)
		if r.status != "committed" || r.source != "upstream" || r.input != got.Usage.PromptTokens || r.output != 5 {
			t.Errorf("ledger row %+v, want committed from the upstream's usage %+v", r, got.Usage)
		}
		// demo-mini: USD 0.15 in / 0.60 out per 1M, at 150 JPY, rounded up.
		want := app.Price{InputPerM: 150_000, OutputPerM: 600_000}.Cost(got.Usage.PromptTokens, 0, 5, 150*app.Micro)
		if r.actual != want {
			t.Errorf("actual = %d, want %d", r.actual, want)
		}
		if r.model != "demo-mini" || r.provider != "demo" || r.upstream != "demo-mini" {
			t.Errorf("ledger row %+v", r)
		}
	})
	t.Run("Remaining", func(t *testing.T) {
		s.admin(t, "PUT", "/admin/v1/budgets/org/"+tn.org, `{"cap":"1000"}`, 200)
		defer s.admin(t, "PUT", "/admin/v1/budgets/org/"+tn.org, `{"cap":null}`, 200)
		before := s.admin(t, "GET", "/admin/v1/budgets/org/"+tn.org, "", 200)
		spent, err := app.ParseMoney(before["spent"].(string))
		if err != nil {
			t.Fatal(err)
		}
		resp, b := s.do(t, "POST", "/v1/chat/completions", tn.secret, chatBody("demo-mini", `,"max_tokens":5`))
		if resp.StatusCode != 200 {
			t.Fatalf("HTTP %d %s", resp.StatusCode, b)
		}
		r := s.mustRow(t, resp.Header.Get("x-request-id"))
		// The room left when the worst case was reserved.
		want := app.FormatMoney(1000*app.Micro - spent - r.amount)
		if got := resp.Header.Get("x-yosan-budget-remaining"); got != want {
			t.Errorf("x-yosan-budget-remaining = %q, want %q", got, want)
		}
		after := s.admin(t, "GET", "/admin/v1/budgets/org/"+tn.org, "", 200)
		if after["reserved"] != "0" || after["spent"] != app.FormatMoney(spent+r.actual) {
			t.Errorf("budget after %v, want spent %s", after, app.FormatMoney(spent+r.actual))
		}
	})
	t.Run("Models", func(t *testing.T) {
		resp, b := s.do(t, "GET", "/v1/models", tn.secret, "")
		if resp.StatusCode != 200 {
			t.Fatalf("HTTP %d %s", resp.StatusCode, b)
		}
		var got struct {
			Object string                        `json:"object"`
			Data   []struct{ ID, Object string } `json:"data"`
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, m := range got.Data {
			ids = append(ids, m.ID)
		}
		if got.Object != "list" || strings.Join(ids, ",") != "demo-embed,demo-mini" {
			t.Errorf("models %s, want the free tier's demo-embed,demo-mini", b)
		}
		resp, b = s.do(t, "GET", "/v1/models/demo-mini", tn.secret, "")
		if resp.StatusCode != 200 || !strings.Contains(string(b), `"id":"demo-mini"`) {
			t.Errorf("GET /v1/models/demo-mini: HTTP %d %s", resp.StatusCode, b)
		}
	})
	t.Run("Embeddings", func(t *testing.T) {
		resp, b := s.do(t, "POST", "/v1/embeddings", tn.secret, `{"model":"demo-embed","input":["a b c","d"]}`)
		if resp.StatusCode != 200 {
			t.Fatalf("HTTP %d %s", resp.StatusCode, b)
		}
		if resp.Header.Get("x-yosan-model") != "demo-embed" || resp.Header.Get("x-yosan-budget-remaining") != "unlimited" {
			t.Errorf("headers %v", resp.Header)
		}
		r := s.mustRow(t, resp.Header.Get("x-request-id"))
		if r.status != "committed" || r.source != "upstream" {
			t.Errorf("ledger row %+v", r)
		}
	})
	t.Run("UpstreamRejects", func(t *testing.T) {
		// demo-mini allows at most 4096 completion tokens: the upstream's own 400 is relayed
		// as is (its code is null) and the reservation released.
		resp, b := s.do(t, "POST", "/v1/chat/completions", tn.secret, chatBody("demo-mini", `,"max_tokens":5000`))
		mustAPIError(t, resp, b, 400, "invalid_request_error", "", "max_tokens", "max_tokens is too large")
		if r := s.mustRow(t, resp.Header.Get("x-request-id")); r.status != "released" {
			t.Errorf("ledger row %+v, want released", r)
		}
	})
}

// sse splits an event stream into its data payloads, failing on anything but "data: " events.
func sse(tb testing.TB, body []byte) []string {
	tb.Helper()
	s := string(body)
	if !strings.HasSuffix(s, "\n\n") {
		tb.Fatalf("stream does not end with a blank line: %q", s)
	}
	var out []string
	for _, ev := range strings.Split(strings.TrimSuffix(s, "\n\n"), "\n\n") {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok || strings.Contains(data, "\n") {
			tb.Fatalf("event %q is not one data line", ev)
		}
		out = append(out, data)
	}
	return out
}

func TestChatCompletionStream(t *testing.T) {
	s := mustServer(t)
	tn := s.mustTenant(t, "free")
	tests := []struct {
		name         string
		options      string
		includeUsage bool
	}{
		{"NoUsage", ``, false},
		{"IncludeUsageFalse", `,"stream_options":{"include_usage":false}`, false},
		{"IncludeUsage", `,"stream_options":{"include_usage":true}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := s.do(t, "POST", "/v1/chat/completions", tn.secret, chatBody("demo-mini", `,"stream":true,"max_tokens":20`+tt.options))
			if resp.StatusCode != 200 {
				t.Fatalf("HTTP %d %s", resp.StatusCode, b)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
				t.Errorf("Content-Type = %q", ct)
			}
			if resp.Header.Get("x-yosan-model") != "demo-mini" || resp.Header.Get("x-yosan-budget-remaining") != "unlimited" {
				t.Errorf("headers %v", resp.Header)
			}
			events := sse(t, b)
			if len(events) < 4 || events[len(events)-1] != "[DONE]" {
				t.Fatalf("events %q: want chunks then [DONE]", events)
			}
			var content strings.Builder
			var usage *struct {
				PromptTokens     int64 `json:"prompt_tokens"`
				CompletionTokens int64 `json:"completion_tokens"`
			}
			usageChunks := 0
			for i, data := range events[:len(events)-1] {
				var ch struct {
					Object  string `json:"object"`
					Choices []struct {
						Delta struct{ Content string } `json:"delta"`
					} `json:"choices"`
					Usage json.RawMessage `json:"usage"`
				}
				if err := json.Unmarshal([]byte(data), &ch); err != nil {
					t.Fatalf("event %d %q: %v", i, data, err)
				}
				if ch.Object != "chat.completion.chunk" {
					t.Errorf("event %d object %q", i, ch.Object)
				}
				for _, c := range ch.Choices {
					content.WriteString(c.Delta.Content)
				}
				if !tt.includeUsage && strings.Contains(data, `"usage"`) {
					t.Errorf("event %d has a usage member the client did not ask for: %s", i, data)
				}
				if tt.includeUsage && len(ch.Usage) == 0 {
					t.Errorf("event %d has no usage member (null expected before the last): %s", i, data)
				}
				if len(ch.Usage) > 0 && string(ch.Usage) != "null" {
					usageChunks++
					if len(ch.Choices) != 0 || i != len(events)-2 {
						t.Errorf("usage chunk %d (of %d) has choices or is not last: %s", i, len(events), data)
					}
					if err := json.Unmarshal(ch.Usage, &usage); err != nil {
						t.Fatal(err)
					}
				}
			}
			if !strings.HasPrefix(content.String(), "Demo reply: Hello there") || len(strings.Fields(content.String())) != 20 {
				t.Errorf("content %q: want 20 words", content.String())
			}
			if want := map[bool]int{true: 1, false: 0}[tt.includeUsage]; usageChunks != want {
				t.Errorf("%d usage chunks, want %d", usageChunks, want)
			}
			r := s.mustRow(t, resp.Header.Get("x-request-id"))
			if r.status != "committed" || r.source != "upstream" || r.output != 20 || r.input <= 0 {
				t.Errorf("ledger row %+v, want committed with the upstream's usage", r)
			}
			if usage != nil && (usage.PromptTokens != r.input || usage.CompletionTokens != r.output) {
				t.Errorf("usage chunk %+v, ledger row %+v", *usage, r)
			}
			if n := s.sumReserved(t); n != 0 {
				t.Errorf("reserved = %d after the stream, want 0", n)
			}
		})
	}
}
