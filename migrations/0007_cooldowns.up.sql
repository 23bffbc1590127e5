-- Provider cooldowns (DESIGN.md section 7): a provider account or one of its models that the
-- gateway does not call until reset_at, as structured rows every gateway process reads.
CREATE TABLE provider_cooldowns (
    provider   text NOT NULL,
    -- '' for the whole provider account
    model      text NOT NULL DEFAULT '',
    class      text NOT NULL CHECK (class IN ('rate_limited', 'quota_exhausted', 'manual_action', 'backend_error')),
    code       text NOT NULL DEFAULT '',
    reset_at   timestamptz NOT NULL,
    message    text NOT NULL DEFAULT '',
    first_seen timestamptz NOT NULL,
    last_seen  timestamptz NOT NULL,
    count      bigint NOT NULL DEFAULT 1,
    cleared_at timestamptz,
    PRIMARY KEY (provider, model)
);
CREATE INDEX provider_cooldowns_active ON provider_cooldowns (reset_at) WHERE cleared_at IS NULL;
