#!/usr/bin/env bash
# The browser the review sheet's test drives (tests/evaluation/test_review_browser.py): Debian's
# headless Chromium and a CJK font for the sheet's Chinese side. Idempotent: does nothing when
# `chromium` is on the PATH and fontconfig knows a font for Chinese (fc-list :lang=zh); else
# installs the packages `chromium` and `fonts-noto-cjk` with apt-get (needs root).
# `make test` runs it first (its stamp: BROWSER_STAMP in the Makefile).
set -euo pipefail

have_font() { command -v fc-list >/dev/null && [ -n "$(fc-list :lang=zh 2>/dev/null)" ]; }

if command -v chromium >/dev/null && have_font; then
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "browser_setup.sh: chromium or a CJK font is missing and this is not root:" \
         "run 'apt-get install -y chromium fonts-noto-cjk' as root" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends chromium fonts-noto-cjk fontconfig
command -v chromium >/dev/null || { echo "browser_setup.sh: chromium not installed" >&2; exit 1; }
have_font || { echo "browser_setup.sh: no CJK font after installing fonts-noto-cjk" >&2; exit 1; }
