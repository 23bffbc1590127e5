package web

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"yosan/app"
)

// Response headers of the /v1 API.
const (
	headerRequestID       = "x-request-id"
	headerModel           = "x-yosan-model"
	headerProvider        = "x-yosan-provider"
	headerUpstreamModel   = "x-yosan-upstream-model"
	headerBudgetRemaining = "x-yosan-budget-remaining"
	headerBudgetCurrency  = "x-yosan-budget-currency"
	// headerClamped says a plan that allows it lowered max_tokens to fit the budget:
	// "4096 -> 812".
	headerClamped = "x-yosan-max-tokens-clamped"
)

// authenticate gives the request its id and returns the caller's key.
func (s *Server) authenticate(c echo.Context) (*app.Principal, error) {
	c.Response().Header().Set(headerRequestID, app.NewRequestID())
	secret, _ := bearer(c.Request())
	return s.cfg.Gateway.Authenticate(c.Request().Context(), secret)
}

// parseRequest authenticates the key and reads and parses the body.
func (s *Server) parseRequest(c echo.Context, parse func([]byte) (*app.ProxyRequest, error)) (*app.Principal, *app.ProxyRequest, error) {
	p, err := s.authenticate(c)
	if err != nil {
		return nil, nil, err
	}
	body, err := s.readBody(c.Request())
	if err != nil {
		return nil, nil, err
	}
	req, err := parse(body)
	if err != nil {
		return nil, nil, err
	}
	return p, req, nil
}

// setCallHeaders sets the headers every admitted answer carries: the model that answers and
// the budget left.
func setCallHeaders(c echo.Context, p *app.Principal, call *app.Call) {
	h := c.Response().Header()
	h.Set(headerModel, call.Model.Name)
	h.Set(headerProvider, call.Model.Provider)
	h.Set(headerUpstreamModel, call.Model.UpstreamName)
	h.Set(headerBudgetCurrency, p.Org.Currency)
	if call.ClampedFrom > 0 {
		h.Set(headerClamped, strconv.FormatInt(call.ClampedFrom, 10)+" -> "+strconv.FormatInt(call.PerChoiceMax, 10))
	} else {
		h.Del(headerClamped) // an earlier attempt's
	}
	if call.HasRemaining {
		h.Set(headerBudgetRemaining, app.FormatMoney(call.Remaining))
	} else {
		h.Set(headerBudgetRemaining, "unlimited")
	}
}

func (s *Server) readBody(r *http.Request) ([]byte, error) {
	limit := s.cfg.MaxBodyBytes
	tooLarge := app.Errorf(app.ETOOLARGE, "the request body exceeds the gateway's limit of %d bytes", limit)
	if r.ContentLength > limit {
		return nil, tooLarge
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, app.WrapError(app.EINVALID, err, "could not read the request body")
	}
	if int64(len(body)) > limit {
		return nil, tooLarge
	}
	return body, nil
}

func (s *Server) chatCompletions(c echo.Context) error { return s.proxy(c, app.ParseChatRequest) }

func (s *Server) embeddings(c echo.Context) error { return s.proxy(c, app.ParseEmbeddingRequest) }

// proxy answers an OpenAI-shaped request: a route alias through its chain, a model asked for
// by name through its implicit one-candidate route (the same retries, cooldowns and windows).
func (s *Server) proxy(c echo.Context, parse func([]byte) (*app.ProxyRequest, error)) error {
	p, req, err := s.parseRequest(c, parse)
	if err != nil {
		return err
	}
	route, ok := s.cfg.Gateway.Catalog.Route(req.Model)
	if !ok {
		return &app.Error{Code: app.ENOTFOUND, Param: "model", Message: "the model '" + req.Model +
			"' does not exist; GET /v1/models lists the models your key may use"}
	}
	if p.Key.SensitiveOnly && !route.Sensitive {
		return &app.Error{Code: app.EFORBIDDEN, Param: "model", Message: "this key may only call routes marked privacy: sensitive (local backends), and '" +
			req.Model + "' is not one"}
	}
	if route.Implicit {
		// Asked for by name: the model's own refusal (wrong endpoint, tier), not a route's.
		m, _ := s.cfg.Gateway.Catalog.Lookup(req.Model)
		if err := app.Usable(m, p, req.Kind); err != nil {
			return err
		}
	}
	return s.serveRoute(c, p, req, route)
}

// respond settles a complete upstream answer and relays it.
func (s *Server) respond(c echo.Context, call *app.Call, resp *app.ProviderResponse) error {
	if resp.HasUsage {
		call.Commit(resp.Usage, "upstream")
	} else {
		call.CommitReserved("reserved")
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, resp.Body)
}

// upstreamError is the client's error for a failed upstream call of provider: a timeout is
// 504, the upstream's own client error (a JSON body) is passed back, anything else is 502.
func upstreamError(provider string, err error) error {
	var ue *app.UpstreamError
	if !errors.As(err, &ue) {
		if errors.Is(err, context.DeadlineExceeded) {
			return app.WrapError(app.ETIMEOUT, err, "the upstream provider did not answer in time")
		}
		return app.WrapError(app.EUPSTREAM, err, "the upstream provider failed")
	}
	switch {
	case ue.Timeout:
		return app.WrapError(app.ETIMEOUT, err, "the upstream provider '"+provider+"' did not answer in time")
	case ue.Status == 0:
		return app.WrapError(app.EUPSTREAM, err, "the upstream provider '"+provider+"' could not be reached or sent an invalid answer")
	case ue.ClientFault() && len(ue.Body) > 0 && bytes.HasPrefix(bytes.TrimSpace(ue.Body), []byte("{")):
		return &app.Error{Code: app.EUPSTREAMCLIENT, Message: "rejected by the upstream", Status: ue.Status, Body: ue.Body, Err: err}
	default:
		return app.WrapError(app.EUPSTREAM, err, "the upstream provider '"+provider+"' answered HTTP "+
			strconv.Itoa(ue.Status)+" "+http.StatusText(ue.Status))
	}
}

var (
	sseData     = []byte("data: ")
	sseEnd      = []byte("\n\n")
	sseDone     = []byte("data: [DONE]\n\n")
	usageNull   = []byte(`,"usage":null`)
	errorPrefix = []byte(`data: {"error":{"message":"`)
)

// openStream opens the upstream stream and reads its first event, so that a stream failing
// before its first byte is an ordinary failure (which a route may fall back from). first is
// nil when the stream ended at once.
func openStream(ctx context.Context, call *app.Call) (app.Stream, *app.StreamChunk, error) {
	st, err := call.Upstream().ChatCompletionStream(ctx, call.UpstreamRequest())
	if err != nil {
		return nil, nil, err
	}
	ch, err := st.Next()
	if err == io.EOF {
		return st, nil, nil
	}
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return st, &ch, nil
}

// relay sends the stream to the client, first event first.
func (s *Server) relay(ctx context.Context, c echo.Context, call *app.Call, st app.Stream, first *app.StreamChunk) error {
	w := c.Response()
	h := w.Header()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 4096)

	includeUsage := call.Request.IncludeUsage
	var relayed strings.Builder
	var usage *app.Usage
	clientGone := false
	var streamErr error
	done := first == nil
	for !done {
		var ch app.StreamChunk
		var err error
		if first != nil {
			ch, first = *first, nil
		} else {
			ch, err = st.Next()
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			streamErr = err
			break
		}
		if ch.Usage != nil {
			u := *ch.Usage
			usage = &u
		}
		relayed.WriteString(ch.Text)
		if clientGone {
			continue // drain for the usage chunk; the upstream bills what it generates
		}
		data := ch.Data
		if !includeUsage {
			if ch.UsageOnly {
				continue
			}
			data = bytes.Replace(data, usageNull, nil, 1)
		}
		bw.Write(sseData)
		bw.Write(data)
		bw.Write(sseEnd)
		if err := bw.Flush(); err != nil {
			clientGone = true
			continue
		}
		w.Flush()
	}
	switch {
	case usage != nil:
		call.Commit(*usage, "upstream")
	default:
		// No final usage: the input estimate and the tokens relayed, raised to whatever the
		// provider reported before the stream broke (cache writes, thinking tokens).
		u := app.Usage{PromptTokens: call.EstInput, CompletionTokens: call.CountOutput(relayed.String())}
		if pu, ok := st.(app.PartialUsage); ok {
			if known, ok := pu.UsageSoFar(); ok {
				u = u.AtLeast(known)
			}
		}
		call.Commit(u, "relayed")
	}
	if clientGone {
		return nil
	}
	if streamErr != nil {
		if ctx.Err() != nil && c.Request().Context().Err() != nil {
			return nil // the client went away
		}
		msg := "the upstream stream broke before it finished"
		if errors.Is(streamErr, context.DeadlineExceeded) {
			msg = "the upstream stream did not finish in time"
		}
		s.cfg.Log.Warn("upstream stream broke", "request_id", call.ID, "err", streamErr)
		bw.Write(errorPrefix)
		bw.WriteString(msg)
		bw.WriteString(`","type":"upstream_error","param":null,"code":"upstream_stream_broken"}}`)
		bw.Write(sseEnd)
		bw.Flush()
		w.Flush()
		return nil
	}
	bw.Write(sseDone)
	bw.Flush()
	w.Flush()
	return nil
}

type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	// ContextWindow and MaxOutputTokens are what the config says; null when unknown (never a
	// made-up number). Absent for route aliases.
	ContextWindow   *int64 `json:"context_window,omitempty"`
	MaxOutputTokens *int64 `json:"max_output_tokens,omitempty"`
	Route           bool   `json:"-"`
}

// MarshalJSON writes null limits for a model whose limits are unknown, and none for a route.
func (m modelObject) MarshalJSON() ([]byte, error) {
	type plain modelObject
	if m.Route {
		return json.Marshal(plain(m))
	}
	return json.Marshal(struct {
		plain
		ContextWindow   *int64 `json:"context_window"`
		MaxOutputTokens *int64 `json:"max_output_tokens"`
	}{plain(m), m.ContextWindow, m.MaxOutputTokens})
}

func toModelObject(m *app.CatalogModel) modelObject {
	o := modelObject{ID: m.Name, Object: "model", OwnedBy: m.Provider}
	if m.ContextWindow > 0 {
		cw := m.ContextWindow
		o.ContextWindow = &cw
	}
	if m.MaxOutputTokens > 0 {
		mo := m.MaxOutputTokens
		o.MaxOutputTokens = &mo
	}
	return o
}

func (s *Server) listModels(c echo.Context) error {
	p, err := s.authenticate(c)
	if err != nil {
		return err
	}
	data := []modelObject{}
	allowed := map[string]bool{}
	for _, m := range s.cfg.Gateway.AllowedModels(p) {
		data = append(data, toModelObject(m))
		allowed[m.Name] = true
	}
	// A route alias is listed when the key may use at least one of its candidates.
	for _, r := range s.cfg.Gateway.Catalog.Routes() {
		for _, cand := range r.Candidates {
			if allowed[cand.Model] {
				data = append(data, modelObject{ID: r.Name, Object: "model", OwnedBy: "yosan-route", Route: true})
				break
			}
		}
	}
	return c.JSON(http.StatusOK, map[string]any{"object": "list", "data": data})
}

func (s *Server) getModel(c echo.Context) error {
	p, err := s.authenticate(c)
	if err != nil {
		return err
	}
	name := c.Param("model")
	for _, m := range s.cfg.Gateway.AllowedModels(p) {
		if m.Name == name {
			return c.JSON(http.StatusOK, toModelObject(m))
		}
	}
	return &app.Error{Code: app.ENOTFOUND, Param: "model", Message: "the model '" + name + "' does not exist or your key's plan does not include it"}
}
