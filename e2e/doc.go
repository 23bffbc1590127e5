// Package e2e holds Yosan's black-box tests: the real yosan binary, a real PostgreSQL, real
// HTTP clients (the official openai-go SDK among them) and fake upstreams that speak the
// providers' wire formats.
package e2e
