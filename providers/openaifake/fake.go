// Package openaifake is a fake OpenAI upstream (an http.Handler) for tests and benchmarks. It
// speaks the wire format of the reference byte for byte: chat completions (plain and streamed,
// with include_usage semantics), embeddings, and OpenAI's error answers. Each request can be
// scripted (a queue or a func) to fail, break its stream, or hang; counters tell a test whether
// an upstream call was made at all.
package openaifake

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
	"yosan/app"
	"yosan/providers/openai"
)

// Created is the "created" timestamp of every answer, fixed so answers are reproducible.
const Created = 1721631035

// SystemFingerprint is the "system_fingerprint" of every chat answer.
const SystemFingerprint = "fp_18cc0f1fa0"

// Options configure the default (successful) answer.
type Options struct {
	// PromptTokens, CompletionTokens and CachedTokens are the usage the fake reports. The answer
	// has CompletionTokens words, streamed one word per chunk. Defaults: 10 and 8.
	PromptTokens     int64
	CompletionTokens int64
	CachedTokens     int64
	// Latency is waited before the first byte of every answer; ChunkDelay between stream events.
	Latency    time.Duration
	ChunkDelay time.Duration
	// EmbeddingDims is the vector length of embeddings when the request names no dimensions
	// (default 8).
	EmbeddingDims int
	// APIKey, when set, makes the fake answer 401 to requests without "Bearer <APIKey>".
	APIKey string
	// Script, when set, decides the answer of each request the queue does not; returning nil
	// means the default answer.
	Script func(req *Request) *Response
	// NoRecord skips keeping the last request (for benchmarks).
	NoRecord bool
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
	// the chunked body): the client sees an unexpected EOF.
	BreakStream
	// EndStream sends After stream events, then ends the body cleanly but without [DONE].
	EndStream
	// ErrorInStream sends After stream events, then a data: {"error":...} event and ends.
	ErrorInStream
	// Hang sends After stream events (nothing for a non-streaming request), then blocks until
	// the client goes away or Close is called.
	Hang
	// Garbage answers 200 with a body that is not JSON.
	Garbage
)

// Response scripts the answer to one request.
type Response struct {
	Kind Kind
	// Status, Header and Body are the answer of Kind Error.
	Status int
	Header http.Header
	Body   []byte
	// After is the number of stream events (data lines) sent before a stream breaks or hangs.
	After int
	// OmitUsage leaves out the usage (field of a completion, usage chunk of a stream).
	OmitUsage bool
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

// Fake is the fake upstream. It is safe for concurrent use.
type Fake struct {
	opts Options

	mu    sync.Mutex
	queue []Response

	requests   atomic.Int64
	chats      atomic.Int64
	embeddings atomic.Int64
	last       atomic.Pointer[Request]

	// cache holds the precomputed success bodies per model and shape.
	cache     sync.Map // cacheKey -> []byte
	cacheSize atomic.Int64

	done      chan struct{}
	closeOnce sync.Once
}

type cacheKey struct {
	model        string
	stream       bool
	includeUsage bool
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
	return &Fake{opts: opts, done: make(chan struct{})}
}

// Enqueue adds answers for the next requests, one each, before Options.Script is asked.
func (f *Fake) Enqueue(rs ...Response) {
	f.mu.Lock()
	f.queue = append(f.queue, rs...)
	f.mu.Unlock()
}

// Requests returns the number of requests received (any path, answered or not).
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
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     int             `json:"dimensions"`
}

// ServeHTTP implements http.Handler for POST .../chat/completions and POST .../embeddings
// (with or without a /v1 prefix).
func (f *Fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	chat := strings.HasSuffix(r.URL.Path, "/chat/completions")
	embed := strings.HasSuffix(r.URL.Path, "/embeddings")
	switch {
	case chat:
		f.chats.Add(1)
	case embed:
		f.embeddings.Add(1)
	}
	body, err := readBody(r)
	if err != nil {
		return
	}
	var rj requestJSON
	jsonErr := json.Unmarshal(body, &rj)
	req := &Request{Path: r.URL.Path, Header: r.Header, Body: body, Model: rj.Model, Stream: rj.Stream}
	req.IncludeUsage = rj.StreamOptions != nil && rj.StreamOptions.IncludeUsage
	if !f.opts.NoRecord {
		f.last.Store(req)
	}

	if f.opts.APIKey != "" && r.Header.Get("Authorization") != "Bearer "+f.opts.APIKey {
		writeError(w, http.StatusUnauthorized, errorHeader(), BodyInvalidAPIKey)
		return
	}
	if !chat && !embed || r.Method != http.MethodPost {
		msg := `{"error":{"message":"Invalid URL (` + r.Method + ` ` + r.URL.Path + `)","type":"invalid_request_error","param":null,"code":null}}`
		writeError(w, http.StatusNotFound, errorHeader(), msg)
		return
	}
	if jsonErr != nil {
		writeError(w, http.StatusBadRequest, errorHeader(), BodyInvalidJSON)
		return
	}

	resp := f.next(req)
	if f.opts.Latency > 0 && !f.sleep(r, f.opts.Latency) {
		return
	}
	switch resp.Kind {
	case Error:
		writeError(w, resp.Status, resp.Header, string(resp.Body))
		return
	case Garbage:
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "<html><body>502 Bad Gateway</body></html>\n")
		return
	case Hang:
		if !req.Stream || embed {
			f.hang(r)
			return
		}
	}
	if embed {
		f.serveEmbeddings(w, &rj, resp.OmitUsage)
		return
	}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(f.completion(req.Model, resp.OmitUsage))
		return
	}
	f.serveStream(w, r, req, resp)
}

// readBody reads the request body into one right-sized buffer.
func readBody(r *http.Request) ([]byte, error) {
	if r.ContentLength > 0 && r.ContentLength < 64<<20 {
		b := make([]byte, r.ContentLength)
		_, err := io.ReadFull(r.Body, b)
		return b, err
	}
	return io.ReadAll(r.Body)
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

// sleep waits d; it reports false when the client went away first.
func (f *Fake) sleep(r *http.Request, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	case <-f.done:
		return false
	}
}

func (f *Fake) hang(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-f.done:
	}
}

func (f *Fake) serveStream(w http.ResponseWriter, r *http.Request, req *Request, resp Response) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	if resp.Kind == Success && !resp.OmitUsage && f.opts.ChunkDelay == 0 {
		// The hot path: one precomputed write.
		_, _ = w.Write(f.cached(cacheKey{req.Model, true, req.IncludeUsage}, func() []byte {
			return bytes.Join(f.events(req.Model, req.IncludeUsage, false), nil)
		}))
		return
	}
	events := f.events(req.Model, req.IncludeUsage, resp.OmitUsage)
	if resp.Kind != Success {
		events = events[:min(resp.After, len(events)-1)] // never the [DONE]
	}
	flusher, _ := w.(http.Flusher)
	w.WriteHeader(http.StatusOK)
	for i, ev := range events {
		if i > 0 && f.opts.ChunkDelay > 0 && !f.sleep(r, f.opts.ChunkDelay) {
			return
		}
		if _, err := w.Write(ev); err != nil {
			return
		}
		if flusher != nil && f.opts.ChunkDelay > 0 {
			flusher.Flush()
		}
	}
	if flusher != nil {
		flusher.Flush()
	}
	switch resp.Kind {
	case BreakStream:
		panic(http.ErrAbortHandler) // drops the connection without ending the chunked body
	case ErrorInStream:
		_, _ = io.WriteString(w, "data: "+StreamErrorEvent+"\n\n")
	case Hang:
		f.hang(r)
	}
}

// cached returns the precomputed body for key, building it once. The cache is bounded so a
// benchmark sending many model names does not grow it without end.
func (f *Fake) cached(key cacheKey, build func() []byte) []byte {
	if b, ok := f.cache.Load(key); ok {
		return b.([]byte)
	}
	b := build()
	if f.cacheSize.Add(1) <= 256 {
		f.cache.Store(key, b)
	}
	return b
}

// words is the vocabulary of the default answer: word i of an answer is words[i%len(words)].
var words = [...]string{"This", " is", " a", " fake", " answer", " from", " the", " OpenAI", " upstream", "."}

func (f *Fake) content() string {
	var sb strings.Builder
	for i := range f.opts.CompletionTokens {
		sb.WriteString(words[i%int64(len(words))])
	}
	return sb.String()
}

func (f *Fake) completion(model string, omitUsage bool) []byte {
	build := func() []byte {
		b := make([]byte, 0, 512+len(model)+8*int(f.opts.CompletionTokens))
		b = append(b, `{"id":"chatcmpl-fake","object":"chat.completion","created":`...)
		b = strconv.AppendInt(b, Created, 10)
		b = append(b, `,"model":`...)
		b = openai.AppendString(b, model)
		b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant","content":`...)
		b = openai.AppendString(b, f.content())
		b = append(b, `,"refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}]`...)
		if !omitUsage {
			b = append(b, `,"usage":`...)
			b = openai.AppendUsage(b, app.Usage{PromptTokens: f.opts.PromptTokens, CompletionTokens: f.opts.CompletionTokens, CachedTokens: f.opts.CachedTokens})
		}
		b = append(b, `,"service_tier":"default","system_fingerprint":"`+SystemFingerprint+`"}`...)
		return b
	}
	if omitUsage {
		return build()
	}
	return f.cached(cacheKey{model, false, false}, build)
}

// events returns every SSE event of a successful stream, each "data: ...\n\n", the [DONE] last.
func (f *Fake) events(model string, includeUsage, omitUsage bool) [][]byte {
	head := []byte(`{"id":"chatcmpl-fake","object":"chat.completion.chunk","created":`)
	head = strconv.AppendInt(head, Created, 10)
	head = append(head, `,"model":`...)
	head = openai.AppendString(head, model)
	tail := `}`
	if includeUsage {
		tail = `,"usage":null}`
	}
	event := func(choice string) []byte {
		b := append([]byte("data: "), head...)
		b = append(b, `,"system_fingerprint":"`+SystemFingerprint+`","choices":[`...)
		b = append(b, choice...)
		b = append(b, `]`...)
		b = append(b, tail...)
		return append(b, "\n\n"...)
	}
	var evs [][]byte
	evs = append(evs, event(`{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}`))
	for i := range f.opts.CompletionTokens {
		w := openai.AppendString(nil, words[i%int64(len(words))])
		evs = append(evs, event(`{"index":0,"delta":{"content":`+string(w)+`},"logprobs":null,"finish_reason":null}`))
	}
	evs = append(evs, event(`{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}`))
	if includeUsage && !omitUsage {
		b := append([]byte("data: "), head...)
		b = append(b, `,"choices":[],"usage":`...)
		b = openai.AppendUsage(b, app.Usage{PromptTokens: f.opts.PromptTokens, CompletionTokens: f.opts.CompletionTokens, CachedTokens: f.opts.CachedTokens})
		evs = append(evs, append(b, "}\n\n"...))
	}
	return append(evs, []byte("data: [DONE]\n\n"))
}

func (f *Fake) serveEmbeddings(w http.ResponseWriter, rj *requestJSON, omitUsage bool) {
	inputs, ok := splitInput(rj.Input)
	if !ok {
		writeError(w, http.StatusBadRequest, errorHeader(), `{
    "error": {
        "message": "'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference.",
        "type": "invalid_request_error",
        "param": null,
        "code": null
    }
}
`)
		return
	}
	dims := f.opts.EmbeddingDims
	if rj.Dimensions > 0 {
		dims = rj.Dimensions
	}
	b := make([]byte, 0, 128+len(inputs)*(64+dims*12))
	b = append(b, `{"object":"list","data":[`...)
	for i, in := range inputs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"object":"embedding","index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"embedding":`...)
		b = openai.AppendEmbedding(b, openai.HashVector(in, dims), rj.EncodingFormat == "base64")
		b = append(b, '}')
	}
	b = append(b, `],"model":`...)
	b = openai.AppendString(b, rj.Model)
	if !omitUsage {
		b = append(b, `,"usage":{"prompt_tokens":`...)
		b = strconv.AppendInt(b, f.opts.PromptTokens, 10)
		b = append(b, `,"total_tokens":`...)
		b = strconv.AppendInt(b, f.opts.PromptTokens, 10)
		b = append(b, '}')
	}
	b = append(b, '}')
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// splitInput returns the raw JSON of each input of an embeddings request: a string, an array of
// strings, an array of token ids (one input) or an array of token arrays.
func splitInput(raw json.RawMessage) ([]json.RawMessage, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
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
	if c := bytes.TrimSpace(items[0]); len(c) > 0 && c[0] != '"' && c[0] != '[' {
		return []json.RawMessage{raw}, true // one token array
	}
	return items, true
}
