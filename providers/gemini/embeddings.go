package gemini

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"yosan/app"
	"yosan/providers/openai"
	"yosan/providers/upstream"
)

type embedRequest struct {
	Requests []embedContentRequest `json:"requests"`
}

type embedContentRequest struct {
	Model                string          `json:"model"`
	Content              content         `json:"content"`
	OutputDimensionality json.RawMessage `json:"outputDimensionality,omitempty"`
}

type embedResponse struct {
	Embeddings []struct {
		Values []float32 `json:"values"`
	} `json:"embeddings"`
	Error json.RawMessage `json:"error"`
}

// Embeddings translates an OpenAI embeddings request (input a string or an array of strings;
// dimensions; encoding_format float or base64) to one batchEmbedContents call and the answer
// to an OpenAI embeddings list.
//
// Gemini reports no token count for embeddings, so the answer has no "usage" and HasUsage is
// false: the gateway settles on its own estimate of the input, the only honest number there is
// (a made-up usage here would look measured).
//
// It returns the errors of ChatCompletion; input given as token ids is refused with a 400
// (ErrUnsupported): Gemini's tokens are not OpenAI's.
func (c *Client) Embeddings(ctx context.Context, req *app.ProviderRequest) (*app.ProviderResponse, error) {
	inputs, err := c.embedInputs(req.Body["input"])
	if err != nil {
		return nil, err
	}
	var format string
	if v, ok := req.Body["encoding_format"]; ok && !isNull(v) {
		_ = json.Unmarshal(v, &format)
		if format != "float" && format != "base64" {
			return nil, c.unsupported("encoding_format", "encoding_format must be float or base64")
		}
	}
	var dims json.RawMessage
	if v, ok := req.Body["dimensions"]; ok && !isNull(v) {
		dims = v
	}
	er := embedRequest{Requests: make([]embedContentRequest, len(inputs))}
	name := modelName(req.Model)
	for i, in := range inputs {
		er.Requests[i] = embedContentRequest{Model: name, Content: content{Parts: []part{textPart(in)}}, OutputDimensionality: dims}
	}
	body, err := json.Marshal(&er)
	if err != nil {
		return nil, c.unsupported("", "encode the Gemini request: %v", err)
	}

	resp, err := c.do(ctx, c.modelURL(req.Model, "batchEmbedContents"), body, false)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := upstream.ReadAll(resp.Body, resp.ContentLength, MaxResponseBody)
	if err != nil {
		return nil, c.transportError(ctx, fmt.Errorf("read answer: %w", err))
	}
	var gr embedResponse
	if err := json.Unmarshal(b, &gr); err != nil {
		return nil, &app.UpstreamError{Provider: c.name, Header: resp.Header, Body: limit(b), Err: fmt.Errorf("%w: %w", ErrBadResponse, err)}
	}
	if isError(gr.Error) {
		return nil, &app.UpstreamError{Provider: c.name, Header: resp.Header, Body: limit(b), Err: fmt.Errorf("%w: %s", ErrErrorEvent, errorMessage(gr.Error))}
	}
	if len(gr.Embeddings) != len(inputs) {
		return nil, &app.UpstreamError{Provider: c.name, Header: resp.Header, Body: limit(b),
			Err: fmt.Errorf("%w: %d embeddings for %d inputs", ErrBadResponse, len(gr.Embeddings), len(inputs))}
	}

	dimsLen := 0
	if len(gr.Embeddings) > 0 {
		dimsLen = len(gr.Embeddings[0].Values)
	}
	out := make([]byte, 0, 64+len(inputs)*(48+dimsLen*12))
	out = append(out, `{"object":"list","data":[`...)
	for i, e := range gr.Embeddings {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, `{"object":"embedding","index":`...)
		out = strconv.AppendInt(out, int64(i), 10)
		out = append(out, `,"embedding":`...)
		out = openai.AppendEmbedding(out, e.Values, format == "base64")
		out = append(out, '}')
	}
	out = append(out, `],"model":`...)
	out = openai.AppendString(out, req.Model)
	out = append(out, '}')
	return &app.ProviderResponse{Body: out}, nil
}

// embedInputs returns the texts of an embeddings input: a string or an array of strings.
func (c *Client) embedInputs(raw json.RawMessage) ([]string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return []string{s}, nil
	}
	var ss []string
	if err := json.Unmarshal(raw, &ss); err == nil && len(ss) > 0 {
		return ss, nil
	}
	return nil, c.unsupported("input", "'input' must be a string or an array of strings for Gemini (token ids cannot be translated)")
}
