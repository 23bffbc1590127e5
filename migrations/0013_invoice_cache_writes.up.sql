-- Invoice lines show prompt-cache writes (their tokens and unit price) beside cache reads.
ALTER TABLE invoice_lines
    ADD COLUMN cache_write_per_m bigint NOT NULL DEFAULT 0,
    ADD COLUMN cache_write_tokens bigint NOT NULL DEFAULT 0;
