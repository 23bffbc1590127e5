#!/usr/bin/env bash
# scripts/pdf-deps.sh — make sure what the invoice PDF and its tests need is installed:
# a Japanese TrueType font (IPAexGothic, Debian's fonts-ipaexfont-gothic; IPAGothic from
# fonts-ipafont-gothic will do, or any .ttf named by YOSAN_PDF_FONT) and poppler-utils'
# pdftotext and pdfinfo, with which billing/pdf_test.go reads the PDFs back.
#
#   scripts/pdf-deps.sh     install what is missing (as root, with apt-get), else say what to
#                           install and exit 1
#
# `make test` runs it. Quiet when everything is there; messages go to stderr.
set -euo pipefail

log() { printf 'pdf-deps.sh: %s\n' "$*" >&2; }
die() { printf 'pdf-deps.sh: error: %s\n' "$*" >&2; exit 1; }

PACKAGES=(fonts-ipaexfont-gothic poppler-utils)

# The paths billing.FindJapaneseFont looks at.
have_font() {
    if [ -n "${YOSAN_PDF_FONT:-}" ]; then
        [ -f "$YOSAN_PDF_FONT" ] || die "YOSAN_PDF_FONT=$YOSAN_PDF_FONT is not a file"
        return 0
    fi
    [ -f /usr/share/fonts/opentype/ipaexfont-gothic/ipaexg.ttf ] ||
        [ -f /usr/share/fonts/opentype/ipafont-gothic/ipag.ttf ]
}

have_tools() {
    command -v pdftotext >/dev/null 2>&1 && command -v pdfinfo >/dev/null 2>&1
}

if have_font && have_tools; then
    exit 0
fi

missing=()
have_font || missing+=("a Japanese font (fonts-ipaexfont-gothic)")
have_tools || missing+=("pdftotext/pdfinfo (poppler-utils)")

if [ "$(id -u)" -ne 0 ]; then
    die "missing ${missing[*]}: install them with
    sudo apt-get install -y --no-install-recommends ${PACKAGES[*]}
(or set YOSAN_PDF_FONT to a Japanese TrueType .ttf font)"
fi
command -v apt-get >/dev/null 2>&1 ||
    die "missing ${missing[*]}, and there is no apt-get: install IPAexGothic and poppler's pdftotext/pdfinfo, or set YOSAN_PDF_FONT"

log "installing ${PACKAGES[*]} (missing ${missing[*]})"
export DEBIAN_FRONTEND=noninteractive
apt_install() { apt-get install -y --no-install-recommends "${PACKAGES[@]}" >/dev/null; }
if ! apt_install 2>/dev/null; then
    # A fresh machine (or container) has no package lists yet.
    log "apt-get install failed; running apt-get update and trying again"
    apt-get update >/dev/null || die "apt-get update failed"
    apt_install || die "apt-get install -y --no-install-recommends ${PACKAGES[*]} failed"
fi
have_font || die "installed ${PACKAGES[*]} but found no font at the known paths"
have_tools || die "installed ${PACKAGES[*]} but pdftotext/pdfinfo are not on PATH"
