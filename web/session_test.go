package web

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/labstack/echo/v4"
	"golang.org/x/crypto/argon2"

	"yosan/app"
	"yosan/db"
	"yosan/db/dbtest"
)

const sessTestPassword = "correct horse battery staple"

// sessClock is a settable clock for db.Now.
type sessClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *sessClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *sessClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// sessRig is a bare Echo server with routes that exercise Sessions, on a fresh database.
type sessRig struct {
	t     *testing.T
	d     *db.DB
	clk   *sessClock
	s     *Sessions
	srv   *httptest.Server
	user  app.User
	other app.User
}

func mustSessRig(t *testing.T, useTLS bool) *sessRig {
	t.Helper()
	d := dbtest.New(t)
	clk := &sessClock{t: time.Date(2026, 11, 15, 12, 0, 0, 0, time.UTC)}
	d.Now = clk.Now
	r := &sessRig{t: t, d: d, clk: clk, s: &Sessions{DB: d}}
	ctx := context.Background()
	var err error
	if r.user, err = d.CreateUser(ctx, "ann@example.com", "Ann", "h", false); err != nil {
		t.Fatal(err)
	}
	if r.other, err = d.CreateUser(ctx, "bob@example.com", "Bob", "h", false); err != nil {
		t.Fatal(err)
	}
	e := sessEcho(r.s)
	if useTLS {
		r.srv = httptest.NewTLSServer(e)
	} else {
		r.srv = httptest.NewServer(e)
	}
	t.Cleanup(r.srv.Close)
	return r
}

// sessEcho routes a few handlers to Sessions' methods; errors answer with their app code.
func sessEcho(s *Sessions) *echo.Echo {
	e := echo.New()
	fail := func(c echo.Context, err error) error {
		status, _, _ := statusOf(app.ErrorCode(err))
		return c.String(status, app.ErrorCode(err))
	}
	e.POST("/login", func(c echo.Context) error {
		sess, err := s.Issue(c, c.QueryParam("user"))
		if err != nil {
			return fail(c, err)
		}
		return c.String(http.StatusOK, sess.ID)
	})
	e.GET("/me", func(c echo.Context) error {
		p, sess, err := s.Authenticate(c)
		if err != nil {
			return fail(c, err)
		}
		return c.String(http.StatusOK, p.User.Email+" "+sess.ID+" "+s.CSRFToken(sess))
	})
	e.POST("/change", func(c echo.Context) error {
		_, sess, err := s.Authenticate(c)
		if err != nil {
			return fail(c, err)
		}
		if !s.CheckCSRF(sess, c.FormValue("_csrf")) {
			return c.String(http.StatusForbidden, "csrf")
		}
		return c.String(http.StatusOK, "changed")
	})
	e.POST("/logout", func(c echo.Context) error {
		if err := s.End(c); err != nil {
			return fail(c, err)
		}
		return c.NoContent(http.StatusNoContent)
	})
	e.GET("/console/login", func(c echo.Context) error {
		return c.String(http.StatusOK, PreAuthCSRF(c)+" "+PreAuthCSRF(c))
	})
	e.POST("/console/login", func(c echo.Context) error {
		if !CheckPreAuthCSRF(c, c.FormValue("_csrf")) {
			return c.String(http.StatusForbidden, "csrf")
		}
		return c.String(http.StatusOK, "ok")
	})
	return e
}

// do sends a request with the given cookies and returns the answer and its body.
func (r *sessRig) do(method, path string, form url.Values, header http.Header, cookies ...*http.Cookie) (*http.Response, string) {
	r.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, r.srv.URL+path, body)
	if err != nil {
		r.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		req.Header[k] = v
	}
	for _, c := range cookies {
		req.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value})
	}
	resp, err := r.srv.Client().Do(req)
	if err != nil {
		r.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func cookieNamed(resp *http.Response, name string) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// login issues a session for user and returns its cookie and id.
func (r *sessRig) login(user app.User) (*http.Cookie, string) {
	r.t.Helper()
	resp, body := r.do(http.MethodPost, "/login?user="+user.ID, nil, nil)
	ck := cookieNamed(resp, SessionCookie)
	if resp.StatusCode != http.StatusOK || ck == nil {
		r.t.Fatalf("login: %d %s, cookie %v", resp.StatusCode, body, ck)
	}
	return ck, body
}

// me authenticates with cookie and returns the status, body and the refreshed cookie, if any.
func (r *sessRig) me(ck *http.Cookie) (int, string, *http.Cookie) {
	r.t.Helper()
	resp, body := r.do(http.MethodGet, "/me", nil, nil, ck)
	return resp.StatusCode, body, cookieNamed(resp, SessionCookie)
}

func (r *sessRig) mustMe(ck *http.Cookie, user app.User) *http.Cookie {
	r.t.Helper()
	status, body, refreshed := r.me(ck)
	if status != http.StatusOK || !strings.HasPrefix(body, user.Email+" ") {
		r.t.Fatalf("/me: %d %s, want %s", status, body, user.Email)
	}
	return refreshed
}

func (r *sessRig) mustUnauthorized(ck *http.Cookie) {
	r.t.Helper()
	if status, body, _ := r.me(ck); status != http.StatusUnauthorized || body != app.EUNAUTHORIZED {
		r.t.Fatalf("/me: %d %s, want 401", status, body)
	}
}

func (r *sessRig) key() []byte {
	r.t.Helper()
	k, err := r.d.SigningKey(context.Background())
	if err != nil {
		r.t.Fatal(err)
	}
	return k
}

// claimsOf decodes a session token's claims without checking them.
func claimsOf(t *testing.T, tok string) sessionClaims {
	t.Helper()
	var cl sessionClaims
	if _, _, err := jwt.NewParser().ParseUnverified(tok, &cl); err != nil {
		t.Fatal(err)
	}
	return cl
}

func TestSessionIssueAuthenticate(t *testing.T) {
	r := mustSessRig(t, false)
	ck, sid := r.login(r.user)
	if !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || ck.Path != "/" || ck.Secure || ck.MaxAge != int(DefaultSessionTTL/time.Second) {
		t.Errorf("cookie %+v: want HttpOnly, SameSite=Lax, Path=/, not Secure over HTTP, MaxAge 12h", ck)
	}
	cl := claimsOf(t, ck.Value)
	if cl.SessionID != sid || cl.Subject != r.user.ID || cl.Issuer != "yosan" || !cl.IssuedAt.Time.Equal(r.clk.Now()) ||
		!cl.ExpiresAt.Time.Equal(r.clk.Now().Add(DefaultTokenTTL)) {
		t.Errorf("claims %+v", cl)
	}
	if refreshed := r.mustMe(ck, r.user); refreshed != nil {
		t.Errorf("fresh token replaced: %+v", refreshed)
	}
	t.Run("NoCookie", func(t *testing.T) { r.mustUnauthorized(&http.Cookie{Name: "other", Value: "x"}) })
	t.Run("EmptyCookie", func(t *testing.T) { r.mustUnauthorized(&http.Cookie{Name: SessionCookie, Value: ""}) })
	t.Run("Garbage", func(t *testing.T) { r.mustUnauthorized(&http.Cookie{Name: SessionCookie, Value: "not.a.jwt"}) })
	t.Run("OtherProcess", func(t *testing.T) {
		// A second gateway process (its own pool and Sessions) accepts the session.
		d2, err := db.Open(context.Background(), r.d.Pool.Config().ConnString())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(d2.Close)
		d2.Now = r.clk.Now
		srv := httptest.NewServer(sessEcho(&Sessions{DB: d2}))
		t.Cleanup(srv.Close)
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/me", nil)
		req.AddCookie(&http.Cookie{Name: SessionCookie, Value: ck.Value})
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(body), r.user.Email) {
			t.Errorf("other process: %d %s", resp.StatusCode, body)
		}
		// Same key, so the same CSRF token on both processes.
		_, ownBody, _ := r.me(ck)
		if strings.Fields(ownBody)[2] != strings.Fields(string(body))[2] {
			t.Errorf("CSRF tokens differ between processes: %s / %s", ownBody, body)
		}
	})
	t.Run("UnknownUser", func(t *testing.T) {
		resp, body := r.do(http.MethodPost, "/login?user=00000000-0000-0000-0000-000000000009", nil, nil)
		if resp.StatusCode != http.StatusNotFound || cookieNamed(resp, SessionCookie) != nil {
			t.Errorf("login of an unknown user: %d %s", resp.StatusCode, body)
		}
	})
}

func TestSessionForgedTokens(t *testing.T) {
	r := mustSessRig(t, false)
	ck, sid := r.login(r.user)
	key := r.key()
	now := r.clk.Now()
	claims := func(mod func(*sessionClaims)) sessionClaims {
		cl := sessionClaims{SessionID: sid, RegisteredClaims: jwt.RegisteredClaims{Issuer: "yosan", Subject: r.user.ID,
			IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(time.Minute))}}
		if mod != nil {
			mod(&cl)
		}
		return cl
	}
	sign := func(m jwt.SigningMethod, k any, cl sessionClaims) string {
		t.Helper()
		tok, err := jwt.NewWithClaims(m, cl).SignedString(k)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	wrongKey := make([]byte, 32)
	_, _ = rand.Read(wrongKey)
	parts := strings.Split(ck.Value, ".")
	otherPayload := base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf(
		`{"sid":%q,"iss":"yosan","sub":%q,"exp":%d,"iat":%d}`, sid, r.other.ID, now.Add(time.Minute).Unix(), now.Unix())))
	sigBytes, _ := base64.RawURLEncoding.DecodeString(parts[2])
	sigBytes[0] ^= 1

	// The harness forges correctly: with the real key and algorithm, the token is accepted.
	r.mustMe(&http.Cookie{Name: SessionCookie, Value: sign(jwt.SigningMethodHS256, key, claims(nil))}, r.user)

	tests := []struct {
		name string
		tok  string
	}{
		{"OtherUsersPayload", parts[0] + "." + otherPayload + "." + parts[2]},
		{"FlippedSignature", parts[0] + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(sigBytes)},
		{"NoSignature", parts[0] + "." + parts[1] + "."},
		{"AlgNone", sign(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claims(nil))},
		{"WrongKey", sign(jwt.SigningMethodHS256, wrongKey, claims(nil))},
		{"HS512RealKey", sign(jwt.SigningMethodHS512, key, claims(nil))},
		{"HS384RealKey", sign(jwt.SigningMethodHS384, key, claims(nil))},
		{"WrongIssuer", sign(jwt.SigningMethodHS256, key, claims(func(c *sessionClaims) { c.Issuer = "evil" }))},
		{"NoExpiry", sign(jwt.SigningMethodHS256, key, claims(func(c *sessionClaims) { c.ExpiresAt = nil }))},
		{"NoIssuedAt", sign(jwt.SigningMethodHS256, key, claims(func(c *sessionClaims) { c.IssuedAt = nil }))},
		{"NoSession", sign(jwt.SigningMethodHS256, key, claims(func(c *sessionClaims) { c.SessionID = "" }))},
		// Signed with the real key, but the session is not the subject's: refused.
		{"SessionOfOtherUser", sign(jwt.SigningMethodHS256, key, claims(func(c *sessionClaims) { c.Subject = r.other.ID }))},
		{"ExpiredWrongIssuer", sign(jwt.SigningMethodHS256, key, claims(func(c *sessionClaims) {
			c.Issuer, c.IssuedAt, c.ExpiresAt = "evil", jwt.NewNumericDate(now.Add(-time.Hour)), jwt.NewNumericDate(now.Add(-time.Minute))
		}))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body, refreshed := r.me(&http.Cookie{Name: SessionCookie, Value: tt.tok})
			if status != http.StatusUnauthorized || body != app.EUNAUTHORIZED {
				t.Fatalf("%d %s, want 401", status, body)
			}
			if refreshed != nil && refreshed.Value != "" {
				t.Errorf("a forged token got a fresh one: %v", refreshed)
			}
		})
	}
	// None of it hurt the real session.
	r.mustMe(ck, r.user)
}

func TestSessionRefresh(t *testing.T) {
	r := mustSessRig(t, false)
	r.s.TTL = time.Hour
	sessionEnd := r.clk.Now().Add(time.Hour)
	ck, sid := r.login(r.user)
	if ck.MaxAge != 3600 {
		t.Errorf("MaxAge %d, want the session TTL", ck.MaxAge)
	}
	t.Run("YoungTokenKept", func(t *testing.T) {
		r.clk.Add(time.Minute)
		if refreshed := r.mustMe(ck, r.user); refreshed != nil {
			t.Errorf("refreshed after a minute")
		}
	})
	t.Run("HalfLifeRefreshed", func(t *testing.T) {
		r.clk.Add(DefaultTokenTTL / 2)
		refreshed := r.mustMe(ck, r.user)
		if refreshed == nil {
			t.Fatal("not refreshed past half its life")
		}
		if cl := claimsOf(t, refreshed.Value); cl.SessionID != sid || !cl.IssuedAt.Time.Equal(r.clk.Now()) {
			t.Errorf("refreshed claims %+v", cl)
		}
		ck = refreshed
	})
	t.Run("ExpiredTokenActiveSession", func(t *testing.T) {
		r.clk.Add(DefaultTokenTTL + time.Second)
		refreshed := r.mustMe(ck, r.user)
		if refreshed == nil {
			t.Fatal("an expired token of a live session was not refreshed")
		}
		cl := claimsOf(t, refreshed.Value)
		if cl.SessionID != sid || !cl.ExpiresAt.Time.Equal(r.clk.Now().Add(DefaultTokenTTL)) {
			t.Errorf("refreshed claims %+v", cl)
		}
		if left := int(sessionEnd.Sub(r.clk.Now()) / time.Second); refreshed.MaxAge != left {
			t.Errorf("refreshed MaxAge %d: want the session's remaining life, %d", refreshed.MaxAge, left)
		}
		if again := r.mustMe(refreshed, r.user); again != nil {
			t.Errorf("the fresh token was replaced again")
		}
		ck = refreshed
	})
	t.Run("NeverPastAbsoluteExpiry", func(t *testing.T) {
		// Keep refreshing every 10 minutes: the session still ends an hour after sign-in.
		for r.clk.Now().Before(sessionEnd.Add(-10 * time.Minute)) {
			r.clk.Add(10 * time.Minute)
			if refreshed := r.mustMe(ck, r.user); refreshed != nil {
				if cl := claimsOf(t, refreshed.Value); cl.ExpiresAt.Time.After(sessionEnd) {
					t.Fatalf("token outlives the session: %v", cl.ExpiresAt)
				}
				ck = refreshed
			}
		}
		r.clk.Add(10 * time.Minute) // past the session's end
		status, _, cleared := r.me(ck)
		if status != http.StatusUnauthorized || cleared == nil || cleared.MaxAge >= 0 {
			t.Errorf("after the absolute TTL: %d, cookie %+v; want 401 and a cleared cookie", status, cleared)
		}
	})
}

func TestSessionRevocation(t *testing.T) {
	ctx := context.Background()
	r := mustSessRig(t, false)
	t.Run("RevokedAtOnce", func(t *testing.T) {
		ck, sid := r.login(r.user)
		r.mustMe(ck, r.user)
		if err := r.d.RevokeSession(ctx, sid); err != nil {
			t.Fatal(err)
		}
		r.mustUnauthorized(ck) // the JWT is still valid for 15 minutes; the row decides
	})
	t.Run("PasswordChange", func(t *testing.T) {
		ck1, _ := r.login(r.user)
		ck2, _ := r.login(r.user)
		ckOther, _ := r.login(r.other)
		if err := r.d.SetPassword(ctx, r.user.ID, "new-hash"); err != nil {
			t.Fatal(err)
		}
		r.mustUnauthorized(ck1)
		r.mustUnauthorized(ck2)
		r.mustMe(ckOther, r.other)
	})
	t.Run("Logout", func(t *testing.T) {
		ck, _ := r.login(r.user)
		resp, _ := r.do(http.MethodPost, "/logout", nil, nil, ck)
		cleared := cookieNamed(resp, SessionCookie)
		if resp.StatusCode != http.StatusNoContent || cleared == nil || cleared.MaxAge >= 0 || cleared.Value != "" {
			t.Fatalf("logout: %d, cookie %+v", resp.StatusCode, cleared)
		}
		r.mustUnauthorized(ck) // a copy of the cookie kept elsewhere is dead too
	})
	t.Run("LogoutWithExpiredToken", func(t *testing.T) {
		ck, sid := r.login(r.user)
		r.clk.Add(DefaultTokenTTL + time.Minute)
		if resp, _ := r.do(http.MethodPost, "/logout", nil, nil, ck); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("logout: %d", resp.StatusCode)
		}
		if _, err := r.d.ActiveSession(ctx, sid); app.ErrorCode(err) != app.EUNAUTHORIZED {
			t.Errorf("session after logout with an expired token: %v", err)
		}
	})
	t.Run("LogoutWithoutSession", func(t *testing.T) {
		if resp, _ := r.do(http.MethodPost, "/logout", nil, nil); resp.StatusCode != http.StatusNoContent {
			t.Errorf("logout without a cookie: %d", resp.StatusCode)
		}
	})
	t.Run("NewLoginEndsPrevious", func(t *testing.T) {
		ck, sid := r.login(r.user)
		resp, _ := r.do(http.MethodPost, "/login?user="+r.other.ID, nil, nil, ck)
		if resp.StatusCode != http.StatusOK {
			t.Fatal(resp.StatusCode)
		}
		if _, err := r.d.ActiveSession(ctx, sid); app.ErrorCode(err) != app.EUNAUTHORIZED {
			t.Errorf("the browser's previous session lives on: %v", err)
		}
	})
}

func TestSessionSecureCookie(t *testing.T) {
	t.Run("TLS", func(t *testing.T) {
		r := mustSessRig(t, true)
		ck, _ := r.login(r.user)
		if !ck.Secure {
			t.Errorf("cookie over TLS is not Secure: %+v", ck)
		}
		resp, _ := r.do(http.MethodGet, "/console/login", nil, nil)
		if c := cookieNamed(resp, PreAuthCookie); c == nil || !c.Secure {
			t.Errorf("pre-auth cookie over TLS: %+v", c)
		}
	})
	t.Run("PlainHTTP", func(t *testing.T) {
		r := mustSessRig(t, false)
		if ck, _ := r.login(r.user); ck.Secure {
			t.Errorf("cookie over plain HTTP is Secure: %+v", ck)
		}
	})
	t.Run("BehindTLSProxy", func(t *testing.T) {
		r := mustSessRig(t, false)
		resp, _ := r.do(http.MethodPost, "/login?user="+r.user.ID, nil, http.Header{"X-Forwarded-Proto": {"https"}})
		if ck := cookieNamed(resp, SessionCookie); ck == nil || !ck.Secure {
			t.Errorf("cookie behind a TLS proxy: %+v", ck)
		}
	})
}

func TestSessionCSRF(t *testing.T) {
	r := mustSessRig(t, false)
	ck1, sid1 := r.login(r.user)
	ck2, sid2 := r.login(r.other)
	tok1 := r.s.CSRFToken(db.Session{ID: sid1})
	tok2 := r.s.CSRFToken(db.Session{ID: sid2})
	if tok1 == "" || tok1 == tok2 || !regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`).MatchString(tok1) {
		t.Fatalf("tokens %q, %q", tok1, tok2)
	}
	tests := []struct {
		name string
		ck   *http.Cookie
		tok  string
		want int
	}{
		{"OwnToken", ck1, tok1, http.StatusOK},
		{"OtherSessionsToken", ck1, tok2, http.StatusForbidden},
		{"Empty", ck1, "", http.StatusForbidden},
		{"Truncated", ck1, tok1[:42], http.StatusForbidden},
		{"OtherOwnToken", ck2, tok2, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := r.do(http.MethodPost, "/change", url.Values{"_csrf": {tt.tok}}, nil, tt.ck)
			if resp.StatusCode != tt.want {
				t.Errorf("%d %s, want %d", resp.StatusCode, body, tt.want)
			}
		})
	}
	if r.s.CheckCSRF(db.Session{}, r.s.CSRFToken(db.Session{})) {
		t.Error("an empty session checks")
	}
}

func TestPreAuthCSRF(t *testing.T) {
	r := mustSessRig(t, false)
	resp, body := r.do(http.MethodGet, "/console/login", nil, nil)
	ck := cookieNamed(resp, PreAuthCookie)
	toks := strings.Fields(body)
	if ck == nil || len(toks) != 2 || toks[0] != ck.Value || toks[1] != toks[0] {
		t.Fatalf("form token %q, cookie %+v: want the same token twice and in the cookie", body, ck)
	}
	if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/console" {
		t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/console", ck)
	}
	t.Run("Reused", func(t *testing.T) {
		resp, body := r.do(http.MethodGet, "/console/login", nil, nil, ck)
		if strings.Fields(body)[0] != ck.Value || cookieNamed(resp, PreAuthCookie) != nil {
			t.Errorf("second visit: %q, new cookie %v", body, cookieNamed(resp, PreAuthCookie))
		}
	})
	tests := []struct {
		name    string
		cookies []*http.Cookie
		tok     string
		want    int
	}{
		{"DoubleSubmit", []*http.Cookie{ck}, ck.Value, http.StatusOK},
		{"NoCookie", nil, ck.Value, http.StatusForbidden},
		{"OtherToken", []*http.Cookie{ck}, strings.Repeat("A", 43), http.StatusForbidden},
		{"Empty", []*http.Cookie{ck}, "", http.StatusForbidden},
		{"BothEmpty", []*http.Cookie{{Name: PreAuthCookie, Value: ""}}, "", http.StatusForbidden},
		{"BothWeak", []*http.Cookie{{Name: PreAuthCookie, Value: "x"}}, "x", http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := r.do(http.MethodPost, "/console/login", url.Values{"_csrf": {tt.tok}}, nil, tt.cookies...)
			if resp.StatusCode != tt.want {
				t.Errorf("%d %s, want %d", resp.StatusCode, body, tt.want)
			}
		})
	}
}

func TestThrottled(t *testing.T) {
	ctx := context.Background()
	r := mustSessRig(t, false)
	fail := func(email, ip string) {
		t.Helper()
		if err := r.d.RecordLoginAttempt(ctx, email, ip, false); err != nil {
			t.Fatal(err)
		}
	}
	wait := func(email, ip string) time.Duration {
		t.Helper()
		w, err := r.s.Throttled(ctx, email, ip)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	t.Run("ByEmail", func(t *testing.T) {
		first := r.clk.Now()
		for i := range LoginMaxEmailFailures {
			if w := wait("ann@example.com", "198.51.100.1"); w != 0 {
				t.Fatalf("throttled after %d failures: %v", i, w)
			}
			fail("ann@example.com", fmt.Sprintf("198.51.100.%d", i+1))
			r.clk.Add(time.Minute)
		}
		// Five failures at 12:00..12:04, now 12:05: the oldest leaves the window at 12:15.
		if w := wait("ANN@example.com", "203.0.113.9"); w != 10*time.Minute {
			t.Fatalf("retry after %v, want 10m", w)
		}
		if w := wait("bob@example.com", "198.51.100.1"); w != 0 {
			t.Errorf("another email is throttled: %v", w)
		}
		r.clk.Add(10*time.Minute - time.Second)
		if w := wait("ann@example.com", "203.0.113.9"); w != time.Second {
			t.Errorf("a second before: retry after %v", w)
		}
		r.clk.Add(time.Second)
		if w := wait("ann@example.com", "203.0.113.9"); w != 0 {
			t.Errorf("after the oldest failure left the window: %v", w)
		}
		if !r.clk.Now().Equal(first.Add(LoginWindow)) {
			t.Fatalf("clock %v", r.clk.Now())
		}
	})
	t.Run("SuccessResets", func(t *testing.T) {
		for range LoginMaxEmailFailures {
			fail("carol@example.com", "192.0.2.77")
		}
		if w := wait("carol@example.com", "192.0.2.1"); w == 0 {
			t.Fatal("not throttled")
		}
		if err := r.d.RecordLoginAttempt(ctx, "carol@example.com", "192.0.2.78", true); err != nil {
			t.Fatal(err)
		}
		if w := wait("carol@example.com", "192.0.2.1"); w != 0 {
			t.Errorf("throttled after a success: %v", w)
		}
	})
	t.Run("ByIP", func(t *testing.T) {
		for i := range LoginMaxIPFailures {
			fail(fmt.Sprintf("user%d@example.com", i), "192.0.2.200")
			r.clk.Add(10 * time.Second)
		}
		// 20 failures, 10 s apart: the first leaves the window 15 min after it happened.
		if w := wait("new@example.com", "192.0.2.200"); w != LoginWindow-200*time.Second {
			t.Errorf("retry after %v, want %v", w, LoginWindow-200*time.Second)
		}
		if w := wait("new@example.com", "192.0.2.201"); w != 0 {
			t.Errorf("another address is throttled: %v", w)
		}
	})
}

func TestPassword(t *testing.T) {
	phc, err := HashPassword(sessTestPassword)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^\$argon2id\$v=19\$m=19456,t=2,p=1\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$`).MatchString(phc) {
		t.Fatalf("hash %q is not a PHC argon2id string with a 16-byte salt and a 32-byte key", phc)
	}
	if again, _ := HashPassword(sessTestPassword); again == phc {
		t.Error("two hashes of one password are equal: the salt is not random")
	}
	check := func(phc, pw string) bool {
		t.Helper()
		ok, err := CheckPassword(phc, pw)
		if err != nil {
			t.Fatalf("CheckPassword: %v", err)
		}
		return ok
	}
	if !check(phc, sessTestPassword) {
		t.Error("the right password is refused")
	}
	for _, wrong := range []string{"", "correct horse battery stapl", sessTestPassword + " ", strings.ToUpper(sessTestPassword)} {
		if check(phc, wrong) {
			t.Errorf("wrong password %q accepted", wrong)
		}
	}
	t.Run("OtherParameters", func(t *testing.T) {
		// Hashes made with other parameters (older or stronger settings) still check.
		salt := []byte("0123456789abcdef")
		key := argon2.IDKey([]byte(sessTestPassword), salt, 1, 8*1024, 2, 32)
		old := fmt.Sprintf("$argon2id$v=19$m=8192,t=1,p=2$%s$%s", base64.RawStdEncoding.EncodeToString(salt),
			base64.RawStdEncoding.EncodeToString(key))
		if !check(old, sessTestPassword) || check(old, "nope") {
			t.Error("a hash with other parameters does not check")
		}
	})
	t.Run("DummyHash", func(t *testing.T) {
		h, err := parsePHC(dummyHash)
		if err != nil || h.memory != argonMemory || h.time != argonTime || h.threads != argonThreads || len(h.key) != argonKeyLen {
			t.Errorf("dummyHash does not use the current parameters: %+v, %v", h, err)
		}
		if check(dummyHash, "") || check(dummyHash, sessTestPassword) {
			t.Error("dummyHash matched a password")
		}
	})
	t.Run("Malformed", func(t *testing.T) {
		salt, key := strings.Split(phc, "$")[4], strings.Split(phc, "$")[5]
		for _, bad := range []string{
			"",
			"plaintext",
			"$2a$10$abcdefghijklmnopqrstuu", // bcrypt
			"$argon2i$v=19$m=19456,t=2,p=1$" + salt + "$" + key,
			"$argon2id$v=16$m=19456,t=2,p=1$" + salt + "$" + key,
			"$argon2id$v=19$t=2,m=19456,p=1$" + salt + "$" + key,
			"$argon2id$v=19$m=19456,t=2$" + salt + "$" + key,
			"$argon2id$v=19$m=19456,t=0,p=1$" + salt + "$" + key,
			"$argon2id$v=19$m=19456,t=2,p=0$" + salt + "$" + key,
			"$argon2id$v=19$m=+19456,t=2,p=1$" + salt + "$" + key,
			"$argon2id$v=19$m=4194304,t=2,p=1$" + salt + "$" + key, // 4 GiB: refused, not allocated
			"$argon2id$v=19$m=19456,t=1000,p=1$" + salt + "$" + key,
			"$argon2id$v=19$m=19456,t=2,p=1$" + salt + "=$" + key,
			"$argon2id$v=19$m=19456,t=2,p=1$" + salt + "$" + key[:10],
			"$argon2id$v=19$m=19456,t=2,p=1$$" + key,
			"$argon2id$v=19$m=19456,t=2,p=1$" + salt + "$" + key + "$",
		} {
			if ok, err := CheckPassword(bad, sessTestPassword); err == nil || ok {
				t.Errorf("CheckPassword(%q) = %v, %v; want an error", bad, ok, err)
			}
		}
	})
}
