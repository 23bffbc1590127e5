package web_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"yosan/app"
	"yosan/web"
)

const consolePassword = "correct horse battery staple"

// browserClient is a console user's browser: a cookie jar, no redirects followed (tests look
// at them), and the CSRF token of the last page that had a form.
type browserClient struct {
	t    *testing.T
	base string
	c    *http.Client
	csrf string
}

var csrfRE = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

func (s *server) browser(t *testing.T) *browserClient {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &browserClient{t: t, base: s.url, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

// get fetches a page and remembers its CSRF token.
func (b *browserClient) get(path string) (int, string, http.Header) {
	b.t.Helper()
	resp, err := b.c.Get(b.base + path)
	if err != nil {
		b.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if m := csrfRE.FindSubmatch(body); m != nil {
		b.csrf = string(m[1])
	}
	return resp.StatusCode, string(body), resp.Header
}

// post submits a form with the remembered CSRF token (unless the form sets _csrf itself).
func (b *browserClient) post(path string, form url.Values) (int, string, http.Header) {
	b.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	if _, set := form["_csrf"]; !set {
		form.Set("_csrf", b.csrf)
	}
	resp, err := b.c.PostForm(b.base+path, form)
	if err != nil {
		b.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if m := csrfRE.FindSubmatch(body); m != nil {
		b.csrf = string(m[1])
	}
	return resp.StatusCode, string(body), resp.Header
}

// mustUser creates a console user (operator when role is "operator", else a member of org with
// role, team_admins of team) and returns a browser signed in as them.
func (s *server) mustUser(t *testing.T, email, role, org, team string) *browserClient {
	t.Helper()
	ctx := context.Background()
	hash, err := web.HashPassword(consolePassword)
	if err != nil {
		t.Fatal(err)
	}
	u, err := s.db.CreateUser(ctx, email, strings.Split(email, "@")[0], hash, role == "operator")
	if err != nil {
		t.Fatal(err)
	}
	if role != "operator" {
		m := app.Membership{UserID: u.ID, OrgID: org, Role: app.Role(role)}
		if role == string(app.RoleTeamAdmin) {
			m.TeamID = team
		}
		if err := s.db.SetMembership(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	b := s.browser(t)
	b.login(email, consolePassword)
	return b
}

// login signs in through the form and fails unless it succeeds.
func (b *browserClient) login(email, password string) {
	b.t.Helper()
	if status, body, _ := b.get("/console/login"); status != 200 {
		b.t.Fatalf("login page: %d %s", status, body)
	}
	status, body, h := b.post("/console/login", url.Values{"email": {email}, "password": {password}, "next": {"/console"}})
	if status != http.StatusSeeOther {
		b.t.Fatalf("login as %s: %d %s", email, status, body)
	}
	if loc := h.Get("Location"); loc != "/console" {
		b.t.Fatalf("login redirects to %q", loc)
	}
	// Take a CSRF token from a signed-in page.
	if status, _, _ := b.get("/console/account"); status != 200 {
		b.t.Fatalf("account page after login: %d", status)
	}
}

// mustPage fetches path and fails unless the status is want; it returns the body.
func (b *browserClient) mustPage(path string, want int) string {
	b.t.Helper()
	status, body, _ := b.get(path)
	if status != want {
		b.t.Fatalf("GET %s: %d, want %d\n%.600s", path, status, want, body)
	}
	return body
}

// mustForm posts a form and fails unless the status is want; it returns the body and the
// redirect target.
func (b *browserClient) mustForm(path string, form url.Values, want int) (string, string) {
	b.t.Helper()
	status, body, h := b.post(path, form)
	if status != want {
		b.t.Fatalf("POST %s %v: %d, want %d\n%.600s", path, form, status, want, body)
	}
	return body, h.Get("Location")
}

// TestInvoicesNextMonthOnThe31st: on January 31 the invoices page offers February's rate, not
// March's (a month added to the 31st skips February).
func TestInvoicesNextMonthOnThe31st(t *testing.T) {
	s := mustServer(t)
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	s.db.Now = func() time.Time { return time.Date(2027, 1, 31, 12, 0, 0, 0, tokyo) }
	tn := s.mustTenant(t, "free")
	owner := s.mustUser(t, "owner@acme.example", "owner", tn.org, "")
	body := owner.mustPage("/console/orgs/"+tn.org+"/invoices", 200)
	if !strings.Contains(body, "FX rate of 2027-02") || strings.Contains(body, "2027-03") {
		t.Errorf("invoices page on 2027-01-31 does not offer February's rate")
	}
}
