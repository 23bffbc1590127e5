package ollamafake_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"yosan/providers/ollamafake"
)

func MustServer(tb testing.TB, f *ollamafake.Fake) *httptest.Server {
	tb.Helper()
	srv := httptest.NewServer(f)
	tb.Cleanup(func() { f.Close(); srv.Close() })
	return srv
}

func MustPost(tb testing.TB, url, body string) (*http.Response, string) {
	tb.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
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

const msgs = `"messages":[{"role":"user","content":"hi"}]`

func TestChat(t *testing.T) {
	head := `data: {"id":"chatcmpl-417","object":"chat.completion.chunk","created":1721631035,"model":"qwen3:32b","system_fingerprint":"fp_ollama","choices":[`
	tests := []struct {
		name, body, ct string
		opts           ollamafake.Options
		want           []string
	}{
		{"Completion", `{"model":"qwen3:32b",` + msgs + `}`, "application/json", ollamafake.Options{PromptTokens: 14, CompletionTokens: 3}, []string{
			`{"id":"chatcmpl-417","object":"chat.completion","created":1721631035,"model":"qwen3:32b","system_fingerprint":"fp_ollama","choices":[{"index":0,"message":{"role":"assistant","content":"This is a"},"finish_reason":"stop"}],"usage":{"prompt_tokens":14,"completion_tokens":3,"total_tokens":17}}` + "\n",
		}},
		{"CompletionReasoning", `{"model":"qwen3:32b",` + msgs + `}`, "application/json", ollamafake.Options{PromptTokens: 14, CompletionTokens: 1, ReasoningTokens: 2}, []string{
			`{"id":"chatcmpl-417","object":"chat.completion","created":1721631035,"model":"qwen3:32b","system_fingerprint":"fp_ollama","choices":[{"index":0,"message":{"role":"assistant","content":"This","reasoning":"Okay,"},"finish_reason":"stop"}],"usage":{"prompt_tokens":14,"completion_tokens":3,"total_tokens":17}}` + "\n",
		}},
		{"StreamIncludeUsage", `{"model":"qwen3:32b","stream":true,"stream_options":{"include_usage":true},` + msgs + `}`, "text/event-stream", ollamafake.Options{PromptTokens: 14, CompletionTokens: 2, ReasoningTokens: 1}, []string{
			head + `{"index":0,"delta":{"role":"assistant","content":"","reasoning":"Okay"},"finish_reason":null}]}` + "\n\n",
			head + `{"index":0,"delta":{"role":"assistant","content":"This"},"finish_reason":null}]}` + "\n\n",
			head + `{"index":0,"delta":{"role":"assistant","content":" is"},"finish_reason":null}]}` + "\n\n",
			head + `{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"stop"}]}` + "\n\n",
			head + `],"usage":{"prompt_tokens":14,"completion_tokens":3,"total_tokens":17}}` + "\n\n",
			"data: [DONE]\n\n",
		}},
		{"StreamNoUsage", `{"model":"qwen3:32b","stream":true,` + msgs + `}`, "text/event-stream", ollamafake.Options{CompletionTokens: 1}, []string{
			head + `{"index":0,"delta":{"role":"assistant","content":"This"},"finish_reason":null}]}` + "\n\n",
			head + `{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"stop"}]}` + "\n\n",
			"data: [DONE]\n\n",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := ollamafake.New(tt.opts)
			srv := MustServer(t, f)
			resp, body := MustPost(t, srv.URL+"/v1/chat/completions", tt.body)
			if want := strings.Join(tt.want, ""); resp.StatusCode != 200 || body != want {
				t.Errorf("%d\n%s\nwant\n%s", resp.StatusCode, body, want)
			}
			if ct := resp.Header.Get("Content-Type"); ct != tt.ct {
				t.Errorf("content type %q, want %q", ct, tt.ct)
			}
			if f.ChatRequests() != 1 || f.LastRequest().Model != "qwen3:32b" {
				t.Errorf("counters %d %+v", f.ChatRequests(), f.LastRequest())
			}
		})
	}
}

func TestEmbeddings(t *testing.T) {
	t.Run("Float", func(t *testing.T) {
		f := ollamafake.New(ollamafake.Options{PromptTokens: 4, EmbeddingDims: 3})
		srv := MustServer(t, f)
		resp, body := MustPost(t, srv.URL+"/v1/embeddings", `{"model":"nomic-embed-text","input":["a","b"]}`)
		var got struct {
			Object string
			Data   []struct {
				Object    string
				Embedding []float32
				Index     int
			}
			Model string
			Usage struct {
				PromptTokens int `json:"prompt_tokens"`
				TotalTokens  int `json:"total_tokens"`
			}
		}
		if err := json.Unmarshal([]byte(body), &got); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 || got.Object != "list" || len(got.Data) != 2 || got.Data[1].Index != 1 ||
			len(got.Data[0].Embedding) != 3 || got.Model != "nomic-embed-text" || got.Usage.PromptTokens != 4 || got.Usage.TotalTokens != 4 {
			t.Errorf("%d %s", resp.StatusCode, body)
		}
		if !strings.HasPrefix(body, `{"object":"list","data":[{"object":"embedding","embedding":[`) ||
			!strings.HasSuffix(body, `],"model":"nomic-embed-text","usage":{"prompt_tokens":4,"total_tokens":4}}`+"\n") {
			t.Errorf("shape %s", body)
		}
		if f.EmbeddingRequests() != 1 {
			t.Errorf("counter %d", f.EmbeddingRequests())
		}
	})
	t.Run("Base64", func(t *testing.T) {
		srv := MustServer(t, ollamafake.New(ollamafake.Options{EmbeddingDims: 2}))
		_, body := MustPost(t, srv.URL+"/v1/embeddings", `{"model":"nomic-embed-text","input":"a","encoding_format":"base64"}`)
		var got struct {
			Data []struct{ Embedding string }
		}
		if err := json.Unmarshal([]byte(body), &got); err != nil || len(got.Data) != 1 {
			t.Fatalf("%v %s", err, body)
		}
		// 2 float32, little-endian, standard base64: 8 bytes, 12 characters.
		if raw, err := base64.StdEncoding.DecodeString(got.Data[0].Embedding); err != nil || len(raw) != 8 {
			t.Errorf("embedding %q (%v)", got.Data[0].Embedding, err)
		}
	})
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name, path, body string
		opts             ollamafake.Options
		enqueue          []ollamafake.Response
		status           int
		ct, want         string
	}{
		{"ModelNotFound", "/v1/chat/completions", `{"model":"llama9",` + msgs + `}`, ollamafake.Options{Models: []string{"qwen3:32b"}}, nil,
			404, "application/json", `{"error":{"message":"model 'llama9' not found","type":"not_found_error","param":null,"code":null}}` + "\n"},
		{"ModelNotFoundEmbeddings", "/v1/embeddings", `{"model":"llama9","input":"a"}`, ollamafake.Options{Models: []string{"nomic-embed-text"}}, nil,
			404, "application/json", `{"error":{"message":"model 'llama9' not found","type":"not_found_error","param":null,"code":null}}` + "\n"},
		{"ModelNotFoundScripted", "/v1/chat/completions", `{"model":"qwen3:32b",` + msgs + `}`, ollamafake.Options{}, []ollamafake.Response{ollamafake.ModelNotFound("qwen3:32b")},
			404, "application/json", `{"error":{"message":"model 'qwen3:32b' not found","type":"not_found_error","param":null,"code":null}}` + "\n"},
		{"ServerError", "/v1/chat/completions", `{"model":"qwen3:32b",` + msgs + `}`, ollamafake.Options{}, []ollamafake.Response{ollamafake.ServerError()},
			500, "application/json", `{"error":{"message":"llama runner process has terminated: exit status 2","type":"api_error","param":null,"code":null}}` + "\n"},
		{"ServerBusy", "/v1/embeddings", `{"model":"nomic-embed-text","input":"a"}`, ollamafake.Options{}, []ollamafake.Response{ollamafake.ServerBusy()},
			503, "application/json", `{"error":{"message":"server busy, please try again.  maximum pending requests exceeded","type":"api_error","param":null,"code":null}}` + "\n"},
		{"NotJSON", "/v1/chat/completions", `{`, ollamafake.Options{}, nil,
			400, "application/json; charset=utf-8", `{"error":{"message":"unexpected EOF","type":"invalid_request_error","param":null,"code":null}}`},
		{"NoMessages", "/v1/chat/completions", `{"model":"qwen3:32b","messages":[]}`, ollamafake.Options{}, nil,
			400, "application/json; charset=utf-8", `{"error":{"message":"[] is too short - 'messages'","type":"invalid_request_error","param":null,"code":null}}`},
		{"NoInput", "/v1/embeddings", `{"model":"nomic-embed-text"}`, ollamafake.Options{}, nil,
			400, "application/json; charset=utf-8", `{"error":{"message":"invalid input","type":"invalid_request_error","param":null,"code":null}}`},
		{"UnknownPath", "/api/chat", `{}`, ollamafake.Options{}, nil,
			404, "text/plain", `404 page not found`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := ollamafake.New(tt.opts)
			srv := MustServer(t, f)
			f.Enqueue(tt.enqueue...)
			resp, body := MustPost(t, srv.URL+tt.path, tt.body)
			if resp.StatusCode != tt.status || body != tt.want {
				t.Errorf("%d %s\nwant %d %s", resp.StatusCode, body, tt.status, tt.want)
			}
			if ct := resp.Header.Get("Content-Type"); ct != tt.ct {
				t.Errorf("content type %q, want %q", ct, tt.ct)
			}
		})
	}
}
