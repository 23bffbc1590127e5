package anthropic_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"yosan/app"
	"yosan/providers/anthropic"
)

func TestInboundRequest(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"StringContent",
			`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"Hi"}]}`,
			`{"model":"m","messages":[{"role":"user","content":"Hi"}],"max_tokens":10}`},
		{"SystemString",
			`{"model":"m","max_tokens":10,"system":"Be terse.","messages":[{"role":"user","content":"Hi"}]}`,
			`{"model":"m","messages":[{"role":"system","content":"Be terse."},{"role":"user","content":"Hi"}],"max_tokens":10}`},
		{"SystemBlocksCacheControlDropped",
			`{"model":"m","max_tokens":10,"system":[{"type":"text","text":"Be terse.","cache_control":{"type":"ephemeral"}},{"type":"text","text":"Be kind."}],"messages":[{"role":"user","content":"Hi"}]}`,
			`{"model":"m","messages":[{"role":"system","content":[{"type":"text","text":"Be terse."},{"type":"text","text":"Be kind."}]},{"role":"user","content":"Hi"}],"max_tokens":10}`},
		{"EmptySystemLeftOut",
			`{"model":"m","max_tokens":10,"system":"","messages":[{"role":"user","content":"Hi"}]}`,
			`{"model":"m","messages":[{"role":"user","content":"Hi"}],"max_tokens":10}`},
		{"TextBlocks",
			`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":"a <b> & c"},{"type":"text","text":"d","cache_control":{"type":"ephemeral"}}]}]}`,
			`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a <b> & c"},{"type":"text","text":"d"}]}],"max_tokens":10}`},
		{"ImageBase64",
			`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},{"type":"text","text":"What is it?"}]}]}`,
			`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}},{"type":"text","text":"What is it?"}]}],"max_tokens":10}`},
		{"ImageURL",
			`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://example.com/a.jpg"}}]}]}`,
			`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/a.jpg"}}]}],"max_tokens":10}`},
		{"DocumentPDF",
			`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0="},"title":"spec.pdf"},{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi1="}}]}]}`,
			`{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"filename":"spec.pdf","file_data":"data:application/pdf;base64,JVBERi0="}},{"type":"file","file":{"filename":"document.pdf","file_data":"data:application/pdf;base64,JVBERi1="}}]}],"max_tokens":10}`},
		{"DocumentText",
			`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"plain words"}}]}]}`,
			`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"plain words"}]}],"max_tokens":10}`},
		{"Parameters",
			`{"model":"m","max_tokens":1024,"messages":[{"role":"user","content":"Hi"}],"temperature":0.5,"top_p":0.9,"top_k":40,"stop_sequences":["END","STOP"],"metadata":{"user_id":"u-1"},"thinking":{"type":"enabled","budget_tokens":2000},"service_tier":"auto"}`,
			`{"model":"m","messages":[{"role":"user","content":"Hi"}],"max_tokens":1024,"temperature":0.5,"top_p":0.9,"stop":["END","STOP"],"user":"u-1"}`},
		{"StreamAsksForUsage",
			`{"model":"m","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"Hi"}]}`,
			`{"model":"m","messages":[{"role":"user","content":"Hi"}],"max_tokens":10,"stream":true,"stream_options":{"include_usage":true}}`},
		{"StreamFalse",
			`{"model":"m","max_tokens":10,"stream":false,"messages":[{"role":"user","content":"Hi"}]}`,
			`{"model":"m","messages":[{"role":"user","content":"Hi"}],"max_tokens":10}`},
		{"ToolRoundTrip",
			`{"model":"m","max_tokens":100,"tools":[{"name":"get_weather","description":"Weather of a city","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]},"cache_control":{"type":"ephemeral"}}],"messages":[` +
				`{"role":"user","content":"Weather in Tokyo and Paris?"},` +
				`{"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"sig"},{"type":"text","text":"Let me check."},{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{ "city" : "Tokyo" }},{"type":"tool_use","id":"toolu_2","name":"get_weather","input":{"city":"Paris"}}]},` +
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"22C sunny"},{"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"15C"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}],"is_error":false},{"type":"text","text":"Thanks"}]},` +
				`{"role":"assistant","content":"Tokyo is warmer."}]}`,
			`{"model":"m","messages":[` +
				`{"role":"user","content":"Weather in Tokyo and Paris?"},` +
				`{"role":"assistant","content":"Let me check.","tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Tokyo\"}"}},{"id":"toolu_2","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},` +
				`{"role":"tool","content":"22C sunny","tool_call_id":"toolu_1"},` +
				`{"role":"tool","content":[{"type":"text","text":"15C"}],"tool_call_id":"toolu_2"},` +
				`{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}},{"type":"text","text":"Thanks"}]},` +
				`{"role":"assistant","content":"Tokyo is warmer."}],` +
				`"max_tokens":100,"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]}`},
		{"ToolUseOnlyHasNullContent",
			`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"Go"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"run","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1"}]}]}`,
			`{"model":"m","messages":[{"role":"user","content":"Go"},{"role":"assistant","content":null,"tool_calls":[{"id":"t1","type":"function","function":{"name":"run","arguments":"{}"}}]},{"role":"tool","content":"","tool_call_id":"t1"}],"max_tokens":10}`},
		{"ThinkingOnlyTurnDropped",
			`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"redacted_thinking","data":"x"}]},{"role":"user","content":"b"}]}`,
			`{"model":"m","messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}],"max_tokens":10}`},
		{"Prefill",
			`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"{"}]}`,
			`{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"{"}],"max_tokens":10}`},
		{"ToolChoiceAuto",
			`{"model":"m","max_tokens":10,"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"auto"},"messages":[{"role":"user","content":"a"}]}`,
			`{"model":"m","messages":[{"role":"user","content":"a"}],"max_tokens":10,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"auto"}`},
		{"ToolChoiceAnyNoParallel",
			`{"model":"m","max_tokens":10,"tools":[{"type":"custom","name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"any","disable_parallel_tool_use":true},"messages":[{"role":"user","content":"a"}]}`,
			`{"model":"m","messages":[{"role":"user","content":"a"}],"max_tokens":10,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"required","parallel_tool_calls":false}`},
		{"ToolChoiceTool",
			`{"model":"m","max_tokens":10,"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"f"},"messages":[{"role":"user","content":"a"}]}`,
			`{"model":"m","messages":[{"role":"user","content":"a"}],"max_tokens":10,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`},
		{"ToolChoiceNone",
			`{"model":"m","max_tokens":10,"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"none","disable_parallel_tool_use":true},"messages":[{"role":"user","content":"a"}]}`,
			`{"model":"m","messages":[{"role":"user","content":"a"}],"max_tokens":10,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"none"}`},
		{"ToolChoiceWithoutToolsDropped",
			`{"model":"m","max_tokens":10,"tool_choice":{"type":"auto"},"messages":[{"role":"user","content":"a"}]}`,
			`{"model":"m","messages":[{"role":"user","content":"a"}],"max_tokens":10}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := anthropic.OpenAIRequestFromMessages([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
			// The gateway's own parser accepts what comes out.
			if _, err := app.ParseChatRequest(got); err != nil {
				t.Errorf("ParseChatRequest: %v", err)
			}
		})
	}
}

func TestInboundRequestErrors(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"Hi"}]`
	tests := []struct {
		name string
		in   string
		msg  string
	}{
		{"ErrEmpty", ``, "the request body is empty"},
		{"ErrNotJSON", `{"model":`, "not a valid JSON object"},
		{"ErrArray", `[]`, "not a valid JSON object"},
		{"ErrMissingModel", `{"max_tokens":10,` + msgs + `}`, "missing required parameter: 'model'"},
		{"ErrModelNotString", `{"model":7,"max_tokens":10,` + msgs + `}`, "'model' must be a non-empty string"},
		{"ErrMissingMaxTokens", `{"model":"m",` + msgs + `}`, "missing required parameter: 'max_tokens'"},
		{"ErrZeroMaxTokens", `{"model":"m","max_tokens":0,` + msgs + `}`, "'max_tokens' must be a positive integer"},
		{"ErrBadTemperature", `{"model":"m","max_tokens":10,"temperature":"hot",` + msgs + `}`, "'temperature' must be a number"},
		{"ErrBadStop", `{"model":"m","max_tokens":10,"stop_sequences":"END",` + msgs + `}`, "'stop_sequences' must be an array of strings"},
		{"ErrBadStream", `{"model":"m","max_tokens":10,"stream":"yes",` + msgs + `}`, "'stream' must be a boolean"},
		{"ErrBadMetadata", `{"model":"m","max_tokens":10,"metadata":{"user_id":5},` + msgs + `}`, "'metadata' must be an object"},
		{"ErrMissingMessages", `{"model":"m","max_tokens":10}`, "missing required parameter: 'messages'"},
		{"ErrNoMessages", `{"model":"m","max_tokens":10,"messages":[]}`, "at least one message"},
		{"ErrSystemRole", `{"model":"m","max_tokens":10,"messages":[{"role":"system","content":"x"}]}`, "unexpected role 'system'"},
		{"ErrNoRole", `{"model":"m","max_tokens":10,"messages":[{"content":"x"}]}`, "messages[0].role is required"},
		{"ErrNoContent", `{"model":"m","max_tokens":10,"messages":[{"role":"user"}]}`, "messages[0].content is required"},
		{"ErrContentNumber", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":5}]}`, "must be a string or an array of content blocks"},
		{"ErrEmptyContent", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[]}]}`, "non-empty content"},
		{"ErrSystemImage", `{"model":"m","max_tokens":10,"system":[{"type":"image"}],` + msgs + `}`, "system[0]: the system prompt may only hold text blocks"},
		{"ErrUnknownBlock", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"search_result","title":"x"}]}]}`, "content blocks of type 'search_result' are not supported"},
		{"ErrAssistantServerTool", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"server_tool_use","id":"s","name":"web_search"}]}]}`, "type 'server_tool_use' are not supported"},
		{"ErrToolUseInUser", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]}]}`, "a user message cannot hold a 'tool_use' block"},
		{"ErrToolUseNoID", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","name":"f","input":{}}]}]}`, "needs an id and a name"},
		{"ErrToolUseInputArray", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":[1]}]}]}`, "input must be a JSON object"},
		{"ErrToolResultNoID", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"tool_result","content":"x"}]}]}`, "tool_use_id is required"},
		{"ErrImageNoSource", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"image"}]}]}`, "an image is supported as"},
		{"ErrImageFileSource", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"file","file_id":"f"}}]}]}`, "an image is supported as"},
		{"ErrDocumentURL", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"url","url":"https://x/a.pdf"}}]}]}`, "a document is supported as a base64 PDF or as plain text"},
		{"ErrServerTool", `{"model":"m","max_tokens":10,"tools":[{"type":"web_search_20250305","name":"web_search"}],` + msgs + `}`, "server tools (type 'web_search_20250305') are not supported"},
		{"ErrToolNoName", `{"model":"m","max_tokens":10,"tools":[{"input_schema":{"type":"object"}}],` + msgs + `}`, "tools[0].name is required"},
		{"ErrToolNoSchema", `{"model":"m","max_tokens":10,"tools":[{"name":"f"}],` + msgs + `}`, "tools[0].input_schema is required"},
		{"ErrToolChoiceType", `{"model":"m","max_tokens":10,"tool_choice":{"type":"required"},` + msgs + `}`, "tool_choice.type must be"},
		{"ErrToolChoiceNoName", `{"model":"m","max_tokens":10,"tool_choice":{"type":"tool"},` + msgs + `}`, "tool_choice.name is required"},
		{"ErrToolChoiceString", `{"model":"m","max_tokens":10,"tool_choice":"auto",` + msgs + `}`, "'tool_choice' must be an object"},
		{"ErrMCPServers", `{"model":"m","max_tokens":10,"mcp_servers":[{"type":"url","url":"https://x","name":"x"}],` + msgs + `}`, "'mcp_servers' is not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := anthropic.OpenAIRequestFromMessages([]byte(tt.in))
			if err == nil {
				t.Fatalf("no error; got %s", got)
			}
			if app.ErrorCode(err) != app.EINVALID {
				t.Errorf("code %q, want %q (%v)", app.ErrorCode(err), app.EINVALID, err)
			}
			if !strings.Contains(app.ErrorMessage(err), tt.msg) {
				t.Errorf("message %q does not contain %q", app.ErrorMessage(err), tt.msg)
			}
		})
	}
}

// mustSDKMessage decodes an answer with the official SDK, as a client would.
func mustSDKMessage(tb testing.TB, b []byte) sdk.Message {
	tb.Helper()
	var m sdk.Message
	if err := json.Unmarshal(b, &m); err != nil {
		tb.Fatalf("the SDK cannot read %s: %v", b, err)
	}
	return m
}

func TestInboundMessageFromChatCompletion(t *testing.T) {
	const usage = `"usage":{"prompt_tokens":20,"completion_tokens":5,"total_tokens":25,"prompt_tokens_details":{"cached_tokens":12,"audio_tokens":0}}`
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"Text",
			`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant","content":"Hello <there> & \"you\"","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":4,"total_tokens":13}}`,
			`{"id":"msg_chatcmpl-1","type":"message","role":"assistant","model":"gpt-x","content":[{"type":"text","text":"Hello <there> & \"you\""}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":9,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":4}}`},
		{"CachedTokens",
			`{"id":"msg_01","model":"claude-x","choices":[{"message":{"content":"a"},"finish_reason":"length"}],` + usage + `}`,
			`{"id":"msg_01","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"a"}],"stop_reason":"max_tokens","stop_sequence":null,"usage":{"input_tokens":8,"cache_creation_input_tokens":0,"cache_read_input_tokens":12,"output_tokens":5}}`},
		{"ToolCalls",
			`{"id":"c2","model":"m","choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Tokyo\"}"}},{"id":"call_b","type":"function","function":{"name":"now","arguments":""}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":30,"completion_tokens":8}}`,
			`{"id":"msg_c2","type":"message","role":"assistant","model":"m","content":[{"type":"tool_use","id":"call_a","name":"get_weather","input":{"city":"Tokyo"}},{"type":"tool_use","id":"call_b","name":"now","input":{}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":30,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":8}}`},
		{"TextAndToolCallFinishedWithStop",
			`{"id":"c3","model":"m","choices":[{"message":{"content":"Checking.","tool_calls":[{"id":"call_a","type":"function","function":{"name":"f","arguments":"not json"}}]},"finish_reason":"stop"}]}`,
			`{"id":"msg_c3","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"Checking."},{"type":"tool_use","id":"call_a","name":"f","input":{}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0}}`},
		{"Refusal",
			`{"id":"c4","model":"m","choices":[{"message":{"content":null,"refusal":"I can't."},"finish_reason":"content_filter"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}`,
			`{"id":"msg_c4","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"I can't."}],"stop_reason":"refusal","stop_sequence":null,"usage":{"input_tokens":3,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":2}}`},
		{"ContentParts",
			`{"id":"c5","model":"m","choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},"finish_reason":null}]}`,
			`{"id":"msg_c5","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"ab"}],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0}}`},
		{"EmptyContent",
			`{"id":"c6","model":"m","choices":[{"message":{"content":""},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":0}}`,
			`{"id":"msg_c6","type":"message","role":"assistant","model":"m","content":[],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":3,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := anthropic.MessageFromChatCompletion([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
			m := mustSDKMessage(t, got)
			if m.Type != "message" || m.Role != "assistant" {
				t.Errorf("SDK message %+v", m)
			}
		})
	}
	t.Run("SDKReadsToolUse", func(t *testing.T) {
		got, err := anthropic.MessageFromChatCompletion([]byte(tests[2].in))
		if err != nil {
			t.Fatal(err)
		}
		m := mustSDKMessage(t, got)
		if len(m.Content) != 2 || m.Content[0].Type != "tool_use" || m.Content[0].Name != "get_weather" ||
			string(m.Content[0].Input) != `{"city":"Tokyo"}` || m.StopReason != sdk.StopReasonToolUse || m.Usage.InputTokens != 30 {
			t.Errorf("SDK message %+v", m)
		}
	})
	for _, bad := range []struct{ name, in string }{{"ErrNotJSON", `{"id":`}, {"ErrNoChoices", `{"id":"c","choices":[]}`}} {
		t.Run(bad.name, func(t *testing.T) {
			if _, err := anthropic.MessageFromChatCompletion([]byte(bad.in)); !errors.Is(err, anthropic.ErrBadResponse) {
				t.Errorf("err = %v, want ErrBadResponse", err)
			}
		})
	}
}

func TestInboundErrorFromOpenAI(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		typ    string
		msg    string
		final  bool
	}{
		{"BadRequest", 400, `{"error":{"message":"the request body is not a valid JSON object","type":"invalid_request_error","param":null,"code":"invalid_request"}}`, "invalid_request_error", "the request body is not a valid JSON object", false},
		{"Unauthorized", 401, `{"error":{"message":"invalid API key","type":"authentication_error","param":null,"code":"invalid_api_key"}}`, "authentication_error", "invalid API key", false},
		{"Forbidden", 403, `{"error":{"message":"not in your plan","type":"permission_error","param":"model","code":"model_not_allowed"}}`, "permission_error", "not in your plan", false},
		{"NotFound", 404, `{"error":{"message":"the model 'x' does not exist","type":"invalid_request_error","param":"model","code":"model_not_found"}}`, "not_found_error", "the model 'x' does not exist", false},
		{"TooLarge", 413, `{"error":{"message":"too large","type":"invalid_request_error","param":null,"code":"request_too_large"}}`, "request_too_large", "too large", false},
		{"BudgetExceeded", 429, `{"error":{"message":"budget exceeded: the org budget has no room","type":"budget_exceeded","param":"org:1","code":"budget_exceeded"}}`, "rate_limit_error", "budget exceeded: the org budget has no room", true},
		{"RateLimited", 429, `{"error":{"message":"every candidate is throttled","type":"rate_limit_error","param":null,"code":"rate_limited"}}`, "rate_limit_error", "every candidate is throttled", false},
		{"Internal", 500, `{"error":{"message":"internal error","type":"server_error","param":null,"code":"internal_error"}}`, "api_error", "internal error", false},
		{"Upstream", 502, `{"error":{"message":"the upstream provider failed","type":"upstream_error","param":null,"code":"upstream_error"}}`, "api_error", "the upstream provider failed", false},
		{"Unavailable", 503, `{"error":{"message":"ledger unavailable","type":"service_unavailable","param":null,"code":"ledger_unavailable"}}`, "overloaded_error", "ledger unavailable", false},
		{"Timeout", 504, `{"error":{"message":"did not answer in time","type":"upstream_error","param":null,"code":"upstream_timeout"}}`, "timeout_error", "did not answer in time", false},
		{"UpstreamAnthropicShaped", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"},"request_id":"req_011"}`, "invalid_request_error", "prompt is too long", false},
		{"UpstreamAnthropicOverloaded", 529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, "overloaded_error", "Overloaded", false},
		{"StringError", 400, `{"error":"model 'x' not found, try pulling it first"}`, "invalid_request_error", "model 'x' not found", false},
		{"NotJSON", 405, `Method Not Allowed`, "invalid_request_error", "405 Method Not Allowed", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := anthropic.ErrorFromOpenAI(tt.status, []byte(tt.body))
			if e.Status != tt.status || e.Type != tt.typ || !strings.Contains(e.Message, tt.msg) || e.Final != tt.final {
				t.Errorf("got %+v, want status %d type %s message ~%q final %v", e, tt.status, tt.typ, tt.msg, tt.final)
			}
		})
	}
	t.Run("AppendJSON", func(t *testing.T) {
		e := anthropic.APIError{Status: 429, Type: "rate_limit_error", Message: `budget "org" <full>`}
		if got, want := string(e.AppendJSON(nil, "req_1")), `{"type":"error","error":{"type":"rate_limit_error","message":"budget \"org\" <full>"},"request_id":"req_1"}`; got != want {
			t.Errorf("got %s, want %s", got, want)
		}
		if got, want := string(e.AppendJSON(nil, "")), `{"type":"error","error":{"type":"rate_limit_error","message":"budget \"org\" <full>"}}`; got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	})
}

// openAIStream is a stream as the gateway relays it: chunks with "usage":null, the finish chunk,
// the usage chunk, [DONE].
func openAIStream(chunks ...string) string {
	var sb strings.Builder
	for _, c := range chunks {
		sb.WriteString("data: " + c + "\n\n")
	}
	return sb.String()
}

func chunk(delta, finish string) string {
	return `{"id":"chatcmpl-7","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":` + delta +
		`,"logprobs":null,"finish_reason":` + finish + `}],"usage":null}`
}

const usageChunk = `{"id":"chatcmpl-7","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":5,"total_tokens":25,"prompt_tokens_details":{"cached_tokens":4}}}`

// convert feeds stream to a converter in pieces of n bytes (0: at once) and finishes it.
func convert(stream string, n int) string {
	var c anthropic.StreamConverter
	var out []byte
	if n == 0 {
		n = len(stream)
	}
	for i := 0; i < len(stream); i += n {
		out = c.Convert(out, []byte(stream[i:min(i+n, len(stream))]))
	}
	return string(c.Finish(out))
}

// accumulateEvents feeds Anthropic events to the official SDK's accumulator, as a client would.
// It returns the message and the error event's data, if one came.
func accumulateEvents(tb testing.TB, events string) (sdk.Message, string) {
	tb.Helper()
	var acc sdk.Message
	for _, ev := range strings.Split(strings.TrimSuffix(events, "\n\n"), "\n\n") {
		name, data, ok := strings.Cut(ev, "\n")
		if !ok || !strings.HasPrefix(name, "event: ") || !strings.HasPrefix(data, "data: ") {
			tb.Fatalf("event %q is not an event line and a data line", ev)
		}
		name, data = strings.TrimPrefix(name, "event: "), strings.TrimPrefix(data, "data: ")
		if name == "error" {
			return acc, data
		}
		var e sdk.MessageStreamEventUnion
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			tb.Fatalf("event %s: %v", data, err)
		}
		if e.Type != name {
			tb.Errorf("event named %q has type %q", name, e.Type)
		}
		if err := acc.Accumulate(e); err != nil {
			tb.Fatalf("the SDK's accumulator refused %s: %v", data, err)
		}
	}
	return acc, ""
}

func TestInboundStream(t *testing.T) {
	text := openAIStream(
		chunk(`{"role":"assistant","content":"","refusal":null}`, "null"),
		chunk(`{"content":"Hello"}`, "null"),
		chunk(`{"content":" <world> \"é\""}`, "null"),
		chunk(`{}`, `"stop"`),
		usageChunk, "[DONE]")
	t.Run("TextExact", func(t *testing.T) {
		want := "event: message_start\n" +
			`data: {"type":"message_start","message":{"id":"msg_chatcmpl-7","type":"message","role":"assistant","model":"gpt-x","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0}}}` + "\n\n" +
			"event: content_block_start\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
			"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}` + "\n\n" +
			"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" <world> \"é\""}}` + "\n\n" +
			"event: content_block_stop\n" + `data: {"type":"content_block_stop","index":0}` + "\n\n" +
			"event: message_delta\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":16,"cache_creation_input_tokens":0,"cache_read_input_tokens":4,"output_tokens":5}}` + "\n\n" +
			"event: message_stop\n" + `data: {"type":"message_stop"}` + "\n\n"
		if got := convert(text, 0); got != want {
			t.Errorf("got\n%s\nwant\n%s", got, want)
		}
	})
	t.Run("AnySplit", func(t *testing.T) {
		whole := convert(text, 0)
		for _, n := range []int{1, 2, 7, 64, 333} {
			if got := convert(text, n); got != whole {
				t.Errorf("in pieces of %d bytes:\n%s", n, got)
			}
		}
		crlf := strings.ReplaceAll(text, "\n", "\r\n")
		if got := convert(crlf, 5); got != whole {
			t.Errorf("with CRLF line ends:\n%s", got)
		}
	})
	t.Run("SDKAccumulates", func(t *testing.T) {
		m, errData := accumulateEvents(t, convert(text, 3))
		if errData != "" {
			t.Fatal(errData)
		}
		if len(m.Content) != 1 || m.Content[0].Text != `Hello <world> "é"` || m.StopReason != sdk.StopReasonEndTurn ||
			m.Usage.InputTokens != 16 || m.Usage.CacheReadInputTokens != 4 || m.Usage.OutputTokens != 5 || m.ID != "msg_chatcmpl-7" || m.Model != "gpt-x" {
			t.Errorf("accumulated %+v", m)
		}
	})
	t.Run("ToolCalls", func(t *testing.T) {
		s := openAIStream(
			chunk(`{"role":"assistant","content":"Let me look."}`, "null"),
			chunk(`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":""}}]}`, "null"),
			chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}`, "null"),
			chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"Tokyo\"}"}}]}`, "null"),
			chunk(`{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"now","arguments":"{}"}}]}`, "null"),
			chunk(`{}`, `"tool_calls"`),
			usageChunk, "[DONE]")
		out := convert(s, 11)
		if !strings.Contains(out, `data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"call_a","name":"get_weather","input":{}}}`) ||
			!strings.Contains(out, `data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\":"}}`) {
			t.Errorf("events:\n%s", out)
		}
		m, errData := accumulateEvents(t, out)
		if errData != "" {
			t.Fatal(errData)
		}
		if len(m.Content) != 3 || m.Content[0].Text != "Let me look." ||
			m.Content[1].Type != "tool_use" || m.Content[1].ID != "call_a" || m.Content[1].Name != "get_weather" || string(m.Content[1].Input) != `{"city":"Tokyo"}` ||
			m.Content[2].Type != "tool_use" || m.Content[2].Name != "now" || string(m.Content[2].Input) != `{}` ||
			m.StopReason != sdk.StopReasonToolUse {
			t.Errorf("accumulated %+v\n%s", m, out)
		}
		if strings.Count(out, "event: content_block_start\n") != 3 || strings.Count(out, "event: content_block_stop\n") != 3 {
			t.Errorf("want 3 blocks, each started and stopped:\n%s", out)
		}
	})
	t.Run("Length", func(t *testing.T) {
		m, _ := accumulateEvents(t, convert(openAIStream(chunk(`{"content":"a"}`, `"length"`), usageChunk, "[DONE]"), 0))
		if m.StopReason != sdk.StopReasonMaxTokens {
			t.Errorf("stop_reason %q", m.StopReason)
		}
	})
	t.Run("NothingButDone", func(t *testing.T) {
		out := convert(openAIStream("[DONE]"), 0)
		m, errData := accumulateEvents(t, out)
		if errData != "" || len(m.Content) != 0 || m.StopReason != sdk.StopReasonEndTurn || !strings.HasSuffix(out, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") {
			t.Errorf("events:\n%s", out)
		}
	})
	t.Run("ErrorMidStream", func(t *testing.T) {
		s := openAIStream(chunk(`{"content":"Hel"}`, "null")) +
			`data: {"error":{"message":"the upstream stream broke before it finished","type":"upstream_error","param":null,"code":"upstream_stream_broken"}}` + "\n\n"
		out := convert(s, 4)
		if !strings.HasSuffix(out, "event: error\n"+`data: {"type":"error","error":{"type":"api_error","message":"the upstream stream broke before it finished"}}`+"\n\n") {
			t.Errorf("events:\n%s", out)
		}
		if strings.Contains(out, "message_stop") {
			t.Errorf("a failed stream has no message_stop:\n%s", out)
		}
	})
	t.Run("ErrorBudget", func(t *testing.T) {
		out := convert(`data: {"error":{"message":"budget exceeded","type":"budget_exceeded"}}`+"\n\n", 0)
		if out != "event: error\n"+`data: {"type":"error","error":{"type":"rate_limit_error","message":"budget exceeded"}}`+"\n\n" {
			t.Errorf("events:\n%s", out)
		}
	})
	t.Run("CutShort", func(t *testing.T) {
		out := convert(openAIStream(chunk(`{"content":"Hel"}`, "null")), 0)
		if !strings.HasSuffix(out, "event: error\n"+`data: {"type":"error","error":{"type":"api_error","message":"the stream ended before it finished"}}`+"\n\n") {
			t.Errorf("events:\n%s", out)
		}
	})
	t.Run("InvalidEvent", func(t *testing.T) {
		out := convert("data: {not json\n\n", 0)
		if !strings.HasPrefix(out, "event: error\n") || strings.Count(out, "event:") != 1 {
			t.Errorf("events:\n%s", out)
		}
	})
	t.Run("NothingAfterDone", func(t *testing.T) {
		out := convert(openAIStream("[DONE]", chunk(`{"content":"late"}`, "null")), 0)
		if strings.Contains(out, "late") || strings.Contains(out, "event: error") {
			t.Errorf("events:\n%s", out)
		}
	})
}
