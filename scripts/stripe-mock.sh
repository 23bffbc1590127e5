#!/usr/bin/env bash
# scripts/stripe-mock.sh — print the path of the pinned stripe-mock (Stripe's official mock API
# server: it validates requests against Stripe's OpenAPI spec and answers with canned objects),
# installing it first into .data/bin when it is missing or another version.
#
#   scripts/stripe-mock.sh         print the path (install if needed)
#
# `make test` runs it and exports the path as YOSAN_STRIPE_MOCK for billing/stripemocktest.
#
# The version is read from the binary's Go build information (`go version -m`): a binary built by
# `go install` reports "master" to `stripe-mock -version`.
#
# Environment:
#   STRIPE_MOCK_VERSION  the version to install (default v0.203.0)
#
# Install messages go to stderr; stdout carries only the path.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
VERSION="${STRIPE_MOCK_VERSION:-v0.203.0}"
BIN_DIR="$ROOT/.data/bin"
BIN="$BIN_DIR/stripe-mock"

log() { printf 'stripe-mock.sh: %s\n' "$*" >&2; }
die() { printf 'stripe-mock.sh: error: %s\n' "$*" >&2; exit 1; }

if command -v go >/dev/null 2>&1; then
    GO=go
elif [ -x /usr/local/go/bin/go ]; then
    GO=/usr/local/go/bin/go
else
    die "go not found (neither on PATH nor at /usr/local/go/bin/go)"
fi

# installed_version prints the module version a stripe-mock binary was built from, or nothing.
installed_version() {
    "$GO" version -m "$1" 2>/dev/null \
        | awk '$1 == "mod" && $2 == "github.com/stripe/stripe-mock" { print $3; exit }' || true
}

have=""
if [ -x "$BIN" ]; then
    have="$(installed_version "$BIN")"
fi
if [ "$have" != "$VERSION" ]; then
    log "installing stripe-mock $VERSION into $BIN_DIR (found: ${have:-none})"
    mkdir -p "$BIN_DIR"
    GOBIN="$BIN_DIR" "$GO" install "github.com/stripe/stripe-mock@$VERSION" >&2 \
        || die "go install github.com/stripe/stripe-mock@$VERSION failed"
    have="$(installed_version "$BIN")"
    [ "$have" = "$VERSION" ] || die "$BIN reports version '${have:-unknown}' after installing $VERSION"
fi
printf '%s\n' "$BIN"
