ALTER TABLE reservations DROP COLUMN cache_write_tokens;
ALTER TABLE model_prices DROP COLUMN cache_write_per_m;
