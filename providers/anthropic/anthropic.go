// Package anthropic is the client for Anthropic's Messages API (POST /v1/messages). It
// translates the gateway's OpenAI-shaped chat completions into Messages requests and the answers
// (plain and streamed) back into the OpenAI shape, so the gateway sees one wire format.
//
// What is translated, and what is not, is listed on ChatCompletion.
package anthropic

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"yosan/app"
	"yosan/providers/upstream"
)

// Defaults and limits.
const (
	// DefaultBaseURL is Anthropic's API root.
	DefaultBaseURL = "https://api.anthropic.com"
	// DefaultVersion is the anthropic-version header sent when Config.Version is empty.
	DefaultVersion = "2023-06-01"
	// DefaultMaxTokens is the max_tokens sent when the request has neither max_tokens nor
	// max_completion_tokens nor ProviderRequest.MaxTokens: Anthropic rejects a request without
	// one. The gateway always sets ProviderRequest.MaxTokens (the bound it reserved for), so
	// this only guards direct uses of the client.
	DefaultMaxTokens = 4096
	// MaxErrorBody is how much of a non-2xx answer is kept.
	MaxErrorBody = 1 << 20
	// MaxResponseBody bounds a non-streaming 2xx answer.
	MaxResponseBody = 64 << 20
	// MaxEventSize bounds one SSE line or event of a stream.
	MaxEventSize = 8 << 20
)

// Errors a failed call wraps inside *app.UpstreamError.
var (
	// ErrBadResponse: a 2xx answer (or stream event) that is not the expected JSON (Status 0).
	ErrBadResponse = errors.New("upstream answer is not valid Anthropic JSON")
	// ErrErrorEvent: an error object arrived inside a 2xx answer or as an "event: error" of a
	// stream (Status 0, Body is the error JSON exactly as received).
	ErrErrorEvent = errors.New("upstream sent an error event")
	// ErrStreamBroken: the stream ended before message_stop (it wraps io.ErrUnexpectedEOF).
	ErrStreamBroken = fmt.Errorf("stream ended before message_stop: %w", io.ErrUnexpectedEOF)
	// ErrUnsupported: the request cannot be expressed in the Messages API (n > 1, audio input,
	// an OpenAI file id, ...) or the endpoint does not exist (embeddings). No upstream call is
	// made; the UpstreamError carries a synthesized OpenAI-shaped answer (Status 400 or 404), so
	// the gateway hands it back to the caller like any upstream client error.
	ErrUnsupported = errors.New("not supported by the Anthropic Messages API")
)

// Config configures a Client.
type Config struct {
	// Name is the provider's name in errors (UpstreamError.Provider).
	Name string
	// BaseURL is the API root, DefaultBaseURL when empty (a trailing "/v1" is accepted too).
	BaseURL string
	// APIKey is sent as the x-api-key header.
	APIKey string
	// Version is the anthropic-version header; DefaultVersion when empty.
	Version string
	// HTTPClient defaults to a client with a connection pool sized for one busy upstream. Give
	// it no Timeout: a call's context bounds it, and streams run long.
	HTTPClient *http.Client
	// Now gives the "created" timestamp of the answers (Anthropic sends none); time.Now when nil.
	Now func() time.Time
}

// Client is an Anthropic upstream. It implements app.Provider and is safe for concurrent use.
type Client struct {
	name    string
	url     string
	header  http.Header // the fixed request headers, copied into every request
	hc      *http.Client
	now     func() time.Time
	readers sync.Pool // *bufio.Reader, one per open stream
}

// New returns a Client for cfg.
func New(cfg Config) *Client {
	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	base = strings.TrimRight(base, "/")
	base = strings.TrimSuffix(base, "/v1")
	version := cfg.Version
	if version == "" {
		version = DefaultVersion
	}
	c := &Client{
		name: cfg.Name,
		url:  base + "/v1/messages",
		header: http.Header{
			"X-Api-Key":         {cfg.APIKey},
			"Anthropic-Version": {version},
			"Content-Type":      {"application/json"},
		},
		hc:  cfg.HTTPClient,
		now: cfg.Now,
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.hc == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConns = 1024
		t.MaxIdleConnsPerHost = 512
		t.IdleConnTimeout = 90 * time.Second
		c.hc = &http.Client{Transport: t}
	}
	c.readers.New = func() any { return bufio.NewReaderSize(nil, 32<<10) }
	return c
}

// ChatCompletion sends a non-streaming chat completion, translated to a Messages request, and
// returns the answer in the OpenAI chat.completion shape.
//
// Translated: system and developer messages (strings or text parts, wherever they appear) to the
// top-level system, joined by a blank line; user and assistant text and content parts;
// image_url parts (data: URLs to base64 image sources, http(s) URLs to url sources); file parts
// carrying a PDF as a data: URL to document blocks; assistant tool_calls to tool_use blocks
// (arguments parsed as the input object); tool messages to user tool_result blocks; consecutive
// messages of one role merged into one (tool results first, as Anthropic requires);
// cache_control on content parts passed through; tools of type function; tool_choice (auto,
// none, required -> any, a named function -> tool); parallel_tool_calls false ->
// disable_parallel_tool_use; max_completion_tokens or max_tokens (else req.MaxTokens, else
// DefaultMaxTokens);
// temperature (clamped to Anthropic's 0..1), top_p, stop -> stop_sequences, user ->
// metadata.user_id.
//
// Not translated, silently dropped: frequency_penalty, presence_penalty, logit_bias, logprobs,
// top_logprobs, seed, response_format, reasoning_effort, service_tier, store, metadata,
// modalities, prediction, message names, the position of system messages inside the
// conversation. Rejected with a synthesized 400 (ErrUnsupported, no upstream call): n > 1, the
// legacy functions/function_call fields, roles other than system, developer, user, assistant
// and tool, audio parts, OpenAI file ids, non-PDF files, non-base64 data: URLs, tool types
// other than function, tool_choice forms other than the four above, tool-call arguments that
// are not a JSON object. In answers, text and tool_use blocks are translated; thinking and
// server-tool blocks are left out.
//
// Usage: prompt_tokens is input_tokens + cache_creation_input_tokens + cache_read_input_tokens
// (Anthropic's input_tokens counts only the uncached rest), prompt_tokens_details.cached_tokens
// and Usage.CachedTokens are cache_read_input_tokens, Usage.CacheWriteTokens is
// cache_creation_input_tokens. The gateway prices each at the model's cached-input and
// cache-write prices (Anthropic bills cache writes at 1.25x the input price for 5 minutes, 2x
// for an hour: configure the one you use) and the rest at the input price.
//
// Errors: *app.UpstreamError for an HTTP error answer (Status, Header and Body exactly as
// received), a transport failure (Status 0, Timeout when a deadline expired), a 2xx answer that
// is not JSON (ErrBadResponse) or is an error object (ErrErrorEvent), or a request that cannot
// be translated (Status 400, ErrUnsupported).
func (c *Client) ChatCompletion(ctx context.Context, req *app.ProviderRequest) (*app.ProviderResponse, error) {
	body, rerr := translateRequest(req, false)
	if rerr != nil {
		return nil, c.unsupported(http.StatusBadRequest, rerr.param, rerr.message)
	}
	resp, err := c.do(ctx, body, false)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := upstream.ReadAll(resp.Body, resp.ContentLength, MaxResponseBody)
	if err != nil {
		return nil, c.transportError(ctx, fmt.Errorf("read answer: %w", err))
	}
	out, err := translateResponse(b, req.Model, c.now().Unix())
	if err != nil {
		return nil, &app.UpstreamError{Provider: c.name, Header: resp.Header, Body: limit(b), Err: err}
	}
	return out, nil
}

// ChatCompletionStream opens a streaming chat completion; see ChatCompletion for what is
// translated. It returns *app.UpstreamError when the request cannot be translated, the upstream
// answers with an HTTP error, does not answer, or answers with something other than an event
// stream. See Stream.Next for the errors of the stream itself.
func (c *Client) ChatCompletionStream(ctx context.Context, req *app.ProviderRequest) (app.Stream, error) {
	body, rerr := translateRequest(req, true)
	if rerr != nil {
		return nil, c.unsupported(http.StatusBadRequest, rerr.param, rerr.message)
	}
	resp, err := c.do(ctx, body, true)
	if err != nil {
		return nil, err
	}
	if ct := resp.Header.Get("Content-Type"); strings.HasPrefix(ct, "application/json") {
		defer resp.Body.Close()
		b, _ := upstream.ReadAll(resp.Body, -1, MaxErrorBody)
		return nil, &app.UpstreamError{Provider: c.name, Header: resp.Header, Body: b, Err: fmt.Errorf("%w: JSON instead of an event stream", ErrBadResponse)}
	}
	return c.newStream(ctx, resp, req.Model), nil
}

// Embeddings always fails: Anthropic has no embeddings API. The *app.UpstreamError has Status
// 404 and an OpenAI-shaped error body, and wraps ErrUnsupported; no request is sent.
func (c *Client) Embeddings(ctx context.Context, req *app.ProviderRequest) (*app.ProviderResponse, error) {
	return nil, c.unsupported(http.StatusNotFound, "model", "embeddings are not supported by this provider: Anthropic has no embeddings API")
}

// unsupported builds the synthesized answer for a request the Messages API cannot serve.
func (c *Client) unsupported(status int, param, message string) *app.UpstreamError {
	b := []byte(`{"error":{"message":`)
	b = appendString(b, message)
	b = append(b, `,"type":"invalid_request_error","param":`...)
	if param == "" {
		b = append(b, "null"...)
	} else {
		b = appendString(b, param)
	}
	b = append(b, `,"code":"unsupported_by_provider"}}`...)
	return &app.UpstreamError{
		Provider: c.name,
		Status:   status,
		Header:   http.Header{"Content-Type": {"application/json"}},
		Body:     b,
		Err:      fmt.Errorf("%w: %s", ErrUnsupported, message),
	}
}

// do sends the request and returns a 2xx response; any other outcome is an *app.UpstreamError.
func (c *Client) do(ctx context.Context, body []byte, stream bool) (*http.Response, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, &app.UpstreamError{Provider: c.name, Err: fmt.Errorf("build request: %w", err)}
	}
	for k, v := range c.header {
		hreq.Header[k] = v
	}
	if stream {
		hreq.Header["Accept"] = []string{"text/event-stream"}
	} else {
		hreq.Header["Accept"] = []string{"application/json"}
	}
	resp, err := c.hc.Do(hreq)
	if err != nil {
		return nil, c.transportError(ctx, fmt.Errorf("send request: %w", err))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, upstream.StatusError(c.name, resp, MaxErrorBody)
	}
	return resp, nil
}

// transportError wraps a failure to talk to the upstream; Timeout tells a deadline (the call's
// context or a network timeout) from other failures.
func (c *Client) transportError(ctx context.Context, err error) *app.UpstreamError {
	return upstream.TransportError(c.name, ctx, err)
}

func limit(b []byte) []byte {
	if len(b) > MaxErrorBody {
		return b[:MaxErrorBody]
	}
	return b
}
