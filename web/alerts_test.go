package web_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"yosan/notify"
)

// signedReceiver accepts webhooks whose signature verifies with the secret it is given.
type signedReceiver struct {
	*httptest.Server
	mu     sync.Mutex
	secret string
	ids    []string
	bodies []string
}

func newSignedReceiver(t *testing.T) *signedReceiver {
	r := &signedReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		if err := notify.Verify([]string{r.secret}, req.Header, body, time.Now(), 5*time.Minute); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		r.ids = append(r.ids, req.Header.Get("webhook-id"))
		r.bodies = append(r.bodies, string(body))
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *signedReceiver) setSecret(s string) {
	r.mu.Lock()
	r.secret = s
	r.mu.Unlock()
}

func TestAdminAlertChannels(t *testing.T) {
	s := mustServer(t)
	tn := s.mustTenant(t, "free")
	other := s.mustTenant(t, "free")
	base := "/admin/v1/orgs/" + tn.org
	rcv := newSignedReceiver(t)

	var hookID, secret string
	t.Run("CreateWebhookShowsSecretOnce", func(t *testing.T) {
		ch := s.admin(t, "POST", base+"/alert-channels", `{"name":"ops","kind":"webhook","url":"`+rcv.URL+`/hook"}`, 201)
		hookID, _ = ch["id"].(string)
		secret, _ = ch["secret"].(string)
		if !strings.HasPrefix(secret, "whsec_") || ch["org_id"] != tn.org || ch["enabled"] != true || ch["managed"] != false {
			t.Fatalf("created %v", ch)
		}
		got := s.admin(t, "GET", base+"/alert-channels/"+hookID, "", 200)
		if _, shown := got["secret"]; shown {
			t.Errorf("GET shows the secret: %v", got)
		}
		list := s.admin(t, "GET", base+"/alert-channels", "", 200)["data"].([]any)
		if len(list) != 1 || strings.Contains(fmt.Sprint(list), "whsec_") {
			t.Errorf("list %v", list)
		}
	})
	t.Run("TestSendSigned", func(t *testing.T) {
		rcv.setSecret(secret)
		d := s.admin(t, "POST", base+"/alert-channels/"+hookID+"/test", "", 200)
		if d["status"] != "sent" || d["attempts"] != 1.0 || d["last_status_code"] != 200.0 {
			t.Fatalf("test delivery %v", d)
		}
		if len(rcv.ids) != 1 || rcv.ids[0] != d["message_id"] || !strings.Contains(rcv.bodies[0], `"type":"alert.test"`) {
			t.Errorf("receiver got %v %v, delivery %v", rcv.ids, rcv.bodies, d["message_id"])
		}
		log := d["log"].([]any)
		if len(log) != 1 || log[0].(map[string]any)["ok"] != true {
			t.Errorf("log %v", log)
		}
	})
	t.Run("RotateSignsWithBoth", func(t *testing.T) {
		ch := s.admin(t, "POST", base+"/alert-channels/"+hookID+"/rotate-secret", `{"overlap":"1h"}`, 200)
		newSecret, _ := ch["secret"].(string)
		if !strings.HasPrefix(newSecret, "whsec_") || newSecret == secret || ch["previous_secret_expires_at"] == nil {
			t.Fatalf("rotated %v", ch)
		}
		// The receiver still knows only the old secret: the overlap keeps it working.
		if d := s.admin(t, "POST", base+"/alert-channels/"+hookID+"/test", "", 200); d["status"] != "sent" {
			t.Fatalf("test with the old secret during the overlap: %v", d)
		}
		rcv.setSecret(newSecret)
		if d := s.admin(t, "POST", base+"/alert-channels/"+hookID+"/test", "", 200); d["status"] != "sent" {
			t.Fatalf("test with the new secret: %v", d)
		}
		// Without an overlap, the old secret stops at once.
		s.admin(t, "POST", base+"/alert-channels/"+hookID+"/rotate-secret", `{"overlap":"0s"}`, 200)
		d := s.admin(t, "POST", base+"/alert-channels/"+hookID+"/test", "", 200)
		if d["status"] != "failed" || d["last_status_code"] != 401.0 {
			t.Fatalf("test after a rotation without overlap: %v", d)
		}
	})
	t.Run("PatchAndDeliveries", func(t *testing.T) {
		ch := s.admin(t, "PATCH", base+"/alert-channels/"+hookID, `{"name":"ops 2","enabled":false}`, 200)
		if ch["name"] != "ops 2" || ch["enabled"] != false {
			t.Errorf("patched %v", ch)
		}
		ds := s.admin(t, "GET", base+"/alert-deliveries?limit=10", "", 200)["data"].([]any)
		if len(ds) != 4 {
			t.Fatalf("%d deliveries, want the 4 test sends", len(ds))
		}
		failed := s.admin(t, "GET", base+"/alert-deliveries?status=failed", "", 200)["data"].([]any)
		if len(failed) != 1 {
			t.Fatalf("failed deliveries %v", failed)
		}
		id := failed[0].(map[string]any)["id"].(string)
		d := s.admin(t, "POST", base+"/alert-deliveries/"+id+"/resend", "", 202)
		if d["status"] != "pending" || d["next_attempt_at"] == nil {
			t.Errorf("re-sent %v", d)
		}
		full := s.admin(t, "GET", base+"/alert-deliveries/"+id, "", 200)
		if full["attempts"] != 1.0 || len(full["log"].([]any)) != 1 {
			t.Errorf("delivery %v", full)
		}
	})
	t.Run("OtherOrgSeesNothing", func(t *testing.T) {
		ob := "/admin/v1/orgs/" + other.org
		for _, c := range []struct{ method, path, body string }{
			{"GET", ob + "/alert-channels/" + hookID, ""},
			{"PATCH", ob + "/alert-channels/" + hookID, `{"name":"x"}`},
			{"DELETE", ob + "/alert-channels/" + hookID, ""},
			{"POST", ob + "/alert-channels/" + hookID + "/test", ""},
			{"POST", ob + "/alert-channels/" + hookID + "/rotate-secret", ""},
			{"GET", "/admin/v1/global/alert-channels/" + hookID, ""},
		} {
			resp, b := s.do(t, c.method, c.path, adminToken, c.body)
			mustAPIError(t, resp, b, 404, "invalid_request_error", "not_found", nil, "not found")
		}
		if ds := s.admin(t, "GET", ob+"/alert-deliveries", "", 200)["data"].([]any); len(ds) != 0 {
			t.Errorf("other org sees %d deliveries", len(ds))
		}
	})
	t.Run("Delete", func(t *testing.T) {
		if resp, b := s.do(t, "DELETE", base+"/alert-channels/"+hookID, adminToken, ""); resp.StatusCode != 204 {
			t.Fatalf("delete: %d %s", resp.StatusCode, b)
		}
		resp, b := s.do(t, "GET", base+"/alert-channels/"+hookID, adminToken, "")
		mustAPIError(t, resp, b, 404, "invalid_request_error", "not_found", nil, "not found")
	})
	t.Run("Global", func(t *testing.T) {
		ch := s.admin(t, "POST", "/admin/v1/global/alert-channels", `{"name":"noc","kind":"webhook","url":"https://noc.example.com/y"}`, 201)
		if ch["org_id"] != nil {
			t.Errorf("operator channel %v", ch)
		}
		if l := s.admin(t, "GET", "/admin/v1/global/alert-channels", "", 200)["data"].([]any); len(l) != 1 {
			t.Errorf("operator channels %v", l)
		}
		if l := s.admin(t, "GET", "/admin/v1/global/alerts", "", 200)["data"].([]any); len(l) != 0 {
			t.Errorf("operator alerts %v", l)
		}
	})

	errTests := []struct {
		name, method, path, body string
		status                   int
		code, msg                string
	}{
		{"ErrKind", "POST", base + "/alert-channels", `{"name":"x","kind":"sms"}`, 400, "invalid_request", "'kind' must be email or webhook"},
		{"ErrName", "POST", base + "/alert-channels", `{"name":" ","kind":"webhook","url":"https://x.example"}`, 400, "invalid_request", "'name' is required"},
		{"ErrURL", "POST", base + "/alert-channels", `{"name":"x","kind":"webhook","url":"ftp://x.example"}`, 400, "invalid_request", "'url' must be an absolute http(s) URL"},
		{"ErrURLCredentials", "POST", base + "/alert-channels", `{"name":"x","kind":"webhook","url":"https://u:p@x.example"}`, 400, "invalid_request", "no credentials"},
		{"ErrURLRelative", "POST", base + "/alert-channels", `{"name":"x","kind":"webhook","url":"/hook"}`, 400, "invalid_request", "'url' must be"},
		{"ErrEmailsOnWebhook", "POST", base + "/alert-channels", `{"name":"x","kind":"webhook","url":"https://x.example","emails":["a@b.example"]}`, 400, "invalid_request", "'emails' is for email channels"},
		{"ErrEmailWithoutSMTP", "POST", base + "/alert-channels", `{"name":"x","kind":"email","emails":["a@b.example"]}`, 400, "invalid_request", "need an SMTP server"},
		{"ErrUnknownField", "POST", base + "/alert-channels", `{"name":"x","kind":"webhook","url":"https://x.example","secret":"whsec_x"}`, 400, "invalid_request", `unknown field "secret"`},
		{"ErrUnknownOrg", "GET", "/admin/v1/orgs/" + missingUUID + "/alert-channels", "", 404, "not_found", "not found"},
		{"ErrChannel", "GET", base + "/alert-channels/" + missingUUID, "", 404, "not_found", "not found"},
		{"ErrChannelID", "GET", base + "/alert-channels/nope", "", 404, "not_found", "not found"},
		{"ErrOverlap", "POST", base + "/alert-channels/" + missingUUID + "/rotate-secret", `{"overlap":"forever"}`, 400, "invalid_request", "'overlap' must be a duration"},
		{"ErrDeliveryStatus", "GET", base + "/alert-deliveries?status=lost", "", 400, "invalid_request", "'status' must be pending, sent or failed"},
		{"ErrLimit", "GET", base + "/alerts?limit=0", "", 400, "invalid_request", "'limit' must be an integer from 1 to 1000"},
		{"ErrDelivery", "POST", base + "/alert-deliveries/" + missingUUID + "/resend", "", 404, "not_found", "not found"},
		{"ErrThresholdRange", "PUT", "/admin/v1/budgets/org/" + tn.org, `{"thresholds":[0]}`, 400, "invalid_request", "threshold 0 is out of range"},
		{"ErrThresholdEmpty", "PUT", "/admin/v1/budgets/org/" + tn.org, `{"thresholds":[]}`, 400, "invalid_request", "'thresholds' is empty"},
		{"ErrThresholdType", "PUT", "/admin/v1/budgets/org/" + tn.org, `{"thresholds":["50%"]}`, 400, "invalid_request", "whole percentages"},
	}
	for _, tt := range errTests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := s.do(t, tt.method, tt.path, adminToken, tt.body)
			mustAPIError(t, resp, b, tt.status, "invalid_request_error", tt.code, nil, tt.msg)
		})
	}
}

func TestAdminThresholds(t *testing.T) {
	s := mustServer(t)
	tn := s.mustTenant(t, "free")
	path := "/admin/v1/budgets/team/" + tn.team
	b := s.admin(t, "PUT", path, `{"cap":"1000","thresholds":[90,25,25]}`, 200)
	if b["cap"] != "1000" || fmt.Sprint(b["thresholds"]) != "[25 90]" || b["last_alert_threshold"] != 0.0 {
		t.Fatalf("budget %v", b)
	}
	if got := s.admin(t, "GET", path, "", 200); fmt.Sprint(got["thresholds"]) != "[25 90]" {
		t.Errorf("GET thresholds %v", got["thresholds"])
	}
	// Thresholds alone leave the cap; null restores the defaults.
	b = s.admin(t, "PUT", path, `{"thresholds":null}`, 200)
	if b["cap"] != "1000" || fmt.Sprint(b["thresholds"]) != "[50 80 90 100]" {
		t.Errorf("after null %v", b)
	}
	// A request that crosses a threshold shows in the alert list at once (same transaction).
	s.admin(t, "PUT", path, `{"cap":"0.000002","thresholds":[50]}`, 200)
	if resp, body := s.do(t, "POST", "/v1/chat/completions", tn.secret, chatBody("demo-mini", `,"max_tokens":3`)); resp.StatusCode != 429 {
		t.Fatalf("tiny cap: %d %s", resp.StatusCode, body)
	}
	s.admin(t, "PUT", path, `{"cap":"1"}`, 200)
	if resp, body := s.do(t, "POST", "/v1/chat/completions", tn.secret, chatBody("demo-mini", `,"max_tokens":3`)); resp.StatusCode != 200 {
		t.Fatalf("chat: %d %s", resp.StatusCode, body)
	}
	s.admin(t, "PUT", path, `{"cap":"0.000001"}`, 200) // now far past 50 %
	alerts := s.admin(t, "GET", "/admin/v1/orgs/"+tn.org+"/alerts", "", 200)["data"].([]any)
	if len(alerts) != 1 {
		t.Fatalf("alerts %v", alerts)
	}
	a := alerts[0].(map[string]any)
	node := a["node"].(map[string]any)
	if a["type"] != "budget.threshold_crossed" || a["threshold_percent"] != 50.0 || node["kind"] != "team" || node["name"] != "research" || a["cap"] != "0.000001" {
		t.Errorf("alert %v", a)
	}
}
