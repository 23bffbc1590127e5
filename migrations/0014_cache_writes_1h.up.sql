-- Anthropic prices cache writes kept for an hour (2x input) above 5-minute ones (1.25x).
ALTER TABLE model_prices ADD COLUMN cache_write_1h_per_m bigint NOT NULL DEFAULT 0 CHECK (cache_write_1h_per_m >= 0);
