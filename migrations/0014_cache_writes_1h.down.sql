ALTER TABLE model_prices DROP COLUMN cache_write_1h_per_m;
