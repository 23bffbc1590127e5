-- A key restricted to routes marked privacy: sensitive (whose candidates all run on local
-- backends): it can never send a prompt to a cloud provider.
ALTER TABLE api_keys ADD COLUMN sensitive_only boolean NOT NULL DEFAULT false;
