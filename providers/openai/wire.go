package openai

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"hash/fnv"
	"math"
	"strconv"

	"yosan/app"
)

// The encoders below write the answer side of the OpenAI wire format. The built-in demo
// provider and the test fake (openaifake) both answer in it, byte for byte the same way.

// AppendString appends s as a JSON string.
func AppendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}

// AppendUsage appends a chat completion's usage object with every detail field OpenAI sends.
func AppendUsage(b []byte, u app.Usage) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, u.PromptTokens, 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, u.CompletionTokens, 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, u.PromptTokens+u.CompletionTokens, 10)
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, u.CachedTokens, 10)
	b = append(b, `,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`...)
	return b
}

// AppendEmbedding appends v as OpenAI encodes an embedding: a JSON array of numbers, or with
// asBase64 a JSON string of the little-endian float32 bytes in standard base64.
func AppendEmbedding(b []byte, v []float32, asBase64 bool) []byte {
	if asBase64 {
		raw := make([]byte, 4*len(v))
		for i, f := range v {
			binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(f))
		}
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, raw)
		return append(b, '"')
	}
	b = append(b, '[')
	for i, f := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendFloat(b, float64(f), 'g', -1, 32)
	}
	return append(b, ']')
}

// HashVector returns a deterministic unit vector of dims dimensions for input: the embedding
// that offline providers (the demo, the test fake) give it.
func HashVector(input []byte, dims int) []float32 {
	h := fnv.New64a()
	_, _ = h.Write(input)
	x := h.Sum64()
	v := make([]float32, dims)
	var norm float64
	for i := range v {
		x += 0x9e3779b97f4a7c15 // splitmix64
		z := x
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		z ^= z >> 31
		f := float64(z>>11)/float64(1<<53)*2 - 1
		v[i] = float32(f)
		norm += f * f
	}
	if norm > 0 {
		n := math.Sqrt(norm)
		for i := range v {
			v[i] = float32(float64(v[i]) / n)
		}
	}
	return v
}
