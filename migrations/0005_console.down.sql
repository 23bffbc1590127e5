DROP TABLE audit_log;
DROP FUNCTION audit_log_append_only();
DROP TABLE settings;
DROP TABLE login_attempts;
DROP TABLE sessions;
DROP TABLE memberships;
DROP TABLE users;
