package app

import (
	"bytes"
	"container/list"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// ResponseCache holds chat completion answers of the routes that opted into caching, keyed by
// the route alias and the normalized request (Key). It evicts the least recently used entries
// beyond its entry and byte bounds and forgets entries past their TTL on the injected clock.
// It lives in one gateway process's memory; it is safe for concurrent use.
//
// A cached answer is served without an upstream call, so the gateway charges nothing for it.
type ResponseCache struct {
	maxEntries int
	maxBytes   int64
	now        func() time.Time

	mu      sync.Mutex
	lru     *list.List // of *cacheEntry, most recently used first
	entries map[string]*list.Element
	bytes   int64
	hits    int64
	misses  int64
}

// CachedAnswer is one cached chat completion.
type CachedAnswer struct {
	// Body is the OpenAI "chat.completion" JSON object as the upstream answered it (or as the
	// gateway assembled it from a stream). Its usage reports what the answer cost when it was
	// generated, not what serving it again costs (nothing).
	Body []byte
	// Model is the catalog model that generated the answer (the route's candidate that served
	// it), for logs and headers; the cache key holds the route alias, not this model.
	Model string
	// HasToolCalls is whether the answer calls tools. Put sets it from Body as well, so a
	// caller cannot forget it.
	HasToolCalls bool
	// FromStream is whether Body was assembled from a streamed answer. Put refuses such an
	// answer when it calls tools: a tool call reassembled from deltas is the one thing a
	// cache hit must never get wrong, so streamed answers with tool calls are never cached.
	FromStream bool
}

// CacheStats is a snapshot of a ResponseCache, for /status-like reporting.
type CacheStats struct {
	Entries      int
	Bytes        int64
	Hits, Misses int64
}

type cacheEntry struct {
	key     string
	answer  CachedAnswer
	size    int64
	expires time.Time
}

// NewResponseCache returns an empty cache holding at most maxEntries answers and maxBytes
// bytes (keys, bodies and model names counted). A non-positive bound is not enforced; when
// neither bound is positive the cache stores nothing, so a missing configuration can never grow
// memory without end. now is the clock TTLs are measured on (nil: time.Now).
func NewResponseCache(maxEntries int, maxBytes int64, now func() time.Time) *ResponseCache {
	if now == nil {
		now = time.Now
	}
	return &ResponseCache{
		maxEntries: maxEntries,
		maxBytes:   maxBytes,
		now:        now,
		lru:        list.New(),
		entries:    make(map[string]*list.Element),
	}
}

// cacheIgnored reports whether a request field cannot change the answer: the response shape
// (a cached answer serves both streamed and plain requests), who is asking, and what the
// provider should store. The model is replaced by the route alias. Every other field, including
// ones this list does not know, is part of the key: an unknown field that does change the answer
// must not share a cached answer, while one that does not only costs a cache miss.
func cacheIgnored(field string) bool {
	switch field {
	case "model", "stream", "stream_options", "user", "safety_identifier", "metadata", "store", "prompt_cache_key":
		return true
	}
	return false
}

// Key returns the cache key of a chat completion request to route: the sha256 hex of the
// canonical JSON of the route alias and the request body without the fields that cannot change
// the answer (stream, stream_options, user, safety_identifier, metadata, store,
// prompt_cache_key, model), with null fields dropped and n=1 dropped (the default). Canonical
// means object keys sorted, no insignificant whitespace, strings re-escaped one way, and numbers
// written in one form (1, 1.0 and 1e0 are the same number; integers stay exact).
//
// Key returns false when the request must not be cached: n greater than 1 (several choices are
// a sample, not an answer), or a body that is not valid JSON or not valid UTF-8.
//
// The key holds no tenant: two callers sending the same request to the same route share the
// answer. A caller that must keep tenants apart passes a route string that names the tenant
// too (for example orgID + "/" + alias); the route is hashed as a JSON string, so no choice of
// names can make two different pairs collide.
func (c *ResponseCache) Key(route string, body map[string]json.RawMessage) (string, bool) {
	req := make(map[string]any, len(body))
	for name, raw := range body {
		if cacheIgnored(name) {
			continue
		}
		if !utf8.Valid(raw) {
			return "", false
		}
		v, err := decodeCanonical(raw)
		if err != nil {
			return "", false
		}
		if v == nil {
			continue // null is the default of every optional field
		}
		if name == "n" {
			n, ok := v.(json.Number)
			if !ok {
				return "", false
			}
			i, err := n.Int64()
			if err != nil || i > 1 {
				return "", false
			}
			if i == 1 {
				continue
			}
		}
		req[name] = v
	}
	var b bytes.Buffer
	if err := writeCanonical(&b, map[string]any{"route": route, "request": req}); err != nil {
		return "", false
	}
	sum := sha256.Sum256(b.Bytes())
	return hex.EncodeToString(sum[:]), true
}

// decodeCanonical decodes one JSON value keeping numbers as written (json.Number), and fails on
// trailing data.
func decodeCanonical(raw []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, errors.New("trailing data after the JSON value")
	}
	return v, nil
}

// writeCanonical writes v (as decoded by decodeCanonical) with sorted object keys, no
// whitespace and canonical numbers.
func writeCanonical(b *bytes.Buffer, v any) error {
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if v {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case string:
		s, err := json.Marshal(v)
		if err != nil {
			return err
		}
		b.Write(s)
	case json.Number:
		n, err := canonicalNumber(string(v))
		if err != nil {
			return err
		}
		b.WriteString(n)
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeCanonical(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeCanonical(b, k); err != nil {
				return err
			}
			b.WriteByte(':')
			if err := writeCanonical(b, v[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		return fmt.Errorf("canonical JSON: unexpected %T", v)
	}
	return nil
}

// canonicalNumber writes a JSON number in one form. An integer literal is already canonical
// (JSON allows no leading zeros or plus sign), but for -0. Any other number is what every
// upstream parses it into, a float64: written as an integer when it is one (1.0 and 1e0 are 1),
// else in its shortest form. A number beyond float64 stays as written.
func canonicalNumber(s string) (string, error) {
	if !strings.ContainsAny(s, ".eE") {
		if s == "-0" {
			return "0", nil
		}
		return s, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return s, nil
	case err != nil:
		return "", fmt.Errorf("canonical JSON: bad number %q: %w", s, err)
	case f == math.Trunc(f) && math.Abs(f) < 1<<63:
		return strconv.FormatInt(int64(f), 10), nil
	}
	return strconv.FormatFloat(f, 'g', -1, 64), nil
}

// Get returns the live answer stored under key, marking it recently used. The Body returned is
// the caller's own copy.
func (c *ResponseCache) Get(key string) (CachedAnswer, bool) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		c.misses++
		return CachedAnswer{}, false
	}
	e := el.Value.(*cacheEntry)
	if !now.Before(e.expires) {
		c.remove(el)
		c.misses++
		return CachedAnswer{}, false
	}
	c.lru.MoveToFront(el)
	c.hits++
	a := e.answer
	a.Body = bytes.Clone(a.Body)
	return a, true
}

// Put stores a copy of answer a under key for ttl, replacing what key held, and evicts the least
// recently used entries until the cache is within its bounds again. It reports whether the
// answer was stored: it refuses a non-positive ttl, a Body that is not a chat completion object
// with choices, an answer larger than the byte bound by itself, and an answer assembled from a
// stream (FromStream) that calls tools.
func (c *ResponseCache) Put(key string, a CachedAnswer, ttl time.Duration) bool {
	if ttl <= 0 || (c.maxEntries <= 0 && c.maxBytes <= 0) {
		return false
	}
	var comp completion
	if err := json.Unmarshal(a.Body, &comp); err != nil || len(comp.Choices) == 0 {
		return false
	}
	a.HasToolCalls = a.HasToolCalls || comp.hasToolCalls()
	if a.FromStream && a.HasToolCalls {
		return false
	}
	a.Body = bytes.Clone(a.Body)
	size := int64(len(key) + len(a.Body) + len(a.Model))
	if c.maxBytes > 0 && size > c.maxBytes {
		return false
	}
	e := &cacheEntry{key: key, answer: a, size: size, expires: c.now().Add(ttl)}

	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[key]; ok {
		c.remove(el)
	}
	c.entries[key] = c.lru.PushFront(e)
	c.bytes += size
	for (c.maxEntries > 0 && c.lru.Len() > c.maxEntries) || (c.maxBytes > 0 && c.bytes > c.maxBytes) {
		c.remove(c.lru.Back())
	}
	return true
}

// Stats returns the cache's current size and its hit and miss counts since it was made.
func (c *ResponseCache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return CacheStats{Entries: c.lru.Len(), Bytes: c.bytes, Hits: c.hits, Misses: c.misses}
}

// remove drops an entry; the caller holds mu.
func (c *ResponseCache) remove(el *list.Element) {
	e := c.lru.Remove(el).(*cacheEntry)
	delete(c.entries, e.key)
	c.bytes -= e.size
}

// completion is the part of a chat.completion object the cache reads; raw fields are copied
// into synthesized stream chunks byte for byte.
type completion struct {
	ID                json.RawMessage `json:"id"`
	Created           json.RawMessage `json:"created"`
	Model             json.RawMessage `json:"model"`
	ServiceTier       json.RawMessage `json:"service_tier"`
	SystemFingerprint json.RawMessage `json:"system_fingerprint"`
	Choices           []struct {
		Index        json.RawMessage            `json:"index"`
		Message      map[string]json.RawMessage `json:"message"`
		Logprobs     json.RawMessage            `json:"logprobs"`
		FinishReason json.RawMessage            `json:"finish_reason"`
	} `json:"choices"`
	Usage json.RawMessage `json:"usage"`
}

func (comp *completion) hasToolCalls() bool {
	for _, ch := range comp.Choices {
		if raw, ok := ch.Message["tool_calls"]; ok && !emptyJSON(raw) {
			return true
		}
		if raw, ok := ch.Message["function_call"]; ok && !emptyJSON(raw) {
			return true
		}
		switch strings.TrimSpace(string(ch.FinishReason)) {
		case `"tool_calls"`, `"function_call"`:
			return true
		}
	}
	return false
}

// emptyJSON reports whether raw is absent, null, [] or {}.
func emptyJSON(raw json.RawMessage) bool {
	switch strings.Join(strings.Fields(string(raw)), "") {
	case "", "null", "[]", "{}":
		return true
	}
	return false
}

// CompletionHasToolCalls reports whether a chat.completion body calls tools: a non-empty
// tool_calls (or legacy function_call) in any choice's message, or a tool_calls or
// function_call finish reason. A body that is not a chat completion reports false.
func CompletionHasToolCalls(body []byte) bool {
	var comp completion
	if err := json.Unmarshal(body, &comp); err != nil {
		return false
	}
	return comp.hasToolCalls()
}

// StreamFromCompletion turns a (cached) chat.completion body into the data payloads of the
// equivalent chat.completion.chunk stream, without the "data: " prefix and without the final
// [DONE], which the caller writes. For each choice, in order:
//
//   - a role chunk ({"role":"assistant","content":""}, or content null when the message has
//     none);
//   - one chunk with every other field of the message that is not null, [] or {} (content,
//     refusal, reasoning_content, annotations, audio, legacy function_call...) as written, and
//     the choice's logprobs; left out when there is no such field;
//   - one chunk per tool call, carrying its index, id, type and name and its full arguments,
//     so a streaming client accumulates exactly the tool calls of the answer;
//   - a finish chunk with an empty delta and the finish_reason.
//
// Last, when the completion has usage, comes the usage-only chunk ("choices":[]) that
// include_usage adds. It reports the ORIGINAL usage, what the answer cost when it was
// generated: the gateway charges a cached answer nothing and must not settle from this chunk;
// it drops the chunk when the caller did not ask for include_usage.
//
// It returns an error when body is not a chat completion object with choices.
func StreamFromCompletion(body []byte) ([][]byte, error) {
	var comp completion
	if err := json.Unmarshal(body, &comp); err != nil {
		return nil, fmt.Errorf("parse cached completion: %w", err)
	}
	if len(comp.Choices) == 0 {
		return nil, errors.New("parse cached completion: no choices")
	}
	var head bytes.Buffer
	head.WriteString(`{"id":`)
	head.Write(rawOr(comp.ID, `""`))
	head.WriteString(`,"object":"chat.completion.chunk","created":`)
	head.Write(rawOr(comp.Created, `0`))
	head.WriteString(`,"model":`)
	head.Write(rawOr(comp.Model, `""`))
	if !emptyJSON(comp.ServiceTier) {
		head.WriteString(`,"service_tier":`)
		head.Write(comp.ServiceTier)
	}
	if !emptyJSON(comp.SystemFingerprint) {
		head.WriteString(`,"system_fingerprint":`)
		head.Write(comp.SystemFingerprint)
	}
	head.WriteString(`,"choices":`)
	// Raw fields are copied as the upstream wrote them, maybe indented: compact every chunk,
	// since an SSE data line cannot hold a newline.
	var ferr error
	chunk := func(choices string) []byte {
		var b bytes.Buffer
		b.Grow(head.Len() + len(choices) + 1)
		if err := json.Compact(&b, append(append(bytes.Clone(head.Bytes()), choices...), '}')); err != nil && ferr == nil {
			ferr = fmt.Errorf("build stream chunk: %w", err)
		}
		return b.Bytes()
	}
	choice := func(index json.RawMessage, delta, logprobs, finish []byte) string {
		return `[{"index":` + string(index) + `,"delta":` + string(delta) + `,"logprobs":` + string(logprobs) +
			`,"finish_reason":` + string(finish) + `}]`
	}

	var out [][]byte
	for i, ch := range comp.Choices {
		index := rawOr(ch.Index, fmt.Sprint(i))
		role := `{"role":"assistant","content":""}`
		if content := bytes.TrimSpace(ch.Message["content"]); len(content) == 0 || isNull(content) {
			role = `{"role":"assistant","content":null}`
		}
		out = append(out, chunk(choice(index, []byte(role), []byte("null"), []byte("null"))))

		rest := make(map[string]json.RawMessage, len(ch.Message))
		for k, v := range ch.Message {
			if k == "role" || k == "tool_calls" || emptyJSON(v) {
				continue
			}
			rest[k] = v
		}
		logprobs := rawOr(ch.Logprobs, "null")
		if len(rest) > 0 {
			out = append(out, chunk(choice(index, rawObject(rest), logprobs, []byte("null"))))
			logprobs = []byte("null")
		}

		if raw := ch.Message["tool_calls"]; !emptyJSON(raw) {
			var calls []map[string]json.RawMessage
			if err := json.Unmarshal(raw, &calls); err != nil {
				return nil, fmt.Errorf("parse cached completion: choice %d tool_calls: %w", i, err)
			}
			for j, call := range calls {
				call["index"] = json.RawMessage(fmt.Sprint(j))
				delta := rawObject(map[string]json.RawMessage{"tool_calls": json.RawMessage("[" + string(rawObject(call)) + "]")})
				out = append(out, chunk(choice(index, delta, logprobs, []byte("null"))))
				logprobs = []byte("null")
			}
		}

		out = append(out, chunk(choice(index, []byte("{}"), logprobs, rawOr(ch.FinishReason, "null"))))
	}

	if !emptyJSON(comp.Usage) {
		// The original usage, reported for the caller's information only: serving a cached
		// answer costs nothing, so nothing settles from this chunk.
		out = append(out, chunk(`[],"usage":`+string(comp.Usage)))
	}
	if ferr != nil {
		return nil, ferr
	}
	return out, nil
}

// rawOr returns raw, or def when raw is absent or null.
func rawOr(raw json.RawMessage, def string) []byte {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || isNull(raw) {
		return []byte(def)
	}
	return raw
}
