package db

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"yosan/app"
)

// Console users and their memberships. Emails are lowercased by PostgreSQL's lower() on every
// write and lookup (the users table checks it), so "Ann@X" and "ann@x" are one user.

// usersLock is the advisory lock key that orders user creation against the first-run setup:
// CreateFirstOperator takes it exclusively, CreateUser shared.
const usersLock = 7_050_001

const userCols = `u.id::text, u.email, u.name, u.operator, u.created_at, u.password_changed_at`

func scanUser(row pgx.Row, extra ...any) (app.User, error) {
	var u app.User
	err := row.Scan(append([]any{&u.ID, &u.Email, &u.Name, &u.Operator, &u.CreatedAt, &u.PasswordChangedAt}, extra...)...)
	return u, err
}

// checkEmail returns EINVALID for an email that cannot be one (the console validates the
// form more kindly; this guards every other caller).
func checkEmail(email string) error {
	if email == "" || len(email) > 254 || strings.ContainsAny(email, " \t\r\n") ||
		strings.Count(email, "@") != 1 || strings.HasPrefix(email, "@") || strings.HasSuffix(email, "@") {
		return app.Errorf(app.EINVALID, "%q is not an email address", email)
	}
	return nil
}

// CountUsers returns how many console users exist (0 before the first-run setup).
func (db *DB) CountUsers(ctx context.Context) (int, error) {
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM users`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count users: %w", FormatError(err))
	}
	return n, nil
}

// CreateFirstOperator creates the first console user, an operator, only if no user exists yet;
// of any number of concurrent calls, on any number of processes, at most one succeeds. It
// returns ECONFLICT "setup is done already" when a user exists, EINVALID for a bad email.
func (db *DB) CreateFirstOperator(ctx context.Context, email, name, hash string) (app.User, error) {
	return db.insertUser(ctx, email, name, hash, true, true)
}

// CreateUser creates a console user with the given password hash. It returns ECONFLICT when
// the email is taken and EINVALID for a bad email.
func (db *DB) CreateUser(ctx context.Context, email, name, hash string, operator bool) (app.User, error) {
	return db.insertUser(ctx, email, name, hash, operator, false)
}

func (db *DB) insertUser(ctx context.Context, email, name, hash string, operator, first bool) (app.User, error) {
	email = strings.TrimSpace(email)
	if err := checkEmail(email); err != nil {
		return app.User{}, err
	}
	if hash == "" {
		return app.User{}, app.Errorf(app.EINVALID, "a user needs a password")
	}
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		return app.User{}, fmt.Errorf("begin: %w", FormatError(err))
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	// The setup's "no user exists yet" must see every user created before it: it holds the lock
	// exclusively, so it runs after the creations in flight (which hold it shared) commit.
	lock := `SELECT pg_advisory_xact_lock_shared($1)`
	cond := ``
	if first {
		lock = `SELECT pg_advisory_xact_lock($1)`
		cond = ` WHERE NOT EXISTS (SELECT 1 FROM users)`
	}
	if _, err := tx.Exec(ctx, lock, usersLock); err != nil {
		return app.User{}, fmt.Errorf("lock users: %w", FormatError(err))
	}
	now := db.now()
	u, err := scanUser(tx.QueryRow(ctx, `INSERT INTO users AS u (id, email, name, password_hash, operator, created_at, password_changed_at)
		SELECT $1, lower($2), $3, $4, $5, $6, $6`+cond+`
		RETURNING `+userCols, uuid.NewString(), email, strings.TrimSpace(name), hash, operator, now))
	if errors.Is(err, pgx.ErrNoRows) {
		return app.User{}, app.Errorf(app.ECONFLICT, "setup is done already: sign in with an existing account")
	}
	if err != nil {
		if app.ErrorCode(FormatError(err)) == app.ECONFLICT {
			return app.User{}, app.Errorf(app.ECONFLICT, "a user with email %q exists already", strings.ToLower(email))
		}
		return app.User{}, fmt.Errorf("insert user: %w", FormatError(err))
	}
	if err := tx.Commit(ctx); err != nil {
		return app.User{}, fmt.Errorf("commit user: %w", FormatError(err))
	}
	return u, nil
}

// UserByEmail returns the user with email (any case) and its password hash, or ENOTFOUND.
func (db *DB) UserByEmail(ctx context.Context, email string) (app.User, string, error) {
	var hash string
	u, err := scanUser(db.Pool.QueryRow(ctx, `SELECT `+userCols+`, u.password_hash FROM users u
		WHERE u.email = lower($1)`, strings.TrimSpace(email)), &hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return app.User{}, "", app.Errorf(app.ENOTFOUND, "user %q not found", email)
	}
	if err != nil {
		return app.User{}, "", fmt.Errorf("select user: %w", FormatError(err))
	}
	return u, hash, nil
}

// User returns the user with id, or ENOTFOUND.
func (db *DB) User(ctx context.Context, id string) (app.User, error) {
	if uuid.Validate(id) != nil {
		return app.User{}, app.Errorf(app.ENOTFOUND, "user %q not found", id)
	}
	u, err := scanUser(db.Pool.QueryRow(ctx, `SELECT `+userCols+` FROM users u WHERE u.id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return app.User{}, app.Errorf(app.ENOTFOUND, "user %q not found", id)
	}
	if err != nil {
		return app.User{}, fmt.Errorf("select user: %w", FormatError(err))
	}
	return u, nil
}

// SetPassword replaces the user's password hash and, in the same transaction, revokes every
// session of the user: whoever knew the old password is signed out everywhere. ENOTFOUND for an
// unknown user.
func (db *DB) SetPassword(ctx context.Context, userID, hash string) error {
	if uuid.Validate(userID) != nil {
		return app.Errorf(app.ENOTFOUND, "user %q not found", userID)
	}
	if hash == "" {
		return app.Errorf(app.EINVALID, "a user needs a password")
	}
	now := db.now()
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", FormatError(err))
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	tag, err := tx.Exec(ctx, `UPDATE users SET password_hash = $2, password_changed_at = $3 WHERE id = $1`, userID, hash, now)
	if err != nil {
		return fmt.Errorf("set password: %w", FormatError(err))
	}
	if tag.RowsAffected() == 0 {
		return app.Errorf(app.ENOTFOUND, "user %q not found", userID)
	}
	if err := revokeUserSessions(ctx, tx, userID, now); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit password: %w", FormatError(err))
	}
	return nil
}

// SetMembership gives m.UserID the role m.Role in m.OrgID, replacing any role it had there. A
// team_admin needs m.TeamID, a team of the same org; the other roles take no team. It returns
// EINVALID for a bad role or team combination and ENOTFOUND for an unknown user, org or team
// (a team of another org is unknown in this one).
func (db *DB) SetMembership(ctx context.Context, m app.Membership) error {
	if !app.ValidRole(m.Role) {
		return app.Errorf(app.EINVALID, "role %q does not exist (want owner, finance_admin, team_admin or viewer)", m.Role)
	}
	if m.Role == app.RoleTeamAdmin && m.TeamID == "" {
		return app.Errorf(app.EINVALID, "a team_admin needs a team")
	}
	if m.Role != app.RoleTeamAdmin && m.TeamID != "" {
		return app.Errorf(app.EINVALID, "only a team_admin belongs to a team; a %s acts on the whole org", m.Role)
	}
	if _, err := db.User(ctx, m.UserID); err != nil {
		return err
	}
	if _, err := db.Org(ctx, m.OrgID); err != nil {
		return err
	}
	var team any
	if m.TeamID != "" {
		if _, err := db.Team(ctx, m.OrgID, m.TeamID); err != nil {
			return err
		}
		team = m.TeamID
	}
	// The foreign keys hold if the user, org or team went away since the checks above.
	err := db.keepOwner(ctx, m.OrgID, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO memberships (user_id, org_id, role, team_id, created_at)
			VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (user_id, org_id) DO UPDATE SET role = excluded.role, team_id = excluded.team_id`,
			m.UserID, m.OrgID, string(m.Role), team, db.now())
		return err
	})
	if err != nil {
		return fmt.Errorf("set membership: %w", FormatError(err))
	}
	return nil
}

// keepOwner runs change on org's memberships in a transaction that holds the org's row, and
// undoes it (ECONFLICT) when it would leave an org that had an owner without one: two owners
// demoting each other at the same moment cannot orphan the org.
func (db *DB) keepOwner(ctx context.Context, orgID string, change func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		var before int
		if err := tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM memberships WHERE org_id = o.id AND role = 'owner')
			FROM orgs o WHERE o.id = $1 FOR UPDATE`, orgID).Scan(&before); err != nil {
			return err
		}
		if err := change(tx); err != nil {
			return err
		}
		var after int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM memberships WHERE org_id = $1 AND role = 'owner'`, orgID).Scan(&after); err != nil {
			return err
		}
		if before > 0 && after == 0 {
			return app.Errorf(app.ECONFLICT, "an organization keeps at least one owner: make someone else owner first")
		}
		return nil
	})
}

// RemoveMembership takes the user's role in org orgID away. ENOTFOUND when it had none.
func (db *DB) RemoveMembership(ctx context.Context, userID, orgID string) error {
	if uuid.Validate(userID) != nil || uuid.Validate(orgID) != nil {
		return app.Errorf(app.ENOTFOUND, "membership not found")
	}
	err := db.keepOwner(ctx, orgID, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM memberships WHERE user_id = $1 AND org_id = $2`, userID, orgID)
		if err == nil && tag.RowsAffected() == 0 {
			return app.Errorf(app.ENOTFOUND, "membership not found")
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("remove membership: %w", FormatError(err))
	}
	return nil
}

const membershipCols = `m.user_id::text, m.org_id::text, m.role, coalesce(m.team_id::text, '')`

func scanMembership(row pgx.CollectableRow) (app.Membership, error) {
	var m app.Membership
	var role string
	err := row.Scan(&m.UserID, &m.OrgID, &role, &m.TeamID)
	m.Role = app.Role(role)
	return m, err
}

// Memberships lists the user's roles, one per org, by org id.
func (db *DB) Memberships(ctx context.Context, userID string) ([]app.Membership, error) {
	if uuid.Validate(userID) != nil {
		return nil, nil
	}
	rows, _ := db.Pool.Query(ctx, `SELECT `+membershipCols+` FROM memberships m WHERE m.user_id = $1 ORDER BY m.org_id`, userID)
	ms, err := pgx.CollectRows(rows, scanMembership)
	if err != nil {
		return nil, fmt.Errorf("list memberships: %w", FormatError(err))
	}
	return ms, nil
}

// OrgUser is a user with its role in one org.
type OrgUser struct {
	User       app.User
	Membership app.Membership
}

// OrgUsers lists the users who have a role in org orgID, by email. ENOTFOUND for an unknown
// org.
func (db *DB) OrgUsers(ctx context.Context, orgID string) ([]OrgUser, error) {
	if _, err := db.Org(ctx, orgID); err != nil {
		return nil, err
	}
	rows, _ := db.Pool.Query(ctx, `SELECT `+userCols+`, `+membershipCols+`
		FROM memberships m JOIN users u ON u.id = m.user_id
		WHERE m.org_id = $1 ORDER BY u.email`, orgID)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (OrgUser, error) {
		var ou OrgUser
		var role string
		u, err := scanUser(row, &ou.Membership.UserID, &ou.Membership.OrgID, &role, &ou.Membership.TeamID)
		ou.User, ou.Membership.Role = u, app.Role(role)
		return ou, err
	})
	if err != nil {
		return nil, fmt.Errorf("list org users: %w", FormatError(err))
	}
	return out, nil
}

// Actor returns the user with id and all its memberships, as the actor of an admin request.
// ENOTFOUND for an unknown user.
func (db *DB) Actor(ctx context.Context, userID string) (app.Actor, error) {
	u, err := db.User(ctx, userID)
	if err != nil {
		return app.Actor{}, err
	}
	ms, err := db.Memberships(ctx, userID)
	if err != nil {
		return app.Actor{}, err
	}
	return app.Actor{User: u, Memberships: ms}, nil
}
