package zhipu_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"yosan/app"
	"yosan/providers/zhipu"
	"yosan/providers/zhipufake"
)

// MustFake starts a fake Zhipu and returns it with a client pointed at it.
func MustFake(tb testing.TB, opts zhipufake.Options) (*zhipufake.Fake, *zhipu.Client) {
	tb.Helper()
	opts.APIKey = "zhipu-key"
	f := zhipufake.New(opts)
	srv := httptest.NewServer(f)
	tb.Cleanup(func() { f.Close(); srv.Close() })
	return f, zhipu.New(zhipu.Config{Name: "glm", BaseURL: srv.URL + zhipufake.DefaultPrefix, APIKey: "zhipu-key"})
}

func chatRequest(extra ...string) *app.ProviderRequest {
	body := map[string]json.RawMessage{
		"model":    json.RawMessage(`"glm-4.5"`),
		"messages": json.RawMessage(`[{"role":"user","content":"Say hi"}]`),
	}
	for i := 0; i+1 < len(extra); i += 2 {
		body[extra[i]] = json.RawMessage(extra[i+1])
	}
	return &app.ProviderRequest{Model: "glm-4.5", Body: body}
}

func streamRequest() *app.ProviderRequest {
	r := chatRequest("stream", "true", "stream_options", `{"include_usage":true}`)
	r.Stream = true
	return r
}

// MustUpstreamError asserts err is an *app.UpstreamError of the fake's provider.
func MustUpstreamError(tb testing.TB, err error) *app.UpstreamError {
	tb.Helper()
	var ue *app.UpstreamError
	if !errors.As(err, &ue) {
		tb.Fatalf("error %v (%T) is not an *app.UpstreamError", err, err)
	}
	if ue.Provider != "glm" {
		tb.Errorf("Provider = %q, want glm", ue.Provider)
	}
	return ue
}

// collect reads a stream to its end and returns its chunks and the final error.
func collect(tb testing.TB, s app.Stream) ([]app.StreamChunk, error) {
	tb.Helper()
	defer s.Close()
	var chunks []app.StreamChunk
	for {
		c, err := s.Next()
		if err != nil {
			return chunks, err
		}
		chunks = append(chunks, c)
	}
}

func TestChatCompletion(t *testing.T) {
	tests := []struct {
		name     string
		opts     zhipufake.Options
		usage    app.Usage
		contains string
	}{
		{"OK", zhipufake.Options{PromptTokens: 18, CompletionTokens: 3},
			app.Usage{PromptTokens: 18, CompletionTokens: 3}, `"message":{"content":"This is a","role":"assistant"}`},
		{"Reasoning", zhipufake.Options{PromptTokens: 18, CompletionTokens: 2, ReasoningTokens: 5, CachedTokens: 6},
			app.Usage{PromptTokens: 18, CompletionTokens: 7, CachedTokens: 6}, `"reasoning_content":"The user wants a short"`},
		{"Sensitive", zhipufake.Options{FinishReason: "sensitive"},
			app.Usage{PromptTokens: 10, CompletionTokens: 8}, `"finish_reason":"content_filter"`},
		{"ContextWindow", zhipufake.Options{FinishReason: "model_context_window_exceeded"},
			app.Usage{PromptTokens: 10, CompletionTokens: 8}, `"finish_reason":"length"`},
		{"NetworkError", zhipufake.Options{FinishReason: "network_error"},
			app.Usage{PromptTokens: 10, CompletionTokens: 8}, `"finish_reason":"network_error"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, c := MustFake(t, tt.opts)
			resp, err := c.ChatCompletion(context.Background(), chatRequest("temperature", "0.5"))
			if err != nil {
				t.Fatal(err)
			}
			if !resp.HasUsage || resp.Usage != tt.usage {
				t.Errorf("usage = %+v (has %v), want %+v", resp.Usage, resp.HasUsage, tt.usage)
			}
			if !strings.Contains(string(resp.Body), tt.contains) {
				t.Errorf("body %s lacks %s", resp.Body, tt.contains)
			}
			last := f.LastRequest()
			if want := `{"messages":[{"role":"user","content":"Say hi"}],"model":"glm-4.5","temperature":0.5}`; string(last.Body) != want {
				t.Errorf("sent %s, want %s", last.Body, want)
			}
			if got := last.Header.Get("Authorization"); got != "Bearer zhipu-key" {
				t.Errorf("Authorization %q", got)
			}
		})
	}
	t.Run("Unchanged", func(t *testing.T) {
		// An answer with nothing to adapt is relayed byte for byte.
		_, c := MustFake(t, zhipufake.Options{PromptTokens: 18, CompletionTokens: 1})
		resp, err := c.ChatCompletion(context.Background(), chatRequest())
		if err != nil {
			t.Fatal(err)
		}
		want := `{"choices":[{"finish_reason":"stop","index":0,"message":{"content":"This","role":"assistant"}}],"created":1758884740,"id":"20250926190540c29952ed24ae4570","model":"glm-4.5","request_id":"20250926190540c29952ed24ae4570","usage":{"completion_tokens":1,"prompt_tokens":18,"prompt_tokens_details":{"cached_tokens":0},"total_tokens":19}}`
		if string(resp.Body) != want {
			t.Errorf("body %s", resp.Body)
		}
	})
}

func TestChatCompletionStream(t *testing.T) {
	head := `{"id":"20250926190540c29952ed24ae4570","created":1758884740,"model":"glm-4.5","choices":[{"index":0,`
	usageOnly := `{"id":"20250926190540c29952ed24ae4570","created":1758884740,"model":"glm-4.5","choices":[],"usage":{"prompt_tokens":18,"completion_tokens":5,"total_tokens":23,"prompt_tokens_details":{"cached_tokens":2}}}`
	tests := []struct {
		name  string
		opts  zhipufake.Options
		data  []string
		texts []string
	}{
		{"Reasoning", zhipufake.Options{PromptTokens: 18, CompletionTokens: 2, ReasoningTokens: 3, CachedTokens: 2}, []string{
			head + `"delta":{"role":"assistant","reasoning_content":"The"}}]}`,
			head + `"delta":{"role":"assistant","reasoning_content":" user"}}]}`,
			head + `"delta":{"role":"assistant","reasoning_content":" wants"}}]}`,
			head + `"delta":{"role":"assistant","content":"This","reasoning_content":""}}]}`,
			head + `"delta":{"role":"assistant","content":" is","reasoning_content":""}}]}`,
			head + `"finish_reason":"stop","delta":{"role":"assistant","content":""}}],"usage":null}`,
			usageOnly,
		}, []string{"The", " user", " wants", "This", " is", "", ""}},
		{"Sensitive", zhipufake.Options{PromptTokens: 18, CompletionTokens: 5, FinishReason: "sensitive", CachedTokens: 2}, []string{
			head + `"delta":{"role":"assistant","content":"This"}}]}`,
			head + `"delta":{"role":"assistant","content":" is"}}]}`,
			head + `"delta":{"role":"assistant","content":" a"}}]}`,
			head + `"delta":{"role":"assistant","content":" fake"}}]}`,
			head + `"delta":{"role":"assistant","content":" answer"}}]}`,
			head + `"finish_reason":"content_filter","delta":{"role":"assistant","content":""}}],"usage":null}`,
			usageOnly,
		}, []string{"This", " is", " a", " fake", " answer", "", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, c := MustFake(t, tt.opts)
			s, err := c.ChatCompletionStream(context.Background(), streamRequest())
			if err != nil {
				t.Fatal(err)
			}
			chunks, err := collect(t, s)
			if err != io.EOF {
				t.Fatalf("end: %v", err)
			}
			if !strings.Contains(string(f.LastRequest().Body), `"stream":true`) {
				t.Errorf("sent %s", f.LastRequest().Body)
			}
			if len(chunks) != len(tt.data) {
				t.Fatalf("%d chunks, want %d", len(chunks), len(tt.data))
			}
			last := len(chunks) - 1
			for i, ch := range chunks {
				if string(ch.Data) != tt.data[i] {
					t.Errorf("chunk %d\n%s\nwant\n%s", i, ch.Data, tt.data[i])
				}
				if ch.Text != tt.texts[i] {
					t.Errorf("chunk %d text %q, want %q", i, ch.Text, tt.texts[i])
				}
				if i < last && (ch.Usage != nil || ch.UsageOnly) {
					t.Errorf("chunk %d has usage", i)
				}
			}
			want := app.Usage{PromptTokens: 18, CompletionTokens: 5, CachedTokens: 2}
			if u := chunks[last]; !u.UsageOnly || u.Usage == nil || *u.Usage != want {
				t.Errorf("last chunk usage %+v only %v, want %+v", u.Usage, u.UsageOnly, want)
			}
		})
	}
	t.Run("Broken", func(t *testing.T) {
		f, c := MustFake(t, zhipufake.Options{CompletionTokens: 5, ReasoningTokens: 2})
		f.Enqueue(zhipufake.BrokenStream(4))
		s, err := c.ChatCompletionStream(context.Background(), streamRequest())
		if err != nil {
			t.Fatal(err)
		}
		chunks, err := collect(t, s)
		ue := MustUpstreamError(t, err)
		// A dropped connection; a body ended cleanly without [DONE] would be ErrStreamBroken:
		// both wrap io.ErrUnexpectedEOF.
		if !errors.Is(ue, io.ErrUnexpectedEOF) || ue.Status != 0 {
			t.Errorf("error %v, want an unexpected EOF", ue)
		}
		var text strings.Builder
		for _, ch := range chunks {
			text.WriteString(ch.Text)
			if ch.Usage != nil {
				t.Errorf("usage before the break: %s", ch.Data)
			}
		}
		// Reasoning and content both count for settling a broken stream.
		if len(chunks) != 4 || text.String() != "The userThis is" {
			t.Errorf("%d chunks, text %q", len(chunks), text.String())
		}
	})
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name   string
		resp   zhipufake.Response
		status int
		code   string
		body   string
	}{
		{"1302", zhipufake.RateLimited(), 429, "1302", zhipufake.Body1302},
		{"1302CN", zhipufake.RateLimitedCN(), 429, "1302", zhipufake.Body1302CN},
		{"1305", zhipufake.Overloaded(), 429, "1305", zhipufake.Body1305},
		{"1305EN", zhipufake.OverloadedEN(), 429, "1305", zhipufake.Body1305EN},
		{"1308CN", zhipufake.FiveHourLimit(), 429, "1308", `{"error":{"code":"1308","message":"已达到 5 小时的使用限额。您的限额将在 2026-05-09 20:42:25 重置。"}}`},
		{"1308EN", zhipufake.FiveHourLimitEN(), 429, "1308", zhipufake.Body1308EN},
		{"1308Placeholder", zhipufake.FiveHourLimitPlaceholder(), 429, "1308", `{"error":{"code":"1308","message":"You have reached the 5-hour usage limit. Your quota will reset at next_flush_time."}}`},
		{"1310", zhipufake.WeeklyLimit(), 429, "1310", zhipufake.Body1310},
		{"1310CN", zhipufake.WeeklyLimitCN(), 429, "1310", zhipufake.Body1310CN},
		{"1310Placeholder", zhipufake.WeeklyLimitPlaceholder(), 429, "1310", zhipufake.Body1310Placeholder},
		{"1113", zhipufake.InsufficientBalance(), 429, "1113", zhipufake.Body1113},
		{"1113EN", zhipufake.InsufficientBalanceEN(), 429, "1113", zhipufake.Body1113EN},
		{"1309", zhipufake.PlanExpired(), 429, "1309", zhipufake.Body1309},
		{"ServerError", zhipufake.ServerError(), 500, "500", zhipufake.BodyServerError},
	}
	calls := []struct {
		name string
		call func(*zhipu.Client) error
	}{
		{"ChatCompletion", func(c *zhipu.Client) error {
			_, err := c.ChatCompletion(context.Background(), chatRequest())
			return err
		}},
		{"ChatCompletionStream", func(c *zhipu.Client) error {
			_, err := c.ChatCompletionStream(context.Background(), streamRequest())
			return err
		}},
	}
	for _, call := range calls {
		for _, tt := range tests {
			t.Run(call.name+"/"+tt.name, func(t *testing.T) {
				f, c := MustFake(t, zhipufake.Options{})
				f.Enqueue(tt.resp)
				ue := MustUpstreamError(t, call.call(c))
				if ue.Status != tt.status || string(ue.Body) != tt.body {
					t.Errorf("%d %s, want %d %s", ue.Status, ue.Body, tt.status, tt.body)
				}
				if ct := ue.Header.Get("Content-Type"); ct != "application/json; charset=UTF-8" {
					t.Errorf("content type %q", ct)
				}
				var e struct {
					Error struct{ Code, Message string }
				}
				if err := json.Unmarshal(ue.Body, &e); err != nil || e.Error.Code != tt.code {
					t.Errorf("code %q (%v), want the string %q", e.Error.Code, err, tt.code)
				}
				if ue.ClientFault() {
					t.Error("a Zhipu quota or server error is not the caller's fault")
				}
			})
		}
	}
}

func TestInvalidKey(t *testing.T) {
	f := zhipufake.New(zhipufake.Options{APIKey: "zhipu-key"})
	srv := httptest.NewServer(f)
	t.Cleanup(func() { f.Close(); srv.Close() })
	c := zhipu.New(zhipu.Config{Name: "glm", BaseURL: srv.URL + zhipufake.DefaultPrefix + "/", APIKey: "wrong"})
	_, err := c.ChatCompletion(context.Background(), chatRequest())
	ue := MustUpstreamError(t, err)
	if ue.Status != 401 || string(ue.Body) != zhipufake.BodyInvalidKey {
		t.Errorf("%d %s", ue.Status, ue.Body)
	}
}
