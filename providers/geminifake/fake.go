// Package geminifake is a fake Gemini API upstream (an http.Handler) for tests and benchmarks.
// It serves the native v1beta endpoints the gemini adapter calls: generateContent,
// streamGenerateContent (alt=sse, and the JSON array without it), batchEmbedContents and
// embedContent, in Google's wire format byte for byte: indented JSON answers, one-line SSE
// events framed with "\r\n\r\n", usageMetadata with thinking and cached tokens, thought parts,
// function calls with thought signatures, and Google's error bodies. Each request can be
// scripted (a queue or a func) to fail, break its stream, or hang; counters tell a test whether
// an upstream call was made at all.
package geminifake

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"yosan/providers/openai"
)

// ResponseID is the "responseId" of every answer, fixed so answers are reproducible.
const ResponseID = "fakeRespId0Gemini0aBcD"

// DefaultText is the answer text when Options.Text is empty.
const DefaultText = "This is a fake answer from the Gemini upstream."

// FunctionCallsMessage is the finishMessage Gemini adds to a candidate that ends in calls.
const FunctionCallsMessage = "Model generated function call(s)."

// FunctionCall is a functionCall part of the answer.
type FunctionCall struct {
	Name string
	// Args is the JSON object of the arguments ("{}" when empty); its key order is kept.
	Args string
	// ID is Gemini's own call id, usually absent ("").
	ID string
	// ThoughtSignature is sent beside the call, as Gemini 2.5+ does.
	ThoughtSignature string
}

// Options configure the default (successful) answer.
type Options struct {
	// Text is the answer (DefaultText when empty); a stream sends it one word per event.
	Text string
	// NoText leaves the text part out: an answer of function calls only.
	NoText bool
	// PromptTokens, CandidatesTokens, ThoughtsTokens and CachedTokens are the usageMetadata
	// (promptTokenCount, candidatesTokenCount, thoughtsTokenCount, cachedContentTokenCount).
	// Defaults: 10 and 8; thoughts and cached 0 (then left out, as Gemini does).
	PromptTokens     int64
	CandidatesTokens int64
	ThoughtsTokens   int64
	CachedTokens     int64
	// Thought, when set, is sent as a {"text": ..., "thought": true} part before the answer
	// (a stream sends it as its first event). Gemini sends these only with includeThoughts;
	// the fake sends it whenever it is set.
	Thought string
	// FunctionCalls, when set, end the answer (in a stream, its last event) with
	// finishMessage FunctionCallsMessage.
	FunctionCalls []FunctionCall
	// FinishReason is the candidate's finishReason (default "STOP").
	FinishReason string
	// ModelVersion is the "modelVersion" (default: the model of the URL).
	ModelVersion string
	// Latency is waited before the first byte of every answer; ChunkDelay between stream events.
	Latency    time.Duration
	ChunkDelay time.Duration
	// EmbeddingDims is the vector length when a request has no outputDimensionality (default 8).
	EmbeddingDims int
	// APIKey, when set, makes the fake answer a request without a key (x-goog-api-key header or
	// key= query) 403 BodyUnregisteredCaller, and one with another key 400 BodyAPIKeyInvalid.
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
	// BreakStream sends After stream events (never the last, which carries the
	// finishReason), then drops the connection: the client sees an unexpected EOF.
	BreakStream
	// EndStream sends After stream events (never the last), then ends the body cleanly: a
	// stream without its finishReason.
	EndStream
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
	// After is the number of stream events sent before a stream breaks, ends or hangs.
	After int
}

// Request is a request the fake received, as a script sees it.
type Request struct {
	Path string
	// Model and Method are read from the path (/v1beta/models/{Model}:{Method}).
	Model  string
	Method string
	// Alt is the alt= query parameter ("sse" for an event stream).
	Alt    string
	Header http.Header
	Body   []byte
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

	done      chan struct{}
	closeOnce sync.Once
}

// New returns a Fake answering with opts.
func New(opts Options) *Fake {
	if opts.Text == "" {
		opts.Text = DefaultText
	}
	if opts.PromptTokens == 0 {
		opts.PromptTokens = 10
	}
	if opts.CandidatesTokens == 0 {
		opts.CandidatesTokens = 8
	}
	if opts.FinishReason == "" {
		opts.FinishReason = "STOP"
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

// ChatRequests returns the number of generateContent and streamGenerateContent requests.
func (f *Fake) ChatRequests() int64 { return f.chats.Load() }

// EmbeddingRequests returns the number of batchEmbedContents and embedContent requests.
func (f *Fake) EmbeddingRequests() int64 { return f.embeddings.Load() }

// LastRequest returns the last request received, nil before the first.
func (f *Fake) LastRequest() *Request { return f.last.Load() }

// Close releases every handler blocked in Hang, so an httptest.Server can shut down.
func (f *Fake) Close() { f.closeOnce.Do(func() { close(f.done) }) }

// ServeHTTP implements http.Handler for POST /v1beta/models/{model}:{method} (and /v1/).
func (f *Fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	req := &Request{Path: r.URL.Path, Alt: r.URL.Query().Get("alt"), Header: r.Header}
	if _, rest, ok := strings.Cut(r.URL.Path, "/models/"); ok {
		req.Model, req.Method, _ = strings.Cut(rest, ":")
	}
	chat := req.Method == "generateContent" || req.Method == "streamGenerateContent"
	embed := req.Method == "batchEmbedContents" || req.Method == "embedContent"
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
	req.Body = body
	if !f.opts.NoRecord {
		f.last.Store(req)
	}

	if f.opts.APIKey != "" {
		key := r.Header.Get("x-goog-api-key")
		if key == "" {
			key = r.URL.Query().Get("key")
		}
		switch {
		case key == "":
			writeRaw(w, http.StatusForbidden, errorHeader(), BodyUnregisteredCaller)
			return
		case key != f.opts.APIKey:
			writeRaw(w, http.StatusBadRequest, errorHeader(), BodyAPIKeyInvalid)
			return
		}
	}
	if !chat && !embed || r.Method != http.MethodPost || req.Model == "" {
		writeRaw(w, http.StatusNotFound, errorHeader(), BodyNotFound)
		return
	}
	if !json.Valid(body) {
		writeRaw(w, http.StatusBadRequest, errorHeader(), BodyInvalidJSON)
		return
	}

	resp := f.next(req)
	if f.opts.Latency > 0 && !f.sleep(r, f.opts.Latency) {
		return
	}
	switch resp.Kind {
	case Error:
		writeRaw(w, resp.Status, resp.Header, string(resp.Body))
		return
	case Garbage:
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "<html><body>502 Bad Gateway</body></html>\n")
		return
	case Hang:
		if req.Method != "streamGenerateContent" {
			f.hang(r)
			return
		}
	}
	model := f.opts.ModelVersion
	if model == "" {
		model = req.Model
	}
	switch req.Method {
	case "batchEmbedContents", "embedContent":
		f.serveEmbeddings(w, req)
	case "generateContent":
		writeRaw(w, http.StatusOK, successHeader("application/json; charset=UTF-8"), string(render(nil, f.completion(model), true, ""))+"\n")
	default:
		f.serveStream(w, r, req, resp, model)
	}
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

func writeRaw(w http.ResponseWriter, status int, h http.Header, body string) {
	for k, v := range h {
		w.Header()[k] = v
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

func successHeader(contentType string) http.Header {
	h := http.Header{}
	h.Set("Content-Type", contentType)
	h["Vary"] = []string{"Origin", "X-Origin", "Referer"}
	h.Set("Server", "scaffolding on HTTPServer2")
	h.Set("X-Xss-Protection", "0")
	h.Set("X-Frame-Options", "SAMEORIGIN")
	h.Set("X-Content-Type-Options", "nosniff")
	return h
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

// usage returns the usageMetadata with candidates tokens so far; zero counts are left out, as
// Gemini's proto3 JSON does.
func (f *Fake) usage(candidates int64) obj {
	o := f.opts
	u := obj{{"promptTokenCount", o.PromptTokens}}
	if candidates > 0 {
		u = append(u, member{"candidatesTokenCount", candidates})
	}
	u = append(u, member{"totalTokenCount", o.PromptTokens + candidates + o.ThoughtsTokens})
	if o.CachedTokens > 0 {
		u = append(u, member{"cachedContentTokenCount", o.CachedTokens})
	}
	u = append(u, member{"promptTokensDetails", []any{obj{{"modality", "TEXT"}, {"tokenCount", o.PromptTokens}}}})
	if o.CachedTokens > 0 {
		u = append(u, member{"cacheTokensDetails", []any{obj{{"modality", "TEXT"}, {"tokenCount", o.CachedTokens}}}})
	}
	if o.ThoughtsTokens > 0 {
		u = append(u, member{"thoughtsTokenCount", o.ThoughtsTokens})
	}
	return u
}

func textPart(s string) obj { return obj{{"text", s}} }

func (f *Fake) thoughtPart() obj { return obj{{"text", f.opts.Thought}, {"thought", true}} }

func callPart(fc FunctionCall) obj {
	call := obj{}
	if fc.ID != "" {
		call = append(call, member{"id", fc.ID})
	}
	call = append(call, member{"name", fc.Name})
	args := any(obj{})
	if fc.Args != "" {
		v, err := parseOrdered([]byte(fc.Args))
		if err != nil {
			panic("geminifake: FunctionCall.Args is not JSON: " + err.Error()) // a bug in the test
		}
		args = v
	}
	call = append(call, member{"args", args})
	p := obj{{"functionCall", call}}
	if fc.ThoughtSignature != "" {
		p = append(p, member{"thoughtSignature", fc.ThoughtSignature})
	}
	return p
}

// candidate returns one candidate; finish "" leaves its finishReason out (a stream event that
// is not the last).
func (f *Fake) candidate(parts []any, finish string) obj {
	c := obj{{"content", obj{{"parts", parts}, {"role", "model"}}}}
	if finish != "" {
		c = append(c, member{"finishReason", finish})
	}
	c = append(c, member{"index", int64(0)})
	if finish != "" && len(f.opts.FunctionCalls) > 0 {
		c = append(c, member{"finishMessage", FunctionCallsMessage})
	}
	return c
}

func (f *Fake) answer(cand obj, candidates int64, model string) obj {
	return obj{
		{"candidates", []any{cand}},
		{"usageMetadata", f.usage(candidates)},
		{"modelVersion", model},
		{"responseId", ResponseID},
	}
}

// completion is the generateContent answer.
func (f *Fake) completion(model string) obj {
	var parts []any
	if f.opts.Thought != "" {
		parts = append(parts, f.thoughtPart())
	}
	if !f.opts.NoText {
		parts = append(parts, textPart(f.opts.Text))
	}
	for _, fc := range f.opts.FunctionCalls {
		parts = append(parts, callPart(fc))
	}
	return f.answer(f.candidate(parts, f.opts.FinishReason), f.opts.CandidatesTokens, model)
}

// words splits the answer into stream pieces: "This", " is", " a", ...
func words(s string) []string {
	var out []string
	for len(s) > 0 {
		i := strings.IndexByte(s[1:], ' ')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

// events are the streamed answers, each a complete GenerateContentResponse; the last has the
// finishReason. Every event carries the usage so far.
func (f *Fake) events(model string) []obj {
	var evs []obj
	if f.opts.Thought != "" {
		evs = append(evs, f.answer(f.candidate([]any{f.thoughtPart()}, ""), 0, model))
	}
	var ws []string
	switch {
	case !f.opts.NoText:
		ws = words(f.opts.Text)
	case len(f.opts.FunctionCalls) == 0:
		ws = []string{""} // nothing to say, but the finishReason
	}
	n := int64(len(ws))
	if len(f.opts.FunctionCalls) > 0 {
		n++
	}
	total := f.opts.CandidatesTokens
	for i, w := range ws {
		finish := ""
		if i == len(ws)-1 && len(f.opts.FunctionCalls) == 0 {
			finish = f.opts.FinishReason
		}
		so := (total*int64(i+1) + n - 1) / n // the usage so far, rounded up
		evs = append(evs, f.answer(f.candidate([]any{textPart(w)}, finish), so, model))
	}
	if len(f.opts.FunctionCalls) > 0 {
		parts := make([]any, len(f.opts.FunctionCalls))
		for i, fc := range f.opts.FunctionCalls {
			parts[i] = callPart(fc)
		}
		evs = append(evs, f.answer(f.candidate(parts, f.opts.FinishReason), total, model))
	}
	return evs
}

// serveStream sends the events: with alt=sse each as "data: <one-line JSON>\r\n\r\n"; without,
// as Gemini does, one JSON array of the indented events.
func (f *Fake) serveStream(w http.ResponseWriter, r *http.Request, req *Request, resp Response, model string) {
	evs := f.events(model)
	if req.Alt != "sse" {
		b := []byte{'['}
		for i, ev := range evs {
			if i > 0 {
				b = append(b, ",\r\n"...)
			}
			b = render(b, ev, true, "")
		}
		b = append(b, ']')
		writeRaw(w, http.StatusOK, successHeader("application/json; charset=UTF-8"), string(b))
		return
	}
	if resp.Kind != Success {
		evs = evs[:min(resp.After, len(evs)-1)] // never the last: it carries the finishReason
	}
	for k, v := range successHeader("text/event-stream") {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Disposition", "attachment")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	for i, ev := range evs {
		if i > 0 && f.opts.ChunkDelay > 0 && !f.sleep(r, f.opts.ChunkDelay) {
			return
		}
		b := append([]byte("data: "), render(nil, ev, false, "")...)
		if _, err := w.Write(append(b, "\r\n\r\n"...)); err != nil {
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
	case Hang:
		f.hang(r)
	}
}

type embedContentJSON struct {
	Content struct {
		Parts []struct {
			Text string `json:"text"`
		} `json:"parts"`
	} `json:"content"`
	OutputDimensionality int `json:"outputDimensionality"`
}

// serveEmbeddings answers batchEmbedContents ({"embeddings": [{"values": [...]}]}) and
// embedContent ({"embedding": {"values": [...]}}) with the deterministic vectors of
// openai.HashVector. Gemini reports no token usage for embeddings, and neither does the fake.
func (f *Fake) serveEmbeddings(w http.ResponseWriter, req *Request) {
	var reqs []embedContentJSON
	if req.Method == "embedContent" {
		var one embedContentJSON
		_ = json.Unmarshal(req.Body, &one)
		reqs = []embedContentJSON{one}
	} else {
		var batch struct {
			Requests []embedContentJSON `json:"requests"`
		}
		_ = json.Unmarshal(req.Body, &batch)
		reqs = batch.Requests
	}
	values := make([]any, len(reqs))
	for i, er := range reqs {
		var sb strings.Builder
		for _, p := range er.Content.Parts {
			sb.WriteString(p.Text)
		}
		dims := f.opts.EmbeddingDims
		if er.OutputDimensionality > 0 {
			dims = er.OutputDimensionality
		}
		v := openai.HashVector([]byte(sb.String()), dims)
		vals := make([]any, len(v))
		for j, x := range v {
			vals[j] = x
		}
		values[i] = obj{{"values", vals}}
	}
	var answer obj
	if req.Method == "embedContent" {
		answer = obj{{"embedding", values[0]}}
	} else {
		answer = obj{{"embeddings", values}}
	}
	writeRaw(w, http.StatusOK, successHeader("application/json; charset=UTF-8"), string(render(nil, answer, true, ""))+"\n")
}
