// Package ollamafake is a fake Ollama (an http.Handler) for tests: its OpenAI-compatible
// endpoints POST /v1/chat/completions and POST /v1/embeddings, answering byte for byte as
// Ollama's openai middleware does. Answers are written by json.Encoder (a trailing newline),
// the id is "chatcmpl-<n>", the fingerprint "fp_ollama", the usage has no detail fields and a
// stream's usage chunk comes only with include_usage. Errors are OpenAI-shaped with param and
// code null and the type from the status (invalid_request_error 400, not_found_error 404,
// api_error otherwise). The Authorization header is ignored, as Ollama does.
package ollamafake

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"yosan/providers/openai"
)

// Created is the "created" of every answer unless Options.Now says otherwise.
const Created = 1721631035

// ID is the id of every chat answer (Ollama's is "chatcmpl-" and a random number below 999).
const ID = "chatcmpl-417"

// Options configure the fake and its default (successful) answer.
type Options struct {
	// Models are the models that exist; a request for another gets Ollama's 404. Empty means
	// every model exists.
	Models []string
	// PromptTokens and CompletionTokens are the usage the fake reports (defaults 10 and 8).
	// The answer has CompletionTokens words, streamed one word per chunk.
	PromptTokens     int64
	CompletionTokens int64
	// ReasoningTokens, when > 0, makes the model a thinking one: that many words of "reasoning"
	// before the content. Ollama does not count them in completion_tokens separately; the fake
	// adds them to it, as the runner's eval count does.
	ReasoningTokens int64
	// EmbeddingDims is the vector length of embeddings (default 8).
	EmbeddingDims int
	// Now gives the "created" of each answer; a fixed instant (Created) when nil.
	Now func() time.Time
	// Script, when set, decides the answer of each request the queue does not; returning nil
	// means the default answer.
	Script func(req *Request) *Response
}

// Kind is what the fake does with one request.
type Kind int

// The kinds of answer.
const (
	// Success is the default answer.
	Success Kind = iota
	// Error sends Response.Status, Header and Body exactly.
	Error
	// BreakStream sends After stream events, then drops the connection.
	BreakStream
	// Hang sends After stream events (nothing for a non-streaming request), then blocks until
	// the client goes away or Close is called.
	Hang
)

// Response scripts the answer to one request.
type Response struct {
	Kind Kind
	// Status, Header and Body are the answer of Kind Error.
	Status int
	Header http.Header
	Body   []byte
	// After is the number of stream events sent before a stream breaks or hangs.
	After int
}

// Request is a request the fake received, as a script sees it.
type Request struct {
	Path   string
	Header http.Header
	Body   []byte
	// Model, Stream and IncludeUsage are read from the body.
	Model        string
	Stream       bool
	IncludeUsage bool
}

// Fake is the fake Ollama. It is safe for concurrent use.
type Fake struct {
	opts Options

	mu    sync.Mutex
	queue []Response

	requests   atomic.Int64
	chats      atomic.Int64
	embeddings atomic.Int64
	last       atomic.Pointer[Request]

	done      chan struct{}
	closeOnce sync.Once
}

// New returns a Fake answering with opts.
func New(opts Options) *Fake {
	if opts.PromptTokens == 0 {
		opts.PromptTokens = 10
	}
	if opts.CompletionTokens == 0 {
		opts.CompletionTokens = 8
	}
	if opts.EmbeddingDims == 0 {
		opts.EmbeddingDims = 8
	}
	if opts.Now == nil {
		opts.Now = func() time.Time { return time.Unix(Created, 0) }
	}
	return &Fake{opts: opts, done: make(chan struct{})}
}

// Enqueue adds answers for the next requests, one each, before Options.Script is asked.
func (f *Fake) Enqueue(rs ...Response) {
	f.mu.Lock()
	f.queue = append(f.queue, rs...)
	f.mu.Unlock()
}

// Requests returns the number of requests received (any path).
func (f *Fake) Requests() int64 { return f.requests.Load() }

// ChatRequests returns the number of chat completion requests received.
func (f *Fake) ChatRequests() int64 { return f.chats.Load() }

// EmbeddingRequests returns the number of embeddings requests received.
func (f *Fake) EmbeddingRequests() int64 { return f.embeddings.Load() }

// LastRequest returns the last request received, nil before the first.
func (f *Fake) LastRequest() *Request { return f.last.Load() }

// Close releases every handler blocked in Hang, so an httptest.Server can shut down.
func (f *Fake) Close() { f.closeOnce.Do(func() { close(f.done) }) }

type requestJSON struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Messages       []json.RawMessage `json:"messages"`
	Input          json.RawMessage   `json:"input"`
	EncodingFormat string            `json:"encoding_format"`
	Dimensions     int               `json:"dimensions"`
}

// ServeHTTP implements http.Handler for POST /v1/chat/completions and POST /v1/embeddings.
func (f *Fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	chat := r.URL.Path == "/v1/chat/completions"
	embed := r.URL.Path == "/v1/embeddings"
	switch {
	case chat:
		f.chats.Add(1)
	case embed:
		f.embeddings.Add(1)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var rj requestJSON
	// gin's ShouldBindJSON uses a json.Decoder: its errors ("unexpected EOF") are the message.
	jsonErr := json.NewDecoder(bytes.NewReader(body)).Decode(&rj)
	req := &Request{Path: r.URL.Path, Header: r.Header, Body: body, Model: rj.Model, Stream: rj.Stream}
	req.IncludeUsage = rj.StreamOptions != nil && rj.StreamOptions.IncludeUsage
	f.last.Store(req)

	if !chat && !embed || r.Method != http.MethodPost {
		// gin's default answer for a route it does not have.
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, "404 page not found")
		return
	}
	// The middleware's own checks answer through gin's c.JSON: no trailing newline, and
	// Content-Type with charset.
	if jsonErr != nil {
		writeError(w, http.StatusBadRequest, ginHeader(), ginBody(http.StatusBadRequest, jsonErr.Error()))
		return
	}
	if chat && len(rj.Messages) == 0 {
		writeError(w, http.StatusBadRequest, ginHeader(), ginBody(http.StatusBadRequest, "[] is too short - 'messages'"))
		return
	}

	resp := f.next(req)
	if resp.Kind == Success && len(f.opts.Models) > 0 && !slices.Contains(f.opts.Models, rj.Model) {
		resp = ModelNotFound(rj.Model)
	}
	switch resp.Kind {
	case Error:
		writeError(w, resp.Status, resp.Header, string(resp.Body))
		return
	case Hang:
		if !req.Stream || embed {
			f.hang(r)
			return
		}
	}
	now := f.opts.Now()
	if embed {
		f.serveEmbeddings(w, &rj)
		return
	}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(f.completion(req.Model, now))
		return
	}
	f.serveStream(w, r, req, now, resp)
}

func (f *Fake) next(req *Request) Response {
	f.mu.Lock()
	if len(f.queue) > 0 {
		resp := f.queue[0]
		f.queue = f.queue[1:]
		f.mu.Unlock()
		return resp
	}
	f.mu.Unlock()
	if f.opts.Script != nil {
		if resp := f.opts.Script(req); resp != nil {
			return *resp
		}
	}
	return Response{}
}

func writeError(w http.ResponseWriter, status int, h http.Header, body string) {
	for k, v := range h {
		w.Header()[k] = v
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

func (f *Fake) hang(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-f.done:
	}
}

// words is the vocabulary of the default answer; thoughts that of the reasoning.
var (
	words    = [...]string{"This", " is", " a", " fake", " answer", " from", " the", " local", " model", "."}
	thoughts = [...]string{"Okay", ",", " the", " user", " wants", " an", " answer", "."}
)

func text(vocab []string, n int64) string {
	var sb strings.Builder
	for i := range n {
		sb.WriteString(vocab[i%int64(len(vocab))])
	}
	return sb.String()
}

func appendUsage(b []byte, prompt, completion int64) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, prompt, 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, completion, 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, prompt+completion, 10)
	return append(b, '}')
}

func (f *Fake) completion(model string, now time.Time) []byte {
	b := make([]byte, 0, 512)
	b = append(b, `{"id":"`+ID+`","object":"chat.completion","created":`...)
	b = strconv.AppendInt(b, now.Unix(), 10)
	b = append(b, `,"model":`...)
	b = openai.AppendString(b, model)
	b = append(b, `,"system_fingerprint":"fp_ollama","choices":[{"index":0,"message":{"role":"assistant","content":`...)
	b = openai.AppendString(b, text(words[:], f.opts.CompletionTokens))
	if f.opts.ReasoningTokens > 0 {
		b = append(b, `,"reasoning":`...)
		b = openai.AppendString(b, text(thoughts[:], f.opts.ReasoningTokens))
	}
	b = append(b, `},"finish_reason":"stop"}],"usage":`...)
	b = appendUsage(b, f.opts.PromptTokens, f.opts.CompletionTokens+f.opts.ReasoningTokens)
	return append(b, "}\n"...)
}

// Events returns every SSE event of a successful stream, each "data: ...\n\n", [DONE] last.
func (f *Fake) Events(model string, now time.Time, includeUsage bool) [][]byte {
	head := []byte(`data: {"id":"` + ID + `","object":"chat.completion.chunk","created":`)
	head = strconv.AppendInt(head, now.Unix(), 10)
	head = append(head, `,"model":`...)
	head = openai.AppendString(head, model)
	head = append(head, `,"system_fingerprint":"fp_ollama","choices":[`...)
	event := func(rest string) []byte {
		b := append(bytes.Clone(head), rest...)
		return append(b, "\n\n"...)
	}
	var evs [][]byte
	for i := range f.opts.ReasoningTokens {
		w := openai.AppendString(nil, thoughts[i%int64(len(thoughts))])
		evs = append(evs, event(`{"index":0,"delta":{"role":"assistant","content":"","reasoning":`+string(w)+`},"finish_reason":null}]}`))
	}
	for i := range f.opts.CompletionTokens {
		w := openai.AppendString(nil, words[i%int64(len(words))])
		evs = append(evs, event(`{"index":0,"delta":{"role":"assistant","content":`+string(w)+`},"finish_reason":null}]}`))
	}
	evs = append(evs, event(`{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"stop"}]}`))
	if includeUsage {
		u := appendUsage([]byte(`],"usage":`), f.opts.PromptTokens, f.opts.CompletionTokens+f.opts.ReasoningTokens)
		evs = append(evs, event(string(u)+"}"))
	}
	return append(evs, []byte("data: [DONE]\n\n"))
}

func (f *Fake) serveStream(w http.ResponseWriter, r *http.Request, req *Request, now time.Time, resp Response) {
	w.Header().Set("Content-Type", "text/event-stream")
	events := f.Events(req.Model, now, req.IncludeUsage)
	if resp.Kind != Success {
		events = events[:min(resp.After, len(events)-1)] // never the [DONE]
	}
	w.WriteHeader(http.StatusOK)
	for _, ev := range events {
		if _, err := w.Write(ev); err != nil {
			return
		}
	}
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
	switch resp.Kind {
	case BreakStream:
		panic(http.ErrAbortHandler) // drops the connection without ending the chunked body
	case Hang:
		f.hang(r)
	}
}

func (f *Fake) serveEmbeddings(w http.ResponseWriter, rj *requestJSON) {
	if rj.EncodingFormat != "" && !strings.EqualFold(rj.EncodingFormat, "float") && !strings.EqualFold(rj.EncodingFormat, "base64") {
		writeError(w, http.StatusBadRequest, ginHeader(), ginBody(http.StatusBadRequest,
			"Invalid value for 'encoding_format' = "+rj.EncodingFormat+". Supported values: ['float', 'base64']."))
		return
	}
	inputs, ok := splitInput(rj.Input)
	if !ok {
		writeError(w, http.StatusBadRequest, ginHeader(), ginBody(http.StatusBadRequest, "invalid input"))
		return
	}
	dims := f.opts.EmbeddingDims
	if rj.Dimensions > 0 {
		dims = rj.Dimensions
	}
	b := []byte(`{"object":"list","data":[`)
	for i, in := range inputs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"object":"embedding","embedding":`...)
		v := openai.HashVector(in, dims)
		if strings.EqualFold(rj.EncodingFormat, "base64") {
			b = openai.AppendEmbedding(b, v, true)
		} else {
			// encoding/json's float32 format, which is what Ollama sends (not the 'g' format
			// of openai.AppendEmbedding: they differ below 1e-4).
			j, _ := json.Marshal(v)
			b = append(b, j...)
		}
		b = append(b, `,"index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, '}')
	}
	b = append(b, `],"model":`...)
	b = openai.AppendString(b, rj.Model)
	b = append(b, `,"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, f.opts.PromptTokens, 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, f.opts.PromptTokens, 10)
	b = append(b, "}}\n"...)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// splitInput returns the raw JSON of each input: a string (Ollama embeds "" too) or an array
// of strings. An absent or empty input is Ollama's "invalid input".
func splitInput(raw json.RawMessage) ([]json.RawMessage, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, false
	}
	if raw[0] != '[' {
		var s string
		return []json.RawMessage{raw}, json.Unmarshal(raw, &s) == nil
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil || len(items) == 0 {
		return nil, false
	}
	return items, true
}
