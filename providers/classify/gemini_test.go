package classify

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"yosan/app"
)

// geminiDaily is the reference's native 429 for the free tier's daily requests.
const geminiDaily = `{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits. To monitor your current usage, head to: https://ai.dev/usage?tab=rate-limit. \n* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 20, model: gemini-x\nPlease retry in 26.211922938s.","status":"RESOURCE_EXHAUSTED",
 "details":[{"@type":"type.googleapis.com/google.rpc.Help","links":[{"description":"Learn more about Gemini API quotas","url":"https://ai.google.dev/gemini-api/docs/rate-limits"}]},
  {"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier","quotaDimensions":{"location":"global","model":"gemini-x"},"quotaValue":"20"}]},
  {"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"26s"}]}}`

// geminiQuota is a native 429 with one QuotaFailure violation and, when retryDelay is not
// empty, a RetryInfo.
func geminiQuota(quotaID, retryDelay, message string) string {
	retry := ""
	if retryDelay != "" {
		retry = `,{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"` + retryDelay + `"}`
	}
	return `{"error":{"code":429,"message":"` + message + `","status":"RESOURCE_EXHAUSTED","details":[` +
		`{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"` + quotaID + `","quotaDimensions":{"location":"global","model":"gemini-x"},"quotaValue":"10"}]}` +
		retry + `]}}`
}

func geminiError(code int, status, message string) string {
	return `{"error":{"code":` + strconv.Itoa(code) + `,"message":"` + message + `","status":"` + status + `"}}`
}

const geminiKeyInvalidBody = `{
  "error": {
    "code": 400,
    "message": "API key not valid. Please pass a valid API key.",
    "status": "INVALID_ARGUMENT",
    "details": [
      {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": "API_KEY_INVALID",
        "domain": "googleapis.com",
        "metadata": {
          "service": "generativelanguage.googleapis.com"
        }
      },
      {
        "@type": "type.googleapis.com/google.rpc.LocalizedMessage",
        "locale": "en-US",
        "message": "API key not valid. Please pass a valid API key."
      }
    ]
  }
}
`

func geminiCases() []tc {
	// Midnight in Los Angeles after now (03:00 PDT on 2026-05-09) is 2026-05-10 07:00 UTC.
	pdtMidnight := time.Date(2026, 5, 10, 7, 0, 0, 0, time.UTC)
	perMinute := "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"
	return []tc{
		{name: "DailyQuota", kind: Gemini, status: 429, header: hdr("Content-Type", "application/json; charset=UTF-8"), body: geminiDaily,
			class: app.ClassQuotaExhausted, code: "RESOURCE_EXHAUSTED", reset: pdtMidnight},
		{name: "DailyQuotaInWinter", kind: Gemini, status: 429, body: geminiDaily, now: time.Date(2026, 1, 15, 10, 0, 0, 0, time.UTC),
			class: app.ClassQuotaExhausted, code: "RESOURCE_EXHAUSTED", reset: time.Date(2026, 1, 16, 8, 0, 0, 0, time.UTC)},
		{name: "DailyQuotaOnDSTStart", kind: Gemini, status: 429, body: geminiDaily, now: time.Date(2026, 3, 8, 9, 0, 0, 0, time.UTC),
			class: app.ClassQuotaExhausted, code: "RESOURCE_EXHAUSTED", reset: time.Date(2026, 3, 9, 7, 0, 0, 0, time.UTC)},
		{name: "DailyQuotaJustBeforeMidnight", kind: Gemini, status: 429, body: geminiDaily, now: time.Date(2026, 5, 10, 6, 59, 59, 0, time.UTC),
			class: app.ClassQuotaExhausted, code: "RESOURCE_EXHAUSTED", reset: pdtMidnight},
		{name: "DailyQuotaRetryAfterHeader", kind: Gemini, status: 429, header: hdr("Retry-After", "26"), body: geminiDaily,
			class: app.ClassQuotaExhausted, code: "RESOURCE_EXHAUSTED", reset: pdtMidnight, retry: 26 * time.Second},
		{name: "PerMinuteRetryInfo38.2s", kind: Gemini, status: 429, body: geminiQuota(perMinute, "38.2s", "Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 10"),
			class: app.ClassRateLimited, code: "RESOURCE_EXHAUSTED", retry: 38200 * time.Millisecond},
		{name: "PerMinuteRetryInfo0.2s", kind: Gemini, status: 429, body: geminiQuota(perMinute, "0.2s", "Quota exceeded"),
			class: app.ClassRateLimited, code: "RESOURCE_EXHAUSTED", retry: 200 * time.Millisecond},
		{name: "PerMinuteRetryInfo17s", kind: Gemini, status: 429, body: geminiQuota(perMinute, "17s", "Quota exceeded"),
			class: app.ClassRateLimited, code: "RESOURCE_EXHAUSTED", retry: 17 * time.Second},
		{name: "PaidTierInputTokensPerMinute", kind: Gemini, status: 429, body: geminiQuota("GenerateContentPaidTierInputTokensPerModelPerMinute", "5s", "Quota exceeded"),
			class: app.ClassRateLimited, code: "RESOURCE_EXHAUSTED", retry: 5 * time.Second},
		{name: "PerMinuteWaitFromMessage", kind: Gemini, status: 429, body: geminiQuota(perMinute, "", "Quota exceeded.\\nPlease retry in 26.211922938s."),
			class: app.ClassRateLimited, code: "RESOURCE_EXHAUSTED", retry: 26211922938 * time.Nanosecond},
		{name: "OlderBodyNoDetails", kind: Gemini, status: 429, body: `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}`,
			class: app.ClassRateLimited, code: "RESOURCE_EXHAUSTED"},
		{name: "ErrorInfoRateLimitExceededPerMinute", kind: Gemini, status: 429,
			body:  `{"error":{"code":429,"message":"Quota exceeded for quota metric 'Generate Content API requests per minute' and limit 'GenerateContent request limit per minute for a region' of service 'generativelanguage.googleapis.com' for consumer 'project_number:696498078762'.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"RATE_LIMIT_EXCEEDED","domain":"googleapis.com","metadata":{"quota_limit":"GenerateContentRequestsPerMinutePerProjectPerRegion","service":"generativelanguage.googleapis.com"}}]}}`,
			class: app.ClassRateLimited, code: "RESOURCE_EXHAUSTED"},
		{name: "ArrayWrappedDaily", kind: Gemini, status: 429, body: "[" + geminiDaily + "]",
			class: app.ClassQuotaExhausted, code: "RESOURCE_EXHAUSTED", reset: pdtMidnight},
		{name: "ArrayWrappedOverCompatibleEndpointKindOpenAI", kind: OpenAI, status: 429, body: "[" + geminiDaily + "]",
			class: app.ClassQuotaExhausted, code: "RESOURCE_EXHAUSTED", reset: pdtMidnight},
		{name: "ArrayWrappedVertex", kind: Gemini, status: 429,
			body:  "[{\n  \"error\": {\n    \"code\": 429,\n    \"message\": \"Resource exhausted. Please try again later. Please refer to https://cloud.google.com/vertex-ai/generative-ai/docs/error-code-429 for more details.\",\n    \"status\": \"RESOURCE_EXHAUSTED\"\n  }\n}\n]",
			class: app.ClassRateLimited, code: "RESOURCE_EXHAUSTED"},
		{name: "Unavailable503", kind: Gemini, status: 503, body: geminiError(503, "UNAVAILABLE", "The model is overloaded. Please try again later."),
			class: app.ClassBackendError, code: "UNAVAILABLE"},
		{name: "Internal500", kind: Gemini, status: 500, body: geminiError(500, "INTERNAL", "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting"),
			class: app.ClassBackendError, code: "INTERNAL"},
		{name: "DeadlineExceeded504", kind: Gemini, status: 504, body: geminiError(504, "DEADLINE_EXCEEDED", "Deadline expired before operation could complete."),
			class: app.ClassBackendError, code: "DEADLINE_EXCEEDED"},
		{name: "APIKeyInvalid400", kind: Gemini, status: 400, body: geminiKeyInvalidBody,
			class: app.ClassManualAction, code: "INVALID_ARGUMENT"},
		{name: "APIKeyInvalidNestedInCompatibleError", kind: OpenAI, status: 400,
			body:  `[{"error":{"message":` + jsonQuote(geminiKeyInvalidBody) + `,"code":400,"status":"Bad Request"}}]`,
			class: app.ClassManualAction, code: "INVALID_ARGUMENT"},
		{name: "PermissionDenied403", kind: Gemini, status: 403, body: geminiError(403, "PERMISSION_DENIED", "Your API key was reported as leaked. Please use another API key."),
			class: app.ClassManualAction, code: "PERMISSION_DENIED"},
		{name: "FailedPreconditionBilling", kind: Gemini, status: 400, body: geminiError(400, "FAILED_PRECONDITION", "Gemini API free tier is not available in your country. Please enable billing on your project in Google AI Studio."),
			class: app.ClassManualAction, code: "FAILED_PRECONDITION"},
		{name: "ExceedsMaximumTokens", kind: Gemini, status: 400, body: geminiError(400, "INVALID_ARGUMENT", "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."),
			class: app.ClassRequestTooLarge, code: "INVALID_ARGUMENT"},
		{name: "InvalidArgument", kind: Gemini, status: 400, body: geminiError(400, "INVALID_ARGUMENT", "* GenerateContentRequest.contents: contents is not specified"),
			class: app.ClassClientError, code: "INVALID_ARGUMENT"},
		{name: "NotFound404", kind: Gemini, status: 404, body: geminiError(404, "NOT_FOUND", "models/gemini-9 is not found for API version v1beta, or is not supported for generateContent."),
			class: app.ClassClientError, code: "NOT_FOUND"},
	}
}

// jsonQuote is s as a JSON string.
func jsonQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

func TestClassifyGemini(t *testing.T) { runCases(t, geminiCases()) }
