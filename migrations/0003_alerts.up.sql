-- Alerts (DESIGN.md section 9). A threshold crossing or an overrun is detected by triggers in
-- the very transaction that commits the spend (or lowers the cap) that caused it, and written
-- to the alert_events outbox there: a crash can delay an alert, never lose or duplicate it.
-- A worker (notify/worker.go) fans each event out to the org's channels (alert_deliveries,
-- unique per event and channel) and delivers with retries.

-- Thresholds in percent of the cap. NULL on budget_caps = the defaults; each period row gets
-- its own copy, with the highest threshold already alerted in that node-period.
ALTER TABLE budget_caps ADD COLUMN thresholds int[];
ALTER TABLE budgets
    ADD COLUMN thresholds int[] NOT NULL DEFAULT '{50,80,90,100}',
    ADD COLUMN last_alert_threshold int NOT NULL DEFAULT 0;

CREATE TABLE alert_channels (
    id          uuid PRIMARY KEY,
    -- NULL: the operator's channel, which receives the global node's alerts
    org_id      uuid REFERENCES orgs (id),
    name        text NOT NULL CHECK (name <> ''),
    kind        text NOT NULL CHECK (kind IN ('email', 'webhook')),
    emails      text[] NOT NULL DEFAULT '{}',
    url         text,
    -- webhook signing secrets (whsec_...); the previous one keeps signing until it expires
    secret      text,
    prev_secret text,
    prev_secret_expires_at timestamptz,
    enabled     boolean NOT NULL DEFAULT true,
    -- defined by the config file (the operator's address): not editable through the API
    managed     boolean NOT NULL DEFAULT false,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    deleted_at  timestamptz,
    CHECK ((kind = 'email' AND cardinality(emails) > 0 AND url IS NULL)
        OR (kind = 'webhook' AND url IS NOT NULL AND secret IS NOT NULL))
);
CREATE INDEX alert_channels_org ON alert_channels (org_id) WHERE deleted_at IS NULL;

CREATE TABLE alert_events (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    kind        text NOT NULL CHECK (kind IN ('budget.threshold_crossed', 'budget.overrun', 'alert.test')),
    -- NULL: the global node (the operator's alerts)
    org_id      uuid,
    node_kind   text NOT NULL,
    node_id     uuid NOT NULL,
    budget_id   bigint,
    period      text NOT NULL,
    currency    text NOT NULL,
    threshold   int,
    crossed     int[],
    spent       bigint NOT NULL DEFAULT 0,
    reserved    bigint NOT NULL DEFAULT 0,
    cap         bigint,
    request_id  text,
    model       text,
    amount      bigint,
    actual      bigint,
    -- a test event goes to this one channel only
    channel_id  uuid REFERENCES alert_channels (id),
    created_at  timestamptz NOT NULL,
    fanned_out_at timestamptz
);
-- The database itself refuses a second alert for one threshold of one node-period.
CREATE UNIQUE INDEX alert_events_threshold_once ON alert_events (budget_id, threshold)
    WHERE kind = 'budget.threshold_crossed';
CREATE UNIQUE INDEX alert_events_overrun_once ON alert_events (request_id, node_kind)
    WHERE kind = 'budget.overrun';
CREATE INDEX alert_events_unfanned ON alert_events (created_at) WHERE fanned_out_at IS NULL;
CREATE INDEX alert_events_org ON alert_events (org_id, created_at DESC);

CREATE TABLE alert_deliveries (
    id              uuid PRIMARY KEY,
    event_id        uuid NOT NULL REFERENCES alert_events (id),
    channel_id      uuid NOT NULL REFERENCES alert_channels (id),
    org_id          uuid,
    kind            text NOT NULL CHECK (kind IN ('email', 'webhook')),
    status          text NOT NULL CHECK (status IN ('pending', 'sent', 'failed')),
    target          text NOT NULL,
    subject         text NOT NULL DEFAULT '',
    body            text NOT NULL,
    attempts        int NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL,
    -- a worker holds a claimed delivery until this time (longer than any one send)
    locked_until    timestamptz,
    give_up_at      timestamptz NOT NULL,
    last_attempt_at timestamptz,
    last_status_code int,
    last_error      text,
    created_at      timestamptz NOT NULL,
    sent_at         timestamptz,
    UNIQUE (event_id, channel_id)
);
CREATE INDEX alert_deliveries_due ON alert_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX alert_deliveries_org ON alert_deliveries (org_id, created_at DESC);

-- The delivery log: one row per attempt.
CREATE TABLE alert_attempts (
    delivery_id uuid NOT NULL REFERENCES alert_deliveries (id),
    attempt     int NOT NULL,
    started_at  timestamptz NOT NULL,
    finished_at timestamptz NOT NULL,
    ok          boolean NOT NULL,
    status_code int,
    error       text,
    PRIMARY KEY (delivery_id, attempt)
);

-- budget_threshold_alert runs under the budget row's lock, in the transaction that raises spent
-- (a settlement or a sweep) or lowers the cap or the thresholds: it writes one event for the
-- thresholds this change crossed that were not alerted before in the node-period, and records
-- the highest one, so each threshold alerts at most once per node-period however many
-- processes settle at once. A spend that passes several thresholds at once is one event that
-- lists them all.
CREATE FUNCTION budget_threshold_alert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    crossed int[];
BEGIN
    IF NEW.cap IS NULL OR NEW.spent <= 0 THEN
        RETURN NEW;
    END IF;
    SELECT array_agg(t ORDER BY t) INTO crossed FROM unnest(NEW.thresholds) AS t
        WHERE t > NEW.last_alert_threshold AND NEW.spent::numeric * 100 >= NEW.cap::numeric * t;
    IF crossed IS NULL THEN
        RETURN NEW;
    END IF;
    NEW.last_alert_threshold := crossed[array_upper(crossed, 1)];
    INSERT INTO alert_events (kind, org_id, node_kind, node_id, budget_id, period, currency, threshold,
        crossed, spent, reserved, cap, created_at)
    VALUES ('budget.threshold_crossed', NEW.org_id, NEW.node_kind, NEW.node_id, NEW.id, NEW.period,
        NEW.currency, NEW.last_alert_threshold, crossed, NEW.spent, NEW.reserved, NEW.cap, statement_timestamp())
    ON CONFLICT (budget_id, threshold) WHERE kind = 'budget.threshold_crossed' DO NOTHING;
    RETURN NEW;
END;
$$;

CREATE TRIGGER budgets_threshold_alert BEFORE UPDATE OF spent, cap, thresholds ON budgets
    FOR EACH ROW EXECUTE FUNCTION budget_threshold_alert();

-- reservation_overrun_alert writes an overrun event in the transaction that commits a request
-- whose true cost exceeded its reservation: one for the org, and one for the operator when the
-- global node was charged more than it reserved.
CREATE FUNCTION reservation_overrun_alert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.actual > NEW.amount THEN
        INSERT INTO alert_events (kind, org_id, node_kind, node_id, period, currency, request_id, model,
            amount, actual, created_at)
        VALUES ('budget.overrun', NEW.org_id, 'key', NEW.key_id, NEW.period, NEW.currency, NEW.request_id,
            NEW.model, NEW.amount, NEW.actual, statement_timestamp())
        ON CONFLICT (request_id, node_kind) WHERE kind = 'budget.overrun' DO NOTHING;
    END IF;
    IF NEW.global_budget_id IS NOT NULL AND NEW.global_actual > NEW.global_amount THEN
        INSERT INTO alert_events (kind, org_id, node_kind, node_id, budget_id, period, currency, request_id,
            model, amount, actual, created_at)
        SELECT 'budget.overrun', NULL, 'global', b.node_id, b.id, b.period, b.currency, NEW.request_id,
            NEW.model, NEW.global_amount, NEW.global_actual, statement_timestamp()
        FROM budgets b WHERE b.id = NEW.global_budget_id
        ON CONFLICT (request_id, node_kind) WHERE kind = 'budget.overrun' DO NOTHING;
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER reservations_overrun_alert AFTER UPDATE OF status ON reservations
    FOR EACH ROW WHEN (OLD.status = 'pending' AND NEW.status IN ('committed', 'expired')
        AND (NEW.actual > NEW.amount OR NEW.global_actual > NEW.global_amount))
    EXECUTE FUNCTION reservation_overrun_alert();
