ALTER TABLE api_keys DROP COLUMN sensitive_only;
