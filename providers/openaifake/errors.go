package openaifake

import "net/http"

// OpenAI's error bodies, byte for byte as the API sends them (indented with four spaces,
// trailing newline). The messages are the ones in the wire-format reference.
const (
	// BodyRateLimitTokens is a 429 for the tokens-per-minute limit.
	BodyRateLimitTokens = `{
    "error": {
        "message": "Rate limit reached for gpt-4o in organization org-yosanfake on tokens per min (TPM): Limit 150000, Used 149984, Requested 1200. Please try again in 20s. Visit https://platform.openai.com/account/rate-limits to learn more.",
        "type": "tokens",
        "param": null,
        "code": "rate_limit_exceeded"
    }
}
`
	// BodyRateLimitRequests is a 429 for the requests-per-minute limit.
	BodyRateLimitRequests = `{
    "error": {
        "message": "Rate limit reached for gpt-4o in organization org-yosanfake on requests per min (RPM): Limit 60, Used 60, Requested 1. Please try again in 644ms. Visit https://platform.openai.com/account/rate-limits to learn more.",
        "type": "requests",
        "param": null,
        "code": "rate_limit_exceeded"
    }
}
`
	// BodyInsufficientQuota is a 429 that no retry fixes: the account is out of credit.
	BodyInsufficientQuota = `{
    "error": {
        "message": "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.",
        "type": "insufficient_quota",
        "param": null,
        "code": "insufficient_quota"
    }
}
`
	// BodyServerError is OpenAI's 500.
	BodyServerError = `{
    "error": {
        "message": "The server had an error while processing your request. Sorry about that!",
        "type": "server_error",
        "param": null,
        "code": null
    }
}
`
	// BodyOverloaded is OpenAI's 503.
	BodyOverloaded = `{
    "error": {
        "message": "That model is currently overloaded with other requests. You can retry your request, or contact us through our help center at help.openai.com if the error persists. (Please include the request ID req_0fake0overloaded0 in your message.)",
        "type": "server_error",
        "param": null,
        "code": null
    }
}
`
	// BodyContextLengthExceeded is the 400 for a prompt longer than the model's context.
	BodyContextLengthExceeded = `{
    "error": {
        "message": "This model's maximum context length is 4097 tokens. However, your messages resulted in 4294 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded"
    }
}
`
	// BodyInvalidJSON is the 400 for a request body that is not JSON.
	BodyInvalidJSON = `{
    "error": {
        "message": "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON. If you have trouble figuring out how to fix this, please visit https://platform.openai.com/docs/guides/text?api-mode=chat or contact us through our help center at help.openai.com.)",
        "type": "invalid_request_error",
        "param": null,
        "code": null
    }
}
`
	// BodyInvalidAPIKey is the 401 for a wrong key.
	BodyInvalidAPIKey = `{
    "error": {
        "message": "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.",
        "type": "invalid_request_error",
        "param": null,
        "code": "invalid_api_key"
    }
}
`
	// StreamErrorEvent is the payload of the error event ErrorInStream sends after HTTP 200.
	StreamErrorEvent = `{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`
)

// rateLimitHeader carries the x-ratelimit-* headers of the reference. Retry-After is left out
// (OpenAI sends it only sometimes); add it to Response.Header to test that case.
func rateLimitHeader() http.Header {
	h := errorHeader()
	h.Set("x-ratelimit-limit-requests", "60")
	h.Set("x-ratelimit-limit-tokens", "150000")
	h.Set("x-ratelimit-remaining-requests", "59")
	h.Set("x-ratelimit-remaining-tokens", "149984")
	h.Set("x-ratelimit-reset-requests", "1s")
	h.Set("x-ratelimit-reset-tokens", "6m0s")
	return h
}

func errorHeader() http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("x-request-id", "req_0fake0error0")
	return h
}

// RateLimited returns a 429 rate_limit_exceeded (tokens per minute) with x-ratelimit-* headers.
func RateLimited() Response {
	return Response{Kind: Error, Status: http.StatusTooManyRequests, Header: rateLimitHeader(), Body: []byte(BodyRateLimitTokens)}
}

// RateLimitedRequests returns a 429 rate_limit_exceeded (requests per minute, retry in 644ms).
func RateLimitedRequests() Response {
	return Response{Kind: Error, Status: http.StatusTooManyRequests, Header: rateLimitHeader(), Body: []byte(BodyRateLimitRequests)}
}

// InsufficientQuota returns a 429 insufficient_quota.
func InsufficientQuota() Response {
	return Response{Kind: Error, Status: http.StatusTooManyRequests, Header: errorHeader(), Body: []byte(BodyInsufficientQuota)}
}

// ServerError returns a 500 server_error.
func ServerError() Response {
	return Response{Kind: Error, Status: http.StatusInternalServerError, Header: errorHeader(), Body: []byte(BodyServerError)}
}

// Overloaded returns a 503 server_error ("That model is currently overloaded...").
func Overloaded() Response {
	return Response{Kind: Error, Status: http.StatusServiceUnavailable, Header: errorHeader(), Body: []byte(BodyOverloaded)}
}

// ContextLengthExceeded returns a 400 context_length_exceeded (param "messages").
func ContextLengthExceeded() Response {
	return Response{Kind: Error, Status: http.StatusBadRequest, Header: errorHeader(), Body: []byte(BodyContextLengthExceeded)}
}
