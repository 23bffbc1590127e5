package app

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// Endpoint kinds the pipeline serves.
const (
	KindChat      = "chat"
	KindEmbedding = "embedding"
)

// ProxyRequest is a parsed OpenAI-shaped request body: the raw fields (so everything the
// caller sent passes through) plus what the gateway needs to account for it.
type ProxyRequest struct {
	Kind  string
	Body  map[string]json.RawMessage
	Model string
	// Stream is true for a streamed chat completion.
	Stream bool
	// IncludeUsage is whether the caller itself asked for the usage chunk.
	IncludeUsage bool
	// MaxTokens is max_completion_tokens or max_tokens, 0 when absent.
	MaxTokens int64
	// Choices is n (0 when absent): each choice may generate up to MaxTokens, so the worst
	// case multiplies.
	Choices int64
	// Text is every piece of input the model reads, for the token estimate.
	Text string
	// ExtraInputTokens are input tokens estimated without text (images, per-message overhead).
	ExtraInputTokens int64
}

// maxOutputTokens bounds max_tokens: no model generates more, and the bound keeps the worst
// case far from overflowing.
const maxOutputTokens = 10_000_000

// imageTokenEstimate is charged per image part: a high-detail 2048x2048 image costs about 1105
// tokens on gpt-4o; the estimate errs high.
const imageTokenEstimate = 1500

// ParseChatRequest parses a /v1/chat/completions body. It returns EINVALID with a message
// naming the field for malformed JSON, a missing model or messages, or bad max_tokens.
func ParseChatRequest(body []byte) (*ProxyRequest, error) {
	r, err := parseCommon(body, KindChat)
	if err != nil {
		return nil, err
	}
	raw, ok := r.Body["messages"]
	if !ok || isNull(raw) {
		return nil, &Error{Code: EINVALID, Param: "messages", Message: "missing required parameter: 'messages'"}
	}
	var msgs []struct {
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		Name      string          `json:"name"`
		ToolCalls json.RawMessage `json:"tool_calls"`
	}
	if err := json.Unmarshal(raw, &msgs); err != nil {
		return nil, &Error{Code: EINVALID, Param: "messages", Message: "'messages' must be an array of message objects", Err: err}
	}
	if len(msgs) == 0 {
		return nil, &Error{Code: EINVALID, Param: "messages", Message: "'messages' must contain at least one message"}
	}
	var sb strings.Builder
	for i, m := range msgs {
		if m.Role == "" {
			return nil, &Error{Code: EINVALID, Param: "messages", Message: "messages[" + strconv.Itoa(i) + "].role is required"}
		}
		r.ExtraInputTokens += 4 // per-message framing, as OpenAI counts it (errs high)
		sb.WriteString(m.Name)
		if len(m.ToolCalls) > 0 && !isNull(m.ToolCalls) {
			sb.Write(m.ToolCalls)
		}
		if len(m.Content) == 0 || isNull(m.Content) {
			continue
		}
		switch m.Content[0] {
		case '"':
			var s string
			if err := json.Unmarshal(m.Content, &s); err != nil {
				return nil, &Error{Code: EINVALID, Param: "messages", Message: "messages[" + strconv.Itoa(i) + "].content is not a valid string", Err: err}
			}
			sb.WriteString(s)
			sb.WriteByte('\n')
		case '[':
			var parts []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			if err := json.Unmarshal(m.Content, &parts); err != nil {
				return nil, &Error{Code: EINVALID, Param: "messages", Message: "messages[" + strconv.Itoa(i) + "].content must be a string or an array of content parts", Err: err}
			}
			for _, p := range parts {
				switch p.Type {
				case "text", "input_text", "refusal":
					sb.WriteString(p.Text)
					sb.WriteByte('\n')
				case "image_url", "input_image", "image":
					r.ExtraInputTokens += imageTokenEstimate
				default:
					// audio, files: priced by the upstream's usage; reserve generously
					r.ExtraInputTokens += imageTokenEstimate
				}
			}
		default:
			return nil, &Error{Code: EINVALID, Param: "messages", Message: "messages[" + strconv.Itoa(i) + "].content must be a string or an array of content parts"}
		}
	}
	// Tool definitions and schemas are read by the model too.
	for _, f := range []string{"tools", "functions", "response_format"} {
		if v, ok := r.Body[f]; ok && !isNull(v) {
			sb.Write(v)
		}
	}
	r.ExtraInputTokens += 3
	r.Text = sb.String()

	if v, ok := r.Body["stream"]; ok && !isNull(v) {
		if err := json.Unmarshal(v, &r.Stream); err != nil {
			return nil, &Error{Code: EINVALID, Param: "stream", Message: "'stream' must be a boolean", Err: err}
		}
	}
	if v, ok := r.Body["stream_options"]; ok && !isNull(v) {
		var so struct {
			IncludeUsage *bool `json:"include_usage"`
		}
		if err := json.Unmarshal(v, &so); err != nil {
			return nil, &Error{Code: EINVALID, Param: "stream_options", Message: "'stream_options' must be an object", Err: err}
		}
		r.IncludeUsage = so.IncludeUsage != nil && *so.IncludeUsage
	}
	for _, f := range []string{"max_completion_tokens", "max_tokens"} {
		v, ok := r.Body[f]
		if !ok || isNull(v) {
			continue
		}
		var n int64
		if err := json.Unmarshal(v, &n); err != nil || n < 1 || n > maxOutputTokens {
			return nil, &Error{Code: EINVALID, Param: f, Message: "'" + f + "' must be an integer from 1 to " + strconv.Itoa(maxOutputTokens)}
		}
		if r.MaxTokens == 0 {
			r.MaxTokens = n
		}
	}
	if v, ok := r.Body["n"]; ok && !isNull(v) {
		var n int64
		if err := json.Unmarshal(v, &n); err != nil || n < 1 || n > 128 {
			return nil, &Error{Code: EINVALID, Param: "n", Message: "'n' must be an integer from 1 to 128"}
		}
		r.Choices = n
	}
	return r, nil
}

// ParseEmbeddingRequest parses a /v1/embeddings body. It returns EINVALID for malformed JSON
// or a missing or malformed input.
func ParseEmbeddingRequest(body []byte) (*ProxyRequest, error) {
	r, err := parseCommon(body, KindEmbedding)
	if err != nil {
		return nil, err
	}
	raw, ok := r.Body["input"]
	if !ok || isNull(raw) {
		return nil, &Error{Code: EINVALID, Param: "input", Message: "missing required parameter: 'input'"}
	}
	var s string
	var ss []string
	var toks [][]int64
	var tok []int64
	switch {
	case json.Unmarshal(raw, &s) == nil:
		if s == "" {
			return nil, &Error{Code: EINVALID, Param: "input", Message: "'input' must not be empty"}
		}
		r.Text = s
	case json.Unmarshal(raw, &ss) == nil:
		if len(ss) == 0 {
			return nil, &Error{Code: EINVALID, Param: "input", Message: "'input' must not be an empty array"}
		}
		r.Text = strings.Join(ss, "\n")
	case json.Unmarshal(raw, &tok) == nil:
		r.ExtraInputTokens = int64(len(tok))
	case json.Unmarshal(raw, &toks) == nil:
		for _, t := range toks {
			r.ExtraInputTokens += int64(len(t))
		}
	default:
		return nil, &Error{Code: EINVALID, Param: "input", Message: "'input' must be a string, an array of strings, or an array of token arrays"}
	}
	return r, nil
}

func parseCommon(body []byte, kind string) (*ProxyRequest, error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, Errorf(EINVALID, "the request body is empty; send a JSON object")
	}
	r := &ProxyRequest{Kind: kind}
	if err := json.Unmarshal(body, &r.Body); err != nil || r.Body == nil {
		return nil, &Error{Code: EINVALID, Message: "the request body is not a valid JSON object", Err: err}
	}
	raw, ok := r.Body["model"]
	if !ok || isNull(raw) {
		return nil, &Error{Code: EINVALID, Param: "model", Message: "missing required parameter: 'model'"}
	}
	if err := json.Unmarshal(raw, &r.Model); err != nil || r.Model == "" {
		return nil, &Error{Code: EINVALID, Param: "model", Message: "'model' must be a non-empty string"}
	}
	return r, nil
}

func isNull(raw json.RawMessage) bool { return string(raw) == "null" }
