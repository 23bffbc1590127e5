package web

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
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
