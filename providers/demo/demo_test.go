package demo_test

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"yosan/app"
	"yosan/providers/demo"
	"yosan/providers/tokens"
)

var fixedNow = func() time.Time { return time.Unix(1721631035, 0) }

func newDemo() *demo.Provider {
	return demo.New(demo.Options{Counter: tokens.New(), Now: fixedNow})
}

func request(body string) *app.ProviderRequest {
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		panic(err)
	}
	var model string
	_ = json.Unmarshal(m["model"], &model)
	return &app.ProviderRequest{Model: model, Body: m}
}

// completion mirrors OpenAI's chat.completion; pointers tell null from absent.
type completion struct {
	ID                string `json:"id"`
	Object            string `json:"object"`
	Created           int64  `json:"created"`
	Model             string `json:"model"`
	SystemFingerprint string `json:"system_fingerprint"`
	Choices           []struct {
		Index   int `json:"index"`
		Message struct {
			Role      string          `json:"role"`
			Content   *string         `json:"content"`
			Refusal   json.RawMessage `json:"refusal"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		Logprobs     json.RawMessage `json:"logprobs"`
		FinishReason string          `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens        int64 `json:"prompt_tokens"`
		CompletionTokens    int64 `json:"completion_tokens"`
		TotalTokens         int64 `json:"total_tokens"`
		PromptTokensDetails struct {
			CachedTokens *int64 `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		CompletionTokensDetails struct {
			ReasoningTokens *int64 `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	} `json:"usage"`
}

func MustComplete(tb testing.TB, p *demo.Provider, body string) (*app.ProviderResponse, completion) {
	tb.Helper()
	resp, err := p.ChatCompletion(context.Background(), request(body))
	if err != nil {
		tb.Fatal(err)
	}
	var c completion
	if err := json.Unmarshal(resp.Body, &c); err != nil {
		tb.Fatalf("%v: %s", err, resp.Body)
	}
	return resp, c
}

func TestChatCompletion(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		body := `{"model":"demo-mini","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hello world"}]}`
		resp, c := MustComplete(t, newDemo(), body)
		if c.ID != "chatcmpl-demo-1" || c.Object != "chat.completion" || c.Created != 1721631035 || c.Model != "demo-mini" || c.SystemFingerprint == "" {
			t.Errorf("envelope %s", resp.Body)
		}
		ch := c.Choices[0]
		if len(c.Choices) != 1 || ch.Index != 0 || ch.Message.Role != "assistant" || ch.FinishReason != "stop" ||
			string(ch.Message.Refusal) != "null" || string(ch.Logprobs) != "null" {
			t.Errorf("choice %s", resp.Body)
		}
		content := *ch.Message.Content
		if !strings.HasPrefix(content, "Demo reply: hello world ") || len(strings.Fields(content)) != demo.DefaultCompletionTokens {
			t.Errorf("content %q", content)
		}
		// "Be brief.\nhello world" is 6 tokens in o200k_base; 2 messages x 3 + 3.
		wantPrompt := tokens.New().CountText("demo-mini", "Be brief.\nhello world") + 9
		u := c.Usage
		if u.PromptTokens != wantPrompt || u.CompletionTokens != 12 || u.TotalTokens != wantPrompt+12 ||
			u.PromptTokensDetails.CachedTokens == nil || u.CompletionTokensDetails.ReasoningTokens == nil {
			t.Errorf("usage %+v", u)
		}
		if !resp.HasUsage || resp.Usage != (app.Usage{PromptTokens: wantPrompt, CompletionTokens: 12}) {
			t.Errorf("ProviderResponse usage %+v", resp.Usage)
		}
	})
	t.Run("Deterministic", func(t *testing.T) {
		body := `{"model":"demo-max","messages":[{"role":"user","content":[{"type":"text","text":"same prompt"}]}],"max_tokens":40}`
		_, a := MustComplete(t, newDemo(), body)
		_, b := MustComplete(t, newDemo(), body)
		if *a.Choices[0].Message.Content != *b.Choices[0].Message.Content {
			t.Errorf("%q != %q", *a.Choices[0].Message.Content, *b.Choices[0].Message.Content)
		}
		_, other := MustComplete(t, newDemo(), strings.Replace(body, "same", "other", 1))
		if *a.Choices[0].Message.Content == *other.Choices[0].Message.Content {
			t.Error("different prompts got the same answer")
		}
	})
	for _, tt := range []struct {
		name  string
		extra string
		words int
	}{
		{"MaxTokens", `"max_tokens":1`, 1},
		{"MaxCompletionTokens", `"max_completion_tokens":100,"max_tokens":5`, 100},
		{"LongAnswer", `"max_tokens":4096`, 4096},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"model":"demo-mini","messages":[{"role":"user","content":"hi"}],` + tt.extra + `}`
			_, c := MustComplete(t, newDemo(), body)
			if n := len(strings.Fields(*c.Choices[0].Message.Content)); n != tt.words || c.Usage.CompletionTokens != int64(tt.words) || c.Choices[0].FinishReason != "length" {
				t.Errorf("%d words, usage %d, finish %q", n, c.Usage.CompletionTokens, c.Choices[0].FinishReason)
			}
		})
	}
	t.Run("JSONObject", func(t *testing.T) {
		body := `{"model":"demo-mini","messages":[{"role":"user","content":"say \"hi\""}],"response_format":{"type":"json_object"},"max_tokens":7}`
		_, c := MustComplete(t, newDemo(), body)
		content := *c.Choices[0].Message.Content
		var obj map[string]any
		if err := json.Unmarshal([]byte(content), &obj); err != nil || len(strings.Fields(content)) != 7 {
			t.Errorf("content %q: %v", content, err)
		}
	})
	for _, tt := range []struct{ name, choice, want string }{
		{"ToolRequired", `"required"`, "get_weather"},
		{"ToolNamed", `{"type":"function","function":{"name":"lookup"}}`, "lookup"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"model":"demo-mini","messages":[{"role":"user","content":"weather?"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{}}},{"type":"function","function":{"name":"lookup"}}],"tool_choice":` + tt.choice + `}`
			resp, c := MustComplete(t, newDemo(), body)
			ch := c.Choices[0]
			if ch.FinishReason != "tool_calls" || ch.Message.Content != nil || len(ch.Message.ToolCalls) != 1 {
				t.Fatalf("body %s", resp.Body)
			}
			tc := ch.Message.ToolCalls[0]
			if tc.Type != "function" || tc.Function.Name != tt.want || !json.Valid([]byte(tc.Function.Arguments)) || tc.ID == "" {
				t.Errorf("tool call %+v", tc)
			}
		})
	}
	t.Run("ToolAuto", func(t *testing.T) {
		body := `{"model":"demo-mini","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"auto"}`
		if _, c := MustComplete(t, newDemo(), body); c.Choices[0].FinishReason != "stop" {
			t.Errorf("finish %q", c.Choices[0].FinishReason)
		}
	})
}

func TestChatCompletionErrors(t *testing.T) {
	for _, tt := range []struct{ name, body, param string }{
		{"NoMessages", `{"model":"demo-mini","messages":[]}`, "messages"},
		{"MessagesAbsent", `{"model":"demo-mini"}`, "messages"},
		{"MessagesNotArray", `{"model":"demo-mini","messages":"hi"}`, "messages"},
		{"MaxTokensTooLarge", `{"model":"demo-mini","messages":[{"role":"user","content":"x"}],"max_tokens":5000}`, "max_tokens"},
		{"MaxTokensZero", `{"model":"demo-mini","messages":[{"role":"user","content":"x"}],"max_completion_tokens":0}`, "max_completion_tokens"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newDemo().ChatCompletion(context.Background(), request(tt.body))
			var ue *app.UpstreamError
			if !errors.As(err, &ue) || ue.Status != 400 || !ue.ClientFault() {
				t.Fatalf("err %v", err)
			}
			var e struct {
				Error struct {
					Message, Type string
					Param         *string
					Code          *string
				}
			}
			if err := json.Unmarshal(ue.Body, &e); err != nil || e.Error.Type != "invalid_request_error" || e.Error.Message == "" ||
				e.Error.Param == nil || *e.Error.Param != tt.param {
				t.Errorf("body %s", ue.Body)
			}
			if _, err := newDemo().ChatCompletionStream(context.Background(), request(tt.body)); !errors.As(err, &ue) || ue.Status != 400 {
				t.Errorf("stream err %v", err)
			}
		})
	}
	t.Run("ErrTimeout", func(t *testing.T) {
		p := demo.New(demo.Options{Latency: time.Hour})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		_, err := p.ChatCompletion(ctx, request(`{"model":"demo-mini","messages":[{"role":"user","content":"x"}]}`))
		var ue *app.UpstreamError
		if !errors.As(err, &ue) || !ue.Timeout || ue.Status != 0 || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err %v", err)
		}
	})
	t.Run("ErrCanceledMidStream", func(t *testing.T) {
		p := demo.New(demo.Options{Latency: time.Millisecond})
		ctx, cancel := context.WithCancel(context.Background())
		s, err := p.ChatCompletionStream(ctx, request(`{"model":"demo-mini","messages":[{"role":"user","content":"x"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Next(); err != nil {
			t.Fatal(err)
		}
		cancel()
		var ue *app.UpstreamError
		if _, err := s.Next(); !errors.As(err, &ue) || ue.Timeout || !errors.Is(err, context.Canceled) {
			t.Errorf("err %v", err)
		}
	})
}

// chunk mirrors chat.completion.chunk.
type chunk struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	Model             string          `json:"model"`
	Choices           []chunkChoice   `json:"choices"`
	Usage             json.RawMessage `json:"usage"`
	SystemFingerprint string          `json:"system_fingerprint"`
}

type chunkChoice struct {
	Delta struct {
		Role      string  `json:"role"`
		Content   *string `json:"content"`
		ToolCalls []struct {
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

func MustStream(tb testing.TB, body string) ([]app.StreamChunk, []chunk) {
	tb.Helper()
	s, err := newDemo().ChatCompletionStream(context.Background(), request(body))
	if err != nil {
		tb.Fatal(err)
	}
	defer s.Close()
	var raw []app.StreamChunk
	var parsed []chunk
	for {
		c, err := s.Next()
		if err == io.EOF {
			return raw, parsed
		}
		if err != nil {
			tb.Fatal(err)
		}
		var p chunk
		if err := json.Unmarshal(c.Data, &p); err != nil {
			tb.Fatalf("%v: %s", err, c.Data)
		}
		raw, parsed = append(raw, c), append(parsed, p)
	}
}

func TestChatCompletionStream(t *testing.T) {
	t.Run("IncludeUsage", func(t *testing.T) {
		body := `{"model":"demo-mini","messages":[{"role":"user","content":"hello world"}],"max_tokens":100,"stream":true,"stream_options":{"include_usage":true}}`
		raw, parsed := MustStream(t, body)
		// role chunk + 15 content chunks (100 words, 7 per chunk: at most 16) + finish + usage
		if len(parsed) != 18 {
			t.Fatalf("%d chunks", len(parsed))
		}
		first := parsed[0]
		if first.Object != "chat.completion.chunk" || first.ID != "chatcmpl-demo-1" || first.Model != "demo-mini" ||
			first.Choices[0].Delta.Role != "assistant" || first.Choices[0].Delta.Content == nil || *first.Choices[0].Delta.Content != "" {
			t.Errorf("first chunk %s", raw[0].Data)
		}
		var text string
		for i, p := range parsed[:17] {
			if string(p.Usage) != "null" || raw[i].Usage != nil || raw[i].UsageOnly {
				t.Errorf("chunk %d: usage %s", i, p.Usage)
			}
			if len(p.Choices) != 1 {
				t.Fatalf("chunk %d: %s", i, raw[i].Data)
			}
			if p.Choices[0].Delta.Content != nil {
				text += *p.Choices[0].Delta.Content
				if raw[i].Text != *p.Choices[0].Delta.Content {
					t.Errorf("chunk %d: Text %q", i, raw[i].Text)
				}
			}
			if fr := p.Choices[0].FinishReason; (fr != nil) != (i == 16) {
				t.Errorf("chunk %d: finish_reason %v", i, fr)
			}
		}
		if *parsed[16].Choices[0].FinishReason != "length" || len(strings.Fields(text)) != 100 || !strings.HasPrefix(text, "Demo reply: hello world") {
			t.Errorf("finish %q, text %q", *parsed[16].Choices[0].FinishReason, text)
		}
		// The non-streaming answer to the same request has the same text.
		_, c := MustComplete(t, newDemo(), body)
		if *c.Choices[0].Message.Content != text {
			t.Errorf("stream text %q != completion %q", text, *c.Choices[0].Message.Content)
		}
		last, lastRaw := parsed[17], raw[17]
		if last.Choices == nil || len(last.Choices) != 0 || !lastRaw.UsageOnly || lastRaw.Usage == nil ||
			lastRaw.Usage.CompletionTokens != 100 || lastRaw.Usage.PromptTokens != c.Usage.PromptTokens {
			t.Errorf("usage chunk %s (%+v)", lastRaw.Data, lastRaw.Usage)
		}
	})
	t.Run("AtMost16ContentChunks", func(t *testing.T) {
		raw, _ := MustStream(t, `{"model":"demo-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":4096}`)
		var text string
		for _, r := range raw {
			text += r.Text
		}
		if len(raw) != 1+16+1 || len(strings.Fields(text)) != 4096 {
			t.Errorf("%d chunks, %d words", len(raw), len(strings.Fields(text)))
		}
	})
	t.Run("NoUsage", func(t *testing.T) {
		raw, parsed := MustStream(t, `{"model":"demo-mini","messages":[{"role":"user","content":"hi"}]}`)
		// role + 12 words (one per chunk) + finish
		if len(parsed) != 14 {
			t.Fatalf("%d chunks", len(parsed))
		}
		for i, p := range parsed {
			if p.Usage != nil || raw[i].Usage != nil {
				t.Errorf("chunk %d has usage: %s", i, raw[i].Data)
			}
		}
	})
	t.Run("ToolCall", func(t *testing.T) {
		raw, parsed := MustStream(t, `{"model":"demo-mini","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required","stream_options":{"include_usage":true}}`)
		if len(parsed) != 4 || parsed[0].Choices[0].Delta.ToolCalls[0].Function.Name != "f" ||
			raw[1].Text != "{}" || *parsed[2].Choices[0].FinishReason != "tool_calls" || !raw[3].UsageOnly {
			t.Errorf("chunks %d", len(parsed))
			for _, r := range raw {
				t.Logf("%s", r.Data)
			}
		}
	})
}

func TestEmbeddings(t *testing.T) {
	p := newDemo()
	embed := func(t *testing.T, body string) ([]app.Usage, [][]float32) {
		t.Helper()
		resp, err := p.Embeddings(context.Background(), request(body))
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Object string `json:"object"`
			Model  string `json:"model"`
			Data   []struct {
				Object    string          `json:"object"`
				Index     int             `json:"index"`
				Embedding json.RawMessage `json:"embedding"`
			} `json:"data"`
			Usage struct {
				PromptTokens int64 `json:"prompt_tokens"`
				TotalTokens  int64 `json:"total_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(resp.Body, &got); err != nil {
			t.Fatal(err)
		}
		if got.Object != "list" || got.Model != "demo-embed" || got.Usage.PromptTokens != resp.Usage.PromptTokens || got.Usage.TotalTokens != got.Usage.PromptTokens {
			t.Errorf("body %s", resp.Body)
		}
		var vecs [][]float32
		for i, d := range got.Data {
			if d.Object != "embedding" || d.Index != i {
				t.Errorf("item %d: %+v", i, d)
			}
			var v []float32
			if d.Embedding[0] == '"' {
				var s string
				_ = json.Unmarshal(d.Embedding, &s)
				raw, err := base64.StdEncoding.DecodeString(s)
				if err != nil {
					t.Fatal(err)
				}
				for j := 0; j+4 <= len(raw); j += 4 {
					v = append(v, math.Float32frombits(binary.LittleEndian.Uint32(raw[j:])))
				}
			} else if err := json.Unmarshal(d.Embedding, &v); err != nil {
				t.Fatal(err)
			}
			vecs = append(vecs, v)
		}
		return []app.Usage{resp.Usage}, vecs
	}
	u, a := embed(t, `{"model":"demo-embed","input":["hello world","other"]}`)
	if len(a) != 2 || len(a[0]) != demo.EmbeddingDims || u[0].PromptTokens != 3 {
		t.Errorf("%d vectors, usage %+v", len(a), u)
	}
	var norm float64
	for _, f := range a[0] {
		norm += float64(f) * float64(f)
	}
	if math.Abs(norm-1) > 1e-5 {
		t.Errorf("norm %v", norm)
	}
	_, b := embed(t, `{"model":"demo-embed","input":"hello world","encoding_format":"base64"}`)
	if len(b) != 1 || len(b[0]) != demo.EmbeddingDims {
		t.Fatalf("base64: %v", b)
	}
	for i := range b[0] {
		if b[0][i] != a[0][i] {
			t.Fatalf("base64 vector differs from float vector at %d", i)
		}
	}
	u, c := embed(t, `{"model":"demo-embed","input":[[1,2,3],[4]],"dimensions":4}`)
	if len(c) != 2 || len(c[0]) != 4 || u[0].PromptTokens != 4 {
		t.Errorf("token arrays: %v, %+v", c, u)
	}
	for _, bad := range []string{
		`{"model":"demo-embed"}`, `{"model":"demo-embed","input":""}`, `{"model":"demo-embed","input":[]}`,
		`{"model":"demo-embed","input":{"a":1}}`, `{"model":"demo-embed","input":"x","encoding_format":"hex"}`,
	} {
		_, err := p.Embeddings(context.Background(), request(bad))
		var ue *app.UpstreamError
		if !errors.As(err, &ue) || ue.Status != 400 {
			t.Errorf("%s: err %v", bad, err)
		}
	}
}

func TestDefaultModels(t *testing.T) {
	want := map[string]app.Model{
		"demo-mini":  {Name: "demo-mini", Provider: "demo", UpstreamName: "demo-mini", Tier: "free", Kind: "chat", MaxOutputTokens: 4096, ContextWindow: 128000, Price: app.Price{InputPerM: 150000, OutputPerM: 600000}},
		"demo-max":   {Name: "demo-max", Provider: "demo", UpstreamName: "demo-max", Tier: "enterprise", Kind: "chat", MaxOutputTokens: 8192, ContextWindow: 200000, Price: app.Price{InputPerM: 15000000, OutputPerM: 75000000}},
		"demo-embed": {Name: "demo-embed", Provider: "demo", UpstreamName: "demo-embed", Tier: "free", Kind: "embedding", ContextWindow: 8192, Price: app.Price{InputPerM: 20000}},
	}
	models := demo.DefaultModels()
	if len(models) != len(want) {
		t.Fatalf("%d models", len(models))
	}
	for _, m := range models {
		if m != want[m.Name] {
			t.Errorf("%+v, want %+v", m, want[m.Name])
		}
	}
}

var _ app.Provider = (*demo.Provider)(nil)

func BenchmarkChatCompletion(b *testing.B) {
	p := newDemo()
	req := request(`{"model":"demo-mini","messages":[{"role":"user","content":"Write a haiku about the sea."}],"max_tokens":64}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.ChatCompletion(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}
