// Package zhipu is the client for Zhipu's GLM models (open.bigmodel.cn, and z.ai outside China).
// Zhipu speaks the OpenAI chat completions format at its own base URL, so this is a thin wrapper
// over providers/openai that evens out the few places where it differs:
//
//   - A stream's usage arrives on its last content chunk (the one with finish_reason), even with
//     include_usage set, instead of an extra "choices": [] chunk. The wrapper splits that chunk
//     in two, as OpenAI sends them: the content chunk with "usage": null, then a usage-only
//     chunk. So the gateway drops the usage for a caller who did not ask for it exactly as it
//     does for OpenAI.
//   - Two finish reasons have an OpenAI name: "sensitive" (Zhipu's content filter) becomes
//     "content_filter" and "model_context_window_exceeded" becomes "length". OpenAI clients
//     do not know Zhipu's names and some loop on them. "network_error" (the model failed
//     mid-answer) has no OpenAI equivalent and is relayed as it is.
//
// reasoning_content deltas (GLM thinking) are counted as generated text by providers/openai.
// Errors are not touched: Zhipu's bodies ({"error":{"code":"1302","message":"..."}}, the code a
// string) reach the classifier in *app.UpstreamError exactly as they came.
package zhipu

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"

	"yosan/app"
	"yosan/providers/openai"
)

// Zhipu's API roots. The coding endpoints serve the GLM Coding Plan subscriptions, the others
// pay-as-you-go keys; a key works only at its own kind of endpoint.
const (
	BaseURLChina        = "https://open.bigmodel.cn/api/paas/v4"
	BaseURLGlobal       = "https://api.z.ai/api/paas/v4"
	BaseURLCodingChina  = "https://open.bigmodel.cn/api/coding/paas/v4"
	BaseURLCodingGlobal = "https://api.z.ai/api/coding/paas/v4"
)

// Config configures a Client.
type Config struct {
	// Name is the provider's name in errors (UpstreamError.Provider).
	Name string
	// BaseURL is the API root (one of the BaseURL constants, or a fake's); BaseURLChina when
	// empty.
	BaseURL string
	// APIKey is sent as a Bearer token.
	APIKey string
	// HTTPClient is passed to providers/openai (see openai.Config).
	HTTPClient *http.Client
}

// Client is a Zhipu GLM upstream. It implements app.Provider and is safe for concurrent use.
type Client struct {
	c *openai.Client
}

var _ app.Provider = (*Client)(nil)

// New returns a Client for cfg.
func New(cfg Config) *Client {
	if cfg.BaseURL == "" {
		cfg.BaseURL = BaseURLChina
	}
	return &Client{c: openai.New(openai.Config{Name: cfg.Name, BaseURL: cfg.BaseURL, APIKey: cfg.APIKey, HTTPClient: cfg.HTTPClient})}
}

// ChatCompletion sends a non-streaming chat completion. Its errors are those of
// openai.Client.ChatCompletion: *app.UpstreamError for an HTTP error answer (Status, Header and
// Body exactly as Zhipu sent them), a transport failure or a 2xx answer that is not valid.
func (c *Client) ChatCompletion(ctx context.Context, req *app.ProviderRequest) (*app.ProviderResponse, error) {
	resp, err := c.c.ChatCompletion(ctx, req)
	if err != nil {
		return nil, err
	}
	resp.Body = renameFinishReasons(resp.Body)
	return resp, nil
}

// Embeddings sends an embeddings request (Zhipu's embedding-2/-3 answer in the OpenAI shape);
// its errors are those of ChatCompletion.
func (c *Client) Embeddings(ctx context.Context, req *app.ProviderRequest) (*app.ProviderResponse, error) {
	return c.c.Embeddings(ctx, req)
}

// ChatCompletionStream opens a streaming chat completion. It returns *app.UpstreamError when
// Zhipu answers with an HTTP error (the body as it came), does not answer, or answers with
// something other than an event stream. Next returns the errors of openai.Stream.Next.
func (c *Client) ChatCompletionStream(ctx context.Context, req *app.ProviderRequest) (app.Stream, error) {
	s, err := c.c.ChatCompletionStream(ctx, req)
	if err != nil {
		return nil, err
	}
	return &stream{s: s}, nil
}

// stream moves the usage of Zhipu's last content chunk into a chunk of its own.
type stream struct {
	s       app.Stream
	pending *app.StreamChunk // the usage-only chunk split off the previous one
}

// Next returns the next chunk; see ChatCompletionStream.
func (s *stream) Next() (app.StreamChunk, error) {
	if p := s.pending; p != nil {
		s.pending = nil
		return *p, nil
	}
	ch, err := s.s.Next()
	if err != nil {
		return ch, err
	}
	ch.Data = renameFinishReasons(ch.Data)
	if ch.Usage != nil && !ch.UsageOnly {
		if content, usageOnly, ok := splitUsage(ch.Data); ok {
			s.pending = &app.StreamChunk{Data: usageOnly, Usage: ch.Usage, UsageOnly: true}
			ch.Data, ch.Usage = content, nil
		}
	}
	return ch, nil
}

// Close closes the upstream stream.
func (s *stream) Close() error { return s.s.Close() }

// finishRenames maps Zhipu's own finish reasons to OpenAI's. The patterns include both quotes
// and the colon, which inside a JSON string would be escaped, so they only match the field.
var finishRenames = [...]struct{ from, to []byte }{
	{[]byte(`"finish_reason":"sensitive"`), []byte(`"finish_reason":"content_filter"`)},
	{[]byte(`"finish_reason":"model_context_window_exceeded"`), []byte(`"finish_reason":"length"`)},
}

func renameFinishReasons(b []byte) []byte {
	for _, r := range finishRenames {
		if bytes.Contains(b, r.from) {
			b = bytes.ReplaceAll(b, r.from, r.to)
		}
	}
	return b
}

// splitUsage turns a chunk carrying choices and a usage object into the chunk with
// "usage": null and a usage-only chunk ({id, object, created, model, system_fingerprint as they
// came, "choices": [], usage}). ok is false when data is not a JSON object with a usage
// value; the caller then leaves the chunk as it is.
func splitUsage(data []byte) (content, usageOnly []byte, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, nil, false
	}
	head := []byte{'{'}
	var usage json.RawMessage
	start, end := -1, -1
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, nil, false
		}
		key, _ := t.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, false
		}
		switch key {
		case "usage":
			end = int(dec.InputOffset())
			start = end - len(raw)
			if start < 0 || !bytes.Equal(data[start:end], raw) {
				return nil, nil, false
			}
			usage = raw
		case "id", "object", "created", "model", "system_fingerprint":
			if len(head) > 1 {
				head = append(head, ',')
			}
			head = openai.AppendString(head, key)
			head = append(head, ':')
			head = append(head, raw...)
		}
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') || usage == nil || string(usage) == "null" {
		return nil, nil, false
	}
	content = make([]byte, 0, len(data)-len(usage)+4)
	content = append(content, data[:start]...)
	content = append(content, "null"...)
	content = append(content, data[end:]...)
	if len(head) > 1 {
		head = append(head, ',')
	}
	usageOnly = append(head, `"choices":[],"usage":`...)
	usageOnly = append(usageOnly, usage...)
	usageOnly = append(usageOnly, '}')
	return content, usageOnly, true
}
