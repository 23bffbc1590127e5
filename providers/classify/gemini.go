package classify

import (
	"strings"
	"time"

	"yosan/app"
)

// geminiPacific is the zone Gemini's daily quotas reset in (midnight, DST-aware).
const geminiPacific = "America/Los_Angeles"

// geminiRule reads Gemini's canonical statuses and details (also through its
// OpenAI-compatible endpoint, and Vertex's array-wrapped bodies):
//   - RESOURCE_EXHAUSTED: a QuotaFailure whose quotaId names a day ("...PerDay...") is
//     quota_exhausted until midnight America/Los_Angeles (its RetryInfo is ignored: it is a
//     per-minute figure); anything else (PerMinute, no details) is rate_limited with the
//     RetryInfo retryDelay, or the "Please retry in 26.2s." of the message, as RetryAfter;
//   - an invalid or expired API key (ErrorInfo API_KEY_INVALID, a 400 INVALID_ARGUMENT),
//     PERMISSION_DENIED, UNAUTHENTICATED, FAILED_PRECONDITION (free tier not available in the
//     country: billing must be enabled): manual_action;
//   - "exceeds the maximum number of tokens": request_too_large.
//
// UNAVAILABLE (503), INTERNAL (500) and DEADLINE_EXCEEDED (504) are left to byStatus:
// backend_error.
func geminiRule(c *call) (app.Classification, bool) {
	l := c.lower
	switch {
	case c.r.status == "RESOURCE_EXHAUSTED" || len(c.r.quotaIDs) > 0 && c.status == 429:
		for _, id := range c.r.quotaIDs {
			if strings.Contains(id, "PerDay") {
				return c.quota(nextMidnight(c.now, geminiPacific)), true
			}
		}
		return c.rateLimited(""), true
	case geminiKeyInvalid(c.r.reasons) || strings.Contains(l, "api key not valid") || strings.Contains(l, "api key expired"):
		return c.result(app.ClassManualAction), true
	case c.r.status == "PERMISSION_DENIED" || c.r.status == "UNAUTHENTICATED" || c.r.status == "FAILED_PRECONDITION":
		return c.result(app.ClassManualAction), true
	case strings.Contains(l, "exceeds the maximum number of tokens"):
		return c.result(app.ClassRequestTooLarge), true
	}
	return app.Classification{}, false
}

func geminiKeyInvalid(reasons []string) bool {
	for _, r := range reasons {
		if r == "API_KEY_INVALID" || r == "API_KEY_EXPIRED" {
			return true
		}
	}
	return false
}

// nextMidnight is the first midnight after now in the zone named tz; zero when the zone
// database does not have it (the caller then falls back to its default cooldown).
func nextMidnight(now time.Time, tz string) time.Time {
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return time.Time{}
	}
	y, m, d := now.In(loc).Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, loc)
}
