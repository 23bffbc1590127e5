package gemini

import (
	"bytes"
	"encoding/json"
	"net/url"
	"path"
	"strconv"
	"strings"

	"yosan/app"
)

// The request side of the translation: an OpenAI chat completion body becomes a Gemini
// GenerateContentRequest.
//
// Translated: messages (system and developer -> systemInstruction; user -> "user"; assistant ->
// "model"; tool and legacy function results -> functionResponse parts of a "user" turn, the
// results of one turn merged into one content as Gemini requires), content parts (text;
// image_url as a data: URL -> inlineData, as an http(s) or gs:// URL -> fileData; input_audio ->
// inlineData; file with file_data -> inlineData), tool_calls (-> functionCall parts, with the
// thought signature from extra_content.google.thought_signature), tools and legacy functions
// (-> functionDeclarations with parametersJsonSchema), tool_choice and legacy function_call
// (-> toolConfig.functionCallingConfig), max_completion_tokens / max_tokens, temperature,
// top_p, stop, n, presence_penalty, frequency_penalty, seed, response_format (json_object and
// json_schema) and reasoning_effort (-> thinkingConfig.thinkingBudget).
//
// Refused with a 400 (ErrUnsupported), no upstream call made: what Gemini cannot honour and the
// caller would miss if it were dropped: logprobs, top_logprobs, logit_bias, audio output
// (audio, modalities other than ["text"]), prediction, web_search_options, file_id references,
// image URLs that are neither base64 data: URLs nor http(s)/gs:// URLs, non-text parts in system
// and assistant messages, tools other than functions, tool_choice "allowed_tools", tool results
// whose call is unknown (Gemini needs the function's name), tool-call arguments that are not a
// JSON object, response_format types other than text/json_object/json_schema, unknown
// reasoning_effort values and unknown roles.
//
// Ignored: fields that change nothing in the answer (user, metadata, store, service_tier,
// parallel_tool_calls, stream, stream_options, model: the model is in the URL).

// The Gemini request, in its JSON field order.
type generateRequest struct {
	Contents          []content         `json:"contents"`
	SystemInstruction *content          `json:"systemInstruction,omitempty"`
	Tools             []tool            `json:"tools,omitempty"`
	ToolConfig        *toolConfig       `json:"toolConfig,omitempty"`
	GenerationConfig  *generationConfig `json:"generationConfig,omitempty"`
}

type content struct {
	Role  string `json:"role,omitempty"`
	Parts []part `json:"parts"`
}

// part is a Part of either direction: the request writes it, the answer decodes into it.
type part struct {
	Text             *string           `json:"text,omitempty"`
	Thought          bool              `json:"thought,omitempty"`
	InlineData       *blob             `json:"inlineData,omitempty"`
	FileData         *fileData         `json:"fileData,omitempty"`
	FunctionCall     *functionCall     `json:"functionCall,omitempty"`
	FunctionResponse *functionResponse `json:"functionResponse,omitempty"`
	ThoughtSignature string            `json:"thoughtSignature,omitempty"`
}

type blob struct {
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
}

type fileData struct {
	MimeType string `json:"mimeType,omitempty"`
	FileURI  string `json:"fileUri"`
}

type functionCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

type functionResponse struct {
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`
}

type tool struct {
	FunctionDeclarations []functionDeclaration `json:"functionDeclarations"`
}

type functionDeclaration struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// ParametersJSONSchema takes the caller's JSON Schema as it is. The older "parameters"
	// field takes only an OpenAPI subset and rejects whole requests over keywords OpenAI
	// schemas carry (additionalProperties, $schema, ...).
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema,omitempty"`
}

type toolConfig struct {
	FunctionCallingConfig functionCallingConfig `json:"functionCallingConfig"`
}

type functionCallingConfig struct {
	Mode                 string   `json:"mode"`
	AllowedFunctionNames []string `json:"allowedFunctionNames,omitempty"`
}

type generationConfig struct {
	StopSequences      []string        `json:"stopSequences,omitempty"`
	ResponseMimeType   string          `json:"responseMimeType,omitempty"`
	ResponseJSONSchema json.RawMessage `json:"responseJsonSchema,omitempty"`
	CandidateCount     json.RawMessage `json:"candidateCount,omitempty"`
	MaxOutputTokens    json.RawMessage `json:"maxOutputTokens,omitempty"`
	Temperature        json.RawMessage `json:"temperature,omitempty"`
	TopP               json.RawMessage `json:"topP,omitempty"`
	Seed               json.RawMessage `json:"seed,omitempty"`
	PresencePenalty    json.RawMessage `json:"presencePenalty,omitempty"`
	FrequencyPenalty   json.RawMessage `json:"frequencyPenalty,omitempty"`
	ThinkingConfig     *thinkingConfig `json:"thinkingConfig,omitempty"`
}

type thinkingConfig struct {
	ThinkingBudget int `json:"thinkingBudget"`
}

// The OpenAI request side.
type oaMessage struct {
	Role         string          `json:"role"`
	Content      json.RawMessage `json:"content"`
	Name         string          `json:"name"`
	ToolCalls    []oaToolCall    `json:"tool_calls"`
	ToolCallID   string          `json:"tool_call_id"`
	FunctionCall *oaFunction     `json:"function_call"`
}

type oaToolCall struct {
	ID           string     `json:"id"`
	Type         string     `json:"type"`
	Function     oaFunction `json:"function"`
	ExtraContent *struct {
		Google *struct {
			ThoughtSignature string `json:"thought_signature"`
		} `json:"google"`
	} `json:"extra_content"`
}

type oaFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type oaPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url"`
	InputAudio *struct {
		Data   string `json:"data"`
		Format string `json:"format"`
	} `json:"input_audio"`
	File *struct {
		FileData string `json:"file_data"`
		FileID   string `json:"file_id"`
		Filename string `json:"filename"`
	} `json:"file"`
}

type oaFunctionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// reasoningBudget maps reasoning_effort to a thinking budget, as Google's own OpenAI-compatible
// endpoint does for Gemini 2.5.
func reasoningBudget(effort string) (int, bool) {
	switch effort {
	case "none":
		return 0, true
	case "minimal", "low":
		return 1024, true
	case "medium":
		return 8192, true
	case "high":
		return 24576, true
	}
	return 0, false
}

// translateChat returns the Gemini request body for an OpenAI chat body, or a 400
// *app.UpstreamError (ErrUnsupported) naming what cannot be translated.
func (c *Client) translateChat(req *app.ProviderRequest) ([]byte, error) {
	b := req.Body
	var gr generateRequest

	// OpenAI parameters whose effect Gemini cannot give: refused rather than answered without.
	for _, f := range [...]string{"logprobs", "top_logprobs", "logit_bias", "audio", "prediction", "web_search_options"} {
		if v, ok := b[f]; ok && !isEmptyValue(v) {
			return nil, c.unsupported(f, "'%s' is not supported by this Gemini model's API", f)
		}
	}
	if v, ok := b["modalities"]; ok && !isEmptyValue(v) {
		var mods []string
		if json.Unmarshal(v, &mods) != nil || len(mods) != 1 || mods[0] != "text" {
			return nil, c.unsupported("modalities", "only text output is supported by this Gemini adapter")
		}
	}

	var msgs []oaMessage
	if err := json.Unmarshal(b["messages"], &msgs); err != nil {
		return nil, c.unsupported("messages", "'messages' must be an array of message objects")
	}
	// names maps a tool call id to its function: a tool result names its call only by id, and
	// Gemini's functionResponse needs the function's name. Later calls win (ids may repeat
	// across turns).
	names := map[string]string{}
	var system []part
	toolTurn := false // the last content holds tool results that a next one joins
	for i, m := range msgs {
		at := "messages[" + strconv.Itoa(i) + "]"
		switch m.Role {
		case "system", "developer":
			parts, err := c.textParts(m.Content, at)
			if err != nil {
				return nil, err
			}
			system = append(system, parts...)
			toolTurn = false
		case "user":
			parts, err := c.userParts(m.Content, at)
			if err != nil {
				return nil, err
			}
			gr.Contents = append(gr.Contents, content{Role: "user", Parts: parts})
			toolTurn = false
		case "assistant":
			parts, err := c.textParts(m.Content, at)
			if err != nil {
				return nil, err
			}
			for j, tc := range m.ToolCalls {
				if tc.Type != "" && tc.Type != "function" {
					return nil, c.unsupported("messages", "%s.tool_calls[%d] has type %q; Gemini takes function calls only", at, j, tc.Type)
				}
				p, err := c.callPart(tc.Function, at+".tool_calls["+strconv.Itoa(j)+"]")
				if err != nil {
					return nil, err
				}
				if tc.ExtraContent != nil && tc.ExtraContent.Google != nil {
					p.ThoughtSignature = tc.ExtraContent.Google.ThoughtSignature
				}
				names[tc.ID] = tc.Function.Name
				parts = append(parts, p)
			}
			if m.FunctionCall != nil {
				p, err := c.callPart(*m.FunctionCall, at+".function_call")
				if err != nil {
					return nil, err
				}
				parts = append(parts, p)
			}
			if len(parts) > 0 {
				gr.Contents = append(gr.Contents, content{Role: "model", Parts: parts})
			}
			toolTurn = false
		case "tool", "function":
			name := m.Name
			if m.Role == "tool" {
				if n, ok := names[m.ToolCallID]; ok {
					name = n
				}
			}
			if name == "" {
				return nil, c.unsupported("messages", "%s answers tool call %q, which no earlier assistant message made; Gemini needs the function's name", at, m.ToolCallID)
			}
			text, err := c.plainText(m.Content, at)
			if err != nil {
				return nil, err
			}
			resp, _ := json.Marshal(map[string]string{"content": text})
			p := part{FunctionResponse: &functionResponse{Name: name, Response: resp}}
			if toolTurn {
				last := &gr.Contents[len(gr.Contents)-1]
				last.Parts = append(last.Parts, p)
			} else {
				gr.Contents = append(gr.Contents, content{Role: "user", Parts: []part{p}})
				toolTurn = true
			}
		default:
			return nil, c.unsupported("messages", "%s.role %q is not supported", at, m.Role)
		}
	}
	if len(system) > 0 {
		gr.SystemInstruction = &content{Parts: system}
	}
	if gr.Contents == nil {
		gr.Contents = []content{} // Gemini answers the empty case with its own 400
	}

	if err := c.translateTools(b, &gr); err != nil {
		return nil, err
	}
	gc, err := c.translateConfig(b, req.MaxTokens)
	if err != nil {
		return nil, err
	}
	gr.GenerationConfig = gc
	out, err := json.Marshal(&gr)
	if err != nil {
		// Only a RawMessage that is not JSON fails, and they all come from decoded JSON.
		return nil, c.unsupported("", "encode the Gemini request: %v", err)
	}
	return out, nil
}

// callPart returns the functionCall part of an assistant's call; Gemini wants the arguments as
// a JSON object, OpenAI sends them as a string holding one.
func (c *Client) callPart(f oaFunction, at string) (part, error) {
	if f.Name == "" {
		return part{}, c.unsupported("messages", "%s has no function name", at)
	}
	args := json.RawMessage(`{}`)
	if s := strings.TrimSpace(f.Arguments); s != "" {
		if !json.Valid([]byte(s)) || s[0] != '{' {
			return part{}, c.unsupported("messages", "%s.arguments must be a JSON object for Gemini", at)
		}
		args = json.RawMessage(s)
	}
	return part{FunctionCall: &functionCall{Name: f.Name, Args: args}}, nil
}

// textParts returns the text parts of a system or assistant content (a string or text parts);
// an empty or null content has none.
func (c *Client) textParts(raw json.RawMessage, at string) ([]part, error) {
	if isEmptyValue(raw) {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil || s == "" {
			return nil, nil
		}
		return []part{textPart(s)}, nil
	}
	var ps []oaPart
	if err := json.Unmarshal(raw, &ps); err != nil {
		return nil, c.unsupported("messages", "%s.content must be a string or an array of content parts", at)
	}
	var out []part
	for j, p := range ps {
		switch p.Type {
		case "text":
			out = append(out, textPart(p.Text))
		case "refusal":
			out = append(out, textPart(p.Refusal))
		default:
			return nil, c.unsupported("messages", "%s.content[%d] has type %q; only text is supported here", at, j, p.Type)
		}
	}
	return out, nil
}

// plainText returns a tool result's content as one string.
func (c *Client) plainText(raw json.RawMessage, at string) (string, error) {
	parts, err := c.textParts(raw, at)
	if err != nil {
		return "", err
	}
	var sb strings.Builder
	for _, p := range parts {
		sb.WriteString(*p.Text)
	}
	return sb.String(), nil
}

// userParts returns the parts of a user message: text, images, audio and files.
func (c *Client) userParts(raw json.RawMessage, at string) ([]part, error) {
	if isEmptyValue(raw) {
		return []part{textPart("")}, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, c.unsupported("messages", "%s.content is not a valid string", at)
		}
		return []part{textPart(s)}, nil
	}
	var ps []oaPart
	if err := json.Unmarshal(raw, &ps); err != nil {
		return nil, c.unsupported("messages", "%s.content must be a string or an array of content parts", at)
	}
	out := make([]part, 0, len(ps))
	for j, p := range ps {
		pat := at + ".content[" + strconv.Itoa(j) + "]"
		switch p.Type {
		case "text":
			out = append(out, textPart(p.Text))
		case "image_url":
			if p.ImageURL == nil || p.ImageURL.URL == "" {
				return nil, c.unsupported("messages", "%s.image_url.url is missing", pat)
			}
			gp, err := c.urlPart(p.ImageURL.URL, pat+".image_url.url")
			if err != nil {
				return nil, err
			}
			out = append(out, gp)
		case "input_audio":
			if p.InputAudio == nil || p.InputAudio.Data == "" || p.InputAudio.Format == "" {
				return nil, c.unsupported("messages", "%s.input_audio needs data and format", pat)
			}
			out = append(out, part{InlineData: &blob{MimeType: "audio/" + p.InputAudio.Format, Data: p.InputAudio.Data}})
		case "file":
			if p.File == nil || p.File.FileData == "" {
				return nil, c.unsupported("messages", "%s: only files sent inline (file.file_data as a data: URL) are supported; a file_id means nothing to Gemini", pat)
			}
			mime, data, ok := parseDataURL(p.File.FileData)
			if !ok {
				return nil, c.unsupported("messages", "%s.file.file_data must be a base64 data: URL", pat)
			}
			out = append(out, part{InlineData: &blob{MimeType: mime, Data: data}})
		default:
			return nil, c.unsupported("messages", "%s has type %q, which Gemini cannot be given", pat, p.Type)
		}
	}
	if len(out) == 0 {
		out = append(out, textPart(""))
	}
	return out, nil
}

// urlPart turns an image URL into a part: a data: URL is sent inline; an http(s) or gs:// URL
// is passed as fileData for Gemini to fetch, with its MIME type guessed from the extension
// (left out when unknown: Gemini then detects it).
func (c *Client) urlPart(u, at string) (part, error) {
	if strings.HasPrefix(u, "data:") {
		mime, data, ok := parseDataURL(u)
		if !ok {
			return part{}, c.unsupported("messages", "%s must be a base64 data: URL or an http(s) URL", at)
		}
		return part{InlineData: &blob{MimeType: mime, Data: data}}, nil
	}
	pu, err := url.Parse(u)
	if err != nil || (pu.Scheme != "http" && pu.Scheme != "https" && pu.Scheme != "gs") || pu.Host == "" {
		return part{}, c.unsupported("messages", "%s must be a base64 data: URL or an http(s) URL", at)
	}
	return part{FileData: &fileData{MimeType: mimeType(pu.Path), FileURI: u}}, nil
}

// mimeType guesses the type of a file Gemini reads from its extension, "" when unknown (a fixed
// table: the system's MIME database differs between machines).
func mimeType(p string) string {
	switch strings.ToLower(path.Ext(p)) {
	case ".png":
		return "image/png"
	case ".jpg", ".jpeg":
		return "image/jpeg"
	case ".webp":
		return "image/webp"
	case ".gif":
		return "image/gif"
	case ".heic":
		return "image/heic"
	case ".heif":
		return "image/heif"
	case ".pdf":
		return "application/pdf"
	}
	return ""
}

// parseDataURL splits "data:<mime>;base64,<data>".
func parseDataURL(u string) (mime, data string, ok bool) {
	rest, ok := strings.CutPrefix(u, "data:")
	if !ok {
		return "", "", false
	}
	meta, data, ok := strings.Cut(rest, ",")
	if !ok {
		return "", "", false
	}
	mime, ok = strings.CutSuffix(meta, ";base64")
	if !ok || mime == "" || data == "" {
		return "", "", false
	}
	return mime, data, true
}

func textPart(s string) part { return part{Text: &s} }

// translateTools sets tools and toolConfig from tools/functions and tool_choice/function_call.
func (c *Client) translateTools(b map[string]json.RawMessage, gr *generateRequest) error {
	var decls []functionDeclaration
	if v, ok := b["tools"]; ok && !isEmptyValue(v) {
		var tools []struct {
			Type     string         `json:"type"`
			Function *oaFunctionDef `json:"function"`
		}
		if err := json.Unmarshal(v, &tools); err != nil {
			return c.unsupported("tools", "'tools' must be an array of tool objects")
		}
		for i, t := range tools {
			if t.Type != "function" || t.Function == nil {
				return c.unsupported("tools", "tools[%d] has type %q; Gemini takes function tools only", i, t.Type)
			}
			decls = append(decls, declaration(t.Function))
		}
	}
	if v, ok := b["functions"]; ok && !isEmptyValue(v) {
		var fns []oaFunctionDef
		if err := json.Unmarshal(v, &fns); err != nil {
			return c.unsupported("functions", "'functions' must be an array of function objects")
		}
		for i := range fns {
			decls = append(decls, declaration(&fns[i]))
		}
	}
	if len(decls) > 0 {
		gr.Tools = []tool{{FunctionDeclarations: decls}}
	}

	choice, param := b["tool_choice"], "tool_choice"
	if isEmptyValue(choice) {
		choice, param = b["function_call"], "function_call"
	}
	if isEmptyValue(choice) {
		return nil
	}
	fc := functionCallingConfig{}
	if choice[0] == '"' {
		var s string
		_ = json.Unmarshal(choice, &s)
		switch s {
		case "auto":
			fc.Mode = "AUTO"
		case "none":
			fc.Mode = "NONE"
		case "required":
			fc.Mode = "ANY"
		default:
			return c.unsupported(param, "'%s' %q is not supported", param, s)
		}
	} else {
		var obj struct {
			Type     string `json:"type"`
			Name     string `json:"name"` // legacy function_call {"name": ...}
			Function *struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if err := json.Unmarshal(choice, &obj); err != nil {
			return c.unsupported(param, "'%s' must be a string or an object", param)
		}
		name := obj.Name
		if obj.Function != nil {
			name = obj.Function.Name
		}
		if name == "" || (obj.Type != "" && obj.Type != "function") {
			return c.unsupported(param, "'%s' must name a function (type %q is not supported)", param, obj.Type)
		}
		fc.Mode, fc.AllowedFunctionNames = "ANY", []string{name}
	}
	gr.ToolConfig = &toolConfig{FunctionCallingConfig: fc}
	return nil
}

func declaration(f *oaFunctionDef) functionDeclaration {
	d := functionDeclaration{Name: f.Name, Description: f.Description}
	if !isEmptyValue(f.Parameters) {
		d.ParametersJSONSchema = f.Parameters
	}
	return d
}

// translateConfig returns the generationConfig, nil when the request sets nothing in it.
// maxTokens (the bound the gateway reserved for) is the maxOutputTokens when the body names
// no limit.
func (c *Client) translateConfig(b map[string]json.RawMessage, maxTokens int64) (*generationConfig, error) {
	var gc generationConfig
	set := false
	number := func(field string, dst *json.RawMessage) {
		if v, ok := b[field]; ok && !isNull(v) {
			*dst, set = v, true
		}
	}
	number("max_tokens", &gc.MaxOutputTokens)
	number("max_completion_tokens", &gc.MaxOutputTokens) // wins over max_tokens
	if gc.MaxOutputTokens == nil && maxTokens > 0 {
		gc.MaxOutputTokens, set = json.RawMessage(strconv.FormatInt(maxTokens, 10)), true
	}
	number("temperature", &gc.Temperature)
	number("top_p", &gc.TopP)
	number("n", &gc.CandidateCount)
	number("seed", &gc.Seed)
	number("presence_penalty", &gc.PresencePenalty)
	number("frequency_penalty", &gc.FrequencyPenalty)

	if v, ok := b["stop"]; ok && !isEmptyValue(v) {
		var s string
		if json.Unmarshal(v, &s) == nil {
			gc.StopSequences = []string{s}
		} else if json.Unmarshal(v, &gc.StopSequences) != nil {
			return nil, c.unsupported("stop", "'stop' must be a string or an array of strings")
		}
		set = true
	}
	if v, ok := b["response_format"]; ok && !isEmptyValue(v) {
		var rf struct {
			Type       string `json:"type"`
			JSONSchema *struct {
				Schema json.RawMessage `json:"schema"`
			} `json:"json_schema"`
		}
		if err := json.Unmarshal(v, &rf); err != nil {
			return nil, c.unsupported("response_format", "'response_format' must be an object")
		}
		switch rf.Type {
		case "text":
		case "json_object":
			gc.ResponseMimeType, set = "application/json", true
		case "json_schema":
			gc.ResponseMimeType, set = "application/json", true
			if rf.JSONSchema != nil && !isEmptyValue(rf.JSONSchema.Schema) {
				gc.ResponseJSONSchema = rf.JSONSchema.Schema
			}
		default:
			return nil, c.unsupported("response_format", "response_format type %q is not supported", rf.Type)
		}
	}
	if v, ok := b["reasoning_effort"]; ok && !isEmptyValue(v) {
		var s string
		_ = json.Unmarshal(v, &s)
		budget, ok := reasoningBudget(s)
		if !ok {
			return nil, c.unsupported("reasoning_effort", "reasoning_effort %q is not supported (none, minimal, low, medium, high)", s)
		}
		gc.ThinkingConfig, set = &thinkingConfig{ThinkingBudget: budget}, true
	}
	if !set {
		return nil, nil
	}
	return &gc, nil
}

// isNull reports whether a field is absent or null.
func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// isEmptyValue reports whether a field is absent or null, false, 0, "", [] or {}: a value that
// asks for nothing.
func isEmptyValue(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	switch string(raw) {
	case "", "null", "false", "0", `""`, "[]", "{}":
		return true
	}
	return false
}
