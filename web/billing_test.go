package web_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v76/webhook"

	"yosan/app"
	"yosan/billing"
	"yosan/web"
)

const (
	testIssuerNumber = "T7123456789012"
	stripeSecret     = "whsec_test_secret"
)

func mustBillingServer(t *testing.T) *server {
	t.Helper()
	font, err := billing.FindJapaneseFont()
	if err != nil {
		t.Fatal(err)
	}
	return mustServerConfig(t, func(c *web.Config) {
		c.PDFFont = font
		c.Billing = &billing.Service{DB: c.DB, InvoicePrefix: "INV", CreditNotePrefix: "CN", WebhookSecret: stripeSecret,
			Config: billing.Config{Issuer: app.Issuer{Name: "Yosan 株式会社", RegistrationNumber: testIssuerNumber}, DueDays: 30}}
	})
}

// stripeEvent posts a signed Stripe event to the webhook endpoint.
func (s *server) stripeEvent(t *testing.T, secret, typ, yosanID string, ts time.Time) (*http.Response, []byte) {
	t.Helper()
	payload := fmt.Sprintf(`{"id":"evt_%d","object":"event","api_version":"2023-10-16","type":%q,
		"data":{"object":{"id":"in_unknown_to_yosan","object":"invoice","metadata":{"yosan_invoice_id":%q}}}}`,
		ts.UnixNano(), typ, yosanID)
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: []byte(payload), Secret: secret, Timestamp: ts})
	req, err := http.NewRequest("POST", s.url+"/webhooks/stripe", bytes.NewReader(signed.Payload))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Stripe-Signature", signed.Header)
	req.Header.Set("Content-Type", "application/json")
	return s.send(t, req)
}

func TestAdminBilling(t *testing.T) {
	s := mustBillingServer(t)
	tn := s.mustTenant(t, "enterprise")
	base := "/admin/v1/orgs/" + tn.org
	tokyo := mustTokyo(t)
	now := time.Now()
	period := app.Period(now, tokyo)
	next := app.Period(now.AddDate(0, 1, 0), tokyo)

	t.Run("OrgBilling", func(t *testing.T) {
		b := s.admin(t, "PUT", base+"/billing", `{"name":"Acme 株式会社","email":"ap@acme.example","tax_id":"`+testIssuerNumber+`"}`, 200)
		if b["name"] != "Acme 株式会社" || b["tax_id"] != testIssuerNumber {
			t.Errorf("billing %v", b)
		}
		if got := s.admin(t, "GET", base+"/billing", "", 200); got["email"] != "ap@acme.example" {
			t.Errorf("GET billing %v", got)
		}
	})
	t.Run("RateBeforeThePeriodOpens", func(t *testing.T) {
		p := s.admin(t, "GET", base+"/periods/"+next, "", 200)
		if p["open"] != false || p["usd_jpy"] != "150" || p["source"] != "org default rate" {
			t.Errorf("next period %v", p)
		}
		p = s.admin(t, "PUT", base+"/periods/"+next, `{"usd_jpy":"151.25","source":"MUFG TTM"}`, 200)
		if p["usd_jpy"] != "151.25" || p["source"] != "MUFG TTM" || p["open"] != false {
			t.Errorf("set rate %v", p)
		}
	})
	// Usage in the current period opens it: its rate is fixed from then on.
	for i := 0; i < 3; i++ {
		if resp, b := s.do(t, "POST", "/v1/chat/completions", tn.secret, chatBody("demo-max", `,"max_tokens":1000`)); resp.StatusCode != 200 {
			t.Fatalf("chat: %d %s", resp.StatusCode, b)
		}
	}
	t.Run("ErrRateAfterOpen", func(t *testing.T) {
		resp, b := s.do(t, "PUT", base+"/periods/"+period, adminToken, `{"usd_jpy":"160","source":"late"}`)
		mustAPIError(t, resp, b, 409, "invalid_request_error", "conflict", nil, "already open")
	})
	t.Run("ErrNotEnded", func(t *testing.T) {
		out := s.admin(t, "POST", "/admin/v1/billing/close", `{"period":"`+period+`","org_id":"`+tn.org+`"}`, 200)
		r := out["data"].([]any)[0].(map[string]any)
		if r["status"] != "not_closed" || !strings.Contains(r["error"].(string), "has not ended") {
			t.Errorf("close of the running month: %v", r)
		}
	})

	// A month later (the database's clock) the period closes.
	later := now.AddDate(0, 1, 1)
	s.db.Now = func() time.Time { return later }
	var invID, number string
	t.Run("Close", func(t *testing.T) {
		out := s.admin(t, "POST", "/admin/v1/billing/close", `{"period":"`+period+`"}`, 200)
		data := out["data"].([]any)
		if len(data) != 1 {
			t.Fatalf("close %v", out)
		}
		r := data[0].(map[string]any)
		inv, _ := r["invoice"].(map[string]any)
		if r["status"] != "issued" || inv == nil || inv["number"] != "INV-000001" || inv["recipient"] != "Acme 株式会社" {
			t.Fatalf("close %v", r)
		}
		invID, number = inv["id"].(string), inv["number"].(string)
		again := s.admin(t, "POST", "/admin/v1/billing/close", `{"period":"`+period+`"}`, 200)["data"].([]any)[0].(map[string]any)
		if again["status"] != "already_issued" || again["invoice"].(map[string]any)["id"] != invID {
			t.Errorf("re-run %v", again)
		}
	})
	t.Run("Read", func(t *testing.T) {
		inv := s.admin(t, "GET", base+"/invoices/"+invID, "", 200)
		lines := inv["lines"].([]any)
		l := lines[0].(map[string]any)
		if len(lines) != 1 || l["model"] != "demo-max" || l["requests"] != 3.0 || l["amount"].(float64) < 33 || inv["total"].(float64) < 36 || inv["tax_rounding"] != "floor" || inv["registration_number"] != testIssuerNumber {
			t.Errorf("invoice %v", inv)
		}
		if list := s.admin(t, "GET", base+"/invoices?period="+period, "", 200)["data"].([]any); len(list) != 1 {
			t.Errorf("list %v", list)
		}
		resp, body := s.do(t, "GET", base+"/invoices/"+invID+"/html", adminToken, "")
		page := string(body)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			t.Fatalf("html: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		start, _ := time.ParseInLocation("2006-01", period, tokyo)
		first := fmt.Sprintf("%d年%d月1日", start.Year(), int(start.Month()))
		last := start.AddDate(0, 1, -1)
		lastDay := fmt.Sprintf("%d年%d月%d日", last.Year(), int(last.Month()), last.Day())
		for _, want := range []string{"適格請求書", testIssuerNumber, "Yosan 株式会社", "Acme 株式会社", number, "御中", "10%", first, lastDay} {
			if !strings.Contains(page, want) {
				t.Errorf("the invoice page lacks %q", want)
			}
		}
	})
	t.Run("PDF", func(t *testing.T) {
		resp, body := s.do(t, "GET", base+"/invoices/"+invID+"/pdf", adminToken, "")
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/pdf" || !bytes.HasPrefix(body, []byte("%PDF-")) ||
			!strings.Contains(resp.Header.Get("Content-Disposition"), number+".pdf") {
			t.Fatalf("pdf: %d %s %q", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Content-Disposition"))
		}
	})
	t.Run("Reconciliation", func(t *testing.T) {
		out := s.admin(t, "GET", "/admin/v1/billing/reconciliation?period="+period, "", 200)
		data := out["data"].([]any)
		r := data[0].(map[string]any)
		if out["all_ok"] != true || len(data) != 1 || r["status"] != "ok" || r["difference_yen"] != 0.0 || r["invoice_number"] != number {
			t.Errorf("reconciliation %v", out)
		}
	})
	// Stripe's signature tolerance is measured on the gateway's clock (the database's).
	t.Run("StripeWebhook", func(t *testing.T) {
		resp, b := s.stripeEvent(t, stripeSecret, "invoice.paid", invID, later)
		if resp.StatusCode != 200 || !strings.Contains(string(b), number) {
			t.Fatalf("webhook: %d %s", resp.StatusCode, b)
		}
		if inv := s.admin(t, "GET", base+"/invoices/"+invID, "", 200); inv["status"] != "paid" {
			t.Errorf("status after invoice.paid: %v", inv["status"])
		}
		resp, b = s.stripeEvent(t, "whsec_wrong", "invoice.voided", invID, later)
		mustAPIError(t, resp, b, 401, "authentication_error", "invalid_api_key", nil, "Stripe signature")
		resp, b = s.stripeEvent(t, stripeSecret, "invoice.voided", invID, later.Add(-10*time.Minute))
		if resp.StatusCode != 401 {
			t.Errorf("a 10 minutes old event: %d %s", resp.StatusCode, b)
		}
		if inv := s.admin(t, "GET", base+"/invoices/"+invID, "", 200); inv["status"] != "paid" {
			t.Errorf("status changed by a refused event: %v", inv["status"])
		}
		resp, b = s.stripeEvent(t, stripeSecret, "customer.created", "", later)
		if resp.StatusCode != 200 {
			t.Errorf("an event of another type: %d %s", resp.StatusCode, b)
		}
	})
	t.Run("CreditNote", func(t *testing.T) {
		cn := s.admin(t, "POST", base+"/invoices/"+invID+"/credit-note", "", 201)
		if cn["number"] != "CN-000002" || cn["kind"] != "credit_note" || cn["corrects"] != number {
			t.Errorf("credit note %v", cn)
		}
		resp, b := s.do(t, "POST", base+"/invoices/"+invID+"/credit-note", adminToken, "")
		mustAPIError(t, resp, b, 409, "invalid_request_error", "conflict", nil, "already credited")
		resp, body := s.do(t, "GET", base+"/invoices/"+cn["id"].(string)+"/html", adminToken, "")
		if resp.StatusCode != 200 || !strings.Contains(string(body), "適格返還請求書") {
			t.Errorf("credit note page: %d", resp.StatusCode)
		}
	})

	errTests := []struct {
		name, method, path, body string
		status                   int
		code, msg                string
	}{
		{"ErrTaxID", "PUT", base + "/billing", `{"tax_id":"1234567890123"}`, 400, "invalid_request", "'tax_id'"},
		{"ErrEmail", "PUT", base + "/billing", `{"email":"nope"}`, 400, "invalid_request", "'email'"},
		{"ErrPeriod", "GET", base + "/periods/2026-13", "", 400, "invalid_request", "must be a month"},
		{"ErrRate", "PUT", base + "/periods/2030-01", `{"usd_jpy":"0","source":"x"}`, 400, "invalid_request", "'usd_jpy' is required"},
		{"ErrSource", "PUT", base + "/periods/2030-01", `{"usd_jpy":"150"}`, 400, "invalid_request", "'source' is required"},
		{"ErrClosePeriod", "POST", "/admin/v1/billing/close", `{"period":"11-2026"}`, 400, "invalid_request", "must be a month"},
		{"ErrCloseOrg", "POST", "/admin/v1/billing/close", `{"period":"2026-11","org_id":"` + missingUUID + `"}`, 404, "not_found", "not found"},
		{"ErrInvoice", "GET", base + "/invoices/" + missingUUID, "", 404, "not_found", "not found"},
		{"ErrInvoiceOtherOrg", "GET", "/admin/v1/orgs/" + missingUUID + "/invoices/" + invID, "", 404, "not_found", "not found"},
		{"ErrListPeriod", "GET", base + "/invoices?period=x", "", 400, "invalid_request", "'period' must be a month"},
		{"ErrReconPeriod", "GET", "/admin/v1/billing/reconciliation", "", 400, "invalid_request", "must be a month"},
		{"ErrSyncWithoutStripe", "POST", base + "/invoices/" + invID + "/stripe-sync", "", 400, "invalid_request", "Stripe is not configured"},
	}
	for _, tt := range errTests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := s.do(t, tt.method, tt.path, adminToken, tt.body)
			mustAPIError(t, resp, b, tt.status, "invalid_request_error", tt.code, nil, tt.msg)
		})
	}
}

func TestBillingNotConfigured(t *testing.T) {
	s := mustServer(t)
	resp, b := s.do(t, "POST", "/admin/v1/billing/close", adminToken, `{"period":"2026-11"}`)
	mustAPIError(t, resp, b, 400, "invalid_request_error", "invalid_request", nil, "billing is not configured")
	req, err := http.NewRequest("POST", s.url+"/webhooks/stripe", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, b = s.send(t, req)
	mustAPIError(t, resp, b, 404, "invalid_request_error", "not_found", nil, "Stripe webhooks are not configured")
}
