// Package classify reads a failed upstream call and names the kind of failure (an
// app.ErrorClass) with the provider's code, its message and, when the provider said so, when
// the limit resets: from that the gateway decides to retry, fall back, cool a provider account
// down, or hand the answer back to the caller (DESIGN.md section 7).
//
// The rules go by the shapes each provider family really sends (the wire-format reference):
// a known code or shape decides first, then the HTTP status. Shapes are recognised whatever
// the Kind, because one family often speaks through another's endpoint (Gemini's and Zhipu's
// OpenAI- or Anthropic-compatible URLs). An unknown shape falls to a safe default: throttling
// for a 429, the caller's fault for another 4xx, a backend fault for the rest. Only a known code
// or shape (or HTTP 401, 402, 403) gives manual_action, the long block that needs a human.
package classify

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"yosan/app"
)

// Kind names an upstream wire family. It is a hint only (shapes are recognised whatever the
// Kind); an unknown Kind reads like OpenAI.
type Kind string

// The wire families. Any OpenAI-compatible upstream (vLLM, LM Studio, Groq, ...) is OpenAI.
const (
	OpenAI    Kind = "openai"
	Anthropic Kind = "anthropic"
	Gemini    Kind = "gemini"
	Zhipu     Kind = "zhipu"
	Ollama    Kind = "ollama"
)

// Limits on what a Classification carries.
const (
	// MaxMessage is the longest Message, in bytes (cut on a rune boundary).
	MaxMessage = 300
	// MaxCode is the longest Code, in bytes.
	MaxCode = 64
	// Horizon bounds ResetAt and RetryAfter: a reset further away than this is not believed
	// (it would block an account for longer than any provider window) and is dropped.
	Horizon = 366 * 24 * time.Hour
	// bodyPeek is how much of a body that is not an error object becomes the Message.
	bodyPeek = 4096
)

// Classify reads a failed upstream call of wire family k: an HTTP error answer (e.Status >=
// 400, with its Header and Body), an error object inside a 2xx answer (Status 0 or 2xx with a
// Body), a 2xx answer that does not parse (schema_invalid), or a transport failure (Status 0,
// no Body: timeout, connection refused or reset, EOF, all backend_error). now is the clock
// relative times are counted from.
//
// In the result, RetryAfter is the wait before a retry may succeed (a Retry-After or
// retry-after-ms header, Gemini's RetryInfo, "try again in 20s" in the message) and ResetAt is
// when a window resets (a reset time in the message, the x-ratelimit-reset-* or
// anthropic-ratelimit-*-reset headers when the provider asked for no wait, midnight Pacific for
// a Gemini daily quota, the 1st of next month for an Anthropic spend limit). ResetAt is UTC,
// after now and within Horizon, or zero. Code and Message are the provider's, on one line, at
// most MaxCode and MaxMessage bytes.
//
// Classify never fails: a nil e is a backend_error, an unknown shape gets the default of its
// status.
func Classify(k Kind, e *app.UpstreamError, now time.Time) app.Classification {
	switch {
	case e == nil:
		return app.Classification{Class: app.ClassBackendError, Message: "upstream call failed"}
	case e.Status >= 400:
		return classifyBody(k, e.Status, e.Header, e.Body, now)
	case len(bytes.TrimSpace(e.Body)) > 0:
		// A 2xx answer that carries an error object, or one that is not what the API promises.
		r := parseReport(e.Body)
		if !r.found {
			return app.Classification{Class: app.ClassSchemaInvalid, Message: "the upstream answer is not a valid API answer"}
		}
		return classifyReport(k, r.impliedStatus(), e.Header, r, "", now)
	case e.Status != 0:
		return app.Classification{Class: app.ClassBackendError, Message: "unexpected HTTP status " + strconv.Itoa(e.Status)}
	}
	return app.Classification{Class: app.ClassBackendError, Message: transportMessage(e)}
}

// ClassifyStreamError classifies an error event that arrived inside a stream before its first
// byte reached the client (Anthropic's `event: error` with an overloaded_error, an OpenAI
// `data: {"error":...}`): body is the event's JSON (SSE framing, if left on, is removed). The
// rules are those of Classify with the HTTP status the error's type or code implies; an event
// that says nothing known is a backend_error (the stream broke: retry once, then fall back).
func ClassifyStreamError(k Kind, body []byte, now time.Time) app.Classification {
	r := parseReport(body)
	if !r.found {
		return app.Classification{Class: app.ClassBackendError, Message: app.OneLine(peek(body), MaxMessage)}
	}
	return classifyReport(k, r.impliedStatus(), nil, r, "", now)
}

func classifyBody(k Kind, status int, h http.Header, body []byte, now time.Time) app.Classification {
	r := parseReport(body)
	raw := ""
	if !r.found {
		raw = peek(body)
	}
	return classifyReport(k, status, h, r, raw, now)
}

// call is one failure being classified: the HTTP status (or the one the error object
// implies, 0 when unknown), the headers and what the body said.
type call struct {
	kind    Kind
	status  int
	header  http.Header
	now     time.Time
	r       report
	message string // the provider's message, or the raw body when it is not an error object
	lower   string // message, lower-cased, for the rules' searches
}

func classifyReport(k Kind, status int, h http.Header, r report, raw string, now time.Time) app.Classification {
	c := &call{kind: k, status: status, header: h, now: now, r: r, message: r.message}
	if !r.found {
		c.message = raw
	}
	c.lower = strings.ToLower(c.message)
	for _, rule := range []func(*call) (app.Classification, bool){ollamaRule, zhipuRule, openaiRule, anthropicRule, geminiRule} {
		if cls, ok := rule(c); ok {
			return c.finish(cls)
		}
	}
	return c.finish(c.byStatus())
}

// byStatus is the default of each HTTP status once no known code or shape decided.
func (c *call) byStatus() app.Classification {
	switch s := c.status; {
	case s == http.StatusUnauthorized || s == http.StatusPaymentRequired || s == http.StatusForbidden:
		return c.result(app.ClassManualAction)
	case s == http.StatusRequestTimeout || s == http.StatusConflict:
		// Both official SDKs retry these: the server gave up or hit a lock, not a bad request.
		return c.backend()
	case s == http.StatusRequestEntityTooLarge:
		return c.result(app.ClassRequestTooLarge)
	case s == http.StatusTooManyRequests:
		return c.rateLimited("")
	case s >= 500:
		return c.backend()
	case s >= 400:
		if tooLargeMessage(c.lower) {
			return c.result(app.ClassRequestTooLarge)
		}
		return c.result(app.ClassClientError)
	}
	// A stream error event or an error object in a 2xx answer that names no known status.
	return c.backend()
}

func (c *call) result(class app.ErrorClass) app.Classification {
	return app.Classification{Class: class, Code: c.r.code(), Message: c.message}
}

// backend is a backend_error with the wait a Retry-After header asked for (a 503 may send one).
func (c *call) backend() app.Classification {
	cls := c.result(app.ClassBackendError)
	cls.RetryAfter = headerWait(c.header, c.now)
	return cls
}

// rateLimited is a rate_limited with the wait the provider asked for, or else, when it named
// none, the reset time of the exhausted limit in the headers (limit: "requests", "tokens",
// "input-tokens", "output-tokens" or "" when unknown).
func (c *call) rateLimited(limit string) app.Classification {
	cls := c.result(app.ClassRateLimited)
	if cls.RetryAfter = c.wait(); cls.RetryAfter == 0 {
		cls.ResetAt = headerReset(c.header, c.now, limit)
	}
	return cls
}

// quota is a quota_exhausted that resets at reset (zero: unknown), with a Retry-After header's
// wait if one came. Hints in the body are not used: Gemini's RetryInfo on a daily quota is a
// per-minute figure and misleading.
func (c *call) quota(reset time.Time) app.Classification {
	cls := c.result(app.ClassQuotaExhausted)
	cls.ResetAt = reset
	cls.RetryAfter = headerWait(c.header, c.now)
	return cls
}

// wait is the wait the provider asked for: the headers first, then the body (Gemini's
// RetryInfo, then a "try again in 20s" in the message).
func (c *call) wait() time.Duration {
	if d := headerWait(c.header, c.now); d > 0 {
		return d
	}
	if c.r.retryDelay > 0 {
		return c.r.retryDelay
	}
	return messageWait(c.lower)
}

// finish bounds what the rules produced: times in UTC, after now and within Horizon, text on
// one line.
func (c *call) finish(cls app.Classification) app.Classification {
	if !cls.ResetAt.IsZero() {
		if !cls.ResetAt.After(c.now) || cls.ResetAt.After(c.now.Add(Horizon)) {
			cls.ResetAt = time.Time{}
		} else {
			cls.ResetAt = cls.ResetAt.UTC()
		}
	}
	if cls.RetryAfter < 0 || cls.RetryAfter > Horizon {
		cls.RetryAfter = 0
	}
	cls.Code = app.OneLine(cls.Code, MaxCode)
	cls.Message = app.OneLine(cls.Message, MaxMessage)
	return cls
}

// report is what an error body says, whatever the family's envelope.
type report struct {
	// found is true when the body is an error object (or an "error" string).
	found bool
	// codeStr is error.code when a string ("1302", "rate_limit_exceeded"); codeNum when a
	// number (Gemini puts the HTTP status there).
	codeStr string
	codeNum int64
	typ     string // error.type
	status  string // error.status: Gemini's canonical code ("RESOURCE_EXHAUSTED")
	message string
	// detailCode is error.details.error_code (Anthropic: "enforced_spend_limit_reached").
	detailCode string
	// quotaIDs are Gemini's QuotaFailure quotaIds (and ErrorInfo quota_limit), reasons its
	// ErrorInfo reasons, retryDelay its RetryInfo.
	quotaIDs   []string
	reasons    []string
	retryDelay time.Duration
}

// code is the provider's code for the cooldown row: the most specific one present.
func (r *report) code() string {
	switch {
	case r.detailCode != "":
		return r.detailCode
	case r.codeStr != "":
		return r.codeStr
	case r.status != "":
		return r.status
	}
	return r.typ
}

// impliedStatus is the HTTP status an error object stands for when none came with it (stream
// error events, errors inside 2xx answers): Gemini's numeric code, its canonical status, the
// error type or code; 0 when nothing known says.
func (r *report) impliedStatus() int {
	if r.codeNum >= 400 && r.codeNum <= 599 {
		return int(r.codeNum)
	}
	switch r.status {
	case "INVALID_ARGUMENT", "FAILED_PRECONDITION", "OUT_OF_RANGE":
		return http.StatusBadRequest
	case "UNAUTHENTICATED":
		return http.StatusUnauthorized
	case "PERMISSION_DENIED":
		return http.StatusForbidden
	case "NOT_FOUND":
		return http.StatusNotFound
	case "RESOURCE_EXHAUSTED":
		return http.StatusTooManyRequests
	case "INTERNAL", "UNKNOWN", "DATA_LOSS":
		return http.StatusInternalServerError
	case "UNAVAILABLE":
		return http.StatusServiceUnavailable
	case "DEADLINE_EXCEEDED":
		return http.StatusGatewayTimeout
	}
	switch r.typ {
	case "invalid_request_error":
		return http.StatusBadRequest
	case "authentication_error":
		return http.StatusUnauthorized
	case "billing_error":
		return http.StatusPaymentRequired
	case "permission_error":
		return http.StatusForbidden
	case "not_found_error":
		return http.StatusNotFound
	case "request_too_large":
		return http.StatusRequestEntityTooLarge
	case "rate_limit_error", "requests", "tokens", "insufficient_quota":
		return http.StatusTooManyRequests
	case "api_error", "server_error":
		return http.StatusInternalServerError
	case "timeout_error":
		return http.StatusGatewayTimeout
	case "overloaded_error":
		return 529
	}
	switch r.codeStr {
	case "rate_limit_exceeded", "insufficient_quota":
		return http.StatusTooManyRequests
	case "context_length_exceeded":
		return http.StatusBadRequest
	case "invalid_api_key":
		return http.StatusUnauthorized
	}
	if n, err := strconv.Atoi(r.codeStr); err == nil && n >= 400 && n <= 599 {
		return n // Azure OpenAI: "code": "429"
	}
	return 0
}

// parseReport reads an error body in any of the families' envelopes:
// {"error":{...}} (OpenAI, Gemini, Zhipu, Ollama's OpenAI API), {"type":"error","error":{...}}
// (Anthropic), {"error":"..."} (Ollama's native API), [{"error":{...}}] (Gemini's compatible
// endpoint, Vertex), a top-level {"message":...,"type":...} (older vLLM), an error whose
// message is itself such a body as a JSON string, and an SSE event ("data: {...}").
func parseReport(body []byte) report {
	return parseDepth(sseData(bytes.TrimSpace(body)), 0)
}

// errorJSON is an error object; fields are raw so one of an unexpected type (a number where a
// string was expected) loses only that field, not the rest.
type errorJSON struct {
	Code    json.RawMessage `json:"code"`
	Type    json.RawMessage `json:"type"`
	Status  json.RawMessage `json:"status"`
	Message json.RawMessage `json:"message"`
	Details json.RawMessage `json:"details"`
}

func parseDepth(b []byte, depth int) report {
	var r report
	if len(b) == 0 {
		return r
	}
	if b[0] == '[' {
		var arr []json.RawMessage
		if json.Unmarshal(b, &arr) != nil {
			return r
		}
		for _, el := range arr {
			if el = bytes.TrimSpace(el); len(el) > 0 && el[0] == '{' {
				if r = parseDepth(el, depth); r.found {
					return r
				}
			}
		}
		return report{}
	}
	if b[0] != '{' {
		return r
	}
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(b, &env) != nil {
		return r
	}
	var ej errorJSON
	switch e := bytes.TrimSpace(env.Error); {
	case len(e) > 0 && e[0] == '"':
		r.found = true
		r.message, _ = jsonString(e)
	case len(e) > 0 && e[0] == '{':
		if json.Unmarshal(e, &ej) != nil {
			return r
		}
		r.found = true
	default:
		// No "error": a bare error object, when it carries a message.
		if json.Unmarshal(b, &ej) != nil {
			return r
		}
		if _, ok := jsonString(ej.Message); !ok {
			return r
		}
		r.found = true
	}
	if r.message == "" {
		r.message, _ = jsonString(ej.Message)
	}
	r.codeStr, _ = jsonString(ej.Code)
	r.codeNum, _ = jsonInt(ej.Code)
	r.typ, _ = jsonString(ej.Type)
	r.status, _ = jsonString(ej.Status)
	r.readDetails(ej.Details)
	if m := strings.TrimSpace(r.message); depth < 2 && len(m) > 0 && (m[0] == '{' || m[0] == '[') {
		// Gemini's compatible endpoint has been seen putting the native error, as JSON text,
		// in the message: the inner error says more.
		if inner := parseDepth([]byte(m), depth+1); inner.found {
			return inner
		}
	}
	return r
}

// readDetails reads Gemini's details (an array of typed objects) or Anthropic's (an object).
func (r *report) readDetails(raw json.RawMessage) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return
	}
	if raw[0] == '{' {
		var d struct {
			ErrorCode json.RawMessage `json:"error_code"`
		}
		if json.Unmarshal(raw, &d) == nil {
			r.detailCode, _ = jsonString(d.ErrorCode)
		}
		return
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return
	}
	for _, el := range list {
		var d struct {
			Type       string `json:"@type"`
			Violations []struct {
				QuotaID string `json:"quotaId"`
			} `json:"violations"`
			RetryDelay string            `json:"retryDelay"`
			Reason     string            `json:"reason"`
			Metadata   map[string]string `json:"metadata"`
		}
		if json.Unmarshal(el, &d) != nil {
			continue // one odd element does not spoil the others
		}
		switch {
		case strings.HasSuffix(d.Type, "google.rpc.QuotaFailure"):
			for _, v := range d.Violations {
				r.quotaIDs = append(r.quotaIDs, v.QuotaID)
			}
		case strings.HasSuffix(d.Type, "google.rpc.RetryInfo"):
			if w, err := time.ParseDuration(d.RetryDelay); err == nil && w > 0 {
				r.retryDelay = w
			}
		case strings.HasSuffix(d.Type, "google.rpc.ErrorInfo"):
			r.reasons = append(r.reasons, d.Reason)
			if q := d.Metadata["quota_limit"]; q != "" {
				r.quotaIDs = append(r.quotaIDs, q)
			}
		}
	}
}

// sseData returns the data of an SSE event ("event: error\ndata: {...}"), or b when b is not
// SSE-framed.
func sseData(b []byte) []byte {
	if !bytes.HasPrefix(b, []byte("event:")) && !bytes.HasPrefix(b, []byte("data:")) {
		return b
	}
	var out []byte
	for line := range bytes.Lines(b) {
		if d, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data:")); ok {
			if len(out) > 0 {
				out = append(out, '\n')
			}
			out = append(out, bytes.TrimPrefix(d, []byte(" "))...)
		}
	}
	return bytes.TrimSpace(out)
}

func jsonString(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

func jsonInt(raw json.RawMessage) (int64, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return 0, false
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	return n, err == nil
}

// tooLargeMessage reports whether a 4xx message (lower-cased) says the prompt exceeds the
// model's context (OpenAI and compatible servers, Anthropic, Gemini, Ollama).
func tooLargeMessage(l string) bool {
	return strings.Contains(l, "maximum context length") || // OpenAI, vLLM
		strings.Contains(l, "context_length_exceeded") ||
		strings.Contains(l, "prompt is too long") || // Anthropic
		strings.Contains(l, "exceeds the maximum number of tokens") || // Gemini
		(strings.Contains(l, "context length") && strings.Contains(l, "exceed")) // Ollama
}

// headerWait is the wait a retry-after-ms or Retry-After (seconds or HTTP date) header asks
// for; 0 when none, malformed, in the past or beyond Horizon.
func headerWait(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if f, err := strconv.ParseFloat(v, 64); err == nil && f > 0 && f <= float64(Horizon/time.Millisecond) {
			return time.Duration(f * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		if f > 0 && f <= Horizon.Seconds() {
			return time.Duration(f * float64(time.Second))
		}
		return 0
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 && d <= Horizon {
			return d
		}
	}
	return 0
}

// headerReset is when the exhausted limit resets according to the rate-limit headers:
// OpenAI's x-ratelimit-reset-{requests,tokens} (Go durations such as "6m0s", "20ms") and
// Anthropic's anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-reset (RFC
// 3339). The limit named by the error wins; else the latest of those whose remaining is 0; else
// the latest of all. Zero when no header says.
func headerReset(h http.Header, now time.Time, limit string) time.Time {
	type candidate struct {
		limit     string
		at        time.Time
		exhausted bool
	}
	var cands []candidate
	for _, l := range [...]string{"requests", "tokens"} {
		if d, ok := resetDuration(h.Get("X-Ratelimit-Reset-" + l)); ok {
			cands = append(cands, candidate{l, now.Add(d), strings.TrimSpace(h.Get("X-Ratelimit-Remaining-"+l)) == "0"})
		}
	}
	for _, l := range [...]string{"requests", "tokens", "input-tokens", "output-tokens"} {
		if t, err := time.Parse(time.RFC3339, strings.TrimSpace(h.Get("Anthropic-Ratelimit-"+l+"-Reset"))); err == nil {
			cands = append(cands, candidate{l, t, strings.TrimSpace(h.Get("Anthropic-Ratelimit-"+l+"-Remaining")) == "0"})
		}
	}
	latest := func(keep func(candidate) bool) time.Time {
		var t time.Time
		for _, c := range cands {
			if keep(c) && c.at.After(t) {
				t = c.at
			}
		}
		return t
	}
	if limit != "" {
		if t := latest(func(c candidate) bool { return c.limit == limit }); !t.IsZero() {
			return t
		}
	}
	if t := latest(func(c candidate) bool { return c.exhausted }); !t.IsZero() {
		return t
	}
	return latest(func(candidate) bool { return true })
}

// resetDuration parses an x-ratelimit-reset-* value: a Go duration, or plain seconds.
func resetDuration(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 && d <= Horizon {
		return d, true
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil && f >= 0 && f <= Horizon.Seconds() {
		return time.Duration(f * float64(time.Second)), true
	}
	return 0, false
}

// messageWait is a wait written in a message (lower-cased): "Please try again in 20s." /
// "in 644ms." / "in 7m12s." (OpenAI), "Please retry in 26.211922938s." (Gemini), "Please
// retry after 86400 seconds." (Azure OpenAI). 0 when there is none.
func messageWait(l string) time.Duration {
	for _, lead := range [...]string{"try again in ", "retry in "} {
		if i := strings.Index(l, lead); i >= 0 {
			rest := l[i+len(lead):]
			end := strings.IndexFunc(rest, func(r rune) bool {
				return !(r >= '0' && r <= '9' || r == '.' || r >= 'a' && r <= 'z' || r == 'µ')
			})
			if end >= 0 {
				rest = rest[:end]
			}
			if d, err := time.ParseDuration(strings.TrimRight(rest, ".")); err == nil && d > 0 {
				return d
			}
		}
	}
	if i := strings.Index(l, "retry after "); i >= 0 {
		rest := l[i+len("retry after "):]
		n := 0
		for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
			n++
		}
		if n > 0 && n <= 9 && strings.HasPrefix(rest[n:], " second") {
			s, _ := strconv.Atoi(rest[:n])
			return time.Duration(s) * time.Second
		}
	}
	return 0
}

// transportMessage names a transport failure without its internal detail (addresses, paths):
// the message goes to the cooldown rows shown at /status.
func transportMessage(e *app.UpstreamError) string {
	var ne net.Error
	var dns *net.DNSError
	var cert *tls.CertificateVerificationError
	switch err := e.Err; {
	case e.Timeout || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return "upstream timed out"
	case errors.Is(err, context.Canceled):
		return "request canceled"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return "connection closed before the answer ended"
	case errors.As(err, &dns):
		return "upstream host name did not resolve"
	case errors.As(err, &cert):
		return "upstream TLS certificate not trusted"
	}
	return "upstream unreachable"
}

// peek is the start of a body as text, for a Message.
func peek(b []byte) string {
	return string(b[:min(len(b), bodyPeek)])
}

// ollamaRule: a 404 for a model Ollama has not pulled ("model 'x' not found", older versions
// add "try pulling it first") is not the caller's fault: the backend lacks the model until an
// operator runs `ollama pull`, so a route falls back and the operator is told (manual_action).
func ollamaRule(c *call) (app.Classification, bool) {
	if c.kind == Ollama && c.status == http.StatusNotFound && strings.Contains(c.lower, "model") && strings.Contains(c.lower, "not found") {
		return c.result(app.ClassManualAction), true
	}
	return app.Classification{}, false
}
