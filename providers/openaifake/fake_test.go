package openaifake_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"yosan/providers/openai"
	"yosan/providers/openaifake"
)

func MustServer(tb testing.TB, f *openaifake.Fake) *httptest.Server {
	tb.Helper()
	srv := httptest.NewServer(f)
	tb.Cleanup(func() { f.Close(); srv.Close() })
	return srv
}

func post(tb testing.TB, ctx context.Context, url, body string) (*http.Response, error) {
	tb.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return http.DefaultClient.Do(req)
}

func MustPost(tb testing.TB, url, body string) (*http.Response, string) {
	tb.Helper()
	resp, err := post(tb, context.Background(), url, body)
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

func TestCompletion(t *testing.T) {
	f := openaifake.New(openaifake.Options{PromptTokens: 14, CompletionTokens: 3})
	srv := MustServer(t, f)
	resp, body := MustPost(t, srv.URL+"/v1/chat/completions", `{"model":"gpt-4o","messages":[]}`)
	want := `{"id":"chatcmpl-fake","object":"chat.completion","created":1721631035,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"This is a","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":14,"completion_tokens":3,"total_tokens":17,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default","system_fingerprint":"fp_18cc0f1fa0"}`
	if resp.StatusCode != 200 || body != want || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("%d %s", resp.StatusCode, body)
	}
	if f.Requests() != 1 || f.ChatRequests() != 1 || f.EmbeddingRequests() != 0 {
		t.Errorf("counters %d %d %d", f.Requests(), f.ChatRequests(), f.EmbeddingRequests())
	}
	if last := f.LastRequest(); last.Model != "gpt-4o" || last.Stream || string(last.Body) != `{"model":"gpt-4o","messages":[]}` {
		t.Errorf("last %+v", last)
	}
}

func TestStream(t *testing.T) {
	srv := MustServer(t, openaifake.New(openaifake.Options{PromptTokens: 14, CompletionTokens: 2}))
	head := `data: {"id":"chatcmpl-fake","object":"chat.completion.chunk","created":1721631035,"model":"gpt-4o","system_fingerprint":"fp_18cc0f1fa0","choices":[`
	tests := []struct {
		name, body string
		want       []string
	}{
		{"IncludeUsage", `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true}}`, []string{
			head + `{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}`,
			head + `{"index":0,"delta":{"content":"This"},"logprobs":null,"finish_reason":null}],"usage":null}`,
			head + `{"index":0,"delta":{"content":" is"},"logprobs":null,"finish_reason":null}],"usage":null}`,
			head + `{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}`,
			`data: {"id":"chatcmpl-fake","object":"chat.completion.chunk","created":1721631035,"model":"gpt-4o","choices":[],"usage":{"prompt_tokens":14,"completion_tokens":2,"total_tokens":16,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`,
			`data: [DONE]`,
		}},
		{"NoUsage", `{"model":"gpt-4o","stream":true}`, []string{
			head + `{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}]}`,
			head + `{"index":0,"delta":{"content":"This"},"logprobs":null,"finish_reason":null}]}`,
			head + `{"index":0,"delta":{"content":" is"},"logprobs":null,"finish_reason":null}]}`,
			head + `{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}`,
			`data: [DONE]`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := MustPost(t, srv.URL+"/v1/chat/completions", tt.body)
			if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream; charset=utf-8" {
				t.Errorf("content type %q", ct)
			}
			want := strings.Join(tt.want, "\n\n") + "\n\n"
			if body != want {
				t.Errorf("body\n%s\nwant\n%s", body, want)
			}
		})
	}
}

// events reads the data lines of a stream until it ends and returns them with the read error.
func events(r io.Reader) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out, sc.Err()
}

func TestScripted(t *testing.T) {
	t.Run("Errors", func(t *testing.T) {
		for _, tt := range []struct {
			name   string
			resp   openaifake.Response
			status int
			body   string
		}{
			{"RateLimited", openaifake.RateLimited(), 429, openaifake.BodyRateLimitTokens},
			{"RateLimitedRequests", openaifake.RateLimitedRequests(), 429, openaifake.BodyRateLimitRequests},
			{"InsufficientQuota", openaifake.InsufficientQuota(), 429, openaifake.BodyInsufficientQuota},
			{"ServerError", openaifake.ServerError(), 500, openaifake.BodyServerError},
			{"Overloaded", openaifake.Overloaded(), 503, openaifake.BodyOverloaded},
			{"ContextLengthExceeded", openaifake.ContextLengthExceeded(), 400, openaifake.BodyContextLengthExceeded},
		} {
			t.Run(tt.name, func(t *testing.T) {
				f := openaifake.New(openaifake.Options{})
				srv := MustServer(t, f)
				f.Enqueue(tt.resp)
				resp, body := MustPost(t, srv.URL+"/v1/chat/completions", `{"model":"gpt-4o"}`)
				if resp.StatusCode != tt.status || body != tt.body || resp.Header.Get("Content-Type") != "application/json" {
					t.Errorf("%d %s", resp.StatusCode, body)
				}
				var e struct {
					Error struct{ Message, Type string }
				}
				if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Message == "" {
					t.Errorf("not an OpenAI error: %v", err)
				}
				if tt.name == "RateLimited" {
					for k, v := range map[string]string{"x-ratelimit-limit-requests": "60", "x-ratelimit-limit-tokens": "150000",
						"x-ratelimit-remaining-requests": "59", "x-ratelimit-remaining-tokens": "149984",
						"x-ratelimit-reset-requests": "1s", "x-ratelimit-reset-tokens": "6m0s"} {
						if got := resp.Header.Get(k); got != v {
							t.Errorf("%s = %q, want %q", k, got, v)
						}
					}
				}
				// The queue is used up: the next request succeeds.
				if resp, _ := MustPost(t, srv.URL+"/v1/chat/completions", `{"model":"gpt-4o"}`); resp.StatusCode != 200 {
					t.Errorf("second request: %d", resp.StatusCode)
				}
			})
		}
	})
	t.Run("Script", func(t *testing.T) {
		f := openaifake.New(openaifake.Options{Script: func(r *openaifake.Request) *openaifake.Response {
			if r.Model == "busy" {
				resp := openaifake.Overloaded()
				return &resp
			}
			return nil
		}})
		srv := MustServer(t, f)
		if resp, _ := MustPost(t, srv.URL+"/v1/chat/completions", `{"model":"busy"}`); resp.StatusCode != 503 {
			t.Errorf("busy: %d", resp.StatusCode)
		}
		if resp, _ := MustPost(t, srv.URL+"/v1/chat/completions", `{"model":"idle"}`); resp.StatusCode != 200 {
			t.Errorf("idle: %d", resp.StatusCode)
		}
	})
	t.Run("BreakStream", func(t *testing.T) {
		f := openaifake.New(openaifake.Options{})
		srv := MustServer(t, f)
		f.Enqueue(openaifake.Response{Kind: openaifake.BreakStream, After: 3})
		resp, err := post(t, context.Background(), srv.URL+"/v1/chat/completions", `{"model":"gpt-4o","stream":true}`)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		evs, err := events(resp.Body)
		if len(evs) != 3 || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%d events, %v", len(evs), err)
		}
	})
	t.Run("ErrorInStream", func(t *testing.T) {
		f := openaifake.New(openaifake.Options{})
		srv := MustServer(t, f)
		f.Enqueue(openaifake.Response{Kind: openaifake.ErrorInStream, After: 1})
		_, body := MustPost(t, srv.URL+"/v1/chat/completions", `{"model":"gpt-4o","stream":true}`)
		evs, _ := events(strings.NewReader(body))
		if len(evs) != 2 || evs[1] != openaifake.StreamErrorEvent {
			t.Errorf("events %q", evs)
		}
	})
	t.Run("Hang", func(t *testing.T) {
		f := openaifake.New(openaifake.Options{})
		srv := MustServer(t, f)
		f.Enqueue(openaifake.Response{Kind: openaifake.Hang})
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if _, err := post(t, ctx, srv.URL+"/v1/chat/completions", `{"model":"gpt-4o"}`); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err %v", err)
		}
	})
	t.Run("InvalidJSON", func(t *testing.T) {
		srv := MustServer(t, openaifake.New(openaifake.Options{}))
		if resp, body := MustPost(t, srv.URL+"/v1/chat/completions", `{"model":`); resp.StatusCode != 400 || body != openaifake.BodyInvalidJSON {
			t.Errorf("%d %s", resp.StatusCode, body)
		}
	})
	t.Run("UnknownPath", func(t *testing.T) {
		f := openaifake.New(openaifake.Options{})
		srv := MustServer(t, f)
		if resp, _ := MustPost(t, srv.URL+"/v1/completions", `{}`); resp.StatusCode != 404 || f.Requests() != 1 || f.ChatRequests() != 0 {
			t.Errorf("%d", resp.StatusCode)
		}
	})
}

func TestEmbeddings(t *testing.T) {
	f := openaifake.New(openaifake.Options{PromptTokens: 5, EmbeddingDims: 3})
	srv := MustServer(t, f)
	_, body := MustPost(t, srv.URL+"/v1/embeddings", `{"model":"text-embedding-3-small","input":["a","b"]}`)
	var got struct {
		Object string
		Data   []struct {
			Object    string
			Index     int
			Embedding []float32
		}
		Model string
		Usage struct{ PromptTokens, TotalTokens int64 } `json:"usage"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if got.Object != "list" || len(got.Data) != 2 || got.Data[1].Index != 1 || len(got.Data[0].Embedding) != 3 || got.Model != "text-embedding-3-small" {
		t.Errorf("body %s", body)
	}
	_, b64 := MustPost(t, srv.URL+"/v1/embeddings", `{"model":"m","input":"a","encoding_format":"base64","dimensions":2}`)
	want := `{"object":"list","data":[{"object":"embedding","index":0,"embedding":"` + string(openai.AppendEmbedding(nil, openai.HashVector([]byte(`"a"`), 2), true)[1:])
	if !strings.HasPrefix(b64, want) || !strings.HasSuffix(b64, `"model":"m","usage":{"prompt_tokens":5,"total_tokens":5}}`) {
		t.Errorf("base64 body %s", b64)
	}
	if resp, _ := MustPost(t, srv.URL+"/v1/embeddings", `{"model":"m","input":[]}`); resp.StatusCode != 400 {
		t.Errorf("empty input: %d", resp.StatusCode)
	}
}

func BenchmarkStream(b *testing.B) {
	srv := MustServer(b, openaifake.New(openaifake.Options{NoRecord: true, CompletionTokens: 100}))
	b.ReportAllocs()
	for b.Loop() {
		resp, err := post(b, context.Background(), srv.URL+"/v1/chat/completions", `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true}}`)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}
