package web

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/labstack/echo/v4"

	"yosan/app"
	"yosan/db"
)

// Console sessions. The browser holds a short-lived JWT (HS256, signed with the key every
// gateway process shares through the settings table) naming a session row; every request
// checks the row too, so revoking a session (sign-out, password change) takes effect at once
// on every process. The JWT is refreshed while the row lives, never past its absolute expiry.

// Cookie names and the JWT issuer.
const (
	SessionCookie = "yosan_session"
	PreAuthCookie = "yosan_csrf"
	tokenIssuer   = "yosan"
)

// Session defaults.
const (
	DefaultSessionTTL = 12 * time.Hour
	DefaultTokenTTL   = 15 * time.Minute
)

// Sign-in throttling: after LoginMaxEmailFailures failed attempts for one email (since its last
// success) or LoginMaxIPFailures from one address within LoginWindow, sign-in waits.
const (
	LoginWindow           = 15 * time.Minute
	LoginMaxEmailFailures = 5
	LoginMaxIPFailures    = 20
)

// preAuthKey is where PreAuthCSRF keeps the request's token in echo's context.
const preAuthKey = "yosan.preauth_csrf"

// Sessions issues, checks and ends console sessions. Use it by pointer; the zero durations
// mean the defaults.
type Sessions struct {
	DB *db.DB
	// TTL is the absolute life of a session (DefaultSessionTTL when 0): no refresh extends it.
	TTL time.Duration
	// TokenTTL is the life of one JWT (DefaultTokenTTL when 0).
	TokenTTL time.Duration

	mu  sync.Mutex
	key []byte // the signing key, loaded once
}

// sessionClaims are the JWT's claims: sub is the user id, sid the session id.
type sessionClaims struct {
	SessionID string `json:"sid"`
	jwt.RegisteredClaims
}

func (s *Sessions) ttl() time.Duration {
	if s.TTL > 0 {
		return s.TTL
	}
	return DefaultSessionTTL
}

func (s *Sessions) tokenTTL() time.Duration {
	if s.TokenTTL > 0 {
		return s.TokenTTL
	}
	return DefaultTokenTTL
}

// signingKey returns the shared signing key, reading (or creating) it on first use.
func (s *Sessions) signingKey(ctx context.Context) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.key != nil {
		return s.key, nil
	}
	k, err := s.DB.SigningKey(ctx)
	if err != nil {
		return nil, err
	}
	s.key = k
	return k, nil
}

func errSignIn() error {
	return app.Errorf(app.EUNAUTHORIZED, "sign in to continue")
}

func errBadSession() error {
	return app.Errorf(app.EUNAUTHORIZED, "your session is not valid; sign in again")
}

// Issue starts a session for user userID and sets its cookie. A session the browser already
// had is ended first (no session fixation, no orphaned sessions). ENOTFOUND for an unknown user.
func (s *Sessions) Issue(c echo.Context, userID string) (db.Session, error) {
	ctx := c.Request().Context()
	key, err := s.signingKey(ctx)
	if err != nil {
		return db.Session{}, err
	}
	if ck, err := c.Cookie(SessionCookie); err == nil {
		if cl, _, err := s.parse(key, ck.Value); err == nil {
			if err := s.DB.RevokeSession(ctx, cl.SessionID); err != nil {
				return db.Session{}, err
			}
		}
	}
	sess, err := s.DB.CreateSession(ctx, userID, s.ttl(), c.Request().UserAgent(), c.RealIP())
	if err != nil {
		return db.Session{}, err
	}
	if err := s.setToken(c, key, sess); err != nil {
		return db.Session{}, err
	}
	return sess, nil
}

// Authenticate returns the signed-in actor and its session. It verifies the cookie's JWT
// (HS256 only, issuer, expiry on the database clock), then always checks the session row, so
// a revoked or expired session is refused at once even with a valid token. A token that
// expired, or is past half its life, is replaced while the session lives. EUNAUTHORIZED when
// there is no valid session; EUNAVAILABLE when the database is unreachable.
func (s *Sessions) Authenticate(c echo.Context) (app.Actor, db.Session, error) {
	ctx := c.Request().Context()
	ck, err := c.Cookie(SessionCookie)
	if err != nil || ck.Value == "" {
		return app.Actor{}, db.Session{}, errSignIn()
	}
	key, err := s.signingKey(ctx)
	if err != nil {
		return app.Actor{}, db.Session{}, err
	}
	cl, expired, err := s.parse(key, ck.Value)
	if err != nil {
		s.clearCookie(c)
		return app.Actor{}, db.Session{}, errBadSession()
	}
	sess, err := s.DB.ActiveSession(ctx, cl.SessionID)
	if err != nil {
		if app.ErrorCode(err) == app.EUNAUTHORIZED {
			s.clearCookie(c)
		}
		return app.Actor{}, db.Session{}, err
	}
	if sess.UserID != cl.Subject {
		s.clearCookie(c)
		return app.Actor{}, db.Session{}, errBadSession()
	}
	actor, err := s.DB.Actor(ctx, sess.UserID)
	if err != nil {
		if app.ErrorCode(err) == app.ENOTFOUND {
			s.clearCookie(c)
			return app.Actor{}, db.Session{}, errBadSession()
		}
		return app.Actor{}, db.Session{}, err
	}
	now := s.DB.Now()
	if expired || now.Sub(cl.IssuedAt.Time) >= s.tokenTTL()/2 {
		if err := s.setToken(c, key, sess); err != nil {
			return app.Actor{}, db.Session{}, err
		}
	}
	if now.Sub(sess.LastSeenAt) >= time.Minute {
		if err := s.DB.TouchSession(ctx, sess.ID); err != nil {
			return app.Actor{}, db.Session{}, err
		}
	}
	return actor, sess, nil
}

// End revokes the browser's session, if it has one, and clears the cookie. An expired token
// still names its session, so signing out always works.
func (s *Sessions) End(c echo.Context) error {
	s.clearCookie(c)
	ck, err := c.Cookie(SessionCookie)
	if err != nil || ck.Value == "" {
		return nil
	}
	key, err := s.signingKey(c.Request().Context())
	if err != nil {
		return err
	}
	cl, _, err := s.parse(key, ck.Value)
	if err != nil {
		return nil // not a token we issued: there is nothing to revoke
	}
	return s.DB.RevokeSession(c.Request().Context(), cl.SessionID)
}

// parse verifies a session token's signature, algorithm and claims. An expired token that is
// otherwise valid is returned with expired true (the caller refreshes it if its session lives).
func (s *Sessions) parse(key []byte, raw string) (cl sessionClaims, expired bool, err error) {
	p := jwt.NewParser(jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}), jwt.WithIssuer(tokenIssuer),
		jwt.WithExpirationRequired(), jwt.WithTimeFunc(s.DB.Now), jwt.WithStrictDecoding())
	_, err = p.ParseWithClaims(raw, &cl, func(t *jwt.Token) (any, error) {
		if t.Method != jwt.SigningMethodHS256 {
			return nil, fmt.Errorf("unexpected signing method %v", t.Header["alg"])
		}
		return key, nil
	})
	// The signature is verified before the claims, so ErrTokenExpired means a token we signed.
	// Check its other claims as of when it was issued.
	if errors.Is(err, jwt.ErrTokenInvalidClaims) && errors.Is(err, jwt.ErrTokenExpired) && cl.IssuedAt != nil {
		at := cl.IssuedAt.Time
		err = jwt.NewValidator(jwt.WithIssuer(tokenIssuer), jwt.WithExpirationRequired(),
			jwt.WithTimeFunc(func() time.Time { return at })).Validate(cl)
		expired = err == nil
	}
	if err != nil {
		return sessionClaims{}, false, err
	}
	if cl.SessionID == "" || cl.Subject == "" || cl.IssuedAt == nil {
		return sessionClaims{}, false, errors.New("session token without sid, sub or iat")
	}
	return cl, expired, nil
}

// setToken signs a new token for sess and sets it as the session cookie, living until the
// session's absolute expiry.
func (s *Sessions) setToken(c echo.Context, key []byte, sess db.Session) error {
	now := s.DB.Now()
	exp := now.Add(s.tokenTTL())
	if sess.ExpiresAt.Before(exp) {
		exp = sess.ExpiresAt
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, sessionClaims{SessionID: sess.ID, RegisteredClaims: jwt.RegisteredClaims{
		Issuer: tokenIssuer, Subject: sess.UserID, IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(exp),
	}}).SignedString(key)
	if err != nil {
		return fmt.Errorf("sign session token: %w", err)
	}
	maxAge := int((sess.ExpiresAt.Sub(now) + time.Second - 1) / time.Second)
	c.SetCookie(&http.Cookie{Name: SessionCookie, Value: tok, Path: "/", MaxAge: max(maxAge, 1),
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: secureRequest(c.Request())})
	return nil
}

func (s *Sessions) clearCookie(c echo.Context) {
	c.SetCookie(&http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: secureRequest(c.Request())})
}

// secureRequest reports whether the browser reached us over HTTPS (directly, or through a
// proxy that says so). Marking a cookie Secure on a false claim only makes it stricter.
func secureRequest(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	proto, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ",")
	return strings.EqualFold(strings.TrimSpace(proto), "https")
}

// CSRFToken returns the CSRF token of sess for its forms: an HMAC of the session id under the
// signing key, so it is valid for this session only and needs no storage. "" if the key
// cannot be read (every check then fails).
func (s *Sessions) CSRFToken(sess db.Session) string {
	if sess.ID == "" {
		return ""
	}
	key, err := s.signingKey(context.Background())
	if err != nil {
		return ""
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte("csrf:" + sess.ID))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// CheckCSRF reports whether token is sess's CSRF token (constant-time).
func (s *Sessions) CheckCSRF(sess db.Session, token string) bool {
	want := s.CSRFToken(sess)
	return want != "" && token != "" && hmac.Equal([]byte(want), []byte(token))
}

// PreAuthCSRF returns the CSRF token for a form shown before there is a session (sign-in,
// first-run setup): a random value also set in the yosan_csrf cookie (HttpOnly, SameSite
// Strict, Path /console), checked by CheckPreAuthCSRF as a double submit.
func PreAuthCSRF(c echo.Context) string {
	if tok, ok := c.Get(preAuthKey).(string); ok {
		return tok
	}
	if ck, err := c.Cookie(PreAuthCookie); err == nil && validPreAuth(ck.Value) {
		c.Set(preAuthKey, ck.Value)
		return ck.Value
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("read random: %v", err)) // crypto/rand never fails on Linux
	}
	tok := base64.RawURLEncoding.EncodeToString(b)
	c.SetCookie(&http.Cookie{Name: PreAuthCookie, Value: tok, Path: "/console", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: secureRequest(c.Request())})
	c.Set(preAuthKey, tok)
	return tok
}

// CheckPreAuthCSRF reports whether a pre-session form's token matches the yosan_csrf cookie
// (constant-time). A request without the cookie fails.
func CheckPreAuthCSRF(c echo.Context, token string) bool {
	ck, err := c.Cookie(PreAuthCookie)
	if err != nil || !validPreAuth(ck.Value) {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(ck.Value), []byte(token)) == 1
}

// validPreAuth reports whether v looks like a token PreAuthCSRF made (32 random bytes).
func validPreAuth(v string) bool {
	b, err := base64.RawURLEncoding.Strict().DecodeString(v)
	return err == nil && len(b) == 32
}

// Throttled returns how long a sign-in for email from address ip must wait: zero unless
// LoginMaxEmailFailures failures for the email (since its last success) or LoginMaxIPFailures
// from the address happened within LoginWindow, and then the time until enough of them leave
// the window. Callers check it before the password, and answer 429 with Retry-After.
func (s *Sessions) Throttled(ctx context.Context, email, ip string) (time.Duration, error) {
	now := s.DB.Now()
	byEmail, byIP, err := s.DB.NthLoginFailure(ctx, email, ip, now.Add(-LoginWindow), LoginMaxEmailFailures, LoginMaxIPFailures)
	if err != nil {
		return 0, err
	}
	var wait time.Duration
	for _, at := range []time.Time{byEmail, byIP} {
		if !at.IsZero() {
			wait = max(wait, at.Add(LoginWindow).Sub(now))
		}
	}
	return wait, nil
}
