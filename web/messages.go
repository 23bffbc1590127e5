package web

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"yosan/app"
	"yosan/providers/anthropic"
)

// messages answers POST /v1/messages, the Anthropic Messages API, so that Anthropic clients
// (the official SDKs, Claude Code) can use the gateway: the request is translated into a chat
// completion and served by the very same pipeline as /v1/chat/completions (route aliases,
// reservation, settlement), and the answer, its stream and its errors are translated back as
// they are written. The key comes as x-api-key (or Authorization: Bearer); the response headers
// are those of /v1/chat/completions.
func (s *Server) messages(c echo.Context) error {
	res := c.Response()
	w := &messagesWriter{ResponseWriter: res.Writer, log: s.cfg.Log}
	res.Writer = w
	defer func() {
		w.finish()
		res.Writer = w.ResponseWriter
	}()
	if err := s.serveMessages(c); err != nil {
		// Rendered here, while the writer translates it, rather than by Echo after the return.
		s.handleError(err, c)
	}
	return nil
}

// serveMessages authenticates, translates the body and hands the request to chatCompletions.
func (s *Server) serveMessages(c echo.Context) error {
	r := c.Request()
	if key := strings.TrimSpace(r.Header.Get("x-api-key")); key != "" {
		r.Header.Set("Authorization", "Bearer "+key)
	} else if _, ok := bearer(r); !ok {
		c.Response().Header().Set(headerRequestID, app.NewRequestID())
		return app.Errorf(app.EUNAUTHORIZED, "missing API key: send it as 'x-api-key: <key>' (or 'Authorization: Bearer <key>')")
	}
	body, err := s.readBody(r)
	if err == nil {
		var translated []byte
		if translated, err = anthropic.OpenAIRequestFromMessages(body); err == nil {
			r.Body = io.NopCloser(bytes.NewReader(translated))
			r.ContentLength = int64(len(translated))
			return s.chatCompletions(c)
		}
	}
	// A bad body is reported after the key is checked, as /v1/chat/completions does.
	if _, aerr := s.authenticate(c); aerr != nil {
		return aerr
	}
	return err
}

// messagesWriter translates what the chat completion pipeline writes into the Messages shape:
// an event stream chunk by chunk as it is written; a JSON answer or an error (status >= 400) once
// complete, when finish writes it.
type messagesWriter struct {
	http.ResponseWriter
	log    *slog.Logger
	status int
	stream *anthropic.StreamConverter // nil unless the answer is an event stream
	buf    bytes.Buffer               // the JSON answer
	out    []byte                     // reused for the converted events
}

// WriteHeader passes an event stream's status on at once; a JSON answer's waits for finish.
func (w *messagesWriter) WriteHeader(code int) {
	if w.status != 0 {
		return
	}
	w.status = code
	if code < 400 && strings.HasPrefix(w.Header().Get(echo.HeaderContentType), "text/event-stream") {
		w.stream = &anthropic.StreamConverter{}
		w.ResponseWriter.WriteHeader(code)
	}
}

func (w *messagesWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.stream == nil {
		return w.buf.Write(p)
	}
	w.out = w.stream.Convert(w.out[:0], p)
	if len(w.out) > 0 {
		if _, err := w.ResponseWriter.Write(w.out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// FlushError flushes an event stream to the client (a JSON answer is written by finish).
func (w *messagesWriter) FlushError() error {
	if w.stream == nil {
		return nil
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap gives http.ResponseController the connection's writer.
func (w *messagesWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// finish writes what is still owed: the end of a stream cut short, or the translated JSON
// answer or error.
func (w *messagesWriter) finish() {
	if w.stream != nil {
		if out := w.stream.Finish(w.out[:0]); len(out) > 0 {
			_, _ = w.ResponseWriter.Write(out)
			_ = http.NewResponseController(w.ResponseWriter).Flush()
		}
		return
	}
	if w.status == 0 {
		return // nothing was written (a panic on the way): the error handler answers
	}
	h := w.Header()
	status := w.status
	var body []byte
	if status >= 400 {
		e := anthropic.ErrorFromOpenAI(status, w.buf.Bytes())
		if e.Final {
			h.Set("x-should-retry", "false")
		}
		body = e.AppendJSON(nil, h.Get(headerRequestID))
	} else {
		var err error
		if body, err = anthropic.MessageFromChatCompletion(w.buf.Bytes()); err != nil {
			w.log.Error("translate the answer into a message", "request_id", h.Get(headerRequestID), "err", err)
			status = http.StatusBadGateway
			body = anthropic.APIError{Type: "api_error", Message: "the upstream answer could not be translated into a message"}.
				AppendJSON(nil, h.Get(headerRequestID))
		}
	}
	h.Del("Content-Length")
	h.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	w.ResponseWriter.WriteHeader(status)
	_, _ = w.ResponseWriter.Write(body)
}

// countTokens answers POST /v1/messages/count_tokens (Anthropic's token counter, which Claude
// Code calls before requests) with the gateway's own estimate of the input: the same count it
// reserves with (a real tokenizer for OpenAI model families, an estimate that errs high
// otherwise). It calls no upstream and reserves nothing.
func (s *Server) countTokens(c echo.Context) error {
	n, err := s.serveCountTokens(c)
	if err != nil {
		// The error goes out in the Messages shape, through the translating writer.
		res := c.Response()
		w := &messagesWriter{ResponseWriter: res.Writer, log: s.cfg.Log}
		res.Writer = w
		s.handleError(err, c)
		w.finish()
		res.Writer = w.ResponseWriter
		return nil
	}
	return c.JSONBlob(http.StatusOK, []byte(`{"input_tokens":`+strconv.FormatInt(n, 10)+`}`))
}

func (s *Server) serveCountTokens(c echo.Context) (int64, error) {
	r := c.Request()
	if key := strings.TrimSpace(r.Header.Get("x-api-key")); key != "" {
		r.Header.Set("Authorization", "Bearer "+key)
	}
	p, err := s.authenticate(c)
	if err != nil {
		return 0, err
	}
	body, err := s.readBody(r)
	if err != nil {
		return 0, err
	}
	// count_tokens takes a Messages body without max_tokens: give it one to translate.
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return 0, app.Errorf(app.EINVALID, "invalid JSON body: %s", jsonProblem(err))
	}
	if _, ok := fields["max_tokens"]; !ok {
		fields["max_tokens"] = json.RawMessage("1")
	}
	delete(fields, "stream")
	body, _ = json.Marshal(fields)
	translated, err := anthropic.OpenAIRequestFromMessages(body)
	if err != nil {
		return 0, err
	}
	req, err := app.ParseChatRequest(translated)
	if err != nil {
		return 0, err
	}
	model := req.Model
	if route, ok := s.cfg.Gateway.Catalog.Route(req.Model); ok {
		model = route.Candidates[0].Model
	}
	m, ok := s.cfg.Gateway.Catalog.Lookup(model)
	if !ok {
		return 0, &app.Error{Code: app.ENOTFOUND, Param: "model", Message: "the model '" + req.Model + "' does not exist"}
	}
	if err := app.Usable(m, p, app.KindChat); err != nil {
		return 0, err
	}
	return s.cfg.Gateway.Counter.CountText(m.UpstreamName, req.Text) + req.ExtraInputTokens, nil
}
