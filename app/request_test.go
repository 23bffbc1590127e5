package app_test

import (
	"strconv"
	"strings"
	"testing"

	"yosan/app"
)

const hello = `"messages":[{"role":"user","content":"hi"}]`

func TestParseChatRequestErrors(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		param string
		msg   string
	}{
		{"ErrEmptyBody", ``, "", "the request body is empty"},
		{"ErrBlankBody", " \n\t", "", "the request body is empty"},
		{"ErrMalformedJSON", `{"model":`, "", "not a valid JSON object"},
		{"ErrArrayBody", `[]`, "", "not a valid JSON object"},
		{"ErrNullBody", `null`, "", "not a valid JSON object"},
		{"ErrStringBody", `"hi"`, "", "not a valid JSON object"},
		{"ErrMissingModel", `{` + hello + `}`, "model", "missing required parameter: 'model'"},
		{"ErrNullModel", `{"model":null,` + hello + `}`, "model", "missing required parameter: 'model'"},
		{"ErrEmptyModel", `{"model":"",` + hello + `}`, "model", "'model' must be a non-empty string"},
		{"ErrModelNotString", `{"model":5,` + hello + `}`, "model", "'model' must be a non-empty string"},
		{"ErrMissingMessages", `{"model":"m"}`, "messages", "missing required parameter: 'messages'"},
		{"ErrNullMessages", `{"model":"m","messages":null}`, "messages", "missing required parameter: 'messages'"},
		{"ErrMessagesObject", `{"model":"m","messages":{}}`, "messages", "'messages' must be an array of message objects"},
		{"ErrMessagesString", `{"model":"m","messages":"hi"}`, "messages", "'messages' must be an array of message objects"},
		{"ErrMessagesOfStrings", `{"model":"m","messages":["hi"]}`, "messages", "'messages' must be an array of message objects"},
		{"ErrEmptyMessages", `{"model":"m","messages":[]}`, "messages", "'messages' must contain at least one message"},
		{"ErrMissingRole", `{"model":"m","messages":[{"content":"hi"}]}`, "messages", "messages[0].role is required"},
		{"ErrNullMessage", `{"model":"m","messages":[null]}`, "messages", "messages[0].role is required"},
		{"ErrSecondMissingRole", `{"model":"m","messages":[{"role":"user","content":"a"},{"content":"b"}]}`, "messages", "messages[1].role is required"},
		{"ErrContentNumber", `{"model":"m","messages":[{"role":"user","content":5}]}`, "messages", "messages[0].content must be a string or an array of content parts"},
		{"ErrContentObject", `{"model":"m","messages":[{"role":"user","content":{"text":"a"}}]}`, "messages", "messages[0].content must be a string or an array of content parts"},
		{"ErrContentBool", `{"model":"m","messages":[{"role":"user","content":true}]}`, "messages", "messages[0].content must be a string or an array of content parts"},
		{"ErrContentPartsNotObjects", `{"model":"m","messages":[{"role":"user","content":[1,2]}]}`, "messages", "messages[0].content must be a string or an array of content parts"},
		{"ErrStreamString", `{"model":"m",` + hello + `,"stream":"yes"}`, "stream", "'stream' must be a boolean"},
		{"ErrStreamNumber", `{"model":"m",` + hello + `,"stream":1}`, "stream", "'stream' must be a boolean"},
		{"ErrStreamOptionsString", `{"model":"m",` + hello + `,"stream":true,"stream_options":"usage"}`, "stream_options", "'stream_options' must be an object"},
		{"ErrStreamOptionsArray", `{"model":"m",` + hello + `,"stream":true,"stream_options":[]}`, "stream_options", "'stream_options' must be an object"},
		{"ErrMaxTokensZero", `{"model":"m",` + hello + `,"max_tokens":0}`, "max_tokens", "'max_tokens' must be an"},
		{"ErrMaxTokensNegative", `{"model":"m",` + hello + `,"max_tokens":-5}`, "max_tokens", "'max_tokens' must be an"},
		{"ErrMaxTokensFraction", `{"model":"m",` + hello + `,"max_tokens":1.5}`, "max_tokens", "'max_tokens' must be an"},
		{"ErrMaxTokensString", `{"model":"m",` + hello + `,"max_tokens":"10"}`, "max_tokens", "'max_tokens' must be an"},
		{"ErrMaxTokensOverInt64", `{"model":"m",` + hello + `,"max_tokens":99999999999999999999}`, "max_tokens", "'max_tokens' must be an"},
		{"ErrMaxTokensAbsurd", `{"model":"m",` + hello + `,"max_tokens":9000000000000000000}`, "max_tokens", "'max_tokens' must be an"},
		{"ErrMaxCompletionTokensZero", `{"model":"m",` + hello + `,"max_completion_tokens":0}`, "max_completion_tokens", "'max_completion_tokens' must be an"},
		{"ErrMaxTokensBadBesideGoodMaxCompletion", `{"model":"m",` + hello + `,"max_completion_tokens":10,"max_tokens":-1}`, "max_tokens", "'max_tokens' must be an"},
		{"ErrNZero", `{"model":"m",` + hello + `,"n":0}`, "n", "'n' must be an integer from 1 to 128"},
		{"ErrN129", `{"model":"m",` + hello + `,"n":129}`, "n", "'n' must be an integer from 1 to 128"},
		{"ErrNString", `{"model":"m",` + hello + `,"n":"2"}`, "n", "'n' must be an integer from 1 to 128"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := app.ParseChatRequest([]byte(tt.body))
			mustInvalid(t, r, err, tt.param, tt.msg)
		})
	}
}

func mustInvalid(tb testing.TB, r *app.ProxyRequest, err error, param, msg string) {
	tb.Helper()
	if err == nil {
		tb.Fatalf("parsed %+v, want an error", r)
	}
	e := app.AsError(err)
	if e == nil {
		tb.Fatalf("error %v is not an *app.Error", err)
	}
	if e.Code != app.EINVALID {
		tb.Errorf("code = %q, want %q", e.Code, app.EINVALID)
	}
	if e.Param != param {
		tb.Errorf("param = %q, want %q", e.Param, param)
	}
	if !strings.Contains(e.Message, msg) {
		tb.Errorf("message %q does not contain %q", e.Message, msg)
	}
}

func mustParseChat(tb testing.TB, body string) *app.ProxyRequest {
	tb.Helper()
	r, err := app.ParseChatRequest([]byte(body))
	if err != nil {
		tb.Fatalf("ParseChatRequest(%s): %v", body, err)
	}
	return r
}

func TestParseChatRequest(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		r := mustParseChat(t, `{"model":"demo-mini","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}]}`)
		if r.Kind != app.KindChat || r.Model != "demo-mini" {
			t.Errorf("kind %q model %q", r.Kind, r.Model)
		}
		if r.Text != "be brief\nhi\n" {
			t.Errorf("Text = %q", r.Text)
		}
		// 4 per message + 3 for the reply's priming
		if r.ExtraInputTokens != 11 {
			t.Errorf("ExtraInputTokens = %d, want 11", r.ExtraInputTokens)
		}
		if r.Stream || r.IncludeUsage || r.MaxTokens != 0 || r.Choices != 0 {
			t.Errorf("defaults: stream %v include_usage %v max_tokens %d n %d", r.Stream, r.IncludeUsage, r.MaxTokens, r.Choices)
		}
	})
	t.Run("UnknownFieldsKept", func(t *testing.T) {
		r := mustParseChat(t, `{"model":"m",`+hello+`,"x_custom": {"a" : [1, 2]},"temperature":0.2}`)
		if got := string(r.Body["x_custom"]); got != `{"a" : [1, 2]}` {
			t.Errorf("x_custom = %s", got)
		}
		if got := string(r.Body["temperature"]); got != `0.2` {
			t.Errorf("temperature = %s", got)
		}
	})
	t.Run("ContentPartsWithImages", func(t *testing.T) {
		r := mustParseChat(t, `{"model":"m","messages":[{"role":"user","content":[
			{"type":"text","text":"what is this?"},
			{"type":"image_url","image_url":{"url":"https://example.com/a.png","detail":"high"}},
			{"type":"input_image","image_url":"data:image/png;base64,AAAA"},
			{"type":"text","text":"and this"}]}]}`)
		if r.Text != "what is this?\nand this\n" {
			t.Errorf("Text = %q", r.Text)
		}
		if want := int64(4 + 2*1500 + 3); r.ExtraInputTokens != want {
			t.Errorf("ExtraInputTokens = %d, want %d", r.ExtraInputTokens, want)
		}
	})
	t.Run("UnknownPartReservedGenerously", func(t *testing.T) {
		r := mustParseChat(t, `{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}]}`)
		if want := int64(4 + 1500 + 3); r.ExtraInputTokens != want {
			t.Errorf("ExtraInputTokens = %d, want %d", r.ExtraInputTokens, want)
		}
	})
	t.Run("NullContentAndToolCalls", func(t *testing.T) {
		calls := `[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Tokyo\"}"}}]`
		r := mustParseChat(t, `{"model":"m","messages":[{"role":"user","content":"weather?"},
			{"role":"assistant","content":null,"tool_calls":`+calls+`},
			{"role":"tool","name":"get_weather","content":"sunny"}]}`)
		for _, want := range []string{"weather?\n", calls, "get_weather", "sunny\n"} {
			if !strings.Contains(r.Text, want) {
				t.Errorf("Text %q does not contain %q", r.Text, want)
			}
		}
	})
	t.Run("ToolsCountedInText", func(t *testing.T) {
		tools := `[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`
		functions := `[{"name":"legacy_fn","parameters":{}}]`
		format := `{"type":"json_schema","json_schema":{"name":"answer","schema":{"type":"object"}}}`
		r := mustParseChat(t, `{"model":"m",`+hello+`,"tools":`+tools+`,"functions":`+functions+`,"response_format":`+format+`}`)
		if want := "hi\n" + tools + functions + format; r.Text != want {
			t.Errorf("Text = %q, want %q", r.Text, want)
		}
	})
	t.Run("NullToolsIgnored", func(t *testing.T) {
		r := mustParseChat(t, `{"model":"m",`+hello+`,"tools":null}`)
		if r.Text != "hi\n" {
			t.Errorf("Text = %q", r.Text)
		}
	})
	t.Run("StreamIncludeUsage", func(t *testing.T) {
		r := mustParseChat(t, `{"model":"m",`+hello+`,"stream":true,"stream_options":{"include_usage":true}}`)
		if !r.Stream || !r.IncludeUsage {
			t.Errorf("stream %v include_usage %v, want both", r.Stream, r.IncludeUsage)
		}
	})
	t.Run("StreamIncludeUsageFalse", func(t *testing.T) {
		r := mustParseChat(t, `{"model":"m",`+hello+`,"stream":true,"stream_options":{"include_usage":false,"include_obfuscation":false}}`)
		if !r.Stream || r.IncludeUsage {
			t.Errorf("stream %v include_usage %v", r.Stream, r.IncludeUsage)
		}
	})
	t.Run("StreamOptionsNull", func(t *testing.T) {
		r := mustParseChat(t, `{"model":"m",`+hello+`,"stream":true,"stream_options":null}`)
		if !r.Stream || r.IncludeUsage {
			t.Errorf("stream %v include_usage %v", r.Stream, r.IncludeUsage)
		}
	})
	t.Run("StreamFalse", func(t *testing.T) {
		r := mustParseChat(t, `{"model":"m",`+hello+`,"stream":false}`)
		if r.Stream {
			t.Error("Stream = true")
		}
	})
	t.Run("MaxTokens", func(t *testing.T) {
		r := mustParseChat(t, `{"model":"m",`+hello+`,"max_tokens":50}`)
		if r.MaxTokens != 50 {
			t.Errorf("MaxTokens = %d, want 50", r.MaxTokens)
		}
	})
	t.Run("MaxCompletionTokensWins", func(t *testing.T) {
		for _, body := range []string{
			`{"model":"m",` + hello + `,"max_tokens":50,"max_completion_tokens":100}`,
			`{"model":"m",` + hello + `,"max_completion_tokens":100,"max_tokens":50}`,
		} {
			if r := mustParseChat(t, body); r.MaxTokens != 100 {
				t.Errorf("%s: MaxTokens = %d, want 100 (max_completion_tokens)", body, r.MaxTokens)
			}
		}
	})
	t.Run("MaxCompletionTokensNull", func(t *testing.T) {
		r := mustParseChat(t, `{"model":"m",`+hello+`,"max_completion_tokens":null,"max_tokens":7}`)
		if r.MaxTokens != 7 {
			t.Errorf("MaxTokens = %d, want 7", r.MaxTokens)
		}
	})
	t.Run("N", func(t *testing.T) {
		for _, n := range []int64{1, 3, 128} {
			r := mustParseChat(t, `{"model":"m",`+hello+`,"n":`+strconv.FormatInt(n, 10)+`}`)
			if r.Choices != n {
				t.Errorf("Choices = %d, want %d", r.Choices, n)
			}
		}
	})
	t.Run("NNull", func(t *testing.T) {
		if r := mustParseChat(t, `{"model":"m",`+hello+`,"n":null}`); r.Choices != 0 {
			t.Errorf("Choices = %d, want 0", r.Choices)
		}
	})
}

func TestParseEmbeddingRequestErrors(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		param string
		msg   string
	}{
		{"ErrEmptyBody", ``, "", "the request body is empty"},
		{"ErrMalformedJSON", `{"model":"e","input":`, "", "not a valid JSON object"},
		{"ErrMissingModel", `{"input":"hi"}`, "model", "missing required parameter: 'model'"},
		{"ErrMissingInput", `{"model":"e"}`, "input", "missing required parameter: 'input'"},
		{"ErrNullInput", `{"model":"e","input":null}`, "input", "missing required parameter: 'input'"},
		{"ErrEmptyString", `{"model":"e","input":""}`, "input", "'input' must not be empty"},
		{"ErrEmptyArray", `{"model":"e","input":[]}`, "input", "'input' must not be an empty array"},
		{"ErrNumber", `{"model":"e","input":5}`, "input", "'input' must be a string, an array of strings, or an array of token arrays"},
		{"ErrObject", `{"model":"e","input":{"text":"hi"}}`, "input", "'input' must be a string, an array of strings, or an array of token arrays"},
		{"ErrMixedArray", `{"model":"e","input":["a",1]}`, "input", "'input' must be a string, an array of strings, or an array of token arrays"},
		{"ErrFloatTokens", `{"model":"e","input":[1.5,2]}`, "input", "'input' must be a string, an array of strings, or an array of token arrays"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := app.ParseEmbeddingRequest([]byte(tt.body))
			mustInvalid(t, r, err, tt.param, tt.msg)
		})
	}
}

func TestParseEmbeddingRequest(t *testing.T) {
	tests := []struct {
		name  string
		input string
		text  string
		extra int64
	}{
		{"String", `"hello world"`, "hello world", 0},
		{"Strings", `["a","b c"]`, "a\nb c", 0},
		{"Tokens", `[1,2,3]`, "", 3},
		{"TokenArrays", `[[1,2],[3],[4,5,6]]`, "", 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := app.ParseEmbeddingRequest([]byte(`{"model":"demo-embed","input":` + tt.input + `,"dimensions":256}`))
			if err != nil {
				t.Fatal(err)
			}
			if r.Kind != app.KindEmbedding || r.Model != "demo-embed" {
				t.Errorf("kind %q model %q", r.Kind, r.Model)
			}
			if r.Text != tt.text || r.ExtraInputTokens != tt.extra {
				t.Errorf("Text %q ExtraInputTokens %d, want %q %d", r.Text, r.ExtraInputTokens, tt.text, tt.extra)
			}
			if string(r.Body["dimensions"]) != "256" {
				t.Errorf("dimensions = %s", r.Body["dimensions"])
			}
		})
	}
}
