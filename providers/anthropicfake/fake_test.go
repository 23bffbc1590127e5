package anthropicfake_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"yosan/providers/anthropicfake"
)

func MustServer(tb testing.TB, f *anthropicfake.Fake) *httptest.Server {
	tb.Helper()
	srv := httptest.NewServer(f)
	tb.Cleanup(func() { f.Close(); srv.Close() })
	return srv
}

func post(tb testing.TB, ctx context.Context, url, body string, header map[string]string) (*http.Response, error) {
	tb.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	return http.DefaultClient.Do(req)
}

var okHeader = map[string]string{"x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01"}

// MustPost sends body with the required headers (plus header, where "" removes one) and
// returns the answer and its body.
func MustPost(tb testing.TB, url, body string, header map[string]string) (*http.Response, string) {
	tb.Helper()
	h := map[string]string{}
	for k, v := range okHeader {
		h[k] = v
	}
	for k, v := range header {
		h[k] = v
	}
	resp, err := post(tb, context.Background(), url, body, h)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		tb.Fatal(err)
	}
	return resp, string(b)
}

const simpleBody = `{"model":"claude-x","max_tokens":100,"messages":[{"role":"user","content":"Hi"}]}`

func TestMessage(t *testing.T) {
	tests := []struct {
		name string
		opts anthropicfake.Options
		want string
	}{
		{"Default", anthropicfake.Options{},
			`{"model":"claude-x","id":"msg_01FakeAnthropicAnswer0000","type":"message","role":"assistant","content":[{"type":"text","text":"Hello! How can I help you today?"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":0},"output_tokens":15,"service_tier":"standard"}}`},
		{"ToolUseAndCache", anthropicfake.Options{Answer: anthropicfake.Answer{
			Text:     "Checking <weather> & more.",
			ToolUses: []anthropicfake.ToolUse{{ID: "toolu_01A", Name: "get_weather", Input: `{"location": "Paris"}`}},
			Usage:    anthropicfake.Usage{InputTokens: 4, OutputTokens: 30, CacheCreationInputTokens: 100, CacheReadInputTokens: 2000},
		}},
			`{"model":"claude-x","id":"msg_01FakeAnthropicAnswer0000","type":"message","role":"assistant","content":[{"type":"text","text":"Checking <weather> & more."},{"type":"tool_use","id":"toolu_01A","name":"get_weather","input":{"location":"Paris"}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":4,"cache_creation_input_tokens":100,"cache_read_input_tokens":2000,"cache_creation":{"ephemeral_5m_input_tokens":100,"ephemeral_1h_input_tokens":0},"output_tokens":30,"service_tier":"standard"}}`},
		{"StopSequence", anthropicfake.Options{Answer: anthropicfake.Answer{Text: "1, 2", StopReason: "stop_sequence", StopSequence: ", 3"}},
			`{"model":"claude-x","id":"msg_01FakeAnthropicAnswer0000","type":"message","role":"assistant","content":[{"type":"text","text":"1, 2"}],"stop_reason":"stop_sequence","stop_sequence":", 3","usage":{"input_tokens":25,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":0},"output_tokens":15,"service_tier":"standard"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := anthropicfake.New(tt.opts)
			srv := MustServer(t, f)
			resp, body := MustPost(t, srv.URL+"/v1/messages", simpleBody, nil)
			if resp.StatusCode != 200 || body != tt.want {
				t.Errorf("%d\n%s\nwant\n%s", resp.StatusCode, body, tt.want)
			}
			for k, v := range map[string]string{"Content-Type": "application/json", "request-id": anthropicfake.RequestIDSuccess,
				"anthropic-organization-id": anthropicfake.OrganizationID, "anthropic-ratelimit-input-tokens-remaining": "39000"} {
				if got := resp.Header.Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			last := f.LastRequest()
			if last == nil || last.Model != "claude-x" || last.MaxTokens != 100 || last.Stream || string(last.Body) != simpleBody ||
				last.Header.Get("x-api-key") != "sk-ant-test" || f.Requests() != 1 {
				t.Errorf("last %+v", last)
			}
		})
	}
}

func TestStream(t *testing.T) {
	tests := []struct {
		name string
		a    anthropicfake.Answer
		want []string
	}{
		{"Text", anthropicfake.Answer{Text: "Hello there!", Usage: anthropicfake.Usage{InputTokens: 25, OutputTokens: 15, CacheReadInputTokens: 7}}, []string{
			"event: message_start\ndata: " + `{"type":"message_start","message":{"model":"claude-x","id":"msg_01FakeAnthropicAnswer0000","type":"message","role":"assistant","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":0,"cache_read_input_tokens":7,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":0},"output_tokens":1,"service_tier":"standard"}}}`,
			"event: content_block_start\ndata: " + `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			"event: ping\ndata: " + `{"type": "ping"}`,
			"event: content_block_delta\ndata: " + `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`,
			"event: content_block_delta\ndata: " + `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" there!"}}`,
			"event: content_block_stop\ndata: " + `{"type":"content_block_stop","index":0}`,
			"event: message_delta\ndata: " + `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":25,"cache_creation_input_tokens":0,"cache_read_input_tokens":7,"output_tokens":15}}`,
			"event: message_stop\ndata: " + `{"type":"message_stop"}`,
		}},
		{"ToolUse", anthropicfake.Answer{ToolUses: []anthropicfake.ToolUse{{ID: "toolu_01B", Name: "get_weather", Input: `{"location":"San Francisco, CA"}`}}}, []string{
			"event: message_start\ndata: " + `{"type":"message_start","message":{"model":"claude-x","id":"msg_01FakeAnthropicAnswer0000","type":"message","role":"assistant","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":0},"output_tokens":1,"service_tier":"standard"}}}`,
			"event: content_block_start\ndata: " + `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_01B","name":"get_weather","input":{}}}`,
			"event: ping\ndata: " + `{"type": "ping"}`,
			"event: content_block_delta\ndata: " + `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":""}}`,
			"event: content_block_delta\ndata: " + `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"location"}}`,
			"event: content_block_delta\ndata: " + `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"\":\"San Fra"}}`,
			"event: content_block_delta\ndata: " + `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"ncisco, CA"}}`,
			"event: content_block_delta\ndata: " + `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"\"}"}}`,
			"event: content_block_stop\ndata: " + `{"type":"content_block_stop","index":0}`,
			"event: message_delta\ndata: " + `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":25,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":15}}`,
			"event: message_stop\ndata: " + `{"type":"message_stop"}`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := MustServer(t, anthropicfake.New(anthropicfake.Options{Answer: tt.a}))
			resp, body := MustPost(t, srv.URL+"/v1/messages", `{"model":"claude-x","max_tokens":100,"messages":[],"stream":true}`, nil)
			if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream; charset=utf-8" {
				t.Errorf("%d %q", resp.StatusCode, ct)
			}
			want := strings.Join(tt.want, "\n\n") + "\n\n"
			if body != want {
				t.Errorf("body\n%s\nwant\n%s", body, want)
			}
		})
	}
}

func TestHeaders(t *testing.T) {
	f := anthropicfake.New(anthropicfake.Options{APIKey: "sk-ant-right"})
	srv := MustServer(t, f)
	tests := []struct {
		name   string
		header map[string]string
		status int
		body   string
	}{
		{"MissingAPIKey", map[string]string{"x-api-key": ""}, 401, anthropicfake.BodyMissingAPIKey},
		{"WrongAPIKey", map[string]string{"x-api-key": "sk-ant-wrong"}, 401, anthropicfake.BodyInvalidAPIKey},
		{"MissingVersion", map[string]string{"x-api-key": "sk-ant-right", "anthropic-version": ""}, 400, anthropicfake.BodyMissingVersion},
		{"OK", map[string]string{"x-api-key": "sk-ant-right"}, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := MustPost(t, srv.URL+"/v1/messages", simpleBody, tt.header)
			if resp.StatusCode != tt.status || tt.body != "" && body != tt.body {
				t.Errorf("%d %s", resp.StatusCode, body)
			}
			if tt.status != 200 && (resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("request-id") == "") {
				t.Errorf("headers %v", resp.Header)
			}
		})
	}
}

func TestValidation(t *testing.T) {
	srv := MustServer(t, anthropicfake.New(anthropicfake.Options{}))
	tests := []struct {
		name, path, body string
		status           int
		message          string
	}{
		{"MaxTokensRequired", "/v1/messages", `{"model":"claude-x","messages":[]}`, 400, anthropicfake.BodyMaxTokensRequired},
		{"ModelRequired", "/v1/messages", `{"max_tokens":10,"messages":[]}`, 400, "model: Field required"},
		{"MessagesRequired", "/v1/messages", `{"model":"claude-x","max_tokens":10}`, 400, "messages: Field required"},
		{"InvalidJSON", "/v1/messages", `{"model":`, 400, "There was an error parsing the body"},
		{"UnknownPath", "/v1/complete", simpleBody, 404, anthropicfake.BodyNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := MustPost(t, srv.URL+tt.path, tt.body, nil)
			if resp.StatusCode != tt.status || !strings.Contains(body, tt.message) || !strings.HasPrefix(body, `{"type":"error","error":{"type":`) {
				t.Errorf("%d %s", resp.StatusCode, body)
			}
		})
	}
}

func TestScripted(t *testing.T) {
	t.Run("Errors", func(t *testing.T) {
		for _, tt := range []struct {
			name   string
			resp   anthropicfake.Response
			status int
			body   string
			header map[string]string
		}{
			{"RateLimited", anthropicfake.RateLimited(), 429, anthropicfake.BodyRateLimited, map[string]string{
				"retry-after": "13", "request-id": anthropicfake.RequestIDRateLimited, "x-should-retry": "true",
				"anthropic-ratelimit-input-tokens-limit": "40000", "anthropic-ratelimit-input-tokens-remaining": "0",
				"anthropic-ratelimit-input-tokens-reset": "2025-08-21T12:40:59Z", "anthropic-ratelimit-requests-limit": "50",
				"anthropic-ratelimit-requests-remaining": "49", "anthropic-ratelimit-requests-reset": "2025-08-21T12:40:59Z",
				"anthropic-ratelimit-tokens-limit": "48000", "anthropic-ratelimit-output-tokens-limit": "8000"}},
			{"SpendLimited", anthropicfake.SpendLimited(), 429, anthropicfake.BodySpendLimited, map[string]string{"retry-after": ""}},
			{"Overloaded", anthropicfake.Overloaded(), 529, anthropicfake.BodyOverloaded, map[string]string{"request-id": anthropicfake.RequestIDOverloaded}},
			{"APIError", anthropicfake.APIError(), 500, anthropicfake.BodyAPIError, nil},
			{"PromptTooLong", anthropicfake.PromptTooLong(), 400, anthropicfake.BodyPromptTooLong, map[string]string{"x-should-retry": "false"}},
			{"CreditBalanceTooLow", anthropicfake.CreditBalanceTooLow(), 400, anthropicfake.BodyCreditBalanceTooLow, nil},
			{"Unauthorized", anthropicfake.Unauthorized(), 401, anthropicfake.BodyInvalidAPIKey, nil},
		} {
			t.Run(tt.name, func(t *testing.T) {
				f := anthropicfake.New(anthropicfake.Options{})
				srv := MustServer(t, f)
				f.Enqueue(tt.resp)
				resp, body := MustPost(t, srv.URL+"/v1/messages", simpleBody, nil)
				if resp.StatusCode != tt.status || body != tt.body || resp.Header.Get("Content-Type") != "application/json" {
					t.Errorf("%d %s", resp.StatusCode, body)
				}
				for k, v := range tt.header {
					if got := resp.Header.Get(k); got != v {
						t.Errorf("%s = %q, want %q", k, got, v)
					}
				}
				if resp, _ := MustPost(t, srv.URL+"/v1/messages", simpleBody, nil); resp.StatusCode != 200 {
					t.Errorf("second request: %d", resp.StatusCode)
				}
			})
		}
	})
	t.Run("Script", func(t *testing.T) {
		f := anthropicfake.New(anthropicfake.Options{Script: func(r *anthropicfake.Request) *anthropicfake.Response {
			if r.Model == "busy" {
				resp := anthropicfake.Overloaded()
				return &resp
			}
			return nil
		}})
		srv := MustServer(t, f)
		if resp, _ := MustPost(t, srv.URL+"/v1/messages", `{"model":"busy","max_tokens":1,"messages":[]}`, nil); resp.StatusCode != 529 {
			t.Errorf("busy: %d", resp.StatusCode)
		}
		if resp, _ := MustPost(t, srv.URL+"/v1/messages", simpleBody, nil); resp.StatusCode != 200 {
			t.Errorf("idle: %d", resp.StatusCode)
		}
	})
	t.Run("StreamOverloaded", func(t *testing.T) {
		f := anthropicfake.New(anthropicfake.Options{})
		srv := MustServer(t, f)
		f.Enqueue(anthropicfake.StreamOverloaded())
		resp, body := MustPost(t, srv.URL+"/v1/messages", `{"model":"claude-x","max_tokens":100,"messages":[],"stream":true}`, nil)
		evs := strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n")
		if resp.StatusCode != 200 || len(evs) != 2 || !strings.HasPrefix(evs[0], "event: message_start\n") ||
			evs[1] != "event: error\ndata: "+anthropicfake.StreamOverloadedEvent {
			t.Errorf("%d %q", resp.StatusCode, evs)
		}
	})
	t.Run("BrokenStream", func(t *testing.T) {
		f := anthropicfake.New(anthropicfake.Options{})
		srv := MustServer(t, f)
		f.Enqueue(anthropicfake.BrokenStream(4))
		h := map[string]string{}
		for k, v := range okHeader {
			h[k] = v
		}
		resp, err := post(t, context.Background(), srv.URL+"/v1/messages", `{"model":"claude-x","max_tokens":100,"messages":[],"stream":true}`, h)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if n := strings.Count(string(b), "event: "); n != 4 || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%d events, %v", n, err)
		}
	})
	t.Run("HangingStream", func(t *testing.T) {
		f := anthropicfake.New(anthropicfake.Options{})
		srv := MustServer(t, f)
		f.Enqueue(anthropicfake.HangingStream(0))
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if _, err := post(t, ctx, srv.URL+"/v1/messages", simpleBody, okHeader); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err %v", err)
		}
	})
}
