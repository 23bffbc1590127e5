package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"

	"yosan/app"
	"yosan/providers/anthropic"
	"yosan/providers/anthropicfake"
)

// Created is the fixed "created" of every translated answer.
const Created = 1721631035

const testKey = "sk-ant-test"

func now() time.Time { return time.Unix(Created, 0) }

// MustFake starts the fake behind a real HTTP server and returns it with a client for it.
func MustFake(tb testing.TB, opts anthropicfake.Options) (*anthropicfake.Fake, *anthropic.Client) {
	tb.Helper()
	if opts.APIKey == "" {
		opts.APIKey = testKey
	}
	f := anthropicfake.New(opts)
	srv := httptest.NewServer(f)
	tb.Cleanup(func() { f.Close(); srv.Close() })
	return f, anthropic.New(anthropic.Config{Name: "anthropic", BaseURL: srv.URL, APIKey: testKey, Now: now})
}

// MustServe serves h (a hand-written upstream) and returns a client for it.
func MustServe(tb testing.TB, h http.HandlerFunc) *anthropic.Client {
	tb.Helper()
	srv := httptest.NewServer(h)
	tb.Cleanup(srv.Close)
	return anthropic.New(anthropic.Config{Name: "anthropic", BaseURL: srv.URL, APIKey: testKey, Now: now})
}

// MustRequest builds a ProviderRequest from an OpenAI body, as the gateway does.
func MustRequest(tb testing.TB, body string) *app.ProviderRequest {
	tb.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		tb.Fatalf("bad test body: %v", err)
	}
	return &app.ProviderRequest{Model: "claude-x", Body: m}
}

// MustEqualJSON fails unless got and want are the same JSON value.
func MustEqualJSON(tb testing.TB, got []byte, want string) {
	tb.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		tb.Fatalf("got is not JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		tb.Fatalf("want is not JSON: %v\n%s", err, want)
	}
	if !reflect.DeepEqual(g, w) {
		tb.Errorf("JSON differs\n got: %s\nwant: %s", got, want)
	}
}

func upstreamError(tb testing.TB, err error) *app.UpstreamError {
	tb.Helper()
	var ue *app.UpstreamError
	if !errors.As(err, &ue) {
		tb.Fatalf("error %v (%T) is not an *app.UpstreamError", err, err)
	}
	return ue
}

func TestTranslateRequest(t *testing.T) {
	weatherTool := `{"type":"function","function":{"name":"get_weather","description":"Get the weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}`
	weatherAnthropic := `{"name":"get_weather","description":"Get the weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}`
	tests := []struct {
		name, body, want string
	}{
		{"System",
			`{"model":"claude-x","max_tokens":50,"messages":[{"role":"system","content":"You are terse."},{"role":"developer","content":[{"type":"text","text":"Answer in French."}]},{"role":"user","content":"Hi"},{"role":"system","content":"Late rule."}]}`,
			`{"model":"claude-x","max_tokens":50,"system":"You are terse.\n\nAnswer in French.\n\nLate rule.","messages":[{"role":"user","content":[{"type":"text","text":"Hi"}]}]}`},
		{"SystemCacheControl",
			`{"model":"claude-x","max_tokens":50,"messages":[{"role":"system","content":[{"type":"text","text":"Long manual.","cache_control":{"type":"ephemeral"}}]},{"role":"user","content":"Hi"}]}`,
			`{"model":"claude-x","max_tokens":50,"system":[{"type":"text","text":"Long manual.","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"text","text":"Hi"}]}]}`},
		{"MultiTurn",
			`{"model":"claude-x","max_tokens":50,"messages":[{"role":"user","content":"What is 2+2?"},{"role":"assistant","content":"4"},{"role":"user","content":"And 3+3?"},{"role":"user","content":[{"type":"text","text":"Be brief."},{"type":"text","text":""}]},{"role":"assistant","content":[{"type":"text","text":"6"},{"type":"refusal","refusal":"No more."}]}]}`,
			`{"model":"claude-x","max_tokens":50,"messages":[{"role":"user","content":[{"type":"text","text":"What is 2+2?"}]},{"role":"assistant","content":[{"type":"text","text":"4"}]},{"role":"user","content":[{"type":"text","text":"And 3+3?"},{"type":"text","text":"Be brief."}]},{"role":"assistant","content":[{"type":"text","text":"6"},{"type":"text","text":"No more."}]}]}`},
		{"ImageData",
			`{"model":"claude-x","max_tokens":50,"messages":[{"role":"user","content":[{"type":"text","text":"What is this?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo=","detail":"low"}}]}]}`,
			`{"model":"claude-x","max_tokens":50,"messages":[{"role":"user","content":[{"type":"text","text":"What is this?"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]}]}`},
		{"ImageURL",
			`{"model":"claude-x","max_tokens":50,"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/cat.jpg","detail":"high"}},{"type":"text","text":"Describe."}]}]}`,
			`{"model":"claude-x","max_tokens":50,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://example.com/cat.jpg"}},{"type":"text","text":"Describe."}]}]}`},
		{"PDF",
			`{"model":"claude-x","max_tokens":50,"messages":[{"role":"user","content":[{"type":"file","file":{"filename":"a.pdf","file_data":"data:application/pdf;base64,JVBERi0="}},{"type":"text","text":"Summarize."}]}]}`,
			`{"model":"claude-x","max_tokens":50,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0="}},{"type":"text","text":"Summarize."}]}]}`},
		{"ToolsRoundTrip",
			`{"model":"claude-x","max_tokens":50,"tools":[` + weatherTool + `,{"type":"function","function":{"name":"now"}}],"messages":[
				{"role":"user","content":"Weather in Paris and Tokyo?"},
				{"role":"assistant","content":null,"tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}},{"id":"toolu_2","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Tokyo\"}"}}]},
				{"role":"tool","tool_call_id":"toolu_1","content":"18C"},
				{"role":"tool","tool_call_id":"toolu_2","content":[{"type":"text","text":"25C"}]},
				{"role":"user","content":"Which is warmer?"},
				{"role":"assistant","content":"Tokyo. Let me check the time.","tool_calls":[{"id":"toolu_3","type":"function","function":{"name":"now","arguments":""}}]},
				{"role":"tool","tool_call_id":"toolu_3","content":""}]}`,
			`{"model":"claude-x","max_tokens":50,"tools":[` + weatherAnthropic + `,{"name":"now","input_schema":{"type":"object","properties":{}}}],"messages":[
				{"role":"user","content":[{"type":"text","text":"Weather in Paris and Tokyo?"}]},
				{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}},{"type":"tool_use","id":"toolu_2","name":"get_weather","input":{"city":"Tokyo"}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"18C"},{"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"25C"}]},{"type":"text","text":"Which is warmer?"}]},
				{"role":"assistant","content":[{"type":"text","text":"Tokyo. Let me check the time."},{"type":"tool_use","id":"toolu_3","name":"now","input":{}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_3"}]}]}`},
		{"ToolResultsFirst",
			`{"model":"claude-x","max_tokens":50,"messages":[{"role":"assistant","tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"now","arguments":"{}"}}]},{"role":"user","content":"(note)"},{"role":"tool","tool_call_id":"toolu_1","content":"noon"}]}`,
			`{"model":"claude-x","max_tokens":50,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"now","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"noon"},{"type":"text","text":"(note)"}]}]}`},
		{"Params",
			`{"model":"claude-x","max_tokens":100,"max_completion_tokens":300,"temperature":1.5,"top_p":0.9,"stop":"END","user":"u-42","n":1,"frequency_penalty":0.5,"presence_penalty":0.1,"seed":7,"logprobs":false,"response_format":{"type":"text"},"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Hi"}]}`,
			`{"model":"claude-x","max_tokens":300,"temperature":1,"top_p":0.9,"stop_sequences":["END"],"metadata":{"user_id":"u-42"},"messages":[{"role":"user","content":[{"type":"text","text":"Hi"}]}]}`},
		{"StopArray",
			`{"model":"claude-x","max_tokens":10,"temperature":0.2,"stop":["\n\n","","###"],"messages":[{"role":"user","content":"Hi"}]}`,
			`{"model":"claude-x","max_tokens":10,"temperature":0.2,"stop_sequences":["\n\n","###"],"messages":[{"role":"user","content":[{"type":"text","text":"Hi"}]}]}`},
		{"DefaultMaxTokens",
			`{"model":"claude-x","messages":[{"role":"user","content":"Hi"}]}`,
			`{"model":"claude-x","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"Hi"}]}]}`},
		{"EmptyConversation",
			`{"model":"claude-x","max_tokens":10,"messages":[{"role":"system","content":"Be kind."},{"role":"assistant","content":""}]}`,
			`{"model":"claude-x","max_tokens":10,"system":"Be kind.","messages":[]}`},
		{"ToolChoiceWithoutTools",
			`{"model":"claude-x","max_tokens":10,"tool_choice":"none","messages":[{"role":"user","content":"Hi"}]}`,
			`{"model":"claude-x","max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":"Hi"}]}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, c := MustFake(t, anthropicfake.Options{})
			if _, err := c.ChatCompletion(context.Background(), MustRequest(t, tt.body)); err != nil {
				t.Fatal(err)
			}
			MustEqualJSON(t, f.LastRequest().Body, tt.want)
		})
	}
}

func TestToolChoice(t *testing.T) {
	tests := []struct {
		name, fields, want string
	}{
		{"Absent", ``, ``},
		{"Auto", `,"tool_choice":"auto"`, `{"type":"auto"}`},
		{"None", `,"tool_choice":"none"`, `{"type":"none"}`},
		{"Required", `,"tool_choice":"required"`, `{"type":"any"}`},
		{"Function", `,"tool_choice":{"type":"function","function":{"name":"now"}}`, `{"type":"tool","name":"now"}`},
		{"NoParallel", `,"parallel_tool_calls":false`, `{"type":"auto","disable_parallel_tool_use":true}`},
		{"RequiredNoParallel", `,"tool_choice":"required","parallel_tool_calls":false`, `{"type":"any","disable_parallel_tool_use":true}`},
		{"NoneNoParallel", `,"tool_choice":"none","parallel_tool_calls":false`, `{"type":"none"}`},
		{"Parallel", `,"parallel_tool_calls":true`, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, c := MustFake(t, anthropicfake.Options{})
			body := `{"model":"claude-x","max_tokens":10,"tools":[{"type":"function","function":{"name":"now"}}],"messages":[{"role":"user","content":"Time?"}]` + tt.fields + `}`
			if _, err := c.ChatCompletion(context.Background(), MustRequest(t, body)); err != nil {
				t.Fatal(err)
			}
			var got struct {
				ToolChoice json.RawMessage `json:"tool_choice"`
			}
			if err := json.Unmarshal(f.LastRequest().Body, &got); err != nil {
				t.Fatal(err)
			}
			if tt.want == "" {
				if got.ToolChoice != nil {
					t.Errorf("tool_choice %s, want none", got.ToolChoice)
				}
				return
			}
			MustEqualJSON(t, got.ToolChoice, tt.want)
		})
	}
}

func TestTranslateRequestUnsupported(t *testing.T) {
	user := func(content string) string {
		return `{"model":"claude-x","max_tokens":10,"messages":[{"role":"user","content":` + content + `}]}`
	}
	tests := []struct {
		name, body, param string
	}{
		{"N", `{"model":"claude-x","n":2,"messages":[{"role":"user","content":"Hi"}]}`, "n"},
		{"Functions", `{"model":"claude-x","functions":[{"name":"f"}],"messages":[{"role":"user","content":"Hi"}]}`, "functions"},
		{"FunctionRole", `{"model":"claude-x","messages":[{"role":"function","name":"f","content":"x"}]}`, "messages"},
		{"MissingRole", `{"model":"claude-x","messages":[{"content":"x"}]}`, "messages"},
		{"Audio", user(`[{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]`), "messages"},
		{"FileID", user(`[{"type":"file","file":{"file_id":"file-abc"}}]`), "messages"},
		{"TextFile", user(`[{"type":"file","file":{"file_data":"data:text/plain;base64,aGk="}}]`), "messages"},
		{"DataURLNotBase64", user(`[{"type":"image_url","image_url":{"url":"data:image/png,rawbytes"}}]`), "messages"},
		{"ImageFTP", user(`[{"type":"image_url","image_url":{"url":"ftp://example.com/a.png"}}]`), "messages"},
		{"ContentNumber", user(`42`), "messages"},
		{"SystemImage", `{"model":"claude-x","messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]},{"role":"user","content":"Hi"}]}`, "messages"},
		{"BadArguments", `{"model":"claude-x","messages":[{"role":"user","content":"Hi"},{"role":"assistant","tool_calls":[{"id":"t","type":"function","function":{"name":"f","arguments":"{\"city\":"}}]}]}`, "messages"},
		{"ArgumentsNotObject", `{"model":"claude-x","messages":[{"role":"user","content":"Hi"},{"role":"assistant","tool_calls":[{"id":"t","type":"function","function":{"name":"f","arguments":"[1]"}}]}]}`, "messages"},
		{"CustomTool", `{"model":"claude-x","tools":[{"type":"custom","custom":{"name":"x"}}],"messages":[{"role":"user","content":"Hi"}]}`, "tools"},
		{"AllowedTools", `{"model":"claude-x","tools":[{"type":"function","function":{"name":"now"}}],"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[]}},"messages":[{"role":"user","content":"Hi"}]}`, "tool_choice"},
		{"BadTemperature", `{"model":"claude-x","temperature":"hot","messages":[{"role":"user","content":"Hi"}]}`, "temperature"},
		{"BadMaxTokens", `{"model":"claude-x","max_tokens":0,"messages":[{"role":"user","content":"Hi"}]}`, "max_tokens"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, c := MustFake(t, anthropicfake.Options{})
			for _, stream := range []bool{false, true} {
				var err error
				if stream {
					_, err = c.ChatCompletionStream(context.Background(), MustRequest(t, tt.body))
				} else {
					_, err = c.ChatCompletion(context.Background(), MustRequest(t, tt.body))
				}
				ue := upstreamError(t, err)
				if ue.Status != 400 || !ue.ClientFault() || !errors.Is(err, anthropic.ErrUnsupported) || ue.Header.Get("Content-Type") != "application/json" {
					t.Errorf("stream %v: %+v", stream, ue)
				}
				var e struct {
					Error struct {
						Message, Type, Code string
						Param               *string
					}
				}
				if err := json.Unmarshal(ue.Body, &e); err != nil || e.Error.Message == "" || e.Error.Type != "invalid_request_error" ||
					e.Error.Param == nil || *e.Error.Param != tt.param {
					t.Errorf("stream %v: body %s (%v)", stream, ue.Body, err)
				}
			}
			if n := f.Requests(); n != 0 {
				t.Errorf("%d upstream requests, want 0", n)
			}
		})
	}
}

func TestHeaders(t *testing.T) {
	tests := []struct {
		name, base, version, wantVersion string
	}{
		{"Default", "", "", anthropic.DefaultVersion},
		{"CustomVersion", "", "2024-10-22", "2024-10-22"},
		{"BaseWithV1", "/v1/", "", anthropic.DefaultVersion},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := anthropicfake.New(anthropicfake.Options{APIKey: testKey})
			srv := httptest.NewServer(f)
			t.Cleanup(func() { f.Close(); srv.Close() })
			c := anthropic.New(anthropic.Config{Name: "anthropic", BaseURL: srv.URL + tt.base, APIKey: testKey, Version: tt.version})
			if _, err := c.ChatCompletion(context.Background(), MustRequest(t, `{"model":"claude-x","messages":[{"role":"user","content":"Hi"}]}`)); err != nil {
				t.Fatal(err)
			}
			last := f.LastRequest()
			if last.Path != "/v1/messages" || last.Header.Get("x-api-key") != testKey || last.Header.Get("anthropic-version") != tt.wantVersion ||
				last.Header.Get("Content-Type") != "application/json" || last.Header.Get("Authorization") != "" {
				t.Errorf("%s %v", last.Path, last.Header)
			}
		})
	}
}

func TestChatCompletion(t *testing.T) {
	t.Run("Text", func(t *testing.T) {
		_, c := MustFake(t, anthropicfake.Options{})
		resp, err := c.ChatCompletion(context.Background(), MustRequest(t, `{"model":"claude-x","max_tokens":100,"messages":[{"role":"user","content":"Hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		want := `{"id":"msg_01FakeAnthropicAnswer0000","object":"chat.completion","created":1721631035,"model":"claude-x","choices":[{"index":0,"message":{"role":"assistant","content":"Hello! How can I help you today?","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":25,"completion_tokens":15,"total_tokens":40,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`
		if string(resp.Body) != want {
			t.Errorf("body\n%s\nwant\n%s", resp.Body, want)
		}
		if !resp.HasUsage || resp.Usage != (app.Usage{PromptTokens: 25, CompletionTokens: 15}) {
			t.Errorf("usage %+v", resp.Usage)
		}
	})
	t.Run("HourLongCacheWrites", func(t *testing.T) {
		_, c := MustFake(t, anthropicfake.Options{Answer: anthropicfake.Answer{Text: "Hi.",
			Usage: anthropicfake.Usage{InputTokens: 4, OutputTokens: 3, CacheCreationInputTokens: 100, CacheCreation1hInputTokens: 40}}})
		resp, err := c.ChatCompletion(context.Background(), MustRequest(t, `{"model":"claude-x","max_tokens":100,"messages":[{"role":"user","content":"Hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		if want := (app.Usage{PromptTokens: 104, CompletionTokens: 3, CacheWriteTokens: 100, CacheWrite1hTokens: 40}); resp.Usage != want {
			t.Errorf("usage %+v, want %+v", resp.Usage, want)
		}
	})
	t.Run("ToolUseWithCache", func(t *testing.T) {
		_, c := MustFake(t, anthropicfake.Options{Answer: anthropicfake.Answer{
			Text: "Let me check.",
			ToolUses: []anthropicfake.ToolUse{
				{ID: "toolu_01A", Name: "get_weather", Input: `{"city": "Paris", "unit": "C"}`},
				{ID: "toolu_01B", Name: "now", Input: `{}`},
			},
			Usage: anthropicfake.Usage{InputTokens: 4, OutputTokens: 30, CacheCreationInputTokens: 100, CacheReadInputTokens: 2000},
		}})
		resp, err := c.ChatCompletion(context.Background(), MustRequest(t, `{"model":"claude-x","max_tokens":100,"messages":[{"role":"user","content":"Hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		if want := (app.Usage{PromptTokens: 2104, CompletionTokens: 30, CachedTokens: 2000, CacheWriteTokens: 100}); !resp.HasUsage || resp.Usage != want {
			t.Errorf("usage %+v, want %+v", resp.Usage, want)
		}
		// The official OpenAI SDK reads the translated answer.
		var cc oai.ChatCompletion
		if err := json.Unmarshal(resp.Body, &cc); err != nil {
			t.Fatal(err)
		}
		m := cc.Choices[0].Message
		if cc.ID != "msg_01FakeAnthropicAnswer0000" || cc.Object != "chat.completion" || cc.Created != Created || cc.Model != "claude-x" ||
			m.Content != "Let me check." || cc.Choices[0].FinishReason != "tool_calls" || len(m.ToolCalls) != 2 ||
			m.ToolCalls[0].ID != "toolu_01A" || m.ToolCalls[0].Function.Name != "get_weather" || m.ToolCalls[0].Function.Arguments != `{"city":"Paris","unit":"C"}` ||
			m.ToolCalls[1].ID != "toolu_01B" || m.ToolCalls[1].Function.Arguments != `{}` || m.ToolCalls[1].Type != "function" {
			t.Errorf("translated %s", resp.Body)
		}
		if cc.Usage.PromptTokens != 2104 || cc.Usage.CompletionTokens != 30 || cc.Usage.TotalTokens != 2134 || cc.Usage.PromptTokensDetails.CachedTokens != 2000 {
			t.Errorf("usage %+v", cc.Usage)
		}
	})
	t.Run("ToolUseOnly", func(t *testing.T) {
		_, c := MustFake(t, anthropicfake.Options{Answer: anthropicfake.Answer{ToolUses: []anthropicfake.ToolUse{{ID: "toolu_1", Name: "now", Input: `{}`}}}})
		resp, err := c.ChatCompletion(context.Background(), MustRequest(t, `{"model":"claude-x","messages":[{"role":"user","content":"Hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		var raw struct {
			Choices []struct {
				Message struct {
					Content json.RawMessage `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(resp.Body, &raw); err != nil || string(raw.Choices[0].Message.Content) != "null" {
			t.Errorf("content %s, want null (%v)", raw.Choices[0].Message.Content, err)
		}
	})
	t.Run("StopReasons", func(t *testing.T) {
		for _, tt := range []struct{ stop, want string }{
			{"end_turn", "stop"}, {"stop_sequence", "stop"}, {"max_tokens", "length"}, {"tool_use", "tool_calls"},
			{"refusal", "content_filter"}, {"pause_turn", "stop"}, {"model_context_window_exceeded", "length"},
		} {
			t.Run(tt.stop, func(t *testing.T) {
				_, c := MustFake(t, anthropicfake.Options{Answer: anthropicfake.Answer{Text: "x", StopReason: tt.stop}})
				resp, err := c.ChatCompletion(context.Background(), MustRequest(t, `{"model":"claude-x","messages":[{"role":"user","content":"Hi"}]}`))
				if err != nil {
					t.Fatal(err)
				}
				var cc oai.ChatCompletion
				if err := json.Unmarshal(resp.Body, &cc); err != nil || cc.Choices[0].FinishReason != tt.want {
					t.Errorf("finish_reason %q, want %q (%v)", cc.Choices[0].FinishReason, tt.want, err)
				}
			})
		}
	})
}

// scriptedErrors are the fake's failures, each returned as an UpstreamError exactly as sent.
func scriptedErrors() []struct {
	name string
	resp anthropicfake.Response
} {
	return []struct {
		name string
		resp anthropicfake.Response
	}{
		{"RateLimited", anthropicfake.RateLimited()},
		{"SpendLimited", anthropicfake.SpendLimited()},
		{"Overloaded", anthropicfake.Overloaded()},
		{"APIError", anthropicfake.APIError()},
		{"PromptTooLong", anthropicfake.PromptTooLong()},
		{"CreditBalanceTooLow", anthropicfake.CreditBalanceTooLow()},
		{"Unauthorized", anthropicfake.Unauthorized()},
	}
}

func TestErrors(t *testing.T) {
	for _, tt := range scriptedErrors() {
		t.Run(tt.name, func(t *testing.T) {
			for _, stream := range []bool{false, true} {
				f, c := MustFake(t, anthropicfake.Options{})
				f.Enqueue(tt.resp)
				req := MustRequest(t, `{"model":"claude-x","max_tokens":10,"messages":[{"role":"user","content":"Hi"}]}`)
				var err error
				if stream {
					_, err = c.ChatCompletionStream(context.Background(), req)
				} else {
					_, err = c.ChatCompletion(context.Background(), req)
				}
				ue := upstreamError(t, err)
				if ue.Provider != "anthropic" || ue.Status != tt.resp.Status || string(ue.Body) != string(tt.resp.Body) || ue.Err != nil {
					t.Errorf("stream %v: %d %s", stream, ue.Status, ue.Body)
				}
				for k := range tt.resp.Header {
					if got, want := ue.Header.Get(k), tt.resp.Header.Get(k); got != want {
						t.Errorf("stream %v: header %s = %q, want %q", stream, k, got, want)
					}
				}
			}
		})
	}
	t.Run("RateLimitHeaders", func(t *testing.T) {
		f, c := MustFake(t, anthropicfake.Options{})
		f.Enqueue(anthropicfake.RateLimited())
		_, err := c.ChatCompletion(context.Background(), MustRequest(t, `{"model":"claude-x","messages":[{"role":"user","content":"Hi"}]}`))
		h := upstreamError(t, err).Header
		for k, v := range map[string]string{"retry-after": "13", "request-id": anthropicfake.RequestIDRateLimited,
			"anthropic-ratelimit-input-tokens-remaining": "0", "anthropic-ratelimit-input-tokens-reset": "2025-08-21T12:40:59Z"} {
			if got := h.Get(k); got != v {
				t.Errorf("%s = %q, want %q", k, got, v)
			}
		}
	})
	t.Run("WrongAPIKey", func(t *testing.T) {
		f := anthropicfake.New(anthropicfake.Options{APIKey: "sk-ant-other"})
		srv := httptest.NewServer(f)
		t.Cleanup(func() { f.Close(); srv.Close() })
		c := anthropic.New(anthropic.Config{Name: "anthropic", BaseURL: srv.URL, APIKey: testKey})
		_, err := c.ChatCompletion(context.Background(), MustRequest(t, `{"model":"claude-x","messages":[{"role":"user","content":"Hi"}]}`))
		if ue := upstreamError(t, err); ue.Status != 401 || string(ue.Body) != anthropicfake.BodyInvalidAPIKey {
			t.Errorf("%d %s", ue.Status, ue.Body)
		}
	})
	t.Run("Hang", func(t *testing.T) {
		f, c := MustFake(t, anthropicfake.Options{})
		f.Enqueue(anthropicfake.HangingStream(0))
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := c.ChatCompletion(ctx, MustRequest(t, `{"model":"claude-x","messages":[{"role":"user","content":"Hi"}]}`))
		if ue := upstreamError(t, err); ue.Status != 0 || !ue.Timeout {
			t.Errorf("%+v", ue)
		}
	})
	t.Run("NotJSON", func(t *testing.T) {
		c := MustServe(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = io.WriteString(w, "<html>502 Bad Gateway</html>")
		})
		_, err := c.ChatCompletion(context.Background(), MustRequest(t, `{"model":"claude-x","messages":[{"role":"user","content":"Hi"}]}`))
		if ue := upstreamError(t, err); ue.Status != 0 || !errors.Is(err, anthropic.ErrBadResponse) || string(ue.Body) != "<html>502 Bad Gateway</html>" {
			t.Errorf("%+v", ue)
		}
	})
	t.Run("ErrorObjectWith200", func(t *testing.T) {
		c := MustServe(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, anthropicfake.BodyOverloaded)
		})
		_, err := c.ChatCompletion(context.Background(), MustRequest(t, `{"model":"claude-x","messages":[{"role":"user","content":"Hi"}]}`))
		if ue := upstreamError(t, err); ue.Status != 0 || !errors.Is(err, anthropic.ErrErrorEvent) || string(ue.Body) != anthropicfake.BodyOverloaded {
			t.Errorf("%+v", ue)
		}
	})
	t.Run("StreamGetsJSON", func(t *testing.T) {
		c := MustServe(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, anthropicfake.BodyOverloaded)
		})
		_, err := c.ChatCompletionStream(context.Background(), MustRequest(t, `{"model":"claude-x","messages":[{"role":"user","content":"Hi"}]}`))
		if ue := upstreamError(t, err); ue.Status != 0 || !errors.Is(err, anthropic.ErrBadResponse) || string(ue.Body) != anthropicfake.BodyOverloaded {
			t.Errorf("%+v", ue)
		}
	})
}

func TestEmbeddings(t *testing.T) {
	f, c := MustFake(t, anthropicfake.Options{})
	_, err := c.Embeddings(context.Background(), MustRequest(t, `{"model":"claude-x","input":"hello"}`))
	ue := upstreamError(t, err)
	if ue.Status != 404 || !ue.ClientFault() || !errors.Is(err, anthropic.ErrUnsupported) || f.Requests() != 0 {
		t.Errorf("%+v", ue)
	}
	want := `{"error":{"message":"embeddings are not supported by this provider: Anthropic has no embeddings API","type":"invalid_request_error","param":"model","code":"unsupported_by_provider"}}`
	if string(ue.Body) != want {
		t.Errorf("body %s", ue.Body)
	}
}

// The client is an app.Provider.
var _ app.Provider = (*anthropic.Client)(nil)

// TestReservedMaxTokens: a request that names no limit is sent with the bound the gateway
// reserved for (ProviderRequest.MaxTokens), not the client's 4,096 default; one that names a
// limit keeps it.
func TestReservedMaxTokens(t *testing.T) {
	f, c := MustFake(t, anthropicfake.Options{})
	for _, tt := range []struct {
		body     string
		reserved int64
		want     int64
	}{
		{`{"model":"claude-x","messages":[{"role":"user","content":"Hi"}]}`, 64000, 64000},
		{`{"model":"claude-x","messages":[{"role":"user","content":"Hi"}]}`, 0, anthropic.DefaultMaxTokens},
		{`{"model":"claude-x","max_tokens":50,"messages":[{"role":"user","content":"Hi"}]}`, 64000, 50},
	} {
		req := MustRequest(t, tt.body)
		req.MaxTokens = tt.reserved
		if _, err := c.ChatCompletion(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		var got struct {
			MaxTokens int64 `json:"max_tokens"`
		}
		if err := json.Unmarshal(f.LastRequest().Body, &got); err != nil || got.MaxTokens != tt.want {
			t.Errorf("%s with %d reserved: max_tokens %d (%v), want %d", tt.body, tt.reserved, got.MaxTokens, err, tt.want)
		}
	}
}
