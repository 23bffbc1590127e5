package gemini_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"yosan/providers/gemini"
	"yosan/providers/geminifake"
)

// TestTranslate checks the Gemini request sent for each OpenAI construct, byte for byte.
func TestTranslate(t *testing.T) {
	const user = `{"role":"user","parts":[{"text":"Say hi"}]}`
	for _, tc := range []struct {
		name  string
		extra []string // key/JSON pairs added to the chat body
		want  string
	}{
		{
			name: "Conversation",
			extra: []string{"messages", `[
				{"role":"system","content":"Be brief."},
				{"role":"developer","content":[{"type":"text","text":"Answer in French."}]},
				{"role":"user","content":"What is the weather in Tokyo and Paris?"},
				{"role":"assistant","content":null,"tool_calls":[
					{"id":"call_0","type":"function","function":{"name":"getWeather","arguments":"{\"city\": \"Tokyo\"}"},"extra_content":{"google":{"thought_signature":"sig0"}}},
					{"id":"call_1","type":"function","function":{"name":"getWeather","arguments":"{\"city\":\"Paris\"}"}}]},
				{"role":"tool","tool_call_id":"call_0","content":"18C"},
				{"role":"tool","tool_call_id":"call_1","content":[{"type":"text","text":"12C"}]},
				{"role":"assistant","content":"Tokyo 18C, Paris 12C.","name":"bot"},
				{"role":"user","content":"Thanks","name":"ann"}]`},
			want: `{"contents":[` +
				`{"role":"user","parts":[{"text":"What is the weather in Tokyo and Paris?"}]},` +
				`{"role":"model","parts":[{"functionCall":{"name":"getWeather","args":{"city":"Tokyo"}},"thoughtSignature":"sig0"},{"functionCall":{"name":"getWeather","args":{"city":"Paris"}}}]},` +
				`{"role":"user","parts":[{"functionResponse":{"name":"getWeather","response":{"content":"18C"}}},{"functionResponse":{"name":"getWeather","response":{"content":"12C"}}}]},` +
				`{"role":"model","parts":[{"text":"Tokyo 18C, Paris 12C."}]},` +
				`{"role":"user","parts":[{"text":"Thanks"}]}],` +
				`"systemInstruction":{"parts":[{"text":"Be brief."},{"text":"Answer in French."}]}}`,
		},
		{
			name: "ToolIDsRepeatAcrossTurns",
			extra: []string{"messages", `[
				{"role":"user","content":"a"},
				{"role":"assistant","tool_calls":[{"id":"call_0","type":"function","function":{"name":"first","arguments":""}}]},
				{"role":"tool","tool_call_id":"call_0","content":"1"},
				{"role":"assistant","tool_calls":[{"id":"call_0","type":"function","function":{"name":"second","arguments":"{}"}}]},
				{"role":"tool","tool_call_id":"call_0","content":"2"},
				{"role":"tool","tool_call_id":"unknown","name":"byName","content":"3"}]`},
			want: `{"contents":[{"role":"user","parts":[{"text":"a"}]},` +
				`{"role":"model","parts":[{"functionCall":{"name":"first","args":{}}}]},` +
				`{"role":"user","parts":[{"functionResponse":{"name":"first","response":{"content":"1"}}}]},` +
				`{"role":"model","parts":[{"functionCall":{"name":"second","args":{}}}]},` +
				`{"role":"user","parts":[{"functionResponse":{"name":"second","response":{"content":"2"}}},{"functionResponse":{"name":"byName","response":{"content":"3"}}}]}]}`,
		},
		{
			name: "LegacyFunctions",
			extra: []string{
				"messages", `[{"role":"user","content":"time?"},{"role":"assistant","content":null,"function_call":{"name":"now","arguments":""}},{"role":"function","name":"now","content":"noon"}]`,
				"functions", `[{"name":"now","description":"The time"}]`,
				"function_call", `{"name":"now"}`,
			},
			want: `{"contents":[{"role":"user","parts":[{"text":"time?"}]},` +
				`{"role":"model","parts":[{"functionCall":{"name":"now","args":{}}}]},` +
				`{"role":"user","parts":[{"functionResponse":{"name":"now","response":{"content":"noon"}}}]}],` +
				`"tools":[{"functionDeclarations":[{"name":"now","description":"The time"}]}],` +
				`"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["now"]}}}`,
		},
		{
			name: "MediaParts",
			extra: []string{"messages", `[{"role":"user","content":[
				{"type":"text","text":"What is this?"},
				{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}},
				{"type":"image_url","image_url":{"url":"https://example.com/cat.JPG","detail":"high"}},
				{"type":"image_url","image_url":{"url":"https://example.com/image?id=7"}},
				{"type":"image_url","image_url":{"url":"gs://bucket/a.webp"}},
				{"type":"input_audio","input_audio":{"data":"UklGRg==","format":"wav"}},
				{"type":"file","file":{"filename":"a.pdf","file_data":"data:application/pdf;base64,JVBERi0="}}]}]`},
			want: `{"contents":[{"role":"user","parts":[{"text":"What is this?"},` +
				`{"inlineData":{"mimeType":"image/png","data":"iVBORw0KGgo="}},` +
				`{"fileData":{"mimeType":"image/jpeg","fileUri":"https://example.com/cat.JPG"}},` +
				`{"fileData":{"fileUri":"https://example.com/image?id=7"}},` +
				`{"fileData":{"mimeType":"image/webp","fileUri":"gs://bucket/a.webp"}},` +
				`{"inlineData":{"mimeType":"audio/wav","data":"UklGRg=="}},` +
				`{"inlineData":{"mimeType":"application/pdf","data":"JVBERi0="}}]}]}`,
		},
		{
			name: "ToolsAuto",
			extra: []string{
				"tools", `[{"type":"function","function":{"name":"getWeather","description":"Weather of a city","strict":true,
					"parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}}},
					{"type":"function","function":{"name":"now"}}]`,
				"tool_choice", `"auto"`,
				"parallel_tool_calls", "true",
			},
			want: `{"contents":[` + user + `],"tools":[{"functionDeclarations":[` +
				`{"name":"getWeather","description":"Weather of a city","parametersJsonSchema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}},` +
				`{"name":"now"}]}],"toolConfig":{"functionCallingConfig":{"mode":"AUTO"}}}`,
		},
		{
			name:  "ToolChoiceNone",
			extra: []string{"tools", `[{"type":"function","function":{"name":"now"}}]`, "tool_choice", `"none"`},
			want:  `{"contents":[` + user + `],"tools":[{"functionDeclarations":[{"name":"now"}]}],"toolConfig":{"functionCallingConfig":{"mode":"NONE"}}}`,
		},
		{
			name:  "ToolChoiceRequired",
			extra: []string{"tools", `[{"type":"function","function":{"name":"now"}}]`, "tool_choice", `"required"`},
			want:  `{"contents":[` + user + `],"tools":[{"functionDeclarations":[{"name":"now"}]}],"toolConfig":{"functionCallingConfig":{"mode":"ANY"}}}`,
		},
		{
			name:  "ToolChoiceNamed",
			extra: []string{"tools", `[{"type":"function","function":{"name":"now"}}]`, "tool_choice", `{"type":"function","function":{"name":"now"}}`},
			want:  `{"contents":[` + user + `],"tools":[{"functionDeclarations":[{"name":"now"}]}],"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["now"]}}}`,
		},
		{
			name: "GenerationConfig",
			extra: []string{
				"max_tokens", "100", "max_completion_tokens", "50", "temperature", "0", "top_p", "0.9", "stop", `"END"`,
				"n", "2", "seed", "7", "presence_penalty", "0.5", "frequency_penalty", "0.25",
				"response_format", `{"type":"json_object"}`, "reasoning_effort", `"low"`,
			},
			want: `{"contents":[` + user + `],"generationConfig":{"stopSequences":["END"],"responseMimeType":"application/json",` +
				`"candidateCount":2,"maxOutputTokens":50,"temperature":0,"topP":0.9,"seed":7,"presencePenalty":0.5,"frequencyPenalty":0.25,` +
				`"thinkingConfig":{"thinkingBudget":1024}}}`,
		},
		{
			name:  "MaxTokens",
			extra: []string{"max_tokens", "100"},
			want:  `{"contents":[` + user + `],"generationConfig":{"maxOutputTokens":100}}`,
		},
		{
			name: "JSONSchema",
			extra: []string{
				"response_format", `{"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":{"type":"object","properties":{"a":{"type":"integer"}}}}}`,
				"stop", `["a","b"]`, "reasoning_effort", `"none"`,
			},
			want: `{"contents":[` + user + `],"generationConfig":{"stopSequences":["a","b"],"responseMimeType":"application/json",` +
				`"responseJsonSchema":{"type":"object","properties":{"a":{"type":"integer"}}},"thinkingConfig":{"thinkingBudget":0}}}`,
		},
		{
			name: "IgnoredFields",
			extra: []string{
				"user", `"u-1"`, "metadata", `{"k":"v"}`, "store", "false", "service_tier", `"auto"`, "logprobs", "false",
				"stream", "true", "stream_options", `{"include_usage":true}`, "response_format", `{"type":"text"}`, "modalities", `["text"]`,
			},
			want: `{"contents":[` + user + `]}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, c := MustFake(t, geminifake.Options{})
			if _, err := c.ChatCompletion(context.Background(), chatRequest("gemini-2.5-flash", tc.extra...)); err != nil {
				t.Fatal(err)
			}
			if got := string(f.LastRequest().Body); got != tc.want {
				t.Errorf("sent\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

// TestUnsupported checks that what cannot be translated is refused with a 400 naming it,
// without calling the upstream.
func TestUnsupported(t *testing.T) {
	msgs := func(m string) []string { return []string{"messages", m} }
	for _, tc := range []struct {
		name  string
		extra []string
		param string
		msg   string // part of the message
	}{
		{"Logprobs", []string{"logprobs", "true"}, "logprobs", "'logprobs'"},
		{"TopLogprobs", []string{"top_logprobs", "3"}, "top_logprobs", "'top_logprobs'"},
		{"LogitBias", []string{"logit_bias", `{"50256":-100}`}, "logit_bias", "'logit_bias'"},
		{"AudioOutput", []string{"modalities", `["text","audio"]`}, "modalities", "only text output"},
		{"Audio", []string{"audio", `{"voice":"alloy","format":"wav"}`}, "audio", "'audio'"},
		{"Prediction", []string{"prediction", `{"type":"content","content":"x"}`}, "prediction", "'prediction'"},
		{"ImageInSystem", msgs(`[{"role":"system","content":[{"type":"image_url","image_url":{"url":"https://x/a.png"}}]},{"role":"user","content":"hi"}]`), "messages", `messages[0].content[0] has type "image_url"`},
		{"FileID", msgs(`[{"role":"user","content":[{"type":"file","file":{"file_id":"file-abc"}}]}]`), "messages", "file_id"},
		{"FTPImage", msgs(`[{"role":"user","content":[{"type":"image_url","image_url":{"url":"ftp://x/a.png"}}]}]`), "messages", "messages[0].content[0].image_url.url"},
		{"DataURLNotBase64", msgs(`[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png,abc"}}]}]`), "messages", "base64 data: URL"},
		{"UnknownPart", msgs(`[{"role":"user","content":[{"type":"video","video":{}}]}]`), "messages", `type "video"`},
		{"UnknownToolCall", msgs(`[{"role":"user","content":"a"},{"role":"tool","tool_call_id":"call_9","content":"x"}]`), "messages", `tool call "call_9"`},
		{"ArgumentsNotObject", msgs(`[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"[1]"}}]}]`), "messages", "must be a JSON object"},
		{"ToolCallCustom", msgs(`[{"role":"assistant","tool_calls":[{"id":"c","type":"custom","custom":{"name":"f","input":"x"}}]}]`), "messages", `type "custom"`},
		{"ToolCustom", []string{"tools", `[{"type":"custom","custom":{"name":"f"}}]`}, "tools", `type "custom"`},
		{"AllowedTools", []string{"tool_choice", `{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[]}}`}, "tool_choice", `type "allowed_tools"`},
		{"ToolChoiceWord", []string{"tool_choice", `"sometimes"`}, "tool_choice", `"sometimes"`},
		{"ResponseFormat", []string{"response_format", `{"type":"xml"}`}, "response_format", `"xml"`},
		{"ReasoningEffort", []string{"reasoning_effort", `"extreme"`}, "reasoning_effort", `"extreme"`},
		{"Role", msgs(`[{"role":"critic","content":"x"}]`), "messages", `role "critic"`},
		{"Stop", []string{"stop", `[1]`}, "stop", "'stop'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, c := MustFake(t, geminifake.Options{})
			_, err := c.ChatCompletion(context.Background(), chatRequest("gemini-2.5-flash", tc.extra...))
			ue := MustUpstreamError(t, err)
			if ue.Status != http.StatusBadRequest || !errors.Is(err, gemini.ErrUnsupported) {
				t.Fatalf("got %v (status %d)", err, ue.Status)
			}
			if !ue.ClientFault() {
				t.Error("not a client fault: the gateway would not hand it back")
			}
			var body struct {
				Error struct {
					Message string  `json:"message"`
					Type    string  `json:"type"`
					Param   *string `json:"param"`
				} `json:"error"`
			}
			if err := json.Unmarshal(ue.Body, &body); err != nil {
				t.Fatalf("body %s: %v", ue.Body, err)
			}
			if body.Error.Type != "invalid_request_error" || body.Error.Param == nil || *body.Error.Param != tc.param ||
				!strings.Contains(body.Error.Message, tc.msg) {
				t.Errorf("body = %s, want param %q and a message with %q", ue.Body, tc.param, tc.msg)
			}
			// The stream refuses the same way, before any call.
			if _, err := c.ChatCompletionStream(context.Background(), chatRequest("gemini-2.5-flash", tc.extra...)); !errors.Is(err, gemini.ErrUnsupported) {
				t.Errorf("stream: %v", err)
			}
			if f.Requests() != 0 {
				t.Errorf("%d upstream requests, want 0", f.Requests())
			}
		})
	}
}
