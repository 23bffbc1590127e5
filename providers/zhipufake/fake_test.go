package zhipufake_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"yosan/providers/zhipufake"
)

func MustServer(tb testing.TB, f *zhipufake.Fake) *httptest.Server {
	tb.Helper()
	srv := httptest.NewServer(f)
	tb.Cleanup(func() { f.Close(); srv.Close() })
	return srv
}

func MustPost(tb testing.TB, url, key, body string) (*http.Response, string) {
	tb.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		tb.Fatal(err)
	}
	return resp, string(b)
}

const chatPath = "/api/paas/v4/chat/completions"

func TestCompletion(t *testing.T) {
	tests := []struct {
		name string
		opts zhipufake.Options
		want string
	}{
		{"OK", zhipufake.Options{PromptTokens: 18, CompletionTokens: 3},
			`{"choices":[{"finish_reason":"stop","index":0,"message":{"content":"This is a","role":"assistant"}}],"created":1758884740,"id":"20250926190540c29952ed24ae4570","model":"glm-4.5","request_id":"20250926190540c29952ed24ae4570","usage":{"completion_tokens":3,"prompt_tokens":18,"prompt_tokens_details":{"cached_tokens":0},"total_tokens":21}}`},
		{"Reasoning", zhipufake.Options{PromptTokens: 18, CompletionTokens: 2, ReasoningTokens: 3, CachedTokens: 4},
			`{"choices":[{"finish_reason":"stop","index":0,"message":{"content":"This is","reasoning_content":"The user wants","role":"assistant"}}],"created":1758884740,"id":"20250926190540c29952ed24ae4570","model":"glm-4.5","request_id":"20250926190540c29952ed24ae4570","usage":{"completion_tokens":5,"prompt_tokens":18,"prompt_tokens_details":{"cached_tokens":4},"total_tokens":23}}`},
		{"FinishReason", zhipufake.Options{CompletionTokens: 1, FinishReason: "sensitive"},
			`{"choices":[{"finish_reason":"sensitive","index":0,"message":{"content":"This","role":"assistant"}}],"created":1758884740,"id":"20250926190540c29952ed24ae4570","model":"glm-4.5","request_id":"20250926190540c29952ed24ae4570","usage":{"completion_tokens":1,"prompt_tokens":10,"prompt_tokens_details":{"cached_tokens":0},"total_tokens":11}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := zhipufake.New(tt.opts)
			srv := MustServer(t, f)
			resp, body := MustPost(t, srv.URL+chatPath, "", `{"model":"glm-4.5","messages":[]}`)
			if resp.StatusCode != 200 || body != tt.want {
				t.Errorf("%d\n%s\nwant\n%s", resp.StatusCode, body, tt.want)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json; charset=UTF-8" {
				t.Errorf("content type %q", ct)
			}
			if f.Requests() != 1 || f.ChatRequests() != 1 || f.LastRequest().Model != "glm-4.5" {
				t.Errorf("counters %d %d %+v", f.Requests(), f.ChatRequests(), f.LastRequest())
			}
		})
	}
}

func TestStream(t *testing.T) {
	head := `data: {"id":"20250926190540c29952ed24ae4570","created":1758884740,"model":"glm-4.5","choices":[{"index":0,`
	tests := []struct {
		name string
		opts zhipufake.Options
		want []string
	}{
		{"OK", zhipufake.Options{PromptTokens: 18, CompletionTokens: 2}, []string{
			head + `"delta":{"role":"assistant","content":"This"}}]}`,
			head + `"delta":{"role":"assistant","content":" is"}}]}`,
			head + `"finish_reason":"stop","delta":{"role":"assistant","content":""}}],"usage":{"prompt_tokens":18,"completion_tokens":2,"total_tokens":20,"prompt_tokens_details":{"cached_tokens":0}}}`,
			`data: [DONE]`,
		}},
		{"Reasoning", zhipufake.Options{PromptTokens: 18, CompletionTokens: 1, ReasoningTokens: 2}, []string{
			head + `"delta":{"role":"assistant","reasoning_content":"The"}}]}`,
			head + `"delta":{"role":"assistant","reasoning_content":" user"}}]}`,
			head + `"delta":{"role":"assistant","content":"This","reasoning_content":""}}]}`,
			head + `"finish_reason":"stop","delta":{"role":"assistant","content":""}}],"usage":{"prompt_tokens":18,"completion_tokens":3,"total_tokens":21,"prompt_tokens_details":{"cached_tokens":0}}}`,
			`data: [DONE]`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := MustServer(t, zhipufake.New(tt.opts))
			resp, body := MustPost(t, srv.URL+chatPath, "", `{"model":"glm-4.5","stream":true}`)
			if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream;charset=UTF-8" {
				t.Errorf("content type %q", ct)
			}
			if want := strings.Join(tt.want, "\n\n") + "\n\n"; body != want {
				t.Errorf("body\n%s\nwant\n%s", body, want)
			}
		})
	}
}

func TestNow(t *testing.T) {
	now := time.Date(2026, 5, 9, 12, 42, 25, 0, time.UTC) // 20:42:25 in Beijing
	srv := MustServer(t, zhipufake.New(zhipufake.Options{Now: func() time.Time { return now }}))
	_, body := MustPost(t, srv.URL+chatPath, "", `{"model":"glm-4.5"}`)
	if !strings.Contains(body, `"created":1778330545,"id":"20260509204225c29952ed24ae4570"`) {
		t.Errorf("body %s", body)
	}
}

func TestRouting(t *testing.T) {
	tests := []struct {
		name, prefix, path, key string
		status                  int
		body                    string
	}{
		{"Coding", "/api/coding/paas/v4/", "/api/coding/paas/v4/chat/completions", "k", 200, ""},
		{"WrongPrefix", "", "/v1/chat/completions", "k", 404, "404 page not found\n"},
		{"NoKey", "", chatPath, "", 401, zhipufake.BodyInvalidKey},
		{"WrongKey", "", chatPath, "other", 401, zhipufake.BodyInvalidKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := MustServer(t, zhipufake.New(zhipufake.Options{Prefix: tt.prefix, APIKey: "k"}))
			resp, body := MustPost(t, srv.URL+tt.path, tt.key, `{"model":"glm-4.5"}`)
			if resp.StatusCode != tt.status || tt.body != "" && body != tt.body {
				t.Errorf("%d %s", resp.StatusCode, body)
			}
		})
	}
	t.Run("NotJSON", func(t *testing.T) {
		srv := MustServer(t, zhipufake.New(zhipufake.Options{}))
		resp, body := MustPost(t, srv.URL+chatPath, "", `{`)
		if resp.StatusCode != 400 || body != zhipufake.BodyBadParameters {
			t.Errorf("%d %s", resp.StatusCode, body)
		}
	})
}

func TestScripted(t *testing.T) {
	t.Run("Errors", func(t *testing.T) {
		for _, tt := range []struct {
			name   string
			resp   zhipufake.Response
			status int
			body   string
		}{
			{"1302", zhipufake.RateLimited(), 429, `{"error":{"code":"1302","message":"Rate limit reached for requests"}}`},
			{"1302CN", zhipufake.RateLimitedCN(), 429, `{"error":{"code":"1302","message":"您的账户已达到速率限制，请您控制请求频率"}}`},
			{"1305", zhipufake.Overloaded(), 429, `{"error":{"code":"1305","message":"该模型当前访问量过大，请您稍后再试"}}`},
			{"1305EN", zhipufake.OverloadedEN(), 429, `{"error":{"code":"1305","message":"The service may be temporarily overloaded, please try again later"}}`},
			{"1308CN", zhipufake.FiveHourLimit(), 429, `{"error":{"code":"1308","message":"已达到 5 小时的使用限额。您的限额将在 2026-05-09 20:42:25 重置。"}}`},
			{"1308EN", zhipufake.FiveHourLimitEN(), 429, `{"error":{"code":"1308","message":"Usage limit reached for 5 hour. Your limit will reset at 2026-08-27 21:31:39"}}`},
			{"1308Placeholder", zhipufake.FiveHourLimitPlaceholder(), 429, `{"error":{"code":"1308","message":"You have reached the 5-hour usage limit. Your quota will reset at next_flush_time."}}`},
			{"1310", zhipufake.WeeklyLimit(), 429, `{"error":{"code":"1310","message":"Weekly/Monthly Limit Exhausted. Your limit will reset at 2026-08-27 12:05:49"}}`},
			{"1310CN", zhipufake.WeeklyLimitCN(), 429, zhipufake.Body1310CN},
			{"1310Placeholder", zhipufake.WeeklyLimitPlaceholder(), 429, `{"error":{"code":"1310","message":"Weekly/Monthly Limit Exhausted. Your limit will reset at ${next_flush_time}"}}`},
			{"1113", zhipufake.InsufficientBalance(), 429, `{"error":{"code":"1113","message":"余额不足或无可用资源包,请充值。"}}`},
			{"1113EN", zhipufake.InsufficientBalanceEN(), 429, `{"error":{"code":"1113","message":"Insufficient balance or no resource package. Please recharge."}}`},
			{"1309", zhipufake.PlanExpired(), 429, `{"error":{"code":"1309","message":"您的 GLM Coding Plan 套餐已到期..."}}`},
			{"ServerError", zhipufake.ServerError(), 500, `{"error":{"code":"500","message":"Internal Error"}}`},
		} {
			t.Run(tt.name, func(t *testing.T) {
				f := zhipufake.New(zhipufake.Options{})
				srv := MustServer(t, f)
				f.Enqueue(tt.resp)
				resp, body := MustPost(t, srv.URL+chatPath, "", `{"model":"glm-4.5"}`)
				if resp.StatusCode != tt.status || body != tt.body {
					t.Errorf("%d %s", resp.StatusCode, body)
				}
				if ct := resp.Header.Get("Content-Type"); ct != "application/json; charset=UTF-8" {
					t.Errorf("content type %q", ct)
				}
				for k := range resp.Header {
					if strings.HasPrefix(strings.ToLower(k), "x-ratelimit") || k == "Retry-After" {
						t.Errorf("unexpected header %s", k)
					}
				}
				// The queue is used up: the next request succeeds.
				if resp, _ := MustPost(t, srv.URL+chatPath, "", `{"model":"glm-4.5"}`); resp.StatusCode != 200 {
					t.Errorf("second request %d", resp.StatusCode)
				}
			})
		}
	})
	t.Run("BrokenStream", func(t *testing.T) {
		f := zhipufake.New(zhipufake.Options{CompletionTokens: 5})
		srv := MustServer(t, f)
		f.Enqueue(zhipufake.BrokenStream(2))
		resp, err := http.Post(srv.URL+chatPath, "application/json", strings.NewReader(`{"model":"glm-4.5","stream":true}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("read error %v", err)
		}
		if n := strings.Count(string(b), "data: "); n != 2 || strings.Contains(string(b), "[DONE]") {
			t.Errorf("body %s", b)
		}
	})
	t.Run("Script", func(t *testing.T) {
		f := zhipufake.New(zhipufake.Options{Script: func(r *zhipufake.Request) *zhipufake.Response {
			if r.Model == "glm-4.6" {
				resp := zhipufake.FiveHourLimit()
				return &resp
			}
			return nil
		}})
		srv := MustServer(t, f)
		if resp, _ := MustPost(t, srv.URL+chatPath, "", `{"model":"glm-4.6"}`); resp.StatusCode != 429 {
			t.Errorf("glm-4.6: %d", resp.StatusCode)
		}
		if resp, _ := MustPost(t, srv.URL+chatPath, "", `{"model":"glm-4.5"}`); resp.StatusCode != 200 {
			t.Errorf("glm-4.5: %d", resp.StatusCode)
		}
	})
	t.Run("Hang", func(t *testing.T) {
		f := zhipufake.New(zhipufake.Options{})
		srv := MustServer(t, f)
		f.Enqueue(zhipufake.Response{Kind: zhipufake.Hang})
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+chatPath, strings.NewReader(`{"model":"glm-4.5"}`))
		if _, err := http.DefaultClient.Do(req); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err %v", err)
		}
	})
}
