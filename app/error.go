// Package app is Yosan's domain: the types (orgs, keys, budgets, reservations, models), the one
// error type, and the services that hold the rules (the gateway pipeline, cost estimation).
// It imports only the standard library; db, providers and web depend on it, never the reverse.
package app

import (
	"errors"
	"fmt"
	"time"
)

// Error codes. Each maps to one HTTP status in web's error handler.
const (
	EINVALID        = "invalid"          // 400: malformed input
	EUNAUTHORIZED   = "unauthorized"     // 401: missing or bad credential
	EFORBIDDEN      = "forbidden"        // 403: authenticated but not allowed (model not in plan)
	ENOTFOUND       = "not_found"        // 404
	ECONFLICT       = "conflict"         // 409
	ETOOLARGE       = "too_large"        // 413: body over the limit
	EBUDGET         = "budget_exceeded"  // 429: a budget node has no room
	EUPSTREAM       = "upstream_error"   // 502: the provider failed
	ETIMEOUT        = "upstream_timeout" // 504: the provider did not answer in time
	EUNAVAILABLE    = "unavailable"      // 503: the ledger (PostgreSQL) is unreachable: fail closed
	EINTERNAL       = "internal"         // 500
	EUPSTREAMCLIENT = "upstream_client"  // the provider rejected the caller's request: passed back as is
	ERATELIMIT      = "rate_limited"     // 429: every candidate is rate limited or out of quota
)

// Error is the domain error: a code, a message safe to show a client, and the wrapped cause that
// only logs see.
type Error struct {
	Code    string
	Message string
	// Param names the offending request field, when there is one (OpenAI's error.param).
	Param string
	// Node names the budget node that is full, for EBUDGET.
	Node string
	// Status and Body carry an upstream's own client error (EUPSTREAMCLIENT) to pass back.
	Status int
	Body   []byte
	// RetryAfter, when set, is sent as the Retry-After header (ERATELIMIT).
	RetryAfter time.Duration
	Err        error
}

// Error implements error. It includes the cause, so it is for logs, not clients.
func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with a client-safe formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// WrapError returns an *Error that carries cause for the logs and message for the client.
func WrapError(code string, cause error, message string) *Error {
	return &Error{Code: code, Message: message, Err: cause}
}

// ErrorCode returns the code of the first *Error in err's chain, EINTERNAL for any other error,
// and "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the client-safe message of err: the *Error's message, or a generic text
// for anything else so internal details never leak.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}

// AsError returns the first *Error in err's chain, or nil.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}
