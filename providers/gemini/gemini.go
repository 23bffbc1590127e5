// Package gemini is the client for Google's Gemini API in its native form (v1beta
// generateContent, streamGenerateContent and batchEmbedContents). It translates the gateway's
// OpenAI-shaped requests to Gemini requests and the answers back, so the rest of the gateway sees
// one wire format. Gemini's error answers are not translated: they reach the gateway (and its
// classifier) exactly as received.
package gemini

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"yosan/app"
	"yosan/providers/upstream"
)

// DefaultBaseURL is the Gemini API's root.
const DefaultBaseURL = "https://generativelanguage.googleapis.com"

// Limits on what the client reads.
const (
	// MaxErrorBody is how much of a non-2xx answer is kept.
	MaxErrorBody = 1 << 20
	// MaxResponseBody bounds a non-streaming 2xx answer (embedding batches are big).
	MaxResponseBody = 256 << 20
	// MaxEventSize bounds one SSE line or event of a stream.
	MaxEventSize = 8 << 20
)

// Errors a failed call wraps inside *app.UpstreamError.
var (
	// ErrBadResponse: a 2xx answer that is not the expected Gemini JSON (Status 0).
	ErrBadResponse = errors.New("upstream answer is not valid Gemini JSON")
	// ErrErrorEvent: an error object arrived inside a 2xx answer or a stream (Status 0).
	ErrErrorEvent = errors.New("upstream sent an error object")
	// ErrStreamBroken: the stream ended before every candidate had its finishReason (Status 0;
	// it wraps io.ErrUnexpectedEOF). Gemini sends no [DONE]: the finishReason is the only sign
	// that a stream is complete.
	ErrStreamBroken = fmt.Errorf("stream ended before its finishReason: %w", io.ErrUnexpectedEOF)
	// ErrUnsupported: the request uses something Gemini cannot be given (Status 400, with an
	// OpenAI-shaped invalid_request_error body that the gateway hands back to the caller). No
	// upstream call was made.
	ErrUnsupported = errors.New("request cannot be translated to Gemini")
)

// Config configures a Client.
type Config struct {
	// Name is the provider's name in errors (UpstreamError.Provider).
	Name string
	// BaseURL is the API root, DefaultBaseURL when empty. The client adds "/v1beta/models/...".
	BaseURL string
	// APIKey is sent as the x-goog-api-key header when not empty (never in the URL, where it
	// would end up in logs).
	APIKey string
	// HTTPClient defaults to a client with a connection pool sized for one busy upstream. Give
	// it no Timeout: a call's context bounds it, and streams run long.
	HTTPClient *http.Client
	// Now is the clock for the "created" field of the answers; nil means time.Now.
	Now func() time.Time
}

// Client is a Gemini upstream. It implements app.Provider and is safe for concurrent use.
type Client struct {
	name   string
	base   string
	apiKey []string
	hc     *http.Client
	now    func() time.Time
}

// New returns a Client for cfg.
func New(cfg Config) *Client {
	base := strings.TrimRight(cfg.BaseURL, "/")
	if base == "" {
		base = DefaultBaseURL
	}
	c := &Client{name: cfg.Name, base: base, hc: cfg.HTTPClient, now: cfg.Now}
	if cfg.APIKey != "" {
		c.apiKey = []string{cfg.APIKey}
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.hc == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		// The default keeps 2 idle connections per host: at thousands of calls per second to
		// one upstream that means a new TCP+TLS handshake for most calls.
		t.MaxIdleConns = 1024
		t.MaxIdleConnsPerHost = 512
		t.IdleConnTimeout = 90 * time.Second
		c.hc = &http.Client{Transport: t}
	}
	return c
}

// modelURL returns {base}/v1beta/models/{model}:{method}. A model already named with its
// collection ("models/x", "tunedModels/x") keeps it.
func (c *Client) modelURL(model, method string) string {
	name := modelName(model)
	i := strings.IndexByte(name, '/')
	return c.base + "/v1beta/" + name[:i+1] + url.PathEscape(name[i+1:]) + ":" + method
}

// modelName returns the resource name of a model: "models/<model>" unless it already has a
// collection prefix.
func modelName(model string) string {
	if strings.HasPrefix(model, "models/") || strings.HasPrefix(model, "tunedModels/") {
		return model
	}
	return "models/" + model
}

// ChatCompletion translates an OpenAI chat completion to generateContent and the answer back
// to a chat.completion ("stream" and "stream_options" are ignored). Its usage bills thinking
// tokens as output: completion_tokens = candidatesTokenCount + thoughtsTokenCount, because
// Google charges them at the output price.
//
// It returns *app.UpstreamError: Status 400 wrapping ErrUnsupported for a request that cannot
// be translated (no upstream call made); the HTTP error answer as received (Status, Header and
// Body, Gemini's {"error":{...}} or its array-wrapped form); a transport failure (Status 0,
// Timeout when a deadline expired); a 2xx answer that is not Gemini JSON (Status 0, wrapping
// ErrBadResponse) or that carries an error object (ErrErrorEvent).
func (c *Client) ChatCompletion(ctx context.Context, req *app.ProviderRequest) (*app.ProviderResponse, error) {
	body, err := c.translateChat(req)
	if err != nil {
		return nil, err
	}
	resp, err := c.do(ctx, c.modelURL(req.Model, "generateContent"), body, false)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := upstream.ReadAll(resp.Body, resp.ContentLength, MaxResponseBody)
	if err != nil {
		return nil, c.transportError(ctx, fmt.Errorf("read answer: %w", err))
	}
	var gr generateResponse
	if err := json.Unmarshal(b, &gr); err != nil {
		return nil, &app.UpstreamError{Provider: c.name, Header: resp.Header, Body: limit(b), Err: fmt.Errorf("%w: %w", ErrBadResponse, err)}
	}
	if isError(gr.Error) {
		return nil, &app.UpstreamError{Provider: c.name, Header: resp.Header, Body: limit(b), Err: fmt.Errorf("%w: %s", ErrErrorEvent, errorMessage(gr.Error))}
	}
	out := &app.ProviderResponse{Body: c.completion(req.Model, &gr)}
	if gr.UsageMetadata != nil {
		out.Usage, out.HasUsage = gr.UsageMetadata.usage(), true
	}
	return out, nil
}

// ChatCompletionStream translates an OpenAI chat completion to streamGenerateContent?alt=sse
// and returns its events as chat.completion.chunk events, ending with a usage-only chunk. It
// returns the errors of ChatCompletion before the stream opens; see Stream.Next for the errors
// after.
func (c *Client) ChatCompletionStream(ctx context.Context, req *app.ProviderRequest) (app.Stream, error) {
	body, err := c.translateChat(req)
	if err != nil {
		return nil, err
	}
	resp, err := c.do(ctx, c.modelURL(req.Model, "streamGenerateContent")+"?alt=sse", body, true)
	if err != nil {
		return nil, err
	}
	if ct := resp.Header.Get("Content-Type"); strings.HasPrefix(ct, "application/json") {
		// Without alt=sse (or from a proxy that ignores it) the answer is one JSON array.
		defer resp.Body.Close()
		b, _ := upstream.ReadAll(resp.Body, -1, MaxErrorBody)
		return nil, &app.UpstreamError{Provider: c.name, Header: resp.Header, Body: b, Err: fmt.Errorf("%w: JSON instead of an event stream", ErrBadResponse)}
	}
	return newStream(ctx, c, resp, req.Model), nil
}

// do sends the request and returns a 2xx response; any other outcome is an *app.UpstreamError.
func (c *Client) do(ctx context.Context, url string, body []byte, stream bool) (*http.Response, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, &app.UpstreamError{Provider: c.name, Err: fmt.Errorf("build request: %w", err)}
	}
	hreq.Header["Content-Type"] = []string{"application/json"}
	if stream {
		hreq.Header["Accept"] = []string{"text/event-stream"}
	} else {
		hreq.Header["Accept"] = []string{"application/json"}
	}
	if c.apiKey != nil {
		hreq.Header["X-Goog-Api-Key"] = c.apiKey
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

// unsupported is the refusal of a request that cannot be translated: a 400 in OpenAI's shape,
// which the gateway hands back to the caller unchanged (the caller speaks OpenAI).
func (c *Client) unsupported(param, format string, args ...any) *app.UpstreamError {
	msg := fmt.Sprintf(format, args...)
	var p any
	if param != "" {
		p = param
	}
	body, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": msg, "type": "invalid_request_error", "param": p, "code": "unsupported_by_gemini",
	}})
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	return &app.UpstreamError{Provider: c.name, Status: http.StatusBadRequest, Header: h, Body: body, Err: fmt.Errorf("%w: %s", ErrUnsupported, msg)}
}

func limit(b []byte) []byte {
	if len(b) > MaxErrorBody {
		return b[:MaxErrorBody]
	}
	return b
}

// isError reports whether raw is an error value (anything but absent or null).
func isError(raw json.RawMessage) bool {
	return len(raw) > 0 && string(raw) != "null"
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
