package zhipufake

import "net/http"

// Zhipu's error bodies, byte for byte: {"error":{"code":"<string>","message":"..."}}, compact,
// no trailing newline. The messages are those of the wire-format reference and the source
// articles (shared/reference/wire-formats.md, seeds 003) unless a comment says otherwise.
const (
	// Body1302 is the transient per-account rate limit (English wording).
	Body1302 = `{"error":{"code":"1302","message":"Rate limit reached for requests"}}`
	// Body1302CN is the same limit in Chinese.
	Body1302CN = `{"error":{"code":"1302","message":"您的账户已达到速率限制，请您控制请求频率"}}`
	// Body1305 is "the model is overloaded" (transient), in Chinese.
	Body1305 = `{"error":{"code":"1305","message":"该模型当前访问量过大，请您稍后再试"}}`
	// Body1305EN is the same in English.
	Body1305EN = `{"error":{"code":"1305","message":"The service may be temporarily overloaded, please try again later"}}`

	// Body1308CN is the 5-hour window used up, its reset time (Beijing time, no zone) in a
	// Chinese sentence: 2026-05-09 20:42:25 +08:00 = 2026-05-09T12:42:25Z.
	Body1308CN = `{"error":{"code":"1308","message":"已达到 5 小时的使用限额。您的限额将在 2026-05-09 20:42:25 重置。"}}`
	// Body1308CNUpper is the other Chinese wording seen ("上限"), reset 2026-08-25 07:41:44 +08:00.
	Body1308CNUpper = `{"error":{"code":"1308","message":"已达到 5 小时的使用上限。您的限额将在 2026-08-25 07:41:44 重置。"}}`
	// Body1308EN is the English wording with a real reset time (2026-08-27 21:31:39 +08:00).
	Body1308EN = `{"error":{"code":"1308","message":"Usage limit reached for 5 hour. Your limit will reset at 2026-08-27 21:31:39"}}`
	// Body1308Placeholder is the English wording whose "time" is the unfilled placeholder
	// next_flush_time: no reset time can be read from it.
	Body1308Placeholder = `{"error":{"code":"1308","message":"You have reached the 5-hour usage limit. Your quota will reset at next_flush_time."}}`

	// Body1310 is the weekly/monthly window used up (reset 2026-08-27 12:05:49 +08:00).
	Body1310 = `{"error":{"code":"1310","message":"Weekly/Monthly Limit Exhausted. Your limit will reset at 2026-08-27 12:05:49"}}`
	// Body1310CN is a Chinese 1310 message. Constructed, not captured: it follows the 1308
	// sentence with the weekly window (reset 2026-05-11 10:00:00 +08:00).
	Body1310CN = `{"error":{"code":"1310","message":"已达到每周/每月的使用上限。您的限额将在 2026-05-11 10:00:00 重置。"}}`
	// Body1310Placeholder carries the ${next_flush_time} form of the placeholder.
	Body1310Placeholder = `{"error":{"code":"1310","message":"Weekly/Monthly Limit Exhausted. Your limit will reset at ${next_flush_time}"}}`

	// Body1113 is "no balance or resource package left" (Chinese, ASCII comma as sent).
	Body1113 = `{"error":{"code":"1113","message":"余额不足或无可用资源包,请充值。"}}`
	// Body1113EN is the same in English.
	Body1113EN = `{"error":{"code":"1113","message":"Insufficient balance or no resource package. Please recharge."}}`
	// Body1309 is "the GLM Coding Plan has expired". The reference quotes only the start of
	// the message; the fake sends it as quoted.
	Body1309 = `{"error":{"code":"1309","message":"您的 GLM Coding Plan 套餐已到期..."}}`

	// BodyServerError is Zhipu's 500 ("Internal Error", basic error code 500 of its docs).
	BodyServerError = `{"error":{"code":"500","message":"Internal Error"}}`
	// BodyInvalidKey is the 401 for a wrong or missing key, as captured.
	BodyInvalidKey = `{"error":{"code":"401","message":"令牌已过期或验证不正确！"}}`
	// BodyBadParameters is the 400 for a body that is not JSON (code 1210 of Zhipu's docs).
	BodyBadParameters = `{"error":{"code":"1210","message":"Incorrect API call parameters, please check the documentation"}}`
)

// errorHeader is what an error answer carries: Zhipu sends no x-ratelimit or Retry-After
// headers.
func errorHeader() http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json; charset=UTF-8")
	return h
}

// ErrorResponse returns an answer of Kind Error with status and body and Zhipu's headers.
func ErrorResponse(status int, body string) Response {
	return Response{Kind: Error, Status: status, Header: errorHeader(), Body: []byte(body)}
}

// RateLimited returns a 429 code 1302 (English).
func RateLimited() Response { return ErrorResponse(http.StatusTooManyRequests, Body1302) }

// RateLimitedCN returns a 429 code 1302 (Chinese).
func RateLimitedCN() Response { return ErrorResponse(http.StatusTooManyRequests, Body1302CN) }

// Overloaded returns a 429 code 1305 (Chinese).
func Overloaded() Response { return ErrorResponse(http.StatusTooManyRequests, Body1305) }

// OverloadedEN returns a 429 code 1305 (English).
func OverloadedEN() Response { return ErrorResponse(http.StatusTooManyRequests, Body1305EN) }

// FiveHourLimit returns a 429 code 1308 whose Chinese message resets at 2026-05-09 20:42:25
// Beijing time.
func FiveHourLimit() Response { return ErrorResponse(http.StatusTooManyRequests, Body1308CN) }

// FiveHourLimitEN returns a 429 code 1308 whose English message resets at 2026-08-27 21:31:39.
func FiveHourLimitEN() Response { return ErrorResponse(http.StatusTooManyRequests, Body1308EN) }

// FiveHourLimitPlaceholder returns a 429 code 1308 with the next_flush_time placeholder.
func FiveHourLimitPlaceholder() Response {
	return ErrorResponse(http.StatusTooManyRequests, Body1308Placeholder)
}

// WeeklyLimit returns a 429 code 1310 whose English message resets at 2026-08-27 12:05:49.
func WeeklyLimit() Response { return ErrorResponse(http.StatusTooManyRequests, Body1310) }

// WeeklyLimitCN returns a 429 code 1310 with the (constructed) Chinese message.
func WeeklyLimitCN() Response { return ErrorResponse(http.StatusTooManyRequests, Body1310CN) }

// WeeklyLimitPlaceholder returns a 429 code 1310 with the ${next_flush_time} placeholder.
func WeeklyLimitPlaceholder() Response {
	return ErrorResponse(http.StatusTooManyRequests, Body1310Placeholder)
}

// InsufficientBalance returns a 429 code 1113 (Chinese).
func InsufficientBalance() Response { return ErrorResponse(http.StatusTooManyRequests, Body1113) }

// InsufficientBalanceEN returns a 429 code 1113 (English).
func InsufficientBalanceEN() Response {
	return ErrorResponse(http.StatusTooManyRequests, Body1113EN)
}

// PlanExpired returns a 429 code 1309.
func PlanExpired() Response { return ErrorResponse(http.StatusTooManyRequests, Body1309) }

// ServerError returns a 500.
func ServerError() Response { return ErrorResponse(http.StatusInternalServerError, BodyServerError) }

// BrokenStream returns an answer that sends after stream events, then drops the connection.
func BrokenStream(after int) Response { return Response{Kind: BreakStream, After: after} }
