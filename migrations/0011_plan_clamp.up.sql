-- A plan may let the gateway lower max_tokens to what the budget still holds (issue 3, item 7).
ALTER TABLE plans ADD COLUMN clamp_max_tokens boolean NOT NULL DEFAULT false;
