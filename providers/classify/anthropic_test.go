package classify

import (
	"net/http"
	"testing"
	"time"

	"yosan/app"
)

func anthropicError(typ, message string) string {
	return `{"type":"error","error":{"type":"` + typ + `","message":"` + message + `"},"request_id":"req_011CZLrUfBVkVHn5T6EqQaf7"}`
}

// anthropicRateHeader is a 429's header set: request-id and the anthropic-ratelimit-* family
// (resets in RFC 3339), plus kv.
func anthropicRateHeader(kv ...string) http.Header {
	h := hdr("Content-Type", "application/json", "request-id", "req_011CZLrUfBVkVHn5T6EqQaf7",
		"anthropic-ratelimit-requests-limit", "50", "anthropic-ratelimit-requests-remaining", "49",
		"anthropic-ratelimit-requests-reset", "2025-08-21T12:40:01Z",
		"anthropic-ratelimit-tokens-limit", "48000", "anthropic-ratelimit-tokens-remaining", "1000",
		"anthropic-ratelimit-tokens-reset", "2025-08-21T12:40:40Z",
		"anthropic-ratelimit-input-tokens-limit", "40000", "anthropic-ratelimit-input-tokens-remaining", "0",
		"anthropic-ratelimit-input-tokens-reset", "2025-08-21T12:40:59Z",
		"anthropic-ratelimit-output-tokens-limit", "8000", "anthropic-ratelimit-output-tokens-remaining", "8000",
		"anthropic-ratelimit-output-tokens-reset", "2025-08-21T12:40:00Z")
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func anthropicCases() []tc {
	// The reference's reset time is 2025-08-21T12:40:59Z: these cases run a minute before it.
	t0 := time.Date(2025, 8, 21, 12, 39, 59, 0, time.UTC)
	const rateMsg = "This request would exceed the rate limit for your organization (3f7c1a9e-5b1d-4c8e-9a51-0d5c2b7e8f14) of 40,000 input tokens per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits. You can see the response headers for current usage. Please reduce the prompt length or the maximum tokens requested, or try again later."
	return []tc{
		{name: "RateLimitRetryAfter", kind: Anthropic, status: 429, header: anthropicRateHeader("retry-after", "30"), body: anthropicError("rate_limit_error", rateMsg), now: t0,
			class: app.ClassRateLimited, code: "rate_limit_error", retry: 30 * time.Second},
		{name: "RateLimitResetHeaderOfNamedLimit", kind: Anthropic, status: 429, header: anthropicRateHeader(), body: anthropicError("rate_limit_error", rateMsg), now: t0,
			class: app.ClassRateLimited, code: "rate_limit_error", reset: time.Date(2025, 8, 21, 12, 40, 59, 0, time.UTC)},
		{name: "RateLimitResetHeaderOfExhaustedLimit", kind: Anthropic, status: 429,
			header: anthropicRateHeader("anthropic-ratelimit-input-tokens-remaining", "5", "anthropic-ratelimit-tokens-remaining", "0"),
			body:   anthropicError("rate_limit_error", "Number of request tokens has exceeded your rate limit."), now: t0,
			class: app.ClassRateLimited, code: "rate_limit_error", reset: time.Date(2025, 8, 21, 12, 40, 40, 0, time.UTC)},
		{name: "RateLimitResetHeaderLatestWhenNoneExhausted", kind: Anthropic, status: 429,
			header: anthropicRateHeader("anthropic-ratelimit-input-tokens-remaining", "5"),
			body:   anthropicError("rate_limit_error", "Number of request tokens has exceeded your rate limit."), now: t0,
			class: app.ClassRateLimited, code: "rate_limit_error", reset: time.Date(2025, 8, 21, 12, 40, 59, 0, time.UTC)},
		{name: "RateLimitResetInPastDropped", kind: Anthropic, status: 429, header: anthropicRateHeader(), body: anthropicError("rate_limit_error", rateMsg),
			class: app.ClassRateLimited, code: "rate_limit_error"},
		{name: "RateLimitNoHeaders", kind: Anthropic, status: 429, body: anthropicError("rate_limit_error", "Extra usage is required for long context requests."),
			class: app.ClassRateLimited, code: "rate_limit_error"},
		{name: "SpendLimitReached", kind: Anthropic, status: 429,
			body:  `{"type":"error","error":{"type":"rate_limit_error","message":"Your organization has reached its monthly spend limit.","details":{"error_code":"enforced_spend_limit_reached"}},"request_id":"req_011CZLrVFahaMRBtV6YDxYiH"}`,
			class: app.ClassQuotaExhausted, code: "enforced_spend_limit_reached", reset: time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)},
		{name: "SpendLimitReachedInDecember", kind: Anthropic, status: 429, now: time.Date(2026, 12, 31, 23, 0, 0, 0, time.UTC),
			body:  `{"type":"error","error":{"type":"rate_limit_error","message":"Spend limit reached.","details":{"error_code":"enforced_spend_limit_reached"}}}`,
			class: app.ClassQuotaExhausted, code: "enforced_spend_limit_reached", reset: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)},
		{name: "UsageLimitsRegainAccess400", kind: Anthropic, status: 400,
			body:  anthropicError("invalid_request_error", "You have reached your specified API usage limits. You will regain access on 2026-06-01 at 00:00 UTC."),
			class: app.ClassQuotaExhausted, code: "invalid_request_error", reset: time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)},
		{name: "UsageLimitRateLimitError", kind: Anthropic, status: 429, header: hdr("retry-after", "60"),
			body:  anthropicError("rate_limit_error", "You have reached your usage limit for this workspace."),
			class: app.ClassQuotaExhausted, code: "rate_limit_error", retry: time.Minute},
		{name: "CreditBalanceTooLow400", kind: Anthropic, status: 400,
			body:  anthropicError("invalid_request_error", "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."),
			class: app.ClassManualAction, code: "invalid_request_error"},
		{name: "BillingError402", kind: Anthropic, status: 402, body: anthropicError("billing_error", "Billing issue."),
			class: app.ClassManualAction, code: "billing_error"},
		{name: "Overloaded529", kind: Anthropic, status: 529, body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			class: app.ClassBackendError, code: "overloaded_error"},
		{name: "APIError500", kind: Anthropic, status: 500, body: anthropicError("api_error", "Internal server error"),
			class: app.ClassBackendError, code: "api_error"},
		{name: "TimeoutError504", kind: Anthropic, status: 504, body: anthropicError("timeout_error", "Request timed out"),
			class: app.ClassBackendError, code: "timeout_error"},
		{name: "InvalidRequest400", kind: Anthropic, status: 400, body: anthropicError("invalid_request_error", "max_tokens: Field required"),
			class: app.ClassClientError, code: "invalid_request_error"},
		{name: "PromptTooLong400", kind: Anthropic, status: 400, body: anthropicError("invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum"),
			class: app.ClassRequestTooLarge, code: "invalid_request_error"},
		{name: "RequestTooLarge413", kind: Anthropic, status: 413, body: anthropicError("request_too_large", "Request exceeds the maximum allowed number of bytes."),
			class: app.ClassRequestTooLarge, code: "request_too_large"},
		{name: "Authentication401", kind: Anthropic, status: 401, body: anthropicError("authentication_error", "invalid x-api-key"),
			class: app.ClassManualAction, code: "authentication_error"},
		{name: "Permission403", kind: Anthropic, status: 403, body: anthropicError("permission_error", "Your API key does not have permission to use the specified resource."),
			class: app.ClassManualAction, code: "permission_error"},
		{name: "NotFound404", kind: Anthropic, status: 404, body: anthropicError("not_found_error", "model: claude-x"),
			class: app.ClassClientError, code: "not_found_error"},
		{name: "ZhipuThroughAnthropicEndpoint", kind: Anthropic, status: 429,
			body:  `{"type":"error","error":{"type":"rate_limit_error","code":"1302","message":"[1302][Rate limit reached for requests][20260509190000a1b2c3d4]"}}`,
			class: app.ClassRateLimited, code: "1302"},
		{name: "ZhipuThroughAnthropicEndpointNoCode", kind: Anthropic, status: 429,
			body:  `{"type":"error","error":{"type":"rate_limit_error","message":"[1308][已达到 5 小时的使用上限。您的限额将在 2026-05-09 20:42:25 重置。]"}}`,
			class: app.ClassQuotaExhausted, code: "1308", reset: time.Date(2026, 5, 9, 12, 42, 25, 0, time.UTC)},
	}
}

func TestClassifyAnthropic(t *testing.T) { runCases(t, anthropicCases()) }
