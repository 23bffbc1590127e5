package geminifake_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"yosan/providers/geminifake"
	"yosan/providers/openai"
)

const chatPath = "/v1beta/models/gemini-2.5-flash:generateContent"
const streamPath = "/v1beta/models/gemini-2.5-flash:streamGenerateContent"

// MustServer starts a fake with opts and returns it with its server.
func MustServer(tb testing.TB, opts geminifake.Options) (*geminifake.Fake, *httptest.Server) {
	tb.Helper()
	f := geminifake.New(opts)
	srv := httptest.NewServer(f)
	tb.Cleanup(func() { f.Close(); srv.Close() })
	return f, srv
}

// post sends body to path with key (none when "") and returns the answer, body read.
func post(tb testing.TB, srv *httptest.Server, path, key, body string) (*http.Response, string) {
	tb.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("x-goog-api-key", key)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return resp, string(b)
}

const minimal = `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`

func TestAPIKey(t *testing.T) {
	_, srv := MustServer(t, geminifake.Options{APIKey: "AIza-right"})
	for _, tc := range []struct {
		name, path, key string
		status          int
		body            string
	}{
		{"Missing", chatPath, "", http.StatusForbidden, geminifake.BodyUnregisteredCaller},
		{"Wrong", chatPath, "AIza-wrong", http.StatusBadRequest, geminifake.BodyAPIKeyInvalid},
		{"Header", chatPath, "AIza-right", http.StatusOK, ""},
		{"Query", chatPath + "?key=AIza-right", "", http.StatusOK, ""},
		{"WrongQuery", chatPath + "?key=nope", "", http.StatusBadRequest, geminifake.BodyAPIKeyInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := post(t, srv, tc.path, tc.key, minimal)
			if resp.StatusCode != tc.status || tc.body != "" && body != tc.body {
				t.Errorf("got %d %s", resp.StatusCode, body)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json; charset=UTF-8" {
				t.Errorf("Content-Type = %q", ct)
			}
		})
	}
}

func TestRouting(t *testing.T) {
	f, srv := MustServer(t, geminifake.Options{})
	t.Run("UnknownMethod", func(t *testing.T) {
		resp, body := post(t, srv, "/v1beta/models/gemini-2.5-flash:countTokens", "", minimal)
		if resp.StatusCode != http.StatusNotFound || body != geminifake.BodyNotFound {
			t.Errorf("got %d %s", resp.StatusCode, body)
		}
	})
	t.Run("Get", func(t *testing.T) {
		resp, err := srv.Client().Get(srv.URL + chatPath)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("status %d", resp.StatusCode)
		}
	})
	t.Run("InvalidJSON", func(t *testing.T) {
		resp, body := post(t, srv, chatPath, "", "{nope")
		if resp.StatusCode != http.StatusBadRequest || body != geminifake.BodyInvalidJSON {
			t.Errorf("got %d %s", resp.StatusCode, body)
		}
	})
	t.Run("Counters", func(t *testing.T) {
		before := f.Requests()
		post(t, srv, chatPath, "", minimal)
		post(t, srv, "/v1beta/models/e:batchEmbedContents", "", `{"requests":[]}`)
		if f.Requests()-before != 2 || f.ChatRequests() < 1 || f.EmbeddingRequests() != 1 {
			t.Errorf("requests %d, chats %d, embeddings %d", f.Requests(), f.ChatRequests(), f.EmbeddingRequests())
		}
		last := f.LastRequest()
		if last.Model != "e" || last.Method != "batchEmbedContents" || last.Body == nil {
			t.Errorf("last request %+v", last)
		}
	})
}

func TestGenerateContent(t *testing.T) {
	t.Run("Text", func(t *testing.T) {
		_, srv := MustServer(t, geminifake.Options{Text: "Hi", PromptTokens: 4, CandidatesTokens: 1})
		resp, body := post(t, srv, chatPath, "", minimal)
		want := `{
  "candidates": [
    {
      "content": {
        "parts": [
          {
            "text": "Hi"
          }
        ],
        "role": "model"
      },
      "finishReason": "STOP",
      "index": 0
    }
  ],
  "usageMetadata": {
    "promptTokenCount": 4,
    "candidatesTokenCount": 1,
    "totalTokenCount": 5,
    "promptTokensDetails": [
      {
        "modality": "TEXT",
        "tokenCount": 4
      }
    ]
  },
  "modelVersion": "gemini-2.5-flash",
  "responseId": "` + geminifake.ResponseID + `"
}
`
		if resp.StatusCode != http.StatusOK || body != want {
			t.Errorf("got %d\n%s\nwant\n%s", resp.StatusCode, body, want)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json; charset=UTF-8" {
			t.Errorf("Content-Type = %q", ct)
		}
	})

	t.Run("ThoughtsCacheAndCalls", func(t *testing.T) {
		_, srv := MustServer(t, geminifake.Options{
			Text: "Sure.", Thought: "The user wants weather.", PromptTokens: 83, CandidatesTokens: 14, ThoughtsTokens: 104, CachedTokens: 64,
			FunctionCalls: []geminifake.FunctionCall{{Name: "getWeather", Args: `{"location": "Tokyo", "days": 2}`, ThoughtSignature: "CikB"}},
			ModelVersion:  "gemini-2.5-flash-001",
		})
		_, body := post(t, srv, chatPath, "", minimal)
		var got struct {
			Candidates []struct {
				Content struct {
					Parts []map[string]json.RawMessage `json:"parts"`
				} `json:"content"`
				FinishReason  string `json:"finishReason"`
				FinishMessage string `json:"finishMessage"`
			} `json:"candidates"`
			UsageMetadata map[string]json.RawMessage `json:"usageMetadata"`
			ModelVersion  string                     `json:"modelVersion"`
		}
		if err := json.Unmarshal([]byte(body), &got); err != nil {
			t.Fatal(err)
		}
		parts := got.Candidates[0].Content.Parts
		if len(parts) != 3 || string(parts[0]["thought"]) != "true" || string(parts[1]["text"]) != `"Sure."` ||
			string(parts[2]["thoughtSignature"]) != `"CikB"` {
			t.Errorf("parts = %s", body)
		}
		if !strings.Contains(body, "\"functionCall\": {\n              \"name\": \"getWeather\",\n              \"args\": {\n                \"location\": \"Tokyo\",\n                \"days\": 2\n              }\n            }") {
			t.Errorf("function call not indented in Google's style, key order kept:\n%s", body)
		}
		if got.Candidates[0].FinishMessage != geminifake.FunctionCallsMessage || got.ModelVersion != "gemini-2.5-flash-001" {
			t.Errorf("body = %s", body)
		}
		u := got.UsageMetadata
		if string(u["thoughtsTokenCount"]) != "104" || string(u["cachedContentTokenCount"]) != "64" || string(u["totalTokenCount"]) != "201" {
			t.Errorf("usageMetadata = %s", body)
		}
	})
}

func TestStream(t *testing.T) {
	t.Run("SSE", func(t *testing.T) {
		_, srv := MustServer(t, geminifake.Options{Text: "Hi you", PromptTokens: 4, CandidatesTokens: 3, ThoughtsTokens: 5})
		resp, body := post(t, srv, streamPath+"?alt=sse", "", minimal)
		ev := func(text, finish string, cands int) string {
			f := ""
			if finish != "" {
				f = `"finishReason": "` + finish + `",`
			}
			return `data: {"candidates": [{"content": {"parts": [{"text": "` + text + `"}],"role": "model"},` + f + `"index": 0}],` +
				`"usageMetadata": {"promptTokenCount": 4,"candidatesTokenCount": ` + strconv.Itoa(cands) + `,"totalTokenCount": ` + strconv.Itoa(4+cands+5) +
				`,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 4}],"thoughtsTokenCount": 5},` +
				`"modelVersion": "gemini-2.5-flash","responseId": "` + geminifake.ResponseID + `"}` + "\r\n\r\n"
		}
		want := ev("Hi", "", 2) + ev(" you", "STOP", 3)
		if body != want {
			t.Errorf("got\n%q\nwant\n%q", body, want)
		}
		if resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("Content-Disposition") != "attachment" {
			t.Errorf("header %v", resp.Header)
		}
	})

	t.Run("JSONArrayWithoutAlt", func(t *testing.T) {
		_, srv := MustServer(t, geminifake.Options{Text: "a b c"})
		resp, body := post(t, srv, streamPath, "", minimal)
		var evs []json.RawMessage
		if err := json.Unmarshal([]byte(body), &evs); err != nil || len(evs) != 3 {
			t.Fatalf("body %s: %v", body, err)
		}
		if !strings.HasPrefix(body, "[{\n  \"candidates\": [") || resp.Header.Get("Content-Type") != "application/json; charset=UTF-8" {
			t.Errorf("body %s", body)
		}
	})

	t.Run("ThoughtAndCalls", func(t *testing.T) {
		_, srv := MustServer(t, geminifake.Options{Text: "ok", Thought: "hmm", FunctionCalls: []geminifake.FunctionCall{{Name: "f"}}})
		_, body := post(t, srv, streamPath+"?alt=sse", "", minimal)
		evs := strings.Split(strings.TrimSuffix(body, "\r\n\r\n"), "\r\n\r\n")
		if len(evs) != 3 || !strings.Contains(evs[0], `{"text": "hmm","thought": true}`) ||
			!strings.Contains(evs[2], `{"functionCall": {"name": "f","args": {}}}],"role": "model"},"finishReason": "STOP","index": 0,"finishMessage": "Model generated function call(s)."}`) {
			t.Errorf("events:\n%s", strings.Join(evs, "\n"))
		}
		if strings.Contains(evs[1], "finishReason") {
			t.Errorf("finishReason before the last event: %s", evs[1])
		}
	})

	for _, tc := range []struct {
		name    string
		resp    geminifake.Response
		events  int
		readErr bool // the client sees a broken body
	}{
		{"BreakStream", geminifake.Response{Kind: geminifake.BreakStream, After: 1}, 1, true},
		{"BreakStreamNeverLast", geminifake.Response{Kind: geminifake.BreakStream, After: 99}, 3, true},
		{"EndStream", geminifake.Response{Kind: geminifake.EndStream, After: 2}, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, srv := MustServer(t, geminifake.Options{Text: "a b c d"})
			f.Enqueue(tc.resp)
			resp, err := srv.Client().Post(srv.URL+streamPath+"?alt=sse", "application/json", strings.NewReader(minimal))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if (err != nil) != tc.readErr || tc.readErr && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("read error %v", err)
			}
			if n := bytes.Count(b, []byte("\r\n\r\n")); n != tc.events || bytes.Contains(b, []byte("finishReason")) {
				t.Errorf("%d events: %s", n, b)
			}
		})
	}

	t.Run("Hang", func(t *testing.T) {
		f, srv := MustServer(t, geminifake.Options{})
		f.Enqueue(geminifake.Response{Kind: geminifake.Hang, After: 1})
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+streamPath+"?alt=sse", strings.NewReader(minimal))
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if !errors.Is(err, context.DeadlineExceeded) || bytes.Count(b, []byte("\r\n\r\n")) != 1 {
			t.Errorf("read %q, %v", b, err)
		}
	})

	t.Run("Garbage", func(t *testing.T) {
		f, srv := MustServer(t, geminifake.Options{})
		f.Enqueue(geminifake.Response{Kind: geminifake.Garbage})
		resp, body := post(t, srv, chatPath, "", minimal)
		if resp.StatusCode != http.StatusOK || json.Valid([]byte(body)) {
			t.Errorf("got %d %s", resp.StatusCode, body)
		}
	})
}

func TestEmbeddings(t *testing.T) {
	_, srv := MustServer(t, geminifake.Options{EmbeddingDims: 3})
	t.Run("Batch", func(t *testing.T) {
		resp, body := post(t, srv, "/v1beta/models/gemini-embedding-001:batchEmbedContents", "",
			`{"requests":[{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"hello"}]}},{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"world"}]},"outputDimensionality":2}]}`)
		var got struct {
			Embeddings []struct {
				Values []float32 `json:"values"`
			} `json:"embeddings"`
		}
		if err := json.Unmarshal([]byte(body), &got); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %s: %v", resp.StatusCode, body, err)
		}
		want0, want1 := openai.HashVector([]byte("hello"), 3), openai.HashVector([]byte("world"), 2)
		if len(got.Embeddings) != 2 || !equal(got.Embeddings[0].Values, want0) || !equal(got.Embeddings[1].Values, want1) {
			t.Errorf("body %s", body)
		}
		if !strings.HasPrefix(body, "{\n  \"embeddings\": [\n    {\n      \"values\": [\n        ") || strings.Contains(body, "usage") {
			t.Errorf("body %s", body)
		}
	})
	t.Run("Single", func(t *testing.T) {
		_, body := post(t, srv, "/v1beta/models/gemini-embedding-001:embedContent", "", `{"content":{"parts":[{"text":"hello"}]}}`)
		var got struct {
			Embedding struct {
				Values []float32 `json:"values"`
			} `json:"embedding"`
		}
		if err := json.Unmarshal([]byte(body), &got); err != nil || !equal(got.Embedding.Values, openai.HashVector([]byte("hello"), 3)) {
			t.Errorf("body %s: %v", body, err)
		}
	})
}

func equal(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestScriptedErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		resp    geminifake.Response
		status  int
		code    string // error.status
		quotaID string // the QuotaFailure violation's quotaId, "" when none
		delay   string // the RetryInfo retryDelay, "" when none
	}{
		{"QuotaPerMinute", geminifake.QuotaPerMinute(), 429, "RESOURCE_EXHAUSTED", "GenerateRequestsPerMinutePerProjectPerModel-FreeTier", "38s"},
		{"QuotaTokensPerMinute", geminifake.QuotaTokensPerMinute(), 429, "RESOURCE_EXHAUSTED", "GenerateContentInputTokensPerModelPerMinute-FreeTier", "0.2s"},
		{"QuotaPerDay", geminifake.QuotaPerDay(), 429, "RESOURCE_EXHAUSTED", "GenerateRequestsPerDayPerProjectPerModel-FreeTier", "26s"},
		{"ResourceExhausted", geminifake.ResourceExhausted(), 429, "RESOURCE_EXHAUSTED", "", ""},
		{"Overloaded", geminifake.Overloaded(), 503, "UNAVAILABLE", "", ""},
		{"Internal", geminifake.Internal(), 500, "INTERNAL", "", ""},
		{"TokenLimitExceeded", geminifake.TokenLimitExceeded(), 400, "INVALID_ARGUMENT", "", ""},
		{"PermissionDenied", geminifake.PermissionDenied(), 403, "PERMISSION_DENIED", "", ""},
		{"APIKeyInvalid", geminifake.APIKeyInvalid(), 400, "INVALID_ARGUMENT", "", ""},
		{"ArrayWrapped", geminifake.ArrayWrapped(geminifake.QuotaPerDay()), 429, "RESOURCE_EXHAUSTED", "GenerateRequestsPerDayPerProjectPerModel-FreeTier", "26s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, srv := MustServer(t, geminifake.Options{})
			f.Enqueue(tc.resp)
			resp, body := post(t, srv, chatPath, "", minimal)
			if resp.StatusCode != tc.status || body != string(tc.resp.Body) {
				t.Errorf("got %d %q", resp.StatusCode, body)
			}
			if resp.Header.Get("Content-Type") != "application/json; charset=UTF-8" || len(resp.Header.Values("Vary")) != 3 ||
				resp.Header.Get("Server") != "scaffolding on HTTPServer2" || resp.Header.Get("Retry-After") != "" {
				t.Errorf("header %v", resp.Header)
			}

			raw := []byte(body)
			if tc.name == "ArrayWrapped" {
				if !strings.HasPrefix(body, "[{\n  \"error\": {") || !strings.HasSuffix(body, "}\n]") {
					t.Errorf("array form %q", body)
				}
				var arr []json.RawMessage
				if err := json.Unmarshal(raw, &arr); err != nil || len(arr) != 1 {
					t.Fatalf("not an array of one: %v", err)
				}
				raw = arr[0]
			} else if !strings.HasSuffix(body, "}\n") || !strings.HasPrefix(body, "{\n  \"error\": {\n    \"code\": ") {
				t.Errorf("not Google's indentation: %q", body)
			}
			var e struct {
				Error struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
					Status  string `json:"status"`
					Details []struct {
						Type       string `json:"@type"`
						RetryDelay string `json:"retryDelay"`
						Violations []struct {
							QuotaID string `json:"quotaId"`
						} `json:"violations"`
					} `json:"details"`
				} `json:"error"`
			}
			if err := json.Unmarshal(raw, &e); err != nil {
				t.Fatal(err)
			}
			if e.Error.Code != tc.status || e.Error.Status != tc.code || e.Error.Message == "" {
				t.Errorf("error = %+v", e.Error)
			}
			var quotaID, delay string
			for _, d := range e.Error.Details {
				switch d.Type {
				case "type.googleapis.com/google.rpc.QuotaFailure":
					quotaID = d.Violations[0].QuotaID
				case "type.googleapis.com/google.rpc.RetryInfo":
					delay = d.RetryDelay
				}
			}
			if quotaID != tc.quotaID || delay != tc.delay {
				t.Errorf("quotaId %q, retryDelay %q", quotaID, delay)
			}
		})
	}
}

func TestScript(t *testing.T) {
	f, srv := MustServer(t, geminifake.Options{Script: func(req *geminifake.Request) *geminifake.Response {
		if req.Model == "gemini-2.5-pro" {
			r := geminifake.QuotaPerDay()
			return &r
		}
		return nil
	}})
	f.Enqueue(geminifake.Overloaded())
	if resp, _ := post(t, srv, chatPath, "", minimal); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("queued: %d", resp.StatusCode)
	}
	if resp, _ := post(t, srv, chatPath, "", minimal); resp.StatusCode != http.StatusOK {
		t.Errorf("default: %d", resp.StatusCode)
	}
	if resp, body := post(t, srv, "/v1beta/models/gemini-2.5-pro:generateContent", "", minimal); resp.StatusCode != 429 || body != geminifake.BodyQuotaPerDay {
		t.Errorf("scripted: %d", resp.StatusCode)
	}
}
