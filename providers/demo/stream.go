package demo

import (
	"context"
	"io"
	"strconv"
	"time"

	"yosan/app"
	"yosan/providers/openai"
)

// ChatCompletionStream answers a chat completion as an OpenAI stream: a role chunk, at most 16
// content (or tool-call) chunks, a finish chunk and, with stream_options.include_usage, the
// usage chunk ("choices": []); every other chunk then has "usage": null. Errors are those of
// ChatCompletion; Next returns the UpstreamError of an ended ctx, or io.EOF after the last chunk.
func (p *Provider) ChatCompletionStream(ctx context.Context, req *app.ProviderRequest) (app.Stream, error) {
	a, err := p.plan(req)
	if err != nil {
		return nil, err
	}
	return &stream{ctx: ctx, latency: p.opts.Latency, chunks: a.chunks()}, nil
}

type stream struct {
	ctx     context.Context
	latency time.Duration
	chunks  []app.StreamChunk
	next    int
}

// Next returns the next chunk after Latency.
func (s *stream) Next() (app.StreamChunk, error) {
	if s.next >= len(s.chunks) {
		return app.StreamChunk{}, io.EOF
	}
	if err := sleep(s.ctx, s.latency); err != nil {
		return app.StreamChunk{}, err
	}
	c := s.chunks[s.next]
	s.next++
	return c, nil
}

// Close ends the stream.
func (s *stream) Close() error {
	s.next = len(s.chunks)
	return nil
}

// chunks builds every chunk of the streamed answer.
func (a *answer) chunks() []app.StreamChunk {
	head := `{"id":"` + a.id + `","object":"chat.completion.chunk","created":` + strconv.FormatInt(a.created, 10) +
		`,"model":` + string(openai.AppendString(nil, a.model))
	tail := "}"
	if a.includeUsage {
		tail = `,"usage":null}`
	}
	chunk := func(choice, text string) app.StreamChunk {
		data := head + `,"system_fingerprint":"` + SystemFingerprint + `","choices":[` + choice + `]` + tail
		return app.StreamChunk{Data: []byte(data), Text: text}
	}
	delta := func(d string) string {
		return `{"index":0,"delta":` + d + `,"logprobs":null,"finish_reason":null}`
	}

	var out []app.StreamChunk
	if a.toolName != "" {
		callID := "call_demo_" + a.id[len("chatcmpl-demo-"):]
		out = append(out,
			chunk(delta(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"`+callID+
				`","type":"function","function":{"name":`+string(openai.AppendString(nil, a.toolName))+`,"arguments":""}}],"refusal":null}`), ""),
			chunk(delta(`{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}`), "{}"))
	} else {
		out = append(out, chunk(delta(`{"role":"assistant","content":"","refusal":null}`), ""))
		for _, piece := range splitContent(a.content(), len(a.words)) {
			out = append(out, chunk(delta(`{"content":`+string(openai.AppendString(nil, piece))+`}`), piece))
		}
	}
	out = append(out, chunk(`{"index":0,"delta":{},"logprobs":null,"finish_reason":"`+a.finish+`"}`, ""))
	if a.includeUsage {
		u := a.usage
		data := head + `,"choices":[],"usage":` + string(openai.AppendUsage(nil, u)) + "}"
		out = append(out, app.StreamChunk{Data: []byte(data), Usage: &u, UsageOnly: true})
	}
	return out
}

// splitContent cuts s (of n space-separated words) into at most maxChunks pieces at word
// boundaries; each piece after the first keeps its leading space, so they join back to s.
func splitContent(s string, n int) []string {
	if n == 0 {
		return nil
	}
	per := (n + maxChunks - 1) / maxChunks
	var pieces []string
	start, words := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] != ' ' {
			continue
		}
		words++
		if words%per == 0 {
			pieces = append(pieces, s[start:i])
			start = i
		}
	}
	return append(pieces, s[start:])
}
