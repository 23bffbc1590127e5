package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestConsoleFirstRunSetup(t *testing.T) {
	s := mustServer(t)
	b := s.browser(t)
	t.Run("LoginSendsToSetup", func(t *testing.T) {
		status, _, h := b.get("/console/login")
		if status != http.StatusSeeOther || h.Get("Location") != "/console/setup" {
			t.Fatalf("login before any user: %d %s", status, h.Get("Location"))
		}
		status, _, h = b.get("/console/orgs/" + missingUUID)
		if status != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/console/login?next=") {
			t.Fatalf("a page without a session: %d %s", status, h.Get("Location"))
		}
	})
	b.mustPage("/console/setup", 200)
	t.Run("ErrCSRF", func(t *testing.T) {
		status, _, _ := b.post("/console/setup", url.Values{"_csrf": {"forged"}, "name": {"A"}, "email": {"a@example.com"}, "password": {consolePassword}})
		if status != http.StatusForbidden {
			t.Fatalf("setup without the CSRF token: %d", status)
		}
	})
	t.Run("ErrFieldsKeepWhatWasTyped", func(t *testing.T) {
		body, _ := b.mustForm("/console/setup", url.Values{"name": {""}, "email": {"not-an-email"}, "password": {"tiny9"}, "org": {"Acme 株式会社"}}, 400)
		for _, want := range []string{"Enter your name.", "Enter an email address", "at least 12", `value="not-an-email"`, `value="Acme 株式会社"`, `aria-invalid="true"`} {
			if !strings.Contains(body, want) {
				t.Errorf("setup errors lack %q", want)
			}
		}
		if strings.Contains(body, "tiny9") {
			t.Error("the password was echoed back")
		}
	})
	t.Run("OK", func(t *testing.T) {
		_, loc := b.mustForm("/console/setup", url.Values{"name": {"Aiko"}, "email": {"Aiko@Example.com"}, "password": {consolePassword}, "org": {"Acme 株式会社"}}, http.StatusSeeOther)
		if loc != "/console" {
			t.Fatalf("after setup: %s", loc)
		}
		// Signed in, as the operator and the owner of the org it created.
		status, _, h := b.get("/console")
		if status != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/console/orgs/") {
			t.Fatalf("home after setup: %d %s", status, h.Get("Location"))
		}
		body := b.mustPage(h.Get("Location"), 200)
		if !strings.Contains(body, "aiko@example.com") || !strings.Contains(body, "Acme 株式会社") {
			t.Errorf("first page %s", body)
		}
		u, _, err := s.db.UserByEmail(context.Background(), "aiko@example.com")
		if err != nil || !u.Operator {
			t.Errorf("first user %+v %v", u, err)
		}
	})
	t.Run("OnlyOnce", func(t *testing.T) {
		other := s.browser(t)
		if status, _, h := other.get("/console/setup"); status != http.StatusSeeOther || h.Get("Location") != "/console/login" {
			t.Fatalf("setup after the first user: %d %s", status, h.Get("Location"))
		}
	})
}

func TestConsoleSignIn(t *testing.T) {
	s := mustServer(t)
	tn := s.mustTenant(t, "free")
	owner := s.mustUser(t, "owner@acme.example", "owner", tn.org, "")
	t.Run("HomeOpensTheOrg", func(t *testing.T) {
		status, _, h := owner.get("/console")
		if status != http.StatusSeeOther || h.Get("Location") != "/console/orgs/"+tn.org {
			t.Fatalf("home: %d %s", status, h.Get("Location"))
		}
		body := owner.mustPage("/console/orgs/"+tn.org+"/providers", 200)
		if !strings.Contains(body, "owner@acme.example") || !strings.Contains(body, "demo") {
			t.Errorf("providers page %.300s", body)
		}
	})
	t.Run("ErrWrongPassword", func(t *testing.T) {
		b := s.browser(t)
		b.mustPage("/console/login", 200)
		body, _ := b.mustForm("/console/login", url.Values{"email": {"owner@acme.example"}, "password": {"wrong password!!"}}, http.StatusUnauthorized)
		if !strings.Contains(body, "The email or password is wrong") || !strings.Contains(body, `value="owner@acme.example"`) {
			t.Errorf("wrong password page %.400s", body)
		}
		body, _ = b.mustForm("/console/login", url.Values{"email": {"nobody@acme.example"}, "password": {"wrong password!!"}}, http.StatusUnauthorized)
		if !strings.Contains(body, "The email or password is wrong") {
			t.Errorf("unknown email page differs: %.400s", body)
		}
	})
	t.Run("Throttled", func(t *testing.T) {
		b := s.browser(t)
		b.mustPage("/console/login", 200)
		for i := 0; i < 5; i++ {
			b.mustForm("/console/login", url.Values{"email": {"victim@acme.example"}, "password": {"guess number " + string(rune('a'+i))}}, http.StatusUnauthorized)
		}
		status, body, h := b.post("/console/login", url.Values{"email": {"victim@acme.example"}, "password": {"another guess!!"}})
		if status != http.StatusTooManyRequests || h.Get("Retry-After") == "" || !strings.Contains(body, "Too many failed attempts") {
			t.Fatalf("sixth failure: %d %s %.300s", status, h.Get("Retry-After"), body)
		}
	})
	t.Run("SafeNext", func(t *testing.T) {
		b := s.browser(t)
		b.mustPage("/console/login", 200)
		_, loc := b.mustForm("/console/login", url.Values{"email": {"owner@acme.example"}, "password": {consolePassword}, "next": {"//evil.example/x"}}, http.StatusSeeOther)
		if loc != "/console" {
			t.Errorf("next=//evil.example redirects to %q", loc)
		}
	})
	t.Run("ErrLogoutWithoutCSRF", func(t *testing.T) {
		status, _, _ := owner.post("/console/logout", url.Values{"_csrf": {"nope"}})
		if status != http.StatusForbidden {
			t.Fatalf("logout with a forged token: %d", status)
		}
	})
	t.Run("PasswordChangeEndsEverySession", func(t *testing.T) {
		other := s.browser(t)
		other.login("owner@acme.example", consolePassword)
		owner.mustPage("/console/account", 200)
		body, _ := owner.mustForm("/console/account/password", url.Values{"current": {"wrong"}, "new": {"short"}}, 400)
		if !strings.Contains(body, "The current password is wrong.") || !strings.Contains(body, "at least 12") {
			t.Errorf("password form errors %.400s", body)
		}
		_, loc := owner.mustForm("/console/account/password", url.Values{"current": {consolePassword}, "new": {"a brand new passphrase"}}, http.StatusSeeOther)
		if loc != "/console/login" {
			t.Errorf("after the change: %s", loc)
		}
		for name, b := range map[string]*browserClient{"this browser": owner, "another browser": other} {
			if status, _, h := b.get("/console/orgs/" + tn.org); status != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/console/login") {
				t.Errorf("%s still signed in: %d %s", name, status, h.Get("Location"))
			}
		}
		owner.login("owner@acme.example", "a brand new passphrase")
	})
	t.Run("Logout", func(t *testing.T) {
		owner.mustForm("/console/logout", nil, http.StatusSeeOther)
		if status, _, _ := owner.get("/console/account"); status != http.StatusSeeOther {
			t.Errorf("account page after logout: %d", status)
		}
	})
}

func TestConsoleOrgIsolation(t *testing.T) {
	s := mustServer(t)
	a := s.mustTenant(t, "free")
	bOrg := s.mustTenant(t, "free")
	ownerA := s.mustUser(t, "owner@a.example", "owner", a.org, "")
	for _, page := range []string{"", "/budgets", "/keys", "/models", "/reservations", "/alerts", "/invoices", "/providers", "/audit", "/users"} {
		ownerA.mustPage("/console/orgs/"+a.org+page, 200)
		// Another org's page is exactly the page of an org that does not exist.
		other := ownerA.mustPage("/console/orgs/"+bOrg.org+page, 404)
		none := ownerA.mustPage("/console/orgs/"+missingUUID+page, 404)
		if strings.ReplaceAll(other, bOrg.org, "ID") != strings.ReplaceAll(none, missingUUID, "ID") {
			t.Errorf("%s of another org differs from a missing org's:\n%.500s\n%.500s", page, other, none)
		}
	}
	if status, _, _ := ownerA.get("/console/switch?org=" + bOrg.org); status != http.StatusNotFound {
		t.Errorf("switch to another org: %d", status)
	}
	// A user with no membership sees an explanation, not an org.
	lonely := s.mustUser(t, "lonely@a.example", "viewer", a.org, "")
	if err := s.db.RemoveMembership(context.Background(), mustUserID(t, s, "lonely@a.example"), a.org); err != nil {
		t.Fatal(err)
	}
	if body := lonely.mustPage("/console", 200); !strings.Contains(body, "not a member of any organization") {
		t.Errorf("home without orgs %.300s", body)
	}
}

func mustUserID(t *testing.T, s *server, email string) string {
	t.Helper()
	u, _, err := s.db.UserByEmail(context.Background(), email)
	if err != nil {
		t.Fatal(err)
	}
	return u.ID
}
