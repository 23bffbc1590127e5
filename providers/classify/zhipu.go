package classify

import (
	"strconv"
	"strings"
	"time"

	"yosan/app"
)

// zhipuOffset is the zone of the reset times in Zhipu's messages: they carry none, and were
// measured to be UTC+8 (Asia/Shanghai, which keeps no DST).
const zhipuOffset = 8 * 60 * 60

// zhipuRule reads Zhipu / z.ai business codes, strings such as "1302" in error.code (also
// through its Anthropic-compatible endpoint, whose messages start "[1302][...]"). The tiers
// of seed 003 and the reference, completed from the official table
// (https://docs.bigmodel.cn/cn/api/api-code):
//   - 1302, 1303, 1305, 1312 (concurrency, frequency, overloaded): rate_limited;
//   - 1308 (5-hour cap), 1310 (weekly/monthly cap): quota_exhausted until the time in the
//     message (UTC+8); a placeholder such as next_flush_time is no time (ResetAt stays zero);
//     1304 (daily call count): quota_exhausted until the next midnight in UTC+8, Zhipu's day;
//   - 1113 (no balance), 1309 (plan expired), 1000-1004 (authentication), 1110-1112 and 1121
//     (account inactive, missing, locked), 1220 (no access to the API), 1311 (plan does not
//     include the model), 1313 (fair-use restriction, lifted on request): manual_action;
//   - 1261 (prompt too long): request_too_large; 1210-1215, 1301 (bad parameters, unsafe
//     content): client_error; 1120, 1230, 1234 (account unreachable, network): backend_error.
//
// Any other code is left to byStatus: an unknown 429 is throttling, never a week's block.
func zhipuRule(c *call) (app.Classification, bool) {
	code := c.r.codeStr
	if code == "" && c.kind == Zhipu && c.r.codeNum >= 1000 {
		code = strconv.FormatInt(c.r.codeNum, 10)
	}
	if code == "" {
		code = bracketCode(c.message)
	}
	var cls app.Classification
	switch code {
	case "1302", "1303", "1305", "1312":
		cls = c.rateLimited("")
	case "1308", "1310":
		cls = c.quota(zhipuReset(c.message))
	case "1304":
		cls = c.quota(zhipuMidnight(c.now))
	case "1113", "1309", "1000", "1001", "1002", "1003", "1004", "1110", "1111", "1112", "1121", "1220", "1311", "1313":
		cls = c.result(app.ClassManualAction)
	case "1261":
		cls = c.result(app.ClassRequestTooLarge)
	case "1210", "1211", "1212", "1213", "1214", "1215", "1301":
		cls = c.result(app.ClassClientError)
	case "1120", "1230", "1234":
		cls = c.backend()
	default:
		return app.Classification{}, false
	}
	cls.Code = code
	return cls, true
}

// bracketCode is the code at the start of a message such as "[1302][Rate limit reached for
// requests][...]", "" when there is none.
func bracketCode(m string) string {
	if len(m) < 6 || m[0] != '[' || m[5] != ']' {
		return ""
	}
	for i := 1; i < 5; i++ {
		if m[i] < '0' || m[i] > '9' {
			return ""
		}
	}
	return m[1:5]
}

// zhipuMidnight is the next midnight after now in Zhipu's zone (UTC+8), when its daily
// counts start again.
func zhipuMidnight(now time.Time) time.Time {
	t := now.In(time.FixedZone("UTC+8", zhipuOffset))
	return time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, t.Location()).UTC()
}

// zhipuReset is the first "2026-05-09 20:42:25" in a message, read as UTC+8; zero when there is
// none (an English message with the next_flush_time placeholder).
func zhipuReset(m string) time.Time {
	const layout = "2006-01-02 15:04:05"
	for i := 0; i+len(layout) <= len(m); i++ {
		if !isDigits(m[i:i+4]) || m[i+4] != '-' {
			continue
		}
		s := m[i : i+len(layout)]
		if s[10] == 'T' {
			s = s[:10] + " " + s[11:]
		}
		if t, err := time.ParseInLocation(layout, s, time.FixedZone("UTC+8", zhipuOffset)); err == nil {
			return t
		}
	}
	return time.Time{}
}

func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}
