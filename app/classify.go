package app

import "time"

// ErrorClass says what kind of failure an upstream answer is, and so what the gateway does
// next (DESIGN.md section 7): retry the same candidate, fall back to the next, cool the
// provider down, or hand the answer back to the caller.
type ErrorClass string

// Error classes.
const (
	// ClassRateLimited: short throttling (per-minute limits, "too many requests"); retry the
	// same candidate a little later, then fall back. Cooldown ~90 s or Retry-After.
	ClassRateLimited ErrorClass = "rate_limited"
	// ClassQuotaExhausted: a daily / 5-hour / weekly / monthly window is used up; cool down
	// until ResetAt and fall back at once.
	ClassQuotaExhausted ErrorClass = "quota_exhausted"
	// ClassManualAction: no balance, plan expired, invalid or revoked key: a human must act.
	// Long cooldown (7 days or until an admin clears it), fall back at once.
	ClassManualAction ErrorClass = "manual_action"
	// ClassBackendError: 5xx, 529 overloaded, timeouts, connection errors, a stream broken
	// before its first byte. Retry once, then fall back.
	ClassBackendError ErrorClass = "backend_error"
	// ClassSchemaInvalid: an answer that does not parse or breaks the contract. Fall back.
	ClassSchemaInvalid ErrorClass = "schema_invalid"
	// ClassRequestTooLarge: the request alone exceeds what this candidate accepts (context
	// window, a quota window's limit). Fall back at once; if every candidate says so, 400.
	ClassRequestTooLarge ErrorClass = "request_too_large"
	// ClassClientError: the caller's fault (bad parameters): passed back unchanged, no fallback,
	// no cooldown.
	ClassClientError ErrorClass = "client_error"
)

// Classification is what the classifier read from one failed upstream call.
type Classification struct {
	Class ErrorClass
	// Code is the provider's own error code or type ("1113", "rate_limit_error",
	// "RESOURCE_EXHAUSTED", "insufficient_quota"), "" when none.
	Code string
	// ResetAt is when the provider said the limit resets (zero when it did not say), parsed
	// from headers, Gemini's RetryInfo or the message text.
	ResetAt time.Time
	// RetryAfter is a short wait the provider asked for (Retry-After), zero when none.
	RetryAfter time.Duration
	// Message is the provider's message, one line, for the cooldown row and the logs.
	Message string
}
