-- Tenants -------------------------------------------------------------------------------------
CREATE TABLE orgs (
    id          uuid PRIMARY KEY,
    name        text NOT NULL CHECK (name <> ''),
    currency    text NOT NULL DEFAULT 'JPY' CHECK (currency IN ('JPY', 'USD')),
    timezone    text NOT NULL DEFAULT 'Asia/Tokyo',
    -- default USD->JPY rate in micro-JPY per USD, fixed on each new period (org_periods)
    usd_jpy     bigint NOT NULL CHECK (usd_jpy > 0),
    created_at  timestamptz NOT NULL
);

-- One row per org and calendar month (in the org's time zone): the FX rate fixed when the
-- period opened, so budgets, alerts and invoices of the period agree to the micro-unit.
CREATE TABLE org_periods (
    org_id      uuid NOT NULL REFERENCES orgs (id),
    period      text NOT NULL CHECK (period ~ '^\d{4}-\d{2}$'),
    usd_jpy     bigint NOT NULL CHECK (usd_jpy > 0),
    opened_at   timestamptz NOT NULL,
    PRIMARY KEY (org_id, period)
);

CREATE TABLE teams (
    id          uuid PRIMARY KEY,
    org_id      uuid NOT NULL REFERENCES orgs (id),
    name        text NOT NULL CHECK (name <> ''),
    created_at  timestamptz NOT NULL,
    UNIQUE (org_id, id)
);

CREATE TABLE members (
    id          uuid PRIMARY KEY,
    org_id      uuid NOT NULL,
    team_id     uuid NOT NULL,
    email       text NOT NULL CHECK (email <> ''),
    created_at  timestamptz NOT NULL,
    UNIQUE (org_id, email),
    FOREIGN KEY (org_id, team_id) REFERENCES teams (org_id, id)
);

CREATE TABLE plans (
    name        text PRIMARY KEY,
    tiers       text[] NOT NULL
);

CREATE TABLE api_keys (
    id          uuid PRIMARY KEY,
    org_id      uuid NOT NULL,
    team_id     uuid NOT NULL,
    member_id   uuid REFERENCES members (id),
    name        text NOT NULL,
    plan        text NOT NULL REFERENCES plans (name),
    -- sha256 of the secret; keys are high-entropy so a fast hash is the right one
    key_hash    bytea NOT NULL UNIQUE,
    prefix      text NOT NULL,
    expires_at  timestamptz,
    revoked_at  timestamptz,
    created_at  timestamptz NOT NULL,
    FOREIGN KEY (org_id, team_id) REFERENCES teams (org_id, id)
);
CREATE INDEX api_keys_org ON api_keys (org_id);

-- Models and effective-dated prices (USD micro-units per 1M tokens) -------------------------
CREATE TABLE models (
    name              text PRIMARY KEY,
    provider          text NOT NULL,
    upstream_name     text NOT NULL,
    tier              text NOT NULL,
    kind              text NOT NULL CHECK (kind IN ('chat', 'embedding')),
    max_output_tokens bigint NOT NULL CHECK (max_output_tokens >= 0),
    context_window    bigint NOT NULL DEFAULT 0
);

CREATE TABLE model_prices (
    model            text NOT NULL REFERENCES models (name),
    effective_from   timestamptz NOT NULL,
    input_per_m      bigint NOT NULL CHECK (input_per_m >= 0),
    output_per_m     bigint NOT NULL CHECK (output_per_m >= 0),
    cached_per_m     bigint NOT NULL DEFAULT 0 CHECK (cached_per_m >= 0),
    PRIMARY KEY (model, effective_from)
);

-- Budgets ---------------------------------------------------------------------------------------
-- The standing cap of a node, copied onto each new period row. NULL cap = unlimited (metered).
CREATE TABLE budget_caps (
    node_kind   text NOT NULL CHECK (node_kind IN ('global', 'org', 'team', 'member', 'key')),
    node_id     uuid NOT NULL,
    cap         bigint CHECK (cap >= 0),
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (node_kind, node_id)
);

-- One row per (node, period). Invariant: reserved + spent <= cap, except where a request's
-- true cost exceeded its reservation (overrun), which then blocks the node.
CREATE TABLE budgets (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    node_kind   text NOT NULL CHECK (node_kind IN ('global', 'org', 'team', 'member', 'key')),
    node_id     uuid NOT NULL,
    org_id      uuid,
    period      text NOT NULL CHECK (period ~ '^\d{4}-\d{2}$'),
    currency    text NOT NULL,
    cap         bigint CHECK (cap >= 0),
    reserved    bigint NOT NULL DEFAULT 0 CHECK (reserved >= 0),
    spent       bigint NOT NULL DEFAULT 0 CHECK (spent >= 0),
    UNIQUE (node_kind, node_id, period)
);
CREATE INDEX budgets_org ON budgets (org_id, period);

-- The ledger: one row per request. Money moves on budgets only together with a state change
-- of this row that writes a fresh apply_nonce (see db/ledger.go).
CREATE TABLE reservations (
    request_id        text PRIMARY KEY,
    org_id            uuid NOT NULL,
    key_id            uuid NOT NULL,
    period            text NOT NULL,
    status            text NOT NULL CHECK (status IN ('pending', 'committed', 'released', 'expired')),
    currency          text NOT NULL,
    amount            bigint NOT NULL CHECK (amount >= 0),
    actual            bigint CHECK (actual >= 0),
    -- budget rows charged in the org currency, in lock order
    budget_ids        bigint[] NOT NULL,
    -- the global node is kept apart: it is in the global currency
    global_budget_id  bigint,
    global_amount     bigint NOT NULL DEFAULT 0,
    global_actual     bigint,
    apply_nonce       uuid NOT NULL,
    overrun           boolean NOT NULL DEFAULT false,
    model             text NOT NULL,
    provider          text NOT NULL,
    upstream_model    text NOT NULL,
    usd_jpy           bigint NOT NULL,
    est_input_tokens  bigint NOT NULL,
    max_output_tokens bigint NOT NULL,
    input_tokens      bigint,
    cached_tokens     bigint,
    output_tokens     bigint,
    usage_source      text,
    deadline          timestamptz NOT NULL,
    created_at        timestamptz NOT NULL,
    settled_at        timestamptz
);
CREATE INDEX reservations_org_created ON reservations (org_id, created_at DESC);
CREATE INDEX reservations_pending_deadline ON reservations (deadline) WHERE status = 'pending';
