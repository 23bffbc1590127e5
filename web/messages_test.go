package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"yosan/app"
	"yosan/providers/openaifake"
	"yosan/web"
)

// anthropicClient is the official Anthropic SDK pointed at the gateway, without retries (a
// retried request would be a second ledger row).
func (s *server) anthropicClient(key string, opts ...option.RequestOption) sdk.Client {
	return sdk.NewClient(append([]option.RequestOption{option.WithoutEnvironmentDefaults(), option.WithBaseURL(s.url),
		option.WithAPIKey(key), option.WithHTTPClient(s.client), option.WithMaxRetries(0)}, opts...)...)
}

func userText(text string) []sdk.MessageParam {
	return []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock(text))}
}

// weatherTool is a custom tool the demo provider calls when tool_choice names it.
var weatherTool = sdk.ToolUnionParam{OfTool: &sdk.ToolParam{Name: "get_weather", Description: sdk.String("The weather of a city"),
	InputSchema: sdk.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}, Required: []string{"city"}}}}

// mustSettled checks the call's ledger row is committed from the upstream's usage, which the
// message reported.
func (s *server) mustSettled(tb testing.TB, resp *http.Response, u sdk.Usage) {
	tb.Helper()
	if resp == nil {
		tb.Fatal("no HTTP response")
	}
	s.gw.Drain()
	r := s.mustRow(tb, resp.Header.Get("x-request-id"))
	if r.status != "committed" || r.source != "upstream" || r.input != u.InputTokens+u.CacheReadInputTokens || r.output != u.OutputTokens || r.actual <= 0 {
		tb.Errorf("ledger row %+v, want committed from the usage the client saw %+v", r, u)
	}
	if n := s.sumReserved(tb); n != 0 {
		tb.Errorf("reserved = %d after the call, want 0", n)
	}
}

func TestMessages(t *testing.T) {
	s := mustServer(t)
	tn := s.mustTenant(t, "free")
	client := s.anthropicClient(tn.secret)
	ctx := context.Background()

	t.Run("Message", func(t *testing.T) {
		var resp *http.Response
		m, err := client.Messages.New(ctx, sdk.MessageNewParams{Model: "demo-mini", MaxTokens: 5, Messages: userText("Hello there"),
			System: []sdk.TextBlockParam{{Text: "You are terse."}}}, option.WithResponseInto(&resp))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(m.ID, "msg_") || m.Type != "message" || m.Role != "assistant" || m.Model != "demo-mini" ||
			len(m.Content) != 1 || m.Content[0].Type != "text" || !strings.HasPrefix(m.Content[0].Text, "Demo reply: Hello there") ||
			m.StopReason != sdk.StopReasonMaxTokens || m.StopSequence != "" {
			t.Errorf("message %s", m.RawJSON())
		}
		if m.Usage.InputTokens <= 0 || m.Usage.OutputTokens != 5 || m.Usage.CacheReadInputTokens != 0 {
			t.Errorf("usage %s", m.Usage.RawJSON())
		}
		h := resp.Header
		if h.Get("x-yosan-model") != "demo-mini" || h.Get("x-yosan-provider") != "demo" || h.Get("x-yosan-budget-remaining") != "unlimited" ||
			!strings.HasPrefix(h.Get("x-request-id"), "req_") || !strings.HasPrefix(h.Get("Content-Type"), "application/json") {
			t.Errorf("headers %v", h)
		}
		s.mustSettled(t, resp, m.Usage)
	})
	t.Run("Stream", func(t *testing.T) {
		var resp *http.Response
		stream := client.Messages.NewStreaming(ctx, sdk.MessageNewParams{Model: "demo-mini", MaxTokens: 20, Messages: userText("Hello there")},
			option.WithResponseInto(&resp))
		defer stream.Close()
		var m sdk.Message
		var types []string
		for stream.Next() {
			ev := stream.Current()
			types = append(types, ev.Type)
			if err := m.Accumulate(ev); err != nil {
				t.Fatal(err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(types, ","); !strings.HasPrefix(got, "message_start,content_block_start,content_block_delta,") ||
			!strings.HasSuffix(got, ",content_block_stop,message_delta,message_stop") {
			t.Errorf("events %s", got)
		}
		if len(m.Content) != 1 || !strings.HasPrefix(m.Content[0].Text, "Demo reply: Hello there") || len(strings.Fields(m.Content[0].Text)) != 20 ||
			m.StopReason != sdk.StopReasonMaxTokens {
			t.Errorf("message %+v", m)
		}
		if m.Usage.InputTokens <= 0 || m.Usage.OutputTokens != 20 {
			t.Errorf("usage %+v", m.Usage)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" || resp.Header.Get("x-yosan-model") != "demo-mini" {
			t.Errorf("headers %v", resp.Header)
		}
		s.mustSettled(t, resp, m.Usage)
	})
	t.Run("ToolRoundTrip", func(t *testing.T) {
		params := sdk.MessageNewParams{Model: "demo-mini", MaxTokens: 50, Messages: userText("Weather in Tokyo?"),
			Tools: []sdk.ToolUnionParam{weatherTool}, ToolChoice: sdk.ToolChoiceParamOfTool("get_weather")}
		var resp *http.Response
		m, err := client.Messages.New(ctx, params, option.WithResponseInto(&resp))
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Content) != 1 || m.Content[0].Type != "tool_use" || m.Content[0].Name != "get_weather" || m.Content[0].ID == "" ||
			string(m.Content[0].Input) != "{}" || m.StopReason != sdk.StopReasonToolUse {
			t.Fatalf("message %s", m.RawJSON())
		}
		s.mustSettled(t, resp, m.Usage)
		// The answer goes back with the tool's result; the demo now answers in words.
		params.Messages = append(params.Messages, m.ToParam(),
			sdk.NewUserMessage(sdk.NewToolResultBlock(m.Content[0].ID, "22C and sunny", false), sdk.NewTextBlock("And so?")))
		params.ToolChoice = sdk.ToolChoiceUnionParam{OfAuto: &sdk.ToolChoiceAutoParam{}}
		m2, err := client.Messages.New(ctx, params, option.WithResponseInto(&resp))
		if err != nil {
			t.Fatal(err)
		}
		if len(m2.Content) != 1 || !strings.HasPrefix(m2.Content[0].Text, "Demo reply: And so?") || m2.StopReason != sdk.StopReasonMaxTokens {
			t.Errorf("message %s", m2.RawJSON())
		}
		if m2.Usage.InputTokens <= m.Usage.InputTokens {
			t.Errorf("input %d after the round trip, %d before: the history was not sent", m2.Usage.InputTokens, m.Usage.InputTokens)
		}
		s.mustSettled(t, resp, m2.Usage)
	})
	t.Run("ToolStream", func(t *testing.T) {
		stream := client.Messages.NewStreaming(ctx, sdk.MessageNewParams{Model: "demo-mini", MaxTokens: 50, Messages: userText("Weather?"),
			Tools: []sdk.ToolUnionParam{weatherTool}, ToolChoice: sdk.ToolChoiceUnionParam{OfAny: &sdk.ToolChoiceAnyParam{}}})
		defer stream.Close()
		var m sdk.Message
		for stream.Next() {
			if err := m.Accumulate(stream.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if len(m.Content) != 1 || m.Content[0].Type != "tool_use" || m.Content[0].Name != "get_weather" || string(m.Content[0].Input) != "{}" ||
			m.StopReason != sdk.StopReasonToolUse || m.Usage.OutputTokens <= 0 {
			t.Errorf("message %+v", m)
		}
	})
	t.Run("BearerAuth", func(t *testing.T) {
		bearer := sdk.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL(s.url), option.WithAuthToken(tn.secret),
			option.WithHTTPClient(s.client), option.WithMaxRetries(0))
		if _, err := bearer.Messages.New(ctx, sdk.MessageNewParams{Model: "demo-mini", MaxTokens: 3, Messages: userText("Hi")}); err != nil {
			t.Fatal(err)
		}
	})
}

// TestMessagesRoute serves a route alias under a Claude model name (what Claude Code asks for)
// from an OpenAI-compatible upstream that reports cached tokens, and relays a stream that breaks.
func TestMessagesRoute(t *testing.T) {
	fake := openaifake.New(openaifake.Options{PromptTokens: 30, CachedTokens: 12, CompletionTokens: 6})
	s := mustServerConfig(t, func(c *web.Config) {
		if err := c.Gateway.Catalog.SetRoutes([]app.Route{{Name: "claude-sonnet-4-5", Candidates: []app.Candidate{{Model: "alpha-1"}}}}); err != nil {
			t.Fatal(err)
		}
	}, fakeModel(t, "alpha-1", "alpha", fake))
	tn := s.mustTenant(t, "free")
	client := s.anthropicClient(tn.secret)
	ctx := context.Background()
	params := sdk.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 20, Messages: userText("Hello")}

	t.Run("Message", func(t *testing.T) {
		var resp *http.Response
		m, err := client.Messages.New(ctx, params, option.WithResponseInto(&resp))
		if err != nil {
			t.Fatal(err)
		}
		if m.Usage.InputTokens != 18 || m.Usage.CacheReadInputTokens != 12 || m.Usage.OutputTokens != 6 || len(m.Content) != 1 {
			t.Errorf("message %s", m.RawJSON())
		}
		if resp.Header.Get("x-yosan-route") != "claude-sonnet-4-5" || resp.Header.Get("x-yosan-model") != "alpha-1" {
			t.Errorf("headers %v", resp.Header)
		}
		s.mustSettled(t, resp, m.Usage)
		if got := fake.LastRequest(); got == nil || !strings.Contains(string(got.Body), `"max_tokens":20`) || !strings.Contains(string(got.Body), `"role":"user"`) {
			t.Errorf("upstream request %+v", got)
		}
	})
	t.Run("Stream", func(t *testing.T) {
		var resp *http.Response
		stream := client.Messages.NewStreaming(ctx, params, option.WithResponseInto(&resp))
		defer stream.Close()
		var m sdk.Message
		for stream.Next() {
			if err := m.Accumulate(stream.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if m.Usage.InputTokens != 18 || m.Usage.CacheReadInputTokens != 12 || m.Usage.OutputTokens != 6 || len(strings.Fields(m.Content[0].Text)) != 6 {
			t.Errorf("message %+v", m)
		}
		s.mustSettled(t, resp, m.Usage)
	})
	t.Run("StreamBreaks", func(t *testing.T) {
		fake.Enqueue(openaifake.Response{Kind: openaifake.BreakStream, After: 3})
		var resp *http.Response
		stream := client.Messages.NewStreaming(ctx, params, option.WithResponseInto(&resp))
		defer stream.Close()
		var m sdk.Message
		for stream.Next() {
			if err := m.Accumulate(stream.Current()); err != nil {
				t.Fatal(err)
			}
		}
		var apiErr *sdk.Error
		if err := stream.Err(); !errors.As(err, &apiErr) || apiErr.Type() != "api_error" || !strings.Contains(apiErr.Message, "the upstream stream broke") {
			t.Fatalf("stream error %v (%+v), want an api_error event", err, apiErr)
		}
		if len(m.Content) != 1 || m.Content[0].Text == "" {
			t.Errorf("the text before the break: %+v", m)
		}
		s.gw.Drain()
		if r := s.mustRow(t, resp.Header.Get("x-request-id")); r.status != "committed" || r.source != "relayed" || r.output <= 0 {
			t.Errorf("ledger row %+v, want committed on what was relayed", r)
		}
	})
}

// anthropicError is an Anthropic error body.
type anthropicError struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	RequestID string `json:"request_id"`
}

// mustAnthropicError checks an answer is exactly an Anthropic error of status and type whose
// message contains msg, and that it names the request.
func mustAnthropicError(tb testing.TB, resp *http.Response, body []byte, status int, typ, msg string) {
	tb.Helper()
	if resp.StatusCode != status {
		tb.Errorf("HTTP %d, want %d: %s", resp.StatusCode, status, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		tb.Errorf("Content-Type = %q", ct)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		tb.Fatalf("body %s: %v", body, err)
	}
	var e anthropicError
	if err := json.Unmarshal(body, &e); err != nil {
		tb.Fatal(err)
	}
	if len(top) != 3 || e.Type != "error" || e.Error.Type != typ || !strings.Contains(e.Error.Message, msg) {
		tb.Errorf("body %s, want {type:error, error:{type:%s, message:~%q}, request_id}", body, typ, msg)
	}
	if id := resp.Header.Get("x-request-id"); !strings.HasPrefix(id, "req_") || e.RequestID != id {
		tb.Errorf("request_id %q, x-request-id %q", e.RequestID, id)
	}
}

func TestMessagesErrors(t *testing.T) {
	s := mustServer(t)
	tn := s.mustTenant(t, "free")
	ctx := context.Background()
	hello := sdk.MessageNewParams{Model: "demo-mini", MaxTokens: 5, Messages: userText("Hello")}

	// sdkError makes the call with the official SDK and returns its API error.
	sdkError := func(t *testing.T, key string, params sdk.MessageNewParams, stream bool) (*sdk.Error, *http.Response) {
		t.Helper()
		var resp *http.Response
		var err error
		client := s.anthropicClient(key)
		if stream {
			st := client.Messages.NewStreaming(ctx, params, option.WithResponseInto(&resp))
			for st.Next() {
			}
			err = st.Err()
			st.Close()
		} else {
			_, err = client.Messages.New(ctx, params, option.WithResponseInto(&resp))
		}
		var apiErr *sdk.Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("err = %v, want an API error", err)
		}
		s.gw.Drain()
		return apiErr, apiErr.Response
	}

	tests := []struct {
		name   string
		key    string
		params sdk.MessageNewParams
		stream bool
		status int
		typ    string
		msg    string
	}{
		{"ErrBadKey", "ysk-not-a-real-key", hello, false, 401, "authentication_error", "invalid API key"},
		{"ErrBadKeyStream", "ysk-not-a-real-key", hello, true, 401, "authentication_error", "invalid API key"},
		{"ErrUnknownModel", tn.secret, sdk.MessageNewParams{Model: "claude-unknown", MaxTokens: 5, Messages: userText("Hi")}, false, 404, "not_found_error", "the model 'claude-unknown' does not exist"},
		{"ErrModelNotInPlan", tn.secret, sdk.MessageNewParams{Model: "demo-max", MaxTokens: 5, Messages: userText("Hi")}, false, 403, "permission_error", "which your key's plan 'free' does not include"},
		{"ErrUpstreamRejects", tn.secret, sdk.MessageNewParams{Model: "demo-mini", MaxTokens: 5000, Messages: userText("Hi")}, false, 400, "invalid_request_error", "max_tokens is too large"},
		{"ErrUpstreamRejectsStream", tn.secret, sdk.MessageNewParams{Model: "demo-mini", MaxTokens: 5000, Messages: userText("Hi")}, true, 400, "invalid_request_error", "max_tokens is too large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			apiErr, resp := sdkError(t, tt.key, tt.params, tt.stream)
			if apiErr.StatusCode != tt.status || string(apiErr.Type()) != tt.typ || !strings.Contains(apiErr.Message, tt.msg) {
				t.Errorf("HTTP %d %s %q, want %d %s ~%q", apiErr.StatusCode, apiErr.Type(), apiErr.Message, tt.status, tt.typ, tt.msg)
			}
			if id := resp.Header.Get("x-request-id"); !strings.HasPrefix(id, "req_") || apiErr.RequestID != "" && apiErr.RequestID != id {
				t.Errorf("x-request-id %q, request id %q", id, apiErr.RequestID)
			}
			if n := s.sumReserved(t); n != 0 {
				t.Errorf("reserved = %d after a failed request, want 0", n)
			}
		})
	}

	t.Run("ErrBudgetExceeded", func(t *testing.T) {
		s.admin(t, "PUT", "/admin/v1/budgets/key/"+tn.key, `{"cap":"0"}`, 200)
		defer s.admin(t, "PUT", "/admin/v1/budgets/key/"+tn.key, `{"cap":null}`, 200)
		for _, stream := range []bool{false, true} {
			apiErr, resp := sdkError(t, tn.secret, hello, stream)
			if apiErr.StatusCode != 429 || apiErr.Type() != "rate_limit_error" ||
				!strings.Contains(apiErr.Message, "budget exceeded: the key budget (key:"+tn.key+") has no room") {
				t.Errorf("stream %v: HTTP %d %s %q", stream, apiErr.StatusCode, apiErr.Type(), apiErr.Message)
			}
			if resp.Header.Get("x-should-retry") != "false" {
				t.Errorf("x-should-retry = %q, want false: retrying cannot help", resp.Header.Get("x-should-retry"))
			}
		}
		if n := s.sumReserved(t); n != 0 {
			t.Errorf("reserved = %d after refused requests, want 0", n)
		}
	})

	// Raw requests: the exact error bodies, and what the SDK cannot send.
	post := func(t *testing.T, header http.Header, body string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest("POST", s.url+"/v1/messages", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = header
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("anthropic-version", "2023-06-01")
		return s.send(t, req)
	}
	withKey := func(k string) http.Header { return http.Header{"X-Api-Key": {k}} }
	raw := []struct {
		name   string
		header http.Header
		body   string
		status int
		typ    string
		msg    string
	}{
		{"ErrMalformedBody", withKey(tn.secret), `{"model":"demo-mini",`, 400, "invalid_request_error", "the request body is not a valid JSON object"},
		{"ErrEmptyBody", withKey(tn.secret), ``, 400, "invalid_request_error", "the request body is empty"},
		{"ErrMissingMaxTokens", withKey(tn.secret), `{"model":"demo-mini","messages":[{"role":"user","content":"Hi"}]}`, 400, "invalid_request_error", "missing required parameter: 'max_tokens'"},
		{"ErrSystemRole", withKey(tn.secret), `{"model":"demo-mini","max_tokens":5,"messages":[{"role":"system","content":"Hi"}]}`, 400, "invalid_request_error", "unexpected role 'system'"},
		{"ErrServerTool", withKey(tn.secret), `{"model":"demo-mini","max_tokens":5,"tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":"Hi"}]}`, 400, "invalid_request_error", "server tools"},
		{"ErrTooLarge", withKey(tn.secret), `{"model":"demo-mini","max_tokens":5,"messages":[{"role":"user","content":"` + strings.Repeat("x", maxBodyBytes) + `"}]}`, 413, "request_too_large", "exceeds the gateway's limit"},
		{"ErrMalformedBodyBadKey", withKey("nope"), `{"model":`, 401, "authentication_error", "invalid API key"},
		{"ErrMissingKey", http.Header{}, `{"model":"demo-mini","max_tokens":5,"messages":[{"role":"user","content":"Hi"}]}`, 401, "authentication_error", "send it as 'x-api-key: <key>'"},
	}
	for _, tt := range raw {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := post(t, tt.header, tt.body)
			mustAnthropicError(t, resp, b, tt.status, tt.typ, tt.msg)
		})
	}
	t.Run("RawAnswer", func(t *testing.T) {
		resp, b := post(t, withKey(tn.secret), `{"model":"demo-mini","max_tokens":3,"messages":[{"role":"user","content":"Hi"}]}`)
		if resp.StatusCode != 200 {
			t.Fatalf("HTTP %d %s", resp.StatusCode, b)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if string(m["type"]) != `"message"` || string(m["stop_sequence"]) != "null" || !strings.HasPrefix(string(b), `{"id":"msg_`) ||
			!strings.Contains(string(b), `"usage":{"input_tokens":`) {
			t.Errorf("answer %s", b)
		}
	})
	t.Run("NothingPending", func(t *testing.T) {
		var pending int
		if err := s.db.Pool.QueryRow(ctx, `SELECT count(*) FROM reservations WHERE status = 'pending'`).Scan(&pending); err != nil {
			t.Fatal(err)
		}
		if pending != 0 {
			t.Errorf("%d pending reservations", pending)
		}
	})
}

func TestMessagesCountTokens(t *testing.T) {
	s := mustServer(t)
	tn := s.mustTenant(t, "free")
	send := func(key, body string) (*http.Response, []byte) {
		req, err := http.NewRequest("POST", s.url+"/v1/messages/count_tokens", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("x-api-key", key)
		req.Header.Set("anthropic-version", "2023-06-01")
		return s.send(t, req)
	}
	short := `{"model":"demo-mini","messages":[{"role":"user","content":"Hi"}]}`
	long := `{"model":"demo-mini","system":"You are careful.","messages":[{"role":"user","content":"` + strings.Repeat("budget ", 200) + `"}]}`
	resp, b := send(tn.secret, short)
	var small, big struct {
		InputTokens int64 `json:"input_tokens"`
	}
	if err := json.Unmarshal(b, &small); resp.StatusCode != 200 || err != nil || small.InputTokens <= 0 {
		t.Fatalf("count: %d %s", resp.StatusCode, b)
	}
	resp, b = send(tn.secret, long)
	if err := json.Unmarshal(b, &big); resp.StatusCode != 200 || err != nil || big.InputTokens < small.InputTokens+150 {
		t.Fatalf("count of a long prompt: %d %s (short was %d)", resp.StatusCode, b, small.InputTokens)
	}
	if n := s.sumReserved(t); n != 0 {
		t.Errorf("counting reserved %d", n)
	}
	resp, b = send("ysk-wrong", short)
	if resp.StatusCode != 401 || !strings.Contains(string(b), `"type":"authentication_error"`) {
		t.Errorf("bad key: %d %s", resp.StatusCode, b)
	}
	resp, b = send(tn.secret, `{"model":"nope","messages":[{"role":"user","content":"Hi"}]}`)
	if resp.StatusCode != 404 || !strings.Contains(string(b), `"type":"not_found_error"`) {
		t.Errorf("unknown model: %d %s", resp.StatusCode, b)
	}
}
