package gemini_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"

	"yosan/app"
	"yosan/providers/gemini"
	"yosan/providers/geminifake"
)

// collect reads a stream to its end and returns its chunks and final error (io.EOF when it
// ended well).
func collect(tb testing.TB, st app.Stream) ([]app.StreamChunk, error) {
	tb.Helper()
	defer st.Close()
	var chunks []app.StreamChunk
	for {
		ch, err := st.Next()
		if err != nil {
			if _, again := st.Next(); again != err {
				tb.Errorf("error not sticky: %v then %v", err, again)
			}
			return chunks, err
		}
		chunks = append(chunks, ch)
	}
}

// accumulate feeds the chunks to openai-go's accumulator, as an SDK client reads the stream.
func accumulate(tb testing.TB, chunks []app.StreamChunk) oai.ChatCompletionAccumulator {
	tb.Helper()
	var acc oai.ChatCompletionAccumulator
	for _, ch := range chunks {
		var c oai.ChatCompletionChunk
		if err := json.Unmarshal(ch.Data, &c); err != nil {
			tb.Fatalf("chunk %s: %v", ch.Data, err)
		}
		if !acc.AddChunk(c) {
			tb.Fatalf("accumulator refused chunk %s", ch.Data)
		}
	}
	return acc
}

func TestStream(t *testing.T) {
	t.Run("Text", func(t *testing.T) {
		f, c := MustFake(t, geminifake.Options{Text: "Hello there world", PromptTokens: 14, CandidatesTokens: 3, CachedTokens: 2, ThoughtsTokens: 100, Thought: "Hmm."})
		st, err := c.ChatCompletionStream(context.Background(), chatRequest("gemini-2.5-flash", "stream", "true"))
		if err != nil {
			t.Fatal(err)
		}
		chunks, err := collect(t, st)
		if err != io.EOF {
			t.Fatalf("stream ended with %v", err)
		}
		head := `{"id":"chatcmpl-` + geminifake.ResponseID + `","object":"chat.completion.chunk","created":1721631035,"model":"gemini-2.5-flash","choices":[`
		want := []string{
			head + `{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null}`, // the thought event
			head + `{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}],"usage":null}`,
			head + `{"index":0,"delta":{"content":" there"},"logprobs":null,"finish_reason":null}],"usage":null}`,
			head + `{"index":0,"delta":{"content":" world"},"logprobs":null,"finish_reason":null}],"usage":null}`,
			head + `{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}`,
			head + `],"usage":{"prompt_tokens":14,"completion_tokens":103,"total_tokens":117,"prompt_tokens_details":{"cached_tokens":2},"completion_tokens_details":{"reasoning_tokens":100}}}`,
		}
		if len(chunks) != len(want) {
			for _, ch := range chunks {
				t.Logf("%s", ch.Data)
			}
			t.Fatalf("%d chunks, want %d", len(chunks), len(want))
		}
		for i := range want {
			if string(chunks[i].Data) != want[i] {
				t.Errorf("chunk %d =\n%s\nwant\n%s", i, chunks[i].Data, want[i])
			}
		}
		var text strings.Builder
		for _, ch := range chunks[:len(chunks)-1] {
			if ch.Usage != nil || ch.UsageOnly {
				t.Errorf("chunk %s has usage", ch.Data)
			}
			text.WriteString(ch.Text)
		}
		if text.String() != "Hello there world" {
			t.Errorf("Text = %q", text.String())
		}
		last := chunks[len(chunks)-1]
		wantUsage := app.Usage{PromptTokens: 14, CompletionTokens: 103, CachedTokens: 2} // thoughts billed as output
		if !last.UsageOnly || last.Usage == nil || *last.Usage != wantUsage {
			t.Errorf("last chunk usage %+v (only %v), want %+v", last.Usage, last.UsageOnly, wantUsage)
		}
		acc := accumulate(t, chunks)
		if acc.Choices[0].Message.Content != "Hello there world" || acc.Usage.TotalTokens != 117 {
			t.Errorf("openai-go accumulated %+v", acc.ChatCompletion)
		}
		lr := f.LastRequest()
		if lr.Path != "/v1beta/models/gemini-2.5-flash:streamGenerateContent" || lr.Alt != "sse" {
			t.Errorf("path = %s?alt=%s", lr.Path, lr.Alt)
		}
		if string(lr.Body) != `{"contents":[{"role":"user","parts":[{"text":"Say hi"}]}]}` {
			t.Errorf("sent %s", lr.Body)
		}
		if got := lr.Header.Get("Accept"); got != "text/event-stream" {
			t.Errorf("Accept = %q", got)
		}
	})

	t.Run("FunctionCalls", func(t *testing.T) {
		_, c := MustFake(t, geminifake.Options{Text: "Let me check.", FunctionCalls: []geminifake.FunctionCall{
			{Name: "getWeather", Args: `{"location":"Tokyo"}`, ThoughtSignature: "CikBcsja"},
			{Name: "getTime", Args: `{}`},
		}})
		st, err := c.ChatCompletionStream(context.Background(), chatRequest("gemini-2.5-flash"))
		if err != nil {
			t.Fatal(err)
		}
		chunks, err := collect(t, st)
		if err != io.EOF {
			t.Fatalf("stream ended with %v", err)
		}
		var calls app.StreamChunk
		for _, ch := range chunks {
			if strings.Contains(string(ch.Data), "tool_calls") {
				calls = ch
				break
			}
		}
		wantCalls := `"delta":{"tool_calls":[` +
			`{"index":0,"id":"call_0","type":"function","function":{"name":"getWeather","arguments":"{\"location\":\"Tokyo\"}"},"extra_content":{"google":{"thought_signature":"CikBcsja"}}},` +
			`{"index":1,"id":"call_1","type":"function","function":{"name":"getTime","arguments":"{}"}}]}`
		if !strings.Contains(string(calls.Data), wantCalls) {
			t.Errorf("tool call chunk = %s\nwant it to contain %s", calls.Data, wantCalls)
		}
		if calls.Text != `{"location":"Tokyo"}{}` {
			t.Errorf("Text = %q", calls.Text)
		}
		acc := accumulate(t, chunks)
		ch := acc.Choices[0]
		if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 2 || ch.Message.ToolCalls[0].Function.Arguments != `{"location":"Tokyo"}` ||
			ch.Message.Content != "Let me check." {
			t.Errorf("openai-go accumulated %+v", ch)
		}
	})

	t.Run("OnlyFunctionCall", func(t *testing.T) {
		_, c := MustFake(t, geminifake.Options{NoText: true, FunctionCalls: []geminifake.FunctionCall{{Name: "now"}}})
		st, err := c.ChatCompletionStream(context.Background(), chatRequest("gemini-2.5-flash"))
		if err != nil {
			t.Fatal(err)
		}
		chunks, err := collect(t, st)
		if err != io.EOF || len(chunks) != 3 {
			t.Fatalf("%d chunks, %v", len(chunks), err)
		}
		if !strings.Contains(string(chunks[0].Data), `"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_0"`) ||
			!strings.Contains(string(chunks[1].Data), `"finish_reason":"tool_calls"`) || !chunks[2].UsageOnly {
			t.Errorf("chunks %s | %s | %s", chunks[0].Data, chunks[1].Data, chunks[2].Data)
		}
	})

	t.Run("MaxTokens", func(t *testing.T) {
		_, c := MustFake(t, geminifake.Options{Text: "Cut", FinishReason: "MAX_TOKENS"})
		st, err := c.ChatCompletionStream(context.Background(), chatRequest("gemini-2.5-flash"))
		if err != nil {
			t.Fatal(err)
		}
		chunks, err := collect(t, st)
		if err != io.EOF || !strings.Contains(string(chunks[len(chunks)-2].Data), `"finish_reason":"length"`) {
			t.Errorf("%v, chunks %d", err, len(chunks))
		}
	})

	t.Run("BreakStream", func(t *testing.T) {
		f, c := MustFake(t, geminifake.Options{Text: "one two three four"})
		f.Enqueue(geminifake.Response{Kind: geminifake.BreakStream, After: 2})
		st, err := c.ChatCompletionStream(context.Background(), chatRequest("gemini-2.5-flash"))
		if err != nil {
			t.Fatal(err)
		}
		chunks, err := collect(t, st)
		ue := MustUpstreamError(t, err)
		if len(chunks) != 2 || ue.Status != 0 || ue.Timeout || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%d chunks, then %v", len(chunks), err)
		}
		for _, ch := range chunks {
			if ch.Usage != nil {
				t.Errorf("a broken stream has no usage chunk: %s", ch.Data)
			}
		}
	})

	t.Run("EndWithoutFinish", func(t *testing.T) {
		f, c := MustFake(t, geminifake.Options{Text: "one two three"})
		f.Enqueue(geminifake.Response{Kind: geminifake.EndStream, After: 10})
		st, err := c.ChatCompletionStream(context.Background(), chatRequest("gemini-2.5-flash"))
		if err != nil {
			t.Fatal(err)
		}
		chunks, err := collect(t, st)
		MustUpstreamError(t, err)
		if len(chunks) != 2 || !errors.Is(err, gemini.ErrStreamBroken) {
			t.Errorf("%d chunks, then %v", len(chunks), err)
		}
	})

	t.Run("EmptyStream", func(t *testing.T) {
		f, c := MustFake(t, geminifake.Options{})
		f.Enqueue(geminifake.Response{Kind: geminifake.EndStream})
		st, err := c.ChatCompletionStream(context.Background(), chatRequest("gemini-2.5-flash"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := collect(t, st); !errors.Is(err, gemini.ErrStreamBroken) {
			t.Errorf("got %v", err)
		}
	})

	t.Run("Hang", func(t *testing.T) {
		f, c := MustFake(t, geminifake.Options{})
		f.Enqueue(geminifake.Response{Kind: geminifake.Hang, After: 1})
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		st, err := c.ChatCompletionStream(ctx, chatRequest("gemini-2.5-flash"))
		if err != nil {
			t.Fatal(err)
		}
		chunks, err := collect(t, st)
		ue := MustUpstreamError(t, err)
		if len(chunks) != 1 || !ue.Timeout {
			t.Errorf("%d chunks, then %+v", len(chunks), ue)
		}
	})

	t.Run("CloseEarly", func(t *testing.T) {
		_, c := MustFake(t, geminifake.Options{})
		st, err := c.ChatCompletionStream(context.Background(), chatRequest("gemini-2.5-flash"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Next(); err != nil {
			t.Fatal(err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		if err := st.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if _, err := st.Next(); err == nil || err == io.EOF {
			t.Errorf("Next after Close = %v", err)
		}
	})
}

// TestStreamWire covers upstream behaviour the fake does not script: the event framing
// variants, several candidates, a blocked prompt, an error event, a JSON answer.
func TestStreamWire(t *testing.T) {
	serve := func(contentType, body string) *gemini.Client {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", contentType)
			_, _ = io.WriteString(w, body)
		}))
		t.Cleanup(srv.Close)
		return gemini.New(gemini.Config{Name: "fake", BaseURL: srv.URL, Now: fixedNow})
	}
	const usage = `"usageMetadata": {"promptTokenCount": 4,"candidatesTokenCount": 2,"totalTokenCount": 6}`

	t.Run("LFFramingAndMultiLineData", func(t *testing.T) {
		c := serve("text/event-stream", "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"a\"}],\"role\": \"model\"},\"index\": 0}]}\n\n"+
			"data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"b\"}],\n"+
			"data: \"role\": \"model\"},\"finishReason\": \"STOP\",\"index\": 0}],"+usage+"}\n\n")
		st, err := c.ChatCompletionStream(context.Background(), chatRequest("m"))
		if err != nil {
			t.Fatal(err)
		}
		chunks, err := collect(t, st)
		if err != io.EOF || len(chunks) != 4 {
			t.Fatalf("%d chunks, %v", len(chunks), err)
		}
		if chunks[0].Text != "a" || chunks[1].Text != "b" || *chunks[3].Usage != (app.Usage{PromptTokens: 4, CompletionTokens: 2}) {
			t.Errorf("chunks %+v", chunks)
		}
		// No responseId, no modelVersion: the defaults.
		if !strings.HasPrefix(string(chunks[0].Data), `{"id":"chatcmpl-gemini","object":"chat.completion.chunk","created":1721631035,"model":"m",`) {
			t.Errorf("chunk = %s", chunks[0].Data)
		}
	})

	t.Run("TwoCandidates", func(t *testing.T) {
		c := serve("text/event-stream", "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"x\"}],\"role\": \"model\"},\"index\": 0},{\"content\": {\"parts\": [{\"text\": \"y\"}],\"role\": \"model\"},\"finishReason\": \"STOP\",\"index\": 1}]}\r\n\r\n"+
			"data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"z\"}],\"role\": \"model\"},\"finishReason\": \"MAX_TOKENS\",\"index\": 0}],"+usage+"}\r\n\r\n")
		st, err := c.ChatCompletionStream(context.Background(), chatRequest("m", "n", "2"))
		if err != nil {
			t.Fatal(err)
		}
		chunks, err := collect(t, st)
		if err != io.EOF {
			t.Fatal(err)
		}
		acc := accumulate(t, chunks)
		if len(acc.Choices) != 2 || acc.Choices[0].Message.Content != "xz" || acc.Choices[1].Message.Content != "y" ||
			acc.Choices[0].FinishReason != "length" || acc.Choices[1].FinishReason != "stop" {
			t.Errorf("accumulated %+v", acc.Choices)
		}
	})

	t.Run("BlockedPrompt", func(t *testing.T) {
		c := serve("text/event-stream", "data: {\"promptFeedback\": {\"blockReason\": \"PROHIBITED_CONTENT\"},\"usageMetadata\": {\"promptTokenCount\": 9,\"totalTokenCount\": 9}}\r\n\r\n")
		st, err := c.ChatCompletionStream(context.Background(), chatRequest("m"))
		if err != nil {
			t.Fatal(err)
		}
		chunks, err := collect(t, st)
		if err != io.EOF || len(chunks) != 3 || !strings.Contains(string(chunks[1].Data), `"finish_reason":"content_filter"`) {
			t.Fatalf("%d chunks, %v", len(chunks), err)
		}
	})

	t.Run("ErrorEvent", func(t *testing.T) {
		ev := `{"error": {"code": 503,"message": "The model is overloaded. Please try again later.","status": "UNAVAILABLE"}}`
		c := serve("text/event-stream", "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"a\"}],\"role\": \"model\"},\"index\": 0}]}\r\n\r\ndata: "+ev+"\r\n\r\n")
		st, err := c.ChatCompletionStream(context.Background(), chatRequest("m"))
		if err != nil {
			t.Fatal(err)
		}
		chunks, err := collect(t, st)
		ue := MustUpstreamError(t, err)
		if len(chunks) != 1 || !errors.Is(err, gemini.ErrErrorEvent) || string(ue.Body) != ev {
			t.Errorf("%d chunks, then %v (%s)", len(chunks), err, ue.Body)
		}
	})

	t.Run("NotJSON", func(t *testing.T) {
		c := serve("text/event-stream", "data: <html>\r\n\r\n")
		st, err := c.ChatCompletionStream(context.Background(), chatRequest("m"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := collect(t, st); !errors.Is(err, gemini.ErrBadResponse) {
			t.Errorf("got %v", err)
		}
	})

	t.Run("JSONArrayInsteadOfSSE", func(t *testing.T) {
		c := serve("application/json; charset=UTF-8", `[{"candidates": []}]`)
		_, err := c.ChatCompletionStream(context.Background(), chatRequest("m"))
		ue := MustUpstreamError(t, err)
		if !errors.Is(err, gemini.ErrBadResponse) || string(ue.Body) != `[{"candidates": []}]` {
			t.Errorf("got %v", err)
		}
	})
}
