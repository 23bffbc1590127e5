// Package demo is the built-in demo provider: it answers OpenAI-shaped chat completions and
// embeddings without any network, deterministically, so the gateway can be tried (and tested)
// with no upstream account. A word of its answers is one token.
package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"yosan/app"
	"yosan/providers/openai"
	"yosan/providers/tokens"
)

// Name is the provider name of the demo models.
const Name = "demo"

// DefaultCompletionTokens is the answer length when the request names no max_tokens.
const DefaultCompletionTokens = 12

// maxChunks bounds the content chunks of a stream, so a long answer does not take one Latency
// per token.
const maxChunks = 16

// SystemFingerprint is the "system_fingerprint" of every demo answer.
const SystemFingerprint = "fp_demo"

// Options configure the demo provider.
type Options struct {
	// Latency is waited before a completion and before each chunk of a stream.
	Latency time.Duration
	// Counter counts prompt tokens; nil means tokens.EstimateText.
	Counter app.TokenCounter
	// Now is the clock for "created"; nil means time.Now.
	Now func() time.Time
}

// Provider is the demo provider. It implements app.Provider and is safe for concurrent use.
type Provider struct {
	opts Options
	seq  atomic.Int64
}

// New returns a demo provider.
func New(opts Options) *Provider {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Provider{opts: opts}
}

// DefaultModels returns the demo models with their tiers, limits and prices.
func DefaultModels() []app.Model {
	return []app.Model{
		{Name: "demo-mini", Provider: Name, UpstreamName: "demo-mini", Tier: "free", Kind: "chat",
			MaxOutputTokens: 4096, ContextWindow: 128_000, Price: app.Price{InputPerM: 150_000, OutputPerM: 600_000}},
		{Name: "demo-max", Provider: Name, UpstreamName: "demo-max", Tier: "enterprise", Kind: "chat",
			MaxOutputTokens: 8192, ContextWindow: 200_000, Price: app.Price{InputPerM: 15_000_000, OutputPerM: 75_000_000}},
		{Name: "demo-embed", Provider: Name, UpstreamName: "demo-embed", Tier: "free", Kind: "embedding",
			MaxOutputTokens: 0, ContextWindow: 8192, Price: app.Price{InputPerM: 20_000}},
	}
}

// maxOutput is the largest max_tokens the demo accepts for model.
func maxOutput(model string) int64 {
	for _, m := range DefaultModels() {
		if m.UpstreamName == model && m.MaxOutputTokens > 0 {
			return m.MaxOutputTokens
		}
	}
	return 16_384
}

// chatRequest is the part of a chat completion request the demo reads.
type chatRequest struct {
	Model               string            `json:"model"`
	Messages            []message         `json:"messages"`
	MaxTokens           *int64            `json:"max_tokens"`
	MaxCompletionTokens *int64            `json:"max_completion_tokens"`
	Tools               []json.RawMessage `json:"tools"`
	ToolChoice          json.RawMessage   `json:"tool_choice"`
	ResponseFormat      *struct {
		Type string `json:"type"`
	} `json:"response_format"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// text returns a message's text: the content string, or its text parts joined.
func (m *message) text() string {
	c := bytes.TrimSpace(m.Content)
	if len(c) == 0 || string(c) == "null" {
		return ""
	}
	if c[0] == '"' {
		var s string
		_ = json.Unmarshal(c, &s)
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(c, &parts)
	var sb strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			if sb.Len() > 0 {
				sb.WriteByte('\n')
			}
			sb.WriteString(p.Text)
		}
	}
	return sb.String()
}

// answer is a planned reply.
type answer struct {
	id, model    string
	created      int64
	words        []string // content words (empty for a tool call)
	jsonObject   bool
	toolName     string // non-empty: answer with this tool call
	finish       string
	usage        app.Usage
	includeUsage bool
}

func badRequest(param, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	body, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": msg, "type": "invalid_request_error", "param": nullable(param), "code": nil,
	}})
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	return &app.UpstreamError{Provider: Name, Status: http.StatusBadRequest, Header: h, Body: body, Err: errors.New(msg)}
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// plan decodes a request and decides the answer; it returns an UpstreamError (400) for a
// request OpenAI would reject.
func (p *Provider) plan(req *app.ProviderRequest) (*answer, error) {
	var cr chatRequest
	for k, v := range req.Body {
		var err error
		switch k {
		case "model":
			err = json.Unmarshal(v, &cr.Model)
		case "messages":
			err = json.Unmarshal(v, &cr.Messages)
		case "max_tokens":
			err = json.Unmarshal(v, &cr.MaxTokens)
		case "max_completion_tokens":
			err = json.Unmarshal(v, &cr.MaxCompletionTokens)
		case "tools":
			err = json.Unmarshal(v, &cr.Tools)
		case "tool_choice":
			cr.ToolChoice = v
		case "response_format":
			err = json.Unmarshal(v, &cr.ResponseFormat)
		case "stream_options":
			err = json.Unmarshal(v, &cr.StreamOptions)
		}
		if err != nil {
			return nil, badRequest(k, "Invalid value for '%s'.", k)
		}
	}
	if cr.Model == "" {
		cr.Model = req.Model
	}
	if len(cr.Messages) == 0 {
		return nil, badRequest("messages", "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.")
	}
	a := &answer{model: cr.Model, created: p.opts.Now().Unix(), finish: "stop"}
	a.id = "chatcmpl-demo-" + strconv.FormatInt(p.seq.Add(1), 10)
	a.includeUsage = cr.StreamOptions != nil && cr.StreamOptions.IncludeUsage

	n := int64(DefaultCompletionTokens)
	limit := cr.MaxCompletionTokens
	param := "max_completion_tokens"
	if limit == nil {
		limit, param = cr.MaxTokens, "max_tokens"
	}
	if limit != nil {
		if *limit < 1 {
			return nil, badRequest(param, "Invalid '%s': integer below minimum value. Expected a value >= 1, but got %d instead.", param, *limit)
		}
		if m := maxOutput(cr.Model); *limit > m {
			return nil, badRequest(param, "%s is too large: %d. This model supports at most %d completion tokens, whereas you provided %d.", param, *limit, m, *limit)
		}
		n, a.finish = *limit, "length"
	}

	var all strings.Builder
	last := ""
	for i := range cr.Messages {
		t := cr.Messages[i].text()
		if i > 0 {
			all.WriteByte('\n')
		}
		all.WriteString(t)
		if cr.Messages[i].Role == "user" {
			last = t
		}
	}
	a.usage.PromptTokens = p.count(cr.Model, all.String()) + 3*int64(len(cr.Messages)) + 3

	if name := toolChoice(cr.Tools, cr.ToolChoice); name != "" {
		a.toolName, a.finish = name, "tool_calls"
		a.usage.CompletionTokens = min(n, 8)
		return a, nil
	}
	a.words = replyWords(last, all.String(), n)
	a.usage.CompletionTokens = n
	a.jsonObject = cr.ResponseFormat != nil && (cr.ResponseFormat.Type == "json_object" || cr.ResponseFormat.Type == "json_schema")
	return a, nil
}

func (p *Provider) count(model, text string) int64 {
	if p.opts.Counter != nil {
		return p.opts.Counter.CountText(model, text)
	}
	return tokens.EstimateText(text)
}

// toolChoice returns the function the answer must call: the one tool_choice names, the first
// tool's when tool_choice is "required", none otherwise.
func toolChoice(tools []json.RawMessage, choice json.RawMessage) string {
	if len(tools) == 0 || len(choice) == 0 {
		return ""
	}
	var named struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if choice[0] == '{' {
		_ = json.Unmarshal(choice, &named)
		return named.Function.Name
	}
	var s string
	if json.Unmarshal(choice, &s) != nil || s != "required" {
		return ""
	}
	_ = json.Unmarshal(tools[0], &named)
	if named.Function.Name == "" {
		return "tool"
	}
	return named.Function.Name
}

// vocabulary fills an answer after the echoed words.
var vocabulary = [...]string{
	"budget", "token", "gateway", "model", "stream", "usage", "tenant", "ledger",
	"invoice", "latency", "route", "quota", "reply", "prompt", "cache", "limit",
}

// replyWords returns exactly n words: "Demo reply:", up to eight words of the last user message,
// then words picked by a hash of the whole prompt, so the same prompt gets the same answer.
func replyWords(last, prompt string, n int64) []string {
	out := make([]string, 0, n)
	add := func(w string) bool {
		if int64(len(out)) == n {
			return false
		}
		out = append(out, w)
		return true
	}
	add("Demo")
	add("reply:")
	echoed := 0
	for _, w := range strings.Fields(last) {
		if echoed == 8 || !add(w) {
			break
		}
		echoed++
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(prompt))
	x := h.Sum64()
	for int64(len(out)) < n {
		x ^= x << 13 // xorshift64
		x ^= x >> 7
		x ^= x << 17
		out = append(out, vocabulary[x%uint64(len(vocabulary))])
	}
	return out
}

// content returns the answer text: the words, or with response_format json_object a JSON object
// whose one string holds them (still n space-separated words).
func (a *answer) content() string {
	s := strings.Join(a.words, " ")
	if !a.jsonObject {
		return s
	}
	q, _ := json.Marshal(s)
	return `{"reply":` + string(q) + `}`
}

// sleep waits d, or returns the context's error as an UpstreamError.
func sleep(ctx context.Context, d time.Duration) error {
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
	if err := ctx.Err(); err != nil {
		return &app.UpstreamError{Provider: Name, Timeout: errors.Is(err, context.DeadlineExceeded), Err: fmt.Errorf("demo answer: %w", err)}
	}
	return nil
}

// ChatCompletion answers a chat completion. It returns *app.UpstreamError: Status 400 with an
// OpenAI error body for a request OpenAI would reject, Status 0 when ctx ends during Latency.
func (p *Provider) ChatCompletion(ctx context.Context, req *app.ProviderRequest) (*app.ProviderResponse, error) {
	a, err := p.plan(req)
	if err != nil {
		return nil, err
	}
	if err := sleep(ctx, p.opts.Latency); err != nil {
		return nil, err
	}
	b := make([]byte, 0, 512+16*len(a.words))
	b = append(b, `{"id":"`...)
	b = append(b, a.id...)
	b = append(b, `","object":"chat.completion","created":`...)
	b = strconv.AppendInt(b, a.created, 10)
	b = append(b, `,"model":`...)
	b = openai.AppendString(b, a.model)
	b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant","content":`...)
	if a.toolName != "" {
		b = append(b, `null,"tool_calls":[{"id":"call_demo_`...)
		b = append(b, a.id[len("chatcmpl-demo-"):]...)
		b = append(b, `","type":"function","function":{"name":`...)
		b = openai.AppendString(b, a.toolName)
		b = append(b, `,"arguments":"{}"}}]`...)
	} else {
		b = openai.AppendString(b, a.content())
	}
	b = append(b, `,"refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"`...)
	b = append(b, a.finish...)
	b = append(b, `"}],"usage":`...)
	b = openai.AppendUsage(b, a.usage)
	b = append(b, `,"service_tier":"default","system_fingerprint":"`+SystemFingerprint+`"}`...)
	return &app.ProviderResponse{Body: b, Usage: a.usage, HasUsage: true}, nil
}
