#!/usr/bin/env bash
# scripts/run.sh — what `make run` calls: start the gateway with everything it needs.
#
# Uses $DATABASE_URL if set, else the private PostgreSQL cluster (scripts/pg.sh url yosan).
# Generates once, and keeps in .data/ (mode 600), an admin token and a demo API key unless
# YOSAN_ADMIN_TOKEN / YOSAN_DEMO_KEY are set. Builds ./cmd/yosan into .data/bin/yosan and execs
#   yosan serve
# with YOSAN_DEMO=1. Other settings (YOSAN_ADDR, YOSAN_CONFIG, ...) pass through from the
# environment. Extra arguments are passed to `yosan serve`.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$ROOT"

log() { printf 'run.sh: %s\n' "$*" >&2; }
die() { printf 'run.sh: error: %s\n' "$*" >&2; exit 1; }

if ! command -v go >/dev/null 2>&1; then
    [ -x /usr/local/go/bin/go ] || die "go is not on PATH and /usr/local/go/bin/go does not exist"
    export PATH="$PATH:/usr/local/go/bin"
fi

mkdir -p .data
chmod a+x .data 2>/dev/null || true   # traversable (PostgreSQL's user needs it), files stay 600

# random_hex N: N random bytes as 2N lowercase hex characters.
random_hex() {
    od -An -vtx1 -N"$1" /dev/urandom | tr -d ' \n'
}

# secret FILE GENERATOR...: print the secret stored in FILE, creating it (mode 600) if missing.
secret() {
    local file="$1" value
    shift
    if [ ! -s "$file" ]; then
        value="$("$@")"
        (umask 077 && printf '%s\n' "$value" >"$file.tmp.$$") && mv -f "$file.tmp.$$" "$file"
        log "generated $file"
    fi
    chmod 600 "$file"
    head -n1 "$file" | tr -d '\r\n'
}

demo_key() { printf 'ysk-demo-%s' "$(random_hex 16)"; }

if [ -z "${DATABASE_URL:-}" ]; then
    DATABASE_URL="$(scripts/pg.sh url yosan)" || die "could not get a database (scripts/pg.sh url yosan)"
fi
if [ -z "${YOSAN_ADMIN_TOKEN:-}" ]; then
    YOSAN_ADMIN_TOKEN="$(secret .data/admin_token random_hex 32)"
fi
if [ -z "${YOSAN_DEMO_KEY:-}" ]; then
    YOSAN_DEMO_KEY="$(secret .data/demo_key demo_key)"
fi
export DATABASE_URL YOSAN_ADMIN_TOKEN YOSAN_DEMO_KEY
export YOSAN_DEMO="${YOSAN_DEMO:-1}"

if [ -n "${YOSAN_RUN_DRY:-}" ]; then   # for testing this script: show what would run
    printf 'DATABASE_URL=%s\nYOSAN_ADMIN_TOKEN=%s\nYOSAN_DEMO_KEY=%s\nYOSAN_DEMO=%s\n' \
        "$DATABASE_URL" "$YOSAN_ADMIN_TOKEN" "$YOSAN_DEMO_KEY" "$YOSAN_DEMO"
    exit 0
fi

log "building ./cmd/yosan -> .data/bin/yosan"
go build -o .data/bin/yosan ./cmd/yosan || die "go build ./cmd/yosan failed"

exec .data/bin/yosan serve "$@"
