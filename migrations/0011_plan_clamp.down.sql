ALTER TABLE plans DROP COLUMN clamp_max_tokens;
