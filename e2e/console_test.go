package e2e

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"yosan/db/dbtest"
)

// selectByText chooses, in the select labelled label, the option whose text contains text.
func (b *browser) selectByText(label, text string) {
	b.t.Helper()
	sel := b.labelled(label)
	v := browserEval[string](b, "find option "+text, `(sel, text) => {
		const el = document.querySelector(sel);
		const o = el && [...el.options].find(o => o.text.includes(text));
		return o ? o.value : "";
	}`, sel, text)
	if v == "" {
		b.fatalf("no option %q in the select labelled %q", text, label)
	}
	b.fill(sel, v)
}

// forgePost submits, from the current page, a form the page does not offer: action with
// fields (the page's own CSRF token added when withCSRF), and waits for the answer page.
func (b *browser) forgePost(action string, fields map[string]string, withCSRF bool) {
	b.t.Helper()
	browserEval[bool](b, "forge a form to "+action, `(action, fields, withCSRF) => {
		const f = document.createElement("form");
		f.method = "post"; f.action = action; f.id = "forged";
		const add = (n, v) => { const i = document.createElement("input"); i.type = "hidden"; i.name = n; i.value = v; f.appendChild(i); };
		for (const [n, v] of Object.entries(fields)) add(n, v);
		if (withCSRF) { const t = document.querySelector('input[name="_csrf"]'); add("_csrf", t ? t.value : ""); }
		const s = document.createElement("button"); s.type = "submit"; s.id = "forged-submit"; f.appendChild(s);
		document.body.appendChild(f);
		return true;
	}`, action, fields, withCSRF)
	b.submit("#forged-submit")
}

func (b *browser) mustSee(sel, want string) {
	b.t.Helper()
	if got := b.text(sel); !strings.Contains(got, want) {
		b.fatalf("%s reads %.300q, want it to contain %q", sel, got, want)
	}
}

// TestConsoleInBrowser drives the console in headless Chromium as a finance team would:
// first-run setup, sign-in, a team, caps, a key used against /v1, the overview moving, the
// key revoked and refused, a viewer refused an edit, a form without its CSRF token refused.
// It saves a screenshot of every main page under e2e/screenshots/.
func TestConsoleInBrowser(t *testing.T) {
	g := startGateway(t, dbtest.NewURL(t), "", "YOSAN_DEMO=1")
	b := newBrowser(t)
	console := g.URL + "/console"

	// First run: the console asks for the first account.
	b.visit(console)
	if !strings.HasSuffix(b.url(), "/console/setup") {
		b.fatalf("first visit lands on %s, want the setup page", b.url())
	}
	b.screenshot("setup")
	b.fillLabel("Your name / お名前", "Aiko Sato")
	b.fillLabel("Email / メールアドレス", "aiko@acme.example")
	b.fillLabel("Password (12+ characters) / パスワード（12文字以上）", "correct horse battery staple")
	b.fillLabel("First organization (optional) / 最初の組織", "Acme 株式会社")
	b.submit(`button[type="submit"]`)
	b.mustSee("h1", "Overview")
	b.mustSee(".org-name", "Acme 株式会社")
	orgURL := strings.TrimSuffix(b.url(), "/")
	b.screenshot("overview-empty")

	// Sign out and in again.
	b.submit(`form[action="/console/logout"] button`)
	b.mustSee("h1", "Sign in")
	b.screenshot("login")
	b.fillLabel("Email / メールアドレス", "aiko@acme.example")
	b.fillLabel("Password / パスワード", "correct horse battery staple")
	b.submit(`button[type="submit"]`)
	b.mustSee(".org-name", "Acme 株式会社")

	// A team.
	b.visit(orgURL + "/teams")
	b.fillLabel("Team name / チーム名", "Research")
	b.submit(`form[action$="/teams"] button`)
	b.mustSee(".flash", "Team “Research” created.")
	b.screenshot("teams")

	// Caps: the org and the team, typed the way people type money.
	b.visit(orgURL + "/budgets")
	b.fillLabel("Cap of org Acme 株式会社 (JPY)", "1,000,000")
	b.submit(`button[aria-label="Save the cap of org Acme 株式会社"]`)
	b.mustSee(".flash", "1,000,000")
	b.fillLabel("Cap of team Research (JPY)", "abc")
	b.submit(`button[aria-label="Save the cap of team Research"]`)
	if b.status() != http.StatusBadRequest || !b.has(`input[aria-invalid="true"][value="abc"]`) {
		b.fatalf("a bad amount: status %d, the typed value and its error must stay", b.status())
	}
	b.fillLabel("Cap of team Research (JPY)", "50000")
	b.submit(`button[aria-label="Save the cap of team Research"]`)
	b.mustSee(".flash", "50,000")
	b.screenshot("budgets")
	b.screenshotPhone("budgets")

	// A key for the team, shown once, used against /v1.
	b.visit(orgURL + "/keys")
	b.fillLabel("Name / 名前", "notebook")
	b.selectByText("Team / チーム", "Research")
	b.selectByText("Plan / プラン", "free")
	b.submit(`form[action$="/keys"] button[type="submit"]`)
	secret := b.text("#key-secret")
	if !strings.HasPrefix(secret, "ysk-") {
		b.fatalf("the key page shows %q, want the secret", secret)
	}
	b.screenshot("key-created")
	b.visit(orgURL + "/keys")
	if strings.Contains(b.text("main"), secret) {
		b.fatalf("the key list shows the secret again")
	}
	b.screenshot("keys")
	for i := 0; i < 3; i++ {
		if status, _, out := g.chat(t, secret, chatBody("demo-mini", 200)); status != 200 {
			t.Fatalf("chat with the new key: %d %v", status, out)
		}
	}

	// The overview counts what the ledger settled.
	b.visit(orgURL)
	if got := b.text("main"); !strings.Contains(got, "3 settled requests") || !strings.Contains(got, "demo-mini") {
		b.fatalf("the overview does not show the requests: %.600s", got)
	}
	b.screenshot("overview")
	b.screenshotPhone("overview")

	// The other pages, for the eye.
	for _, p := range []string{"reservations", "models", "alerts", "invoices", "providers", "audit", "users"} {
		b.visit(orgURL + "/" + p)
		if b.status() != 200 {
			b.fatalf("%s page: %d", p, b.status())
		}
		b.screenshot(p)
	}
	if got := b.text("main"); !strings.Contains(got, "aiko@acme.example") {
		b.fatalf("users page: %.300s", got)
	}
	b.visit(orgURL + "/audit")
	for _, want := range []string{"budget.cap_set", "key.create", "team.create"} {
		b.mustSee("main", want)
	}

	// Revoke the key: /v1 refuses it at once.
	b.visit(orgURL + "/keys")
	b.submit(`a[href$="/revoke"]`)
	b.mustSee("h2", "Revoke the key “notebook”?")
	b.screenshot("key-revoke")
	b.submit(`form[action$="/revoke"] button[type="submit"]`)
	if status, _, out := g.chat(t, secret, chatBody("demo-mini", 20)); status != 401 {
		t.Fatalf("chat with the revoked key: %d %v", status, out)
	}

	// A viewer.
	b.visit(orgURL + "/users")
	b.fillLabel("Email / メールアドレス", "vera@acme.example")
	b.fillLabel("Name (optional) / お名前", "Vera")
	b.fill(b.labelled("Role / 役割"), "viewer")
	b.fillLabel("Initial password (12+ characters) / 初期パスワード", "viewer passphrase 1")
	b.submit(`form[action$="/users"] button[type="submit"]`)
	b.mustSee("main", "vera@acme.example")

	// A form posted without its CSRF token is refused, even with a valid session.
	b.visit(orgURL + "/budgets")
	budgetsPath := strings.TrimPrefix(orgURL, g.URL) + "/budgets"
	orgID := regexp.MustCompile(`/orgs/([0-9a-f-]{36})`).FindStringSubmatch(orgURL)[1]
	b.forgePost(budgetsPath+"/org/"+orgID, map[string]string{"cap": "1"}, false)
	if b.status() != http.StatusForbidden || !strings.Contains(b.text("main"), "CSRF") {
		b.fatalf("a form without the CSRF token: %d %.200s", b.status(), b.text("main"))
	}
	b.screenshot("csrf-refused")

	// The viewer sees the budgets but no form, and a forged edit (with the viewer's own valid
	// CSRF token) is refused.
	b.visit(console)
	b.submit(`form[action="/console/logout"] button`)
	b.fillLabel("Email / メールアドレス", "vera@acme.example")
	b.fillLabel("Password / パスワード", "viewer passphrase 1")
	b.submit(`button[type="submit"]`)
	b.visit(orgURL + "/budgets")
	if b.has(`input[name="cap"]`) {
		b.fatalf("the viewer is offered cap forms")
	}
	b.screenshot("budgets-viewer")
	b.forgePost(budgetsPath+"/org/"+orgID, map[string]string{"cap": "1"}, true)
	if b.status() != http.StatusForbidden {
		b.fatalf("a viewer's edit: %d", b.status())
	}
	b.screenshot("viewer-refused")
	b.visit(orgURL + "/users")
	if b.status() != http.StatusForbidden {
		b.fatalf("the users page for a viewer: %d", b.status())
	}
}
