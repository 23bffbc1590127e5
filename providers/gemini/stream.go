package gemini

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
	"strings"

	"yosan/app"
	"yosan/providers/openai"
	"yosan/providers/upstream"
)

// Stream is an open streamGenerateContent?alt=sse answer, read as OpenAI chat.completion.chunk
// events: the first chunk of each choice carries the role, then content and tool-call deltas,
// a finish_reason chunk per choice, and last a usage-only chunk ("choices": [], UsageOnly) from
// the last usageMetadata Gemini sent. Each Gemini event carries the usage so far; only the
// last counts. It is not safe for concurrent use.
type Stream struct {
	c       *Client
	ctx     context.Context
	resp    *http.Response
	r       *bufio.Reader
	lines   upstream.LineReader
	model   string
	id      string
	created int64

	started bool
	choices map[int]*choiceState
	calls   int // tool calls numbered so far ("call_<n>")
	usage   *usageMetadata
	pending []app.StreamChunk
	ended   bool  // the body ended cleanly; what is pending is the rest
	err     error // sticky: once set, Next returns it
	closed  bool
}

type choiceState struct {
	roleSent bool
	tools    int // tool calls of this choice so far (the delta's index)
	hasCalls bool
	finished bool
}

// UsageSoFar is the last usageMetadata Gemini sent, thoughts billed as output
// (app.PartialUsage).
func (s *Stream) UsageSoFar() (app.Usage, bool) {
	if s.usage == nil {
		return app.Usage{}, false
	}
	return s.usage.usage(), true
}

func newStream(ctx context.Context, c *Client, resp *http.Response, model string) *Stream {
	r := bufio.NewReaderSize(resp.Body, 32<<10)
	return &Stream{
		c: c, ctx: ctx, resp: resp, r: r, lines: upstream.LineReader{R: r, Max: MaxEventSize},
		model: model, id: "chatcmpl-gemini", created: c.now().Unix(), choices: map[int]*choiceState{},
	}
}

// Close closes the response body; it is safe to call more than once.
func (s *Stream) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	if s.err == nil {
		s.err = errors.New("stream closed")
	}
	return s.resp.Body.Close()
}

// Next returns the next chunk. Its errors: io.EOF after the usage chunk (or after the last
// finish_reason when Gemini sent no usage); *app.UpstreamError (Status 0) wrapping
// ErrStreamBroken when the body ends before every candidate finished, ErrErrorEvent when an
// error object arrives (Body holds it), ErrBadResponse for an event that is not JSON, or the
// transport error (Timeout when a deadline expired; a connection dropped mid-body is
// io.ErrUnexpectedEOF). After an error every call returns it again.
func (s *Stream) Next() (app.StreamChunk, error) {
	for len(s.pending) == 0 {
		if s.err != nil {
			return app.StreamChunk{}, s.err
		}
		if s.ended {
			s.err = io.EOF
			return app.StreamChunk{}, io.EOF
		}
		data, err := s.readEvent()
		if err == io.EOF {
			if !s.complete() {
				s.err = &app.UpstreamError{Provider: s.c.name, Header: s.resp.Header, Err: ErrStreamBroken}
				continue
			}
			s.ended = true
			if s.usage != nil {
				s.pending = append(s.pending, s.usageChunk())
			}
			continue
		}
		if err != nil {
			s.err = err
			continue
		}
		if err := s.parse(data); err != nil {
			s.err = err
		}
	}
	ch := s.pending[0]
	s.pending[0] = app.StreamChunk{}
	s.pending = s.pending[1:]
	return ch, nil
}

// complete reports whether the stream said all it had to say: at least one candidate, and each
// with its finishReason.
func (s *Stream) complete() bool {
	if len(s.choices) == 0 {
		return false
	}
	for _, st := range s.choices {
		if !st.finished {
			return false
		}
	}
	return true
}

func (s *Stream) choice(i int) *choiceState {
	st := s.choices[i]
	if st == nil {
		st = &choiceState{}
		s.choices[i] = st
	}
	return st
}

// parse turns one Gemini event into pending chunks: one with the deltas of every candidate that
// said something, then one with the finish_reason of those that finished.
func (s *Stream) parse(data []byte) error {
	var gr generateResponse
	if err := json.Unmarshal(data, &gr); err != nil {
		return &app.UpstreamError{Provider: s.c.name, Header: s.resp.Header, Body: limit(data), Err: fmt.Errorf("%w: %w", ErrBadResponse, err)}
	}
	if isError(gr.Error) {
		return &app.UpstreamError{Provider: s.c.name, Header: s.resp.Header, Body: data, Err: fmt.Errorf("%w: %s", ErrErrorEvent, errorMessage(gr.Error))}
	}
	if !s.started {
		s.started = true
		if gr.ResponseID != "" {
			s.id = responseID(&gr)
		}
		if gr.ModelVersion != "" {
			s.model = gr.ModelVersion
		}
	}
	if gr.UsageMetadata != nil {
		s.usage = gr.UsageMetadata
	}
	if len(gr.Candidates) == 0 && gr.PromptFeedback != nil && gr.PromptFeedback.BlockReason != "" {
		// The prompt was blocked: no candidate will come.
		gr.Candidates = []candidate{{FinishReason: "SAFETY"}}
	}

	deltas := s.head()
	var finishes []byte
	nDeltas := 0
	var text string
	var sb strings.Builder
	for i := range gr.Candidates {
		cand := &gr.Candidates[i]
		idx := candidateIndex(cand, i)
		st := s.choice(idx)
		content, calls := cand.split()
		// An event with thoughts only says nothing to the caller (but its first one, the role).
		if content != "" || len(calls) > 0 || !st.roleSent {
			if nDeltas > 0 {
				deltas = append(deltas, ',')
			}
			nDeltas++
			deltas = append(deltas, `{"index":`...)
			deltas = strconv.AppendInt(deltas, int64(idx), 10)
			deltas = append(deltas, `,"delta":{`...)
			sep := ""
			if !st.roleSent {
				st.roleSent = true
				deltas = append(deltas, `"role":"assistant"`...)
				sep = ","
				if content == "" && len(calls) == 0 {
					deltas = append(deltas, `,"content":""`...)
				}
			}
			if content != "" {
				deltas = append(deltas, sep+`"content":`...)
				deltas = openai.AppendString(deltas, content)
				sep = ","
				appendText(&text, &sb, content)
			}
			if len(calls) > 0 {
				st.hasCalls = true
				deltas = append(deltas, sep+`"tool_calls":[`...)
				for j, p := range calls {
					if j > 0 {
						deltas = append(deltas, ',')
					}
					var args string
					deltas, args = appendToolCall(deltas, p, st.tools, s.calls)
					st.tools++
					s.calls++
					appendText(&text, &sb, args)
				}
				deltas = append(deltas, ']')
			}
			deltas = append(deltas, `},"logprobs":null,"finish_reason":null}`...)
		}
		if f := finishReason(cand.FinishReason, st.hasCalls); f != "" && !st.finished {
			st.finished = true
			if finishes == nil {
				finishes = s.head()
			} else {
				finishes = append(finishes, ',')
			}
			finishes = append(finishes, `{"index":`...)
			finishes = strconv.AppendInt(finishes, int64(idx), 10)
			finishes = append(finishes, `,"delta":{},"logprobs":null,"finish_reason":"`+f+`"}`...)
		}
	}
	if nDeltas > 0 {
		if sb.Len() > 0 {
			text = sb.String()
		}
		s.pending = append(s.pending, app.StreamChunk{Data: append(deltas, `],"usage":null}`...), Text: text})
	}
	if finishes != nil {
		s.pending = append(s.pending, app.StreamChunk{Data: append(finishes, `],"usage":null}`...)})
	}
	return nil
}

// head returns the start of a chunk, up to the opening of its choices array.
func (s *Stream) head() []byte {
	b := make([]byte, 0, 256)
	b = append(b, `{"id":`...)
	b = openai.AppendString(b, s.id)
	b = append(b, `,"object":"chat.completion.chunk","created":`...)
	b = strconv.AppendInt(b, s.created, 10)
	b = append(b, `,"model":`...)
	b = openai.AppendString(b, s.model)
	return append(b, `,"choices":[`...)
}

// usageChunk is the include_usage chunk: no choices, the usage of the whole call.
func (s *Stream) usageChunk() app.StreamChunk {
	b := s.head()
	b = append(b, `],"usage":`...)
	b = appendUsage(b, s.usage)
	u := s.usage.usage()
	return app.StreamChunk{Data: append(b, '}'), Usage: &u, UsageOnly: true}
}

// readEvent returns the data of the next event (its data lines joined by "\n", as the SSE spec
// says), io.EOF when the body ends cleanly, or an error.
func (s *Stream) readEvent() ([]byte, error) {
	var data []byte
	hasData := false
	for {
		line, err := s.lines.ReadLine()
		if err != nil {
			if errors.Is(err, io.EOF) {
				if hasData && string(data) != "[DONE]" {
					return data, nil // a last event without its blank line; the next read ends
				}
				return nil, io.EOF
			}
			if errors.Is(err, upstream.ErrTooLarge) {
				return nil, &app.UpstreamError{Provider: s.c.name, Header: s.resp.Header, Err: fmt.Errorf("%w: event line over %d bytes", ErrBadResponse, MaxEventSize)}
			}
			return nil, s.c.transportError(s.ctx, fmt.Errorf("read stream: %w", err))
		}
		if len(line) == 0 {
			if !hasData {
				continue
			}
			if string(data) == "[DONE]" { // not Gemini's, but a proxy's: the end all the same
				return nil, io.EOF
			}
			return data, nil
		}
		value, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue // comment (":"), event:, id:, retry: or a stray line
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
			// A copy: the line lives in the reader's buffer, the chunk goes to the caller.
			data = append(make([]byte, 0, len(value)), value...)
			hasData = true
		}
	}
}
