-- The admin console: users, their roles per org, sessions, sign-in attempts, the signing key,
-- and the append-only audit log.

-- Emails are stored lowercased (the db package lowercases with the same lower() on write and
-- on lookup), so the unique constraint is case-insensitive.
CREATE TABLE users (
    id                  uuid PRIMARY KEY,
    email               text NOT NULL UNIQUE CHECK (email <> '' AND email = lower(email)),
    name                text NOT NULL DEFAULT '',
    -- argon2id in PHC string format; never returned by the db package except to check a sign-in
    password_hash       text NOT NULL CHECK (password_hash <> ''),
    operator            boolean NOT NULL DEFAULT false,
    created_at          timestamptz NOT NULL,
    password_changed_at timestamptz NOT NULL
);

-- A user's role in an org. A team_admin administers exactly one team, of the same org (the
-- composite foreign key); every other role is org-wide.
CREATE TABLE memberships (
    user_id     uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    org_id      uuid NOT NULL REFERENCES orgs (id),
    role        text NOT NULL CHECK (role IN ('owner', 'finance_admin', 'team_admin', 'viewer')),
    team_id     uuid,
    created_at  timestamptz NOT NULL,
    PRIMARY KEY (user_id, org_id),
    FOREIGN KEY (org_id, team_id) REFERENCES teams (org_id, id),
    CHECK ((role = 'team_admin') = (team_id IS NOT NULL))
);
CREATE INDEX memberships_org ON memberships (org_id);

-- Server-side sessions: the console's JWT names one, and every request checks it, so revoking
-- a row ends the session at once. expires_at is absolute: refreshing a token never extends it.
CREATE TABLE sessions (
    id            uuid PRIMARY KEY,
    user_id       uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at    timestamptz NOT NULL,
    expires_at    timestamptz NOT NULL,
    last_seen_at  timestamptz NOT NULL,
    revoked_at    timestamptz,
    user_agent    text NOT NULL DEFAULT '',
    ip            text NOT NULL DEFAULT '',
    CHECK (expires_at > created_at)
);
CREATE INDEX sessions_user ON sessions (user_id);

-- Every sign-in attempt, for throttling (failures per email since its last success, and per
-- client address). The email is stored lowercased whether or not a user has it.
CREATE TABLE login_attempts (
    id     bigserial PRIMARY KEY,
    email  text NOT NULL,
    ip     text NOT NULL,
    at     timestamptz NOT NULL,
    ok     boolean NOT NULL
);
CREATE INDEX login_attempts_email ON login_attempts (email, at);
CREATE INDEX login_attempts_ip ON login_attempts (ip, at);

-- Gateway-wide secrets created once and shared by every gateway process (the console's JWT
-- and CSRF signing key, "console_jwt_key").
CREATE TABLE settings (
    name        text PRIMARY KEY,
    value       bytea NOT NULL,
    created_at  timestamptz NOT NULL
);

-- Who did what, when. org_id NULL is a gateway-wide entry (an operator's action outside any
-- org). Cap changes are entries with action 'budget.cap_set'. No foreign keys: the log outlives
-- what it names.
CREATE TABLE audit_log (
    id           bigserial PRIMARY KEY,
    at           timestamptz NOT NULL,
    actor_id     uuid,
    actor        text NOT NULL CHECK (actor <> ''),
    org_id       uuid,
    action       text NOT NULL CHECK (action <> ''),
    target_kind  text NOT NULL DEFAULT '',
    target_id    text NOT NULL DEFAULT '',
    details      jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(details) = 'object')
);
CREATE INDEX audit_log_org ON audit_log (org_id, id DESC);

-- The audit log is append-only: rows are never changed or deleted, and the table is never
-- truncated (only the down migration drops it).
CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the audit log is append-only: % is not allowed', TG_OP USING ERRCODE = 'check_violation';
END;
$$;
CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only();
