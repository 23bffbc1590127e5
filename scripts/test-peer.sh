#!/usr/bin/env bash
# scripts/test-peer.sh — print the path of a pinned test peer, installing it first into
# .data/bin with `go install` when it is missing or another version.
#
#   scripts/test-peer.sh mailpit       the real SMTP server the alert tests send mail to
#   scripts/test-peer.sh stripe-mock   Stripe's official mock API server (validates requests
#                                      against Stripe's OpenAPI spec, answers canned objects)
#
# `make test` runs it and exports the paths as YOSAN_MAILPIT and YOSAN_STRIPE_MOCK for
# notify/mailpittest and billing/stripemocktest.
#
# The version is read from the binary's Go build information (`go version -m`): binaries built
# by `go install` report "dev" or "master" as their own version.
#
# Environment:
#   MAILPIT_VERSION      default v1.33.1
#   STRIPE_MOCK_VERSION  default v0.203.0
#
# Install messages go to stderr; stdout carries only the path.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
BIN_DIR="$ROOT/.data/bin"
NAME="${1:-}"

log() { printf 'test-peer.sh: %s\n' "$*" >&2; }
die() { printf 'test-peer.sh: error: %s\n' "$*" >&2; exit 1; }

case "$NAME" in
    mailpit) MODULE=github.com/axllent/mailpit; VERSION="${MAILPIT_VERSION:-v1.33.1}" ;;
    stripe-mock) MODULE=github.com/stripe/stripe-mock; VERSION="${STRIPE_MOCK_VERSION:-v0.203.0}" ;;
    *) die "usage: scripts/test-peer.sh mailpit|stripe-mock" ;;
esac
BIN="$BIN_DIR/$NAME"

if command -v go >/dev/null 2>&1; then
    GO=go
elif [ -x /usr/local/go/bin/go ]; then
    GO=/usr/local/go/bin/go
else
    die "go not found (neither on PATH nor at /usr/local/go/bin/go)"
fi

# installed_version prints the module version the binary was built from, or nothing.
installed_version() {
    "$GO" version -m "$1" 2>/dev/null \
        | awk -v m="$MODULE" '$1 == "mod" && $2 == m { print $3; exit }' || true
}

have=""
if [ -x "$BIN" ]; then
    have="$(installed_version "$BIN")"
fi
if [ "$have" != "$VERSION" ]; then
    log "installing $NAME $VERSION into $BIN_DIR (found: ${have:-none})"
    mkdir -p "$BIN_DIR"
    GOBIN="$BIN_DIR" "$GO" install "$MODULE@$VERSION" >&2 || die "go install $MODULE@$VERSION failed"
    have="$(installed_version "$BIN")"
    [ "$have" = "$VERSION" ] || die "$BIN reports version '${have:-unknown}' after installing $VERSION"
fi
printf '%s\n' "$BIN"
