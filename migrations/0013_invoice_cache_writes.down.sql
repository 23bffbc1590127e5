ALTER TABLE invoice_lines DROP COLUMN cache_write_tokens, DROP COLUMN cache_write_per_m;
