#!/usr/bin/env bash
# scripts/node-deps.sh — make sure the OpenAI Node SDK test (e2e/node_sdk_test.go) can run:
# `node` (>= 18) and `npm` on PATH, and e2e/node/node_modules installed from its lockfile.
#
# As root, Debian's nodejs and npm packages are installed when node or npm is missing; as
# another user the script only checks, and says what to install. `npm ci` runs in e2e/node when
# node_modules is missing or older than package-lock.json (the pinned SDK version changed).
#
# `make test` runs it. Messages go to stderr; when everything is there it prints nothing and
# only runs `node --version` and two stats.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
DIR="$ROOT/e2e/node"
MIN_NODE_MAJOR=18
PACKAGES_HINT="apt-get install -y --no-install-recommends nodejs npm"

log() { printf 'node-deps.sh: %s\n' "$*" >&2; }
die() { printf 'node-deps.sh: error: %s\n' "$*" >&2; exit 1; }

# apt_install installs Debian packages, refreshing the package lists once when the first
# attempt fails (a new machine has none, or stale ones).
apt_install() {
    if [ "$(id -u)" -ne 0 ]; then
        die "missing $*; install as root: $PACKAGES_HINT (Node.js >= $MIN_NODE_MAJOR)"
    fi
    export DEBIAN_FRONTEND=noninteractive
    # Another `make test` may be installing at the same time: wait for dpkg's lock.
    local apt=(apt-get -o DPkg::Lock::Timeout=300 -y -qq)
    log "installing $* (apt-get install --no-install-recommends)"
    if ! "${apt[@]}" install --no-install-recommends "$@" >&2; then
        log "install failed; running apt-get update and retrying"
        "${apt[@]}" update >&2 || die "apt-get update failed"
        "${apt[@]}" install --no-install-recommends "$@" >&2 || die "apt-get install $* failed"
    fi
}

# Ask for both packages when either command is missing: Debian's npm depends on its nodejs, and
# a machine with NodeSource's nodejs already has npm (the package bundles it).
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    missing=()
    command -v node >/dev/null 2>&1 || missing+=(nodejs)
    command -v npm >/dev/null 2>&1 || missing+=(npm)
    apt_install "${missing[@]}"
    command -v node >/dev/null 2>&1 || die "node is still missing after installing ${missing[*]}"
    command -v npm >/dev/null 2>&1 || die "npm is still missing after installing ${missing[*]}"
fi

version="$(node --version 2>/dev/null)" || die "node --version failed"
major="${version#v}"
major="${major%%.*}"
case "$major" in
    '' | *[!0-9]*) die "node --version printed '$version', not a version" ;;
esac
if [ "$major" -lt "$MIN_NODE_MAJOR" ]; then
    die "node $version is too old: the OpenAI Node SDK test needs Node.js >= $MIN_NODE_MAJOR"
fi

# node_modules/.package-lock.json is npm's record of the last install: it is rewritten by every
# `npm ci`, so its age says whether package-lock.json changed since.
marker="$DIR/node_modules/.package-lock.json"
if [ ! -f "$marker" ] || [ "$DIR/package-lock.json" -nt "$marker" ]; then
    log "npm ci in e2e/node (node $version, npm $(npm --version 2>/dev/null || echo '?'))"
    (cd "$DIR" && npm ci --no-audit --no-fund >&2) || die "npm ci in $DIR failed"
    [ -f "$marker" ] || die "npm ci in $DIR left no node_modules/.package-lock.json"
    # Where timestamps are coarse the marker may tie with the lock: make it newer.
    touch "$marker"
fi
