package classify

import (
	"strings"
	"time"

	"yosan/app"
)

// anthropicRule reads what Anthropic's error types alone do not say (the types themselves
// imply a status, handled by byStatus):
//   - details.error_code "enforced_spend_limit_reached" (429): the organisation's spend limit,
//     quota_exhausted until 00:00 UTC on the 1st of next month;
//   - "You have reached your specified API usage limits. You will regain access on
//     2026-04-01 at 00:00 UTC." (a 400!): quota_exhausted until that time;
//   - billing_error, or "Your credit balance is too low ..." (a 400): manual_action;
//   - rate_limit_error: throttling, quota_exhausted when the message speaks of a usage or spend
//     limit or a daily window;
//   - overloaded_error (529): backend_error; "prompt is too long": request_too_large.
func anthropicRule(c *call) (app.Classification, bool) {
	l := c.lower
	switch {
	case c.r.detailCode == "enforced_spend_limit_reached":
		t := c.now.UTC()
		return c.quota(time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, time.UTC)), true
	case strings.Contains(l, "regain access on"):
		return c.quota(regainAccess(l)), true
	case c.r.typ == "billing_error" || strings.Contains(l, "credit balance is too low"):
		return c.result(app.ClassManualAction), true
	case c.r.typ == "rate_limit_error":
		if strings.Contains(l, "usage limit") || strings.Contains(l, "spend limit") ||
			strings.Contains(l, "per day") || strings.Contains(l, "daily") {
			return c.quota(time.Time{}), true
		}
		return c.rateLimited(anthropicLimit(l)), true
	case c.r.typ == "overloaded_error":
		return c.backend(), true
	case strings.Contains(l, "prompt is too long"):
		return c.result(app.ClassRequestTooLarge), true
	}
	return app.Classification{}, false
}

// anthropicLimit names the limit a rate_limit_error message speaks of ("... of 40,000 input
// tokens per minute"), for the matching anthropic-ratelimit-*-reset header.
func anthropicLimit(l string) string {
	switch {
	case strings.Contains(l, "input tokens per"):
		return "input-tokens"
	case strings.Contains(l, "output tokens per"):
		return "output-tokens"
	case strings.Contains(l, "tokens per"):
		return "tokens"
	case strings.Contains(l, "requests per"):
		return "requests"
	}
	return ""
}

// regainAccess reads the time in "you will regain access on 2026-04-01 at 00:00 utc" (the
// message lower-cased); zero when it is not there.
func regainAccess(l string) time.Time {
	const lead, layout = "regain access on ", "2006-01-02 at 15:04 utc"
	i := strings.Index(l, lead)
	if i < 0 {
		return time.Time{}
	}
	s := l[i+len(lead):]
	if len(s) < len(layout) {
		return time.Time{}
	}
	t, err := time.Parse(layout, s[:len(layout)])
	if err != nil {
		return time.Time{}
	}
	return t
}
