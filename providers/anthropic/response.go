package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"yosan/app"
	"yosan/providers/openai"
)

// messageJSON is the part of a Messages answer (or of message_start's message) the client reads.
type messageJSON struct {
	ID         string          `json:"id"`
	Type       string          `json:"type"`
	Model      string          `json:"model"`
	Content    []blockJSON     `json:"content"`
	StopReason *string         `json:"stop_reason"`
	Usage      *usageJSON      `json:"usage"`
	Error      json.RawMessage `json:"error"`
}

type blockJSON struct {
	Type  string          `json:"type"`
	Text  string          `json:"text"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// usageJSON is Anthropic's usage. The fields are pointers because message_delta carries only
// some of them: a field it leaves out keeps the value message_start gave.
type usageJSON struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
	// CacheCreation splits the cache writes by how long they are kept (priced differently).
	CacheCreation *struct {
		Ephemeral1h *int64 `json:"ephemeral_1h_input_tokens"`
	} `json:"cache_creation"`
}

// tokens is a complete usage.
type tokens struct {
	input, output, cacheCreation, cacheRead, cacheCreation1h int64
}

// merge overwrites t with the fields u carries. Anthropic's counts are cumulative (message_delta
// repeats the total output so far), so a later value replaces an earlier one, never adds to it.
func (t *tokens) merge(u *usageJSON) {
	for _, f := range [...]struct {
		dst *int64
		src *int64
	}{{&t.input, u.InputTokens}, {&t.output, u.OutputTokens}, {&t.cacheCreation, u.CacheCreationInputTokens}, {&t.cacheRead, u.CacheReadInputTokens}} {
		if f.src != nil {
			*f.dst = *f.src
		}
	}
	if u.CacheCreation != nil && u.CacheCreation.Ephemeral1h != nil {
		t.cacheCreation1h = *u.CacheCreation.Ephemeral1h
	}
}

// usage is the gateway's view: every input token is a prompt token, cache reads are cached,
// cache creation is a cache write.
func (t tokens) usage() app.Usage {
	return app.Usage{
		PromptTokens:     t.input + t.cacheCreation + t.cacheRead,
		CompletionTokens: t.output,
		CachedTokens:     t.cacheRead,
		CacheWriteTokens: t.cacheCreation,
		// Kept for an hour: a part of the writes, never more than they are.
		CacheWrite1hTokens: min(max(t.cacheCreation1h, 0), t.cacheCreation),
	}
}

// finishReason maps Anthropic's stop_reason to OpenAI's finish_reason.
func finishReason(stop string) string {
	switch stop {
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "tool_use":
		return "tool_calls"
	case "refusal":
		return "content_filter"
	}
	return "stop" // end_turn, stop_sequence, pause_turn and whatever comes next
}

// translateResponse turns a Messages answer into an OpenAI chat.completion. Its errors wrap
// ErrBadResponse or ErrErrorEvent.
func translateResponse(b []byte, model string, created int64) (*app.ProviderResponse, error) {
	var m messageJSON
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadResponse, err)
	}
	if m.Type == "error" || present(m.Error) {
		return nil, fmt.Errorf("%w: %s", ErrErrorEvent, errorMessage(b))
	}
	if m.Type != "message" {
		return nil, fmt.Errorf("%w: type %q, want \"message\"", ErrBadResponse, m.Type)
	}
	if m.Model != "" {
		model = m.Model
	}
	out := make([]byte, 0, 512+len(b))
	out = append(out, `{"id":`...)
	out = appendString(out, m.ID)
	out = append(out, `,"object":"chat.completion","created":`...)
	out = strconv.AppendInt(out, created, 10)
	out = append(out, `,"model":`...)
	out = appendString(out, model)
	out = append(out, `,"choices":[{"index":0,"message":{"role":"assistant","content":`...)
	var text []byte
	hasText := false
	for _, c := range m.Content {
		if c.Type == "text" {
			text = append(text, c.Text...)
			hasText = true
		}
	}
	if hasText {
		out = appendString(out, string(text))
	} else {
		out = append(out, "null"...)
	}
	calls := 0
	for _, c := range m.Content {
		if c.Type != "tool_use" {
			continue
		}
		if calls == 0 {
			out = append(out, `,"tool_calls":[`...)
		} else {
			out = append(out, ',')
		}
		calls++
		out = append(out, `{"id":`...)
		out = appendString(out, c.ID)
		out = append(out, `,"type":"function","function":{"name":`...)
		out = appendString(out, c.Name)
		out = append(out, `,"arguments":`...)
		out = appendString(out, string(compactInput(c.Input)))
		out = append(out, `}}`...)
	}
	if calls > 0 {
		out = append(out, ']')
	}
	out = append(out, `,"refusal":null},"logprobs":null,"finish_reason":`...)
	if m.StopReason != nil {
		out = appendString(out, finishReason(*m.StopReason))
	} else {
		out = append(out, "null"...)
	}
	out = append(out, `}]`...)
	resp := &app.ProviderResponse{}
	if m.Usage != nil {
		var t tokens
		t.merge(m.Usage)
		resp.Usage, resp.HasUsage = t.usage(), true
		out = append(out, `,"usage":`...)
		out = openai.AppendUsage(out, resp.Usage)
	}
	resp.Body = append(out, '}')
	return resp, nil
}

// compactInput returns a tool_use input as the compact JSON text OpenAI puts in "arguments".
func compactInput(in json.RawMessage) []byte {
	if !present(in) {
		return []byte("{}")
	}
	var buf bytes.Buffer
	if json.Compact(&buf, in) != nil {
		return in
	}
	return buf.Bytes()
}

// errorMessage returns error.message of an Anthropic error object, or the raw text.
func errorMessage(b []byte) string {
	var e struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
		return e.Error.Type + ": " + e.Error.Message
	}
	return string(limit(b))
}

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte {
	return openai.AppendString(b, s)
}
