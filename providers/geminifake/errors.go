package geminifake

import (
	"net/http"
	"strings"
)

// Gemini's error bodies, byte for byte as the API sends them: google.rpc.Status JSON indented
// with two spaces, with a trailing newline. Messages and details are the ones in the
// wire-format reference and in captures of real answers.
const (
	// BodyQuotaPerMinute is the 429 of a per-minute request quota (rate_limited: honour the
	// RetryInfo retryDelay).
	BodyQuotaPerMinute = `{
  "error": {
    "code": 429,
    "message": "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits. To monitor your current usage, head to: https://ai.dev/rate-limit. \n* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 10, model: gemini-2.5-flash\nPlease retry in 38.201782362s.",
    "status": "RESOURCE_EXHAUSTED",
    "details": [
      {
        "@type": "type.googleapis.com/google.rpc.Help",
        "links": [
          {
            "description": "Learn more about Gemini API quotas",
            "url": "https://ai.google.dev/gemini-api/docs/rate-limits"
          }
        ]
      },
      {
        "@type": "type.googleapis.com/google.rpc.QuotaFailure",
        "violations": [
          {
            "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
            "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
            "quotaDimensions": {
              "location": "global",
              "model": "gemini-2.5-flash"
            },
            "quotaValue": "10"
          }
        ]
      },
      {
        "@type": "type.googleapis.com/google.rpc.RetryInfo",
        "retryDelay": "38s"
      }
    ]
  }
}
`
	// BodyQuotaTokensPerMinute is the 429 of the per-minute input-token quota.
	BodyQuotaTokensPerMinute = `{
  "error": {
    "code": 429,
    "message": "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits. To monitor your current usage, head to: https://ai.dev/rate-limit. \n* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_input_token_count, limit: 250000, model: gemini-2.5-flash\nPlease retry in 0.2s.",
    "status": "RESOURCE_EXHAUSTED",
    "details": [
      {
        "@type": "type.googleapis.com/google.rpc.Help",
        "links": [
          {
            "description": "Learn more about Gemini API quotas",
            "url": "https://ai.google.dev/gemini-api/docs/rate-limits"
          }
        ]
      },
      {
        "@type": "type.googleapis.com/google.rpc.QuotaFailure",
        "violations": [
          {
            "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_input_token_count",
            "quotaId": "GenerateContentInputTokensPerModelPerMinute-FreeTier",
            "quotaDimensions": {
              "location": "global",
              "model": "gemini-2.5-flash"
            },
            "quotaValue": "250000"
          }
        ]
      },
      {
        "@type": "type.googleapis.com/google.rpc.RetryInfo",
        "retryDelay": "0.2s"
      }
    ]
  }
}
`
	// BodyQuotaPerDay is the 429 of the daily request quota (quota_exhausted until midnight
	// America/Los_Angeles: the RetryInfo of 26s is misleading here).
	BodyQuotaPerDay = `{
  "error": {
    "code": 429,
    "message": "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits. To monitor your current usage, head to: https://ai.dev/rate-limit. \n* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 20, model: gemini-2.5-flash\nPlease retry in 26.211922938s.",
    "status": "RESOURCE_EXHAUSTED",
    "details": [
      {
        "@type": "type.googleapis.com/google.rpc.Help",
        "links": [
          {
            "description": "Learn more about Gemini API quotas",
            "url": "https://ai.google.dev/gemini-api/docs/rate-limits"
          }
        ]
      },
      {
        "@type": "type.googleapis.com/google.rpc.QuotaFailure",
        "violations": [
          {
            "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
            "quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
            "quotaDimensions": {
              "location": "global",
              "model": "gemini-2.5-flash"
            },
            "quotaValue": "20"
          }
        ]
      },
      {
        "@type": "type.googleapis.com/google.rpc.RetryInfo",
        "retryDelay": "26s"
      }
    ]
  }
}
`
	// BodyResourceExhausted is the older 429 without details.
	BodyResourceExhausted = `{
  "error": {
    "code": 429,
    "message": "Resource has been exhausted (e.g. check quota).",
    "status": "RESOURCE_EXHAUSTED"
  }
}
`
	// BodyOverloaded is the 503 of an overloaded model (backend_error).
	BodyOverloaded = `{
  "error": {
    "code": 503,
    "message": "The model is overloaded. Please try again later.",
    "status": "UNAVAILABLE"
  }
}
`
	// BodyInternal is the 500 INTERNAL (backend_error).
	BodyInternal = `{
  "error": {
    "code": 500,
    "message": "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting",
    "status": "INTERNAL"
  }
}
`
	// BodyTokenLimitExceeded is the 400 of a prompt longer than the model's input limit
	// (request_too_large).
	BodyTokenLimitExceeded = `{
  "error": {
    "code": 400,
    "message": "The input token count (1196265) exceeds the maximum number of tokens allowed (1048576).",
    "status": "INVALID_ARGUMENT"
  }
}
`
	// BodyPermissionDenied is a 403 PERMISSION_DENIED for a key Google has blocked
	// (manual_action).
	BodyPermissionDenied = `{
  "error": {
    "code": 403,
    "message": "Your API key was reported as leaked. Please use another API key.",
    "status": "PERMISSION_DENIED"
  }
}
`
	// BodyAPIKeyInvalid is the 400 for a wrong API key (manual_action, although it is a 400).
	BodyAPIKeyInvalid = `{
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
	// BodyUnregisteredCaller is the 403 for a request without any API key.
	BodyUnregisteredCaller = `{
  "error": {
    "code": 403,
    "message": "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.",
    "status": "PERMISSION_DENIED"
  }
}
`
	// BodyInvalidJSON is the 400 for a request body that is not JSON (uncertain: the real
	// message goes on to quote the offending text).
	BodyInvalidJSON = `{
  "error": {
    "code": 400,
    "message": "Invalid JSON payload received. Unexpected token.",
    "status": "INVALID_ARGUMENT"
  }
}
`
	// BodyNotFound is the 404 for a model or method that does not exist.
	BodyNotFound = `{
  "error": {
    "code": 404,
    "message": "models/unknown is not found for API version v1beta, or is not supported for generateContent. Call ListModels to see the list of available models and their supported methods.",
    "status": "NOT_FOUND"
  }
}
`
)

// errorHeader is the header set of Google's API front end on an error answer. No Retry-After:
// Gemini puts its delay in RetryInfo.
func errorHeader() http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json; charset=UTF-8")
	h["Vary"] = []string{"Origin", "X-Origin", "Referer"}
	h.Set("Server", "scaffolding on HTTPServer2")
	h.Set("X-Xss-Protection", "0")
	h.Set("X-Frame-Options", "SAMEORIGIN")
	h.Set("X-Content-Type-Options", "nosniff")
	return h
}

func errorResponse(status int, body string) Response {
	return Response{Kind: Error, Status: status, Header: errorHeader(), Body: []byte(body)}
}

// QuotaPerMinute returns a 429 RESOURCE_EXHAUSTED for the per-minute request quota
// (QuotaFailure GenerateRequestsPerMinutePerProjectPerModel-FreeTier, RetryInfo 38s).
func QuotaPerMinute() Response {
	return errorResponse(http.StatusTooManyRequests, BodyQuotaPerMinute)
}

// QuotaTokensPerMinute returns a 429 RESOURCE_EXHAUSTED for the per-minute input-token quota
// (RetryInfo 0.2s).
func QuotaTokensPerMinute() Response {
	return errorResponse(http.StatusTooManyRequests, BodyQuotaTokensPerMinute)
}

// QuotaPerDay returns a 429 RESOURCE_EXHAUSTED for the daily request quota
// (QuotaFailure GenerateRequestsPerDayPerProjectPerModel-FreeTier, RetryInfo 26s).
func QuotaPerDay() Response {
	return errorResponse(http.StatusTooManyRequests, BodyQuotaPerDay)
}

// ResourceExhausted returns the older 429 RESOURCE_EXHAUSTED without details.
func ResourceExhausted() Response {
	return errorResponse(http.StatusTooManyRequests, BodyResourceExhausted)
}

// Overloaded returns a 503 UNAVAILABLE ("The model is overloaded.").
func Overloaded() Response {
	return errorResponse(http.StatusServiceUnavailable, BodyOverloaded)
}

// Internal returns a 500 INTERNAL.
func Internal() Response {
	return errorResponse(http.StatusInternalServerError, BodyInternal)
}

// TokenLimitExceeded returns a 400 INVALID_ARGUMENT for an input over the model's token limit.
func TokenLimitExceeded() Response {
	return errorResponse(http.StatusBadRequest, BodyTokenLimitExceeded)
}

// PermissionDenied returns a 403 PERMISSION_DENIED (a key reported as leaked).
func PermissionDenied() Response {
	return errorResponse(http.StatusForbidden, BodyPermissionDenied)
}

// APIKeyInvalid returns the 400 INVALID_ARGUMENT / API_KEY_INVALID of a wrong key.
func APIKeyInvalid() Response {
	return errorResponse(http.StatusBadRequest, BodyAPIKeyInvalid)
}

// ArrayWrapped returns r with its body wrapped in a JSON array, "[" + body + "]", as Gemini
// has been seen to send errors ([{"error": {...}}], on its streaming and OpenAI-compatible
// endpoints). The object keeps its indentation; its trailing newline moves before the "]".
func ArrayWrapped(r Response) Response {
	body := strings.TrimSuffix(string(r.Body), "\n")
	r.Body = []byte("[" + body + "\n]")
	return r
}
