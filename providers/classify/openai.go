package classify

import (
	"net/http"
	"strings"
	"time"

	"yosan/app"
)

// openaiRule reads OpenAI's codes and types (also sent by compatible servers):
//   - insufficient_quota and the billing codes: no money or a spend limit, a human must act;
//   - rate_limit_exceeded (types "requests", "tokens"): per-minute throttling, except a request
//     that alone exceeds the TPM limit ("Request too large for ...": request_too_large) and a
//     per-day limit (RPD/TPD: quota_exhausted until the wait the message names);
//   - context_length_exceeded: request_too_large; invalid_api_key: manual_action.
func openaiRule(c *call) (app.Classification, bool) {
	code, typ := c.r.codeStr, c.r.typ
	switch {
	case code == "context_length_exceeded":
		return c.result(app.ClassRequestTooLarge), true
	case code == "invalid_api_key":
		return c.result(app.ClassManualAction), true
	case typ == "insufficient_quota" || openaiBillingCode(code):
		return c.result(app.ClassManualAction), true
	case code == "rate_limit_exceeded" || c.status == http.StatusTooManyRequests && (typ == "requests" || typ == "tokens"):
		l := c.lower
		switch {
		case strings.HasPrefix(l, "request too large"):
			return c.result(app.ClassRequestTooLarge), true
		case strings.Contains(l, "per day"):
			// "Rate limit reached ... on requests per day (RPD): ... Please try again in 7m12s."
			// The x-ratelimit-* headers describe the per-minute limits, so only the message and
			// Retry-After tell when the daily window has room again.
			var reset time.Time
			if w := c.wait(); w > 0 {
				reset = c.now.Add(w)
			}
			return c.quota(reset), true
		}
		return c.rateLimited(typ), true
	}
	return app.Classification{}, false
}

// openaiBillingCode reports the codes OpenAI sends (type insufficient_quota) when an account
// is out of credit or past a spend or usage limit.
func openaiBillingCode(code string) bool {
	switch code {
	case "insufficient_quota", "credit_balance_exhausted", "organization_spend_limit_exceeded",
		"project_spend_limit_exceeded", "organization_usage_limit_exceeded", "billing_hard_limit_reached":
		return true
	}
	return false
}
