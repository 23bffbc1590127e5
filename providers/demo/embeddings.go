package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"

	"yosan/app"
	"yosan/providers/openai"
)

// EmbeddingDims is the length of a demo embedding.
const EmbeddingDims = 16

type embeddingsRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
}

// Embeddings answers an embeddings request with deterministic unit vectors (16 dimensions, or
// fewer with "dimensions") derived from a hash of each input. input may be a string, an array
// of strings, an array of token ids or an array of token arrays; encoding_format "base64" is
// honoured. It returns *app.UpstreamError: Status 400 for a request OpenAI would reject, Status
// 0 when ctx ends during Latency.
func (p *Provider) Embeddings(ctx context.Context, req *app.ProviderRequest) (*app.ProviderResponse, error) {
	var er embeddingsRequest
	for k, v := range req.Body {
		var err error
		switch k {
		case "model":
			err = json.Unmarshal(v, &er.Model)
		case "input":
			er.Input = v
		case "encoding_format":
			err = json.Unmarshal(v, &er.EncodingFormat)
		case "dimensions":
			err = json.Unmarshal(v, &er.Dimensions)
		}
		if err != nil {
			return nil, badRequest(k, "Invalid value for '%s'.", k)
		}
	}
	if er.Model == "" {
		er.Model = req.Model
	}
	dims := EmbeddingDims
	if er.Dimensions != nil {
		if *er.Dimensions < 1 || *er.Dimensions > EmbeddingDims {
			return nil, badRequest("dimensions", "This model does not support specifying dimensions above %d or below 1.", EmbeddingDims)
		}
		dims = *er.Dimensions
	}
	if er.EncodingFormat != "" && er.EncodingFormat != "float" && er.EncodingFormat != "base64" {
		return nil, badRequest("encoding_format", "Invalid value for 'encoding_format': expected 'float' or 'base64'.")
	}
	inputs, promptTokens, ok := p.embeddingInputs(er.Model, er.Input)
	if !ok {
		return nil, badRequest("input", "'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference.")
	}
	if err := sleep(ctx, p.opts.Latency); err != nil {
		return nil, err
	}

	b := make([]byte, 0, 128+len(inputs)*(64+dims*12))
	b = append(b, `{"object":"list","data":[`...)
	for i, in := range inputs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"object":"embedding","index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"embedding":`...)
		b = openai.AppendEmbedding(b, openai.HashVector(in, dims), er.EncodingFormat == "base64")
		b = append(b, '}')
	}
	b = append(b, `],"model":`...)
	b = openai.AppendString(b, er.Model)
	b = append(b, `,"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, promptTokens, 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, promptTokens, 10)
	b = append(b, "}}"...)
	return &app.ProviderResponse{Body: b, Usage: app.Usage{PromptTokens: promptTokens}, HasUsage: true}, nil
}

// embeddingInputs splits input into the bytes each vector is derived from, and counts its
// tokens (a token array counts its length).
func (p *Provider) embeddingInputs(model string, raw json.RawMessage) ([][]byte, int64, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, 0, false
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "" {
			return nil, 0, false
		}
		return [][]byte{[]byte(s)}, p.count(model, s), true
	}
	var strs []string
	if json.Unmarshal(raw, &strs) == nil && len(strs) > 0 {
		out := make([][]byte, len(strs))
		var n int64
		for i, s := range strs {
			if s == "" {
				return nil, 0, false
			}
			out[i] = []byte(s)
			n += p.count(model, s)
		}
		return out, n, true
	}
	var ids []int64
	if json.Unmarshal(raw, &ids) == nil && len(ids) > 0 {
		return [][]byte{raw}, int64(len(ids)), true
	}
	var arrays [][]int64
	if json.Unmarshal(raw, &arrays) == nil && len(arrays) > 0 {
		out := make([][]byte, len(arrays))
		var n int64
		for i, a := range arrays {
			if len(a) == 0 {
				return nil, 0, false
			}
			out[i], _ = json.Marshal(a)
			n += int64(len(a))
		}
		return out, n, true
	}
	return nil, 0, false
}
