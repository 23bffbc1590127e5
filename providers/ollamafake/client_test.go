package ollamafake_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"yosan/app"
	"yosan/providers/ollamafake"
	"yosan/providers/openai"
)

// The Ollama upstream is providers/openai pointed at Ollama's /v1: these tests run that client
// against the fake.

// MustOllama starts a fake Ollama and returns it with an openai client pointed at it, with no
// key, as the gateway configures a local Ollama.
func MustOllama(tb testing.TB, opts ollamafake.Options) (*ollamafake.Fake, *openai.Client) {
	tb.Helper()
	f := ollamafake.New(opts)
	srv := httptest.NewServer(f)
	tb.Cleanup(func() { f.Close(); srv.Close() })
	return f, openai.New(openai.Config{Name: "ollama", BaseURL: srv.URL + "/v1"})
}

func request(model string, extra ...string) *app.ProviderRequest {
	body := map[string]json.RawMessage{"model": json.RawMessage(`"` + model + `"`)}
	for i := 0; i+1 < len(extra); i += 2 {
		body[extra[i]] = json.RawMessage(extra[i+1])
	}
	return &app.ProviderRequest{Model: model, Body: body}
}

func chat(model string) *app.ProviderRequest {
	return request(model, "messages", `[{"role":"user","content":"Say hi"}]`)
}

func MustUpstreamError(tb testing.TB, err error) *app.UpstreamError {
	tb.Helper()
	var ue *app.UpstreamError
	if !errors.As(err, &ue) {
		tb.Fatalf("error %v (%T) is not an *app.UpstreamError", err, err)
	}
	if ue.Provider != "ollama" {
		tb.Errorf("Provider = %q, want ollama", ue.Provider)
	}
	return ue
}

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

func TestClientChat(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		f, c := MustOllama(t, ollamafake.Options{PromptTokens: 14, CompletionTokens: 3})
		resp, err := c.ChatCompletion(context.Background(), chat("qwen3:32b"))
		if err != nil {
			t.Fatal(err)
		}
		if want := (app.Usage{PromptTokens: 14, CompletionTokens: 3}); !resp.HasUsage || resp.Usage != want {
			t.Errorf("usage %+v (has %v)", resp.Usage, resp.HasUsage)
		}
		if !strings.Contains(string(resp.Body), `"content":"This is a"`) {
			t.Errorf("body %s", resp.Body)
		}
		if h := f.LastRequest().Header.Get("Authorization"); h != "" {
			t.Errorf("Authorization %q sent to a keyless Ollama", h)
		}
	})
	t.Run("Stream", func(t *testing.T) {
		_, c := MustOllama(t, ollamafake.Options{PromptTokens: 14, CompletionTokens: 2, ReasoningTokens: 2})
		req := request("qwen3:32b", "messages", `[{"role":"user","content":"Say hi"}]`, "stream_options", `{"include_usage":true}`)
		req.Stream = true
		s, err := c.ChatCompletionStream(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		chunks, err := collect(t, s)
		if err != io.EOF {
			t.Fatalf("end: %v", err)
		}
		// 2 reasoning, 2 content, finish, usage
		if len(chunks) != 6 {
			t.Fatalf("%d chunks", len(chunks))
		}
		var text strings.Builder
		for _, ch := range chunks[:5] {
			text.WriteString(ch.Text)
			if ch.Usage != nil {
				t.Errorf("usage in %s", ch.Data)
			}
		}
		if text.String() != "Okay,This is" {
			t.Errorf("text %q: reasoning is generated text too", text.String())
		}
		u := chunks[5]
		if want := (app.Usage{PromptTokens: 14, CompletionTokens: 4}); !u.UsageOnly || u.Usage == nil || *u.Usage != want {
			t.Errorf("usage chunk %s: %+v %v", u.Data, u.Usage, u.UsageOnly)
		}
	})
	t.Run("BrokenStream", func(t *testing.T) {
		f, c := MustOllama(t, ollamafake.Options{CompletionTokens: 5})
		f.Enqueue(ollamafake.BrokenStream(2))
		req := chat("qwen3:32b")
		req.Stream = true
		s, err := c.ChatCompletionStream(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		chunks, err := collect(t, s)
		ue := MustUpstreamError(t, err)
		if !errors.Is(ue, io.ErrUnexpectedEOF) || len(chunks) != 2 || chunks[0].Text+chunks[1].Text != "This is" {
			t.Errorf("%d chunks, %v", len(chunks), err)
		}
	})
}

func TestClientEmbeddings(t *testing.T) {
	_, c := MustOllama(t, ollamafake.Options{PromptTokens: 6, EmbeddingDims: 4})
	resp, err := c.Embeddings(context.Background(), request("nomic-embed-text", "input", `["a","b"]`))
	if err != nil {
		t.Fatal(err)
	}
	if want := (app.Usage{PromptTokens: 6}); !resp.HasUsage || resp.Usage != want {
		t.Errorf("usage %+v (has %v)", resp.Usage, resp.HasUsage)
	}
	var got struct {
		Data []struct{ Embedding []float32 }
	}
	if err := json.Unmarshal(resp.Body, &got); err != nil || len(got.Data) != 2 || len(got.Data[1].Embedding) != 4 {
		t.Errorf("body %s (%v)", resp.Body, err)
	}
}

func TestClientErrors(t *testing.T) {
	tests := []struct {
		name        string
		opts        ollamafake.Options
		enqueue     []ollamafake.Response
		status      int
		body        string
		clientFault bool
	}{
		{"ModelNotFound", ollamafake.Options{Models: []string{"llama3.2"}}, nil,
			404, `{"error":{"message":"model 'qwen3:32b' not found","type":"not_found_error","param":null,"code":null}}` + "\n", true},
		{"ServerError", ollamafake.Options{}, []ollamafake.Response{ollamafake.ServerError()},
			500, `{"error":{"message":"llama runner process has terminated: exit status 2","type":"api_error","param":null,"code":null}}` + "\n", false},
		{"ServerBusy", ollamafake.Options{}, []ollamafake.Response{ollamafake.ServerBusy()},
			503, `{"error":{"message":"server busy, please try again.  maximum pending requests exceeded","type":"api_error","param":null,"code":null}}` + "\n", false},
	}
	calls := []struct {
		name string
		call func(*openai.Client) error
	}{
		{"ChatCompletion", func(c *openai.Client) error {
			_, err := c.ChatCompletion(context.Background(), chat("qwen3:32b"))
			return err
		}},
		{"ChatCompletionStream", func(c *openai.Client) error {
			req := chat("qwen3:32b")
			req.Stream = true
			_, err := c.ChatCompletionStream(context.Background(), req)
			return err
		}},
		{"Embeddings", func(c *openai.Client) error {
			_, err := c.Embeddings(context.Background(), request("qwen3:32b", "input", `"a"`))
			return err
		}},
	}
	for _, call := range calls {
		for _, tt := range tests {
			t.Run(call.name+"/"+tt.name, func(t *testing.T) {
				f, c := MustOllama(t, tt.opts)
				f.Enqueue(tt.enqueue...)
				ue := MustUpstreamError(t, call.call(c))
				if ue.Status != tt.status || string(ue.Body) != tt.body {
					t.Errorf("%d %s\nwant %d %s", ue.Status, ue.Body, tt.status, tt.body)
				}
				if ct := ue.Header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("content type %q", ct)
				}
				if ue.ClientFault() != tt.clientFault {
					t.Errorf("ClientFault = %v", ue.ClientFault())
				}
			})
		}
	}
}
