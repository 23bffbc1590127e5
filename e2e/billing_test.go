package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stripe/stripe-go/v76/webhook"

	"yosan/app"
	"yosan/billing/stripemocktest"
	"yosan/db/dbtest"
	"yosan/providers/openaifake"
)

const (
	e2eIssuer        = "T7123456789012"
	e2eStripeWebhook = "whsec_e2e"
)

func billingConfig(stripeURL string, autoClose bool) string {
	return fmt.Sprintf(`billing:
  issuer:
    name: Yosan 株式会社
    registration_number: %s
    address: 東京都千代田区丸の内1-1
    payment_terms: 銀行振込 / Bank transfer
  auto_close: %v
  close_delay: 0s
  interval: 200ms
  stripe:
    secret_key_env: YOSAN_E2E_STRIPE_KEY
    webhook_secret_env: YOSAN_E2E_STRIPE_WEBHOOK
    api_url: %s
`, e2eIssuer, autoClose, stripeURL)
}

var stripeEnv = []string{"YOSAN_E2E_STRIPE_KEY=sk_test_e2e", "YOSAN_E2E_STRIPE_WEBHOOK=" + e2eStripeWebhook}

// lastMonthUsage writes settled ledger rows of October 2026 for the tenant's key, as the
// gateway would have left them, and returns their total in micro-yen.
func lastMonthUsage(tb testing.TB, pool *pgxpool.Pool, tn tenant, n int) int64 {
	tb.Helper()
	var total int64
	for i := 0; i < n; i++ {
		actual := int64(1000+i*37) * app.Micro / 7
		at := time.Date(2026, 10, 1+i%30, 12, 0, 0, 0, time.UTC)
		_, err := pool.Exec(context.Background(), `INSERT INTO reservations (request_id, org_id, key_id, period, status, currency,
				amount, actual, budget_ids, apply_nonce, model, provider, upstream_model, usd_jpy, est_input_tokens,
				max_output_tokens, input_tokens, cached_tokens, output_tokens, deadline, created_at, settled_at)
			VALUES ($1, $2, $3, '2026-10', 'committed', 'JPY', $4, $4, '{}', $5, 'gpt-4o-mini', 'fake', 'gpt-4o-mini', 150000000,
				100, 100, 100, 0, 100, $6, $6, $6)`, uuid.NewString(), tn.Org, tn.KeyID, actual, uuid.New(), at)
		if err != nil {
			tb.Fatal(err)
		}
		total += actual
	}
	return total
}

// runBilling runs `yosan billing args...` against the database and config, returning its output.
func runBilling(tb testing.TB, dbURL, config string, args ...string) (string, error) {
	tb.Helper()
	cfgPath := filepath.Join(tb.TempDir(), "yosan.yaml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(binary, append([]string{"billing"}, args...)...)
	cmd.Env = append(append(os.Environ(), "DATABASE_URL="+dbURL, "YOSAN_CONFIG="+cfgPath), stripeEnv...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestMonthCloseCommand: `yosan billing close` issues the month's invoice and mirrors it in
// Stripe; running it again creates nothing, in the database or in Stripe. Stripe's signed
// webhook then marks the invoice paid, and the reconciliation finds the ledger and the invoice
// equal to the yen.
func TestMonthCloseCommand(t *testing.T) {
	fu := newFakeUpstream(t, openaifake.Options{})
	sm := stripemocktest.Start(t)
	url := dbtest.NewURL(t)
	cfg := fakeConfig(fu.URL) + billingConfig(sm.URL, false)
	g := startGateway(t, url, cfg, stripeEnv...)
	tn := g.newTenant(t, "free")
	g.mustAdmin(t, "PUT", "/orgs/"+tn.Org+"/billing", map[string]any{"name": "Acme 株式会社", "email": "ap@acme.example"}, 200)
	pool := mustPool(t, url)
	total := lastMonthUsage(t, pool, tn, 40)

	out, err := runBilling(t, url, cfg, "close", "--period", "2026-10")
	if err != nil || !strings.Contains(out, "issued INV-000001") || !strings.Contains(out, "stripe: 1 synced, 0 failed") {
		t.Fatalf("first close: %v\n%s", err, out)
	}
	first := len(sm.Requests())
	if first != 5 { // customer, invoice, one line, the tax item, finalize
		t.Errorf("%d requests to Stripe, want 5: %v", first, sm.Requests())
	}
	sm.Reset()
	out, err = runBilling(t, url, cfg, "close", "--period", "2026-10")
	if err != nil || !strings.Contains(out, "already issued INV-000001") {
		t.Fatalf("second close: %v\n%s", err, out)
	}
	if reqs := sm.Requests(); len(reqs) != 0 {
		t.Errorf("the re-run sent %d requests to Stripe: %v", len(reqs), reqs)
	}
	var invoices, lines int
	if err := pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM invoices), (SELECT count(*) FROM invoice_lines)`).Scan(&invoices, &lines); err != nil {
		t.Fatal(err)
	}
	if invoices != 1 || lines != 1 {
		t.Errorf("%d invoices and %d lines after two closes", invoices, lines)
	}

	list := g.mustAdmin(t, "GET", "/orgs/"+tn.Org+"/invoices", nil, 200)["data"].([]any)
	inv := list[0].(map[string]any)
	stripeState := inv["stripe"].(map[string]any)
	if inv["subtotal"] != float64(total/app.Micro) || stripeState["synced"] != true || inv["recipient"] != "Acme 株式会社" {
		t.Fatalf("invoice %v, ledger %d micro-yen", inv, total)
	}

	// Stripe says it was paid.
	payload := fmt.Sprintf(`{"id":"evt_e2e","object":"event","api_version":"2023-10-16","type":"invoice.paid",
		"data":{"object":{"id":%q,"object":"invoice","metadata":{}}}}`, stripeState["invoice_id"])
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: []byte(payload), Secret: e2eStripeWebhook, Timestamp: time.Now()})
	req, _ := http.NewRequest("POST", g.URL+"/webhooks/stripe", bytes.NewReader(signed.Payload))
	req.Header.Set("Stripe-Signature", signed.Header)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("webhook: %d", resp.StatusCode)
	}
	if got := g.mustAdmin(t, "GET", "/orgs/"+tn.Org+"/invoices/"+inv["id"].(string), nil, 200); got["status"] != "paid" {
		t.Errorf("status %v after invoice.paid", got["status"])
	}
	recon := g.mustAdmin(t, "GET", "/billing/reconciliation?period=2026-10", nil, 200)
	if recon["all_ok"] != true {
		t.Errorf("reconciliation %v", recon)
	}
	resp, err = http.Get(g.URL + "/admin/v1/orgs/" + tn.Org + "/invoices/" + inv["id"].(string) + "/html")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("the invoice page without the admin token: %d", resp.StatusCode)
	}
}

// TestScheduledClose: a gateway with auto_close closes a month that ended, once, even with two
// gateways running the scheduler, and mirrors it in Stripe.
func TestScheduledClose(t *testing.T) {
	fu := newFakeUpstream(t, openaifake.Options{})
	sm := stripemocktest.Start(t)
	url := dbtest.NewURL(t)
	cfg := fakeConfig(fu.URL) + billingConfig(sm.URL, false)
	g := startGateway(t, url, cfg, stripeEnv...)
	tn := g.newTenant(t, "free")
	pool := mustPool(t, url)
	lastMonthUsage(t, pool, tn, 10)
	// The period opened in October (its rate was fixed then).
	if _, err := pool.Exec(context.Background(), `INSERT INTO org_periods (org_id, period, usd_jpy, opened_at)
		VALUES ($1, '2026-10', 150000000, '2026-10-01T00:00:00Z')`, tn.Org); err != nil {
		t.Fatal(err)
	}
	auto := fakeConfig(fu.URL) + billingConfig(sm.URL, true)
	startGateway(t, url, auto, stripeEnv...)
	startGateway(t, url, auto, stripeEnv...)
	var number string
	var synced bool
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err := pool.QueryRow(context.Background(), `SELECT coalesce(max(number), ''), coalesce(bool_and(stripe_synced), false) FROM invoices`).Scan(&number, &synced); err != nil {
			t.Fatal(err)
		}
		if number != "" && synced {
			break
		}
	}
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM invoices`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if number != "INV-000001" || n != 1 || !synced {
		t.Fatalf("after the scheduler: %d invoices, last %q, synced %v", n, number, synced)
	}
	creates := 0
	for _, r := range sm.Requests() {
		if r.Method == "POST" && r.Path == "/v1/invoices" {
			creates++
		}
	}
	if creates != 1 {
		t.Errorf("%d Stripe invoices created by two schedulers, want 1", creates)
	}
}
