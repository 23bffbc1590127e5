// Package zhipufake is a fake Zhipu / z.ai GLM upstream (an http.Handler) for tests. It answers
// POST <Prefix>/chat/completions the way Zhipu does, byte for byte where captures of the real
// API exist: sorted keys and a request_id in a completion, no "object" in stream chunks,
// reasoning_content deltas before the content when configured, the usage on the last content
// chunk, Zhipu's error bodies ({"error":{"code":"1302","message":"..."}}, the code a string)
// with no x-ratelimit headers. Each request can be scripted (a queue or a func) to fail with one
// of those errors, break its stream, or hang.
package zhipufake

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"yosan/providers/openai"
)

// DefaultPrefix is the path prefix of Zhipu's API (open.bigmodel.cn and api.z.ai alike).
const DefaultPrefix = "/api/paas/v4"

// Created is the "created" of every answer unless Options.Now says otherwise: 2025-09-26
// 19:05:40 in Beijing, the time of the capture the shapes come from.
const Created = 1758884740

// IDSuffix follows the Beijing timestamp in every id, as Zhipu's 16 hex digits do.
const IDSuffix = "c29952ed24ae4570"

// beijing is UTC+8, the zone of Zhipu's ids (and of the reset times in its messages). A fixed
// zone: Asia/Shanghai has had no DST since 1991, and it needs no tz database.
var beijing = time.FixedZone("CST", 8*3600)

// Options configure the fake and its default (successful) answer.
type Options struct {
	// Prefix is the path before /chat/completions; DefaultPrefix when empty. Use
	// "/api/coding/paas/v4" for the Coding Plan endpoint.
	Prefix string
	// APIKey, when set, makes the fake answer 401 (Zhipu's body) to requests without
	// "Bearer <APIKey>".
	APIKey string
	// PromptTokens, CompletionTokens and CachedTokens are the usage the fake reports (defaults
	// 10 and 8). The answer has CompletionTokens words, streamed one word per chunk.
	PromptTokens     int64
	CompletionTokens int64
	CachedTokens     int64
	// ReasoningTokens, when > 0, adds that many words of reasoning_content (GLM thinking)
	// before the content; they count in completion_tokens, as Zhipu bills them.
	ReasoningTokens int64
	// FinishReason is the answer's finish_reason; "stop" when empty. Zhipu also sends "length",
	// "tool_calls", "sensitive" (its content filter), "network_error" and
	// "model_context_window_exceeded".
	FinishReason string
	// Now gives the "created" and id of each answer; a fixed instant (Created) when nil, so
	// answers are reproducible.
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
	// BreakStream sends After stream events, then drops the connection (no [DONE], no end of
	// the chunked body).
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
	// Model and Stream are read from the body.
	Model  string
	Stream bool
}

// Fake is the fake upstream. It is safe for concurrent use.
type Fake struct {
	opts   Options
	prefix string

	mu    sync.Mutex
	queue []Response

	requests atomic.Int64
	chats    atomic.Int64
	last     atomic.Pointer[Request]

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
	if opts.Now == nil {
		opts.Now = func() time.Time { return time.Unix(Created, 0) }
	}
	if opts.FinishReason == "" {
		opts.FinishReason = "stop"
	}
	prefix := strings.TrimRight(opts.Prefix, "/")
	if opts.Prefix == "" {
		prefix = DefaultPrefix
	}
	return &Fake{opts: opts, prefix: prefix, done: make(chan struct{})}
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

// LastRequest returns the last request received, nil before the first.
func (f *Fake) LastRequest() *Request { return f.last.Load() }

// Close releases every handler blocked in Hang, so an httptest.Server can shut down.
func (f *Fake) Close() { f.closeOnce.Do(func() { close(f.done) }) }

// ServeHTTP implements http.Handler for POST <Prefix>/chat/completions.
func (f *Fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	chat := r.URL.Path == f.prefix+"/chat/completions"
	if chat {
		f.chats.Add(1)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var rj struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	jsonErr := json.Unmarshal(body, &rj)
	req := &Request{Path: r.URL.Path, Header: r.Header, Body: body, Model: rj.Model, Stream: rj.Stream}
	f.last.Store(req)

	if f.opts.APIKey != "" && r.Header.Get("Authorization") != "Bearer "+f.opts.APIKey {
		writeError(w, http.StatusUnauthorized, errorHeader(), BodyInvalidKey)
		return
	}
	if !chat || r.Method != http.MethodPost {
		// Not a capture: what Zhipu answers for an unknown path is not known.
		http.NotFound(w, r)
		return
	}
	if jsonErr != nil {
		writeError(w, http.StatusBadRequest, errorHeader(), BodyBadParameters)
		return
	}

	resp := f.next(req)
	switch resp.Kind {
	case Error:
		writeError(w, resp.Status, resp.Header, string(resp.Body))
		return
	case Hang:
		if !req.Stream {
			f.hang(r)
			return
		}
	}
	now := f.opts.Now()
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		_, _ = w.Write(f.completion(req.Model, now))
		return
	}
	f.serveStream(w, r, req.Model, now, resp)
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
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
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
	words    = [...]string{"This", " is", " a", " fake", " answer", " from", " the", " GLM", " upstream", "."}
	thoughts = [...]string{"The", " user", " wants", " a", " short", " answer", "."}
)

func text(vocab []string, n int64) string {
	var sb strings.Builder
	for i := range n {
		sb.WriteString(vocab[i%int64(len(vocab))])
	}
	return sb.String()
}

// ID returns the id Zhipu would give an answer created at t: its Beijing time as
// yyyyMMddHHmmss, then IDSuffix.
func ID(t time.Time) string {
	return t.In(beijing).Format("20060102150405") + IDSuffix
}

// completion is a non-streaming answer. Zhipu sorts its keys and repeats the id as request_id.
func (f *Fake) completion(model string, now time.Time) []byte {
	id := ID(now)
	b := make([]byte, 0, 512)
	b = append(b, `{"choices":[{"finish_reason":`...)
	b = openai.AppendString(b, f.opts.FinishReason)
	b = append(b, `,"index":0,"message":{"content":`...)
	b = openai.AppendString(b, text(words[:], f.opts.CompletionTokens))
	if f.opts.ReasoningTokens > 0 {
		b = append(b, `,"reasoning_content":`...)
		b = openai.AppendString(b, text(thoughts[:], f.opts.ReasoningTokens))
	}
	b = append(b, `,"role":"assistant"}}],"created":`...)
	b = strconv.AppendInt(b, now.Unix(), 10)
	b = append(b, `,"id":"`+id+`","model":`...)
	b = openai.AppendString(b, model)
	b = append(b, `,"request_id":"`+id+`","usage":{"completion_tokens":`...)
	b = strconv.AppendInt(b, f.opts.CompletionTokens+f.opts.ReasoningTokens, 10)
	b = append(b, `,"prompt_tokens":`...)
	b = strconv.AppendInt(b, f.opts.PromptTokens, 10)
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, f.opts.CachedTokens, 10)
	b = append(b, `},"total_tokens":`...)
	b = strconv.AppendInt(b, f.opts.PromptTokens+f.opts.CompletionTokens+f.opts.ReasoningTokens, 10)
	return append(b, "}}"...)
}

// Events returns every SSE event of a successful stream, each "data: ...\n\n", [DONE] last.
// Zhipu sends the usage on the finish chunk (captured with include_usage; the fake sends it
// whether or not it was asked, which is not verified).
func (f *Fake) Events(model string, now time.Time) [][]byte {
	head := []byte(`data: {"id":"` + ID(now) + `","created":`)
	head = strconv.AppendInt(head, now.Unix(), 10)
	head = append(head, `,"model":`...)
	head = openai.AppendString(head, model)
	head = append(head, `,"choices":[{"index":0,`...)
	event := func(rest string) []byte {
		b := append(bytes.Clone(head), rest...)
		return append(b, "\n\n"...)
	}
	var evs [][]byte
	for i := range f.opts.ReasoningTokens {
		w := openai.AppendString(nil, thoughts[i%int64(len(thoughts))])
		evs = append(evs, event(`"delta":{"role":"assistant","reasoning_content":`+string(w)+`}}]}`))
	}
	// After reasoning, Zhipu keeps an empty reasoning_content beside each content delta.
	after := ""
	if f.opts.ReasoningTokens > 0 {
		after = `,"reasoning_content":""`
	}
	for i := range f.opts.CompletionTokens {
		w := openai.AppendString(nil, words[i%int64(len(words))])
		evs = append(evs, event(`"delta":{"role":"assistant","content":`+string(w)+after+`}}]}`))
	}
	fin := `"finish_reason":` + string(openai.AppendString(nil, f.opts.FinishReason)) + `,"delta":{"role":"assistant","content":""}}],"usage":{"prompt_tokens":` +
		strconv.FormatInt(f.opts.PromptTokens, 10) +
		`,"completion_tokens":` + strconv.FormatInt(f.opts.CompletionTokens+f.opts.ReasoningTokens, 10) +
		`,"total_tokens":` + strconv.FormatInt(f.opts.PromptTokens+f.opts.CompletionTokens+f.opts.ReasoningTokens, 10) +
		`,"prompt_tokens_details":{"cached_tokens":` + strconv.FormatInt(f.opts.CachedTokens, 10) + `}}}`
	evs = append(evs, event(fin))
	return append(evs, []byte("data: [DONE]\n\n"))
}

func (f *Fake) serveStream(w http.ResponseWriter, r *http.Request, model string, now time.Time, resp Response) {
	w.Header().Set("Content-Type", "text/event-stream;charset=UTF-8")
	events := f.Events(model, now)
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
