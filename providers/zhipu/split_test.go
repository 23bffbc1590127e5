package zhipu

import "testing"

func TestSplitUsage(t *testing.T) {
	tests := []struct {
		name, data, content, usageOnly string
		ok                             bool
	}{
		{"Zhipu",
			`{"id":"1","created":2,"model":"glm-4.5","choices":[{"index":0,"finish_reason":"stop","delta":{"role":"assistant","content":""}}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`,
			`{"id":"1","created":2,"model":"glm-4.5","choices":[{"index":0,"finish_reason":"stop","delta":{"role":"assistant","content":""}}],"usage":null}`,
			`{"id":"1","created":2,"model":"glm-4.5","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`, true},
		{"UsageFirstWithSpaces",
			`{ "usage" : {"prompt_tokens":1} , "object":"chat.completion.chunk", "choices":[{"delta":{"content":"\"usage\":x"}}] }`,
			`{ "usage" : null , "object":"chat.completion.chunk", "choices":[{"delta":{"content":"\"usage\":x"}}] }`,
			`{"object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":1}}`, true},
		{"NullUsage", `{"choices":[],"usage":null}`, "", "", false},
		{"NoUsage", `{"choices":[{"delta":{}}]}`, "", "", false},
		{"NotAnObject", `[1,2]`, "", "", false},
		{"Truncated", `{"usage":{"prompt_tokens":1}`, "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			content, usageOnly, ok := splitUsage([]byte(tt.data))
			if ok != tt.ok || string(content) != tt.content || string(usageOnly) != tt.usageOnly {
				t.Errorf("got %v\n%s\n%s", ok, content, usageOnly)
			}
		})
	}
}

func TestRenameFinishReasons(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"Sensitive", `{"finish_reason":"sensitive"}`, `{"finish_reason":"content_filter"}`},
		{"ContextWindow", `{"finish_reason":"model_context_window_exceeded"}`, `{"finish_reason":"length"}`},
		{"Stop", `{"finish_reason":"stop"}`, `{"finish_reason":"stop"}`},
		{"InsideText", `{"content":"\"finish_reason\":\"sensitive\"","finish_reason":"stop"}`, `{"content":"\"finish_reason\":\"sensitive\"","finish_reason":"stop"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(renameFinishReasons([]byte(tt.in))); got != tt.want {
				t.Errorf("got %s", got)
			}
		})
	}
}
