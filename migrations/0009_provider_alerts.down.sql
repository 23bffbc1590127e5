DELETE FROM alert_deliveries WHERE event_id IN (SELECT id FROM alert_events WHERE kind = 'provider.manual_action');
DELETE FROM alert_events WHERE kind = 'provider.manual_action';
ALTER TABLE alert_events DROP COLUMN reset_at, DROP COLUMN message, DROP COLUMN code, DROP COLUMN provider;
ALTER TABLE alert_events DROP CONSTRAINT alert_events_kind_check;
ALTER TABLE alert_events ADD CONSTRAINT alert_events_kind_check
    CHECK (kind IN ('budget.threshold_crossed', 'budget.overrun', 'alert.test'));
