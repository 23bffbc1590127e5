// Package openai is the client for any upstream that speaks the OpenAI chat completions and
// embeddings API (OpenAI itself, Ollama, vLLM, ...). It relays bodies as they are and decodes
// only what the gateway needs: the usage, and for streams the generated text.
package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"yosan/app"
	"yosan/providers/upstream"
)

// Limits on what the client reads.
const (
	// MaxErrorBody is how much of a non-2xx answer is kept.
	MaxErrorBody = 1 << 20
	// MaxResponseBody bounds a non-streaming 2xx answer (large embedding batches are big).
	MaxResponseBody = 256 << 20
	// MaxEventSize bounds one SSE line or event of a stream.
	MaxEventSize = 8 << 20
)

// Errors a failed call wraps (inside *app.UpstreamError, Status 0).
var (
	// ErrBadResponse: a 2xx answer that is not the expected JSON.
	ErrBadResponse = errors.New("upstream answer is not valid OpenAI JSON")
	// ErrErrorEvent: an error object arrived inside a 2xx answer or a stream.
	ErrErrorEvent = errors.New("upstream sent an error object")
	// ErrStreamBroken: the stream ended without data: [DONE] (it wraps io.ErrUnexpectedEOF).
	ErrStreamBroken = fmt.Errorf("stream ended before [DONE]: %w", io.ErrUnexpectedEOF)
)

// Config configures a Client.
type Config struct {
	// Name is the provider's name in errors (UpstreamError.Provider).
	Name string
	// BaseURL is the API root, e.g. "https://api.openai.com/v1" or "http://localhost:11434/v1".
	BaseURL string
	// APIKey is sent as a Bearer token when not empty.
	APIKey string
	// HTTPClient defaults to a client with a connection pool sized for one busy upstream. Give
	// it no Timeout: a call's context bounds it, and streams run long.
	HTTPClient *http.Client
}

// Client is an OpenAI-compatible upstream. It implements app.Provider and is safe for
// concurrent use.
type Client struct {
	name      string
	chatURL   string
	embedURL  string
	authValue []string
	hc        *http.Client
}

// New returns a Client for cfg.
func New(cfg Config) *Client {
	base := strings.TrimRight(cfg.BaseURL, "/")
	c := &Client{name: cfg.Name, chatURL: base + "/chat/completions", embedURL: base + "/embeddings", hc: cfg.HTTPClient}
	if cfg.APIKey != "" {
		c.authValue = []string{"Bearer " + cfg.APIKey}
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

// ChatCompletion sends a non-streaming chat completion ("stream" and "stream_options" are
// dropped from the body). It returns *app.UpstreamError for an HTTP error answer (Status, Header
// and Body set), a transport failure (Status 0, Timeout when a deadline expired) or a 2xx answer
// that is not JSON (Status 0, wrapping ErrBadResponse) or carries an error object (ErrErrorEvent).
func (c *Client) ChatCompletion(ctx context.Context, req *app.ProviderRequest) (*app.ProviderResponse, error) {
	return c.call(ctx, c.chatURL, marshalBody(req.Body, modeNoStream))
}

// Embeddings sends an embeddings request; errors are those of ChatCompletion. The usage has
// prompt tokens only.
func (c *Client) Embeddings(ctx context.Context, req *app.ProviderRequest) (*app.ProviderResponse, error) {
	return c.call(ctx, c.embedURL, marshalBody(req.Body, modeAsIs))
}

func (c *Client) call(ctx context.Context, url string, body []byte) (*app.ProviderResponse, error) {
	resp, err := c.do(ctx, url, body, false)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := upstream.ReadAll(resp.Body, resp.ContentLength, MaxResponseBody)
	if err != nil {
		return nil, c.transportError(ctx, fmt.Errorf("read answer: %w", err))
	}
	var r responseJSON
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, &app.UpstreamError{Provider: c.name, Header: resp.Header, Body: limit(b), Err: fmt.Errorf("%w: %w", ErrBadResponse, err)}
	}
	if isError(r.Error) {
		return nil, &app.UpstreamError{Provider: c.name, Header: resp.Header, Body: limit(b), Err: ErrErrorEvent}
	}
	out := &app.ProviderResponse{Body: b}
	if r.Usage != nil {
		out.Usage, out.HasUsage = r.Usage.usage(), true
	}
	return out, nil
}

// ChatCompletionStream opens a streaming chat completion ("stream": true is forced; the caller
// sets stream_options). It returns *app.UpstreamError when the upstream answers with an HTTP
// error, does not answer, or answers with something other than an event stream. See Stream for
// the errors of Next.
func (c *Client) ChatCompletionStream(ctx context.Context, req *app.ProviderRequest) (app.Stream, error) {
	resp, err := c.do(ctx, c.chatURL, marshalBody(req.Body, modeStream), true)
	if err != nil {
		return nil, err
	}
	if ct := resp.Header.Get("Content-Type"); strings.HasPrefix(ct, "application/json") {
		// Some compatible servers answer a stream request with a plain JSON error and HTTP 200.
		defer resp.Body.Close()
		b, _ := upstream.ReadAll(resp.Body, -1, MaxErrorBody)
		return nil, &app.UpstreamError{Provider: c.name, Header: resp.Header, Body: b, Err: fmt.Errorf("%w: JSON instead of an event stream", ErrBadResponse)}
	}
	return newStream(ctx, c, resp), nil
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
	if c.authValue != nil {
		hreq.Header["Authorization"] = c.authValue
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

// responseJSON is the part of a completion or embeddings answer the gateway reads.
type responseJSON struct {
	Usage *usageJSON      `json:"usage"`
	Error json.RawMessage `json:"error"`
}

type usageJSON struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func (u *usageJSON) usage() app.Usage {
	out := app.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens}
	if u.PromptTokensDetails != nil {
		out.CachedTokens = u.PromptTokensDetails.CachedTokens
	}
	return out
}

// isError reports whether raw is an error value (anything but absent or null).
func isError(raw json.RawMessage) bool {
	return len(raw) > 0 && string(raw) != "null"
}

type marshalMode int

const (
	modeAsIs     marshalMode = iota
	modeNoStream             // drop "stream" and "stream_options"
	modeStream               // force "stream": true
)

// marshalBody writes the body object with its values as they are: they come from decoding the
// caller's JSON, so there is nothing to validate again (json.Marshal would re-scan every value).
// Keys are sorted so the bytes are deterministic.
func marshalBody(body map[string]json.RawMessage, mode marshalMode) []byte {
	keys := make([]string, 0, len(body)+1)
	size := 2
	for k, v := range body {
		if k == "stream" || mode == modeNoStream && k == "stream_options" {
			if mode != modeAsIs {
				continue
			}
		}
		keys = append(keys, k)
		size += len(k) + len(v) + 4
	}
	slices.Sort(keys)
	b := make([]byte, 0, size+16)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendKey(b, k)
		if v := body[k]; len(v) > 0 {
			b = append(b, v...)
		} else {
			b = append(b, "null"...)
		}
	}
	if mode == modeStream {
		if len(keys) > 0 {
			b = append(b, ',')
		}
		b = append(b, `"stream":true`...)
	}
	return append(b, '}')
}

func appendKey(b []byte, k string) []byte {
	for i := 0; i < len(k); i++ {
		if c := k[i]; c < 0x20 || c == '"' || c == '\\' {
			q, _ := json.Marshal(k)
			return append(append(b, q...), ':')
		}
	}
	b = append(b, '"')
	b = append(b, k...)
	return append(b, '"', ':')
}
