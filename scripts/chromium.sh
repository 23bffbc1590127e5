#!/usr/bin/env bash
# scripts/chromium.sh — print the path of the Chromium binary that the browser tests
# (e2e/browser_test.go) drive, installing Debian's chromium first when it is missing.
#
# It also makes sure a Japanese font is installed (fonts-noto-cjk): without one, Chromium
# draws the console's Japanese text as empty boxes in screenshots.
#
# `make test` runs it and exports the path as YOSAN_CHROMIUM. Installing needs root; as
# another user the script only checks, and says what to install.
#
# Install messages go to stderr; stdout carries only the path. When everything is there it
# only runs `chromium --version` and `fc-list` (well under a second).
set -euo pipefail

BIN=/usr/bin/chromium
PACKAGES_HINT="apt-get install -y --no-install-recommends chromium fonts-noto-cjk"

log() { printf 'chromium.sh: %s\n' "$*" >&2; }
die() { printf 'chromium.sh: error: %s\n' "$*" >&2; exit 1; }

# apt_install installs Debian packages, refreshing the package lists once when the first
# attempt fails (a new machine has none, or stale ones).
apt_install() {
    if [ "$(id -u)" -ne 0 ]; then
        die "missing $*; install as root: $PACKAGES_HINT (or set YOSAN_CHROMIUM to a Chromium binary)"
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

# have_japanese_font reports whether fontconfig knows a font that covers Japanese.
have_japanese_font() {
    if command -v fc-list >/dev/null 2>&1; then
        [ -n "$(fc-list :lang=ja family 2>/dev/null | head -n1)" ]
        return
    fi
    # fc-list comes with the fontconfig package, which chromium does not need.
    dpkg-query -W -f='${Status}' fonts-noto-cjk 2>/dev/null | grep -q 'install ok installed'
}

missing=()
[ -x "$BIN" ] || missing+=(chromium)
have_japanese_font || missing+=(fonts-noto-cjk)
if [ "${#missing[@]}" -gt 0 ]; then
    apt_install "${missing[@]}"
    [ -x "$BIN" ] || die "$BIN is still missing after installing chromium"
    have_japanese_font || die "no Japanese font after installing fonts-noto-cjk (fc-list :lang=ja is empty)"
fi

# Debian's /usr/bin/chromium is a shell wrapper whose /etc/chromium.d snippets print noise on
# stderr; only the exit status and the version line matter here.
version="$("$BIN" --version 2>/dev/null)" || die "$BIN --version failed: $("$BIN" --version 2>&1 | tail -n3)"
case "$version" in
    Chromium*) ;;
    *) die "$BIN --version printed '$version', not a Chromium version" ;;
esac
if [ "${#missing[@]}" -gt 0 ]; then
    log "installed: $version"
fi
printf '%s\n' "$BIN"
