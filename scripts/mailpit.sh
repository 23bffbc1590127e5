#!/usr/bin/env bash
# scripts/mailpit.sh — print the path of the pinned mailpit (the real SMTP server the tests send
# mail to), installing it first into .data/bin when it is missing or another version.
#
#   scripts/mailpit.sh             print the path (install if needed)
#
# `make test` runs it and exports the path as YOSAN_MAILPIT for notify/mailpittest.
#
# The version is read from the binary's Go build information (`go version -m`): a binary built by
# `go install` reports "dev" to `mailpit version`, and that command also exits non-zero when it
# cannot reach GitHub to look for updates.
#
# Environment:
#   MAILPIT_VERSION  the version to install (default v1.33.1)
#
# Install messages go to stderr; stdout carries only the path.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
VERSION="${MAILPIT_VERSION:-v1.33.1}"
BIN_DIR="$ROOT/.data/bin"
BIN="$BIN_DIR/mailpit"

log() { printf 'mailpit.sh: %s\n' "$*" >&2; }
die() { printf 'mailpit.sh: error: %s\n' "$*" >&2; exit 1; }

if command -v go >/dev/null 2>&1; then
    GO=go
elif [ -x /usr/local/go/bin/go ]; then
    GO=/usr/local/go/bin/go
else
    die "go not found (neither on PATH nor at /usr/local/go/bin/go)"
fi

# installed_version prints the module version a mailpit binary was built from, or nothing.
installed_version() {
    "$GO" version -m "$1" 2>/dev/null \
        | awk '$1 == "mod" && $2 == "github.com/axllent/mailpit" { print $3; exit }' || true
}

have=""
if [ -x "$BIN" ]; then
    have="$(installed_version "$BIN")"
fi
if [ "$have" != "$VERSION" ]; then
    log "installing mailpit $VERSION into $BIN_DIR (found: ${have:-none})"
    mkdir -p "$BIN_DIR"
    GOBIN="$BIN_DIR" "$GO" install "github.com/axllent/mailpit@$VERSION" >&2 \
        || die "go install github.com/axllent/mailpit@$VERSION failed"
    have="$(installed_version "$BIN")"
    [ "$have" = "$VERSION" ] || die "$BIN reports version '${have:-unknown}' after installing $VERSION"
fi
printf '%s\n' "$BIN"
