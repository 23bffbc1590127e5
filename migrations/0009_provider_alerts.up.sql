-- A provider cooldown that needs a human (no balance, plan expired, revoked key) alerts the
-- operator, through the same outbox as budget alerts.
ALTER TABLE alert_events DROP CONSTRAINT alert_events_kind_check;
ALTER TABLE alert_events ADD CONSTRAINT alert_events_kind_check
    CHECK (kind IN ('budget.threshold_crossed', 'budget.overrun', 'alert.test', 'provider.manual_action'));
ALTER TABLE alert_events
    ADD COLUMN provider text,
    ADD COLUMN code     text,
    ADD COLUMN message  text,
    ADD COLUMN reset_at timestamptz;
