package anthropic

// The other direction: an Anthropic Messages client (the official SDKs, Claude Code) in front of
// the gateway. The request is translated into an OpenAI chat completion, which the gateway serves
// as any other, and the OpenAI answer (JSON, stream or error) back into the Messages shape.
//
// Translated: model, max_tokens, system (a string or text blocks), messages with text, image
// (base64 or URL), document (base64 PDF or plain text), tool_use and tool_result blocks,
// temperature, top_p, stop_sequences, tools (custom tools), tool_choice (auto, any, tool, none,
// disable_parallel_tool_use), stream and metadata.user_id.
//
// Not translated (dropped, as an OpenAI-compatible upstream has no equivalent, or would reject
// it): top_k, thinking (and the thinking/redacted_thinking blocks of earlier assistant turns),
// cache_control, service_tier, container, context_management and the beta fields; a tool
// result's is_error flag. Rejected with a 400: server tools (web search, bash, text editor, ...),
// mcp_servers, and content blocks of other types (search results, server tool results, ...).
//
// In the answer: the text and tool calls become text and tool_use blocks (reasoning text is
// dropped), finish_reason becomes stop_reason (stop_sequence is always null: OpenAI does not say
// which stop sequence matched), and the usage maps prompt tokens minus cached ones to
// input_tokens, cached ones to cache_read_input_tokens. A stream's message_start cannot know the
// usage yet (OpenAI streams report it last): it carries zeros, and message_delta carries the
// whole usage, input included, which the SDKs' accumulators take.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"yosan/app"
)

// inMessage is one message of a Messages request.
type inMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// inBlock is one content block of any type a request may carry; the fields of other types stay
// empty.
type inBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Source    *source         `json:"source"`
	Title     string          `json:"title"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
}

// inTool is a tool definition of a Messages request: a custom tool has no type (or "custom"),
// a server tool a versioned one such as "web_search_20250305".
type inTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// The OpenAI request this side writes. Field order is the JSON order.
type oaRequest struct {
	Model             string          `json:"model"`
	Messages          []oaOutMessage  `json:"messages"`
	MaxTokens         int64           `json:"max_tokens"`
	Temperature       json.RawMessage `json:"temperature,omitempty"`
	TopP              json.RawMessage `json:"top_p,omitempty"`
	Stop              []string        `json:"stop,omitempty"`
	Tools             []oaOutTool     `json:"tools,omitempty"`
	ToolChoice        any             `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls,omitempty"`
	User              string          `json:"user,omitempty"`
	Stream            bool            `json:"stream,omitempty"`
	StreamOptions     *streamOptions  `json:"stream_options,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// oaOutMessage is an OpenAI message; Content is a string, a []oaOutPart or nil (null).
type oaOutMessage struct {
	Role       string          `json:"role"`
	Content    any             `json:"content"`
	ToolCalls  []oaOutToolCall `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
}

type oaOutPart struct {
	Type     string     `json:"type"`
	Text     *string    `json:"text,omitempty"`
	ImageURL *oaURL     `json:"image_url,omitempty"`
	File     *oaOutFile `json:"file,omitempty"`
}

type oaURL struct {
	URL string `json:"url"`
}

type oaOutFile struct {
	Filename string `json:"filename"`
	FileData string `json:"file_data"`
}

type oaOutToolCall struct {
	ID       string        `json:"id"`
	Type     string        `json:"type"`
	Function oaOutFunction `json:"function"`
}

type oaOutFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type oaOutTool struct {
	Type     string         `json:"type"`
	Function oaToolFunction `json:"function"`
}

type oaToolFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

type oaNamedChoice struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

func textPart(s string) oaOutPart { return oaOutPart{Type: "text", Text: &s} }

func invalid(format string, args ...any) error {
	return app.Errorf(app.EINVALID, format, args...)
}

// OpenAIRequestFromMessages translates a Messages API request body (POST /v1/messages) into the
// equivalent OpenAI chat completion request body; a stream asks for the usage chunk
// (stream_options.include_usage), which the answer's message_delta needs. What is translated and
// what is not is listed at the top of this file. It returns an *app.Error with code EINVALID,
// whose message names the field, for a body that is not a valid Messages request or that asks
// for something the gateway cannot translate.
func OpenAIRequestFromMessages(body []byte) ([]byte, error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, invalid("the request body is empty; send a JSON object")
	}
	var in map[string]json.RawMessage
	if err := json.Unmarshal(body, &in); err != nil || in == nil {
		return nil, invalid("the request body is not a valid JSON object")
	}
	out := oaRequest{}
	if !present(in["model"]) {
		return nil, invalid("missing required parameter: 'model'")
	}
	if json.Unmarshal(in["model"], &out.Model) != nil || out.Model == "" {
		return nil, invalid("'model' must be a non-empty string")
	}
	if !present(in["max_tokens"]) {
		return nil, invalid("missing required parameter: 'max_tokens'")
	}
	if json.Unmarshal(in["max_tokens"], &out.MaxTokens) != nil || out.MaxTokens < 1 {
		return nil, invalid("'max_tokens' must be a positive integer")
	}
	if present(in["mcp_servers"]) {
		return nil, invalid("'mcp_servers' is not supported by this gateway")
	}
	for _, f := range [...]string{"temperature", "top_p"} {
		v := in[f]
		if !present(v) {
			continue
		}
		var x float64
		if json.Unmarshal(v, &x) != nil {
			return nil, invalid("'%s' must be a number", f)
		}
		if f == "temperature" {
			out.Temperature = bytes.TrimSpace(v)
		} else {
			out.TopP = bytes.TrimSpace(v)
		}
	}
	if v := in["stop_sequences"]; present(v) {
		if json.Unmarshal(v, &out.Stop) != nil {
			return nil, invalid("'stop_sequences' must be an array of strings")
		}
	}
	if v := in["stream"]; present(v) {
		if json.Unmarshal(v, &out.Stream) != nil {
			return nil, invalid("'stream' must be a boolean")
		}
		if out.Stream {
			out.StreamOptions = &streamOptions{IncludeUsage: true}
		}
	}
	if v := in["metadata"]; present(v) {
		var m struct {
			UserID *string `json:"user_id"`
		}
		if json.Unmarshal(v, &m) != nil {
			return nil, invalid("'metadata' must be an object whose user_id is a string")
		}
		if m.UserID != nil {
			out.User = *m.UserID
		}
	}

	if v := in["system"]; present(v) {
		content, err := systemContent(v)
		if err != nil {
			return nil, err
		}
		if content != nil {
			out.Messages = append(out.Messages, oaOutMessage{Role: "system", Content: content})
		}
	}
	if !present(in["messages"]) {
		return nil, invalid("missing required parameter: 'messages'")
	}
	var msgs []inMessage
	if err := json.Unmarshal(in["messages"], &msgs); err != nil {
		return nil, invalid("'messages' must be an array of message objects")
	}
	if len(msgs) == 0 {
		return nil, invalid("'messages' must contain at least one message")
	}
	for i, m := range msgs {
		var err error
		switch m.Role {
		case "user":
			out.Messages, err = appendUser(out.Messages, m.Content, i)
		case "assistant":
			out.Messages, err = appendAssistant(out.Messages, m.Content, i, i == len(msgs)-1)
		case "":
			err = invalid("messages[%d].role is required", i)
		default:
			err = invalid("messages[%d]: unexpected role '%s'; a message is from 'user' or 'assistant' (the system prompt is the top-level 'system')", i, m.Role)
		}
		if err != nil {
			return nil, err
		}
	}

	if v := in["tools"]; present(v) {
		var tools []inTool
		if err := json.Unmarshal(v, &tools); err != nil {
			return nil, invalid("'tools' must be an array of tool objects")
		}
		for i, t := range tools {
			if t.Type != "" && t.Type != "custom" {
				return nil, invalid("tools[%d]: server tools (type '%s') are not supported by this gateway; only custom tools (name, description, input_schema) are", i, t.Type)
			}
			if t.Name == "" {
				return nil, invalid("tools[%d].name is required", i)
			}
			if !present(t.InputSchema) {
				return nil, invalid("tools[%d].input_schema is required", i)
			}
			out.Tools = append(out.Tools, oaOutTool{Type: "function",
				Function: oaToolFunction{Name: t.Name, Description: t.Description, Parameters: t.InputSchema}})
		}
	}
	if v := in["tool_choice"]; present(v) {
		var tc toolChoice
		if json.Unmarshal(v, &tc) != nil {
			return nil, invalid("'tool_choice' must be an object such as {\"type\":\"auto\"}")
		}
		switch tc.Type {
		case "auto":
			out.ToolChoice = "auto"
		case "any":
			out.ToolChoice = "required"
		case "none":
			out.ToolChoice = "none"
		case "tool":
			if tc.Name == "" {
				return nil, invalid("tool_choice.name is required when tool_choice.type is 'tool'")
			}
			named := oaNamedChoice{Type: "function"}
			named.Function.Name = tc.Name
			out.ToolChoice = named
		default:
			return nil, invalid("tool_choice.type must be 'auto', 'any', 'tool' or 'none'")
		}
		if len(out.Tools) == 0 {
			out.ToolChoice = nil // OpenAI rejects a tool_choice without tools
		} else if tc.DisableParallelToolUse && tc.Type != "none" {
			no := false
			out.ParallelToolCalls = &no
		}
	}

	b, err := marshal(out)
	if err != nil {
		return nil, invalid("the request could not be translated: %v", err)
	}
	return b, nil
}

// systemContent is the content of the system message: the string, or the text blocks as text
// parts; nil when there is no text.
func systemContent(raw json.RawMessage) (any, error) {
	raw = bytes.TrimSpace(raw)
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, invalid("'system' must be a string or an array of text blocks")
		}
		if s == "" {
			return nil, nil
		}
		return s, nil
	}
	var blocks []inBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return nil, invalid("'system' must be a string or an array of text blocks")
	}
	var parts []oaOutPart
	for j, b := range blocks {
		if b.Type != "text" {
			return nil, invalid("system[%d]: the system prompt may only hold text blocks, not '%s'", j, b.Type)
		}
		parts = append(parts, textPart(b.Text))
	}
	if len(parts) == 0 {
		return nil, nil
	}
	return parts, nil
}

// parseBlocks decodes a message's content: a string (one text block) or an array of blocks.
// str reports the string form.
func parseBlocks(raw json.RawMessage, i int) (blocks []inBlock, str bool, err error) {
	raw = bytes.TrimSpace(raw)
	if !present(raw) {
		return nil, false, invalid("messages[%d].content is required", i)
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, false, invalid("messages[%d].content is not a valid string", i)
		}
		return []inBlock{{Type: "text", Text: s}}, true, nil
	case '[':
		if json.Unmarshal(raw, &blocks) != nil {
			return nil, false, invalid("messages[%d].content must be a string or an array of content blocks", i)
		}
		return blocks, false, nil
	}
	return nil, false, invalid("messages[%d].content must be a string or an array of content blocks", i)
}

// appendUser adds a user message: its tool results become "tool" messages, which OpenAI wants
// right after the assistant's tool calls, and the rest a user message after them. Images inside
// tool results move to that user message (an OpenAI tool message holds only text).
func appendUser(msgs []oaOutMessage, raw json.RawMessage, i int) ([]oaOutMessage, error) {
	blocks, str, err := parseBlocks(raw, i)
	if err != nil {
		return nil, err
	}
	if str {
		return append(msgs, oaOutMessage{Role: "user", Content: blocks[0].Text}), nil
	}
	var tools []oaOutMessage
	var parts []oaOutPart
	for j, b := range blocks {
		switch b.Type {
		case "tool_result":
			if b.ToolUseID == "" {
				return nil, invalid("messages[%d].content[%d].tool_use_id is required", i, j)
			}
			content, images, err := toolResultContent(b.Content, i, j)
			if err != nil {
				return nil, err
			}
			tools = append(tools, oaOutMessage{Role: "tool", Content: content, ToolCallID: b.ToolUseID})
			parts = append(parts, images...)
		case "tool_use", "thinking", "redacted_thinking":
			return nil, invalid("messages[%d].content[%d]: a user message cannot hold a '%s' block", i, j, b.Type)
		default:
			p, err := userPart(b, i, j)
			if err != nil {
				return nil, err
			}
			parts = append(parts, p)
		}
	}
	if len(tools) == 0 && len(parts) == 0 {
		return nil, invalid("messages[%d]: all messages must have non-empty content", i)
	}
	msgs = append(msgs, tools...)
	if len(parts) > 0 {
		msgs = append(msgs, oaOutMessage{Role: "user", Content: parts})
	}
	return msgs, nil
}

// userPart translates a text, image or document block.
func userPart(b inBlock, i, j int) (oaOutPart, error) {
	switch b.Type {
	case "text":
		return textPart(b.Text), nil
	case "image":
		src := b.Source
		switch {
		case src == nil:
		case src.Type == "base64" && src.MediaType != "" && src.Data != "":
			return oaOutPart{Type: "image_url", ImageURL: &oaURL{URL: "data:" + src.MediaType + ";base64," + src.Data}}, nil
		case src.Type == "url" && src.URL != "":
			return oaOutPart{Type: "image_url", ImageURL: &oaURL{URL: src.URL}}, nil
		}
		return oaOutPart{}, invalid("messages[%d].content[%d].source: an image is supported as {\"type\":\"base64\",\"media_type\",\"data\"} or {\"type\":\"url\",\"url\"}", i, j)
	case "document":
		src := b.Source
		switch {
		case src == nil:
		case src.Type == "base64" && src.MediaType == "application/pdf" && src.Data != "":
			name := b.Title
			if name == "" {
				name = "document.pdf"
			}
			return oaOutPart{Type: "file", File: &oaOutFile{Filename: name, FileData: "data:application/pdf;base64," + src.Data}}, nil
		case src.Type == "text":
			return textPart(src.Data), nil
		}
		return oaOutPart{}, invalid("messages[%d].content[%d].source: a document is supported as a base64 PDF or as plain text", i, j)
	}
	return oaOutPart{}, invalid("messages[%d].content[%d]: content blocks of type '%s' are not supported by this gateway", i, j, b.Type)
}

// toolResultContent returns a tool result's content for the OpenAI tool message (a string, or
// text parts) and the images it held.
func toolResultContent(raw json.RawMessage, i, j int) (any, []oaOutPart, error) {
	raw = bytes.TrimSpace(raw)
	if !present(raw) {
		return "", nil, nil
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, nil, invalid("messages[%d].content[%d].content is not a valid string", i, j)
		}
		return s, nil, nil
	}
	var blocks []inBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return nil, nil, invalid("messages[%d].content[%d].content must be a string or an array of content blocks", i, j)
	}
	var texts, images []oaOutPart
	for _, b := range blocks {
		p, err := userPart(b, i, j)
		if err != nil {
			return nil, nil, err
		}
		if p.Type == "text" {
			texts = append(texts, p)
		} else {
			images = append(images, p)
		}
	}
	if len(texts) == 0 {
		return "", images, nil
	}
	return texts, images, nil
}

// appendAssistant adds an assistant message: its text blocks joined as the content, its
// tool_use blocks as tool calls. Thinking blocks are dropped; a message left empty is too,
// unless it is the last one (an empty prefill).
func appendAssistant(msgs []oaOutMessage, raw json.RawMessage, i int, last bool) ([]oaOutMessage, error) {
	blocks, _, err := parseBlocks(raw, i)
	if err != nil {
		return nil, err
	}
	var text strings.Builder
	hasText := false
	m := oaOutMessage{Role: "assistant"}
	for j, b := range blocks {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
			hasText = true
		case "tool_use":
			if b.ID == "" || b.Name == "" {
				return nil, invalid("messages[%d].content[%d]: a tool_use block needs an id and a name", i, j)
			}
			args := []byte("{}")
			if present(b.Input) {
				var buf bytes.Buffer
				if json.Compact(&buf, b.Input) != nil || buf.Bytes()[0] != '{' {
					return nil, invalid("messages[%d].content[%d].input must be a JSON object", i, j)
				}
				args = buf.Bytes()
			}
			m.ToolCalls = append(m.ToolCalls, oaOutToolCall{ID: b.ID, Type: "function",
				Function: oaOutFunction{Name: b.Name, Arguments: string(args)}})
		case "thinking", "redacted_thinking":
			// The reasoning of an earlier turn: nothing an OpenAI upstream reads.
		default:
			return nil, invalid("messages[%d].content[%d]: content blocks of type '%s' are not supported by this gateway in an assistant message", i, j, b.Type)
		}
	}
	if hasText {
		m.Content = text.String()
	}
	if !hasText && len(m.ToolCalls) == 0 {
		if !last {
			return msgs, nil
		}
		m.Content = ""
	}
	return append(msgs, m), nil
}

// The OpenAI answer this side reads.
type oaCompletion struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content   json.RawMessage `json:"content"`
			Refusal   *string         `json:"refusal"`
			ToolCalls []oaToolCall    `json:"tool_calls"`
		} `json:"message"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *oaUsage `json:"usage"`
}

type oaUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// appendUsage appends the Anthropic usage object for u (nil: zeros): input_tokens excludes the
// cached tokens, which Anthropic reports apart.
func appendUsage(b []byte, u *oaUsage) []byte {
	var in, cached, out int64
	if u != nil {
		in, out = u.PromptTokens, u.CompletionTokens
		if u.PromptTokensDetails != nil {
			cached = min(max(u.PromptTokensDetails.CachedTokens, 0), in)
		}
	}
	b = append(b, `{"input_tokens":`...)
	b = strconv.AppendInt(b, in-cached, 10)
	b = append(b, `,"cache_creation_input_tokens":0,"cache_read_input_tokens":`...)
	b = strconv.AppendInt(b, cached, 10)
	b = append(b, `,"output_tokens":`...)
	b = strconv.AppendInt(b, out, 10)
	return append(b, '}')
}

// stopReason maps OpenAI's finish_reason to Anthropic's stop_reason. Some upstreams finish a
// tool call with "stop": an answer with tool calls stopped for them.
func stopReason(finish string, toolCalls bool) string {
	switch {
	case finish == "length":
		return "max_tokens"
	case finish == "content_filter":
		return "refusal"
	case finish == "tool_calls", finish == "function_call", toolCalls:
		return "tool_use"
	}
	return "end_turn"
}

// messageID is the answer's id: Anthropic's ids start with "msg_".
func messageID(id string) string {
	if strings.HasPrefix(id, "msg_") {
		return id
	}
	return "msg_" + id
}

// MessageFromChatCompletion translates an OpenAI chat.completion body into the Messages API
// answer: {"id":"msg_...","type":"message","role":"assistant","model",content (text and
// tool_use blocks),"stop_reason","stop_sequence":null,"usage"}. A tool call whose arguments are
// not a JSON object gets the input {}. Its errors wrap ErrBadResponse: the body is not a chat
// completion with a choice.
func MessageFromChatCompletion(body []byte) ([]byte, error) {
	var c oaCompletion
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadResponse, err)
	}
	if len(c.Choices) == 0 {
		return nil, fmt.Errorf("%w: the chat completion has no choice", ErrBadResponse)
	}
	ch := c.Choices[0]
	out := make([]byte, 0, 256+len(body))
	out = append(out, `{"id":`...)
	out = appendText(out, messageID(c.ID))
	out = append(out, `,"type":"message","role":"assistant","model":`...)
	out = appendText(out, c.Model)
	out = append(out, `,"content":[`...)
	n := 0
	text := contentText(ch.Message.Content)
	if text == "" && ch.Message.Refusal != nil {
		text = *ch.Message.Refusal
	}
	if text != "" {
		out = append(out, `{"type":"text","text":`...)
		out = appendText(out, text)
		out = append(out, '}')
		n++
	}
	for _, tc := range ch.Message.ToolCalls {
		if n > 0 {
			out = append(out, ',')
		}
		n++
		out = append(out, `{"type":"tool_use","id":`...)
		out = appendText(out, tc.ID)
		out = append(out, `,"name":`...)
		out = appendText(out, tc.Function.Name)
		out = append(out, `,"input":`...)
		out = append(out, argumentsObject(tc.Function.Arguments)...)
		out = append(out, '}')
	}
	out = append(out, `],"stop_reason":`...)
	if ch.FinishReason != nil {
		out = appendText(out, stopReason(*ch.FinishReason, len(ch.Message.ToolCalls) > 0))
	} else {
		out = append(out, "null"...)
	}
	out = append(out, `,"stop_sequence":null,"usage":`...)
	out = appendUsage(out, c.Usage)
	return append(out, '}'), nil
}

// contentText returns a message's content: the string, or the text of its parts.
func contentText(raw json.RawMessage) string {
	parts, err := parseContent(raw, 0)
	if err != nil {
		return ""
	}
	var sb strings.Builder
	for _, p := range parts {
		if p.Type == "text" || p.Type == "output_text" {
			sb.WriteString(p.Text)
		}
	}
	return sb.String()
}

// argumentsObject returns a tool call's arguments as the tool_use input: the JSON object,
// compacted, or {} for anything else.
func argumentsObject(args string) []byte {
	in, err := toolInput(args)
	if err != nil {
		return []byte("{}")
	}
	return in
}

// APIError is an error answer as an Anthropic client reads it.
type APIError struct {
	// Status is the HTTP status.
	Status int
	// Type is Anthropic's error type: invalid_request_error, authentication_error,
	// permission_error, not_found_error, request_too_large, rate_limit_error, api_error,
	// timeout_error, overloaded_error, ...
	Type    string
	Message string
	// Final is true when retrying cannot help although the status says otherwise (a budget
	// exhausted answers 429 like a rate limit): the gateway then sends x-should-retry: false,
	// which the official SDKs obey.
	Final bool
}

// errorTypeFor maps an HTTP status to Anthropic's error type.
func errorTypeFor(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusPaymentRequired:
		return "billing_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusGatewayTimeout:
		return "timeout_error"
	case http.StatusServiceUnavailable, 529:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

// errorEnvelope is every error body an answer may carry: OpenAI's (and the gateway's)
// {"error":{"message","type",...}}, Anthropic's {"type":"error","error":{"type","message"}}, and
// the {"error":"message"} of some OpenAI-compatible servers.
type errorEnvelope struct {
	Type  string          `json:"type"`
	Error json.RawMessage `json:"error"`
}

// parseError returns the message and the type of an error body ("" when absent).
func parseError(body []byte) (typ, msg string, anthropicShaped bool) {
	var env errorEnvelope
	if json.Unmarshal(body, &env) != nil || !present(env.Error) {
		return "", "", false
	}
	var s string
	if json.Unmarshal(env.Error, &s) == nil {
		return "", s, false
	}
	var e struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	_ = json.Unmarshal(env.Error, &e)
	return e.Type, e.Message, env.Type == "error"
}

// ErrorFromOpenAI reads an error answer of the gateway with its HTTP status: an OpenAI-shaped
// body (the gateway's own errors, or an upstream's client error passed back), or an upstream's
// Anthropic-shaped one, whose type is kept. The type otherwise follows the status (a budget
// exhausted, 429, is a rate_limit_error, marked Final); the message is the body's, or the
// status text.
func ErrorFromOpenAI(status int, body []byte) APIError {
	typ, msg, anthropicShaped := parseError(body)
	e := APIError{Status: status, Type: errorTypeFor(status), Message: msg, Final: typ == "budget_exceeded"}
	if anthropicShaped && typ != "" {
		e.Type = typ
	}
	if e.Message == "" {
		e.Message = strconv.Itoa(status) + " " + http.StatusText(status)
	}
	return e
}

// AppendJSON appends the error body: {"type":"error","error":{"type","message"}}, and the
// request id when there is one.
func (e APIError) AppendJSON(b []byte, requestID string) []byte {
	b = append(b, `{"type":"error","error":{"type":`...)
	b = appendText(b, e.Type)
	b = append(b, `,"message":`...)
	b = appendText(b, e.Message)
	b = append(b, '}')
	if requestID != "" {
		b = append(b, `,"request_id":`...)
		b = appendText(b, requestID)
	}
	return append(b, '}')
}

// streamErrorType maps the type of an error event of an OpenAI stream to Anthropic's.
func streamErrorType(typ string) string {
	switch typ {
	case "invalid_request_error", "authentication_error", "permission_error", "rate_limit_error":
		return typ
	case "budget_exceeded":
		return "rate_limit_error"
	case "service_unavailable":
		return "overloaded_error"
	}
	return "api_error"
}

// StreamConverter translates an OpenAI chat completion stream, as the gateway writes it ("data:"
// chunk events ending with "data: [DONE]", or with an error event), into the events of a Messages
// stream: message_start, per block content_block_start, content_block_delta (text_delta,
// input_json_delta for tool calls) and content_block_stop, then message_delta (stop_reason and
// the usage) and message_stop; an error event becomes "event: error". It takes the stream in
// pieces of any size. The zero value is ready to use; it is not safe for concurrent use.
type StreamConverter struct {
	line    []byte // an incomplete line
	data    []byte // the data of the event being read
	hasData bool

	started, done bool
	open          int         // index of the open content block, -1 for none
	openTool      bool        // the open block is a tool_use block
	blocks        int         // content blocks started
	tools         map[int]int // OpenAI tool call index -> content block index
	finish        string      // OpenAI's finish_reason, "" until it came
	usage         *oaUsage
}

// oaChunk is the part of a chat.completion.chunk (or of an error event) the converter reads.
type oaChunk struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Delta struct {
			Content   *string `json:"content"`
			ToolCalls []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *oaUsage        `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// Convert appends to dst the events for p, the next bytes of the OpenAI stream.
func (c *StreamConverter) Convert(dst, p []byte) []byte {
	for len(p) > 0 {
		k := bytes.IndexByte(p, '\n')
		if k < 0 {
			c.line = append(c.line, p...)
			return dst
		}
		line := p[:k]
		if len(c.line) > 0 {
			line = append(c.line, line...)
			c.line = c.line[:0]
		}
		p = p[k+1:]
		dst = c.handleLine(dst, bytes.TrimSuffix(line, []byte("\r")))
	}
	return dst
}

// Finish appends to dst what the stream still owes when its writer is done: nothing after
// [DONE] or an error event, else an error event (the stream was cut short).
func (c *StreamConverter) Finish(dst []byte) []byte {
	if c.hasData {
		dst = c.dispatch(dst)
	}
	if c.done {
		return dst
	}
	c.done = true
	return appendEvent(dst, "error", APIError{Type: "api_error", Message: "the stream ended before it finished"}.AppendJSON(nil, ""))
}

func (c *StreamConverter) handleLine(dst, line []byte) []byte {
	if len(line) == 0 {
		if c.hasData {
			dst = c.dispatch(dst)
		}
		return dst
	}
	v, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok {
		return dst // event:, id:, retry: or a comment
	}
	v = bytes.TrimPrefix(v, []byte(" "))
	if c.hasData {
		c.data = append(c.data, '\n')
	}
	c.data = append(c.data, v...)
	c.hasData = true
	return dst
}

// dispatch handles the event read.
func (c *StreamConverter) dispatch(dst []byte) []byte {
	data := c.data
	c.data, c.hasData = c.data[:0], false
	if c.done {
		return dst
	}
	if string(data) == "[DONE]" {
		return c.end(dst)
	}
	var ch oaChunk
	if err := json.Unmarshal(data, &ch); err != nil {
		c.done = true
		return appendEvent(dst, "error", APIError{Type: "api_error", Message: "the upstream stream sent an invalid event"}.AppendJSON(nil, ""))
	}
	if present(ch.Error) {
		c.done = true
		typ, msg, _ := parseError(data)
		if msg == "" {
			msg = "the upstream stream failed"
		}
		return appendEvent(dst, "error", APIError{Type: streamErrorType(typ), Message: msg}.AppendJSON(nil, ""))
	}
	dst = c.start(dst, ch.ID, ch.Model)
	if ch.Usage != nil {
		c.usage = ch.Usage
	}
	if len(ch.Choices) == 0 {
		return dst
	}
	choice := &ch.Choices[0]
	if d := choice.Delta.Content; d != nil && *d != "" {
		if c.open < 0 || c.openTool {
			dst = c.startBlock(dst, `{"type":"text","text":""}`)
		}
		b := c.eventHead("content_block_delta", c.open)
		b = append(b, `,"delta":{"type":"text_delta","text":`...)
		b = appendText(b, *d)
		dst = appendEvent(dst, "content_block_delta", append(b, `}}`...))
	}
	for _, tc := range choice.Delta.ToolCalls {
		idx, ok := c.tools[tc.Index]
		if !ok {
			id := tc.ID
			if id == "" {
				id = "toolu_" + strconv.Itoa(tc.Index)
			}
			blk := []byte(`{"type":"tool_use","id":`)
			blk = appendText(blk, id)
			blk = append(blk, `,"name":`...)
			blk = appendText(blk, tc.Function.Name)
			blk = append(blk, `,"input":{}}`...)
			dst = c.startBlock(dst, string(blk))
			c.openTool = true
			if c.tools == nil {
				c.tools = map[int]int{}
			}
			idx = c.open
			c.tools[tc.Index] = idx
		}
		if tc.Function.Arguments != "" {
			b := c.eventHead("content_block_delta", idx)
			b = append(b, `,"delta":{"type":"input_json_delta","partial_json":`...)
			b = appendText(b, tc.Function.Arguments)
			dst = appendEvent(dst, "content_block_delta", append(b, `}}`...))
		}
	}
	if choice.FinishReason != nil && *choice.FinishReason != "" {
		c.finish = *choice.FinishReason
		dst = c.stopBlock(dst)
	}
	return dst
}

// start appends message_start once, with the first chunk's id and model.
func (c *StreamConverter) start(dst []byte, id, model string) []byte {
	if c.started {
		return dst
	}
	c.started, c.open = true, -1
	b := []byte(`{"type":"message_start","message":{"id":`)
	b = appendText(b, messageID(id))
	b = append(b, `,"type":"message","role":"assistant","model":`...)
	b = appendText(b, model)
	b = append(b, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":`...)
	b = appendUsage(b, nil)
	return appendEvent(dst, "message_start", append(b, `}}`...))
}

// startBlock stops the open block and starts the next, whose content_block JSON is blk.
func (c *StreamConverter) startBlock(dst []byte, blk string) []byte {
	dst = c.stopBlock(dst)
	c.open = c.blocks
	c.blocks++
	b := c.eventHead("content_block_start", c.open)
	b = append(b, `,"content_block":`...)
	b = append(b, blk...)
	return appendEvent(dst, "content_block_start", append(b, '}'))
}

func (c *StreamConverter) stopBlock(dst []byte) []byte {
	if c.open < 0 {
		return dst
	}
	b := c.eventHead("content_block_stop", c.open)
	c.open, c.openTool = -1, false
	return appendEvent(dst, "content_block_stop", append(b, '}'))
}

// end appends the close of the message at [DONE]: message_delta with the stop reason and the
// usage, and message_stop.
func (c *StreamConverter) end(dst []byte) []byte {
	dst = c.start(dst, "", "")
	dst = c.stopBlock(dst)
	c.done = true
	b := []byte(`{"type":"message_delta","delta":{"stop_reason":`)
	b = appendText(b, stopReason(c.finish, len(c.tools) > 0))
	b = append(b, `,"stop_sequence":null},"usage":`...)
	b = appendUsage(b, c.usage)
	dst = appendEvent(dst, "message_delta", append(b, '}'))
	return appendEvent(dst, "message_stop", []byte(`{"type":"message_stop"}`))
}

func (c *StreamConverter) eventHead(typ string, index int) []byte {
	b := make([]byte, 0, 128)
	b = append(b, `{"type":"`...)
	b = append(b, typ...)
	b = append(b, `","index":`...)
	return strconv.AppendInt(b, int64(index), 10)
}

// appendText appends s as a JSON string, leaving <, > and & as they are, as Anthropic does.
func appendText(b []byte, s string) []byte {
	q, _ := marshal(s) // a string always marshals
	return append(b, q...)
}

// appendEvent appends one SSE event: its name, then its JSON data.
func appendEvent(dst []byte, name string, data []byte) []byte {
	dst = append(dst, "event: "...)
	dst = append(dst, name...)
	dst = append(dst, "\ndata: "...)
	dst = append(dst, data...)
	return append(dst, "\n\n"...)
}
