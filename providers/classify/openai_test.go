package classify

import (
	"net/http"
	"testing"
	"time"

	"yosan/app"
	"yosan/providers/openaifake"
)

// openaiRateHeader is the reference's header set of a 429 (x-ratelimit-* with Go durations).
func openaiRateHeader(kv ...string) http.Header {
	h := hdr("Content-Type", "application/json", "x-request-id", "req_0fake0error0",
		"x-ratelimit-limit-requests", "60", "x-ratelimit-limit-tokens", "150000",
		"x-ratelimit-remaining-requests", "59", "x-ratelimit-remaining-tokens", "149984",
		"x-ratelimit-reset-requests", "1s", "x-ratelimit-reset-tokens", "6m0s")
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func openaiError(message, typ, code string) string {
	c := "null"
	if code != "" {
		c = `"` + code + `"`
	}
	return `{
    "error": {
        "message": "` + message + `",
        "type": "` + typ + `",
        "param": null,
        "code": ` + c + `
    }
}
`
}

func openaiCases() []tc {
	const noWait = "Rate limit reached for gpt-4o in organization org-yosanfake on tokens per min (TPM): Limit 150000, Used 149984, Requested 1200. Visit https://platform.openai.com/account/rate-limits to learn more."
	return []tc{
		{name: "RateLimitTokensWaitFromMessage", kind: OpenAI, status: 429, header: openaiRateHeader(), body: openaifake.BodyRateLimitTokens,
			class: app.ClassRateLimited, code: "rate_limit_exceeded", retry: 20 * time.Second},
		{name: "RateLimitRequests644ms", kind: OpenAI, status: 429, header: openaiRateHeader(), body: openaifake.BodyRateLimitRequests,
			class: app.ClassRateLimited, code: "rate_limit_exceeded", retry: 644 * time.Millisecond},
		{name: "RateLimitTokensResetHeader6m0s", kind: OpenAI, status: 429, header: openaiRateHeader(), body: openaiError(noWait, "tokens", "rate_limit_exceeded"),
			class: app.ClassRateLimited, code: "rate_limit_exceeded", reset: now.Add(6 * time.Minute)},
		{name: "RateLimitRequestsResetHeader1s", kind: OpenAI, status: 429, header: openaiRateHeader(), body: openaiError("Rate limit reached for requests", "requests", "rate_limit_exceeded"),
			class: app.ClassRateLimited, code: "rate_limit_exceeded", reset: now.Add(time.Second)},
		{name: "RateLimitResetHeader20ms", kind: OpenAI, status: 429, header: openaiRateHeader("x-ratelimit-reset-requests", "20ms"), body: openaiError("Rate limit reached for requests", "requests", "rate_limit_exceeded"),
			class: app.ClassRateLimited, code: "rate_limit_exceeded", reset: now.Add(20 * time.Millisecond)},
		{name: "RateLimitResetHeader1h2m3s", kind: OpenAI, status: 429, header: openaiRateHeader("x-ratelimit-reset-tokens", "1h2m3s"), body: openaiError(noWait, "tokens", "rate_limit_exceeded"),
			class: app.ClassRateLimited, code: "rate_limit_exceeded", reset: now.Add(time.Hour + 2*time.Minute + 3*time.Second)},
		{name: "RateLimitUnknownTypeExhaustedHeader", kind: OpenAI, status: 429,
			header: openaiRateHeader("x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "12ms"), body: openaiError("Rate limit reached", "", "rate_limit_exceeded"),
			class: app.ClassRateLimited, code: "rate_limit_exceeded", reset: now.Add(12 * time.Millisecond)},
		{name: "RateLimitRetryAfterBeatsMessage", kind: OpenAI, status: 429, header: openaiRateHeader("Retry-After", "7"), body: openaifake.BodyRateLimitTokens,
			class: app.ClassRateLimited, code: "rate_limit_exceeded", retry: 7 * time.Second},
		{name: "RateLimitRetryAfterMs", kind: OpenAI, status: 429, header: openaiRateHeader("retry-after-ms", "1500"), body: openaiError(noWait, "tokens", "rate_limit_exceeded"),
			class: app.ClassRateLimited, code: "rate_limit_exceeded", retry: 1500 * time.Millisecond},
		{name: "RateLimitRetryAfterHTTPDate", kind: OpenAI, status: 429, header: openaiRateHeader("Retry-After", now.Add(90*time.Second).Format(http.TimeFormat)), body: openaiError(noWait, "tokens", "rate_limit_exceeded"),
			class: app.ClassRateLimited, code: "rate_limit_exceeded", retry: 90 * time.Second},
		{name: "RateLimitHeadersOmitted", kind: OpenAI, status: 429, body: openaiError(noWait, "tokens", "rate_limit_exceeded"),
			class: app.ClassRateLimited, code: "rate_limit_exceeded"},
		{name: "RateLimitNoCodeTypeRequests", kind: OpenAI, status: 429, body: openaiError("Rate limit reached for requests", "requests", ""),
			class: app.ClassRateLimited, code: "requests"},
		{name: "RequestsPerDay", kind: OpenAI, status: 429, header: openaiRateHeader(),
			body:  openaiError("Rate limit reached for gpt-4o in organization org-yosanfake on requests per day (RPD): Limit 200, Used 200, Requested 1. Please try again in 7m12s. Visit https://platform.openai.com/account/rate-limits to learn more.", "requests", "rate_limit_exceeded"),
			class: app.ClassQuotaExhausted, code: "rate_limit_exceeded", reset: now.Add(7*time.Minute + 12*time.Second)},
		{name: "TokensPerDayNoWait", kind: OpenAI, status: 429,
			body:  openaiError("Rate limit reached for gpt-4o in organization org-yosanfake on tokens per day (TPD): Limit 90000, Used 90000, Requested 10.", "tokens", "rate_limit_exceeded"),
			class: app.ClassQuotaExhausted, code: "rate_limit_exceeded"},
		{name: "RequestTooLargeForTPM", kind: OpenAI, status: 429, header: openaiRateHeader(),
			body:  openaiError("Request too large for gpt-4o in organization org-yosanfake on tokens per min (TPM): Limit 30000, Requested 36278. The input or output tokens must be reduced in order to run successfully. Visit https://platform.openai.com/account/rate-limits to learn more.", "tokens", "rate_limit_exceeded"),
			class: app.ClassRequestTooLarge, code: "rate_limit_exceeded"},
		{name: "InsufficientQuota", kind: OpenAI, status: 429, header: hdr("Content-Type", "application/json"), body: openaifake.BodyInsufficientQuota,
			class: app.ClassManualAction, code: "insufficient_quota"},
		{name: "InsufficientQuotaOlderNullCode", kind: OpenAI, status: 429, body: openaiError("You exceeded your current quota, please check your plan and billing details.", "insufficient_quota", ""),
			class: app.ClassManualAction, code: "insufficient_quota"},
		{name: "InsufficientQuotaWithRetryAfter", kind: OpenAI, status: 429, header: hdr("Retry-After", "20"), body: openaifake.BodyInsufficientQuota,
			class: app.ClassManualAction, code: "insufficient_quota"},
		{name: "CreditBalanceExhausted", kind: OpenAI, status: 429, body: openaiError("Your credit balance is exhausted.", "insufficient_quota", "credit_balance_exhausted"),
			class: app.ClassManualAction, code: "credit_balance_exhausted"},
		{name: "OrganizationSpendLimit", kind: OpenAI, status: 429, body: openaiError("Organization spend limit exceeded.", "insufficient_quota", "organization_spend_limit_exceeded"),
			class: app.ClassManualAction, code: "organization_spend_limit_exceeded"},
		{name: "ProjectSpendLimit", kind: OpenAI, status: 429, body: openaiError("Project spend limit exceeded.", "insufficient_quota", "project_spend_limit_exceeded"),
			class: app.ClassManualAction, code: "project_spend_limit_exceeded"},
		{name: "OrganizationUsageLimit", kind: OpenAI, status: 429, body: openaiError("Organization usage limit exceeded.", "insufficient_quota", "organization_usage_limit_exceeded"),
			class: app.ClassManualAction, code: "organization_usage_limit_exceeded"},
		{name: "BillingHardLimit400", kind: OpenAI, status: 400, body: openaiError("Billing hard limit has been reached", "invalid_request_error", "billing_hard_limit_reached"),
			class: app.ClassManualAction, code: "billing_hard_limit_reached"},
		{name: "ServerError500", kind: OpenAI, status: 500, header: hdr("Content-Type", "application/json"), body: openaifake.BodyServerError,
			class: app.ClassBackendError, code: "server_error"},
		{name: "Overloaded503", kind: OpenAI, status: 503, body: openaifake.BodyOverloaded,
			class: app.ClassBackendError, code: "server_error"},
		{name: "ContextLengthExceeded", kind: OpenAI, status: 400, body: openaifake.BodyContextLengthExceeded,
			class: app.ClassRequestTooLarge, code: "context_length_exceeded"},
		{name: "InvalidJSON400", kind: OpenAI, status: 400, body: openaifake.BodyInvalidJSON,
			class: app.ClassClientError, code: "invalid_request_error"},
		{name: "InvalidAPIKey401", kind: OpenAI, status: 401, body: openaifake.BodyInvalidAPIKey,
			class: app.ClassManualAction, code: "invalid_api_key"},
		{name: "UnsupportedCountry403", kind: OpenAI, status: 403, body: openaiError("Country, region, or territory not supported", "request_forbidden", "unsupported_country_region_territory"),
			class: app.ClassManualAction, code: "unsupported_country_region_territory"},
		{name: "ModelNotFound404", kind: OpenAI, status: 404, body: openaiError("The model `gpt-9` does not exist or you do not have access to it.", "invalid_request_error", "model_not_found"),
			class: app.ClassClientError, code: "model_not_found"},
	}
}

func TestClassifyOpenAI(t *testing.T) { runCases(t, openaiCases()) }

// TestClassifyOpenAIFake reads each scripted error of the OpenAI fake exactly as it sends it,
// headers included.
func TestClassifyOpenAIFake(t *testing.T) {
	cases := []struct {
		name  string
		resp  openaifake.Response
		class app.ErrorClass
		retry time.Duration
	}{
		{"RateLimited", openaifake.RateLimited(), app.ClassRateLimited, 20 * time.Second},
		{"RateLimitedRequests", openaifake.RateLimitedRequests(), app.ClassRateLimited, 644 * time.Millisecond},
		{"InsufficientQuota", openaifake.InsufficientQuota(), app.ClassManualAction, 0},
		{"ServerError", openaifake.ServerError(), app.ClassBackendError, 0},
		{"Overloaded", openaifake.Overloaded(), app.ClassBackendError, 0},
		{"ContextLengthExceeded", openaifake.ContextLengthExceeded(), app.ClassRequestTooLarge, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := &app.UpstreamError{Provider: "fake", Status: c.resp.Status, Header: c.resp.Header, Body: c.resp.Body}
			got := Classify(OpenAI, e, now)
			if got.Class != c.class || got.RetryAfter != c.retry || !got.ResetAt.IsZero() {
				t.Errorf("got %s retry=%v reset=%v, want %s retry=%v", got.Class, got.RetryAfter, got.ResetAt, c.class, c.retry)
			}
		})
	}
}
