package web_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestConsoleAlertsPage(t *testing.T) {
	s := mustServer(t)
	tn := s.mustTenant(t, "free")
	other := s.mustTenant(t, "free")
	base := "/console/orgs/" + tn.org + "/alerts"
	finance := s.mustUser(t, "fin@acme.example", "finance_admin", tn.org, "")
	viewer := s.mustUser(t, "view@acme.example", "viewer", tn.org, "")
	teamAdmin := s.mustUser(t, "lead@acme.example", "team_admin", tn.org, tn.team)
	stranger := s.mustUser(t, "owner@other.example", "owner", other.org, "")
	rcv := newSignedReceiver(t)

	t.Run("EmptyState", func(t *testing.T) {
		body := finance.mustPage(base, 200)
		for _, want := range []string{"No channel yet", "No alert yet", "Add a channel", "Email needs an SMTP server"} {
			if !strings.Contains(body, want) {
				t.Errorf("alerts page lacks %q", want)
			}
		}
	})
	t.Run("ErrInvalidKeepsInput", func(t *testing.T) {
		body, _ := finance.mustForm(base+"/channels", url.Values{"name": {"ops"}, "kind": {"webhook"}, "target": {"ftp://hooks.example"}}, 400)
		if !strings.Contains(body, "absolute http(s) URL") || !strings.Contains(body, `value="ftp://hooks.example"`) || !strings.Contains(body, `value="ops"`) {
			t.Errorf("invalid channel form %.600s", body)
		}
		body, _ = finance.mustForm(base+"/channels", url.Values{"name": {"mail"}, "kind": {"email"}, "target": {"cfo@acme.example"}}, 400)
		if !strings.Contains(body, "SMTP server") {
			t.Errorf("email without SMTP %.400s", body)
		}
	})
	var secret string
	t.Run("AddWebhookShowsSecretOnce", func(t *testing.T) {
		body, _ := finance.mustForm(base+"/channels", url.Values{"name": {"ops hook"}, "kind": {"webhook"}, "target": {rcv.URL + "/y"}}, 200)
		m := regexp.MustCompile(`whsec_[A-Za-z0-9+/=]+`).FindString(body)
		if m == "" || !strings.Contains(body, "shown only once") {
			t.Fatalf("no secret on the answer: %.600s", body)
		}
		secret = m
		if again := finance.mustPage(base, 200); strings.Contains(again, secret) {
			t.Error("the secret is shown again on a reload")
		}
	})
	chID := regexp.MustCompile(`/alerts/channels/([0-9a-f-]{36})/test`).FindStringSubmatch(finance.mustPage(base, 200))
	if chID == nil {
		t.Fatal("no test button for the channel")
	}
	t.Run("TestSend", func(t *testing.T) {
		rcv.setSecret(secret)
		_, loc := finance.mustForm(base+"/channels/"+chID[1]+"/test", nil, http.StatusSeeOther)
		body := finance.mustPage(loc, 200)
		if !strings.Contains(body, "Test message sent") || len(rcv.ids) != 1 {
			t.Errorf("after a test: %d received, page %.300s", len(rcv.ids), body)
		}
		if !strings.Contains(body, "sent") || !strings.Contains(body, "Re-send") {
			t.Error("the delivery log does not show the test")
		}
	})
	t.Run("Toggle", func(t *testing.T) {
		_, loc := finance.mustForm(base+"/channels/"+chID[1]+"/toggle", nil, http.StatusSeeOther)
		if body := finance.mustPage(loc, 200); !strings.Contains(body, "disabled") {
			t.Error("channel not disabled")
		}
	})
	t.Run("Roles", func(t *testing.T) {
		for name, b := range map[string]*browserClient{"viewer": viewer, "team_admin": teamAdmin} {
			body := b.mustPage(base, 200)
			if strings.Contains(body, "Add a channel") || strings.Contains(body, "Send a test") {
				t.Errorf("%s sees the management forms", name)
			}
			b.mustForm(base+"/channels", url.Values{"name": {"x"}, "kind": {"webhook"}, "target": {"https://x.example"}}, 403)
			b.mustForm(base+"/channels/"+chID[1]+"/delete", nil, 403)
		}
		stranger.mustPage(base, 404)
		stranger.mustForm(base+"/channels/"+chID[1]+"/delete", nil, 404)
		// The stranger's own org does not have the channel either.
		stranger.mustForm("/console/orgs/"+other.org+"/alerts/channels/"+chID[1]+"/delete", nil, 404)
	})
	t.Run("Delete", func(t *testing.T) {
		_, loc := finance.mustForm(base+"/channels/"+chID[1]+"/delete", nil, http.StatusSeeOther)
		if body := finance.mustPage(loc, 200); !strings.Contains(body, "deleted") || !strings.Contains(body, "No channel yet") {
			t.Errorf("after delete %.300s", body)
		}
	})
}

func TestConsoleInvoicesPage(t *testing.T) {
	s := mustBillingServer(t)
	tn := s.mustTenant(t, "enterprise")
	base := "/console/orgs/" + tn.org + "/invoices"
	finance := s.mustUser(t, "fin@acme.example", "finance_admin", tn.org, "")
	viewer := s.mustUser(t, "view@acme.example", "viewer", tn.org, "")
	if body := finance.mustPage(base, 200); !strings.Contains(body, "No invoice yet") || !strings.Contains(body, "No ended month") {
		t.Fatalf("empty invoices page %.500s", body)
	}
	for i := 0; i < 2; i++ {
		if resp, b := s.do(t, "POST", "/v1/chat/completions", tn.secret, chatBody("demo-max", `,"max_tokens":1000`)); resp.StatusCode != 200 {
			t.Fatalf("chat: %d %s", resp.StatusCode, b)
		}
	}
	tokyo := mustTokyo(t)
	period := time.Now().In(tokyo).Format("2006-01")
	t.Run("ErrRate", func(t *testing.T) {
		body, _ := finance.mustForm(base+"/rate", url.Values{"period": {"2099-01"}, "usd_jpy": {"abc"}, "source": {""}}, 400)
		if !strings.Contains(body, "JPY per USD, such as 151.20") || !strings.Contains(body, "printed on the invoice") {
			t.Errorf("rate errors %.500s", body)
		}
	})
	// A month later the period has ended and can be closed from the page.
	later := time.Now().AddDate(0, 1, 1)
	s.db.Now = func() time.Time { return later }
	// Sessions end on the database's clock too: sign in again a month later.
	finance.login("fin@acme.example", consolePassword)
	viewer.login("view@acme.example", consolePassword)
	var invURL string
	t.Run("Close", func(t *testing.T) {
		body := finance.mustPage(base, 200)
		if !strings.Contains(body, `<option value="`+period+`">`) {
			t.Fatalf("period %s is not offered for closing: %.800s", period, body)
		}
		viewer.mustForm(base+"/close", url.Values{"period": {period}}, 403)
		_, loc := finance.mustForm(base+"/close", url.Values{"period": {period}}, http.StatusSeeOther)
		body = finance.mustPage(loc, 200)
		if !strings.Contains(body, "Invoice INV-000001 issued") {
			t.Fatalf("after close %.600s", body)
		}
		m := regexp.MustCompile(`href="(/console/orgs/[^"]+/invoices/[0-9a-f-]{36})"`).FindStringSubmatch(body)
		if m == nil {
			t.Fatal("no link to the invoice")
		}
		invURL = m[1]
		_, loc = finance.mustForm(base+"/close", url.Values{"period": {period}}, http.StatusSeeOther)
		if body := finance.mustPage(loc, 200); !strings.Contains(body, "invoiced already") {
			t.Errorf("second close %.300s", body)
		}
	})
	t.Run("PrintAndPDF", func(t *testing.T) {
		if body := viewer.mustPage(invURL, 200); !strings.Contains(body, "適格請求書") || !strings.Contains(body, testIssuerNumber) {
			t.Error("the printable invoice is missing its items")
		}
		status, body, h := viewer.get(invURL + "/pdf")
		if status != 200 || h.Get("Content-Type") != "application/pdf" || !strings.HasPrefix(body, "%PDF-") {
			t.Errorf("pdf: %d %s", status, h.Get("Content-Type"))
		}
	})
	t.Run("Reconciliation", func(t *testing.T) {
		if body := viewer.mustPage(base+"?period="+period, 200); !strings.Contains(body, "the invoice equals the ledger to the yen") {
			t.Errorf("reconciliation %.600s", body)
		}
	})
	t.Run("Correct", func(t *testing.T) {
		viewer.mustPage(invURL+"/credit", 403)
		if body := finance.mustPage(invURL+"/credit", 200); !strings.Contains(body, "cancels INV-000001 in full") {
			t.Errorf("confirmation %.400s", body)
		}
		_, loc := finance.mustForm(invURL+"/credit", nil, http.StatusSeeOther)
		body := finance.mustPage(loc, 200)
		if !strings.Contains(body, "Credit note CN-000002 issued for INV-000001") || !strings.Contains(body, "credited") {
			t.Errorf("after the credit %.600s", body)
		}
		_, loc = finance.mustForm(base+"/close", url.Values{"period": {period}}, http.StatusSeeOther)
		if body := finance.mustPage(loc, 200); !strings.Contains(body, "INV-000003 issued") || !strings.Contains(body, "corrects INV-000001") {
			t.Errorf("the corrected invoice %.800s", body)
		}
	})
}
