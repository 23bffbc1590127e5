package openai

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"yosan/app"
	"yosan/providers/upstream"
)

// readerPool recycles the stream readers: one per open stream would otherwise be 32 KiB of
// garbage per call.
var readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 32<<10) }}

// Stream is an open chat completion stream (server-sent events). Next returns io.EOF after
// data: [DONE]. It is not safe for concurrent use.
type Stream struct {
	c      *Client
	ctx    context.Context
	resp   *http.Response
	r      *bufio.Reader
	lines  upstream.LineReader
	err    error // sticky: once set, Next returns it
	closed bool
}

func newStream(ctx context.Context, c *Client, resp *http.Response) *Stream {
	r := readerPool.Get().(*bufio.Reader)
	r.Reset(resp.Body)
	return &Stream{c: c, ctx: ctx, resp: resp, r: r, lines: upstream.LineReader{R: r, Max: MaxEventSize}}
}

// Close closes the response body; it is safe to call more than once.
func (s *Stream) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	s.r.Reset(nil)
	readerPool.Put(s.r)
	s.r = nil
	if s.err == nil {
		s.err = errors.New("stream closed")
	}
	return s.resp.Body.Close()
}

// Next returns the next event. Its errors: io.EOF after data: [DONE]; *app.UpstreamError
// (Status 0) wrapping ErrStreamBroken when the body ends before [DONE], ErrErrorEvent when an
// error object arrives (Body holds it), ErrBadResponse for an event that is not JSON, or the
// transport error (Timeout when a deadline expired). After an error every call returns it again.
func (s *Stream) Next() (app.StreamChunk, error) {
	if s.err != nil {
		return app.StreamChunk{}, s.err
	}
	data, err := s.readEvent()
	if err != nil {
		s.err = err
		return app.StreamChunk{}, err
	}
	chunk, err := s.parse(data)
	if err != nil {
		s.err = err
		return app.StreamChunk{}, err
	}
	return chunk, nil
}

// readEvent returns the data of the next event (its data lines joined by "\n", as the SSE spec
// says), io.EOF at [DONE], or an error.
func (s *Stream) readEvent() ([]byte, error) {
	var data []byte
	hasData := false
	for {
		line, err := s.lines.ReadLine()
		if err != nil {
			if errors.Is(err, io.EOF) {
				if hasData && string(data) == "[DONE]" {
					return nil, io.EOF
				}
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
			if !hasData {
				continue
			}
			if string(data) == "[DONE]" {
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

// chunkJSON is the part of a chat.completion.chunk the gateway reads.
type chunkJSON struct {
	Choices []struct {
		Delta struct {
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
			Reasoning        string `json:"reasoning"`
			ToolCalls        []struct {
				Function struct {
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
	} `json:"choices"`
	Usage *usageJSON      `json:"usage"`
	Error json.RawMessage `json:"error"`
}

func (s *Stream) parse(data []byte) (app.StreamChunk, error) {
	var cj chunkJSON
	if err := json.Unmarshal(data, &cj); err != nil {
		return app.StreamChunk{}, &app.UpstreamError{Provider: s.c.name, Header: s.resp.Header, Body: limit(data), Err: fmt.Errorf("%w: %w", ErrBadResponse, err)}
	}
	if isError(cj.Error) {
		return app.StreamChunk{}, &app.UpstreamError{Provider: s.c.name, Header: s.resp.Header, Body: data, Err: fmt.Errorf("%w: %s", ErrErrorEvent, errorMessage(cj.Error))}
	}
	chunk := app.StreamChunk{Data: data}
	if cj.Usage != nil {
		u := cj.Usage.usage()
		chunk.Usage = &u
		// OpenAI's include_usage chunk has "choices": []; some compatible servers leave the
		// field out, which means the same.
		chunk.UsageOnly = len(cj.Choices) == 0
	}
	// Text: the common case is one piece, which needs no concatenation.
	var sb strings.Builder
	for i := range cj.Choices {
		d := &cj.Choices[i].Delta
		for _, piece := range [...]string{d.Content, d.ReasoningContent, d.Reasoning} {
			if piece != "" {
				appendText(&chunk.Text, &sb, piece)
			}
		}
		for j := range d.ToolCalls {
			if a := d.ToolCalls[j].Function.Arguments; a != "" {
				appendText(&chunk.Text, &sb, a)
			}
		}
	}
	if sb.Len() > 0 {
		chunk.Text = sb.String()
	}
	return chunk, nil
}

// appendText sets *text to piece when it is the first; from the second on both go to sb.
func appendText(text *string, sb *strings.Builder, piece string) {
	switch {
	case sb.Len() > 0:
		sb.WriteString(piece)
	case *text == "":
		*text = piece
	default:
		sb.WriteString(*text)
		sb.WriteString(piece)
	}
}

// errorMessage returns error.message of an error object, or the raw value.
func errorMessage(raw json.RawMessage) string {
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &e) == nil && e.Message != "" {
		return e.Message
	}
	return string(limit(raw))
}
