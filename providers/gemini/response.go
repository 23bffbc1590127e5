package gemini

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"yosan/app"
	"yosan/providers/openai"
)

// The answer side of the translation: a Gemini GenerateContentResponse becomes an OpenAI
// chat.completion (or, in a stream, chat.completion.chunk events).
//
// Translated: the candidates' text parts (joined; parts marked "thought": true are left out of
// the content: they are the model's thinking, billed but not part of the answer), functionCall
// parts (-> tool_calls with ids "call_<n>", or Gemini's own id when it sends one, and the
// part's thoughtSignature in extra_content.google.thought_signature, which Gemini 3 wants back
// with the call), finishReason, usageMetadata, modelVersion and responseId.
//
// Not translated: other part kinds (inlineData images, executableCode, codeExecutionResult),
// safetyRatings, citationMetadata, groundingMetadata, logprobsResult.

type generateResponse struct {
	Candidates     []candidate `json:"candidates"`
	PromptFeedback *struct {
		BlockReason string `json:"blockReason"`
	} `json:"promptFeedback"`
	UsageMetadata *usageMetadata  `json:"usageMetadata"`
	ModelVersion  string          `json:"modelVersion"`
	ResponseID    string          `json:"responseId"`
	Error         json.RawMessage `json:"error"`
}

type candidate struct {
	Content *struct {
		Parts []part `json:"parts"`
	} `json:"content"`
	FinishReason string `json:"finishReason"`
	Index        *int   `json:"index"`
}

// usageMetadata is Gemini's usage. promptTokenCount includes cachedContentTokenCount;
// totalTokenCount includes thoughtsTokenCount and toolUsePromptTokenCount.
type usageMetadata struct {
	PromptTokenCount        int64 `json:"promptTokenCount"`
	CandidatesTokenCount    int64 `json:"candidatesTokenCount"`
	ThoughtsTokenCount      int64 `json:"thoughtsTokenCount"`
	CachedContentTokenCount int64 `json:"cachedContentTokenCount"`
	ToolUsePromptTokenCount int64 `json:"toolUsePromptTokenCount"`
	TotalTokenCount         int64 `json:"totalTokenCount"`
}

// usage returns the usage in OpenAI's terms. Thinking tokens are billed as output, so they are
// completion tokens (and reported again as completion_tokens_details.reasoning_tokens, as OpenAI
// does for its reasoning models); tool-use prompt tokens are billed as input, so they are prompt
// tokens. The sum is Gemini's totalTokenCount.
func (u *usageMetadata) usage() app.Usage {
	return app.Usage{
		PromptTokens:     u.PromptTokenCount + u.ToolUsePromptTokenCount,
		CompletionTokens: u.CandidatesTokenCount + u.ThoughtsTokenCount,
		CachedTokens:     u.CachedContentTokenCount,
	}
}

// appendUsage appends the OpenAI usage object for u.
func appendUsage(b []byte, u *usageMetadata) []byte {
	us := u.usage()
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, us.PromptTokens, 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, us.CompletionTokens, 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, us.PromptTokens+us.CompletionTokens, 10)
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, us.CachedTokens, 10)
	b = append(b, `},"completion_tokens_details":{"reasoning_tokens":`...)
	b = strconv.AppendInt(b, u.ThoughtsTokenCount, 10)
	return append(b, `}}`...)
}

// finishReason maps Gemini's finishReason to OpenAI's; "" while the candidate goes on.
func finishReason(reason string, calls bool) string {
	switch reason {
	case "":
		return ""
	case "MAX_TOKENS":
		return "length"
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII",
		"IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION":
		return "content_filter"
	}
	if calls {
		return "tool_calls" // Gemini says STOP after function calls
	}
	return "stop" // STOP, and the reasons OpenAI has no word for (OTHER, LANGUAGE, MALFORMED_FUNCTION_CALL, ...)
}

// candidateIndex is the choice index of the i-th candidate.
func candidateIndex(c *candidate, i int) int {
	if c.Index != nil {
		return *c.Index
	}
	return i
}

// split returns a candidate's answer text (thoughts left out) and its function calls.
func (c *candidate) split() (string, []*part) {
	if c.Content == nil {
		return "", nil
	}
	var text string
	var sb strings.Builder
	var calls []*part
	for i := range c.Content.Parts {
		p := &c.Content.Parts[i]
		switch {
		case p.FunctionCall != nil:
			calls = append(calls, p)
		case p.Text != nil && !p.Thought && *p.Text != "":
			appendText(&text, &sb, *p.Text)
		}
	}
	if sb.Len() > 0 {
		text = sb.String()
	}
	return text, calls
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

// appendToolCall appends an OpenAI tool call for a functionCall part; with index >= 0 it is a
// stream delta's (which carries its index). n numbers the calls without an id of their own. It
// returns the arguments string for the gateway's token count.
func appendToolCall(b []byte, p *part, index, n int) ([]byte, string) {
	fc := p.FunctionCall
	b = append(b, '{')
	if index >= 0 {
		b = append(b, `"index":`...)
		b = strconv.AppendInt(b, int64(index), 10)
		b = append(b, ',')
	}
	id := fc.ID
	if id == "" {
		id = "call_" + strconv.Itoa(n)
	}
	b = append(b, `"id":`...)
	b = openai.AppendString(b, id)
	b = append(b, `,"type":"function","function":{"name":`...)
	b = openai.AppendString(b, fc.Name)
	args := "{}"
	if len(fc.Args) > 0 && string(fc.Args) != "null" {
		var cb bytes.Buffer
		if json.Compact(&cb, fc.Args) == nil {
			args = cb.String()
		}
	}
	b = append(b, `,"arguments":`...)
	b = openai.AppendString(b, args)
	b = append(b, '}')
	if p.ThoughtSignature != "" {
		b = append(b, `,"extra_content":{"google":{"thought_signature":`...)
		b = openai.AppendString(b, p.ThoughtSignature)
		b = append(b, `}}`...)
	}
	return append(b, '}'), args
}

// responseID is the OpenAI id of an answer.
func responseID(gr *generateResponse) string {
	if gr.ResponseID != "" {
		return "chatcmpl-" + gr.ResponseID
	}
	return "chatcmpl-gemini"
}

// completion returns the chat.completion for a generateContent answer.
func (c *Client) completion(model string, gr *generateResponse) []byte {
	if gr.ModelVersion != "" {
		model = gr.ModelVersion
	}
	b := make([]byte, 0, 512)
	b = append(b, `{"id":`...)
	b = openai.AppendString(b, responseID(gr))
	b = append(b, `,"object":"chat.completion","created":`...)
	b = strconv.AppendInt(b, c.now().Unix(), 10)
	b = append(b, `,"model":`...)
	b = openai.AppendString(b, model)
	b = append(b, `,"choices":[`...)
	if len(gr.Candidates) == 0 {
		// No candidate: the prompt was blocked (promptFeedback.blockReason) or nothing came.
		finish := "stop"
		if gr.PromptFeedback != nil && gr.PromptFeedback.BlockReason != "" {
			finish = "content_filter"
		}
		b = append(b, `{"index":0,"message":{"role":"assistant","content":""},"logprobs":null,"finish_reason":"`+finish+`"}`...)
	}
	n := 0
	for i := range gr.Candidates {
		cand := &gr.Candidates[i]
		if i > 0 {
			b = append(b, ',')
		}
		text, calls := cand.split()
		b = append(b, `{"index":`...)
		b = strconv.AppendInt(b, int64(candidateIndex(cand, i)), 10)
		b = append(b, `,"message":{"role":"assistant","content":`...)
		if text == "" && len(calls) > 0 {
			b = append(b, "null"...)
		} else {
			b = openai.AppendString(b, text)
		}
		if len(calls) > 0 {
			b = append(b, `,"tool_calls":[`...)
			for j, p := range calls {
				if j > 0 {
					b = append(b, ',')
				}
				b, _ = appendToolCall(b, p, -1, n)
				n++
			}
			b = append(b, ']')
		}
		b = append(b, `},"logprobs":null,"finish_reason":`...)
		if f := finishReason(cand.FinishReason, len(calls) > 0); f != "" {
			b = openai.AppendString(b, f)
		} else {
			b = append(b, `"stop"`...) // a complete answer without a reason
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	if gr.UsageMetadata != nil {
		b = append(b, `,"usage":`...)
		b = appendUsage(b, gr.UsageMetadata)
	}
	return append(b, '}')
}
