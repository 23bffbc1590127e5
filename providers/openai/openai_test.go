package openai_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"yosan/app"
	"yosan/providers/openai"
	"yosan/providers/openaifake"
)

// MustFake starts a fake upstream and returns it with a client pointed at it.
func MustFake(tb testing.TB, opts openaifake.Options) (*openaifake.Fake, *openai.Client) {
	tb.Helper()
	f := openaifake.New(opts)
	srv := httptest.NewServer(f)
	tb.Cleanup(func() { f.Close(); srv.Close() })
	return f, openai.New(openai.Config{Name: "fake", BaseURL: srv.URL + "/v1/", APIKey: opts.APIKey})
}

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

// MustUpstreamError asserts err is an *app.UpstreamError and returns it.
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
		f, c := MustFake(t, openaifake.Options{APIKey: "sk-test", PromptTokens: 14, CompletionTokens: 3, CachedTokens: 2})
		resp, err := c.ChatCompletion(context.Background(), chatRequest("gpt-4o", "stream", "true", "stream_options", `{"include_usage":true}`, "temperature", "0.5"))
		if err != nil {
			t.Fatal(err)
		}
		want := app.Usage{PromptTokens: 14, CompletionTokens: 3, CachedTokens: 2}
		if !resp.HasUsage || resp.Usage != want {
			t.Errorf("usage = %+v (has %v), want %+v", resp.Usage, resp.HasUsage, want)
		}
		var got struct {
			Object  string `json:"object"`
			Model   string `json:"model"`
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(resp.Body, &got); err != nil {
			t.Fatal(err)
		}
		if got.Object != "chat.completion" || got.Model != "gpt-4o" || got.Choices[0].Message.Content != "This is a" {
			t.Errorf("body = %s", resp.Body)
		}
		last := f.LastRequest()
		wantBody := `{"messages":[{"role":"user","content":"Say hi"}],"model":"gpt-4o","temperature":0.5}`
		if string(last.Body) != wantBody {
			t.Errorf("sent %s, want %s", last.Body, wantBody)
		}
		if last.Path != "/v1/chat/completions" || last.Header.Get("Content-Type") != "application/json" {
			t.Errorf("path %q, header %v", last.Path, last.Header)
		}
	})
	t.Run("NoUsage", func(t *testing.T) {
		f, c := MustFake(t, openaifake.Options{})
		f.Enqueue(openaifake.Response{OmitUsage: true})
		resp, err := c.ChatCompletion(context.Background(), chatRequest("gpt-4o"))
		if err != nil {
			t.Fatal(err)
		}
		if resp.HasUsage {
			t.Errorf("HasUsage with usage absent: %+v", resp.Usage)
		}
	})
	t.Run("ErrUnauthorized", func(t *testing.T) {
		f := openaifake.New(openaifake.Options{APIKey: "sk-right"})
		srv := httptest.NewServer(f)
		defer srv.Close()
		c := openai.New(openai.Config{Name: "fake", BaseURL: srv.URL, APIKey: "sk-wrong"})
		_, err := c.ChatCompletion(context.Background(), chatRequest("gpt-4o"))
		if ue := MustUpstreamError(t, err); ue.Status != http.StatusUnauthorized {
			t.Errorf("Status = %d", ue.Status)
		}
	})
}

func TestChatCompletionErrors(t *testing.T) {
	tests := []struct {
		name        string
		resp        openaifake.Response
		status      int
		body        string
		clientFault bool
	}{
		{"RateLimited", openaifake.RateLimited(), 429, openaifake.BodyRateLimitTokens, false},
		{"InsufficientQuota", openaifake.InsufficientQuota(), 429, openaifake.BodyInsufficientQuota, false},
		{"ServerError", openaifake.ServerError(), 500, openaifake.BodyServerError, false},
		{"Overloaded", openaifake.Overloaded(), 503, openaifake.BodyOverloaded, false},
		{"ContextLengthExceeded", openaifake.ContextLengthExceeded(), 400, openaifake.BodyContextLengthExceeded, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, c := MustFake(t, openaifake.Options{})
			f.Enqueue(tt.resp, tt.resp)
			_, err := c.ChatCompletion(context.Background(), chatRequest("gpt-4o"))
			ue := MustUpstreamError(t, err)
			if ue.Status != tt.status || string(ue.Body) != tt.body || ue.ClientFault() != tt.clientFault {
				t.Errorf("got %d %q clientFault=%v", ue.Status, ue.Body, ue.ClientFault())
			}
			if tt.name == "RateLimited" && ue.Header.Get("x-ratelimit-reset-tokens") != "6m0s" {
				t.Errorf("headers = %v", ue.Header)
			}
			// A stream that starts with an error status fails the same way.
			_, err = c.ChatCompletionStream(context.Background(), chatRequest("gpt-4o"))
			if ue := MustUpstreamError(t, err); ue.Status != tt.status || string(ue.Body) != tt.body {
				t.Errorf("stream: got %d %q", ue.Status, ue.Body)
			}
		})
	}
	t.Run("ErrBadResponse", func(t *testing.T) {
		f, c := MustFake(t, openaifake.Options{})
		f.Enqueue(openaifake.Response{Kind: openaifake.Garbage})
		_, err := c.ChatCompletion(context.Background(), chatRequest("gpt-4o"))
		if ue := MustUpstreamError(t, err); ue.Status != 0 || !errors.Is(err, openai.ErrBadResponse) {
			t.Errorf("got %+v", ue)
		}
	})
	t.Run("ErrErrorEvent", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, `{"error":{"message":"model is loading","type":"api_error","param":null,"code":null}}`)
		}))
		defer srv.Close()
		c := openai.New(openai.Config{Name: "fake", BaseURL: srv.URL})
		_, err := c.ChatCompletion(context.Background(), chatRequest("llama3"))
		if ue := MustUpstreamError(t, err); ue.Status != 0 || !errors.Is(err, openai.ErrErrorEvent) || !bytes.Contains(ue.Body, []byte("loading")) {
			t.Errorf("got %+v", ue)
		}
	})
	t.Run("ErrTimeout", func(t *testing.T) {
		f, c := MustFake(t, openaifake.Options{})
		f.Enqueue(openaifake.Response{Kind: openaifake.Hang})
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := c.ChatCompletion(ctx, chatRequest("gpt-4o"))
		if ue := MustUpstreamError(t, err); ue.Status != 0 || !ue.Timeout || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("got %+v", ue)
		}
	})
	t.Run("ErrCanceled", func(t *testing.T) {
		f, c := MustFake(t, openaifake.Options{})
		f.Enqueue(openaifake.Response{Kind: openaifake.Hang})
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(20*time.Millisecond, cancel)
		_, err := c.ChatCompletion(ctx, chatRequest("gpt-4o"))
		if ue := MustUpstreamError(t, err); ue.Timeout || !errors.Is(err, context.Canceled) {
			t.Errorf("got %+v", ue)
		}
	})
	t.Run("ErrConnectionRefused", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close()
		c := openai.New(openai.Config{Name: "fake", BaseURL: srv.URL})
		_, err := c.ChatCompletion(context.Background(), chatRequest("gpt-4o"))
		if ue := MustUpstreamError(t, err); ue.Status != 0 || ue.Timeout || ue.Err == nil {
			t.Errorf("got %+v", ue)
		}
	})
}

func TestEmbeddings(t *testing.T) {
	f, c := MustFake(t, openaifake.Options{PromptTokens: 5})
	req := &app.ProviderRequest{Model: "text-embedding-3-small", Body: map[string]json.RawMessage{
		"model": json.RawMessage(`"text-embedding-3-small"`),
		"input": json.RawMessage(`["a","b"]`),
	}}
	resp, err := c.Embeddings(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !resp.HasUsage || resp.Usage != (app.Usage{PromptTokens: 5}) {
		t.Errorf("usage = %+v", resp.Usage)
	}
	var got struct {
		Data []struct {
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(resp.Body, &got); err != nil || len(got.Data) != 2 || len(got.Data[1].Embedding) != 8 {
		t.Errorf("body %s: %v", resp.Body, err)
	}
	if f.EmbeddingRequests() != 1 || f.LastRequest().Path != "/v1/embeddings" {
		t.Errorf("requests %d, path %q", f.EmbeddingRequests(), f.LastRequest().Path)
	}
}

func BenchmarkChatCompletion(b *testing.B) {
	_, c := MustFake(b, openaifake.Options{NoRecord: true})
	req := chatRequest("gpt-4o")
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.ChatCompletion(ctx, req); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

var _ app.Provider = (*openai.Client)(nil)
