package anthropicfake

import (
	"net/http"
	"strconv"
)

// Anthropic's error bodies, byte for byte as the API sends them: compact JSON, no trailing
// newline, the envelope {"type":"error","error":{"type","message"},"request_id"} of the
// wire-format reference. Each carries its own request id, repeated in the request-id header.
const (
	// BodyRateLimited is the 429 for the input-tokens-per-minute limit.
	BodyRateLimited = `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization (5c0ffee5-0fa4-4e00-8a4e-000000000429) of 40,000 input tokens per minute. For details, refer to: https://docs.anthropic.com/en/api/rate-limits. You can see the response headers for current usage. Please reduce the prompt length or the maximum tokens requested, or try again later. You may also contact sales at https://www.anthropic.com/contact-sales to discuss your options for a rate limit increase."},"request_id":"` + RequestIDRateLimited + `"}`
	// BodySpendLimited is the 429 of the monthly spend limit: no retry-after, it lasts until
	// 00:00 UTC on the 1st of the next month.
	BodySpendLimited = `{"type":"error","error":{"type":"rate_limit_error","message":"You have reached your API usage limits: your organization has crossed its monthly API usage threshold, set based on your organization's API tier. You will regain access on 2026-09-01 at 00:00 UTC.","details":{"error_code":"enforced_spend_limit_reached"}},"request_id":"` + RequestIDSpendLimited + `"}`
	// BodyOverloaded is the 529.
	BodyOverloaded = `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"` + RequestIDOverloaded + `"}`
	// BodyAPIError is the 500.
	BodyAPIError = `{"type":"error","error":{"type":"api_error","message":"Internal server error"},"request_id":"` + RequestIDAPIError + `"}`
	// BodyPromptTooLong is the 400 for a prompt longer than the model's context window.
	BodyPromptTooLong = `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"},"request_id":"` + RequestIDPromptTooLong + `"}`
	// BodyCreditBalanceTooLow is the 400 of an account without credit (a human must act).
	BodyCreditBalanceTooLow = `{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."},"request_id":"` + RequestIDCreditBalance + `"}`
	// BodyInvalidAPIKey is the 401 for a wrong x-api-key.
	BodyInvalidAPIKey = `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"},"request_id":"` + RequestIDAuthentication + `"}`
	// BodyMissingAPIKey is the 401 for a request without x-api-key.
	BodyMissingAPIKey = `{"type":"error","error":{"type":"authentication_error","message":"x-api-key header is required"},"request_id":"` + RequestIDAuthentication + `"}`
	// BodyMissingVersion is the answer to a request without anthropic-version: the real API
	// says 400 invalid_request_error, not 401.
	BodyMissingVersion = `{"type":"error","error":{"type":"invalid_request_error","message":"anthropic-version: header is required"},"request_id":"` + RequestIDInvalidRequest + `"}`
	// BodyMaxTokensRequired is the 400 for a request without max_tokens.
	BodyMaxTokensRequired = `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"},"request_id":"` + RequestIDInvalidRequest + `"}`
	// BodyNotFound is the 404 for a path the API does not serve.
	BodyNotFound = `{"type":"error","error":{"type":"not_found_error","message":"Not Found"},"request_id":"` + RequestIDInvalidRequest + `"}`

	// StreamOverloadedEvent is the data of the "event: error" that ErrorInStream sends after
	// HTTP 200 (the reference marks the in-stream shape uncertain; this is the same envelope).
	StreamOverloadedEvent = `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"` + RequestIDStream + `"}`
)

// The request ids of the scripted answers (request-id header and request_id field).
const (
	RequestIDSuccess        = "req_011CFakeSuccess0000000000"
	RequestIDRateLimited    = "req_011CFakeRateLimited0000000"
	RequestIDSpendLimited   = "req_011CFakeSpendLimited000000"
	RequestIDOverloaded     = "req_011CFakeOverloaded00000000"
	RequestIDAPIError       = "req_011CFakeApiError0000000000"
	RequestIDPromptTooLong  = "req_011CFakePromptTooLong00000"
	RequestIDCreditBalance  = "req_011CFakeCreditBalance00000"
	RequestIDAuthentication = "req_011CFakeAuthentication0000"
	RequestIDInvalidRequest = "req_011CFakeInvalidRequest0000"
	RequestIDStream         = "req_011CFakeStreamError0000000"
)

// OrganizationID is the anthropic-organization-id header of every answer.
const OrganizationID = "5c0ffee5-0fa4-4e00-8a4e-000000000429"

// RetryAfter is the retry-after header (seconds) of RateLimited.
const RetryAfter = "13"

// RateLimitReset is the reset time of every anthropic-ratelimit-*-reset header (RFC 3339).
const RateLimitReset = "2025-08-21T12:40:59Z"

// errorHeader is what every error answer carries.
func errorHeader(requestID string, shouldRetry bool) http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("request-id", requestID)
	h.Set("anthropic-organization-id", OrganizationID)
	h.Set("x-should-retry", strconv.FormatBool(shouldRetry))
	return h
}

// setRateLimit adds the anthropic-ratelimit-* headers; inputRemaining is what is left of the
// 40,000 input tokens per minute.
func setRateLimit(h http.Header, inputRemaining int) {
	for _, l := range [...]struct {
		name             string
		limit, remaining int
	}{
		{"requests", 50, 49},
		{"tokens", 48000, 8000 + inputRemaining},
		{"input-tokens", 40000, inputRemaining},
		{"output-tokens", 8000, 8000},
	} {
		h.Set("anthropic-ratelimit-"+l.name+"-limit", strconv.Itoa(l.limit))
		h.Set("anthropic-ratelimit-"+l.name+"-remaining", strconv.Itoa(l.remaining))
		h.Set("anthropic-ratelimit-"+l.name+"-reset", RateLimitReset)
	}
}

// RateLimited returns a 429 rate_limit_error (input tokens per minute) with retry-after and the
// anthropic-ratelimit-* headers.
func RateLimited() Response {
	h := errorHeader(RequestIDRateLimited, true)
	h.Set("retry-after", RetryAfter)
	setRateLimit(h, 0)
	return Response{Kind: Error, Status: http.StatusTooManyRequests, Header: h, Body: []byte(BodyRateLimited)}
}

// SpendLimited returns the 429 of the monthly spend limit (details.error_code
// enforced_spend_limit_reached, no retry-after).
func SpendLimited() Response {
	return Response{Kind: Error, Status: http.StatusTooManyRequests, Header: errorHeader(RequestIDSpendLimited, false), Body: []byte(BodySpendLimited)}
}

// Overloaded returns a 529 overloaded_error.
func Overloaded() Response {
	return Response{Kind: Error, Status: 529, Header: errorHeader(RequestIDOverloaded, true), Body: []byte(BodyOverloaded)}
}

// APIError returns a 500 api_error.
func APIError() Response {
	return Response{Kind: Error, Status: http.StatusInternalServerError, Header: errorHeader(RequestIDAPIError, true), Body: []byte(BodyAPIError)}
}

// PromptTooLong returns a 400 invalid_request_error "prompt is too long".
func PromptTooLong() Response {
	return Response{Kind: Error, Status: http.StatusBadRequest, Header: errorHeader(RequestIDPromptTooLong, false), Body: []byte(BodyPromptTooLong)}
}

// CreditBalanceTooLow returns the 400 of an account without credit.
func CreditBalanceTooLow() Response {
	return Response{Kind: Error, Status: http.StatusBadRequest, Header: errorHeader(RequestIDCreditBalance, false), Body: []byte(BodyCreditBalanceTooLow)}
}

// Unauthorized returns a 401 authentication_error "invalid x-api-key".
func Unauthorized() Response {
	return Response{Kind: Error, Status: http.StatusUnauthorized, Header: errorHeader(RequestIDAuthentication, false), Body: []byte(BodyInvalidAPIKey)}
}

// StreamOverloaded returns a stream that sends message_start, then an "event: error"
// overloaded_error before any content, and ends.
func StreamOverloaded() Response {
	return Response{Kind: ErrorInStream, After: 1}
}

// BrokenStream returns a stream that sends after events, then drops the connection.
func BrokenStream(after int) Response {
	return Response{Kind: BreakStream, After: after}
}

// HangingStream returns an answer that sends after stream events (nothing for a non-streaming
// request), then sends nothing more until the client goes away.
func HangingStream(after int) Response {
	return Response{Kind: Hang, After: after}
}
