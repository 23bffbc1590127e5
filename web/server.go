// Package web is Yosan's HTTP surface (Echo): the OpenAI-compatible /v1 proxy, the /admin/v1
// JSON API, and the one place that maps app error codes to HTTP statuses.
package web

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"yosan/app"
	"yosan/billing"
	"yosan/db"
	"yosan/notify"
)

// Config is what the server needs.
type Config struct {
	Gateway *app.Gateway
	DB      *db.DB
	Ledger  *db.Ledger
	// AdminToken authenticates /admin/v1 (Authorization: Bearer <token>).
	AdminToken string
	// MaxBodyBytes bounds a /v1 request body (413 above it).
	MaxBodyBytes int64
	// Org defaults for POST /admin/v1/orgs.
	DefaultCurrency string
	DefaultTimeZone string
	DefaultUSDJPY   int64
	// Alerts renders and sends alert messages (test sends from the admin API); nil means a
	// worker with the defaults and no SMTP server.
	Alerts *notify.Worker
	// EmailAlerts is true when an SMTP server is configured: email channels can be created.
	EmailAlerts bool
	// Billing closes months, mirrors invoices in Stripe and takes its webhooks; nil means a
	// service without an issuer (invoices can be read, not issued).
	Billing *billing.Service
	// PDFFont is the Japanese TrueType font invoice PDFs are drawn with ("" : no PDFs).
	PDFFont string
	// TrustProxy takes the client address from X-Forwarded-For (a reverse proxy in front).
	TrustProxy bool
	// Cooldowns lists and clears provider cooldowns (GET /status, the admin API).
	Cooldowns *db.Cooldowns
	Log       *slog.Logger
}

// Server holds the Echo instance and the services behind it.
type Server struct {
	cfg        Config
	Echo       *echo.Echo
	adminToken [32]byte
	sessions   *Sessions
	pdfFont    string
}

// New builds the server with every route.
func New(cfg Config) *Server {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Alerts == nil {
		cfg.Alerts = &notify.Worker{DB: cfg.DB, Log: cfg.Log}
	}
	if cfg.Billing == nil {
		cfg.Billing = &billing.Service{DB: cfg.DB, Log: cfg.Log}
	}
	if cfg.Alerts.RetryFor <= 0 {
		cfg.Alerts.RetryFor = notify.DefaultRetryFor
	}
	s := &Server{cfg: cfg, Echo: echo.New(), adminToken: sha256.Sum256([]byte(cfg.AdminToken)),
		sessions: &Sessions{DB: cfg.DB}, pdfFont: cfg.PDFFont}
	e := s.Echo
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.handleError
	// The client address (sign-in throttling) is the connection's, unless the operator says a
	// proxy in front sets X-Forwarded-For.
	e.IPExtractor = echo.ExtractIPDirect()
	if cfg.TrustProxy {
		e.IPExtractor = echo.ExtractIPFromXFFHeader()
	}
	e.Use(middleware.RecoverWithConfig(middleware.RecoverConfig{DisableStackAll: true, LogErrorFunc: func(c echo.Context, err error, stack []byte) error {
		s.cfg.Log.Error("panic in handler", "path", c.Path(), "err", err, "stack", string(stack))
		return err
	}}))

	v1 := e.Group("/v1")
	v1.POST("/chat/completions", s.chatCompletions)
	v1.POST("/messages", s.messages)
	v1.POST("/messages/count_tokens", s.countTokens)
	v1.POST("/embeddings", s.embeddings)
	v1.GET("/models", s.listModels)
	v1.GET("/models/:model", s.getModel)

	e.GET("/status", s.status)
	e.GET("/healthz", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]string{"status": "ok"}) })

	adm := e.Group("/admin/v1", s.requireAdmin)
	adm.POST("/orgs", s.createOrg)
	adm.GET("/orgs/:org", s.getOrg)
	adm.POST("/orgs/:org/teams", s.createTeam)
	adm.POST("/orgs/:org/members", s.createMember)
	adm.POST("/orgs/:org/keys", s.createKey)
	adm.DELETE("/keys/:id", s.revokeKey)
	adm.GET("/budgets/global", s.getBudget)
	adm.PUT("/budgets/global", s.putBudget)
	adm.GET("/budgets/:kind/:id", s.getBudget)
	adm.PUT("/budgets/:kind/:id", s.putBudget)
	adm.GET("/orgs/:org/reservations", s.listReservations)
	s.alertRoutes(adm.Group("/orgs/:org"))
	s.alertRoutes(adm.Group("/global"))
	s.billingRoutes(adm)
	adm.GET("/cooldowns", s.listCooldowns)
	adm.DELETE("/cooldowns/:provider", s.clearCooldown)
	adm.DELETE("/cooldowns/:provider/:model", s.clearCooldown)
	e.POST("/webhooks/stripe", s.stripeWebhook)
	s.consoleRoutes(e)
	return s
}

func (s *Server) requireAdmin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		tok, ok := bearer(c.Request())
		if !ok {
			return app.Errorf(app.EUNAUTHORIZED, "missing admin token: send it as 'Authorization: Bearer <token>'")
		}
		h := sha256.Sum256([]byte(tok))
		if s.cfg.AdminToken == "" || subtle.ConstantTimeCompare(h[:], s.adminToken[:]) != 1 {
			return app.Errorf(app.EUNAUTHORIZED, "invalid admin token")
		}
		return next(c)
	}
}

func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:]), true
	}
	return "", false
}

// statusOf maps an app error code to its HTTP status, OpenAI error type and code.
func statusOf(code string) (int, string, string) {
	switch code {
	case app.EINVALID:
		return http.StatusBadRequest, "invalid_request_error", "invalid_request"
	case app.EUNAUTHORIZED:
		return http.StatusUnauthorized, "authentication_error", "invalid_api_key"
	case app.EFORBIDDEN:
		return http.StatusForbidden, "permission_error", "model_not_allowed"
	case app.ENOTFOUND:
		return http.StatusNotFound, "invalid_request_error", "not_found"
	case app.ECONFLICT:
		return http.StatusConflict, "invalid_request_error", "conflict"
	case app.ETOOLARGE:
		return http.StatusRequestEntityTooLarge, "invalid_request_error", "request_too_large"
	case app.EBUDGET:
		return http.StatusTooManyRequests, "budget_exceeded", "budget_exceeded"
	case app.EUPSTREAM:
		return http.StatusBadGateway, "upstream_error", "upstream_error"
	case app.ETIMEOUT:
		return http.StatusGatewayTimeout, "upstream_error", "upstream_timeout"
	case app.EUNAVAILABLE:
		return http.StatusServiceUnavailable, "service_unavailable", "ledger_unavailable"
	case app.ERATELIMIT:
		return http.StatusTooManyRequests, "rate_limit_error", "rate_limited"
	case app.ECONCURRENCY:
		return http.StatusTooManyRequests, "rate_limit_error", "concurrency_limit"
	}
	return http.StatusInternalServerError, "server_error", "internal_error"
}

type errorBody struct {
	Error errorObject `json:"error"`
}

type errorObject struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
}

// handleError renders every error as OpenAI-shaped JSON. Only app errors' messages reach the
// client; anything else is logged and shown as a generic internal error.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	if p := c.Request().URL.Path; p == "/console" || strings.HasPrefix(p, "/console/") {
		s.consoleError(err, c)
		return
	}
	var he *echo.HTTPError
	if errors.As(err, &he) && app.AsError(err) == nil {
		code := app.EINTERNAL
		msg := http.StatusText(he.Code)
		switch he.Code {
		case http.StatusNotFound:
			code, msg = app.ENOTFOUND, "no such endpoint: "+c.Request().Method+" "+c.Request().URL.Path
		case http.StatusMethodNotAllowed:
			code = app.EINVALID
			msg = "method " + c.Request().Method + " is not allowed on " + c.Request().URL.Path
		case http.StatusRequestEntityTooLarge:
			code = app.ETOOLARGE
		}
		err = app.WrapError(code, err, msg)
	}
	e := app.AsError(err)
	if e != nil && e.Code == app.EUPSTREAMCLIENT {
		c.Response().Header().Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
		c.Response().WriteHeader(e.Status)
		_, _ = c.Response().Write(e.Body)
		return
	}
	code := app.ErrorCode(err)
	status, typ, ocode := statusOf(code)
	if he != nil && he.Code == http.StatusMethodNotAllowed {
		status, ocode = http.StatusMethodNotAllowed, "method_not_allowed"
	}
	if status >= 500 {
		s.cfg.Log.Error("request failed", "method", c.Request().Method, "path", c.Request().URL.Path,
			"request_id", c.Response().Header().Get(headerRequestID), "err", err)
	}
	body := errorBody{Error: errorObject{Message: app.ErrorMessage(err), Type: typ, Code: ocode}}
	if e != nil && e.RetryAfter > 0 {
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(e.RetryAfter.Seconds()+0.999)))
	}
	if e != nil && e.Code == app.EINVALID && strings.HasPrefix(e.Message, "request_too_large:") {
		body.Error.Code = "request_too_large"
	}
	if e != nil {
		if e.Param != "" {
			body.Error.Param = &e.Param
		}
		if code == app.ENOTFOUND && e.Param == "model" {
			body.Error.Code = "model_not_found"
		}
		if code == app.EBUDGET && e.Node != "" {
			body.Error.Param = &e.Node
		}
	}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(status)
		return
	}
	_ = c.JSON(status, body)
}
