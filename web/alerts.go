package web

import (
	"net/http"
	"net/mail"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"yosan/app"
	"yosan/db"
	"yosan/notify"
)

// Alert routes exist twice: under /orgs/:org for an org's alerts and channels, and under
// /global for the operator's (the gateway-wide node's). scope returns the org id, "" for the
// operator.
func scope(c echo.Context) string { return c.Param("org") }

func (s *Server) alertRoutes(g *echo.Group) {
	g.GET("/alert-channels", s.listChannels)
	g.POST("/alert-channels", s.createChannel)
	g.GET("/alert-channels/:id", s.getChannel)
	g.PATCH("/alert-channels/:id", s.patchChannel)
	g.DELETE("/alert-channels/:id", s.deleteChannel)
	g.POST("/alert-channels/:id/rotate-secret", s.rotateSecret)
	g.POST("/alert-channels/:id/test", s.testChannel)
	g.GET("/alerts", s.listAlerts)
	g.GET("/alert-deliveries", s.listDeliveries)
	g.GET("/alert-deliveries/:id", s.getDelivery)
	g.POST("/alert-deliveries/:id/resend", s.resendDelivery)
}

type channelJSON struct {
	ID      string   `json:"id"`
	OrgID   *string  `json:"org_id"`
	Name    string   `json:"name"`
	Kind    string   `json:"kind"`
	Emails  []string `json:"emails,omitempty"`
	URL     string   `json:"url,omitempty"`
	Enabled bool     `json:"enabled"`
	Managed bool     `json:"managed"`
	// Secret is shown once: when the channel is created and when its secret is rotated.
	Secret string `json:"secret,omitempty"`
	// PreviousSecretExpiresAt is when the secret replaced by the last rotation stops signing.
	PreviousSecretExpiresAt *time.Time `json:"previous_secret_expires_at,omitempty"`
	CreatedAt               time.Time  `json:"created_at"`
}

func toChannelJSON(ch app.AlertChannel, showSecret bool) channelJSON {
	out := channelJSON{ID: ch.ID, Name: ch.Name, Kind: string(ch.Kind), Emails: ch.Emails, URL: ch.URL,
		Enabled: ch.Enabled, Managed: ch.Managed, CreatedAt: ch.CreatedAt}
	if ch.OrgID != "" {
		org := ch.OrgID
		out.OrgID = &org
	}
	if showSecret && len(ch.Secrets) > 0 {
		out.Secret = ch.Secrets[0]
	}
	if ch.PrevSecret != "" && ch.PrevSecretExpires != nil {
		out.PreviousSecretExpiresAt = ch.PrevSecretExpires
	}
	return out
}

// checkEmails validates a recipient list: plain addresses, at most 20.
func checkEmails(list []string) ([]string, error) {
	if len(list) == 0 {
		return nil, app.Errorf(app.EINVALID, "'emails' must list at least one address")
	}
	if len(list) > 20 {
		return nil, app.Errorf(app.EINVALID, "'emails' lists %d addresses; at most 20", len(list))
	}
	out := make([]string, 0, len(list))
	for _, e := range list {
		a, err := mail.ParseAddress(strings.TrimSpace(e))
		if err != nil || a.Name != "" || strings.ContainsAny(a.Address, "\r\n") {
			return nil, app.Errorf(app.EINVALID, "'emails': %q is not an email address such as cfo@example.com", e)
		}
		out = append(out, a.Address)
	}
	return out, nil
}

// checkWebhookURL validates a webhook endpoint: an absolute http(s) URL with a host.
func checkWebhookURL(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || len(raw) > 2048 {
		return "", app.Errorf(app.EINVALID, "'url' must be an absolute http(s) URL such as https://hooks.example.com/yosan (no credentials in it)")
	}
	return u.String(), nil
}

func checkChannelName(name string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > 100 {
		return "", app.Errorf(app.EINVALID, "'name' is required (at most 100 characters)")
	}
	return name, nil
}

func (s *Server) listChannels(c echo.Context) error {
	chs, err := s.cfg.DB.AlertChannels(c.Request().Context(), scope(c))
	if err != nil {
		return err
	}
	out := make([]channelJSON, 0, len(chs))
	for _, ch := range chs {
		out = append(out, toChannelJSON(ch, false))
	}
	return c.JSON(http.StatusOK, map[string]any{"object": "list", "data": out})
}

func (s *Server) createChannel(c echo.Context) error {
	var in struct {
		Name    string   `json:"name"`
		Kind    string   `json:"kind"`
		Emails  []string `json:"emails"`
		URL     string   `json:"url"`
		Enabled *bool    `json:"enabled"`
	}
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	name, err := checkChannelName(in.Name)
	if err != nil {
		return err
	}
	ch := app.AlertChannel{OrgID: scope(c), Name: name, Kind: app.ChannelKind(in.Kind), Enabled: in.Enabled == nil || *in.Enabled}
	switch ch.Kind {
	case app.ChannelEmail:
		if in.URL != "" {
			return app.Errorf(app.EINVALID, "'url' is for webhook channels; an email channel takes 'emails'")
		}
		if !s.cfg.EmailAlerts {
			return app.Errorf(app.EINVALID, "email alerts need an SMTP server: set alerts.smtp in the gateway's config file")
		}
		if ch.Emails, err = checkEmails(in.Emails); err != nil {
			return err
		}
	case app.ChannelWebhook:
		if len(in.Emails) > 0 {
			return app.Errorf(app.EINVALID, "'emails' is for email channels; a webhook channel takes 'url'")
		}
		if ch.URL, err = checkWebhookURL(in.URL); err != nil {
			return err
		}
		secret, err := notify.NewWebhookSecret()
		if err != nil {
			return err
		}
		ch.Secrets = []string{secret}
	default:
		return app.Errorf(app.EINVALID, "'kind' must be email or webhook")
	}
	ch, err = s.cfg.DB.CreateAlertChannel(c.Request().Context(), ch)
	if err != nil {
		return err
	}
	s.audit(c, adminActor(), ch.OrgID, "alert.channel_add", "alert_channel", ch.ID, map[string]any{"name": ch.Name, "kind": string(ch.Kind)})
	return c.JSON(http.StatusCreated, toChannelJSON(ch, true))
}

func (s *Server) getChannel(c echo.Context) error {
	ch, err := s.cfg.DB.AlertChannel(c.Request().Context(), scope(c), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toChannelJSON(ch, false))
}

func (s *Server) patchChannel(c echo.Context) error {
	var in struct {
		Name    *string  `json:"name"`
		Emails  []string `json:"emails"`
		URL     *string  `json:"url"`
		Enabled *bool    `json:"enabled"`
	}
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	p := db.ChannelPatch{Enabled: in.Enabled}
	if in.Name != nil {
		name, err := checkChannelName(*in.Name)
		if err != nil {
			return err
		}
		p.Name = &name
	}
	if in.Emails != nil {
		emails, err := checkEmails(in.Emails)
		if err != nil {
			return err
		}
		p.Emails = emails
	}
	if in.URL != nil {
		u, err := checkWebhookURL(*in.URL)
		if err != nil {
			return err
		}
		p.URL = &u
	}
	ch, err := s.cfg.DB.UpdateAlertChannel(c.Request().Context(), scope(c), c.Param("id"), p)
	if err != nil {
		return err
	}
	s.audit(c, adminActor(), ch.OrgID, "alert.channel_update", "alert_channel", ch.ID, nil)
	return c.JSON(http.StatusOK, toChannelJSON(ch, false))
}

func (s *Server) deleteChannel(c echo.Context) error {
	if err := s.cfg.DB.DeleteAlertChannel(c.Request().Context(), scope(c), c.Param("id")); err != nil {
		return err
	}
	s.audit(c, adminActor(), scope(c), "alert.channel_delete", "alert_channel", c.Param("id"), nil)
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) rotateSecret(c echo.Context) error {
	var in struct {
		Overlap string `json:"overlap"`
	}
	if c.Request().ContentLength != 0 {
		if err := decodeJSON(c, &in); err != nil {
			return err
		}
	}
	overlap := 24 * time.Hour
	if in.Overlap != "" {
		d, err := time.ParseDuration(in.Overlap)
		if err != nil || d < 0 || d > 30*24*time.Hour {
			return app.Errorf(app.EINVALID, "'overlap' must be a duration from 0s to 720h such as \"24h\" (how long the old secret keeps signing)")
		}
		overlap = d
	}
	secret, err := notify.NewWebhookSecret()
	if err != nil {
		return err
	}
	ch, err := s.cfg.DB.RotateWebhookSecret(c.Request().Context(), scope(c), c.Param("id"), secret, overlap)
	if err != nil {
		return err
	}
	s.audit(c, adminActor(), ch.OrgID, "alert.secret_rotate", "alert_channel", ch.ID, nil)
	return c.JSON(http.StatusOK, toChannelJSON(ch, true))
}

type deliveryJSON struct {
	ID             string        `json:"id"`
	EventID        string        `json:"event_id"`
	ChannelID      string        `json:"channel_id"`
	Kind           string        `json:"kind"`
	Status         string        `json:"status"`
	Target         string        `json:"target"`
	Subject        string        `json:"subject,omitempty"`
	MessageID      string        `json:"message_id"`
	Attempts       int           `json:"attempts"`
	NextAttemptAt  *time.Time    `json:"next_attempt_at"`
	LastAttemptAt  *time.Time    `json:"last_attempt_at"`
	LastStatusCode *int          `json:"last_status_code"`
	LastError      *string       `json:"last_error"`
	CreatedAt      time.Time     `json:"created_at"`
	SentAt         *time.Time    `json:"sent_at"`
	Log            []attemptJSON `json:"log,omitempty"`
}

type attemptJSON struct {
	Attempt    int       `json:"attempt"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	OK         bool      `json:"ok"`
	StatusCode *int      `json:"status_code"`
	Error      *string   `json:"error"`
}

func toDeliveryJSON(d app.AlertDelivery, log []db.AttemptLog) deliveryJSON {
	out := deliveryJSON{ID: d.ID, EventID: d.EventID, ChannelID: d.ChannelID, Kind: string(d.Kind), Status: string(d.Status),
		Target: d.Target, Subject: d.Subject, Attempts: d.Attempts, LastAttemptAt: d.LastAttemptAt,
		CreatedAt: d.CreatedAt, SentAt: d.SentAt, MessageID: notify.MessageID(d.ID)}
	if d.Kind == app.ChannelEmail {
		out.MessageID = "<" + d.ID + "@yosan>"
	}
	if d.Status == app.DeliveryPending {
		next := d.NextAttemptAt
		out.NextAttemptAt = &next
	}
	if d.LastStatusCode != 0 {
		code := d.LastStatusCode
		out.LastStatusCode = &code
	}
	if d.LastError != "" {
		e := d.LastError
		out.LastError = &e
	}
	for _, a := range log {
		j := attemptJSON{Attempt: a.Attempt, StartedAt: a.StartedAt, FinishedAt: a.FinishedAt, OK: a.OK}
		if a.StatusCode != 0 {
			code := a.StatusCode
			j.StatusCode = &code
		}
		if a.Error != "" {
			e := a.Error
			j.Error = &e
		}
		out.Log = append(out.Log, j)
	}
	return out
}

func (s *Server) testChannel(c echo.Context) error {
	d, err := s.cfg.Alerts.SendTest(c.Request().Context(), scope(c), c.Param("id"))
	if err != nil {
		return err
	}
	_, log, err := s.cfg.DB.AlertDelivery(c.Request().Context(), scope(c), d.ID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toDeliveryJSON(d, log))
}

// listLimit reads the limit query parameter (1..1000, default 100).
func listLimit(c echo.Context) (int, error) {
	q := c.QueryParam("limit")
	if q == "" {
		return 100, nil
	}
	n, err := strconv.Atoi(q)
	if err != nil || n < 1 || n > 1000 {
		return 0, app.Errorf(app.EINVALID, "'limit' must be an integer from 1 to 1000")
	}
	return n, nil
}

type alertJSON struct {
	ID        string    `json:"id"`
	Type      string    `json:"type"`
	OrgID     *string   `json:"org_id"`
	Node      nodeJSON  `json:"node"`
	Period    string    `json:"period"`
	Currency  string    `json:"currency"`
	Threshold *int      `json:"threshold_percent,omitempty"`
	Crossed   []int     `json:"crossed_percents,omitempty"`
	Spent     string    `json:"spent"`
	Reserved  string    `json:"reserved"`
	Cap       *string   `json:"cap"`
	RequestID string    `json:"request_id,omitempty"`
	Model     string    `json:"model,omitempty"`
	Amount    *string   `json:"reserved_amount,omitempty"`
	Actual    *string   `json:"actual,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

type nodeJSON struct {
	Kind string `json:"kind"`
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
}

func (s *Server) listAlerts(c echo.Context) error {
	limit, err := listLimit(c)
	if err != nil {
		return err
	}
	evs, err := s.cfg.DB.AlertEvents(c.Request().Context(), scope(c), limit)
	if err != nil {
		return err
	}
	out := make([]alertJSON, 0, len(evs))
	for _, e := range evs {
		j := alertJSON{ID: e.ID, Type: string(e.Kind), Node: nodeJSON{Kind: string(e.Node.Kind), ID: e.Node.ID, Name: e.NodeName},
			Period: e.Period, Currency: e.Currency, Spent: app.FormatMoney(e.Spent), Reserved: app.FormatMoney(e.Reserved),
			CreatedAt: e.CreatedAt}
		if e.OrgID != "" {
			org := e.OrgID
			j.OrgID = &org
		}
		if e.Cap != nil {
			cp := app.FormatMoney(*e.Cap)
			j.Cap = &cp
		}
		switch e.Kind {
		case app.AlertThreshold:
			th := e.Threshold
			j.Threshold, j.Crossed = &th, e.Crossed
		case app.AlertOverrun:
			amt, act := app.FormatMoney(e.Amount), app.FormatMoney(e.Actual)
			j.RequestID, j.Model, j.Amount, j.Actual = e.RequestID, e.Model, &amt, &act
		}
		out = append(out, j)
	}
	return c.JSON(http.StatusOK, map[string]any{"object": "list", "data": out})
}

func (s *Server) listDeliveries(c echo.Context) error {
	limit, err := listLimit(c)
	if err != nil {
		return err
	}
	status := app.DeliveryStatus(c.QueryParam("status"))
	switch status {
	case "", app.DeliveryPending, app.DeliverySent, app.DeliveryFailed:
	default:
		return app.Errorf(app.EINVALID, "'status' must be pending, sent or failed")
	}
	ds, err := s.cfg.DB.AlertDeliveries(c.Request().Context(), scope(c), db.DeliveryFilter{Status: status, Limit: limit})
	if err != nil {
		return err
	}
	out := make([]deliveryJSON, 0, len(ds))
	for _, d := range ds {
		out = append(out, toDeliveryJSON(d, nil))
	}
	return c.JSON(http.StatusOK, map[string]any{"object": "list", "data": out})
}

func (s *Server) getDelivery(c echo.Context) error {
	d, log, err := s.cfg.DB.AlertDelivery(c.Request().Context(), scope(c), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toDeliveryJSON(d, log))
}

func (s *Server) resendDelivery(c echo.Context) error {
	d, err := s.cfg.DB.ResendAlertDelivery(c.Request().Context(), scope(c), c.Param("id"), s.cfg.Alerts.RetryFor)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, toDeliveryJSON(d, nil))
}
