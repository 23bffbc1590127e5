-- A failed attempt's ledger row says why it failed: the class the gateway gave the provider's
-- error (rate_limited, backend_error, ...) and the provider's own code, for the explorer.
ALTER TABLE reservations ADD COLUMN error_class text, ADD COLUMN error_code text;
