package gemini_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"

	"yosan/app"
	"yosan/providers/gemini"
	"yosan/providers/geminifake"
)

// fixedNow is the clock of every test client: "created" is 1721631035.
func fixedNow() time.Time { return time.Unix(1721631035, 0) }

// MustFake starts a fake Gemini upstream and returns it with a client pointed at it.
func MustFake(tb testing.TB, opts geminifake.Options) (*geminifake.Fake, *gemini.Client) {
	tb.Helper()
	if opts.APIKey == "" {
		opts.APIKey = "AIza-test-key"
	}
	f := geminifake.New(opts)
	srv := httptest.NewServer(f)
	tb.Cleanup(func() { f.Close(); srv.Close() })
	return f, gemini.New(gemini.Config{Name: "fake", BaseURL: srv.URL + "/", APIKey: opts.APIKey, Now: fixedNow})
}

// chatRequest returns a request for model with one user message, plus extra fields as
// key/JSON pairs (a "messages" pair replaces the default).
func chatRequest(model string, extra ...string) *app.ProviderRequest {
	body := map[string]json.RawMessage{
		"model":    json.RawMessage(`"` + model + `"`),
		"messages": json.RawMessage(`[{"role":"user","content":"Say hi"}]`),
	}
	for i := 0; i+1 < len(extra); i += 2 {
		body[extra[i]] = json.RawMessage(extra[i+1])
	}
	return &app.ProviderRequest{Model: model, Body: body}
}

// MustUpstreamError asserts err is an *app.UpstreamError from the fake and returns it.
func MustUpstreamError(tb testing.TB, err error) *app.UpstreamError {
	tb.Helper()
	var ue *app.UpstreamError
	if !errors.As(err, &ue) {
		tb.Fatalf("error %v (%T) is not an *app.UpstreamError", err, err)
	}
	if ue.Provider != "fake" {
		tb.Errorf("Provider = %q, want fake", ue.Provider)
	}
	return ue
}

func TestChatCompletion(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		f, c := MustFake(t, geminifake.Options{Text: "Hi there!", PromptTokens: 14, CandidatesTokens: 3, CachedTokens: 2})
		resp, err := c.ChatCompletion(context.Background(), chatRequest("gemini-2.5-flash", "stream", "true", "stream_options", `{"include_usage":true}`))
		if err != nil {
			t.Fatal(err)
		}
		want := app.Usage{PromptTokens: 14, CompletionTokens: 3, CachedTokens: 2}
		if !resp.HasUsage || resp.Usage != want {
			t.Errorf("usage = %+v (has %v), want %+v", resp.Usage, resp.HasUsage, want)
		}
		wantBody := `{"id":"chatcmpl-` + geminifake.ResponseID + `","object":"chat.completion","created":1721631035,"model":"gemini-2.5-flash",` +
			`"choices":[{"index":0,"message":{"role":"assistant","content":"Hi there!"},"logprobs":null,"finish_reason":"stop"}],` +
			`"usage":{"prompt_tokens":14,"completion_tokens":3,"total_tokens":17,"prompt_tokens_details":{"cached_tokens":2},"completion_tokens_details":{"reasoning_tokens":0}}}`
		if string(resp.Body) != wantBody {
			t.Errorf("body =\n%s\nwant\n%s", resp.Body, wantBody)
		}
		var cc oai.ChatCompletion // what an OpenAI SDK client reads
		if err := json.Unmarshal(resp.Body, &cc); err != nil {
			t.Fatal(err)
		}
		if cc.Choices[0].Message.Content != "Hi there!" || cc.Usage.PromptTokensDetails.CachedTokens != 2 {
			t.Errorf("openai-go read %+v", cc)
		}

		last := f.LastRequest()
		if last.Path != "/v1beta/models/gemini-2.5-flash:generateContent" || last.Alt != "" {
			t.Errorf("path = %s?alt=%s", last.Path, last.Alt)
		}
		if got := last.Header.Get("x-goog-api-key"); got != "AIza-test-key" {
			t.Errorf("x-goog-api-key = %q", got)
		}
		if got := last.Header.Get("Content-Type"); got != "application/json" {
			t.Errorf("Content-Type = %q", got)
		}
		if string(last.Body) != `{"contents":[{"role":"user","parts":[{"text":"Say hi"}]}]}` {
			t.Errorf("sent %s", last.Body)
		}
	})

	t.Run("ThoughtsBilledAsOutput", func(t *testing.T) {
		_, c := MustFake(t, geminifake.Options{Text: "42", Thought: "Let me think about the question.", PromptTokens: 8, CandidatesTokens: 11, ThoughtsTokens: 1103})
		resp, err := c.ChatCompletion(context.Background(), chatRequest("gemini-2.5-flash"))
		if err != nil {
			t.Fatal(err)
		}
		// Google bills thinking at the output price: 11 + 1103, and total = totalTokenCount.
		want := app.Usage{PromptTokens: 8, CompletionTokens: 1114}
		if resp.Usage != want {
			t.Errorf("usage = %+v, want %+v", resp.Usage, want)
		}
		var cc oai.ChatCompletion
		if err := json.Unmarshal(resp.Body, &cc); err != nil {
			t.Fatal(err)
		}
		if cc.Choices[0].Message.Content != "42" {
			t.Errorf("content = %q: the thought part leaked in", cc.Choices[0].Message.Content)
		}
		if cc.Usage.CompletionTokens != 1114 || cc.Usage.TotalTokens != 1122 || cc.Usage.CompletionTokensDetails.ReasoningTokens != 1103 {
			t.Errorf("usage in body = %+v", cc.Usage)
		}
	})

	t.Run("ToolCalls", func(t *testing.T) {
		_, c := MustFake(t, geminifake.Options{Text: "Checking.", FunctionCalls: []geminifake.FunctionCall{
			{Name: "getWeather", Args: `{"location": "Tokyo", "units": ["c"]}`, ThoughtSignature: "CikBcsjafFK1"},
			{Name: "getTime", ID: "gemini-call-7"},
		}})
		resp, err := c.ChatCompletion(context.Background(), chatRequest("gemini-2.5-flash"))
		if err != nil {
			t.Fatal(err)
		}
		wantChoice := `"choices":[{"index":0,"message":{"role":"assistant","content":"Checking.","tool_calls":[` +
			`{"id":"call_0","type":"function","function":{"name":"getWeather","arguments":"{\"location\":\"Tokyo\",\"units\":[\"c\"]}"},"extra_content":{"google":{"thought_signature":"CikBcsjafFK1"}}},` +
			`{"id":"gemini-call-7","type":"function","function":{"name":"getTime","arguments":"{}"}}]},"logprobs":null,"finish_reason":"tool_calls"}]`
		if !strings.Contains(string(resp.Body), wantChoice) {
			t.Errorf("body = %s\nwant it to contain %s", resp.Body, wantChoice)
		}
		var cc oai.ChatCompletion
		if err := json.Unmarshal(resp.Body, &cc); err != nil {
			t.Fatal(err)
		}
		if tc := cc.Choices[0].Message.ToolCalls; len(tc) != 2 || tc[0].Function.Name != "getWeather" || cc.Choices[0].FinishReason != "tool_calls" {
			t.Errorf("openai-go read %+v", cc.Choices[0])
		}
	})

	t.Run("OnlyToolCalls", func(t *testing.T) {
		_, c := MustFake(t, geminifake.Options{NoText: true, FunctionCalls: []geminifake.FunctionCall{{Name: "f", Args: `{"a":1}`}}})
		resp, err := c.ChatCompletion(context.Background(), chatRequest("gemini-2.5-flash"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(resp.Body), `"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_0","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]}`) {
			t.Errorf("body = %s", resp.Body)
		}
	})

	for _, tc := range []struct{ reason, want string }{
		{"STOP", "stop"},
		{"MAX_TOKENS", "length"},
		{"SAFETY", "content_filter"},
		{"RECITATION", "content_filter"},
		{"PROHIBITED_CONTENT", "content_filter"},
		{"OTHER", "stop"},
	} {
		t.Run("Finish"+tc.reason, func(t *testing.T) {
			_, c := MustFake(t, geminifake.Options{FinishReason: tc.reason})
			resp, err := c.ChatCompletion(context.Background(), chatRequest("gemini-2.5-flash"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(resp.Body), `"finish_reason":"`+tc.want+`"`) {
				t.Errorf("body = %s, want finish_reason %s", resp.Body, tc.want)
			}
		})
	}

	t.Run("ModelWithCollection", func(t *testing.T) {
		f, c := MustFake(t, geminifake.Options{})
		if _, err := c.ChatCompletion(context.Background(), chatRequest("models/gemini-2.5-pro")); err != nil {
			t.Fatal(err)
		}
		if p := f.LastRequest().Path; p != "/v1beta/models/gemini-2.5-pro:generateContent" {
			t.Errorf("path = %s", p)
		}
	})
}

// TestChatCompletionBlocked covers an answer with no candidate (the prompt was blocked).
func TestChatCompletionBlocked(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		_, _ = w.Write([]byte("{\n  \"promptFeedback\": {\n    \"blockReason\": \"PROHIBITED_CONTENT\"\n  },\n  \"usageMetadata\": {\n    \"promptTokenCount\": 7,\n    \"totalTokenCount\": 7\n  },\n  \"modelVersion\": \"gemini-2.5-flash\"\n}\n"))
	}))
	defer srv.Close()
	c := gemini.New(gemini.Config{Name: "fake", BaseURL: srv.URL, Now: fixedNow})
	resp, err := c.ChatCompletion(context.Background(), chatRequest("gemini-2.5-flash"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(resp.Body), `"message":{"role":"assistant","content":""},"logprobs":null,"finish_reason":"content_filter"`) {
		t.Errorf("body = %s", resp.Body)
	}
	if resp.Usage != (app.Usage{PromptTokens: 7}) {
		t.Errorf("usage = %+v", resp.Usage)
	}
}

// errorCases are the fake's scripted failures, each to reach the caller exactly as sent.
func errorCases() []struct {
	name string
	resp geminifake.Response
} {
	return []struct {
		name string
		resp geminifake.Response
	}{
		{"QuotaPerMinute", geminifake.QuotaPerMinute()},
		{"QuotaTokensPerMinute", geminifake.QuotaTokensPerMinute()},
		{"QuotaPerDay", geminifake.QuotaPerDay()},
		{"ResourceExhausted", geminifake.ResourceExhausted()},
		{"ArrayWrappedQuota", geminifake.ArrayWrapped(geminifake.QuotaPerMinute())},
		{"ArrayWrappedAPIKeyInvalid", geminifake.ArrayWrapped(geminifake.APIKeyInvalid())},
		{"Overloaded", geminifake.Overloaded()},
		{"Internal", geminifake.Internal()},
		{"TokenLimitExceeded", geminifake.TokenLimitExceeded()},
		{"PermissionDenied", geminifake.PermissionDenied()},
		{"APIKeyInvalid", geminifake.APIKeyInvalid()},
	}
}

func TestErrors(t *testing.T) {
	calls := []struct {
		name string
		call func(c *gemini.Client) error
	}{
		{"Chat", func(c *gemini.Client) error {
			_, err := c.ChatCompletion(context.Background(), chatRequest("gemini-2.5-flash"))
			return err
		}},
		{"Stream", func(c *gemini.Client) error {
			_, err := c.ChatCompletionStream(context.Background(), chatRequest("gemini-2.5-flash"))
			return err
		}},
		{"Embeddings", func(c *gemini.Client) error {
			_, err := c.Embeddings(context.Background(), embedRequest(`"hello"`))
			return err
		}},
	}
	for _, tc := range errorCases() {
		for _, call := range calls {
			t.Run(tc.name+"/"+call.name, func(t *testing.T) {
				f, c := MustFake(t, geminifake.Options{})
				f.Enqueue(tc.resp)
				ue := MustUpstreamError(t, call.call(c))
				if ue.Status != tc.resp.Status || string(ue.Body) != string(tc.resp.Body) {
					t.Errorf("got %d %q, want %d %q", ue.Status, ue.Body, tc.resp.Status, tc.resp.Body)
				}
				for k, v := range tc.resp.Header {
					if got := ue.Header.Values(k); strings.Join(got, "|") != strings.Join(v, "|") {
						t.Errorf("header %s = %q, want %q", k, got, v)
					}
				}
				if ue.Timeout || ue.Err != nil {
					t.Errorf("Timeout %v, Err %v: an HTTP answer is neither", ue.Timeout, ue.Err)
				}
				if f.Requests() != 1 {
					t.Errorf("%d requests, want 1", f.Requests())
				}
			})
		}
	}

	t.Run("WrongKey", func(t *testing.T) {
		f := geminifake.New(geminifake.Options{APIKey: "AIza-right"})
		srv := httptest.NewServer(f)
		defer srv.Close()
		c := gemini.New(gemini.Config{Name: "fake", BaseURL: srv.URL, APIKey: "AIza-wrong"})
		_, err := c.ChatCompletion(context.Background(), chatRequest("gemini-2.5-flash"))
		ue := MustUpstreamError(t, err)
		if ue.Status != http.StatusBadRequest || string(ue.Body) != geminifake.BodyAPIKeyInvalid {
			t.Errorf("got %d %s", ue.Status, ue.Body)
		}
	})

	t.Run("NoKey", func(t *testing.T) {
		f := geminifake.New(geminifake.Options{APIKey: "AIza-right"})
		srv := httptest.NewServer(f)
		defer srv.Close()
		c := gemini.New(gemini.Config{Name: "fake", BaseURL: srv.URL})
		_, err := c.ChatCompletion(context.Background(), chatRequest("gemini-2.5-flash"))
		ue := MustUpstreamError(t, err)
		if ue.Status != http.StatusForbidden || string(ue.Body) != geminifake.BodyUnregisteredCaller {
			t.Errorf("got %d %s", ue.Status, ue.Body)
		}
	})

	t.Run("Garbage", func(t *testing.T) {
		f, c := MustFake(t, geminifake.Options{})
		f.Enqueue(geminifake.Response{Kind: geminifake.Garbage})
		_, err := c.ChatCompletion(context.Background(), chatRequest("gemini-2.5-flash"))
		ue := MustUpstreamError(t, err)
		if ue.Status != 0 || !errors.Is(err, gemini.ErrBadResponse) {
			t.Errorf("got %v (status %d)", err, ue.Status)
		}
	})

	t.Run("Timeout", func(t *testing.T) {
		f, c := MustFake(t, geminifake.Options{})
		f.Enqueue(geminifake.Response{Kind: geminifake.Hang})
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := c.ChatCompletion(ctx, chatRequest("gemini-2.5-flash"))
		ue := MustUpstreamError(t, err)
		if !ue.Timeout || ue.Status != 0 {
			t.Errorf("got %+v", ue)
		}
	})

	t.Run("ConnectionRefused", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close()
		c := gemini.New(gemini.Config{Name: "fake", BaseURL: srv.URL})
		_, err := c.ChatCompletion(context.Background(), chatRequest("gemini-2.5-flash"))
		ue := MustUpstreamError(t, err)
		if ue.Status != 0 || ue.Timeout || ue.Err == nil {
			t.Errorf("got %+v", ue)
		}
	})

	t.Run("ErrorObjectIn200", func(t *testing.T) {
		body := "{\n  \"error\": {\n    \"code\": 500,\n    \"message\": \"boom\",\n    \"status\": \"INTERNAL\"\n  }\n}\n"
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(body))
		}))
		defer srv.Close()
		c := gemini.New(gemini.Config{Name: "fake", BaseURL: srv.URL})
		_, err := c.ChatCompletion(context.Background(), chatRequest("gemini-2.5-flash"))
		ue := MustUpstreamError(t, err)
		if !errors.Is(err, gemini.ErrErrorEvent) || string(ue.Body) != body {
			t.Errorf("got %v, body %q", err, ue.Body)
		}
	})
}

func embedRequest(input string, extra ...string) *app.ProviderRequest {
	body := map[string]json.RawMessage{
		"model": json.RawMessage(`"gemini-embedding-001"`),
		"input": json.RawMessage(input),
	}
	for i := 0; i+1 < len(extra); i += 2 {
		body[extra[i]] = json.RawMessage(extra[i+1])
	}
	return &app.ProviderRequest{Model: "gemini-embedding-001", Body: body}
}

func TestEmbeddings(t *testing.T) {
	t.Run("Floats", func(t *testing.T) {
		f, c := MustFake(t, geminifake.Options{})
		resp, err := c.Embeddings(context.Background(), embedRequest(`["hello","world"]`, "dimensions", "3"))
		if err != nil {
			t.Fatal(err)
		}
		if resp.HasUsage {
			t.Errorf("HasUsage: Gemini reports no usage for embeddings, got %+v", resp.Usage)
		}
		last := f.LastRequest()
		if last.Path != "/v1beta/models/gemini-embedding-001:batchEmbedContents" {
			t.Errorf("path = %s", last.Path)
		}
		wantSent := `{"requests":[{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"hello"}]},"outputDimensionality":3},` +
			`{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"world"}]},"outputDimensionality":3}]}`
		if string(last.Body) != wantSent {
			t.Errorf("sent %s\nwant %s", last.Body, wantSent)
		}
		var er oai.CreateEmbeddingResponse
		if err := json.Unmarshal(resp.Body, &er); err != nil {
			t.Fatal(err)
		}
		if len(er.Data) != 2 || len(er.Data[0].Embedding) != 3 || er.Data[1].Index != 1 || er.Model != "gemini-embedding-001" {
			t.Errorf("body = %s", resp.Body)
		}
		if strings.Contains(string(resp.Body), `"usage"`) {
			t.Errorf("body has a usage: %s", resp.Body)
		}
	})

	t.Run("Base64", func(t *testing.T) {
		_, c := MustFake(t, geminifake.Options{EmbeddingDims: 4})
		resp, err := c.Embeddings(context.Background(), embedRequest(`"hello"`, "encoding_format", `"base64"`))
		if err != nil {
			t.Fatal(err)
		}
		var er struct {
			Data []struct {
				Embedding string `json:"embedding"`
			} `json:"data"`
		}
		if err := json.Unmarshal(resp.Body, &er); err != nil {
			t.Fatal(err)
		}
		if len(er.Data) != 1 || len(er.Data[0].Embedding) != 24 { // 16 bytes in base64
			t.Errorf("body = %s", resp.Body)
		}
	})

	for _, tc := range []struct{ name, input, extra string }{
		{"TokenIDs", `[1,2,3]`, ""},
		{"TokenArrays", `[[1,2],[3]]`, ""},
		{"EmptyArray", `[]`, ""},
		{"BadEncoding", `"x"`, `"hex"`},
	} {
		t.Run("Refused"+tc.name, func(t *testing.T) {
			f, c := MustFake(t, geminifake.Options{})
			req := embedRequest(tc.input)
			if tc.extra != "" {
				req.Body["encoding_format"] = json.RawMessage(tc.extra)
			}
			_, err := c.Embeddings(context.Background(), req)
			ue := MustUpstreamError(t, err)
			if ue.Status != http.StatusBadRequest || !errors.Is(err, gemini.ErrUnsupported) || f.Requests() != 0 {
				t.Errorf("got %v, status %d, %d upstream requests", err, ue.Status, f.Requests())
			}
		})
	}
}

// TestReservedMaxTokens: a request that names no limit is sent with the bound the gateway
// reserved for as generationConfig.maxOutputTokens; one that names a limit keeps it.
func TestReservedMaxTokens(t *testing.T) {
	f, c := MustFake(t, geminifake.Options{})
	for _, tt := range []struct {
		req  *app.ProviderRequest
		want string
	}{
		{chatRequest("gemini-2.5-flash"), `"maxOutputTokens":65536`},
		{chatRequest("gemini-2.5-flash", "max_tokens", "50"), `"maxOutputTokens":50`},
	} {
		tt.req.MaxTokens = 65536
		if _, err := c.ChatCompletion(context.Background(), tt.req); err != nil {
			t.Fatal(err)
		}
		if got := string(f.LastRequest().Body); !strings.Contains(got, tt.want) {
			t.Errorf("upstream body %s, want %s", got, tt.want)
		}
	}
}
