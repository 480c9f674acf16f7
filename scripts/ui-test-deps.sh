#!/usr/bin/env bash
# Installs what the turns page browser test (e2e/ui_test.go) needs and prints its export line:
#   CCTRACE_CHROMIUM_BIN   Debian's chromium (apt package chromium), driven headless by chromedp
# A CCTRACE_CHROMIUM_BIN that already names an executable is kept. Only Debian's package is used:
# no browser is downloaded from anywhere else.
#
#   eval "$(bash scripts/ui-test-deps.sh)"
set -euo pipefail

log() { printf '[ui-test-deps] %s\n' "$*" >&2; }

if [ -n "${CCTRACE_CHROMIUM_BIN:-}" ] && [ -x "$CCTRACE_CHROMIUM_BIN" ]; then
	printf 'export CCTRACE_CHROMIUM_BIN=%q\n' "$CCTRACE_CHROMIUM_BIN"
	exit 0
fi

if ! command -v chromium >/dev/null 2>&1; then
	if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
		log "chromium is missing and cannot be installed here (needs root and apt-get): apt-get install chromium"
		exit 1
	fi
	log "installing chromium from Debian"
	start=$(date +%s)
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	# fonts-dejavu-core gives the screenshots legible text.
	apt-get install -y -qq chromium fonts-dejavu-core >&2
	log "chromium installed in $(($(date +%s) - start))s"
fi

bin=$(command -v chromium)
log "$("$bin" --version 2>/dev/null || echo "chromium at $bin")"
printf 'export CCTRACE_CHROMIUM_BIN=%q\n' "$bin"
