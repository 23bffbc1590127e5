package openai_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"yosan/app"
	"yosan/providers/openai"
	"yosan/providers/openaifake"
)

// collect reads a stream to its end and returns its chunks and the final error.
func collect(tb testing.TB, s app.Stream) ([]app.StreamChunk, error) {
	tb.Helper()
	defer s.Close()
	var chunks []app.StreamChunk
	for {
		c, err := s.Next()
		if err != nil {
			return chunks, err
		}
		chunks = append(chunks, c)
	}
}

func TestChatCompletionStream(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		f, c := MustFake(t, openaifake.Options{PromptTokens: 14, CompletionTokens: 3})
		s, err := c.ChatCompletionStream(context.Background(), chatRequest("gpt-4o", "stream_options", `{"include_usage":true}`))
		if err != nil {
			t.Fatal(err)
		}
		chunks, err := collect(t, s)
		if err != io.EOF {
			t.Fatalf("end: %v", err)
		}
		if !strings.Contains(string(f.LastRequest().Body), `"stream":true`) {
			t.Errorf("stream not forced: %s", f.LastRequest().Body)
		}
		// role chunk, 3 content chunks, finish chunk, usage chunk
		if len(chunks) != 6 {
			t.Fatalf("%d chunks", len(chunks))
		}
		var text string
		for i, ch := range chunks[:5] {
			if ch.Usage != nil || ch.UsageOnly {
				t.Errorf("chunk %d has usage", i)
			}
			if !strings.HasSuffix(string(ch.Data), `,"usage":null}`) {
				t.Errorf("chunk %d data %s", i, ch.Data)
			}
			text += ch.Text
		}
		if text != "This is a" {
			t.Errorf("text %q", text)
		}
		last := chunks[5]
		if !last.UsageOnly || last.Usage == nil || *last.Usage != (app.Usage{PromptTokens: 14, CompletionTokens: 3}) {
			t.Errorf("usage chunk %+v", last)
		}
		if !strings.HasPrefix(string(last.Data), `{"id":"chatcmpl-fake","object":"chat.completion.chunk","created":1721631035,"model":"gpt-4o","choices":[],"usage":{"prompt_tokens":14,`) {
			t.Errorf("usage chunk data %s", last.Data)
		}
		if _, err := s.Next(); err == nil {
			t.Error("Next after Close succeeded")
		}
	})
	for _, tt := range []struct {
		name    string
		resp    openaifake.Response
		wantErr error
		chunks  int
	}{
		{"ErrBroken", openaifake.Response{Kind: openaifake.BreakStream, After: 2}, io.ErrUnexpectedEOF, 2},
		{"ErrEndedWithoutDone", openaifake.Response{Kind: openaifake.EndStream, After: 3}, openai.ErrStreamBroken, 3},
		{"ErrErrorEvent", openaifake.Response{Kind: openaifake.ErrorInStream, After: 1}, openai.ErrErrorEvent, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, c := MustFake(t, openaifake.Options{})
			f.Enqueue(tt.resp)
			s, err := c.ChatCompletionStream(context.Background(), chatRequest("gpt-4o"))
			if err != nil {
				t.Fatal(err)
			}
			chunks, err := collect(t, s)
			ue := MustUpstreamError(t, err)
			if !errors.Is(err, tt.wantErr) || ue.Status != 0 || len(chunks) != tt.chunks {
				t.Errorf("got %d chunks, %v", len(chunks), err)
			}
			if tt.name == "ErrErrorEvent" && string(ue.Body) != openaifake.StreamErrorEvent {
				t.Errorf("body %s", ue.Body)
			}
		})
	}
	t.Run("ErrTimeoutMidStream", func(t *testing.T) {
		f, c := MustFake(t, openaifake.Options{})
		f.Enqueue(openaifake.Response{Kind: openaifake.Hang, After: 2})
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		s, err := c.ChatCompletionStream(ctx, chatRequest("gpt-4o"))
		if err != nil {
			t.Fatal(err)
		}
		chunks, err := collect(t, s)
		if ue := MustUpstreamError(t, err); !ue.Timeout || len(chunks) != 2 {
			t.Errorf("got %d chunks, %+v", len(chunks), ue)
		}
	})
	t.Run("ErrJSONInsteadOfStream", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"error":{"message":"boom"}}`)
		}))
		defer srv.Close()
		c := openai.New(openai.Config{Name: "fake", BaseURL: srv.URL})
		_, err := c.ChatCompletionStream(context.Background(), chatRequest("x"))
		if ue := MustUpstreamError(t, err); !errors.Is(err, openai.ErrBadResponse) || string(ue.Body) != `{"error":{"message":"boom"}}` {
			t.Errorf("got %+v", ue)
		}
	})
}

// rawStream serves body as an event stream.
func rawStream(tb testing.TB, body string) app.Stream {
	tb.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, body)
	}))
	tb.Cleanup(srv.Close)
	c := openai.New(openai.Config{Name: "fake", BaseURL: srv.URL})
	s, err := c.ChatCompletionStream(context.Background(), chatRequest("x"))
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func TestStreamSSE(t *testing.T) {
	big := strings.Repeat("x", 5<<20)
	tests := []struct {
		name    string
		body    string
		data    []string
		texts   []string
		wantErr error
	}{
		{"NoSpaceAfterData", "data:{\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata:[DONE]\n\n",
			[]string{`{"choices":[{"delta":{"content":"a"}}]}`}, []string{"a"}, io.EOF},
		{"CommentsEventsCRLF", ": keep-alive\r\n\r\nevent: message\r\nid: 1\r\ndata: {\"choices\":[]}\r\n\r\n: ping\n\ndata: [DONE]\r\n\r\n",
			[]string{`{"choices":[]}`}, []string{""}, io.EOF},
		{"DoneWithoutBlankLine", "data: {\"choices\":[]}\n\ndata: [DONE]",
			[]string{`{"choices":[]}`}, []string{""}, io.EOF},
		{"MultiLineData", "data: {\"choices\":\ndata: []}\n\ndata: [DONE]\n\n",
			[]string{"{\"choices\":\n[]}"}, []string{""}, io.EOF},
		{"ReasoningAndToolCalls", `data: {"choices":[{"delta":{"reasoning_content":"think ","content":"say "}}, {"delta":{"tool_calls":[{"function":{"arguments":"{\"a\""}},{"function":{"arguments":":1}"}}]}}]}` + "\n\ndata: [DONE]\n\n",
			[]string{`{"choices":[{"delta":{"reasoning_content":"think ","content":"say "}}, {"delta":{"tool_calls":[{"function":{"arguments":"{\"a\""}},{"function":{"arguments":":1}"}}]}}]}`},
			[]string{`say think {"a":1}`}, io.EOF},
		{"BigLine", `data: {"choices":[{"delta":{"content":"` + big + `"}}]}` + "\n\ndata: [DONE]\n\n",
			[]string{`{"choices":[{"delta":{"content":"` + big + `"}}]}`}, []string{big}, io.EOF},
		{"ErrLineTooBig", `data: {"choices":[{"delta":{"content":"` + big + big + `"}}]}` + "\n\n",
			nil, nil, openai.ErrBadResponse},
		{"ErrNotJSON", "data: {\"choices\":[]}\n\ndata: <html>\n\n", []string{`{"choices":[]}`}, []string{""}, openai.ErrBadResponse},
		{"ErrEmptyBody", "", nil, nil, openai.ErrStreamBroken},
		{"ErrNoDone", "data: {\"choices\":[]}\n\n", []string{`{"choices":[]}`}, []string{""}, io.ErrUnexpectedEOF},
		{"ErrErrorMidStream", "data: {\"choices\":[]}\n\nevent: error\ndata: {\"error\":{\"message\":\"overloaded\",\"type\":\"server_error\"}}\n\n",
			[]string{`{"choices":[]}`}, []string{""}, openai.ErrErrorEvent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chunks, err := collect(t, rawStream(t, tt.body))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("end %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr != io.EOF {
				MustUpstreamError(t, err)
			}
			if len(chunks) != len(tt.data) {
				t.Fatalf("%d chunks, want %d", len(chunks), len(tt.data))
			}
			for i, ch := range chunks {
				if string(ch.Data) != tt.data[i] || ch.Text != tt.texts[i] {
					t.Errorf("chunk %d: data %.80q text %.80q", i, ch.Data, ch.Text)
				}
			}
		})
	}
}

func TestStreamUsage(t *testing.T) {
	tests := []struct {
		name      string
		event     string
		usage     *app.Usage
		usageOnly bool
	}{
		{"Null", `{"choices":[{"delta":{"content":"a"}}],"usage":null}`, nil, false},
		{"Absent", `{"choices":[{"delta":{"content":"a"}}]}`, nil, false},
		{"UsageOnly", `{"choices":[],"usage":{"prompt_tokens":14,"completion_tokens":3,"total_tokens":17}}`, &app.Usage{PromptTokens: 14, CompletionTokens: 3}, true},
		{"WithFinish", `{"choices":[{"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":1}}}`, &app.Usage{PromptTokens: 1, CompletionTokens: 2, CachedTokens: 1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chunks, err := collect(t, rawStream(t, "data: "+tt.event+"\n\ndata: [DONE]\n\n"))
			if err != io.EOF || len(chunks) != 1 {
				t.Fatalf("%d chunks, %v", len(chunks), err)
			}
			ch := chunks[0]
			if (ch.Usage == nil) != (tt.usage == nil) || ch.Usage != nil && *ch.Usage != *tt.usage || ch.UsageOnly != tt.usageOnly {
				t.Errorf("usage %+v only %v", ch.Usage, ch.UsageOnly)
			}
		})
	}
}

func BenchmarkStream(b *testing.B) {
	_, c := MustFake(b, openaifake.Options{NoRecord: true, CompletionTokens: 100})
	req := chatRequest("gpt-4o", "stream_options", `{"include_usage":true}`)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			s, err := c.ChatCompletionStream(ctx, req)
			if err != nil {
				b.Error(err)
				return
			}
			for {
				if _, err := s.Next(); err != nil {
					if err != io.EOF {
						b.Error(err)
					}
					break
				}
			}
			s.Close()
		}
	})
}
