-- The console's keys page shows each key's last use: max(created_at) of its reservations, read
-- with one index probe per key instead of a scan of the org's ledger.
CREATE INDEX reservations_key_created ON reservations (key_id, created_at DESC);
