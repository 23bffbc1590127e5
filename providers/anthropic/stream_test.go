package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"

	"yosan/app"
	"yosan/providers/anthropic"
	"yosan/providers/anthropicfake"
)

const streamBody = `{"model":"claude-x","max_tokens":100,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Hi"}]}`

// drain reads s until an error and returns the chunks and that error.
func drain(s app.Stream) ([]app.StreamChunk, error) {
	var chunks []app.StreamChunk
	for {
		c, err := s.Next()
		if err != nil {
			return chunks, err
		}
		chunks = append(chunks, c)
	}
}

// MustStream opens a stream for streamBody and returns it, closed at the end of the test.
func MustStream(tb testing.TB, ctx context.Context, c *anthropic.Client) app.Stream {
	tb.Helper()
	s, err := c.ChatCompletionStream(ctx, MustRequest(tb, streamBody))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// accumulate feeds the chunks to the official OpenAI SDK's accumulator, as a client would.
func accumulate(tb testing.TB, chunks []app.StreamChunk) oai.ChatCompletion {
	tb.Helper()
	var acc oai.ChatCompletionAccumulator
	for _, c := range chunks {
		var chunk oai.ChatCompletionChunk
		if err := json.Unmarshal(c.Data, &chunk); err != nil {
			tb.Fatalf("chunk %s: %v", c.Data, err)
		}
		if !acc.AddChunk(chunk) {
			tb.Fatalf("the OpenAI SDK refused chunk %s", c.Data)
		}
	}
	return acc.ChatCompletion
}

func TestStream(t *testing.T) {
	head := `{"id":"msg_01FakeAnthropicAnswer0000","object":"chat.completion.chunk","created":1721631035,"model":"claude-x","choices":[`
	t.Run("Text", func(t *testing.T) {
		f, c := MustFake(t, anthropicfake.Options{Answer: anthropicfake.Answer{Text: "Hello there, friend!",
			Usage: anthropicfake.Usage{InputTokens: 4, OutputTokens: 5, CacheCreationInputTokens: 10, CacheReadInputTokens: 100}}})
		chunks, err := drain(MustStream(t, context.Background(), c))
		if err != io.EOF {
			t.Fatalf("err %v, want io.EOF", err)
		}
		want := []string{
			head + `{"index":0,"delta":{"role":"assistant","content":"Hello"},"logprobs":null,"finish_reason":null}]}`,
			head + `{"index":0,"delta":{"content":" there,"},"logprobs":null,"finish_reason":null}]}`,
			head + `{"index":0,"delta":{"content":" friend!"},"logprobs":null,"finish_reason":null}]}`,
			head + `{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}`,
			head + `],"usage":{"prompt_tokens":114,"completion_tokens":5,"total_tokens":119,"prompt_tokens_details":{"cached_tokens":100,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`,
		}
		if len(chunks) != len(want) {
			t.Fatalf("%d chunks, want %d", len(chunks), len(want))
		}
		var text strings.Builder
		for i, c := range chunks {
			if string(c.Data) != want[i] {
				t.Errorf("chunk %d\n%s\nwant\n%s", i, c.Data, want[i])
			}
			text.WriteString(c.Text)
		}
		if text.String() != "Hello there, friend!" {
			t.Errorf("counted text %q", text.String())
		}
		last := chunks[len(chunks)-1]
		if wantU := (app.Usage{PromptTokens: 114, CompletionTokens: 5, CachedTokens: 100, CacheWriteTokens: 10}); !last.UsageOnly || last.Usage == nil || *last.Usage != wantU {
			t.Errorf("last chunk %+v", last)
		}
		for _, c := range chunks[:len(chunks)-1] {
			if c.UsageOnly || c.Usage != nil {
				t.Errorf("usage on a content chunk %s", c.Data)
			}
		}
		cc := accumulate(t, chunks)
		if cc.Choices[0].Message.Content != "Hello there, friend!" || cc.Choices[0].FinishReason != "stop" || cc.Usage.PromptTokens != 114 {
			t.Errorf("accumulated %+v", cc)
		}
		if !strings.Contains(string(f.LastRequest().Body), `"stream":true`) || strings.Contains(string(f.LastRequest().Body), "stream_options") {
			t.Errorf("request %s", f.LastRequest().Body)
		}
	})
	t.Run("ToolUse", func(t *testing.T) {
		_, c := MustFake(t, anthropicfake.Options{Answer: anthropicfake.Answer{
			Text: "Checking.",
			ToolUses: []anthropicfake.ToolUse{
				{ID: "toolu_01A", Name: "get_weather", Input: `{"location":"San Francisco, CA","unit":"°C"}`},
				{ID: "toolu_01B", Name: "get_time", Input: `{"tz":"America/Los_Angeles"}`},
			},
			Usage: anthropicfake.Usage{InputTokens: 300, OutputTokens: 70},
		}})
		chunks, err := drain(MustStream(t, context.Background(), c))
		if err != io.EOF {
			t.Fatalf("err %v", err)
		}
		if want := head + `{"index":0,"delta":{"tool_calls":[{"index":0,"id":"toolu_01A","type":"function","function":{"name":"get_weather","arguments":""}}]},"logprobs":null,"finish_reason":null}]}`; string(chunks[1].Data) != want {
			t.Errorf("tool start\n%s\nwant\n%s", chunks[1].Data, want)
		}
		if want := head + `{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"location"}}]},"logprobs":null,"finish_reason":null}]}`; string(chunks[2].Data) != want {
			t.Errorf("arguments\n%s\nwant\n%s", chunks[2].Data, want)
		}
		cc := accumulate(t, chunks)
		m := cc.Choices[0].Message
		if m.Content != "Checking." || cc.Choices[0].FinishReason != "tool_calls" || len(m.ToolCalls) != 2 ||
			m.ToolCalls[0].ID != "toolu_01A" || m.ToolCalls[0].Function.Name != "get_weather" ||
			m.ToolCalls[0].Function.Arguments != `{"location":"San Francisco, CA","unit":"°C"}` ||
			m.ToolCalls[1].ID != "toolu_01B" || m.ToolCalls[1].Function.Arguments != `{"tz":"America/Los_Angeles"}` {
			t.Errorf("accumulated %+v", m)
		}
		var text strings.Builder
		for _, c := range chunks {
			text.WriteString(c.Text)
		}
		if want := `Checking.get_weather{"location":"San Francisco, CA","unit":"°C"}get_time{"tz":"America/Los_Angeles"}`; text.String() != want {
			t.Errorf("counted text %q", text.String())
		}
		if u := chunks[len(chunks)-1].Usage; u == nil || *u != (app.Usage{PromptTokens: 300, CompletionTokens: 70}) {
			t.Errorf("usage %+v", u)
		}
	})
	t.Run("ToolUseFirst", func(t *testing.T) {
		_, c := MustFake(t, anthropicfake.Options{Answer: anthropicfake.Answer{ToolUses: []anthropicfake.ToolUse{{ID: "toolu_1", Name: "now", Input: `{}`}}}})
		chunks, err := drain(MustStream(t, context.Background(), c))
		if err != io.EOF {
			t.Fatalf("err %v", err)
		}
		if want := head + `{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"toolu_1","type":"function","function":{"name":"now","arguments":""}}]},"logprobs":null,"finish_reason":null}]}`; string(chunks[0].Data) != want {
			t.Errorf("first chunk\n%s\nwant\n%s", chunks[0].Data, want)
		}
		if cc := accumulate(t, chunks); cc.Choices[0].Message.ToolCalls[0].Function.Arguments != `{}` {
			t.Errorf("arguments %q", cc.Choices[0].Message.ToolCalls[0].Function.Arguments)
		}
	})
	t.Run("MaxTokens", func(t *testing.T) {
		_, c := MustFake(t, anthropicfake.Options{Answer: anthropicfake.Answer{Text: "Cut", StopReason: "max_tokens"}})
		chunks, _ := drain(MustStream(t, context.Background(), c))
		if cc := accumulate(t, chunks); cc.Choices[0].FinishReason != "length" {
			t.Errorf("finish_reason %q", cc.Choices[0].FinishReason)
		}
	})
	t.Run("EOFRepeats", func(t *testing.T) {
		_, c := MustFake(t, anthropicfake.Options{})
		s := MustStream(t, context.Background(), c)
		if _, err := drain(s); err != io.EOF {
			t.Fatal(err)
		}
		if _, err := s.Next(); err != io.EOF {
			t.Errorf("after EOF: %v", err)
		}
	})
}

func TestStreamErrors(t *testing.T) {
	t.Run("ErrorBeforeContent", func(t *testing.T) {
		f, c := MustFake(t, anthropicfake.Options{})
		f.Enqueue(anthropicfake.StreamOverloaded())
		s := MustStream(t, context.Background(), c)
		_, err := s.Next() // the very first call: nothing reached the client yet
		ue := upstreamError(t, err)
		if ue.Status != 0 || !errors.Is(err, anthropic.ErrErrorEvent) || string(ue.Body) != anthropicfake.StreamOverloadedEvent || ue.Header.Get("request-id") == "" {
			t.Errorf("%+v", ue)
		}
		if _, again := s.Next(); again != err {
			t.Errorf("error not sticky: %v", again)
		}
	})
	t.Run("ErrorAfterContent", func(t *testing.T) {
		f, c := MustFake(t, anthropicfake.Options{})
		// message_start, content_block_start, ping, "Hello!", " How"
		f.Enqueue(anthropicfake.Response{Kind: anthropicfake.ErrorInStream, After: 5, Body: []byte(anthropicfake.BodyAPIError)})
		chunks, err := drain(MustStream(t, context.Background(), c))
		ue := upstreamError(t, err)
		if len(chunks) != 2 || chunks[0].Text != "Hello!" || chunks[1].Text != " How" || !errors.Is(err, anthropic.ErrErrorEvent) ||
			string(ue.Body) != anthropicfake.BodyAPIError || !strings.Contains(err.Error(), "api_error: Internal server error") {
			t.Errorf("%d chunks, %v", len(chunks), err)
		}
	})
	t.Run("Broken", func(t *testing.T) {
		f, c := MustFake(t, anthropicfake.Options{})
		f.Enqueue(anthropicfake.BrokenStream(5))
		chunks, err := drain(MustStream(t, context.Background(), c))
		ue := upstreamError(t, err)
		if len(chunks) != 2 || ue.Status != 0 || ue.Timeout || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%d chunks, %+v", len(chunks), ue)
		}
	})
	t.Run("EndsBeforeMessageStop", func(t *testing.T) {
		c := MustServe(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
			evs := anthropicfake.Events(anthropicfake.Answer{Text: "Hi", Usage: anthropicfake.Usage{InputTokens: 1, OutputTokens: 1}}, "claude-x")
			for _, ev := range evs[:len(evs)-1] {
				_, _ = w.Write(ev)
			}
		})
		chunks, err := drain(MustStream(t, context.Background(), c))
		if !errors.Is(err, anthropic.ErrStreamBroken) || len(chunks) != 2 { // "Hi", then the finish chunk
			t.Errorf("%d chunks, %v", len(chunks), err)
		}
	})
	t.Run("Hang", func(t *testing.T) {
		f, c := MustFake(t, anthropicfake.Options{})
		f.Enqueue(anthropicfake.HangingStream(4))
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		chunks, err := drain(MustStream(t, ctx, c))
		if ue := upstreamError(t, err); len(chunks) != 1 || !ue.Timeout {
			t.Errorf("%d chunks, %+v", len(chunks), ue)
		}
	})
	t.Run("NotJSON", func(t *testing.T) {
		c := MustServe(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "event: message_start\ndata: {not json\n\n")
		})
		_, err := drain(MustStream(t, context.Background(), c))
		if ue := upstreamError(t, err); !errors.Is(err, anthropic.ErrBadResponse) || string(ue.Body) != "{not json" {
			t.Errorf("%+v", ue)
		}
	})
}

// Streams captured from the real API: the reference's example verbatim (message_delta with
// output_tokens only), and a capture with padding spaces and the spaced ping.
func TestStreamCaptures(t *testing.T) {
	tests := []struct {
		name, body   string
		content      string
		args         string
		finish       string
		prompt, comp int64
	}{
		{"Reference", "event: message_start\n" +
			`data: {"type":"message_start","message":{"id":"msg_1nZd","type":"message","role":"assistant","content":[],"model":"claude-x","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}` + "\n\n" +
			"event: content_block_delta\n" +
			`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}` + "\n\n" +
			"event: message_delta\n" +
			`data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}` + "\n\n" +
			"event: message_stop\n" +
			`data: {"type":"message_stop"}` + "\n\n",
			"Hello", "", "stop", 25, 15},
		{"PaddedToolUse", "event: message_start\n" +
			`data: {"type":"message_start","message":{"id":"msg_01Ju4j2MiGQb9KV9EEQ522Y3","type":"message","role":"assistant","model":"claude-3-haiku-20240307","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1293,"output_tokens":1}}   }` + "\n\n" +
			"event: content_block_start\n" +
			`data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_01DjrShFRRHp9SnHYRFRc53F","name":"search","input":{}}      }` + "\n\n" +
			"event: ping\n" + `data: {"type": "ping"}` + "\n\n" +
			"event: content_block_delta\n" +
			`data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":""}            }` + "\n\n" +
			"event: content_block_delta\n" +
			`data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"searc"}              }` + "\n\n" +
			"event: content_block_delta\n" +
			`data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"h_query\": \"sam sam\"}"} }` + "\n\n" +
			"event: content_block_stop\n" + `data: {"type":"content_block_stop","index":0     }` + "\n\n" +
			"event: message_delta\n" +
			`data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":70}       }` + "\n\n" +
			"event: message_stop\n" + `data: {"type":"message_stop"}` + "\n",
			"", `{"search_query": "sam sam"}`, "tool_calls", 1293, 70},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := MustServe(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
				_, _ = io.WriteString(w, tt.body)
			})
			chunks, err := drain(MustStream(t, context.Background(), c))
			if err != io.EOF {
				t.Fatalf("err %v", err)
			}
			cc := accumulate(t, chunks)
			m := cc.Choices[0].Message
			if m.Content != tt.content || cc.Choices[0].FinishReason != tt.finish || cc.Usage.PromptTokens != tt.prompt || cc.Usage.CompletionTokens != tt.comp {
				t.Errorf("accumulated %+v usage %+v", m, cc.Usage)
			}
			if tt.args != "" && (len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Arguments != tt.args) {
				t.Errorf("tool calls %+v", m.ToolCalls)
			}
		})
	}
}
