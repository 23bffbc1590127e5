package web

import (
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"yosan/app"
	"yosan/db"
	"yosan/notify"
	"yosan/web/views"
)

func (s *Server) alertPageRoutes(o *echo.Group) {
	o.GET("/alerts", s.alertsPage)
	o.POST("/alerts/channels", s.alertsAddChannel)
	o.POST("/alerts/channels/:id/test", s.alertsTestChannel)
	o.POST("/alerts/channels/:id/toggle", s.alertsToggleChannel)
	o.POST("/alerts/channels/:id/delete", s.alertsDeleteChannel)
	o.POST("/alerts/deliveries/:id/resend", s.alertsResend)
}

// alertsData reads the alerts page of org (three statements: channels, events, deliveries).
func (s *Server) alertsData(c echo.Context, org app.Org) (views.AlertsData, error) {
	ctx := c.Request().Context()
	d := views.AlertsData{Shell: s.shell(c, &org, "alerts", "Alerts / アラート"), OrgID: org.ID,
		CanManage: cc(c).p.Can(app.ActManageAlerts, app.Target{OrgID: org.ID}), EmailEnabled: s.cfg.EmailAlerts}
	d.Loc, _ = time.LoadLocation(org.TimeZone)
	var err error
	if d.Channels, err = s.cfg.DB.AlertChannels(ctx, org.ID); err != nil {
		return d, err
	}
	if d.Events, err = s.cfg.DB.AlertEvents(ctx, org.ID, 50); err != nil {
		return d, err
	}
	if d.Deliveries, err = s.cfg.DB.AlertDeliveries(ctx, org.ID, db.DeliveryFilter{Limit: 50}); err != nil {
		return d, err
	}
	return d, nil
}

func (s *Server) alertsPage(c echo.Context) error {
	org, err := s.consoleOrg(c)
	if err != nil {
		return err
	}
	d, err := s.alertsData(c, org)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.AlertsPage(d))
}

// alertsOrg loads the org and checks the principal may manage its alerts.
func (s *Server) alertsOrg(c echo.Context) (app.Org, error) {
	org, err := s.consoleOrg(c)
	if err != nil {
		return app.Org{}, err
	}
	return org, cc(c).p.Authorize(app.ActManageAlerts, app.Target{OrgID: org.ID})
}

func (s *Server) alertsAddChannel(c echo.Context) error {
	org, err := s.alertsOrg(c)
	if err != nil {
		return err
	}
	f := views.ChannelForm{Name: strings.TrimSpace(c.FormValue("name")), Kind: c.FormValue("kind"),
		Target: strings.TrimSpace(c.FormValue("target")), Errors: map[string]string{}}
	ch := app.AlertChannel{OrgID: org.ID, Kind: app.ChannelKind(f.Kind), Enabled: true}
	if ch.Name, err = checkChannelName(f.Name); err != nil {
		f.Errors["name"] = "Give the channel a name (at most 100 characters)."
	}
	switch ch.Kind {
	case app.ChannelEmail:
		var list []string
		for _, e := range strings.Split(f.Target, ",") {
			if e = strings.TrimSpace(e); e != "" {
				list = append(list, e)
			}
		}
		if !s.cfg.EmailAlerts {
			f.Errors["target"] = "Email alerts need an SMTP server in the gateway's config (alerts.smtp); use a webhook instead."
		} else if ch.Emails, err = checkEmails(list); err != nil {
			f.Errors["target"] = app.ErrorMessage(err)
		}
	case app.ChannelWebhook:
		if ch.URL, err = checkWebhookURL(f.Target); err != nil {
			f.Errors["target"] = app.ErrorMessage(err)
		}
	default:
		f.Errors["kind"] = "Choose email or webhook."
	}
	if len(f.Errors) > 0 {
		d, err := s.alertsData(c, org)
		if err != nil {
			return err
		}
		d.Form = f
		return render(c, http.StatusBadRequest, views.AlertsPage(d))
	}
	if ch.Kind == app.ChannelWebhook {
		secret, err := notify.NewWebhookSecret()
		if err != nil {
			return err
		}
		ch.Secrets = []string{secret}
	}
	ch, err = s.cfg.DB.CreateAlertChannel(c.Request().Context(), ch)
	if err != nil {
		return err
	}
	s.audit(c, cc(c).p, org.ID, "alert.channel_add", "alert_channel", ch.ID, map[string]any{"name": ch.Name, "kind": string(ch.Kind)})
	if ch.Kind != app.ChannelWebhook {
		return flash(c, alertsBase(org.ID), "Channel “"+ch.Name+"” added.")
	}
	// The secret is shown on this answer only; a reload shows the page without it.
	d, err := s.alertsData(c, org)
	if err != nil {
		return err
	}
	d.NewSecret, d.NewSecretName = ch.Secrets[0], ch.Name
	d.Shell.Flash = "Channel “" + ch.Name + "” added."
	return render(c, http.StatusOK, views.AlertsPage(d))
}

func alertsBase(orgID string) string { return "/console/orgs/" + orgID + "/alerts" }

func (s *Server) alertsTestChannel(c echo.Context) error {
	org, err := s.alertsOrg(c)
	if err != nil {
		return err
	}
	d, err := s.cfg.Alerts.SendTest(c.Request().Context(), org.ID, c.Param("id"))
	if err != nil {
		return err
	}
	s.audit(c, cc(c).p, org.ID, "alert.channel_test", "alert_channel", c.Param("id"), map[string]any{"status": string(d.Status)})
	if d.Status != app.DeliverySent {
		return flash(c, alertsBase(org.ID), "!The test message failed: "+d.LastError)
	}
	return flash(c, alertsBase(org.ID), "Test message sent to "+d.Target+".")
}

func (s *Server) alertsToggleChannel(c echo.Context) error {
	org, err := s.alertsOrg(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	ch, err := s.cfg.DB.AlertChannel(ctx, org.ID, c.Param("id"))
	if err != nil {
		return err
	}
	enabled := !ch.Enabled
	if _, err := s.cfg.DB.UpdateAlertChannel(ctx, org.ID, ch.ID, db.ChannelPatch{Enabled: &enabled}); err != nil {
		return err
	}
	s.audit(c, cc(c).p, org.ID, "alert.channel_update", "alert_channel", ch.ID, map[string]any{"enabled": enabled})
	return flash(c, alertsBase(org.ID), "Channel “"+ch.Name+"” updated.")
}

func (s *Server) alertsDeleteChannel(c echo.Context) error {
	org, err := s.alertsOrg(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	ch, err := s.cfg.DB.AlertChannel(ctx, org.ID, c.Param("id"))
	if err != nil {
		return err
	}
	if err := s.cfg.DB.DeleteAlertChannel(ctx, org.ID, ch.ID); err != nil {
		return err
	}
	s.audit(c, cc(c).p, org.ID, "alert.channel_delete", "alert_channel", ch.ID, map[string]any{"name": ch.Name})
	return flash(c, alertsBase(org.ID), "Channel “"+ch.Name+"” deleted.")
}

func (s *Server) alertsResend(c echo.Context) error {
	org, err := s.alertsOrg(c)
	if err != nil {
		return err
	}
	d, err := s.cfg.DB.ResendAlertDelivery(c.Request().Context(), org.ID, c.Param("id"), s.cfg.Alerts.RetryFor)
	if err != nil {
		return err
	}
	s.audit(c, cc(c).p, org.ID, "alert.resend", "alert_delivery", d.ID, nil)
	return flash(c, alertsBase(org.ID), "The message to "+d.Target+" will be sent again within seconds.")
}
