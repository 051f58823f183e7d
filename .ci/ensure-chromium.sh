#!/usr/bin/env bash
# Ensure a headless-capable Chromium for the browser tests of internal/ui.
#
# Idempotent: when Chromium is already there (at $TALON_CHROMIUM, or
# /usr/bin/chromium) it prints the path and exits at once. Otherwise it
# installs Debian's chromium package, which needs root (CI runs as root).
# Prints the Chromium path on stdout; everything else goes to stderr.
set -euo pipefail

bin="${TALON_CHROMIUM:-/usr/bin/chromium}"
if [ -x "$bin" ]; then
	echo "$bin"
	exit 0
fi
if [ -n "${TALON_CHROMIUM:-}" ]; then
	echo "ensure-chromium: TALON_CHROMIUM=$TALON_CHROMIUM is not an executable file" >&2
	exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "ensure-chromium: $bin is missing and installing it needs root: run as root, or install Debian's chromium package, or set TALON_CHROMIUM" >&2
	exit 1
fi
if ! command -v apt-get >/dev/null; then
	echo "ensure-chromium: $bin is missing and there is no apt-get: install Chromium and set TALON_CHROMIUM to its path" >&2
	exit 1
fi

echo "ensure-chromium: installing Debian's chromium package" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update >&2
apt-get install -y --no-install-recommends chromium >&2

if [ ! -x "$bin" ]; then
	echo "ensure-chromium: installed chromium, but $bin is still missing" >&2
	exit 1
fi
"$bin" --version >&2
echo "$bin"
