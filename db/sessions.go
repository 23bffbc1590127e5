package db

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"yosan/app"
)

// Console sessions, sign-in attempts and the console's signing key. Times come from db.Now,
// so expiry and throttling windows are testable without sleeping.

// Session is a signed-in console user on one browser. It ends at ExpiresAt at the latest,
// however often its token is refreshed, or when it is revoked.
type Session struct {
	ID         string
	UserID     string
	CreatedAt  time.Time
	ExpiresAt  time.Time
	LastSeenAt time.Time
	RevokedAt  *time.Time
}

// touchEvery bounds how often TouchSession writes last_seen_at.
const touchEvery = time.Minute

// Bounds on what the client chooses and we store: the User-Agent header, the address (the
// first X-Forwarded-For entry, unless the server trusts no proxy) and the typed email.
const (
	maxUserAgent = 512
	maxIP        = 64
	maxEmail     = 320
)

// clip cuts s to at most n bytes of valid UTF-8 (PostgreSQL refuses invalid UTF-8 in text).
func clip(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return strings.ToValidUTF8(s, "")
}

func errSessionEnded() error {
	return app.Errorf(app.EUNAUTHORIZED, "your session ended; sign in again")
}

// CreateSession starts a session of user userID that ends ttl from now at the latest. ENOTFOUND
// for an unknown user, EINVALID for a ttl that is not positive.
func (db *DB) CreateSession(ctx context.Context, userID string, ttl time.Duration, userAgent, ip string) (Session, error) {
	if ttl <= 0 {
		return Session{}, app.Errorf(app.EINVALID, "a session needs a positive lifetime")
	}
	if uuid.Validate(userID) != nil {
		return Session{}, app.Errorf(app.ENOTFOUND, "user %q not found", userID)
	}
	userAgent, ip = clip(userAgent, maxUserAgent), clip(ip, maxIP)
	now := db.now()
	s := Session{ID: uuid.NewString(), UserID: userID, CreatedAt: now, ExpiresAt: now.Add(ttl), LastSeenAt: now}
	_, err := db.Pool.Exec(ctx, `INSERT INTO sessions (id, user_id, created_at, expires_at, last_seen_at, user_agent, ip)
		VALUES ($1, $2, $3, $4, $3, $5, $6)`, s.ID, s.UserID, s.CreatedAt, s.ExpiresAt, userAgent, ip)
	if err != nil {
		return Session{}, fmt.Errorf("insert session: %w", FormatError(err))
	}
	return s, nil
}

// ActiveSession returns session id if it is neither revoked nor past its expiry. Otherwise, and
// for an unknown id, it returns EUNAUTHORIZED "your session ended; sign in again".
func (db *DB) ActiveSession(ctx context.Context, id string) (Session, error) {
	if uuid.Validate(id) != nil {
		return Session{}, errSessionEnded()
	}
	var s Session
	err := db.Pool.QueryRow(ctx, `SELECT id::text, user_id::text, created_at, expires_at, last_seen_at, revoked_at
		FROM sessions WHERE id = $1 AND revoked_at IS NULL AND expires_at > $2`, id, db.now()).
		Scan(&s.ID, &s.UserID, &s.CreatedAt, &s.ExpiresAt, &s.LastSeenAt, &s.RevokedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Session{}, errSessionEnded()
	}
	if err != nil {
		return Session{}, fmt.Errorf("select session: %w", FormatError(err))
	}
	return s, nil
}

// TouchSession records that session id was used now; it writes at most once a minute per
// session, so a busy console does not write on every request.
func (db *DB) TouchSession(ctx context.Context, id string) error {
	if uuid.Validate(id) != nil {
		return nil
	}
	now := db.now()
	_, err := db.Pool.Exec(ctx, `UPDATE sessions SET last_seen_at = $2
		WHERE id = $1 AND revoked_at IS NULL AND last_seen_at <= $3`, id, now, now.Add(-touchEvery))
	if err != nil {
		return fmt.Errorf("touch session: %w", FormatError(err))
	}
	return nil
}

// RevokeSession ends session id (idempotent; an unknown id is not an error).
func (db *DB) RevokeSession(ctx context.Context, id string) error {
	if uuid.Validate(id) != nil {
		return nil
	}
	_, err := db.Pool.Exec(ctx, `UPDATE sessions SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL`, id, db.now())
	if err != nil {
		return fmt.Errorf("revoke session: %w", FormatError(err))
	}
	return nil
}

// RevokeUserSessions ends every session of user userID (sign out everywhere).
func (db *DB) RevokeUserSessions(ctx context.Context, userID string) error {
	if uuid.Validate(userID) != nil {
		return nil
	}
	return pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		return revokeUserSessions(ctx, tx, userID, db.now())
	})
}

func revokeUserSessions(ctx context.Context, tx pgx.Tx, userID string, now time.Time) error {
	_, err := tx.Exec(ctx, `UPDATE sessions SET revoked_at = $2 WHERE user_id = $1 AND revoked_at IS NULL`, userID, now)
	if err != nil {
		return fmt.Errorf("revoke user sessions: %w", FormatError(err))
	}
	return nil
}

// RecordLoginAttempt records a sign-in attempt for email (any case; it need not be a user's)
// from address ip.
func (db *DB) RecordLoginAttempt(ctx context.Context, email, ip string, ok bool) error {
	_, err := db.Pool.Exec(ctx, `INSERT INTO login_attempts (email, ip, at, ok) VALUES (lower($1), $2, $3, $4)`,
		clip(strings.TrimSpace(email), maxEmail), clip(ip, maxIP), db.now(), ok)
	if err != nil {
		return fmt.Errorf("record login attempt: %w", FormatError(err))
	}
	return nil
}

// LoginFailures counts failed sign-ins since since: for email, only those after its last
// success (a success resets the count); for address ip, all of them (one account the attacker
// owns must not reset its address's count).
func (db *DB) LoginFailures(ctx context.Context, email, ip string, since time.Time) (byEmail, byIP int, err error) {
	err = db.Pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM login_attempts WHERE email = lower($1) AND NOT ok AND at >= $2
			AND id > coalesce((SELECT max(id) FROM login_attempts WHERE email = lower($1) AND ok), 0)),
		(SELECT count(*) FROM login_attempts WHERE ip = $3 AND NOT ok AND at >= $2)`,
		clip(strings.TrimSpace(email), maxEmail), since, clip(ip, maxIP)).Scan(&byEmail, &byIP)
	if err != nil {
		return 0, 0, fmt.Errorf("count login failures: %w", FormatError(err))
	}
	return byEmail, byIP, nil
}

// NthLoginFailure returns when the nth most recent failed sign-in since since happened, for
// email (counted as LoginFailures does) and for address ip; a zero time when there were fewer
// than n. Once that failure leaves a window, fewer than n failures remain in it: throttling
// uses it to say when to retry. EINVALID for n < 1.
func (db *DB) NthLoginFailure(ctx context.Context, email, ip string, since time.Time, nEmail, nIP int) (byEmail, byIP time.Time, err error) {
	if nEmail < 1 || nIP < 1 {
		return time.Time{}, time.Time{}, app.Errorf(app.EINVALID, "n must be at least 1")
	}
	var e, i *time.Time
	err = db.Pool.QueryRow(ctx, `SELECT
		(SELECT at FROM login_attempts WHERE email = lower($1) AND NOT ok AND at >= $2
			AND id > coalesce((SELECT max(id) FROM login_attempts WHERE email = lower($1) AND ok), 0)
			ORDER BY at DESC, id DESC OFFSET $4 LIMIT 1),
		(SELECT at FROM login_attempts WHERE ip = $3 AND NOT ok AND at >= $2
			ORDER BY at DESC, id DESC OFFSET $5 LIMIT 1)`,
		clip(strings.TrimSpace(email), maxEmail), since, clip(ip, maxIP), nEmail-1, nIP-1).Scan(&e, &i)
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("find login failures: %w", FormatError(err))
	}
	if e != nil {
		byEmail = *e
	}
	if i != nil {
		byIP = *i
	}
	return byEmail, byIP, nil
}

// signingKeyName is the settings row holding the console's HMAC key (JWT and CSRF).
const signingKeyName = "console_jwt_key"

// SigningKey returns the console's 32-byte signing key, creating it on first use. Every
// gateway process gets the same key, so a session signed by one is valid on all.
func (db *DB) SigningKey(ctx context.Context) ([]byte, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("read random: %w", err)
	}
	// Whoever inserts first wins; everyone then reads the winner's key.
	if _, err := db.Pool.Exec(ctx, `INSERT INTO settings (name, value, created_at) VALUES ($1, $2, $3)
		ON CONFLICT (name) DO NOTHING`, signingKeyName, key, db.now()); err != nil {
		return nil, fmt.Errorf("create signing key: %w", FormatError(err))
	}
	var stored []byte
	if err := db.Pool.QueryRow(ctx, `SELECT value FROM settings WHERE name = $1`, signingKeyName).Scan(&stored); err != nil {
		return nil, fmt.Errorf("read signing key: %w", FormatError(err))
	}
	if len(stored) < 32 {
		return nil, fmt.Errorf("signing key %q is %d bytes, want 32", signingKeyName, len(stored))
	}
	return stored, nil
}
