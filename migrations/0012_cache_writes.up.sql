-- Prompt-cache writes (Anthropic's cache_creation_input_tokens) have their own price, and the
-- ledger row records how many input tokens were cache writes.
ALTER TABLE model_prices ADD COLUMN cache_write_per_m bigint NOT NULL DEFAULT 0 CHECK (cache_write_per_m >= 0);
ALTER TABLE reservations ADD COLUMN cache_write_tokens bigint CHECK (cache_write_tokens >= 0);
