package classify

import (
	"testing"
	"time"

	"yosan/app"
)

func zhipuError(code, message string) string {
	return `{"error":{"code":"` + code + `","message":"` + message + `"}}`
}

func zhipuCases() []tc {
	return []tc{
		{name: "1302English", kind: Zhipu, status: 429, body: zhipuError("1302", "Rate limit reached for requests"),
			class: app.ClassRateLimited, code: "1302"},
		{name: "1302Chinese", kind: Zhipu, status: 429, body: zhipuError("1302", "您的账户已达到速率限制，请您控制请求频率"),
			class: app.ClassRateLimited, code: "1302"},
		{name: "1305Chinese", kind: Zhipu, status: 429, body: zhipuError("1305", "该模型当前访问量过大，请您稍后再试"),
			class: app.ClassRateLimited, code: "1305"},
		{name: "1305English", kind: Zhipu, status: 429, body: zhipuError("1305", "The service may be temporarily overloaded, please try again later"),
			class: app.ClassRateLimited, code: "1305"},
		{name: "1302NumericCode", kind: Zhipu, status: 429, body: `{"error":{"code":1302,"message":"Rate limit reached for requests"}}`,
			class: app.ClassRateLimited, code: "1302"},
		{name: "1308SeedMessage", kind: Zhipu, status: 429, body: zhipuError("1308", "已达到 5 小时的使用限额。您的限额将在 2026-05-09 20:42:25 重置。"),
			class: app.ClassQuotaExhausted, code: "1308", reset: time.Date(2026, 5, 9, 12, 42, 25, 0, time.UTC)},
		{name: "1308Chinese", kind: Zhipu, status: 429, body: zhipuError("1308", "已达到 5 小时的使用上限。您的限额将在 2026-08-25 07:41:44 重置。"),
			class: app.ClassQuotaExhausted, code: "1308", reset: time.Date(2026, 8, 24, 23, 41, 44, 0, time.UTC)},
		{name: "1308English", kind: Zhipu, status: 429, body: zhipuError("1308", "Usage limit reached for 5 hour. Your limit will reset at 2026-08-27 21:31:39"),
			class: app.ClassQuotaExhausted, code: "1308", reset: time.Date(2026, 8, 27, 13, 31, 39, 0, time.UTC)},
		{name: "1310WeeklyMonthly", kind: Zhipu, status: 429, body: zhipuError("1310", "Weekly/Monthly Limit Exhausted. Your limit will reset at 2026-08-27 12:05:49"),
			class: app.ClassQuotaExhausted, code: "1310", reset: time.Date(2026, 8, 27, 4, 5, 49, 0, time.UTC)},
		{name: "1308PlaceholderNextFlushTime", kind: Zhipu, status: 429, body: zhipuError("1308", "You have reached the 5-hour usage limit. Your quota will reset at next_flush_time."),
			class: app.ClassQuotaExhausted, code: "1308"},
		{name: "1310PlaceholderTemplate", kind: Zhipu, status: 429, body: zhipuError("1310", "您已达到每周/每月使用上限,您的限额将在 ${next_flush_time} 重置。"),
			class: app.ClassQuotaExhausted, code: "1310"},
		{name: "1308ResetAlreadyPassed", kind: Zhipu, status: 429, now: time.Date(2026, 5, 9, 13, 0, 0, 0, time.UTC),
			body:  zhipuError("1308", "已达到 5 小时的使用限额。您的限额将在 2026-05-09 20:42:25 重置。"),
			class: app.ClassQuotaExhausted, code: "1308"},
		{name: "1304Daily", kind: Zhipu, status: 429, body: zhipuError("1304", "该 API 已达今日调用次数限额,如有更多需求,请联系客服购买"),
			now:   time.Date(2026, 5, 9, 15, 59, 0, 0, time.UTC), // 23:59 in Beijing
			class: app.ClassQuotaExhausted, code: "1304", reset: time.Date(2026, 5, 9, 16, 0, 0, 0, time.UTC)},
		{name: "1304DailyAfterMidnightBeijing", kind: Zhipu, status: 429, body: zhipuError("1304", "该 API 已达今日调用次数限额"),
			now:   time.Date(2026, 5, 9, 16, 0, 0, 0, time.UTC), // 00:00 the next day in Beijing
			class: app.ClassQuotaExhausted, code: "1304", reset: time.Date(2026, 5, 10, 16, 0, 0, 0, time.UTC)},
		{name: "1113Chinese", kind: Zhipu, status: 429, body: zhipuError("1113", "余额不足或无可用资源包,请充值。"),
			class: app.ClassManualAction, code: "1113"},
		{name: "1113English", kind: Zhipu, status: 429, body: zhipuError("1113", "Insufficient balance or no resource package. Please recharge."),
			class: app.ClassManualAction, code: "1113"},
		{name: "1309PlanExpired", kind: Zhipu, status: 429, body: zhipuError("1309", "您的 GLM Coding Plan 套餐已到期,暂无法使用,前往官方续订后即可恢复 https://bigmodel.cn/claude-code"),
			class: app.ClassManualAction, code: "1309"},
		{name: "1002InvalidToken401", kind: Zhipu, status: 401, body: zhipuError("1002", "Authorization Token非法，请确认Authorization Token正确传递。"),
			class: app.ClassManualAction, code: "1002"},
		{name: "1261PromptTooLong", kind: Zhipu, status: 400, body: zhipuError("1261", "Prompt 超长"),
			class: app.ClassRequestTooLarge, code: "1261"},
		{name: "1214BadParameter", kind: Zhipu, status: 400, body: zhipuError("1214", "messages 参数非法。请检查文档。"),
			class: app.ClassClientError, code: "1214"},
		{name: "1234NetworkError", kind: Zhipu, status: 500, body: zhipuError("1234", "网络错误,错误id:20260509abc,请联系客服"),
			class: app.ClassBackendError, code: "1234"},
		{name: "UnknownCode429", kind: Zhipu, status: 429, body: zhipuError("1399", "某种新的限制"),
			class: app.ClassRateLimited, code: "1399"},
		{name: "UnknownCode500", kind: Zhipu, status: 500, body: zhipuError("500", "内部错误"),
			class: app.ClassBackendError, code: "500"},
		{name: "1308ThroughOpenAIKind", kind: OpenAI, status: 429, body: zhipuError("1308", "Usage limit reached for 5 hour. Your limit will reset at 2026-08-27 21:31:39"),
			class: app.ClassQuotaExhausted, code: "1308", reset: time.Date(2026, 8, 27, 13, 31, 39, 0, time.UTC)},
		{name: "NumericCodeIgnoredOutsideZhipu", kind: OpenAI, status: 429, body: `{"error":{"code":1113,"message":"?"}}`,
			class: app.ClassRateLimited},
	}
}

func TestClassifyZhipu(t *testing.T) { runCases(t, zhipuCases()) }
