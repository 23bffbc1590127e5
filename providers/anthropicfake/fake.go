// Package anthropicfake is a fake Anthropic Messages API (an http.Handler) for tests. It speaks
// the wire format of the reference byte for byte: POST /v1/messages with its required headers,
// plain and streamed answers (text and tool_use, usage with cache tokens), and Anthropic's error
// answers with their headers. Each request can be scripted (a queue or a func) to fail, break
// its stream, send an error event, or hang; the last request is kept for assertions.
package anthropicfake

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
	"unicode/utf8"
)

// MessageID is the id of every answer.
const MessageID = "msg_01FakeAnthropicAnswer0000"

// DefaultText is the answer's text when Options.Answer is empty.
const DefaultText = "Hello! How can I help you today?"

// Default usage, from the reference's stream example.
const (
	DefaultInputTokens  = 25
	DefaultOutputTokens = 15
)

// Usage is what the fake reports.
type Usage struct {
	InputTokens              int64
	OutputTokens             int64
	CacheCreationInputTokens int64
	CacheReadInputTokens     int64
	// CacheCreation1hInputTokens is the part of CacheCreationInputTokens kept for an hour
	// (usage.cache_creation.ephemeral_1h_input_tokens); the rest is 5-minute writes.
	CacheCreation1hInputTokens int64
}

// ToolUse is one tool_use block of an answer.
type ToolUse struct {
	ID   string
	Name string
	// Input is the tool input, a JSON object. A stream sends it in input_json_delta pieces.
	Input string
}

// Answer is a successful answer: its text block (none when Text is empty), then its tool_use
// blocks.
type Answer struct {
	Text     string
	ToolUses []ToolUse
	// StopReason defaults to "tool_use" when there are tool uses, else "end_turn".
	StopReason string
	// StopSequence is the stop_sequence reported (with StopReason "stop_sequence").
	StopSequence string
	// Usage zero fields InputTokens and OutputTokens default to DefaultInputTokens and
	// DefaultOutputTokens.
	Usage Usage
}

// Options configure the fake.
type Options struct {
	// Answer is the default answer; when it has neither text nor tool uses, its text is
	// DefaultText.
	Answer Answer
	// APIKey, when set, makes the fake answer 401 "invalid x-api-key" to other keys. A missing
	// x-api-key is always a 401, a missing anthropic-version always a 400.
	APIKey string
	// Latency is waited before the first byte of every answer; ChunkDelay between stream events.
	Latency    time.Duration
	ChunkDelay time.Duration
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
	// Success answers with Response.Answer or Options.Answer.
	Success Kind = iota
	// Error sends Response.Status, Header and Body exactly.
	Error
	// BreakStream sends After stream events, then drops the connection (no message_stop, no end
	// of the chunked body): the client sees an unexpected EOF.
	BreakStream
	// ErrorInStream sends After stream events, then "event: error" with Response.Body as its
	// data (StreamOverloadedEvent when empty), and ends the body.
	ErrorInStream
	// Hang sends After stream events (nothing for a non-streaming request), then blocks until
	// the client goes away or Close is called.
	Hang
)

// Response scripts the answer to one request.
type Response struct {
	Kind Kind
	// Status, Header and Body are the answer of Kind Error; Body is the error event's data for
	// ErrorInStream.
	Status int
	Header http.Header
	Body   []byte
	// After is the number of stream events sent before a stream breaks, errs or hangs. Event 1
	// is message_start; with text, 2 is content_block_start and 3 is ping.
	After int
	// Answer, when set, replaces Options.Answer for this request.
	Answer *Answer
}

// Request is a request the fake received.
type Request struct {
	Path   string
	Header http.Header
	Body   []byte
	// Model, Stream and MaxTokens are read from the body.
	Model     string
	Stream    bool
	MaxTokens int64
}

// Fake is the fake upstream. It is safe for concurrent use.
type Fake struct {
	opts Options

	mu    sync.Mutex
	queue []Response

	requests atomic.Int64
	last     atomic.Pointer[Request]

	done      chan struct{}
	closeOnce sync.Once
}

// New returns a Fake answering with opts.
func New(opts Options) *Fake {
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

// LastRequest returns the last request received, nil before the first.
func (f *Fake) LastRequest() *Request { return f.last.Load() }

// Close releases every handler blocked in Hang, so an httptest.Server can shut down.
func (f *Fake) Close() { f.closeOnce.Do(func() { close(f.done) }) }

type requestJSON struct {
	Model     *string          `json:"model"`
	Stream    bool             `json:"stream"`
	MaxTokens *int64           `json:"max_tokens"`
	Messages  *json.RawMessage `json:"messages"`
}

// ServeHTTP implements http.Handler for POST /v1/messages.
func (f *Fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var rj requestJSON
	jsonErr := json.Unmarshal(body, &rj)
	req := &Request{Path: r.URL.Path, Header: r.Header, Body: body, Stream: rj.Stream}
	if rj.Model != nil {
		req.Model = *rj.Model
	}
	if rj.MaxTokens != nil {
		req.MaxTokens = *rj.MaxTokens
	}
	if !f.opts.NoRecord {
		f.last.Store(req)
	}

	switch key := r.Header.Get("x-api-key"); {
	case key == "":
		writeError(w, http.StatusUnauthorized, errorHeader(RequestIDAuthentication, false), BodyMissingAPIKey)
		return
	case f.opts.APIKey != "" && key != f.opts.APIKey:
		writeError(w, http.StatusUnauthorized, errorHeader(RequestIDAuthentication, false), BodyInvalidAPIKey)
		return
	}
	if r.Header.Get("anthropic-version") == "" {
		writeError(w, http.StatusBadRequest, errorHeader(RequestIDInvalidRequest, false), BodyMissingVersion)
		return
	}
	if r.URL.Path != "/v1/messages" || r.Method != http.MethodPost {
		writeError(w, http.StatusNotFound, errorHeader(RequestIDInvalidRequest, false), BodyNotFound)
		return
	}
	if msg := validate(jsonErr, &rj); msg != "" {
		b := `{"type":"error","error":{"type":"invalid_request_error","message":` + string(appendString(nil, msg)) + `},"request_id":"` + RequestIDInvalidRequest + `"}`
		writeError(w, http.StatusBadRequest, errorHeader(RequestIDInvalidRequest, false), b)
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
	case Hang:
		if !req.Stream {
			f.hang(r)
			return
		}
	}
	a := f.answer(resp.Answer)
	if !req.Stream {
		h := successHeader(w.Header())
		h.Set("Content-Type", "application/json")
		_, _ = w.Write(message(a, req.Model))
		return
	}
	f.serveStream(w, r, req, resp, a)
}

// validate returns the 400 message for a body the API would refuse, "" when it is fine.
func validate(jsonErr error, rj *requestJSON) string {
	switch {
	case jsonErr != nil:
		return "There was an error parsing the body: " + jsonErr.Error() // wording uncertain
	case rj.Model == nil:
		return "model: Field required"
	case rj.MaxTokens == nil:
		return "max_tokens: Field required"
	case *rj.MaxTokens < 1:
		return "max_tokens: Input should be greater than or equal to 1"
	case rj.Messages == nil:
		return "messages: Field required"
	}
	return ""
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

// answer returns the answer to give, defaults filled in.
func (f *Fake) answer(override *Answer) Answer {
	a := f.opts.Answer
	if override != nil {
		a = *override
	}
	if a.Text == "" && len(a.ToolUses) == 0 {
		a.Text = DefaultText
	}
	if a.StopReason == "" {
		a.StopReason = "end_turn"
		if len(a.ToolUses) > 0 {
			a.StopReason = "tool_use"
		}
	}
	if a.Usage.InputTokens == 0 {
		a.Usage.InputTokens = DefaultInputTokens
	}
	if a.Usage.OutputTokens == 0 {
		a.Usage.OutputTokens = DefaultOutputTokens
	}
	return a
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

// successHeader sets the headers of a successful answer.
func successHeader(h http.Header) http.Header {
	h.Set("request-id", RequestIDSuccess)
	h.Set("anthropic-organization-id", OrganizationID)
	setRateLimit(h, 39000)
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

func (f *Fake) serveStream(w http.ResponseWriter, r *http.Request, req *Request, resp Response, a Answer) {
	h := successHeader(w.Header())
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	events := Events(a, req.Model)
	if resp.Kind != Success {
		events = events[:min(resp.After, len(events)-1)] // never the message_stop
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
		data := resp.Body
		if len(data) == 0 {
			data = []byte(StreamOverloadedEvent)
		}
		_, _ = w.Write(event("error", string(data)))
	case Hang:
		f.hang(r)
	}
}

// event frames one server-sent event as Anthropic does: "event: <name>\ndata: <json>\n\n".
func event(name, data string) []byte {
	return []byte("event: " + name + "\ndata: " + data + "\n\n")
}

// usageJSON writes the usage of message_start and of a complete message.
func usageJSON(b []byte, u Usage, output int64) []byte {
	b = append(b, `{"input_tokens":`...)
	b = strconv.AppendInt(b, u.InputTokens, 10)
	b = append(b, `,"cache_creation_input_tokens":`...)
	b = strconv.AppendInt(b, u.CacheCreationInputTokens, 10)
	b = append(b, `,"cache_read_input_tokens":`...)
	b = strconv.AppendInt(b, u.CacheReadInputTokens, 10)
	b = append(b, `,"cache_creation":{"ephemeral_5m_input_tokens":`...)
	b = strconv.AppendInt(b, u.CacheCreationInputTokens-u.CacheCreation1hInputTokens, 10)
	b = append(b, `,"ephemeral_1h_input_tokens":`...)
	b = strconv.AppendInt(b, u.CacheCreation1hInputTokens, 10)
	b = append(b, `},"output_tokens":`...)
	b = strconv.AppendInt(b, output, 10)
	return append(b, `,"service_tier":"standard"}`...)
}

// messageHead writes a message object up to its content array.
func messageHead(b []byte, model string) []byte {
	b = append(b, `{"model":`...)
	b = appendString(b, model)
	return append(b, `,"id":"`+MessageID+`","type":"message","role":"assistant","content":[`...)
}

func stopSequence(b []byte, a Answer) []byte {
	if a.StopSequence == "" {
		return append(b, "null"...)
	}
	return appendString(b, a.StopSequence)
}

// message is the body of a non-streaming answer.
func message(a Answer, model string) []byte {
	b := messageHead(make([]byte, 0, 512+len(a.Text)), model)
	n := 0
	if a.Text != "" {
		b = append(b, `{"type":"text","text":`...)
		b = appendString(b, a.Text)
		b = append(b, '}')
		n++
	}
	for _, t := range a.ToolUses {
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = append(b, `{"type":"tool_use","id":`...)
		b = appendString(b, t.ID)
		b = append(b, `,"name":`...)
		b = appendString(b, t.Name)
		b = append(b, `,"input":`...)
		b = append(b, compact(t.Input)...)
		b = append(b, '}')
	}
	b = append(b, `],"stop_reason":`...)
	b = appendString(b, a.StopReason)
	b = append(b, `,"stop_sequence":`...)
	b = stopSequence(b, a)
	b = append(b, `,"usage":`...)
	b = usageJSON(b, a.Usage, a.Usage.OutputTokens)
	return append(b, '}')
}

// Events returns every SSE event of a successful streamed answer, in the real order:
// message_start, per block content_block_start, (after the first block start) ping,
// content_block_delta..., content_block_stop, then message_delta and message_stop.
func Events(a Answer, model string) [][]byte {
	var evs [][]byte
	start := messageHead(nil, model)
	start = append(start, `],"stop_reason":null,"stop_sequence":null,"usage":`...)
	start = usageJSON(start, a.Usage, 1)
	start = append(start, '}')
	evs = append(evs, event("message_start", `{"type":"message_start","message":`+string(start)+`}`))

	index := 0
	block := func(startBlock string, deltas []string) {
		idx := strconv.Itoa(index)
		evs = append(evs, event("content_block_start", `{"type":"content_block_start","index":`+idx+`,"content_block":`+startBlock+`}`))
		if index == 0 {
			evs = append(evs, event("ping", `{"type": "ping"}`))
		}
		for _, d := range deltas {
			evs = append(evs, event("content_block_delta", `{"type":"content_block_delta","index":`+idx+`,"delta":`+d+`}`))
		}
		evs = append(evs, event("content_block_stop", `{"type":"content_block_stop","index":`+idx+`}`))
		index++
	}
	if a.Text != "" {
		var deltas []string
		for _, w := range words(a.Text) {
			deltas = append(deltas, `{"type":"text_delta","text":`+string(appendString(nil, w))+`}`)
		}
		block(`{"type":"text","text":""}`, deltas)
	}
	for _, t := range a.ToolUses {
		deltas := []string{`{"type":"input_json_delta","partial_json":""}`}
		for _, p := range pieces(string(compact(t.Input)), 10) {
			deltas = append(deltas, `{"type":"input_json_delta","partial_json":`+string(appendString(nil, p))+`}`)
		}
		start := `{"type":"tool_use","id":` + string(appendString(nil, t.ID)) + `,"name":` + string(appendString(nil, t.Name)) + `,"input":{}}`
		block(start, deltas)
	}

	d := []byte(`{"type":"message_delta","delta":{"stop_reason":`)
	d = appendString(d, a.StopReason)
	d = append(d, `,"stop_sequence":`...)
	d = stopSequence(d, a)
	d = append(d, `},"usage":{"input_tokens":`...)
	d = strconv.AppendInt(d, a.Usage.InputTokens, 10)
	d = append(d, `,"cache_creation_input_tokens":`...)
	d = strconv.AppendInt(d, a.Usage.CacheCreationInputTokens, 10)
	d = append(d, `,"cache_read_input_tokens":`...)
	d = strconv.AppendInt(d, a.Usage.CacheReadInputTokens, 10)
	d = append(d, `,"output_tokens":`...)
	d = strconv.AppendInt(d, a.Usage.OutputTokens, 10)
	d = append(d, `}}`...)
	evs = append(evs, event("message_delta", string(d)))
	return append(evs, event("message_stop", `{"type":"message_stop"}`))
}

// words splits text into the pieces a stream sends: each word with the spaces before it.
func words(text string) []string {
	var out []string
	start := 0
	for i := 1; i < len(text); i++ {
		if text[i] == ' ' && text[i-1] != ' ' {
			out = append(out, text[start:i])
			start = i
		}
	}
	return append(out, text[start:])
}

// pieces splits s into pieces of about n bytes, never inside a UTF-8 sequence.
func pieces(s string, n int) []string {
	var out []string
	for len(s) > n {
		k := n
		for k < len(s) && !utf8.RuneStart(s[k]) {
			k++
		}
		out = append(out, s[:k])
		s = s[k:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

// compact returns a tool input as compact JSON ({} when empty or not JSON).
func compact(input string) []byte {
	var buf bytes.Buffer
	if strings.TrimSpace(input) == "" || json.Compact(&buf, []byte(input)) != nil {
		return []byte("{}")
	}
	return buf.Bytes()
}

// appendString appends s as a JSON string the way Anthropic writes it: UTF-8 as is, and <, >
// and & not escaped.
func appendString(b []byte, s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}
