package app_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"yosan/app"
)

// mustBody decodes a request body the way ParseChatRequest does.
func mustBody(tb testing.TB, s string) map[string]json.RawMessage {
	tb.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		tb.Fatalf("decode %s: %v", s, err)
	}
	return m
}

func mustKey(tb testing.TB, c *app.ResponseCache, route, body string) string {
	tb.Helper()
	k, ok := c.Key(route, mustBody(tb, body))
	if !ok {
		tb.Fatalf("Key(%q, %s) is not cacheable", route, body)
	}
	if len(k) != 64 || strings.Trim(k, "0123456789abcdef") != "" {
		tb.Fatalf("key %q is not sha256 hex", k)
	}
	return k
}

const msgs = `"messages":[{"role":"user","content":"Hi"}]`

func TestResponseCacheKey(t *testing.T) {
	c := app.NewResponseCache(10, 1<<20, nil)
	tests := []struct {
		name          string
		routeA, bodyA string
		routeB, bodyB string
		same          bool
	}{
		{"KeyOrder", "auto", `{"model":"auto",` + msgs + `,"temperature":0.2,"seed":7}`,
			"auto", `{"seed":7,"temperature":0.2,` + msgs + `,"model":"auto"}`, true},
		{"Whitespace", "auto", `{"model":"auto",` + msgs + `}`,
			"auto", "{ \"model\" : \"auto\" ,\n\t\"messages\" : [ { \"role\" : \"user\" , \"content\" : \"Hi\" } ] }", true},
		{"NestedKeyOrder", "auto", `{` + msgs + `,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"string"}}}}}]}`,
			"auto", `{` + msgs + `,"tools":[{"function":{"parameters":{"properties":{"a":{"type":"string"}},"type":"object"},"name":"f"},"type":"function"}]}`, true},
		{"StreamIrrelevant", "auto", `{"model":"auto",` + msgs + `}`,
			"auto", `{"model":"auto",` + msgs + `,"stream":true,"stream_options":{"include_usage":true}}`, true},
		{"WhoIsAskingIrrelevant", "auto", `{` + msgs + `}`,
			"auto", `{` + msgs + `,"user":"u1","safety_identifier":"s","metadata":{"a":"b"},"store":true,"prompt_cache_key":"p"}`, true},
		{"BodyModelIrrelevant", "auto", `{"model":"auto",` + msgs + `}`,
			"auto", `{"model":"gpt-4o",` + msgs + `}`, true},
		{"NOneIsTheDefault", "auto", `{` + msgs + `}`, "auto", `{` + msgs + `,"n":1}`, true},
		{"NullIsTheDefault", "auto", `{` + msgs + `}`, "auto", `{` + msgs + `,"temperature":null,"tools":null}`, true},
		{"IntegerSpelling", "auto", `{` + msgs + `,"temperature":1,"max_tokens":100}`,
			"auto", `{` + msgs + `,"temperature":1.0,"max_tokens":1e2}`, true},
		{"FloatSpelling", "auto", `{` + msgs + `,"temperature":0.7}`, "auto", `{` + msgs + `,"temperature":7e-1}`, true},
		{"NegativeZero", "auto", `{` + msgs + `,"presence_penalty":0}`, "auto", `{` + msgs + `,"presence_penalty":-0}`, true},
		{"StringEscapes", "auto", `{"messages":[{"role":"user","content":"A<b>"}]}`,
			"auto", `{"messages":[{"role":"user","content":"\u0041\u003cb\u003e"}]}`, true},

		{"DifferentMessages", "auto", `{` + msgs + `}`, "auto", `{"messages":[{"role":"user","content":"Hi!"}]}`, false},
		{"DifferentRoute", "auto", `{` + msgs + `}`, "fast", `{` + msgs + `}`, false},
		{"TenantInRoute", "org_1/auto", `{` + msgs + `}`, "org_2/auto", `{` + msgs + `}`, false},
		{"DifferentTemperature", "auto", `{` + msgs + `,"temperature":0.7}`, "auto", `{` + msgs + `,"temperature":0.8}`, false},
		{"TemperatureVersusAbsent", "auto", `{` + msgs + `}`, "auto", `{` + msgs + `,"temperature":1}`, false},
		{"DifferentSeed", "auto", `{` + msgs + `,"seed":9007199254740993}`, "auto", `{` + msgs + `,"seed":9007199254740992}`, false},
		{"DifferentMaxTokens", "auto", `{` + msgs + `,"max_tokens":10}`, "auto", `{` + msgs + `,"max_completion_tokens":10}`, false},
		{"DifferentToolChoice", "auto", `{` + msgs + `,"tool_choice":"auto"}`, "auto", `{` + msgs + `,"tool_choice":"required"}`, false},
		{"DifferentResponseFormat", "auto", `{` + msgs + `}`, "auto", `{` + msgs + `,"response_format":{"type":"json_object"}}`, false},
		{"DifferentStop", "auto", `{` + msgs + `,"stop":["a"]}`, "auto", `{` + msgs + `,"stop":"a"}`, false},
		{"DifferentLogitBias", "auto", `{` + msgs + `,"logit_bias":{"50256":-100}}`, "auto", `{` + msgs + `,"logit_bias":{"50256":100}}`, false},
		{"DifferentReasoningEffort", "auto", `{` + msgs + `,"reasoning_effort":"low"}`, "auto", `{` + msgs + `,"reasoning_effort":"high"}`, false},
		{"UnknownFieldKept", "auto", `{` + msgs + `}`, "auto", `{` + msgs + `,"logprobs":true}`, false},
		{"NumberVersusString", "auto", `{` + msgs + `,"seed":1}`, "auto", `{` + msgs + `,"seed":"1"}`, false},
		{"ArrayOrder", "auto", `{` + msgs + `,"stop":["a","b"]}`, "auto", `{` + msgs + `,"stop":["b","a"]}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := mustKey(t, c, tt.routeA, tt.bodyA)
			b := mustKey(t, c, tt.routeB, tt.bodyB)
			if (a == b) != tt.same {
				t.Fatalf("same key = %v, want %v\n%s %s\n%s %s", a == b, tt.same, tt.routeA, tt.bodyA, tt.routeB, tt.bodyB)
			}
		})
	}
}

func TestResponseCacheKeyNotCacheable(t *testing.T) {
	c := app.NewResponseCache(10, 1<<20, nil)
	tests := []struct {
		name string
		body map[string]json.RawMessage
	}{
		{"NTwo", mustBody(t, `{`+msgs+`,"n":2}`)},
		{"NMany", mustBody(t, `{`+msgs+`,"n":128}`)},
		{"NNotAnInteger", mustBody(t, `{`+msgs+`,"n":"2"}`)},
		{"NFraction", mustBody(t, `{`+msgs+`,"n":1.5}`)},
		{"InvalidJSON", map[string]json.RawMessage{"messages": json.RawMessage(`[{"role":`)}},
		{"TrailingData", map[string]json.RawMessage{"messages": json.RawMessage(`[] []`)}},
		{"InvalidUTF8", map[string]json.RawMessage{"messages": json.RawMessage("[{\"role\":\"user\",\"content\":\"\xff\"}]")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if k, ok := c.Key("auto", tt.body); ok {
				t.Fatalf("cacheable with key %s", k)
			}
		})
	}
	t.Run("IgnoredFieldMayBeAnything", func(t *testing.T) {
		// A field that is dropped is not parsed either: a bad "user" does not matter here.
		if _, ok := c.Key("auto", map[string]json.RawMessage{"messages": json.RawMessage(`[]`), "user": json.RawMessage(`{`)}); !ok {
			t.Fatal("not cacheable")
		}
	})
}

type cacheClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *cacheClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *cacheClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newClock() *cacheClock {
	return &cacheClock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
}

// completionBody is a chat.completion answering text, in OpenAI's shape.
func completionBody(text string) []byte {
	content, _ := json.Marshal(text)
	return []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1721631035,"model":"gpt-4o-2024-08-06",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":` + string(content) + `,"refusal":null,"annotations":[]},` +
		`"logprobs":null,"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":14,"completion_tokens":3,"total_tokens":17},"service_tier":"default","system_fingerprint":"fp_1"}`)
}

const toolCallBody = `{
  "id": "chatcmpl-2",
  "object": "chat.completion",
  "created": 1721631036,
  "model": "gpt-4o-2024-08-06",
  "choices": [
    {
      "index": 0,
      "message": {
        "role": "assistant",
        "content": null,
        "tool_calls": [
          {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Tokyo\",\n \"unit\": \"c\"}"}},
          {"id": "call_b", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}
        ],
        "refusal": null,
        "annotations": []
      },
      "logprobs": null,
      "finish_reason": "tool_calls"
    }
  ],
  "usage": {"prompt_tokens": 80, "completion_tokens": 40, "total_tokens": 120},
  "system_fingerprint": "fp_2"
}`

func mustPut(tb testing.TB, c *app.ResponseCache, key string, a app.CachedAnswer, ttl time.Duration) {
	tb.Helper()
	if !c.Put(key, a, ttl) {
		tb.Fatalf("Put(%s) refused", key)
	}
}

func TestResponseCacheTTL(t *testing.T) {
	clk := newClock()
	c := app.NewResponseCache(10, 1<<20, clk.Now)
	k := mustKey(t, c, "auto", `{`+msgs+`}`)
	mustPut(t, c, k, app.CachedAnswer{Body: completionBody("Hello"), Model: "gpt-4o"}, 10*time.Second)

	clk.Advance(10*time.Second - time.Nanosecond)
	a, ok := c.Get(k)
	if !ok || !bytes.Equal(a.Body, completionBody("Hello")) || a.Model != "gpt-4o" || a.HasToolCalls {
		t.Fatalf("before the TTL: %+v, %v", a, ok)
	}
	clk.Advance(time.Nanosecond)
	if a, ok := c.Get(k); ok {
		t.Fatalf("at the TTL: still cached %+v", a)
	}
	if s := c.Stats(); s != (app.CacheStats{Entries: 0, Bytes: 0, Hits: 1, Misses: 1}) {
		t.Fatalf("stats %+v: the expired entry was not dropped", s)
	}

	t.Run("PutRenewsTheTTL", func(t *testing.T) {
		mustPut(t, c, k, app.CachedAnswer{Body: completionBody("One")}, time.Minute)
		clk.Advance(50 * time.Second)
		mustPut(t, c, k, app.CachedAnswer{Body: completionBody("Two")}, time.Minute)
		clk.Advance(50 * time.Second)
		a, ok := c.Get(k)
		if !ok || !bytes.Equal(a.Body, completionBody("Two")) {
			t.Fatalf("got %s, %v; want the second answer", a.Body, ok)
		}
		if s := c.Stats(); s.Entries != 1 {
			t.Fatalf("%d entries after replacing one key", s.Entries)
		}
	})
}

func TestResponseCacheLRU(t *testing.T) {
	body := func(i int) []byte { return completionBody(fmt.Sprintf("answer %d", i)) }
	size := func(key string, i int) int64 { return int64(len(key) + len(body(i))) } // no model
	t.Run("ByEntries", func(t *testing.T) {
		c := app.NewResponseCache(2, 1<<20, newClock().Now)
		mustPut(t, c, "a", app.CachedAnswer{Body: body(1)}, time.Hour)
		mustPut(t, c, "b", app.CachedAnswer{Body: body(2)}, time.Hour)
		if _, ok := c.Get("a"); !ok { // a is now the most recently used
			t.Fatal("a missing")
		}
		mustPut(t, c, "c", app.CachedAnswer{Body: body(3)}, time.Hour)
		if _, ok := c.Get("b"); ok {
			t.Fatal("b, the least recently used, was not evicted")
		}
		for k, i := range map[string]int{"a": 1, "c": 3} {
			if a, ok := c.Get(k); !ok || !bytes.Equal(a.Body, body(i)) {
				t.Fatalf("%s: %s, %v", k, a.Body, ok)
			}
		}
		if s := c.Stats(); s.Entries != 2 || s.Bytes != size("a", 1)+size("c", 3) {
			t.Fatalf("stats %+v", s)
		}
	})
	t.Run("ByBytes", func(t *testing.T) {
		// Room for two answers and a half: the third evicts the oldest.
		limit := size("k1", 1) + size("k2", 2) + size("k3", 3)/2
		c := app.NewResponseCache(0, limit, newClock().Now)
		mustPut(t, c, "k1", app.CachedAnswer{Body: body(1)}, time.Hour)
		mustPut(t, c, "k2", app.CachedAnswer{Body: body(2)}, time.Hour)
		mustPut(t, c, "k3", app.CachedAnswer{Body: body(3)}, time.Hour)
		if _, ok := c.Get("k1"); ok {
			t.Fatal("k1 was not evicted")
		}
		if s := c.Stats(); s.Entries != 2 || s.Bytes != size("k2", 2)+size("k3", 3) || s.Bytes > limit {
			t.Fatalf("stats %+v, limit %d", s, limit)
		}
	})
	t.Run("ModelCounts", func(t *testing.T) {
		c := app.NewResponseCache(0, size("k", 1), newClock().Now)
		if c.Put("k", app.CachedAnswer{Body: body(1), Model: "m"}, time.Hour) {
			t.Fatal("an answer one byte over the bound was stored")
		}
		mustPut(t, c, "k", app.CachedAnswer{Body: body(1)}, time.Hour)
	})
	t.Run("LargerThanTheWholeCache", func(t *testing.T) {
		c := app.NewResponseCache(10, 100, newClock().Now)
		mustPut(t, c, "small", app.CachedAnswer{Body: []byte(`{"choices":[{}]}`)}, time.Hour)
		if c.Put("big", app.CachedAnswer{Body: body(1)}, time.Hour) {
			t.Fatal("an answer larger than the cache was stored")
		}
		if _, ok := c.Get("small"); !ok {
			t.Fatal("a refused answer evicted another")
		}
	})
	t.Run("NoBoundStoresNothing", func(t *testing.T) {
		c := app.NewResponseCache(0, 0, newClock().Now)
		if c.Put("k", app.CachedAnswer{Body: body(1)}, time.Hour) {
			t.Fatal("an unbounded cache stored an answer")
		}
	})
	t.Run("ReplaceKeepsTheCount", func(t *testing.T) {
		c := app.NewResponseCache(2, 1<<20, newClock().Now)
		for i := range 5 {
			mustPut(t, c, "same", app.CachedAnswer{Body: body(i)}, time.Hour)
		}
		if s := c.Stats(); s.Entries != 1 || s.Bytes != size("same", 4) {
			t.Fatalf("stats %+v", s)
		}
	})
}

func TestResponseCachePut(t *testing.T) {
	tests := []struct {
		name         string
		answer       app.CachedAnswer
		ttl          time.Duration
		stored       bool
		hasToolCalls bool
	}{
		{"Text", app.CachedAnswer{Body: completionBody("Hi")}, time.Hour, true, false},
		{"TextFromStream", app.CachedAnswer{Body: completionBody("Hi"), FromStream: true}, time.Hour, true, false},
		{"ToolCalls", app.CachedAnswer{Body: []byte(toolCallBody)}, time.Hour, true, true},
		{"ErrFromStreamWithToolCalls", app.CachedAnswer{Body: []byte(toolCallBody), FromStream: true, HasToolCalls: true}, time.Hour, false, false},
		// The caller forgot HasToolCalls: Put reads the body itself.
		{"ErrFromStreamWithUndeclaredToolCalls", app.CachedAnswer{Body: []byte(toolCallBody), FromStream: true}, time.Hour, false, false},
		{"ErrZeroTTL", app.CachedAnswer{Body: completionBody("Hi")}, 0, false, false},
		{"ErrNegativeTTL", app.CachedAnswer{Body: completionBody("Hi")}, -time.Second, false, false},
		{"ErrNotJSON", app.CachedAnswer{Body: []byte(`data: {"id":1}`)}, time.Hour, false, false},
		{"ErrNoChoices", app.CachedAnswer{Body: []byte(`{"id":"x","choices":[]}`)}, time.Hour, false, false},
		{"ErrError", app.CachedAnswer{Body: []byte(`{"error":{"message":"x","type":"server_error","param":null,"code":null}}`)}, time.Hour, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := app.NewResponseCache(10, 1<<20, newClock().Now)
			if got := c.Put("k", tt.answer, tt.ttl); got != tt.stored {
				t.Fatalf("Put = %v, want %v", got, tt.stored)
			}
			a, ok := c.Get("k")
			if ok != tt.stored {
				t.Fatalf("Get ok = %v, want %v", ok, tt.stored)
			}
			if ok && a.HasToolCalls != tt.hasToolCalls {
				t.Fatalf("HasToolCalls = %v, want %v", a.HasToolCalls, tt.hasToolCalls)
			}
		})
	}
}

func TestResponseCacheCopies(t *testing.T) {
	c := app.NewResponseCache(10, 1<<20, newClock().Now)
	in := completionBody("Hello")
	mustPut(t, c, "k", app.CachedAnswer{Body: in}, time.Hour)
	in[0] = 'X'
	a, _ := c.Get("k")
	if !bytes.Equal(a.Body, completionBody("Hello")) {
		t.Fatalf("the cache shares the caller's Put slice: %s", a.Body)
	}
	a.Body[0] = 'Y'
	if b, _ := c.Get("k"); !bytes.Equal(b.Body, completionBody("Hello")) {
		t.Fatalf("the cache shares the slice Get returned: %s", b.Body)
	}
}

func TestResponseCacheConcurrent(t *testing.T) {
	clk := newClock()
	const maxEntries = 16
	maxBytes := int64(12 * len(completionBody("answer 00")))
	c := app.NewResponseCache(maxEntries, maxBytes, clk.Now)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 150 {
				n := (g*7 + i) % 40
				key, ok := c.Key("auto", map[string]json.RawMessage{"messages": json.RawMessage(fmt.Sprintf(`[{"role":"user","content":"q%d"}]`, n))})
				if !ok {
					errs <- fmt.Errorf("not cacheable")
					return
				}
				want := completionBody(fmt.Sprintf("answer %02d", n))
				if a, ok := c.Get(key); ok {
					if !bytes.Equal(a.Body, want) {
						errs <- fmt.Errorf("question %d answered %s", n, a.Body)
						return
					}
					continue
				}
				c.Put(key, app.CachedAnswer{Body: want, Model: "m"}, time.Minute)
				if i%50 == 0 {
					clk.Advance(time.Second)
				}
				if s := c.Stats(); s.Entries > maxEntries || s.Bytes > maxBytes {
					errs <- fmt.Errorf("over the bounds: %+v", s)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if s := c.Stats(); s.Hits == 0 || s.Misses == 0 || s.Hits+s.Misses != 64*150 {
		t.Fatalf("stats %+v", s)
	}
}

func TestCompletionHasToolCalls(t *testing.T) {
	tests := []struct {
		name string
		body string
		want bool
	}{
		{"Text", string(completionBody("Hi")), false},
		{"ToolCalls", toolCallBody, true},
		{"EmptyToolCalls", `{"choices":[{"message":{"role":"assistant","content":"x","tool_calls":[]},"finish_reason":"stop"}]}`, false},
		{"NullToolCalls", `{"choices":[{"message":{"role":"assistant","content":"x","tool_calls":null},"finish_reason":"stop"}]}`, false},
		{"LegacyFunctionCall", `{"choices":[{"message":{"role":"assistant","content":null,"function_call":{"name":"f","arguments":"{}"}},"finish_reason":"function_call"}]}`, true},
		{"FinishReasonOnly", `{"choices":[{"message":{"role":"assistant","content":null},"finish_reason":"tool_calls"}]}`, true},
		{"SecondChoice", `{"choices":[{"message":{"content":"x"}},{"message":{"tool_calls":[{"id":"c"}]}}]}`, true},
		{"NotJSON", `nope`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := app.CompletionHasToolCalls([]byte(tt.body)); got != tt.want {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// streamChunk is a chat.completion.chunk as a client decodes it.
type streamChunk struct {
	ID                string `json:"id"`
	Object            string `json:"object"`
	Created           int64  `json:"created"`
	Model             string `json:"model"`
	ServiceTier       string `json:"service_tier"`
	SystemFingerprint string `json:"system_fingerprint"`
	Choices           *[]struct {
		Index int `json:"index"`
		Delta struct {
			Role      string          `json:"role"`
			Content   json.RawMessage `json:"content"`
			Refusal   json.RawMessage `json:"refusal"`
			ToolCalls []struct {
				Index    *int   `json:"index"`
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		Logprobs     json.RawMessage `json:"logprobs"`
		FinishReason *string         `json:"finish_reason"`
	} `json:"choices"`
	Usage json.RawMessage `json:"usage"`
}

type toolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// accumulated is what a streaming client (openai-go's ChatCompletionAccumulator, the Node SDK)
// rebuilds from the chunks of one choice.
type accumulated struct {
	role, content, finish string
	contentNull           bool
	toolCalls             []toolCall
	usage                 json.RawMessage
	chunks                []streamChunk
}

func mustAccumulate(tb testing.TB, payloads [][]byte) accumulated {
	tb.Helper()
	var acc accumulated
	for i, p := range payloads {
		if bytes.ContainsAny(p, "\r\n") {
			tb.Fatalf("payload %d holds a line break, which ends an SSE data line: %q", i, p)
		}
		if bytes.HasPrefix(p, []byte("data:")) || string(p) == "[DONE]" {
			tb.Fatalf("payload %d is framed: %s", i, p)
		}
		var ch streamChunk
		dec := json.NewDecoder(bytes.NewReader(p))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ch); err != nil {
			tb.Fatalf("payload %d: %v: %s", i, err, p)
		}
		if ch.Object != "chat.completion.chunk" || ch.Choices == nil {
			tb.Fatalf("payload %d is not a chunk: %s", i, p)
		}
		acc.chunks = append(acc.chunks, ch)
		if len(ch.Usage) > 0 {
			if len(*ch.Choices) != 0 || i != len(payloads)-1 {
				tb.Fatalf("usage outside the last, choice-less chunk: %s", p)
			}
			acc.usage = ch.Usage
		}
		for _, c := range *ch.Choices {
			if c.Index != 0 {
				tb.Fatalf("payload %d: choice index %d", i, c.Index)
			}
			if acc.finish != "" {
				tb.Fatalf("payload %d follows the finish chunk: %s", i, p)
			}
			if c.Delta.Role != "" {
				if i != 0 {
					tb.Fatalf("role in payload %d", i)
				}
				acc.role = c.Delta.Role
				acc.contentNull = string(c.Delta.Content) == "null"
			}
			var s string
			if len(c.Delta.Content) > 0 && string(c.Delta.Content) != "null" {
				if err := json.Unmarshal(c.Delta.Content, &s); err != nil {
					tb.Fatalf("payload %d content: %v", i, err)
				}
				acc.content += s
			}
			for _, tc := range c.Delta.ToolCalls {
				if tc.Index == nil {
					tb.Fatalf("payload %d: tool call without index: %s", i, p)
				}
				for len(acc.toolCalls) <= *tc.Index {
					acc.toolCalls = append(acc.toolCalls, toolCall{})
				}
				t := &acc.toolCalls[*tc.Index]
				if tc.ID != "" {
					t.ID = tc.ID
				}
				if tc.Type != "" {
					t.Type = tc.Type
				}
				t.Function.Name += tc.Function.Name
				t.Function.Arguments += tc.Function.Arguments
			}
			if c.FinishReason != nil {
				acc.finish = *c.FinishReason
			}
		}
	}
	return acc
}

func TestStreamFromCompletion(t *testing.T) {
	t.Run("Text", func(t *testing.T) {
		text := "Hello, \"world\" <b>&</b>\nline two 日本語"
		payloads, err := app.StreamFromCompletion(completionBody(text))
		if err != nil {
			t.Fatal(err)
		}
		acc := mustAccumulate(t, payloads)
		if acc.role != "assistant" || acc.contentNull || acc.content != text || acc.finish != "stop" || len(acc.toolCalls) != 0 {
			t.Fatalf("accumulated %+v", acc)
		}
		if string(acc.usage) != `{"prompt_tokens":14,"completion_tokens":3,"total_tokens":17}` {
			t.Fatalf("usage %s: want the original usage", acc.usage)
		}
		for _, ch := range acc.chunks {
			if ch.ID != "chatcmpl-1" || ch.Created != 1721631035 || ch.Model != "gpt-4o-2024-08-06" ||
				ch.SystemFingerprint != "fp_1" || ch.ServiceTier != "default" {
				t.Fatalf("chunk head %+v", ch)
			}
		}
		// role, content, finish, usage
		if len(payloads) != 4 {
			t.Fatalf("%d payloads", len(payloads))
		}
		want := `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1721631035,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}`
		if string(payloads[2]) != want {
			t.Fatalf("finish chunk\n got %s\nwant %s", payloads[2], want)
		}
	})
	t.Run("ToolCalls", func(t *testing.T) {
		payloads, err := app.StreamFromCompletion([]byte(toolCallBody))
		if err != nil {
			t.Fatal(err)
		}
		acc := mustAccumulate(t, payloads)
		var want struct {
			Choices []struct {
				Message struct {
					ToolCalls []toolCall `json:"tool_calls"`
				} `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(toolCallBody), &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(acc.toolCalls, want.Choices[0].Message.ToolCalls) {
			t.Fatalf("tool calls\n got %+v\nwant %+v", acc.toolCalls, want.Choices[0].Message.ToolCalls)
		}
		if acc.toolCalls[0].Function.Arguments != "{\"city\": \"Tokyo\",\n \"unit\": \"c\"}" {
			t.Fatalf("arguments changed: %q", acc.toolCalls[0].Function.Arguments)
		}
		if !acc.contentNull || acc.content != "" || acc.finish != "tool_calls" {
			t.Fatalf("accumulated %+v", acc)
		}
		if string(acc.usage) != `{"prompt_tokens":80,"completion_tokens":40,"total_tokens":120}` {
			t.Fatalf("usage %s", acc.usage)
		}
	})
	t.Run("NoUsage", func(t *testing.T) {
		body := []byte(`{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"length"}]}`)
		payloads, err := app.StreamFromCompletion(body)
		if err != nil {
			t.Fatal(err)
		}
		acc := mustAccumulate(t, payloads)
		if acc.usage != nil || acc.content != "Hi" || acc.finish != "length" {
			t.Fatalf("accumulated %+v", acc)
		}
	})
	t.Run("ExtraMessageFieldsAndLogprobs", func(t *testing.T) {
		body := []byte(`{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,` +
			`"message":{"role":"assistant","content":"Hi","reasoning_content":"think"},` +
			`"logprobs":{"content":[{"token":"Hi","logprob":-0.1}]},"finish_reason":"stop"}]}`)
		payloads, err := app.StreamFromCompletion(body)
		if err != nil {
			t.Fatal(err)
		}
		want := `{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hi","reasoning_content":"think"},"logprobs":{"content":[{"token":"Hi","logprob":-0.1}]},"finish_reason":null}]}`
		if len(payloads) != 3 || string(payloads[1]) != want {
			t.Fatalf("payloads %q\nwant [1] = %s", payloads, want)
		}
	})
	for _, tt := range []struct{ name, body string }{
		{"ErrNotJSON", `nope`},
		{"ErrNoChoices", `{"id":"x","choices":[]}`},
		{"ErrBadToolCalls", `{"choices":[{"message":{"tool_calls":"x"}}]}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if p, err := app.StreamFromCompletion([]byte(tt.body)); err == nil {
				t.Fatalf("no error: %q", p)
			}
		})
	}
}
