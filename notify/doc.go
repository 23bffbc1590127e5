// Package notify renders alert messages and sends them: email over SMTP and webhooks signed in
// the Standard Webhooks scheme. The delivery worker (worker.go) takes them from the outbox in
// PostgreSQL.
package notify
