package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"yosan/app"
)

// The Messages request, as this client writes it. Field order is the JSON order.
type messagesRequest struct {
	Model         string          `json:"model"`
	MaxTokens     int64           `json:"max_tokens"`
	System        json.RawMessage `json:"system,omitempty"`
	Messages      []message       `json:"messages"`
	Temperature   *float64        `json:"temperature,omitempty"`
	TopP          json.RawMessage `json:"top_p,omitempty"`
	StopSequences []string        `json:"stop_sequences,omitempty"`
	Tools         []tool          `json:"tools,omitempty"`
	ToolChoice    *toolChoice     `json:"tool_choice,omitempty"`
	Metadata      *metadata       `json:"metadata,omitempty"`
	Stream        bool            `json:"stream,omitempty"`
}

type message struct {
	Role    string  `json:"role"`
	Content []block `json:"content"`
}

// block is one content block of any type; the fields of other types stay empty.
type block struct {
	Type         string          `json:"type"`
	Text         string          `json:"text,omitempty"`
	Source       *source         `json:"source,omitempty"`
	ID           string          `json:"id,omitempty"`
	Name         string          `json:"name,omitempty"`
	Input        json.RawMessage `json:"input,omitempty"`
	ToolUseID    string          `json:"tool_use_id,omitempty"`
	Content      json.RawMessage `json:"content,omitempty"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

type source struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

type tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type toolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitempty"`
}

type metadata struct {
	UserID string `json:"user_id"`
}

// The OpenAI request side.
type oaMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []oaToolCall    `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

type oaToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type oaPart struct {
	Type         string          `json:"type"`
	Text         string          `json:"text"`
	Refusal      string          `json:"refusal"`
	ImageURL     json.RawMessage `json:"image_url"` // {"url": ...} or, from some clients, a string
	File         *oaFile         `json:"file"`
	CacheControl json.RawMessage `json:"cache_control"`
}

type oaFile struct {
	FileData string `json:"file_data"`
	FileID   string `json:"file_id"`
}

type oaTool struct {
	Type     string `json:"type"`
	Function *struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// emptySchema is the input_schema of a function declared without parameters: Anthropic requires
// one.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// requestError is a request the Messages API cannot express; the client answers it with a
// synthesized 400.
type requestError struct {
	param, message string
}

func reqErr(param, format string, args ...any) *requestError {
	return &requestError{param: param, message: fmt.Sprintf(format, args...)}
}

// translateRequest writes the Messages request for an OpenAI chat completion body.
func translateRequest(req *app.ProviderRequest, stream bool) ([]byte, *requestError) {
	body := req.Body
	out := messagesRequest{Model: req.Model, Stream: stream, Messages: []message{}}
	if out.Model == "" {
		_ = json.Unmarshal(body["model"], &out.Model)
	}
	for _, f := range [...]string{"functions", "function_call"} {
		if present(body[f]) {
			return nil, reqErr(f, "'%s' (the legacy functions API) is not supported by this provider; use 'tools'", f)
		}
	}
	if v := body["n"]; present(v) {
		var n int64
		if json.Unmarshal(v, &n) != nil || n > 1 {
			return nil, reqErr("n", "'n' greater than 1 is not supported by this provider")
		}
	}
	for _, f := range [...]string{"max_completion_tokens", "max_tokens"} {
		if v := body[f]; present(v) {
			if json.Unmarshal(v, &out.MaxTokens) != nil || out.MaxTokens < 1 {
				return nil, reqErr(f, "'%s' must be a positive integer", f)
			}
			break
		}
	}
	if out.MaxTokens == 0 {
		out.MaxTokens = req.MaxTokens // what the gateway reserved for
	}
	if out.MaxTokens == 0 {
		out.MaxTokens = DefaultMaxTokens
	}
	if v := body["temperature"]; present(v) {
		var t float64
		if json.Unmarshal(v, &t) != nil {
			return nil, reqErr("temperature", "'temperature' must be a number")
		}
		t = min(max(t, 0), 1) // OpenAI allows 0..2, Anthropic 0..1
		out.Temperature = &t
	}
	if v := body["top_p"]; present(v) {
		out.TopP = v
	}
	if v := body["stop"]; present(v) {
		var one string
		var many []string
		switch {
		case json.Unmarshal(v, &one) == nil:
			many = []string{one}
		case json.Unmarshal(v, &many) == nil:
		default:
			return nil, reqErr("stop", "'stop' must be a string or an array of strings")
		}
		for _, s := range many {
			if s != "" {
				out.StopSequences = append(out.StopSequences, s)
			}
		}
	}
	if v := body["user"]; present(v) {
		var u string
		if json.Unmarshal(v, &u) == nil && u != "" {
			out.Metadata = &metadata{UserID: u}
		}
	}

	var msgs []oaMessage
	if err := json.Unmarshal(body["messages"], &msgs); err != nil {
		return nil, reqErr("messages", "'messages' must be an array of message objects")
	}
	var system []block
	for i, m := range msgs {
		switch m.Role {
		case "system", "developer":
			parts, err := parseContent(m.Content, i)
			if err != nil {
				return nil, err
			}
			for _, p := range parts {
				if p.Type != "text" {
					return nil, reqErr("messages", "messages[%d]: a %s message may only hold text", i, m.Role)
				}
				if p.Text != "" {
					system = append(system, block{Type: "text", Text: p.Text, CacheControl: p.CacheControl})
				}
			}
		case "user", "assistant":
			blocks, err := contentBlocks(m.Content, i)
			if err != nil {
				return nil, err
			}
			if m.Role == "assistant" {
				for j, tc := range m.ToolCalls {
					input, err := toolInput(tc.Function.Arguments)
					if err != nil {
						return nil, reqErr("messages", "messages[%d].tool_calls[%d].function.arguments must be a JSON object", i, j)
					}
					blocks = append(blocks, block{Type: "tool_use", ID: tc.ID, Name: tc.Function.Name, Input: input})
				}
			}
			out.Messages = appendMessage(out.Messages, m.Role, blocks)
		case "tool":
			b := block{Type: "tool_result", ToolUseID: m.ToolCallID}
			if len(m.Content) > 0 && m.Content[0] == '"' {
				var s string
				_ = json.Unmarshal(m.Content, &s)
				if s != "" {
					b.Content = m.Content
				}
			} else {
				blocks, err := contentBlocks(m.Content, i)
				if err != nil {
					return nil, err
				}
				if len(blocks) > 0 {
					b.Content, _ = marshal(blocks)
				}
			}
			out.Messages = appendMessage(out.Messages, "user", []block{b})
		case "":
			return nil, reqErr("messages", "messages[%d].role is required", i)
		default:
			return nil, reqErr("messages", "messages[%d]: role '%s' is not supported by this provider", i, m.Role)
		}
	}
	if len(system) > 0 {
		out.System = systemJSON(system)
	}
	for i := range out.Messages {
		if out.Messages[i].Role == "user" {
			toolResultsFirst(out.Messages[i].Content)
		}
	}

	if v := body["tools"]; present(v) {
		var tools []oaTool
		if err := json.Unmarshal(v, &tools); err != nil {
			return nil, reqErr("tools", "'tools' must be an array of tool objects")
		}
		for i, t := range tools {
			if t.Type != "function" || t.Function == nil {
				return nil, reqErr("tools", "tools[%d]: only tools of type 'function' are supported by this provider", i)
			}
			schema := t.Function.Parameters
			if !present(schema) {
				schema = emptySchema
			}
			out.Tools = append(out.Tools, tool{Name: t.Function.Name, Description: t.Function.Description, InputSchema: schema})
		}
	}
	if len(out.Tools) > 0 {
		tc, err := translateToolChoice(body["tool_choice"])
		if err != nil {
			return nil, err
		}
		if v := body["parallel_tool_calls"]; present(v) && string(bytes.TrimSpace(v)) == "false" && (tc == nil || tc.Type != "none") {
			if tc == nil {
				tc = &toolChoice{Type: "auto"}
			}
			tc.DisableParallelToolUse = true
		}
		out.ToolChoice = tc
	}

	b, err := marshal(out)
	if err != nil {
		return nil, reqErr("", "the request could not be encoded: %v", err)
	}
	return b, nil
}

func translateToolChoice(raw json.RawMessage) (*toolChoice, *requestError) {
	if !present(raw) {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "auto":
			return &toolChoice{Type: "auto"}, nil
		case "none":
			return &toolChoice{Type: "none"}, nil
		case "required":
			return &toolChoice{Type: "any"}, nil
		}
		return nil, reqErr("tool_choice", "tool_choice '%s' is not supported by this provider", s)
	}
	var o struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(raw, &o) != nil || o.Type != "function" || o.Function.Name == "" {
		return nil, reqErr("tool_choice", "tool_choice must be 'auto', 'none', 'required' or {\"type\":\"function\",\"function\":{\"name\":...}} for this provider")
	}
	return &toolChoice{Type: "tool", Name: o.Function.Name}, nil
}

// parseContent decodes a message's content: absent or null (no parts), a string (one text
// part) or an array of parts.
func parseContent(raw json.RawMessage, i int) ([]oaPart, *requestError) {
	raw = bytes.TrimSpace(raw)
	if !present(raw) {
		return nil, nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, reqErr("messages", "messages[%d].content is not a valid string", i)
		}
		return []oaPart{{Type: "text", Text: s}}, nil
	case '[':
		var parts []oaPart
		if err := json.Unmarshal(raw, &parts); err != nil {
			return nil, reqErr("messages", "messages[%d].content must be a string or an array of content parts", i)
		}
		return parts, nil
	}
	return nil, reqErr("messages", "messages[%d].content must be a string or an array of content parts", i)
}

// contentBlocks translates a user, assistant or tool message's content to blocks.
func contentBlocks(raw json.RawMessage, i int) ([]block, *requestError) {
	parts, err := parseContent(raw, i)
	if err != nil {
		return nil, err
	}
	blocks := make([]block, 0, len(parts)+1)
	for j, p := range parts {
		switch p.Type {
		case "text", "input_text", "output_text":
			if p.Text != "" { // Anthropic rejects empty text blocks
				blocks = append(blocks, block{Type: "text", Text: p.Text, CacheControl: p.CacheControl})
			}
		case "refusal":
			if p.Refusal != "" {
				blocks = append(blocks, block{Type: "text", Text: p.Refusal})
			}
		case "image_url":
			src, err := imageSource(p.ImageURL, i, j)
			if err != nil {
				return nil, err
			}
			blocks = append(blocks, block{Type: "image", Source: src, CacheControl: p.CacheControl})
		case "file":
			src, err := documentSource(p.File, i, j)
			if err != nil {
				return nil, err
			}
			blocks = append(blocks, block{Type: "document", Source: src, CacheControl: p.CacheControl})
		default:
			return nil, reqErr("messages", "messages[%d].content[%d]: content parts of type '%s' are not supported by this provider", i, j, p.Type)
		}
	}
	return blocks, nil
}

func imageSource(raw json.RawMessage, i, j int) (*source, *requestError) {
	var url string
	if len(raw) > 0 && raw[0] == '"' {
		_ = json.Unmarshal(raw, &url)
	} else {
		var o struct {
			URL string `json:"url"`
		}
		_ = json.Unmarshal(raw, &o)
		url = o.URL
	}
	switch {
	case strings.HasPrefix(url, "data:"):
		media, data, ok := parseDataURL(url)
		if !ok {
			return nil, reqErr("messages", "messages[%d].content[%d].image_url: only base64 data: URLs are supported", i, j)
		}
		return &source{Type: "base64", MediaType: media, Data: data}, nil
	case strings.HasPrefix(url, "https://"), strings.HasPrefix(url, "http://"):
		return &source{Type: "url", URL: url}, nil
	}
	return nil, reqErr("messages", "messages[%d].content[%d].image_url.url must be an http(s) or a base64 data: URL", i, j)
}

func documentSource(f *oaFile, i, j int) (*source, *requestError) {
	if f == nil || f.FileData == "" {
		return nil, reqErr("messages", "messages[%d].content[%d]: files are supported only as file_data (OpenAI file ids mean nothing to this provider)", i, j)
	}
	media, data, ok := parseDataURL(f.FileData)
	if !ok || media != "application/pdf" {
		return nil, reqErr("messages", "messages[%d].content[%d].file.file_data: only PDF files as base64 data: URLs are supported by this provider", i, j)
	}
	return &source{Type: "base64", MediaType: media, Data: data}, nil
}

// parseDataURL splits "data:<media type>;base64,<data>".
func parseDataURL(url string) (media, data string, ok bool) {
	meta, data, found := strings.Cut(strings.TrimPrefix(url, "data:"), ",")
	if !found {
		return "", "", false
	}
	media, ok = strings.CutSuffix(meta, ";base64")
	if !ok || media == "" || data == "" {
		return "", "", false
	}
	if k := strings.IndexByte(media, ';'); k >= 0 { // parameters such as charset
		media = media[:k]
	}
	return media, data, true
}

// toolInput returns the tool_use input for an OpenAI arguments string: a JSON object ("" is {}).
func toolInput(args string) (json.RawMessage, error) {
	args = strings.TrimSpace(args)
	if args == "" {
		return json.RawMessage("{}"), nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(args), &obj); err != nil || obj == nil {
		return nil, errNotObject
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(args)); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

var errNotObject = errors.New("not a JSON object")

// appendMessage adds blocks as a message of role, merged into the previous message when it has
// the same role (the Messages API wants the roles to alternate). An empty message is dropped.
func appendMessage(msgs []message, role string, blocks []block) []message {
	if len(blocks) == 0 {
		return msgs
	}
	if n := len(msgs); n > 0 && msgs[n-1].Role == role {
		msgs[n-1].Content = append(msgs[n-1].Content, blocks...)
		return msgs
	}
	return append(msgs, message{Role: role, Content: blocks})
}

// toolResultsFirst moves the tool_result blocks of a user message before its other blocks,
// keeping the order within each group: the Messages API requires tool results to come first.
func toolResultsFirst(blocks []block) {
	// Most messages need nothing: look for a tool result after another block first.
	seenOther, needed := false, false
	for _, b := range blocks {
		if b.Type != "tool_result" {
			seenOther = true
		} else if seenOther {
			needed = true
			break
		}
	}
	if !needed {
		return
	}
	sorted := make([]block, 0, len(blocks))
	for _, b := range blocks {
		if b.Type == "tool_result" {
			sorted = append(sorted, b)
		}
	}
	for _, b := range blocks {
		if b.Type != "tool_result" {
			sorted = append(sorted, b)
		}
	}
	copy(blocks, sorted)
}

// systemJSON is the top-level system: one string of every system text joined by a blank line,
// or, when a part carries cache_control, the text blocks themselves (a string cannot carry it).
func systemJSON(parts []block) json.RawMessage {
	for _, p := range parts {
		if len(p.CacheControl) > 0 {
			b, _ := marshal(parts)
			return b
		}
	}
	texts := make([]string, len(parts))
	for i, p := range parts {
		texts[i] = p.Text
	}
	b, _ := marshal(strings.Join(texts, "\n\n"))
	return b
}

// marshal encodes v without escaping <, > and & (json.Marshal would turn them into \u003c...).
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// present reports whether raw is a value other than null.
func present(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && string(raw) != "null"
}
