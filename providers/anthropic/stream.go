package anthropic

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"yosan/app"
	"yosan/providers/openai"
	"yosan/providers/upstream"
)

// Stream is an open Messages stream, read as OpenAI chat.completion.chunk events. It is not
// safe for concurrent use.
//
// Nothing is returned before the answer's first content: message_start and ping only record
// the id, model and input usage. So an "event: error" that arrives before any content (an
// overload, typically) is the first thing Next returns, while the gateway can still fall back.
type Stream struct {
	c      *Client
	ctx    context.Context
	resp   *http.Response
	r      *bufio.Reader
	lines  upstream.LineReader
	err    error // sticky: once set, Next returns it
	closed bool

	pending []app.StreamChunk // chunks made by one event, returned one per Next

	head      []byte // `{"id":...,"model":...,"choices":[` of every chunk
	id, model string
	created   int64
	tokens    tokens
	hasUsage  bool
	sentRole  bool
	finished  bool        // the finish_reason chunk went out
	tools     map[int]int // content block index -> tool call index, for tool_use blocks
}

// UsageSoFar is the usage Anthropic reported so far (app.PartialUsage).
func (s *Stream) UsageSoFar() (app.Usage, bool) { return s.tokens.usage(), s.hasUsage }

func (c *Client) newStream(ctx context.Context, resp *http.Response, model string) *Stream {
	r := c.readers.Get().(*bufio.Reader)
	r.Reset(resp.Body)
	return &Stream{c: c, ctx: ctx, resp: resp, r: r, lines: upstream.LineReader{R: r, Max: MaxEventSize}, model: model, created: c.now().Unix()}
}

// Close closes the response body; it is safe to call more than once.
func (s *Stream) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	s.r.Reset(nil)
	s.c.readers.Put(s.r)
	s.r = nil
	if s.err == nil {
		s.err = errors.New("stream closed")
	}
	return s.resp.Body.Close()
}

// Next returns the next OpenAI chunk. After the finish_reason chunk comes one usage-only chunk
// (UsageOnly, "choices": [] and the usage; left out when Anthropic reported no usage), then
// io.EOF. Its other errors, all *app.UpstreamError with Status 0: ErrErrorEvent for an
// "event: error" (Body is the event's JSON exactly as received, whether or not content came
// before it), ErrStreamBroken when the body ends before message_stop, ErrBadResponse for an
// event that is not JSON, or the transport error (Timeout when a deadline expired). After an
// error every call returns it again.
func (s *Stream) Next() (app.StreamChunk, error) {
	for {
		if len(s.pending) > 0 {
			chunk := s.pending[0]
			s.pending = s.pending[1:]
			return chunk, nil
		}
		if s.err != nil {
			return app.StreamChunk{}, s.err
		}
		data, err := s.readEvent()
		if err != nil {
			s.err = err
			return app.StreamChunk{}, err
		}
		if err := s.handle(data); err != nil {
			s.err = err
		}
	}
}

// eventJSON is every Anthropic stream event, decoded into one struct.
type eventJSON struct {
	Type         string       `json:"type"`
	Message      *messageJSON `json:"message"`
	Index        int          `json:"index"`
	ContentBlock *blockJSON   `json:"content_block"`
	Delta        *struct {
		Type        string  `json:"type"`
		Text        string  `json:"text"`
		PartialJSON string  `json:"partial_json"`
		StopReason  *string `json:"stop_reason"`
	} `json:"delta"`
	Usage *usageJSON `json:"usage"`
}

// handle turns one event into chunks on s.pending; io.EOF after message_stop.
func (s *Stream) handle(data []byte) error {
	var ev eventJSON
	if err := json.Unmarshal(data, &ev); err != nil {
		return s.fail(data, fmt.Errorf("%w: %w", ErrBadResponse, err))
	}
	switch ev.Type {
	case "message_start":
		if m := ev.Message; m != nil {
			if m.ID != "" {
				s.id = m.ID
			}
			if m.Model != "" {
				s.model = m.Model
			}
			if m.Usage != nil {
				s.tokens.merge(m.Usage)
				s.hasUsage = true
			}
		}
	case "content_block_start":
		b := ev.ContentBlock
		if b == nil {
			return nil
		}
		switch b.Type {
		case "text":
			if b.Text != "" {
				s.emitText(b.Text)
			}
		case "tool_use":
			if s.tools == nil {
				s.tools = map[int]int{}
			}
			k := len(s.tools)
			s.tools[ev.Index] = k
			d := s.deltaStart(true)
			d = append(d, `"tool_calls":[{"index":`...)
			d = strconv.AppendInt(d, int64(k), 10)
			d = append(d, `,"id":`...)
			d = appendString(d, b.ID)
			d = append(d, `,"type":"function","function":{"name":`...)
			d = appendString(d, b.Name)
			d = append(d, `,"arguments":""}}]}`...)
			s.emit(d, "null", b.Name)
		}
	case "content_block_delta":
		d := ev.Delta
		if d == nil {
			return nil
		}
		switch d.Type {
		case "text_delta":
			if d.Text != "" {
				s.emitText(d.Text)
			}
		case "input_json_delta":
			k, ok := s.tools[ev.Index]
			if !ok || d.PartialJSON == "" {
				return nil
			}
			b := s.deltaStart(false)
			b = append(b, `"tool_calls":[{"index":`...)
			b = strconv.AppendInt(b, int64(k), 10)
			b = append(b, `,"function":{"arguments":`...)
			b = appendString(b, d.PartialJSON)
			b = append(b, `}}]}`...)
			s.emit(b, "null", d.PartialJSON)
		}
		// thinking_delta, signature_delta, citations_delta: not translated
	case "message_delta":
		if ev.Usage != nil {
			s.tokens.merge(ev.Usage)
			s.hasUsage = true
		}
		if d := ev.Delta; d != nil && d.StopReason != nil && !s.finished {
			s.finish(finishReason(*d.StopReason))
		}
	case "message_stop":
		if !s.finished {
			s.finish("stop")
		}
		if s.hasUsage {
			u := s.tokens.usage()
			b := append(s.chunkHead(), `],"usage":`...)
			b = openai.AppendUsage(b, u)
			b = append(b, '}')
			s.pending = append(s.pending, app.StreamChunk{Data: b, Usage: &u, UsageOnly: true})
		}
		return io.EOF
	case "error":
		return s.fail(data, fmt.Errorf("%w: %s", ErrErrorEvent, errorMessage(data)))
	}
	// ping, content_block_stop and event types added later: nothing to relay
	return nil
}

func (s *Stream) fail(data []byte, err error) error {
	return &app.UpstreamError{Provider: s.c.name, Header: s.resp.Header, Body: limit(data), Err: err}
}

// chunkHead returns a new buffer holding the start of a chunk, up to and including "choices":[.
func (s *Stream) chunkHead() []byte {
	if s.head == nil {
		h := []byte(`{"id":`)
		h = appendString(h, s.id)
		h = append(h, `,"object":"chat.completion.chunk","created":`...)
		h = strconv.AppendInt(h, s.created, 10)
		h = append(h, `,"model":`...)
		h = appendString(h, s.model)
		s.head = append(h, `,"choices":[`...)
	}
	return append(make([]byte, 0, len(s.head)+256), s.head...)
}

// deltaStart returns the opening of a delta object; the first chunk of the answer also names the
// role (with "content": null when it starts with a tool call, as OpenAI sends it).
func (s *Stream) deltaStart(toolCall bool) []byte {
	b := []byte(`{`)
	if !s.sentRole {
		s.sentRole = true
		if toolCall {
			b = append(b, `"role":"assistant","content":null,`...)
		} else {
			b = append(b, `"role":"assistant",`...)
		}
	}
	return b
}

func (s *Stream) emitText(text string) {
	d := s.deltaStart(false)
	d = append(d, `"content":`...)
	d = appendString(d, text)
	d = append(d, '}')
	s.emit(d, "null", text)
}

func (s *Stream) finish(reason string) {
	s.finished = true
	d := []byte(`{}`)
	if !s.sentRole {
		s.sentRole = true
		d = []byte(`{"role":"assistant","content":""}`)
	}
	s.emit(d, strconv.Quote(reason), "")
}

// emit queues a chunk with one choice: delta is its JSON object, finish the JSON of
// finish_reason, text what the gateway counts.
func (s *Stream) emit(delta []byte, finish, text string) {
	b := s.chunkHead()
	b = append(b, `{"index":0,"delta":`...)
	b = append(b, delta...)
	b = append(b, `,"logprobs":null,"finish_reason":`...)
	b = append(b, finish...)
	b = append(b, `}]}`...)
	s.pending = append(s.pending, app.StreamChunk{Data: b, Text: text})
}

// readEvent returns the data of the next event (its data lines joined by "\n", as the SSE spec
// says; the "event:" name repeats the JSON's "type", which is what handle reads).
func (s *Stream) readEvent() ([]byte, error) {
	var data []byte
	hasData := false
	for {
		line, err := s.lines.ReadLine()
		if err != nil {
			if errors.Is(err, io.EOF) {
				if hasData {
					return data, nil // a last event without its blank line; the next read fails
				}
				return nil, &app.UpstreamError{Provider: s.c.name, Header: s.resp.Header, Err: ErrStreamBroken}
			}
			if errors.Is(err, upstream.ErrTooLarge) {
				return nil, &app.UpstreamError{Provider: s.c.name, Header: s.resp.Header, Err: fmt.Errorf("%w: event line over %d bytes", ErrBadResponse, MaxEventSize)}
			}
			return nil, s.c.transportError(s.ctx, fmt.Errorf("read stream: %w", err))
		}
		if len(line) == 0 {
			if hasData {
				return data, nil
			}
			continue
		}
		value, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue // event:, a comment, id:, retry: or a stray line
		}
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		if hasData {
			if len(data)+1+len(value) > MaxEventSize {
				return nil, &app.UpstreamError{Provider: s.c.name, Header: s.resp.Header, Err: fmt.Errorf("%w: event over %d bytes", ErrBadResponse, MaxEventSize)}
			}
			data = append(data, '\n')
			data = append(data, value...)
		} else {
			// A copy: the line lives in the reader's buffer, and an error event's data goes
			// to the caller.
			data = append(make([]byte, 0, len(value)), value...)
			hasData = true
		}
	}
}
