package app

import (
	"context"
	"encoding/json"
	"net/http"
)

// Usage is what an upstream reports (or the gateway counted) for one call.
type Usage struct {
	PromptTokens     int64
	CompletionTokens int64
	// CachedTokens is the part of PromptTokens served from the provider's prompt cache.
	CachedTokens int64
	// CacheWriteTokens is the part of PromptTokens written to the provider's prompt cache
	// (Anthropic's cache_creation_input_tokens), priced at Price.CacheWritePerM, and
	// CacheWrite1hTokens the part of those kept for an hour (Price.CacheWrite1hPerM).
	CacheWriteTokens   int64
	CacheWrite1hTokens int64
}

// ProviderRequest is one OpenAI-shaped call to an upstream. Body is the caller's JSON object
// with every field it sent (unknown ones included), "model" already rewritten to the upstream's
// model name and, for streams, stream_options.include_usage forced on.
type ProviderRequest struct {
	Model  string
	Body   map[string]json.RawMessage
	Stream bool
	// MaxTokens is the output bound per choice the reservation holds (0: none). Adapters whose
	// API takes a limit apart from the body (Anthropic, which requires one, and Gemini) send
	// it when the body names none, so the answer cannot outgrow what was reserved.
	MaxTokens int64
}

// ProviderResponse is a complete (non-streaming) upstream answer in the OpenAI shape.
type ProviderResponse struct {
	Body []byte
	// Usage is the upstream's reported usage; HasUsage is false when it reported none.
	Usage    Usage
	HasUsage bool
}

// StreamChunk is one SSE event of an OpenAI-shaped chat completion stream.
type StreamChunk struct {
	// Data is the event's JSON payload, exactly as it goes to the client (without "data: ").
	Data []byte
	// Usage is set when the chunk carries a usage object.
	Usage *Usage
	// UsageOnly marks the extra final chunk that include_usage adds ("choices": [] plus usage):
	// the gateway strips it when the caller did not ask for usage.
	UsageOnly bool
	// Text is the generated text in this chunk (content, reasoning, tool-call arguments): the
	// gateway counts it to settle a stream that breaks before its usage chunk.
	Text string
}

// Stream is an open upstream stream. Next returns io.EOF after the final event ([DONE]).
type Stream interface {
	Next() (StreamChunk, error)
	Close() error
}

// PartialUsage is a Stream whose provider reports usage before the end (Anthropic's
// message_start and message_delta, Gemini's running usageMetadata). A stream that breaks is
// settled on no less than what it reported: its cache writes and thinking tokens included,
// which the relayed text cannot show.
type PartialUsage interface {
	// UsageSoFar is the usage last reported, false when none was.
	UsageSoFar() (Usage, bool)
}

// AtLeast is u with prompt and completion tokens raised to known's where known is larger,
// and known's cached and cache-write parts: a usage that never under-counts either.
func (u Usage) AtLeast(known Usage) Usage {
	u.PromptTokens = max(u.PromptTokens, known.PromptTokens)
	u.CompletionTokens = max(u.CompletionTokens, known.CompletionTokens)
	u.CachedTokens, u.CacheWriteTokens, u.CacheWrite1hTokens = known.CachedTokens, known.CacheWriteTokens, known.CacheWrite1hTokens
	return u
}

// Provider is an upstream that speaks (or is translated to) the OpenAI wire format.
// Implementations return *UpstreamError for any failure of the upstream itself.
type Provider interface {
	ChatCompletion(ctx context.Context, req *ProviderRequest) (*ProviderResponse, error)
	ChatCompletionStream(ctx context.Context, req *ProviderRequest) (Stream, error)
	Embeddings(ctx context.Context, req *ProviderRequest) (*ProviderResponse, error)
}

// UpstreamError is a failed upstream call: an HTTP error answer (Status > 0, with its body and
// headers) or a transport failure (Status 0, Timeout telling whether a deadline expired).
type UpstreamError struct {
	Provider string
	Status   int
	Header   http.Header
	Body     []byte
	Timeout  bool
	Err      error
}

// Error implements error.
func (e *UpstreamError) Error() string {
	if e.Status != 0 {
		return "upstream " + e.Provider + ": HTTP " + http.StatusText(e.Status) + ": " + truncate(string(e.Body), 300)
	}
	if e.Err != nil {
		return "upstream " + e.Provider + ": " + e.Err.Error()
	}
	return "upstream " + e.Provider + ": failed"
}

// Unwrap returns the transport cause.
func (e *UpstreamError) Unwrap() error { return e.Err }

// ClientFault reports whether the upstream rejected the request itself (the caller's fault:
// bad parameters, context too long), so the answer goes back to the caller unchanged.
func (e *UpstreamError) ClientFault() bool {
	switch e.Status {
	case http.StatusBadRequest, http.StatusNotFound, http.StatusUnprocessableEntity, http.StatusRequestEntityTooLarge:
		return true
	}
	return false
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// TokenCounter counts the input tokens of a request for a model family; web and the gateway
// use it to estimate the worst case before the call.
type TokenCounter interface {
	// CountText returns the token count of text for the given upstream model name.
	CountText(model, text string) int64
}
